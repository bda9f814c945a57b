//! Finding a test's processes in `/proc` (Linux): unique `sleep` markers, the live processes
//! holding one, and waiting for them to die (killing survivors so a failing test leaves
//! nothing behind).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A number no other process on the machine has in its command line: `sleep MARK` sleeps
/// about 1000 s and can be found in `/proc/*/cmdline`.
pub fn marker() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "1000.{}{:03}{:09}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

/// Pids of live (non-zombie) processes whose command line contains `mark`.
///
/// # Panics
/// If `/proc` cannot be read.
pub fn holders(mark: &str) -> Vec<u32> {
    let entries = match std::fs::read_dir("/proc") {
        Ok(e) => e,
        Err(e) => panic!("read /proc: {e}"),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmdline).contains(mark) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next().map(str::to_owned));
        if state.as_deref() != Some("Z") {
            out.push(pid);
        }
    }
    out
}

/// One look: `Some(Ok)` when no process holds any of `marks`; `Some(Err(survivors))`, after
/// killing them, once `deadline` has passed; `None` to look again.
fn look(marks: &[&str], deadline: Instant) -> Option<Result<(), Vec<u32>>> {
    let left: Vec<u32> = marks.iter().flat_map(|m| holders(m)).collect();
    if left.is_empty() {
        return Some(Ok(()));
    }
    if Instant::now() <= deadline {
        return None;
    }
    for p in &left {
        if let Some(p) = i32::try_from(*p)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
    Some(Err(left))
}

/// Waits (blocking, at most `wait`) until no process holds any of `marks`; the survivors
/// otherwise, which it has killed.
pub fn wait_gone(marks: &[&str], wait: Duration) -> Result<(), Vec<u32>> {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(r) = look(marks, deadline) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// [`wait_gone`] for async tests (it sleeps on the tokio timer instead of the thread).
pub async fn wait_gone_async(marks: &[&str], wait: Duration) -> Result<(), Vec<u32>> {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(r) = look(marks, deadline) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
