//! Test helpers for other crates (feature `testing`): running a program as if on a kernel
//! without Landlock, to test the fallback where no sandbox can be made.

use crate::SandboxError;

/// Makes `cmd` start as if the kernel had no Landlock: a seccomp filter installed in the child
/// makes the three Landlock system calls fail with `ENOSYS`, exactly what a kernel built
/// without Landlock answers. Everything the program starts inherits the filter, and
/// [`support`](crate::support) in it reports [`Support::Unavailable`](crate::Support).
pub fn hide_landlock(cmd: &mut std::process::Command) -> Result<(), SandboxError> {
    #[cfg(target_os = "linux")]
    {
        let rules = [
            libc::SYS_landlock_create_ruleset,
            libc::SYS_landlock_add_rule,
            libc::SYS_landlock_restrict_self,
        ]
        .into_iter()
        .map(|nr| (nr, Vec::new()))
        .collect();
        let filter = crate::confine::compile(rules, libc::ENOSYS)?;
        crate::confine::install_hook(cmd, None, filter);
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cmd;
        Err(SandboxError::Unsupported("not Linux".into()))
    }
}
