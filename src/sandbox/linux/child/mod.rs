//! Everything that runs between fork and exec: async-signal-safe only.
//!
//! The child of a multi-threaded process may not allocate, lock or touch Rust's std I/O: every
//! file here makes raw syscalls through `libc` on data the parent prepared ([`ExecArgs`],
//! [`ChildPlan`]) and reports a failing step as a typed record ([`super::step::StepError`]) on a
//! close-on-exec pipe. Forks in the child go through the raw `clone` syscall ([`sys::raw_fork`]).
//!
//! Process shape when namespaces are on (see `notes/2026-11-29-sandbox-design.md` and
//! `notes/2026-11-30-sandbox-v2.md`):
//!
//! ```text
//! engine ── W (the spawned child: ignores the group's TERM/INT/…, exits like the shell)   waiter.rs
//!            └─ I (PID 1 of the new PID namespace: mounts /proc, reaps, hands W the
//!                 │  shell's status, lingers ≤ LINGER for background jobs, exits)          init.rs
//!                 └─ B (PID 2: capabilities, limits, Landlock, fds, then exec bash)        mod.rs
//! ```
//!
//! A command of the session's zygote has no W: the zygote clones I directly into the new PID
//! and mount namespaces (`super::zygote`); I makes the process group and hands the shell's
//! status to the agent itself, and as PID 1 it already gets no signal it has no handler for.
//!
//! All three stay in the process group (and session) W made: the engine's signals reach the shell (and its
//! children) directly, and its final SIGKILL of the group reaches I. When I exits the kernel
//! SIGKILLs everything else in the namespace. W's parent-death signal and I's (set here, while
//! the shell runs) chain the agent's death down to I. Without namespaces, W is a subreaper
//! instead (`reaper.rs`).
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

// Also compiled by the `floor` bench (`#[path]`): libc only.
pub(crate) mod clone;
pub(crate) mod init;
pub(crate) mod reaper;
pub(crate) mod remount;
pub(crate) mod spare;
pub(crate) mod sys;
pub(crate) mod view;
pub(crate) mod waiter;
pub(crate) mod zygote;

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use libc::c_int;

use super::step::Step;
use sys::{check, errno, fail, raw_fork};

/// The capabilities a root command keeps inside its user namespace: enough to work on files of
/// any owner where it may write (as root could before), nothing over mounts, devices, the
/// network, other processes or the kernel.
/// (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID.)
const KEPT_CAPABILITIES: [u32; 5] = [0, 1, 2, 3, 4];

