//! [`FilesystemBackend`]: a real directory, and nothing outside it.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use cairn_core::BoxFuture;
use ignore::WalkBuilder;

use super::search::{Grep, PathGlob};
use super::{Backend, BackendRuntime, FileInfo, GrepQuery, GrepResult, KeyedLocks};
use crate::error::BackendError;
use crate::path::{join, normalize};

/// Most paths a glob collects before it stops walking.
const MAX_GLOB_RESULTS: usize = 10_000;

/// Files in a directory of the host, the root. The virtual path `/x/y` is `<root>/x/y`.
///
/// Nothing outside the root is reachable: `..` cannot climb above `/`, `~` and Windows paths
/// are refused, an absolute path is always taken as virtual (`/etc/passwd` is
/// `<root>/etc/passwd`), and every existing path component is resolved (symlinks included) and
/// must stay inside the canonical root; a symlink that leads out, or dangles, is refused.
/// Walks (`glob`, `grep`) skip `.git`, honour `.gitignore`/`.ignore` files and do not follow
/// symlinks out of the root. Files over [`max_file_size`](Self::max_file_size) (10 MB) are not
/// read, and grep skips them.
///
/// **Only regular files** are read, written or edited: a FIFO, a socket or a device is refused
/// ([`BackendError::NotRegularFile`]) before it is opened (a FIFO would block a read forever),
/// and files are opened non-blocking with the type checked again on the open handle.
///
/// **Writes and edits are atomic.** The new content goes to a temporary file (`.cairn-*`) in
/// the same directory, is flushed to disk (`fsync`), and is renamed over the target, which
/// keeps the original's permission bits (and, when the process may, its owner). On any failure
/// (a full disk, a quota, an I/O error, a kill) the original stays byte-for-byte as it was and
/// the temporary file is removed. A new file is created with the same no-clobber rename, so a
/// write never replaces a file that appeared meanwhile. Extended attributes and ACLs of an
/// edited file are not carried over, and its directory must be writable.
///
/// **Deletes** remove a file (or a symlink itself, never its target) with one unlink, and a
/// directory by renaming it into a hidden temporary directory beside it and then removing
/// that, so it vanishes from its path at once. The root itself cannot be deleted.
///
/// **Edits of one file are serialized**: the read-modify-write of [`Backend::edit`] (and the
/// create of [`Backend::write`]) holds a lock per canonical host path, shared by every clone of
/// this backend, so parallel edits of one file each land (none is lost). Other processes
/// editing the same file are not locked out.
///
/// **Hard links.** A hard link inside the root to a file outside it is not visible as such (it
/// is simply a second name of the same file). Writes and edits refuse any file with more than
/// one link ([`BackendError::HardLinked`]): they would otherwise change, or silently detach
/// from, a file that may live outside the root. *Reading* such a file is allowed, because hard
/// links are common inside projects (package-manager stores, `cp -al` trees) and creating one
/// to an outside file already takes a command the user approved or a hostile archive: the
/// jail does not keep such a file's content from the model.
///
/// The checks run before each operation; a process that swaps a directory for a symlink in
/// between (a race) is outside this backend's threat model.
///
/// ```
/// use cairn_deep::backend::{Backend, BackendRuntime, FilesystemBackend};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = std::env::temp_dir().join(format!("cairn-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let fs = FilesystemBackend::new(&dir).unwrap();
/// assert!(fs.resolve("/../outside").is_err());
/// assert!(fs.resolve("/etc/passwd").unwrap().starts_with(fs.root()));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct FilesystemBackend {
    root: PathBuf,
    max_file_bytes: u64,
    /// Per-file locks for read-modify-write, shared by clones.
    locks: KeyedLocks<PathBuf>,
}

