//! The seccomp filter of workspace and read-only commands (defense in depth under the
//! namespaces and Landlock), compiled once in the parent with `seccompiler`; the child only
//! installs the prepared programs (`child::restrict`). See `notes/2026-12-01-seccomp-filter.md`
//! for what is denied, with which errno, and why.
//!
//! Denied, with an errno a program can fall back on (never a kill):
//! - `EPERM` (as the kernel answers an unprivileged caller): `keyctl`, `add_key`,
//!   `request_key` (keyrings are not namespaced), `bpf`, `perf_event_open`, `userfaultfd`,
//!   `kexec_load`, `kexec_file_load`. One `keyctl` passes: joining a new, anonymous session
//!   keyring (`KEYCTL_JOIN_SESSION_KEYRING` with no name), which reaches no key and which each
//!   command does before its shell starts (so the filter can be in force before that: a
//!   zygote installs it once on itself, see `zygote.rs`);
//! - `ENOSYS` (as a kernel built without it): `io_uring_setup`, `io_uring_enter`,
//!   `io_uring_register` (io_uring makes sockets and opens files without the system calls the
//!   other rules see);
//! - `EAFNOSUPPORT`: `socket` and `socketpair` of any family but `AF_UNIX`, `AF_INET`,
//!   `AF_INET6` and `AF_NETLINK` (route lookups, `ip`, `ss`): `AF_VSOCK` (the hypervisor
//!   host's address space, which no network namespace covers), `AF_PACKET`, `AF_ALG`,
//!   Bluetooth, CAN, XDP and the rest, which a build never needs;
//! - on x86_64, every x32 system call (`ENOSYS`): the same numbers with bit 30 set would pass
//!   the rules above.
//!
//! seccompiler's programs also check the architecture first: a system call of another ABI (a
//! 32-bit program, `int 0x80`) kills the process, as no rule above would see it.

use std::collections::BTreeMap;

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

/// The socket families a command may still make.
pub(crate) const ALLOWED_SOCKET_FAMILIES: [(libc::c_int, &str); 4] = [
    (libc::AF_UNIX, "unix"),
    (libc::AF_INET, "inet"),
    (libc::AF_INET6, "inet6"),
    (libc::AF_NETLINK, "netlink"),
];

/// Denied with `EPERM`.
const EPERM_CALLS: [libc::c_long; 8] = [
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
];

/// `keyctl(2)`'s operation that joins (here: creates) a new anonymous session keyring.
pub(crate) const KEYCTL_JOIN_SESSION_KEYRING: u64 = 1;

/// Denied with `ENOSYS`.
const ENOSYS_CALLS: [libc::c_long; 3] = [
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The programs, in the order the child installs them; each one the kernel runs on every
/// system call of the command.
#[derive(Debug)]
pub(crate) struct Programs(Vec<BpfProgram>);

impl Programs {
    /// `(length, first instruction)` of each program, for `struct sock_fprog`.
    pub(crate) fn each(&self) -> impl Iterator<Item = (u16, *const sock_filter)> + '_ {
        self.0.iter().map(|p| (p.len() as u16, p.as_ptr()))
    }
}

// SAFETY: the programs are plain data, never changed after they are compiled.
unsafe impl Sync for Programs {}

/// The programs, compiled once per process, or why there are none.
pub(crate) fn programs() -> &'static Result<Programs, String> {
    static PROGRAMS: std::sync::OnceLock<Result<Programs, String>> = std::sync::OnceLock::new();
    PROGRAMS.get_or_init(compile)
}

// `c_long` is not `i64` on every target: the casts are not always no-ops.
#[allow(clippy::unnecessary_cast)]
fn compile() -> Result<Programs, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| format!("no seccomp filter is built for {}", std::env::consts::ARCH))?;
    let err = |e: &dyn std::fmt::Display| format!("compiling the seccomp filter: {e}");
    let deny = |calls: &[libc::c_long], errno: i32| -> Result<BpfProgram, String> {
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
            calls.iter().map(|&nr| (nr as i64, Vec::new())).collect();
        if let Some(keyctl) = rules.get_mut(&(libc::SYS_keyctl as i64)) {
            // Denied unless it joins an anonymous session keyring: the operation is not that
            // one, or a name is given (a rule matches when all its conditions hold).
            let differs = |arg: u8, len: SeccompCmpArgLen, value: u64| {
                SeccompCondition::new(arg, len, SeccompCmpOp::Ne, value)
                    .and_then(|condition| SeccompRule::new(vec![condition]))
                    .map_err(|e| err(&e))
            };
            *keyctl = vec![
                differs(0, SeccompCmpArgLen::Dword, KEYCTL_JOIN_SESSION_KEYRING)?,
                differs(1, SeccompCmpArgLen::Qword, 0)?,
            ];
        }
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .map_err(|e| err(&e))?;
        BpfProgram::try_from(filter).map_err(|e| err(&e))
    };
    // "family is none of the allowed ones": one rule whose conditions must all hold.
    let other_family = SeccompRule::new(
        ALLOWED_SOCKET_FAMILIES
            .iter()
            .map(|&(family, _)| {
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family as u64)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(&e))?,
    )
    .map_err(|e| err(&e))?;
    let sockets = SeccompFilter::new(
        [libc::SYS_socket, libc::SYS_socketpair]
            .into_iter()
            .map(|nr| (nr as i64, vec![other_family.clone()]))
            .collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EAFNOSUPPORT as u32),
        arch,
    )
    .map_err(|e| err(&e))?;
    let mut programs = vec![
        deny(&EPERM_CALLS, libc::EPERM)?,
        deny(&ENOSYS_CALLS, libc::ENOSYS)?,
        BpfProgram::try_from(sockets).map_err(|e| err(&e))?,
    ];
    if arch == TargetArch::x86_64 {
        programs.push(x32_guard());
    }
    Ok(Programs(programs))
}

/// Every x32 system call (number with `__X32_SYSCALL_BIT`) fails with `ENOSYS`. Four
/// instructions written out: seccompiler matches numbers exactly, not ranges.
fn x32_guard() -> BpfProgram {
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let stmt = |code: u16, k: u32| sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    vec![
        // A = seccomp_data.nr
        stmt((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 0),
        // if A >= X32_SYSCALL_BIT: next, else skip one
        sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        stmt(
            (libc::BPF_RET | libc::BPF_K) as u16,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
        stmt(
            (libc::BPF_RET | libc::BPF_K) as u16,
            libc::SECCOMP_RET_ALLOW,
        ),
    ]
}