/// Drops every capability but [`KEPT_CAPABILITIES`] from this process's bounding set (what an
/// `execve` can grant) and clears its ambient set; `Err(errno)` of the drop that failed. The
/// process keeps its effective capabilities until it execs: a zygote that did this still mounts
/// and clones, and everything it forks inherits the sets (`zygote.rs`).
pub(crate) fn drop_bounding_set() -> Result<(), libc::c_int> {
    // SAFETY: raw prctl calls on this process.
    unsafe {
        for cap in 0..64u32 {
            if KEPT_CAPABILITIES.contains(&cap) {
                continue;
            }
            let r = libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
            if r < 0 && errno() == libc::EINVAL {
                // Past the kernel's last capability (`cap_valid`: 0 to CAP_LAST_CAP, no gaps):
                // every higher number is refused the same way.
                break;
            }
            if r < 0 {
                return Err(errno());
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
    }
    Ok(())
}

/// Installs the prepared seccomp programs on this process, in order; `Err(errno)` of the first
/// that failed. The caller has set `no_new_privs` (or holds CAP_SYS_ADMIN in its namespace).
pub(crate) fn install_seccomp(programs: &super::seccomp::Programs) -> Result<(), libc::c_int> {
    for (len, filter) in programs.each() {
        let program = libc::sock_fprog {
            len,
            filter: filter as *mut libc::sock_filter,
        };
        // SAFETY: seccomp on this process with a program that outlives the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &program as *const libc::sock_fprog,
            )
        };
        if r < 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// The sandbox part of the child's program, prepared in the parent.
#[derive(Debug, Default, Clone)]
pub(crate) struct ChildPlan {
    /// Fresh PID, mount, UTS and IPC namespaces (and network ones with `network_namespace`).
    pub namespaces: bool,
    /// Also a user namespace (always for workspace/read-only, and whenever not root).
    pub user_namespace: bool,
    /// Private UTS and IPC namespaces (workspace and read-only).
    pub private_ipc_uts: bool,
    /// Root: the parent writes an identity map of every id (W waits for it on `map_sync`).
    /// Otherwise W maps its own uid and gid.
    pub parent_maps_ids: bool,
    pub uid: u32,
    pub gid: u32,
    /// Mount a fresh /proc for the new PID namespace.
    pub private_proc: bool,
    /// A fresh network namespace (only loopback, brought up).
    pub network_namespace: bool,
    /// With `network_namespace`: one made ahead of time to join instead (-1: create one).
    pub netns_fd: RawFd,
    /// Workspace mode's bridge where the agent cannot make it (an ordinary user's agent): W
    /// makes the proxy's listener in the network namespace it creates and sends it to the
    /// agent on this socket ([`sys::send_listener`]), then closes it.
    pub bridge_socket: Option<RawFd>,
    /// The read-only view of the filesystem (workspace and read-only modes).
    pub view: Option<view::View>,
    /// Landlock ruleset to restrict the shell with (-1: none).
    pub landlock_fd: RawFd,
    /// Write rights for the rules B adds for the private tmpfs mounts of the view.
    pub landlock_write_rights: u64,
    /// The agent's environment block `[start, end)`, wiped in PID 1.
    pub env_region: Option<(usize, usize)>,
    /// Without namespaces: keep a subreaper between the engine and the shell.
    pub reaper: bool,
    /// Root in a user namespace: keep only [`KEPT_CAPABILITIES`].
    pub drop_capabilities: bool,
    /// Root without a user namespace (`full` mode as root): drop CAP_SYS_PTRACE (bounding,
    /// permitted, effective, inheritable and ambient sets), so the command cannot read the
    /// memory of the agent or of PID 1, both non-dumpable copies of the agent's secrets.
    pub drop_ptrace: bool,
    /// The host's procfs mount points (from the parent's mountinfo), detached in PID 1 before
    /// it mounts the private /proc, where root without a user namespace could unmount that one
    /// and see the host's: the kernel serves even a non-dumpable agent's `environ` to root.
    pub host_proc_mounts: Vec<CString>,
    /// RLIMIT_NPROC (0: leave as is).
    pub max_processes: u64,
    /// RLIMIT_DATA (0: leave as is).
    pub max_memory: u64,
    /// `tasks` of the command's own pids cgroup, joined first thing (-1: none).
    pub pids_cgroup_fd: RawFd,
    /// `tasks` of the command's own memory cgroup, joined by the shell-to-be right before
    /// exec (-1: none). Not earlier: W and I are clones of the agent whose resident size counts
    /// the agent's pages, so inside the cgroup the OOM killer would pick them, and the command
    /// would die whole instead of its largest process.
    pub memory_cgroup_fd: RawFd,
    /// cgroup v2 folders to fork W and B straight into (`clone3` with `CLONE_INTO_CGROUP`),
    /// instead of joining `pids_cgroup_fd` / `memory_cgroup_fd` by a migration.
    pub clone_into: CloneInto,
    /// Replace the agent's session keyring with a fresh, empty one (`KEYCTL_JOIN_SESSION_KEYRING`).
    pub fresh_keyring: bool,
    /// The seccomp programs to install last, right before exec (compiled in the parent).
    pub seccomp: Option<&'static super::seccomp::Programs>,
    /// A fork of the session's zygote (`zygote.rs`), which already holds the user, UTS, IPC
    /// and network namespaces and the built view: this command only makes its own PID
    /// namespace and its own copy of the mount namespace.
    pub in_zygote: bool,
    /// Fault injection, compiled into the library's own unit tests only (never into the
    /// binary, nor the library others build): this step fails with this errno as if the
    /// kernel refused it. Ubuntu's two failure points (`unshare` refused; `unshare` allowed,
    /// then the id-map write refused) for the probe's diagnosis
    /// (`probe::tests`, `notes/2026-12-06-doctor-causes.md`).
    #[cfg(test)]
    pub fault: Option<(Step, c_int)>,
}

/// Open cgroup v2 folders a command's processes are forked into (`clone3` with
/// `CLONE_INTO_CGROUP`; `cgroup_v2.rs`); -1: none (the default), so a plan made elsewhere (the
/// zygote's) joins by migration as before.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CloneInto {
    /// W (and so I, its fork) starts here: the folder under the command's `pids.max`.
    pub init: RawFd,
    /// B starts here, forked by I (without namespaces, W joins `memory_cgroup_fd` instead):
    /// the folder with the command's `memory.max`.
    pub shell: RawFd,
}

impl Default for CloneInto {
    fn default() -> Self {
        CloneInto {
            init: -1,
            shell: -1,
        }
    }
}

/// What the child execs and with which fds, prepared in the parent (which owns the strings
/// and arrays: the child only reads them).
pub(crate) struct ExecArgs<'a> {
    pub program: &'a CStr,
    /// NULL-terminated.
    pub argv: &'a [*const libc::c_char],
    /// NULL-terminated.
    pub envp: &'a [*const libc::c_char],
    pub cwd: &'a CStr,
    pub stdin: RawFd,
    pub output: RawFd,
    /// `(source, target)`: the source fd appears as `target` in the shell.
    pub pass: &'a [(RawFd, RawFd)],
    pub parent: libc::pid_t,
    /// Write end of the close-on-exec error pipe.
    pub error_fd: RawFd,
    /// With [`ChildPlan::parent_maps_ids`]: W writes a byte here once it has unshared, then
    /// reads one back once the parent has written its id maps.
    pub map_sync: (RawFd, RawFd),
    /// The parent's ends of those two pipes, closed by W before it waits: else W's own copy of
    /// the parent's write end would keep its read from ever ending when the parent fails.
    pub map_sync_unused: (RawFd, RawFd),
    /// A probe: B exits 0 instead of exec'ing.
    pub probe: bool,
    /// `setsid` rather than `setpgid(0, 0)`: the parent is in a session with a controlling
    /// terminal (or may be). A new session is also a new scheduler autogroup, which costs a
    /// command 5-7 ms of waiting for the CPU on a loaded machine
    /// (notes/2026-12-02-per-command-floor.md), so it is made only when needed.
    pub new_session: bool,
    /// Where W writes the shell's wait status (4 bytes) before it exits the same way (-1:
    /// nowhere): a zygote's fork is not the agent's child, so the agent cannot wait for it.
    /// In a zygote's command, I (PID 1) writes it.
    pub status_fd: RawFd,
    /// A pidfd of the parent (-1: none), for a child that is PID 1 of its own namespace and so
    /// cannot compare `getppid()` (0 there) with [`ExecArgs::parent`]: readable once the
    /// parent has exited.
    pub parent_pidfd: RawFd,
}