impl FilesystemBackend {
    /// A backend rooted at `root`, which must be an existing directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, BackendError> {
        let root = std::fs::canonicalize(root.as_ref())?;
        if !root.is_dir() {
            return Err(BackendError::NotADirectory(root.display().to_string()));
        }
        Ok(FilesystemBackend {
            root,
            max_file_bytes: 10 * 1024 * 1024,
            locks: KeyedLocks::default(),
        })
    }

    /// Files larger than this are not read (default 10 MB).
    pub fn max_file_size(mut self, bytes: u64) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The host path of virtual `path`, checked to lie inside the root. Existing components
    /// are canonicalized; components that do not exist yet are appended as they are (they
    /// contain no `..`).
    pub fn resolve(&self, path: &str) -> Result<PathBuf, BackendError> {
        let norm = normalize(path)?;
        let mut cur = self.root.clone();
        let mut missing = false;
        for seg in norm.split('/').filter(|s| !s.is_empty()) {
            let next = cur.join(seg);
            if missing {
                cur = next;
                continue;
            }
            match std::fs::symlink_metadata(&next) {
                Ok(md) if md.file_type().is_symlink() => {
                    let target = std::fs::canonicalize(&next).map_err(|_| {
                        BackendError::invalid_path(
                            path,
                            "it goes through a broken symlink. Use another path",
                        )
                    })?;
                    if !target.starts_with(&self.root) {
                        return Err(BackendError::invalid_path(
                            path,
                            "it goes through a symlink that leads outside the workspace. Use another path",
                        ));
                    }
                    cur = target;
                }
                Ok(_) => cur = next,
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    missing = true;
                    cur = next;
                }
                Err(e) if e.kind() == ErrorKind::NotADirectory => {
                    return Err(BackendError::NotADirectory(
                        crate::path::parent(&norm).into(),
                    ));
                }
                Err(e) => return Err(BackendError::Io(e)),
            }
        }
        // Defence in depth: the result never has `..` and must be under the root.
        if !cur.starts_with(&self.root) || cur.components().any(|c| c == Component::ParentDir) {
            return Err(BackendError::invalid_path(path, "it leaves the workspace"));
        }
        Ok(cur)
    }

    /// The virtual path of a host path inside the root.
    fn to_virtual(&self, host: &Path) -> String {
        let rel = host.strip_prefix(&self.root).unwrap_or(host);
        let parts: Vec<String> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        format!("/{}", parts.join("/"))
    }

    fn read_checked(&self, path: &str) -> Result<String, BackendError> {
        let norm = normalize(path)?;
        let host = self.resolve(&norm)?;
        let (file, _) = self.open_regular(&norm, &host)?;
        self.read_open(&norm, file)
    }

    /// Opens existing file `host` (virtual `norm`) for reading, refusing anything that is not
    /// a regular file before opening it, and again on the open handle. Returns the file and
    /// the handle's metadata.
    fn open_regular(
        &self,
        norm: &str,
        host: &Path,
    ) -> Result<(std::fs::File, std::fs::Metadata), BackendError> {
        let md = match std::fs::metadata(host) {
            Ok(md) => md,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(BackendError::NotFound(norm.to_owned()));
            }
            Err(e) => return Err(e.into()),
        };
        if md.is_dir() {
            return Err(BackendError::IsDirectory(norm.to_owned()));
        }
        check_regular(norm, &md)?;
        if md.len() > self.max_file_bytes {
            return Err(BackendError::TooLarge {
                path: norm.to_owned(),
                size: md.len(),
                max: self.max_file_bytes,
            });
        }
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // Should the file be swapped for a FIFO after the check, opening does not block.
            opts.custom_flags(nonblock_flag());
        }
        let file = opts.open(host).map_err(|e| match e.kind() {
            ErrorKind::NotFound => BackendError::NotFound(norm.to_owned()),
            _ => BackendError::Io(e),
        })?;
        let md = file.metadata()?;
        check_regular(norm, &md)?;
        Ok((file, md))
    }

    /// Reads an opened regular file as text, at most `max_file_bytes`.
    fn read_open(&self, norm: &str, file: std::fs::File) -> Result<String, BackendError> {
        use std::io::Read;
        let mut bytes = Vec::new();
        file.take(self.max_file_bytes.saturating_add(1))
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > self.max_file_bytes {
            return Err(BackendError::TooLarge {
                path: norm.to_owned(),
                size: bytes.len() as u64,
                max: self.max_file_bytes,
            });
        }
        if bytes.iter().take(8192).any(|b| *b == 0) {
            return Err(BackendError::Binary(norm.to_owned()));
        }
        String::from_utf8(bytes).map_err(|_| BackendError::Binary(norm.to_owned()))
    }

    fn ls_sync(&self, path: &str) -> Result<Vec<FileInfo>, BackendError> {
        let norm = normalize(path)?;
        let host = self.resolve(&norm)?;
        let md = match std::fs::metadata(&host) {
            Ok(md) => md,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(BackendError::NotFound(norm)),
            Err(e) => return Err(e.into()),
        };
        if !md.is_dir() {
            return Err(BackendError::NotADirectory(norm));
        }
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&host)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let vpath = join(&norm, &name);
            // Follows symlinks for the kind; a dangling one shows as a file.
            match std::fs::metadata(entry.path()) {
                Ok(m) if m.is_dir() => out.push(FileInfo::dir(vpath)),
                Ok(m) => out.push(FileInfo::file(vpath, m.len())),
                Err(_) => out.push(FileInfo::file(vpath, 0)),
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn write_sync(&self, path: &str, content: &str) -> Result<(), BackendError> {
        let norm = normalize(path)?;
        if norm == "/" {
            return Err(BackendError::IsDirectory(norm));
        }
        let host = self.resolve(&norm)?;
        if let Ok(md) = std::fs::symlink_metadata(&host) {
            return Err(if md.is_dir() {
                BackendError::IsDirectory(norm)
            } else {
                BackendError::AlreadyExists(norm)
            });
        }
        let parent = host
            .parent()
            .ok_or_else(|| BackendError::IsDirectory(norm.clone()))?;
        std::fs::create_dir_all(parent).map_err(|e| match e.kind() {
            ErrorKind::NotADirectory | ErrorKind::AlreadyExists => {
                BackendError::NotADirectory(crate::path::parent(&norm).to_owned())
            }
            _ => BackendError::Io(e),
        })?;
        // Mode 0666 as `open` would give a new file; the umask applies.
        let tmp = temp_file_in(parent, Some(0o666))?;
        let tmp = fill_and_sync(tmp, content.as_bytes())?;
        // The no-clobber rename fails on anything already there, a symlink included; the
        // temporary file is removed with the error.
        tmp.persist_noclobber(&host)
            .map_err(|e| match e.error.kind() {
                ErrorKind::AlreadyExists => BackendError::AlreadyExists(norm.clone()),
                _ => BackendError::Io(e.error),
            })?;
        sync_dir(parent);
        Ok(())
    }

    fn edit_sync(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<usize, BackendError> {
        let norm = normalize(path)?;
        let host = self.resolve(&norm)?;
        let (file, md) = self.open_regular(&norm, &host)?;
        check_single_link(&norm, &md)?;
        let content = self.read_open(&norm, file)?;
        let (updated, n) = crate::format::replace(&norm, &content, old, new, replace_all)?;
        replace_atomically(&host, &md, updated.as_bytes())?;
        Ok(n)
    }

    fn delete_sync(&self, path: &str) -> Result<(), BackendError> {
        let norm = normalize(path)?;
        if norm == "/" {
            return Err(super::virtual_fs::root_delete_refused());
        }
        // The parent is resolved (symlinks included) and jailed; the last component is taken
        // as it is, so deleting a symlink removes the link, never what it points to.
        let parent = self.resolve(crate::path::parent(&norm))?;
        let name = norm.rsplit('/').next().unwrap_or_default();
        let host = parent.join(name);
        if name.is_empty() || !host.starts_with(&self.root) || host == self.root {
            return Err(BackendError::invalid_path(path, "it leaves the workspace"));
        }
        let md = match std::fs::symlink_metadata(&host) {
            Ok(md) => md,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Err(BackendError::NotFound(norm));
            }
            Err(e) => return Err(e.into()),
        };
        if !md.is_dir() {
            // One unlink: atomic.
            std::fs::remove_file(&host).map_err(|e| match e.kind() {
                ErrorKind::NotFound => BackendError::NotFound(norm.clone()),
                _ => BackendError::Io(e),
            })?;
            sync_dir(&parent);
            return Ok(());
        }
        // A directory is first renamed into a hidden temporary directory beside it, so it
        // disappears from its path at once (never half deleted there), then removed. std's
        // `remove_dir_all` does not follow symlinks, so nothing outside the tree is touched.
        let trash = tempfile::Builder::new()
            .prefix(".cairn-delete-")
            .tempdir_in(&parent)?;
        match std::fs::rename(&host, trash.path().join(name)) {
            Ok(()) => {
                sync_dir(&parent);
                let left = self.to_virtual(trash.path());
                trash.close().map_err(|e| {
                    BackendError::Other(format!(
                        "{norm} was removed, but some of its files could not be deleted ({e}); they are left in {left}"
                    ))
                })
            }
            // Not renamable (a mount point, say): removed in place.
            Err(_) => {
                drop(trash);
                std::fs::remove_dir_all(&host)?;
                sync_dir(&parent);
                Ok(())
            }
        }
    }

    /// The lock of the file at virtual `path` (keyed by its canonical host path).
    async fn lock_file(
        &self,
        path: &str,
    ) -> Result<tokio::sync::OwnedMutexGuard<()>, BackendError> {
        let (me, p) = (self.clone(), path.to_owned());
        let host = blocking(move || me.resolve(&p)).await?;
        Ok(self.locks.lock(host).await)
    }

    fn walker(&self, dir: &Path) -> ignore::Walk {
        WalkBuilder::new(dir)
            .standard_filters(false)
            .git_ignore(true)
            .ignore(true)
            .require_git(false)
            .parents(false)
            .follow_links(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(|e| e.file_name() != ".git")
            .build()
    }

    /// The files of a walk: regular files, and symlinks to files inside the root.
    fn walk_files(&self, dir: &Path) -> impl Iterator<Item = PathBuf> + '_ {
        self.walker(dir).filter_map(Result::ok).filter_map(|e| {
            let ft = e.file_type()?;
            if ft.is_file() {
                Some(e.into_path())
            } else if ft.is_symlink() {
                let target = std::fs::canonicalize(e.path()).ok()?;
                (target.starts_with(&self.root) && target.is_file()).then(|| e.into_path())
            } else {
                None
            }
        })
    }

    fn dir_checked(&self, path: &str) -> Result<(String, PathBuf), BackendError> {
        let norm = normalize(path)?;
        let host = self.resolve(&norm)?;
        match std::fs::metadata(&host) {
            Ok(md) if md.is_dir() => Ok((norm, host)),
            Ok(_) => Err(BackendError::NotADirectory(norm)),
            Err(e) if e.kind() == ErrorKind::NotFound => Err(BackendError::NotFound(norm)),
            Err(e) => Err(e.into()),
        }
    }

    fn glob_sync(&self, pattern: &str, path: &str) -> Result<Vec<String>, BackendError> {
        let glob = PathGlob::new(pattern)?;
        let (_, host) = self.dir_checked(path)?;
        let mut out = Vec::new();
        for file in self.walk_files(&host) {
            let rel = rel_string(&file, &host);
            if glob.is_match(&rel) {
                out.push(self.to_virtual(&file));
                if out.len() >= MAX_GLOB_RESULTS {
                    break;
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn grep_sync(&self, query: &GrepQuery) -> Result<GrepResult, BackendError> {
        let filter = query.glob.as_deref().map(PathGlob::new).transpose()?;
        let mut grep = Grep::new(query)?;
        let norm = normalize(query.path.as_deref().unwrap_or("/"))?;
        let host = self.resolve(&norm)?;
        let md = match std::fs::metadata(&host) {
            Ok(md) => md,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(BackendError::NotFound(norm)),
            Err(e) => return Err(e.into()),
        };
        if md.is_file() {
            let name = norm.rsplit('/').next().unwrap_or("");
            if filter.as_ref().is_none_or(|g| g.is_match(name)) && md.len() <= self.max_file_bytes {
                grep.search_file(&norm, &host)?;
            }
            return Ok(grep.finish());
        }
        for file in self.walk_files(&host) {
            if grep.is_full() {
                break;
            }
            let rel = rel_string(&file, &host);
            if filter.as_ref().is_some_and(|g| !g.is_match(&rel)) {
                continue;
            }
            if std::fs::metadata(&file)
                .map(|m| m.len() > self.max_file_bytes)
                .unwrap_or(true)
            {
                continue;
            }
            // An unreadable file is skipped, not fatal.
            let _ = grep.search_file(&self.to_virtual(&file), &file);
        }
        Ok(grep.finish())
    }
}

fn rel_string(file: &Path, base: &Path) -> String {
    let rel = file.strip_prefix(base).unwrap_or(file);
    rel.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Refuses metadata of anything but a regular file (directories are handled by the caller).
fn check_regular(norm: &str, md: &std::fs::Metadata) -> Result<(), BackendError> {
    if md.is_file() {
        return Ok(());
    }
    if md.is_dir() {
        return Err(BackendError::IsDirectory(norm.to_owned()));
    }
    Err(BackendError::NotRegularFile {
        path: norm.to_owned(),
        kind: kind_name(&md.file_type()).to_owned(),
    })
}

/// What a non-regular file is, in words.
fn kind_name(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "FIFO (named pipe)";
        }
        if ft.is_socket() {
            return "socket";
        }
        if ft.is_block_device() || ft.is_char_device() {
            return "device";
        }
    }
    if ft.is_symlink() {
        return "symlink";
    }
    "special file"
}

/// Refuses a write through a file with several hard links (one may be outside the root).
fn check_single_link(norm: &str, md: &std::fs::Metadata) -> Result<(), BackendError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if md.nlink() > 1 {
            return Err(BackendError::HardLinked {
                path: norm.to_owned(),
                links: md.nlink(),
            });
        }
    }
    #[cfg(not(unix))]
    let _ = (norm, md);
    Ok(())
}

/// `O_NONBLOCK`, for opening without blocking on a FIFO.
#[cfg(unix)]
fn nonblock_flag() -> i32 {
    rustix::fs::OFlags::NONBLOCK.bits() as i32
}

/// A new temporary file `.cairn-*.tmp` in `dir` (so the final rename stays on one
/// filesystem), created with `mode` (umask applied) or `0600`. It is removed when dropped
/// unless persisted.
fn temp_file_in(dir: &Path, mode: Option<u32>) -> Result<tempfile::NamedTempFile, BackendError> {
    let mut b = tempfile::Builder::new();
    b.prefix(".cairn-").suffix(".tmp");
    #[cfg(unix)]
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = mode;
    Ok(b.tempfile_in(dir)?)
}

/// Writes `bytes` to `tmp` and flushes them to disk. On an error `tmp` is dropped (removed).
fn fill_and_sync(
    mut tmp: tempfile::NamedTempFile,
    bytes: &[u8],
) -> Result<tempfile::NamedTempFile, BackendError> {
    use std::io::Write;
    tmp.write_all(bytes)?;
    tmp.flush()?;
    tmp.as_file().sync_all()?;
    Ok(tmp)
}

/// Replaces existing file `host` (whose metadata is `md`) by `bytes`: temporary file in the
/// same directory, same permissions (and owner when allowed), fsync, rename over. On failure
/// `host` is untouched and the temporary file removed.
fn replace_atomically(
    host: &Path,
    md: &std::fs::Metadata,
    bytes: &[u8],
) -> Result<(), BackendError> {
    let dir = host
        .parent()
        .ok_or_else(|| BackendError::Other(format!("{} has no directory", host.display())))?;
    let tmp = temp_file_in(dir, None)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // Best effort: only a privileged process may give a file away; ownership otherwise
        // becomes the editor's, as with any editor that saves by renaming.
        if let Ok(now) = tmp.as_file().metadata()
            && (now.uid() != md.uid() || now.gid() != md.gid())
        {
            let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(md.uid()), Some(md.gid()));
        }
    }
    // After the chown, which may clear set-id bits.
    tmp.as_file().set_permissions(md.permissions())?;
    let tmp = fill_and_sync(tmp, bytes)?;
    tmp.persist(host).map_err(|e| BackendError::Io(e.error))?;
    sync_dir(dir);
    Ok(())
}

