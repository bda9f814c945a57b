//! The Linux side of the sandbox: the Landlock ruleset and the seccomp filter, built in the
//! parent, enforced in the child before `exec` (the only `unsafe` of the crate).

use std::collections::BTreeMap;
use std::io;
use std::os::unix::process::CommandExt;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::sandbox::{SandboxError, SandboxPaths, Support};

/// The Landlock ABI whose rights cairn asks for and has tested (Linux 6.15). Newer kernels
/// get exactly these rights (the crate never enables rights of a newer ABI by itself); older
/// ones get what they support (best effort), see [`Support::Partial`].
pub(crate) const TESTED_ABI: ABI = ABI::V7;

/// System calls a sandboxed command may not make at all (they fail with `EPERM`): debugging
/// or reading other processes, io_uring (its operations bypass seccomp's view of `socket`),
/// BPF and perf (kernel attack surface), `userfaultfd`, and the kernel keyring (the user's
/// session keys).
const DENIED_SYSCALLS: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
];

/// The x32 ABI's marker on x86_64 system-call numbers; `socket` is also denied under it.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: libc::c_long = 0x4000_0000;

fn target_arch() -> Result<TargetArch, SandboxError> {
    #[cfg(target_arch = "x86_64")]
    return Ok(TargetArch::x86_64);
    #[cfg(target_arch = "aarch64")]
    return Ok(TargetArch::aarch64);
    #[cfg(target_arch = "riscv64")]
    return Ok(TargetArch::riscv64);
    #[allow(unreachable_code)]
    Err(SandboxError::Unsupported(format!(
        "no seccomp filter for the {} architecture",
        std::env::consts::ARCH
    )))
}

/// Probes Landlock (by creating rulesets, which restricts nothing) and seccomp.
pub(crate) fn probe() -> Support {
    let seccomp = std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
        .unwrap_or(false);
    if !seccomp {
        return Support::Unavailable {
            reason: "the kernel has no seccomp filters".into(),
        };
    }
    if let Err(e) = target_arch() {
        return Support::Unavailable {
            reason: e.to_string(),
        };
    }
    let full = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(TESTED_ABI))
        .and_then(|r| r.scope(Scope::from_all(TESTED_ABI)))
        .and_then(Ruleset::create);
    if full.is_ok() {
        return Support::Full;
    }
    let any = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(Ruleset::create);
    match any {
        Ok(_) => Support::Partial {
            missing: "the kernel's Landlock is older than ABI 6 (Linux 6.12): sandboxed commands can still signal processes outside the sandbox".into(),
        },
        Err(_) => Support::Unavailable {
            reason: "the kernel has no Landlock (Linux 5.13 or later with Landlock enabled is needed)".into(),
        },
    }
}

/// A ruleset with its rules and a compiled filter, ready for the child.
pub(crate) struct Prepared {
    ruleset: RulesetCreated,
    filter: BpfProgram,
}

fn landlock_error(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Landlock(e.to_string())
}

fn seccomp_error(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Seccomp(e.to_string())
}

impl Prepared {
    pub(crate) fn new(paths: &SandboxPaths, allow_net: bool) -> Result<Self, SandboxError> {
        let all = AccessFs::from_all(TESTED_ABI);
        let read = AccessFs::from_read(TESTED_ABI);
        let device = read | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
        let ruleset = Ruleset::default()
            .handle_access(all)
            .and_then(|r| r.scope(Scope::from_all(TESTED_ABI)))
            .and_then(Ruleset::create)
            .and_then(|r| r.add_rules(path_beneath_rules(&paths.read, read)))
            .and_then(|r| r.add_rules(path_beneath_rules(&paths.write, all)))
            .and_then(|r| r.add_rules(path_beneath_rules(&paths.devices, device)))
            .map_err(landlock_error)?;
        Ok(Prepared {
            ruleset,
            filter: filter(allow_net)?,
        })
    }

    pub(crate) fn install(self, cmd: &mut std::process::Command) {
        install_hook(cmd, Some(self.ruleset), self.filter);
    }
}

/// The seccomp filter of a sandboxed command: [`DENIED_SYSCALLS`], and `socket` for any family
/// but `AF_UNIX` unless the network is allowed; everything else is allowed. A system call of
/// another architecture (32-bit x86 on x86_64) kills the process, as seccompiler's filters do.
fn filter(allow_net: bool) -> Result<BpfProgram, SandboxError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in DENIED_SYSCALLS {
        rules.insert(*nr, Vec::new());
    }
    if !allow_net {
        let not_unix = || {
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                libc::AF_UNIX as u64,
            )
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(seccomp_error)
        };
        rules.insert(libc::SYS_socket, vec![not_unix()?]);
        #[cfg(target_arch = "x86_64")]
        rules.insert(X32_SYSCALL_BIT | libc::SYS_socket, vec![not_unix()?]);
    }
    compile(rules, libc::EPERM)
}

/// A filter that makes the system calls of `rules` fail with `errno`.
pub(crate) fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: libc::c_int,
) -> Result<BpfProgram, SandboxError> {
    let errno = u32::try_from(errno).map_err(seccomp_error)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        target_arch()?,
    )
    .map_err(seccomp_error)?;
    BpfProgram::try_from(filter).map_err(seccomp_error)
}

/// Installs the `pre_exec` hook that enforces `ruleset` (if any) and then `filter` in the child.
///
/// This is the crate's one use of `unsafe`.
#[allow(unsafe_code)]
pub(crate) fn install_hook(
    cmd: &mut std::process::Command,
    ruleset: Option<RulesetCreated>,
    filter: BpfProgram,
) {
    let mut ruleset = ruleset;
    // SAFETY: `pre_exec` runs the closure in the child after `fork`, where only
    // async-signal-safe work is allowed. `confine_child` makes system calls only (`prctl`,
    // `landlock_restrict_self`, `close`, `seccomp`) on a ruleset fd and a BPF program prepared
    // here in the parent; it allocates nothing (its errors are raw OS error codes) and takes no
    // lock. `Option::take` moves the ruleset out of the child's copy of the closure; the
    // parent's copy is dropped with `cmd`, closing its fd.
    unsafe {
        cmd.pre_exec(move || confine_child(&mut ruleset, &filter));
    }
}

/// In the child: Landlock (which also sets `no_new_privs`), then seccomp.
fn confine_child(ruleset: &mut Option<RulesetCreated>, filter: &BpfProgram) -> io::Result<()> {
    if let Some(ruleset) = ruleset.take() {
        match ruleset.restrict_self() {
            Ok(s) if s.ruleset != RulesetStatus::NotEnforced => {}
            Ok(_) => return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP)),
            Err(e) => return Err(raw_os_error(&e, libc::EPERM)),
        }
    }
    seccompiler::apply_filter(filter).map_err(|e| raw_os_error(&e, libc::EINVAL))
}

/// The OS error code somewhere in `e`'s chain of sources (else `fallback`), as an `io::Error`
/// that needs no allocation.
fn raw_os_error(e: &(dyn std::error::Error + 'static), fallback: i32) -> io::Error {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(code) = err
            .downcast_ref::<io::Error>()
            .and_then(io::Error::raw_os_error)
        {
            return io::Error::from_raw_os_error(code);
        }
        cur = err.source();
    }
    io::Error::from_raw_os_error(fallback)
}