/// The child: from just after clone to exec. Never returns.
pub(crate) fn program(exec: &ExecArgs, plan: Option<&ChildPlan>) -> ! {
    let efd = exec.error_fd;
    if plan.is_some_and(|plan| plan.in_zygote) {
        sys::reset_signals_in_zygote_fork();
    } else {
        sys::reset_signals();
    }
    // SAFETY: raw syscalls on fds and strings the parent prepared.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if parent_gone(exec) {
            libc::_exit(127); // the parent died before the signal was armed
        }
        // A process group whose id is this pid, which the engine signals, and no controlling
        // terminal, so `/dev/tty` and TIOCSTI reach no terminal of the agent's (CVE-2017-5226):
        // a new session when the parent has a terminal (`ExecArgs::new_session`), else only a
        // process group. In a session without a terminal, only its leader could acquire one,
        // and this process is not the leader.
        let group = if exec.new_session {
            libc::setsid()
        } else {
            libc::setpgid(0, 0)
        };
        check(efd, Step::ProcessGroup, group as i64);
        if plan.is_some() {
            // W is a fork of the agent holding a copy of its memory: never readable by the
            // same user, whatever the agent's own state (an embedder that never called
            // `protect_agent_process`). Not in the plain path: there the child shares the
            // agent's memory (CLONE_VM) and its dumpable flag with it.
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
    }
    set_stdio(exec);
    if let Some(plan) = plan {
        enter(plan, exec);
    }
    exec_shell(exec)
}