/// Flushes a directory's entries (the rename) to disk; best effort, as not every filesystem
/// supports it and the data itself is already safe.
fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, BackendError> + Send + 'static,
) -> Result<T, BackendError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BackendError::Other(format!("file task failed: {e}")))?
}

impl Backend for FilesystemBackend {
    fn ls<'a>(
        &'a self,
        _rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<FileInfo>, BackendError>> {
        let (me, path) = (self.clone(), path.to_owned());
        Box::pin(blocking(move || me.ls_sync(&path)))
    }

    fn read_text<'a>(
        &'a self,
        _rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<String, BackendError>> {
        let (me, path) = (self.clone(), path.to_owned());
        Box::pin(blocking(move || me.read_checked(&path)))
    }

    fn write<'a>(
        &'a self,
        _rt: &'a BackendRuntime,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let (me, path, content) = (self.clone(), path.to_owned(), content.to_owned());
        Box::pin(async move {
            let guard = self.lock_file(&path).await?;
            blocking(move || {
                let _guard = guard;
                me.write_sync(&path, &content)
            })
            .await
        })
    }

    fn edit<'a>(
        &'a self,
        _rt: &'a BackendRuntime,
        path: &'a str,
        old: &'a str,
        new: &'a str,
        replace_all: bool,
    ) -> BoxFuture<'a, Result<usize, BackendError>> {
        let me = self.clone();
        let (path, old, new) = (path.to_owned(), old.to_owned(), new.to_owned());
        Box::pin(async move {
            let guard = self.lock_file(&path).await?;
            blocking(move || {
                // Held until the edit is done, even if the caller stops waiting.
                let _guard = guard;
                me.edit_sync(&path, &old, &new, replace_all)
            })
            .await
        })
    }

    fn delete<'a>(
        &'a self,
        _rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let (me, path) = (self.clone(), path.to_owned());
        Box::pin(async move {
            // Serialized with edits and writes of the same file. The key is the link's own
            // path when the last component is a symlink (one leading out can be deleted).
            let lock_key = {
                let (me, p) = (self.clone(), path.clone());
                blocking(move || {
                    let norm = normalize(&p)?;
                    let name = norm.rsplit('/').next().unwrap_or_default().to_owned();
                    let host = me.resolve(crate::path::parent(&norm))?.join(&name);
                    Ok(std::fs::canonicalize(&host).unwrap_or(host))
                })
                .await?
            };
            let guard = self.locks.lock(lock_key).await;
            blocking(move || {
                let _guard = guard;
                me.delete_sync(&path)
            })
            .await
        })
    }

    fn glob<'a>(
        &'a self,
        _rt: &'a BackendRuntime,
        pattern: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, BackendError>> {
        let (me, pattern, path) = (self.clone(), pattern.to_owned(), path.to_owned());
        Box::pin(blocking(move || me.glob_sync(&pattern, &path)))
    }

    fn grep<'a>(
        &'a self,
        _rt: &'a BackendRuntime,
        query: &'a GrepQuery,
    ) -> BoxFuture<'a, Result<GrepResult, BackendError>> {
        let (me, query) = (self.clone(), query.clone());
        Box::pin(blocking(move || me.grep_sync(&query)))
    }
}