/// The shell-to-be's last steps (B, or the only process): its fds, its directory, the exec.
fn exec_shell(exec: &ExecArgs) -> ! {
    let efd = exec.error_fd;
    sys::close_from(3, false);
    // SAFETY: raw syscalls on fds and strings the parent prepared.
    unsafe {
        // Move every source above the targets first, so that no dup2 lands on a source.
        let mut moved = [(-1 as RawFd, -1 as RawFd); 8];
        for (slot, &(from, to)) in moved.iter_mut().zip(exec.pass.iter()) {
            let high = libc::fcntl(from, libc::F_DUPFD_CLOEXEC, 100);
            check(efd, Step::Descriptors, high as i64);
            *slot = (high, to);
        }
        for &(high, to) in moved.iter().take(exec.pass.len()) {
            check(efd, Step::Descriptors, libc::dup2(high, to) as i64);
        }
        if libc::chdir(exec.cwd.as_ptr()) != 0 {
            fail(efd, Step::Chdir, errno());
        }
        if exec.probe {
            libc::_exit(0);
        }
        libc::execve(
            exec.program.as_ptr(),
            exec.argv.as_ptr(),
            exec.envp.as_ptr(),
        );
        fail(efd, Step::Exec, errno())
    }
}

/// The command's stdin and output as fds 0, 1 and 2.
fn set_stdio(exec: &ExecArgs) {
    let efd = exec.error_fd;
    // SAFETY: dup2/fcntl on fds the parent prepared.
    unsafe {
        for (from, to) in [(exec.stdin, 0), (exec.output, 1), (exec.output, 2)] {
            if from == to {
                check(efd, Step::Stdio, libc::fcntl(to, libc::F_SETFD, 0) as i64);
            } else {
                check(efd, Step::Stdio, libc::dup2(from, to) as i64);
            }
        }
    }
}

/// Whether the parent (`ExecArgs::parent`) has exited.
fn parent_gone(exec: &ExecArgs) -> bool {
    if exec.parent_pidfd < 0 {
        // SAFETY: plain getter.
        return unsafe { libc::getppid() } != exec.parent;
    }
    pidfd_ended(exec.parent_pidfd)
}

/// Whether the process of `pidfd` has exited (its pidfd is readable).
fn pidfd_ended(pidfd: RawFd) -> bool {
    let mut poll = libc::pollfd {
        fd: pidfd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one pollfd of ours, without waiting.
    unsafe { libc::poll(&mut poll, 1, 0) != 0 }
}

/// Applies `plan`. Returns only in the process that goes on to exec the command without
/// namespaces; with them, B execs it (`become_init_and_start_shell`).
fn enter(plan: &ChildPlan, exec: &ExecArgs) {
    let efd = exec.error_fd;
    if plan.clone_into.init < 0 {
        join_cgroup(plan.pids_cgroup_fd, efd);
    }
    if !plan.namespaces {
        if plan.reaper && !exec.probe {
            reaper::fork_shell(efd);
        }
        restrict(plan, efd);
        return;
    }
    if plan.in_zygote {
        // I, cloned by the zygote as PID 1 of a new PID namespace, in its own copy of the
        // zygote's mount namespace. The zygote's user namespace owns both: the mounts copied
        // from its view are not locked, but the shell keeps no capability over them (see
        // `restrict`), and what this command mounts lives in its copy only.
        check(efd, Step::PrivateMounts, sys::make_mounts_private() as i64);
        if let Some(view) = &plan.view {
            view::refresh_private(view, efd);
        }
        // Its parent-death signal (on the zygote) is armed in `program`, and stays armed.
        become_init_and_start_shell(plan, exec, exec.status_fd, init::Parent::Zygote);
    }
    // SAFETY: raw syscalls only, as required between fork and exec.
    unsafe {
        let join_netns = plan.network_namespace && plan.netns_fd >= 0;
        if join_netns {
            check(
                efd,
                Step::JoinNetworkNamespace,
                libc::setns(plan.netns_fd, libc::CLONE_NEWNET) as i64,
            );
        }
        let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
        if plan.private_ipc_uts {
            flags |= libc::CLONE_NEWUTS | libc::CLONE_NEWIPC;
        }
        if plan.network_namespace && !join_netns {
            flags |= libc::CLONE_NEWNET;
        }
        if plan.user_namespace {
            flags |= libc::CLONE_NEWUSER;
        }
        #[cfg(test)]
        if let Some((Step::Unshare, errno)) = plan.fault {
            fail(efd, Step::Unshare, errno);
        }
        check(efd, Step::Unshare, libc::unshare(flags) as i64);
        if plan.user_namespace {
            // The namespace exists now; its id map is not written yet.
            #[cfg(test)]
            if let Some((step @ (Step::Setgroups | Step::UidMap), errno)) = plan.fault {
                fail(efd, step, errno);
            }
            if plan.parent_maps_ids {
                let (tell, wait) = exec.map_sync;
                let (unused_read, unused_write) = exec.map_sync_unused;
                libc::close(unused_read);
                libc::close(unused_write);
                sys::write_all(tell, b"u");
                let mut answer = [0u8; 1];
                let n = libc::read(wait, answer.as_mut_ptr().cast(), 1);
                if n != 1 || answer != *b"m" {
                    fail(efd, Step::UidMap, if n < 0 { errno() } else { libc::EPERM });
                }
            } else {
                // A non-dumpable process's /proc/self files belong to root, so it cannot
                // write its own id maps: W is dumpable only around these three writes (see
                // `dumpable_window` for what that window exposes and what is removed first).
                dumpable_window(plan, exec);
                check(
                    efd,
                    Step::Setgroups,
                    sys::write_file(b"/proc/self/setgroups\0", b"deny") as i64,
                );
                check(
                    efd,
                    Step::UidMap,
                    sys::write_id_map(b"/proc/self/uid_map\0", plan.uid, plan.uid, 1) as i64,
                );
                check(
                    efd,
                    Step::GidMap,
                    sys::write_id_map(b"/proc/self/gid_map\0", plan.gid, plan.gid, 1) as i64,
                );
                libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            }
        }
        check(efd, Step::PrivateMounts, sys::make_mounts_private() as i64);
        if plan.network_namespace && !join_netns {
            sys::loopback_up();
        }
        if let Some(socket) = plan.bridge_socket {
            if plan.network_namespace && !join_netns {
                let port = crate::netproxy::PROXY_PORT;
                check(
                    efd,
                    Step::ProxyBridge,
                    sys::send_listener(socket, port) as i64,
                );
            }
            libc::close(socket);
        }
        if let Some(view) = &plan.view {
            view::build(view, efd);
        }
    }
    start_init_and_shell(plan, exec);
}

/// Forks I (PID 1 of the new PID namespace: a fresh `/proc`, reaps) and B. Never returns: W
/// goes on as the waiter, I as init, B execs the shell.
fn start_init_and_shell(plan: &ChildPlan, exec: &ExecArgs) -> ! {
    let efd = exec.error_fd;
    let mut pipe = [-1 as c_int; 2];
    // SAFETY: raw syscalls only, as required between fork and exec.
    unsafe {
        check(
            efd,
            Step::StartInit,
            libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) as i64,
        );
        let [status_read, status_write] = pipe;
        let init = raw_fork();
        check(efd, Step::StartInit, init as i64);
        if init > 0 {
            libc::close(status_write);
            waiter::run(init, status_read, exec.status_fd);
        }

        // I: PID 1. Its signal dispositions and mask are W's, which `program` reset and
        // nothing changed before this fork (W ignores the group's signals only from
        // `waiter::run` on, after it).
        libc::close(status_read);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // If W died before the line above, nobody would wait for us: the pipe tells.
        let mut poll = libc::pollfd {
            fd: status_write,
            events: libc::POLLOUT,
            revents: 0,
        };
        if libc::poll(&mut poll, 1, 0) > 0 && poll.revents & libc::POLLERR != 0 {
            libc::_exit(sys::SETUP_FAILED);
        }
        become_init_and_start_shell(plan, exec, status_write, init::Parent::Waiter);
    }
}

/// Makes this process the namespace's init (a fresh `/proc` where asked, the environment block
/// wiped), starts B and goes on in `init::run`, handing the shell's status to `status_write`.
///
/// B shares I's memory until it execs (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does) on a
/// stack in this frame, and I waits meanwhile: no copy of I's page tables, no copy-on-write
/// fault in either (a fork cost B about 60 µs and I and B some 15 faults of 3–8 µs each on
/// this machine, `notes/2026-12-03-shell-shares-init-memory.md`). Everything B changes before
/// its exec is its own: credentials (capabilities, keyring, Landlock, seccomp, no_new_privs),
/// rlimits and signal dispositions (no `CLONE_THREAD`/`CLONE_SIGHAND`), fds (no
/// `CLONE_FILES`), its directory (no `CLONE_FS`), and its cgroup; it writes only to its own
/// stack. I has no signal handler (its dispositions are the defaults), so none can run on B's
/// stack.
fn become_init_and_start_shell(
    plan: &ChildPlan,
    exec: &ExecArgs,
    status_write: RawFd,
    parent: init::Parent,
) -> ! {
    become_init(plan, exec.error_fd);
    start_shell(plan, exec, status_write, parent)
}

/// Makes this process the namespace's init: not dumpable, named, a fresh `/proc` where asked,
/// the agent's environment block wiped. A failed step is reported on `efd`.
fn become_init(plan: &ChildPlan, efd: RawFd) {
    // SAFETY: raw syscalls only, as required between fork and exec.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::prctl(libc::PR_SET_NAME, c"acp-bash-init".as_ptr(), 0, 0, 0);
        if plan.private_proc {
            // Mounts are private here (above): nothing of this reaches the host.
            for mount in &plan.host_proc_mounts {
                libc::umount2(mount.as_ptr(), libc::MNT_DETACH);
            }
            check(
                efd,
                Step::PrivateProc,
                libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                ) as i64,
            );
        }
        // Wiped before the shell exists, not only in `init::run` after the fork: the kernel
        // serves /proc/1/environ from this copy of the agent's environment block, and a shell
        // that keeps CAP_SYS_PTRACE (root in `full`) read it when it ran before PID 1 got to
        // the wipe (a busy machine). The shell execs with its own prepared `envp`.
        if let Some((start, end)) = plan.env_region {
            if end > start {
                std::ptr::write_bytes(start as *mut u8, 0, end - start);
            }
        }
    }
}

/// Starts B (see [`become_init_and_start_shell`]) and goes on as init.
fn start_shell(plan: &ChildPlan, exec: &ExecArgs, status_write: RawFd, parent: init::Parent) -> ! {
    let efd = exec.error_fd;
    // SAFETY: raw syscalls only, as required between fork and exec; B's stack and arguments
    // live in this frame, which stays until B has exec'd (CLONE_VFORK).
    unsafe {
        let shell = ShellStart {
            plan,
            exec,
            status_write,
        };
        if plan.clone_into.shell >= 0 {
            // B forked straight into the command's memory cgroup: a copy of I's memory (not
            // shared, since clone3 with CLONE_VM would need a stack switch of its own), still
            // far cheaper than a migration through `cgroup.procs`.
            let pid = sys::raw_fork_into(plan.clone_into.shell);
            if pid == 0 {
                shell_child(&shell as *const ShellStart as *mut libc::c_void);
                libc::_exit(sys::SETUP_FAILED);
            }
            check(efd, Step::StartShell, pid as i64);
            init::run(pid, status_write, plan.env_region, parent)
        }
        // Not zeroed: B touches only the pages it uses, from the top.
        let mut stack = std::mem::MaybeUninit::<[u8; SHELL_STACK]>::uninit();
        let top = (stack.as_mut_ptr() as usize + SHELL_STACK) & !15;
        let pid = libc::clone(
            shell_child,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &shell as *const ShellStart as *mut libc::c_void,
        );
        check(efd, Step::StartShell, pid as i64);
        // B has exec'd (or failed and exited): nothing of this frame is in use any more.
        init::run(pid, status_write, plan.env_region, parent)
    }
}

/// The stack B runs on until its exec (it needs a few KiB; the rest is never touched).
const SHELL_STACK: usize = 128 * 1024;

/// What B needs, in I's frame (alive until B has exec'd: `CLONE_VFORK`).
struct ShellStart<'a> {
    plan: &'a ChildPlan,
    exec: &'a ExecArgs<'a>,
    status_write: RawFd,
}

/// B: the shell-to-be, PID 2.
extern "C" fn shell_child(arg: *mut libc::c_void) -> c_int {
    // SAFETY: `arg` is I's `ShellStart`, alive until we exec or exit (CLONE_VFORK).
    let shell = unsafe { &*(arg as *const ShellStart) };
    // SAFETY: closing B's copy of I's status pipe (B has a table of fds of its own).
    unsafe { libc::close(shell.status_write) };
    restrict(shell.plan, shell.exec.error_fd);
    exec_shell(shell.exec)
}

/// Opens the window in which W (a fork of the agent, already in the command's new user
/// namespace, before any process of the command exists) is dumpable, so that it may write its
/// own id maps; the caller closes it right after. A process of the same user outside the
/// sandbox could, during these few system calls, open W's `/proc` files: so W first wipes its
/// copy of the agent's environment block and closes every fd the command does not need (the
/// agent's protocol pipes, other runs' pipes and logs). What stays is W's copy of the agent's
/// memory, which only a tracer could read (`PTRACE_MODE_ATTACH`); see
/// `notes/2026-12-01-sandbox-process.md`.
fn dumpable_window(plan: &ChildPlan, exec: &ExecArgs) {
    if let Some((start, end)) = plan.env_region {
        if end > start {
            // SAFETY: this process's own copy of the environment block, read by nothing here.
            unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
        }
    }
    let mut keep = [-1 as RawFd; 13];
    // The bridge's socket too (the proxy's listener goes back on it once the namespace is
    // up): in this window, a process of the same user could at most send the agent a listener
    // of its own, which the command cannot reach (it fails closed, without network).
    let fixed = [
        exec.error_fd,
        plan.landlock_fd,
        plan.memory_cgroup_fd,
        plan.clone_into.shell,
        plan.bridge_socket.unwrap_or(-1),
    ];
    for (slot, fd) in keep.iter_mut().zip(
        fixed
            .into_iter()
            .chain(exec.pass.iter().map(|&(from, _)| from)),
    ) {
        *slot = fd;
    }
    sys::close_all_except(&mut keep);
    // SAFETY: prctl on this process.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
}

/// `capability.h`'s CAP_SYS_PTRACE.
const CAP_SYS_PTRACE: u32 = 19;

/// `struct __user_cap_header_struct` (`_LINUX_CAPABILITY_VERSION_3`, this process).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

/// `struct __user_cap_data_struct`: one 32-bit word of each set (two for version 3).
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Takes `cap` out of every set of this process (bounding first, so no exec brings it back;
/// ambient cleared): raw `prctl` and `capget`/`capset`.
fn drop_capability(cap: u32, efd: RawFd) {
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = CapHeader {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    let word = (cap / 32) as usize;
    let bit = !(1u32 << (cap % 32));
    // SAFETY: raw syscalls on this process with buffers of the kernel's layout.
    unsafe {
        if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) < 0 {
            fail(efd, Step::DropCapabilities, errno());
        }
        if libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        ) < 0
        {
            fail(efd, Step::DropCapabilities, errno());
        }
        if let Some(word) = data.get_mut(word) {
            word.effective &= bit;
            word.permitted &= bit;
            word.inheritable &= bit;
        }
        if libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        ) < 0
        {
            fail(efd, Step::DropCapabilities, errno());
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
    }
}

/// Moves this process into the cgroup whose `tasks` file is open as `fd` (-1: none): `0` is the
/// calling thread, and this process has only that one (a raw fork), so the whole process moves,
/// without the system-wide lock a `cgroup.procs` write takes (see `cgroup.rs`).
fn join_cgroup(fd: RawFd, efd: RawFd) {
    if fd >= 0 {
        // SAFETY: write on an fd the parent opened.
        let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
        check(efd, Step::ResourceLimits, n as i64);
    }
}

/// Capabilities, limits, a fresh keyring, Landlock and seccomp, in the process that is about
/// to exec.
fn restrict(plan: &ChildPlan, efd: RawFd) {
    // B forked by I straight into its cgroup v2 folder is there already.
    if !(plan.namespaces && plan.clone_into.shell >= 0) {
        join_cgroup(plan.memory_cgroup_fd, efd);
    }
    // SAFETY: raw prctl/setrlimit/landlock syscalls.
    unsafe {
        if plan.drop_capabilities {
            if let Err(err) = drop_bounding_set() {
                fail(efd, Step::DropCapabilities, err);
            }
        }
        if plan.drop_ptrace {
            drop_capability(CAP_SYS_PTRACE, efd);
        }
        for (resource, value) in [
            (libc::RLIMIT_NPROC, plan.max_processes),
            (libc::RLIMIT_DATA, plan.max_memory),
        ] {
            if value > 0 {
                let limit = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                check(
                    efd,
                    Step::ResourceLimits,
                    libc::setrlimit(resource, &limit) as i64,
                );
            }
        }
        if plan.fresh_keyring {
            // The agent's session keyring (keys its user put there) stays behind: the command
            // and what it starts share a new, empty one. ENOSYS: a kernel without keyrings.
            let r = libc::syscall(
                libc::SYS_keyctl,
                KEYCTL_JOIN_SESSION_KEYRING,
                std::ptr::null::<libc::c_char>(),
            );
            if r < 0 && errno() != libc::ENOSYS {
                fail(efd, Step::SessionKeyring, errno());
            }
        }
        if plan.landlock_fd >= 0 || plan.seccomp.is_some() {
            check(
                efd,
                Step::NoNewPrivs,
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as i64,
            );
        }
        if plan.landlock_fd >= 0 {
            // The view's private tmpfs mounts are new inodes the parent's rules can't name.
            if let Some(view) = &plan.view {
                for dir in view.new_writable_mounts() {
                    allow_writes_beneath(plan, dir, efd);
                }
                for dir in view.overlay_targets().filter(|dir| view::is_overlay(dir)) {
                    allow_writes_beneath(plan, dir, efd);
                }
            }
            let r = libc::syscall(libc::SYS_landlock_restrict_self, plan.landlock_fd, 0u32);
            if r < 0 {
                fail(efd, Step::Landlock, errno());
            }
            libc::close(plan.landlock_fd);
        }
        // Last: every step above may use any system call.
        if let Some(programs) = plan.seccomp {
            if let Err(err) = install_seccomp(programs) {
                fail(efd, Step::Seccomp, err);
            }
        }
    }
}

/// `keyctl(2)`'s operation that joins (here: creates) a new anonymous session keyring (the one
/// `keyctl` the seccomp filter lets through).
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long =
    super::seccomp::KEYCTL_JOIN_SESSION_KEYRING as libc::c_long;

/// `struct landlock_path_beneath_attr` (packed, as in the kernel's UAPI).
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

fn allow_writes_beneath(plan: &ChildPlan, dir: &std::ffi::CStr, efd: RawFd) {
    // SAFETY: open/landlock_add_rule/close with valid arguments.
    unsafe {
        let fd = libc::open(
            dir.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
        );
        if fd < 0 {
            fail(efd, Step::Landlock, errno());
        }
        let rule = PathBeneath {
            allowed_access: plan.landlock_write_rights,
            parent_fd: fd,
        };
        let r = libc::syscall(
            libc::SYS_landlock_add_rule,
            plan.landlock_fd,
            1u32, // LANDLOCK_RULE_PATH_BENEATH
            &rule as *const PathBeneath,
            0u32,
        );
        if r < 0 {
            fail(efd, Step::Landlock, errno());
        }
        libc::close(fd);
    }
}
