//! The per-session zygote, Z (`notes/2026-12-01-session-zygote.md`): one process per session and
//! mode that holds the user, mount, UTS and IPC namespaces (and read-only mode's network one)
//! with the read-only view built once, and forks every command of that session and mode from
//! there. Z clones each command's PID 1 (I) straight into its own PID namespace and its own copy
//! of the mount namespace (`clone(CLONE_NEWPID | CLONE_NEWNS)`: no W, one fork and one exit
//! fewer than the agent's own commands, `notes/2026-12-03-zygote-clones-pid-1.md`), which then
//! goes on as every sandboxed command does (`child/`: I, then B, which joins the cgroups, sets
//! the limits, drops capabilities, joins a fresh keyring, applies Landlock and seccomp, passes
//! the fds and execs). What a command mounts lives in its copy and is gone with
//! it; its processes die with its PID namespace. The seccomp filter is the exception: Z
//! installs it on itself once, at setup when the mode's commands ask for it (with
//! `no_new_privs`), and every fork inherits it, so no command pays for loading and compiling
//! its four programs (~140 µs); nothing Z or I do is denied by it, and B's one `keyctl` is the
//! one it lets pass (`seccomp.rs`). So does a root command's capability bounding set (about 40
//! `prctl`s): Z drops it on itself once and keeps its effective capabilities, which it needs to
//! mount and clone, as only an `execve` is bounded by it.
//!
//! Z clones each command's I before the command comes (`child/spare.rs`,
//! `notes/2026-12-03-spare-pid-1.md`): right after setup and right after handing a command
//! over, it clones a spare into a new PID namespace and copy of the mount namespace, which
//! makes its process group, its mounts private, a fresh `/dev/shm` and `/proc`, says `R` on a
//! socket of its own and waits. A command then costs Z one message to the spare (its fds,
//! and the strings and arrays written into a page they share), not a clone and the spare's
//! mounts. A spare serves one command only; one that failed a step, died, or was cloned with
//! another `/proc` or filter state than the command needs is let go (its socket closes: it
//! exits), and the command is cloned fresh, which reports what fails. Only the sessions used
//! most recently keep a spare (`sandbox::warm`): the agent tells the others' Z to let theirs
//! go (a one-byte message, no answer); their next command is cloned fresh, and Z makes a spare
//! again once it is handed over.
//!
//! Z is a fresh exec of this binary (`/proc/self/exe` when `main` called
//! [`main_if_asked`], or `EngineConfig::zygote_program`) under the hidden
//! `argv[0]` [`ARGV0`], with an empty environment and no fd of the agent's but its request
//! socket: it holds no copy of the agent's memory. **Z stays single-threaded** (no runtime, no
//! thread is ever started in it), so its forks may run the async-signal-safe code of
//! `child/` exactly as the agent's forks do; it is never landlocked itself (it must mount and
//! fork into the view), and it never runs command code.
//!
//! Protocol (`zygote_wire.rs`), over a `SOCK_SEQPACKET` socketpair: the agent sends the setup
//! (ids, which namespaces, the view; read-only's prepared network namespace as an fd); Z
//! answers `R` or a step's 8-byte error record. Then one message per command (argv, envp,
//! cwd, limits; its fds as `SCM_RIGHTS`: the error pipe, the status pipe, the output, the
//! Landlock ruleset, the cgroups, the passed fds); Z answers I's pid (the agent's PID
//! namespace sees it: Z makes no PID namespace of its own) or `-errno`. I writes the shell's
//! wait status to the status pipe as soon as the shell has ended: the agent is not I's parent,
//! so that pipe is how it learns the status (its end without a status means I was killed).
//!
//! Lifetime: Z ends when its socket closes (the session dropped or ended its [`Zygotes`]: it is
//! idle, or beyond the bound of sessions that keep theirs, `sandbox::warm`; or the agent
//! died) and on the spawner thread's death (`PR_SET_PDEATHSIG`, so also on SIGKILL of the
//! agent); every I has `PR_SET_PDEATHSIG(SIGKILL)` on Z, checked against a pidfd of Z (in its
//! own PID namespace, `getppid()` is 0). A new setup for a
//! mode (the session's roots, masks or Git repositories changed) replaces that mode's Z.
//!
//! The agent's side runs on the spawner thread only (it forks Z there, so Z's parent-death
//! signal is tied to that long-lived thread).

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::child::spare::{Handoff, SpareArgs, REGION};
use super::child::{self, ChildPlan, ExecArgs};
use super::spawn::{cstring, null_terminated, pipe, read_full, Request};
use super::step::{Step, StepError};
use super::zygote_wire::{self as wire, Reader, Writer, LET_SPARE_GO, MAX_MESSAGE, PROTOCOL};
use super::Prepared;
use crate::sandbox::Mode;

/// The zygote's `argv[0]`: `main` checks it before anything else.
pub(crate) const ARGV0: &str = "__acp-bash-sandbox-zygote";

static SELF_SERVES: AtomicBool = AtomicBool::new(false);

/// Runs the zygote and exits when this process was started as one; otherwise notes that this
/// binary can serve as its own zygote and returns.
pub(crate) fn main_if_asked() {
    let mut args = std::env::args_os();
    if args.next().as_deref() != Some(OsStr::new(ARGV0)) {
        SELF_SERVES.store(true, Ordering::Relaxed);
        return;
    }
    let protocol = args.next();
    if protocol.as_deref() != Some(OsStr::new(PROTOCOL)) {
        eprintln!(
            "acp-bash: this binary's zygote speaks {PROTOCOL}, not {:?}: an agent of another build started it",
            protocol.unwrap_or_default()
        );
        std::process::exit(2);
    }
    std::process::exit(zygote_main());
}

/// The program to start as the zygote (`configured`, else this one if it serves), or why
/// there is none.
pub(crate) fn program(configured: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(program) = configured {
        return Ok(program.to_path_buf());
    }
    if SELF_SERVES.load(Ordering::Relaxed) {
        return Ok(PathBuf::from("/proc/self/exe"));
    }
    Err(
        "this program does not serve as the sandbox's zygote (an embedder calls \
         `acp_bash::sandbox::zygote_main_if_asked()` first thing in `main`, or sets \
         `EngineConfig::zygote_program`)"
            .to_string(),
    )
}

/// Whether commands with `plan` can come from a zygote: they have a user namespace and the
/// view (workspace and read-only modes where those work).
pub(crate) fn suits(plan: &ChildPlan) -> bool {
    plan.namespaces
        && plan.user_namespace
        && plan.view.as_ref().is_some_and(|view| !view.one_command)
        && !plan.reaper
}

/// A session's zygotes, at most one per mode (an entry whose start failed is kept, so that
/// the session does not try again for every command).
#[derive(Default)]
pub(crate) struct Zygotes {
    entries: Vec<(Mode, Vec<u8>, Option<Zygote>)>,
}

impl Zygotes {
    /// The pids of the running zygotes (for tests and `doctor`).
    pub(crate) fn pids(&self) -> Vec<i32> {
        self.entries
            .iter()
            .filter_map(|(_, _, z)| z.as_ref().map(|z| z.pid))
            .collect()
    }

    /// Ends every zygote (and so its spare) of the session, and forgets the starts that
    /// failed: its next command starts one as its first did (`sandbox::warm`).
    pub(crate) fn end(&mut self) {
        self.entries.clear();
    }

    /// Tells every zygote of the session that keeps a spare PID 1 to let it go (its socket
    /// closes: the spare exits) and to make none until its next command, which Z then clones
    /// fresh, as when a spare was used up (`sandbox::warm`). The zygotes stay.
    pub(crate) fn let_spares_go(&mut self) {
        for zygote in self.entries.iter_mut().filter_map(|(_, _, z)| z.as_mut()) {
            if !zygote.spare {
                continue;
            }
            let Some(socket) = zygote.socket.as_ref() else {
                continue;
            };
            match wire::send(socket.as_fd(), LET_SPARE_GO, &[]) {
                Ok(()) => zygote.spare = false,
                // Z is gone: the next command finds out and starts a new one.
                Err(error) => tracing::debug!(%error, "the session's zygote is gone"),
            }
        }
    }
}

/// One running zygote: the agent's end of its socket, and its pid (reaped once it ends).
struct Zygote {
    socket: Option<OwnedFd>,
    pid: libc::pid_t,
    /// Whether Z keeps (or is making) a spare PID 1: from its setup and after each command,
    /// until it is told [`LET_SPARE_GO`].
    spare: bool,
    /// Workspace mode's bridge: the proxy serving a listener in Z's network namespace, for
    /// every command of the session (closed with Z).
    serving: Option<crate::netproxy::Serving>,
}

impl Drop for Zygote {
    fn drop(&mut self) {
        // Z reads EOF and exits; its forks have their parent-death signal on it.
        drop(self.socket.take());
        let pid = self.pid;
        let reaper = std::thread::Builder::new()
            .name("acp-bash-zygote-reap".into())
            .spawn(move || {
                let mut status = 0;
                // SAFETY: waitpid on our own child.
                while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
                    && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
                {
                }
            });
        if let Err(error) = reaper {
            tracing::debug!(%error, "no thread to reap the zygote");
        }
    }
}

/// The setup message for `plan` (which [`suits`]); without `with_work`, what decides whether
/// a running zygote still fits (the view but for the overlays' per-command work folders).
fn setup_message(plan: &ChildPlan, with_work: bool) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(u8::from(plan.parent_maps_ids));
    w.u32(plan.uid);
    w.u32(plan.gid);
    w.u8(u8::from(plan.private_ipc_uts));
    w.u8(u8::from(plan.network_namespace));
    // What every command of this mode asks for: Z mounts their /proc in its spares, and
    // installs the filter and drops a root command's bounding set on itself once, at setup.
    w.u8(u8::from(plan.private_proc));
    w.u8(u8::from(plan.seccomp.is_some()));
    w.u8(u8::from(plan.drop_capabilities));
    if let Some(view) = &plan.view {
        wire::write_view(&mut w, view, with_work);
    }
    w.0
}

/// What a running zygote must match to serve a command: its setup (without the caches' work
/// folders) and the host inodes its view was mounted on ([`View::mounted_inodes`]), so that a
/// mask or read-only bind the host detached by replacing its file gets a new zygote.
///
/// [`View::mounted_inodes`]: super::child::view::View::mounted_inodes
fn zygote_key(plan: &ChildPlan) -> Vec<u8> {
    let mut key = setup_message(plan, false);
    for (dev, ino) in plan.view.iter().flat_map(|view| &view.mounted_inodes) {
        key.extend_from_slice(&dev.to_le_bytes());
        key.extend_from_slice(&ino.to_le_bytes());
    }
    key
}

/// Starts a zygote and sends it `setup`; returns once its namespaces and view are built, with
/// the proxy's listener Z made in its network namespace where the setup asked for one.
fn start(program: &Path, setup: &[u8], netns_fd: RawFd) -> io::Result<(Zygote, Option<OwnedFd>)> {
    // The zygote's commands join their cgroup v2 folders by a write to `cgroup.procs`, which
    // an ordinary user may make only within the delegated subtree: so the agent moves into its
    // scope first, and the zygote is forked there (a no-op where cgroup v1 serves the limits,
    // or once the subtree is set up).
    super::cgroup_v2_now();
    let program = cstring(program.as_os_str().as_bytes())?;
    let argv0 = cstring(ARGV0.as_bytes())?;
    let protocol = cstring(PROTOCOL.as_bytes())?;
    let mut pair = [-1; 2];
    // SAFETY: socketpair into a local array.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two new fds we own.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    let exec = child::zygote::ZygoteExec {
        program,
        argv: [argv0.as_ptr(), protocol.as_ptr(), std::ptr::null()],
        socket: theirs.as_raw_fd(),
        null: null.as_raw_fd(),
        parent: std::process::id() as libc::pid_t,
    };
    // SAFETY: all signals blocked around the fork so no handler of the agent runs in the
    // child before it resets them; the child only makes raw system calls on `exec`.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = child::sys::raw_fork();
        if pid == 0 {
            child::zygote::exec(&exec);
        }
        let error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(error);
        }
        pid
    };
    drop(theirs);
    let zygote = Zygote {
        serving: None,
        socket: Some(ours),
        pid,
        spare: true,
    };
    let socket = zygote
        .socket
        .as_ref()
        .map(|s| s.as_fd())
        .ok_or_else(|| io::Error::other("no socket"))?;
    let fds: Vec<RawFd> = (netns_fd >= 0).then_some(netns_fd).into_iter().collect();
    wire::send(socket, setup, &fds)?;
    let mut reply = [0u8; 8];
    let (n, mut fds) = wire::recv(socket, &mut reply)?;
    match n {
        1 if reply[0] == b'R' => Ok((zygote, fds.pop())),
        8 => {
            let error = StepError::decode(reply);
            Err(io::Error::new(error.io_error().kind(), error))
        }
        _ => Err(io::Error::other(
            "the sandbox's zygote ended while building the session's namespaces",
        )),
    }
}

/// Starts `request` with `plan` from the session's zygote for `mode` (starting it first if
/// needed): the pid to signal and whose group to kill, and the pipe its status comes on.
/// `None`: no zygote serves this command (it does not [`suits`], none can be started here, or
/// the zygote is gone): the caller takes the per-command path.
pub(crate) fn spawn(
    zygotes: &mut Zygotes,
    program: Option<&Path>,
    prepared: &Prepared,
    request: &Request,
    network: Option<&crate::netproxy::SessionNetwork>,
) -> Option<io::Result<(libc::pid_t, OwnedFd)>> {
    let index = ready(zygotes, program, prepared, network)?;
    let zygote = zygotes.entries[index].2.as_mut()?;
    match command(zygote, request, &prepared.plan) {
        Some(result) => {
            // Z makes its next command's spare once this one is handed over.
            zygote.spare = true;
            Some(result)
        }
        None => {
            // Z is gone (killed, or it failed): the next command starts a new one.
            zygotes.entries.remove(index);
            None
        }
    }
}

/// Starts the session's zygote for `prepared`'s mode and view now, if none that fits runs
/// (`notes/2026-12-02-zygote-first-command.md`): the session's first command then finds it
/// built. The command still plans and compares as [`spawn`] does, so a zygote planned here
/// that no longer fits (a credential file appeared meanwhile) is replaced then.
pub(crate) fn start_early(
    zygotes: &mut Zygotes,
    program: Option<&Path>,
    prepared: &Prepared,
    network: Option<&crate::netproxy::SessionNetwork>,
) {
    let _ = ready(zygotes, program, prepared, network);
}

/// The index of the session's entry for `prepared` (its zygote started now if none fits), or
/// `None` where no zygote serves these commands.
fn ready(
    zygotes: &mut Zygotes,
    program: Option<&Path>,
    prepared: &Prepared,
    network: Option<&crate::netproxy::SessionNetwork>,
) -> Option<usize> {
    let (plan, mode) = (&prepared.plan, prepared.mode);
    if !suits(plan) {
        return None;
    }
    let program = self::program(program).ok()?;
    // What the zygote is for: the same view (the session's roots, masks, Git repositories and
    // the host's sockets as they are now) and ids; anything else starts a new one.
    let key = zygote_key(plan);
    match zygotes.entries.iter().position(|(m, _, _)| *m == mode) {
        Some(i) if zygotes.entries[i].1 == key => Some(i),
        found => {
            if let Some(i) = found {
                zygotes.entries.remove(i);
            }
            // Z mounts the view: read-only's network namespace is taken now (not by each
            // command), and a reused view gets fresh work folders for the caches' overlays.
            let netns = prepared.network_namespace_to_join();
            // Workspace mode's allowlist: the proxy's listener in Z's namespace, made before Z
            // starts; without it, no zygote (the per-command path fails the command clearly).
            let bridge = match super::bridge(prepared, netns.as_ref(), network) {
                Ok(bridge) => bridge,
                Err(error) => {
                    tracing::debug!(%error, "no bridge to the proxy for a zygote");
                    return None;
                }
            };
            let mut setup = setup_message(&prepared.plan_to_mount(netns.as_ref()), true);
            // Last: whether Z makes the proxy's listener in the namespace it creates.
            let from_z = matches!(bridge, super::Bridge::FromChild(_));
            setup.push(u8::from(from_z));
            if setup.len() > MAX_MESSAGE {
                return None;
            }
            let netns_fd = netns.as_ref().map_or(-1, |fd| fd.as_raw_fd());
            let started = start(&program, &setup, netns_fd).and_then(|(mut zygote, listener)| {
                zygote.serving = match (bridge, listener) {
                    (super::Bridge::Serving(serving), _) => Some(serving),
                    (super::Bridge::FromChild(network), Some(listener)) => {
                        Some(network.serve(std::net::TcpListener::from(listener))?)
                    }
                    (super::Bridge::FromChild(_), None) => {
                        return Err(io::Error::other("the zygote passed no proxy listener"));
                    }
                    (super::Bridge::None, _) => None,
                };
                Ok(zygote)
            });
            if let Err(error) = &started {
                tracing::debug!(%error, %mode, "no zygote for this session: its commands build their own namespaces");
            }
            zygotes.entries.push((mode, key, started.ok()));
            Some(zygotes.entries.len() - 1)
        }
    }
}

/// Sends one command to `zygote`. `None`: the zygote did not answer.
fn command(
    zygote: &Zygote,
    request: &Request,
    plan: &ChildPlan,
) -> Option<io::Result<(libc::pid_t, OwnedFd)>> {
    let socket = zygote.socket.as_ref()?.as_fd();
    let mut w = Writer::default();
    w.u64(plan.max_processes);
    w.u64(plan.max_memory);
    w.u64(plan.landlock_write_rights);
    let flags = u32::from(plan.drop_capabilities)
        | u32::from(plan.fresh_keyring) << 1
        | u32::from(plan.seccomp.is_some()) << 2
        | u32::from(plan.private_proc) << 3
        | u32::from(plan.landlock_fd >= 0) << 4
        | u32::from(plan.pids_cgroup_fd >= 0) << 5
        | u32::from(plan.memory_cgroup_fd >= 0) << 6;
    w.u32(flags);
    w.bytes(request.launch.program.as_os_str().as_bytes());
    w.bytes(request.cwd.as_os_str().as_bytes());
    w.u32(request.launch.args.len() as u32);
    for arg in &request.launch.args {
        w.bytes(arg.as_bytes());
    }
    w.u32(request.env.len() as u32);
    for (name, value) in request.env {
        let mut pair = name.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        w.bytes(&pair);
    }
    w.u32(request.pass.len() as u32);
    for &(_, target) in request.pass {
        w.u32(target as u32);
    }
    if w.0.len() > MAX_MESSAGE || request.pass.len() > 8 {
        return None;
    }
    let pipes = pipe().and_then(|errors| Ok((errors, pipe()?)));
    let ((error_read, error_write), (status_read, status_write)) = match pipes {
        Ok(pipes) => pipes,
        Err(error) => return Some(Err(error)),
    };
    let mut fds = vec![
        error_write.as_raw_fd(),
        status_write.as_raw_fd(),
        request.output,
    ];
    for fd in [plan.landlock_fd, plan.pids_cgroup_fd, plan.memory_cgroup_fd] {
        if fd >= 0 {
            fds.push(fd);
        }
    }
    fds.extend(request.pass.iter().map(|&(source, _)| source));
    if let Err(error) = wire::send(socket, &w.0, &fds) {
        tracing::debug!(%error, "the session's zygote is gone");
        return None;
    }
    drop((error_write, status_write));
    let mut reply = [0u8; 4];
    let pid = match wire::recv(socket, &mut reply) {
        Ok((4, _)) => i32::from_le_bytes(reply),
        _ => return None,
    };
    if pid < 0 {
        return Some(Err(io::Error::from_raw_os_error(-pid)));
    }
    let mut record = [0u8; 8];
    if read_full(&error_read, &mut record) == 0 {
        return Some(Ok((pid, status_read)));
    }
    // W reported a failed step and exits; Z reaps it.
    let error = StepError::decode(record);
    Some(Err(io::Error::new(error.io_error().kind(), error)))
}

// ---- Z's side -----------------------------------------------------------------------------

/// Z's main: builds the namespaces and the view from the setup, then serves commands until
/// its socket closes. Single-threaded throughout.
fn zygote_main() -> i32 {
    // SAFETY: fd 3 is the socket the agent's fork put there (checked below); everything else
    // above stderr is closed.
    let socket = unsafe {
        if libc::fcntl(3, libc::F_GETFD) < 0 {
            eprintln!("acp-bash: the sandbox's zygote has no request socket (fd 3)");
            return 2;
        }
        libc::fcntl(3, libc::F_SETFD, libc::FD_CLOEXEC);
        child::sys::close_from(4, true);
        libc::prctl(libc::PR_SET_NAME, c"acp-bash-zygote".as_ptr(), 0, 0, 0);
        // Every disposition back to the default once (the Rust runtime ignores SIGPIPE and
        // handles SIGSEGV and SIGBUS): from here on Z changes only SIGCHLD, which is what its
        // forks restore (`child::sys::reset_signals_in_zygote_fork`).
        child::sys::reset_signals();
        OwnedFd::from_raw_fd(3)
    };
    let mut buf = vec![0u8; MAX_MESSAGE + 1];
    let Ok((n, mut fds)) = wire::recv(socket.as_fd(), &mut buf) else {
        return 1;
    };
    let Some((mut plan, netns, filter, bridge)) = read_setup(&buf[..n], fds.pop()) else {
        return 1;
    };
    enter(&plan, netns.as_ref(), socket.as_raw_fd());
    // Workspace mode's bridge where the agent cannot enter this namespace (an ordinary
    // user's): the proxy's listener, made here and sent with the ready message.
    let listener = if bridge && plan.network_namespace && netns.is_none() {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], crate::netproxy::PROXY_PORT));
        match std::net::TcpListener::bind(addr) {
            Ok(listener) => Some(listener),
            Err(error) => child::sys::fail(
                socket.as_raw_fd(),
                Step::ProxyBridge,
                error.raw_os_error().unwrap_or(libc::EIO),
            ),
        }
    } else {
        None
    };
    drop(netns);
    // Each command's I checks this, once its parent-death signal is armed, to know that Z was
    // still there when it armed it (a pidfd turns readable when its process exits).
    let own_pidfd = match own_pidfd() {
        Ok(fd) => fd,
        Err(error) => child::sys::fail(
            socket.as_raw_fd(),
            Step::ParentDeathSignal,
            error.raw_os_error().unwrap_or(libc::ENOSYS),
        ),
    };
    // The filter and the bounding set once, on Z itself, before any command or spare: every
    // fork inherits them (where this fails, each command does it itself and reports it).
    let filtered = filter && super::seccomp::programs().as_ref().is_ok_and(filter_self);
    let bounded = plan.drop_capabilities && child::drop_bounding_set().is_ok();
    let mut state = (filtered, bounded);
    let passed: Vec<RawFd> = listener.iter().map(|l| l.as_raw_fd()).collect();
    let view_ready = wire::send(socket.as_fd(), b"R", &passed);
    drop(listener);
    if view_ready.is_err() {
        return 1;
    }
    // Forks end on their own (each reports on its status pipe): the kernel reaps them.
    // SAFETY: setting a signal disposition in this single-threaded process.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
    let null = 0; // stdin, /dev/null since the exec
    let mut spare: Option<Spare> = None;
    let mut want_spare = true;
    loop {
        if spare.is_none() && want_spare {
            // The next command's PID 1, made while this session waits or its last command
            // runs (`child/spare.rs`).
            spare = Spare::start(&mut plan, own_pidfd.as_raw_fd(), state);
        }
        let (n, fds) = match wire::recv(socket.as_fd(), &mut buf) {
            Ok((0, _)) => return 0, // the session (or the agent) is gone
            Ok(got) => got,
            Err(_) => return 1,
        };
        if &buf[..n] == LET_SPARE_GO {
            // Other sessions were used since: the spare goes (its socket closes, it exits),
            // and the next command is cloned fresh. No answer.
            spare = None;
            want_spare = false;
            continue;
        }
        want_spare = true;
        let served = serve_one(
            &mut plan,
            &buf[..n],
            fds,
            null,
            own_pidfd.as_raw_fd(),
            (&mut state.0, &mut state.1),
            &mut spare,
        );
        let reply = match served {
            Ok(pid) => pid,
            Err(errno) => -errno,
        };
        if wire::send(socket.as_fd(), &reply.to_le_bytes(), &[]).is_err() {
            return 1;
        }
    }
}

/// A pidfd of this process (`pidfd_open`, Linux 5.3): a zygote needs one for its commands
/// (`ExecArgs::parent_pidfd`), so where this fails no zygote can serve (`doctor` says so).
pub(crate) fn own_pidfd() -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open of this process.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fd pidfd_open just returned, owned from now on.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The plan every fork starts from, read-only's prepared network namespace, whether the
/// mode's commands ask for the seccomp filter (the plan's `drop_capabilities` says whether they
/// drop a root command's bounding set), and whether Z makes the proxy's listener.
fn read_setup(
    bytes: &[u8],
    netns: Option<OwnedFd>,
) -> Option<(ChildPlan, Option<OwnedFd>, bool, bool)> {
    let mut r = Reader(bytes);
    let parent_maps_ids = r.u8()? != 0;
    let uid = r.u32()?;
    let gid = r.u32()?;
    let private_ipc_uts = r.u8()? != 0;
    let network_namespace = r.u8()? != 0;
    let private_proc = r.u8()? != 0;
    let filter = r.u8()? != 0;
    let bound = r.u8()? != 0;
    let view = wire::read_view(&mut r)?;
    let bridge = r.u8()? != 0;
    let plan = ChildPlan {
        namespaces: true,
        user_namespace: true,
        private_ipc_uts,
        parent_maps_ids,
        uid,
        gid,
        network_namespace,
        netns_fd: -1,
        private_proc,
        drop_capabilities: bound,
        view: Some(view),
        landlock_fd: -1,
        pids_cgroup_fd: -1,
        memory_cgroup_fd: -1,
        in_zygote: true,
        ..ChildPlan::default()
    };
    Some((plan, netns, filter, bridge))
}

/// Z enters its namespaces and builds the view; a failed step is reported on `efd` (the
/// socket, as an 8-byte record) and ends Z.
fn enter(plan: &ChildPlan, netns: Option<&OwnedFd>, efd: RawFd) {
    use child::sys::{check, fail, write_file, write_id_map};
    // SAFETY: plain system calls in this single-threaded process.
    unsafe {
        if let Some(netns) = netns {
            check(
                efd,
                Step::JoinNetworkNamespace,
                libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) as i64,
            );
        }
        let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS;
        if plan.private_ipc_uts {
            flags |= libc::CLONE_NEWUTS | libc::CLONE_NEWIPC;
        }
        let new_netns = plan.network_namespace && netns.is_none();
        if new_netns {
            flags |= libc::CLONE_NEWNET;
        }
        if plan.parent_maps_ids {
            // Root's identity map of every id needs CAP_SETUID in the parent namespace: a
            // helper forked before the unshare (still there) writes it.
            let me = libc::getpid();
            let (wait, tell) = match pipe() {
                Ok(p) => p,
                Err(e) => fail(efd, Step::UidMap, e.raw_os_error().unwrap_or(libc::EIO)),
            };
            let helper = libc::fork();
            check(efd, Step::UidMap, helper as i64);
            if helper == 0 {
                drop(tell);
                let mut byte = [0u8; 1];
                if read_full(&wait, &mut byte) != 1 {
                    libc::_exit(1);
                }
                // Every id this namespace has, mapped to itself (see `identity_maps`).
                let ok = super::spawn::identity_maps().and_then(|(uids, gids)| {
                    std::fs::write(format!("/proc/{me}/uid_map"), uids)?;
                    std::fs::write(format!("/proc/{me}/gid_map"), gids)
                });
                libc::_exit(i32::from(ok.is_err()));
            }
            drop(wait);
            let unshared = libc::unshare(flags);
            let unshare_errno = child::sys::errno();
            let _ = libc::write(tell.as_raw_fd(), b"u".as_ptr().cast(), 1);
            drop(tell);
            let mut status = 0;
            while libc::waitpid(helper, &mut status, 0) < 0 && child::sys::errno() == libc::EINTR {}
            if unshared < 0 {
                fail(efd, Step::Unshare, unshare_errno);
            }
            if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
                fail(efd, Step::UidMap, libc::EPERM);
            }
        } else {
            check(efd, Step::Unshare, libc::unshare(flags) as i64);
            check(
                efd,
                Step::Setgroups,
                write_file(b"/proc/self/setgroups\0", b"deny") as i64,
            );
            check(
                efd,
                Step::UidMap,
                write_id_map(b"/proc/self/uid_map\0", plan.uid, plan.uid, 1) as i64,
            );
            check(
                efd,
                Step::GidMap,
                write_id_map(b"/proc/self/gid_map\0", plan.gid, plan.gid, 1) as i64,
            );
        }
        // Not readable or traceable by the user's other processes from here on.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        check(
            efd,
            Step::PrivateMounts,
            child::sys::make_mounts_private() as i64,
        );
        if new_netns {
            child::sys::loopback_up();
        }
    }
    if let Some(view) = &plan.view {
        child::view::build(view, efd);
    }
}

/// Installs the seccomp programs on this process (Z), after `no_new_privs`; `false` when any
/// step failed (then each command installs them itself, as before, and reports the failure).
fn filter_self(programs: &super::seccomp::Programs) -> bool {
    // SAFETY: prctl on this process.
    let no_new_privs = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0;
    no_new_privs && child::install_seccomp(programs).is_ok()
}

/// Forks one command from a request; returns its pid, or an errno. `filtered`, `bounded`:
/// whether Z has the seccomp filter in force already, and its bounding set dropped (its first
/// command that asks for them does both on Z itself, once).
fn serve_one(
    plan: &mut ChildPlan,
    bytes: &[u8],
    fds: Vec<OwnedFd>,
    null: RawFd,
    own_pidfd: RawFd,
    (filtered, bounded): (&mut bool, &mut bool),
    spare: &mut Option<Spare>,
) -> Result<i32, i32> {
    let mut r = Reader(bytes);
    let mut parse = || -> Option<_> {
        let max_processes = r.u64()?;
        let max_memory = r.u64()?;
        let write_rights = r.u64()?;
        let flags = r.u32()?;
        let program = r.cstr()?;
        let cwd = r.cstr()?;
        let argc = r.u32()? as usize;
        let mut args = Vec::new();
        for _ in 0..argc.min(bytes.len()) {
            args.push(r.cstr()?);
        }
        let envc = r.u32()? as usize;
        let mut env = Vec::new();
        for _ in 0..envc.min(bytes.len()) {
            env.push(r.cstr()?);
        }
        let passc = r.u32()? as usize;
        let mut targets = Vec::new();
        for _ in 0..passc.min(8) {
            targets.push(r.u32()? as RawFd);
        }
        Some((
            max_processes,
            max_memory,
            write_rights,
            flags,
            program,
            cwd,
            args,
            env,
            targets,
        ))
    };
    let (max_processes, max_memory, write_rights, flags, program, cwd, args, env, targets) =
        parse().ok_or(libc::EINVAL)?;
    let bit = |n: u32| flags & (1 << n) != 0;
    let mut fds = fds.into_iter();
    let mut next = || fds.next().ok_or(libc::EBADF);
    let error_fd = next()?;
    let status_fd = next()?;
    let output = next()?;
    let landlock = if bit(4) { Some(next()?) } else { None };
    let pids = if bit(5) { Some(next()?) } else { None };
    let memory = if bit(6) { Some(next()?) } else { None };
    let mut pass = Vec::new();
    for &target in &targets {
        pass.push((next()?, target));
    }
    let seccomp = if bit(2) {
        let programs = super::seccomp::programs()
            .as_ref()
            .map_err(|_| libc::ENOSYS)?;
        if !*filtered {
            *filtered = filter_self(programs);
        }
        // In force since Z installed it: the fork inherits it, and installing it again would
        // only make every system call run it twice.
        (!*filtered).then_some(programs)
    } else {
        None
    };
    plan.max_processes = max_processes;
    plan.max_memory = max_memory;
    plan.landlock_write_rights = write_rights;
    if bit(0) && !*bounded {
        *bounded = child::drop_bounding_set().is_ok();
    }
    // Z's bounding and ambient sets are the command's: inherited, nothing left to drop (where
    // Z could not drop them, the command does, and reports a failure as before).
    plan.drop_capabilities = bit(0) && !*bounded;
    plan.fresh_keyring = bit(1);
    plan.seccomp = seccomp;
    plan.private_proc = bit(3);
    let raw = |fd: &Option<OwnedFd>| fd.as_ref().map_or(-1, |fd| fd.as_raw_fd());
    plan.landlock_fd = raw(&landlock);
    plan.pids_cgroup_fd = raw(&pids);
    plan.memory_cgroup_fd = raw(&memory);
    let mut argv = vec![program.clone()];
    argv.extend(args);
    if let Some(ready) = spare.take() {
        // The spare was cloned with Z's filter and bounding set as they were then: what the
        // command still does itself follows from those.
        let handoff = Handoff {
            max_processes,
            max_memory,
            landlock_write_rights: write_rights,
            drop_capabilities: u8::from(bit(0) && !ready.bounded),
            fresh_keyring: u8::from(bit(1)),
            install_seccomp: u8::from(bit(2) && !ready.filtered),
            landlock: u8::from(landlock.is_some()),
            pids_cgroup: u8::from(pids.is_some()),
            memory_cgroup: u8::from(memory.is_some()),
            pass_count: pass.len() as u32,
            pass_targets: [-1; 8],
            program: std::ptr::null(),
            cwd: std::ptr::null(),
            argv: std::ptr::null(),
            argv_len: 0,
            envp: std::ptr::null(),
            envp_len: 0,
        };
        let fits =
            ready.private_proc == bit(3) && (handoff.install_seccomp == 0 || ready.has_programs);
        if fits {
            let mut sent = vec![
                error_fd.as_raw_fd(),
                status_fd.as_raw_fd(),
                output.as_raw_fd(),
            ];
            sent.extend(
                [&landlock, &pids, &memory]
                    .into_iter()
                    .flatten()
                    .map(|fd| fd.as_raw_fd()),
            );
            let mut targets = [-1; 8];
            for ((fd, target), slot) in pass.iter().zip(targets.iter_mut()) {
                sent.push(fd.as_raw_fd());
                *slot = *target;
            }
            let handoff = Handoff {
                pass_targets: targets,
                ..handoff
            };
            if let Some(pid) = ready.hand_over(handoff, &argv, &env, &cwd, &sent) {
                return Ok(pid);
            }
        }
        // Not this one (dropped: its socket closes and it exits): a fresh clone below.
    }
    let (argv_ptrs, envp) = (null_terminated(&argv), null_terminated(&env));
    let pass: Vec<_> = pass
        .iter()
        .map(|(fd, target)| (fd.as_raw_fd(), *target))
        .collect();
    let exec = ExecArgs {
        argv: &argv_ptrs,
        envp: &envp,
        program: &program,
        cwd: &cwd,
        stdin: null,
        output: output.as_raw_fd(),
        pass: &pass,
        // SAFETY: plain getter.
        parent: unsafe { libc::getpid() },
        error_fd: error_fd.as_raw_fd(),
        map_sync: (-1, -1),
        map_sync_unused: (-1, -1),
        probe: false,
        status_fd: status_fd.as_raw_fd(),
        // Z leads a session of its own with no terminal (`child::zygote`), and never opens
        // one without `O_NOCTTY`.
        new_session: false,
        parent_pidfd: own_pidfd,
    };
    let pid = child::sys::raw_clone(libc::CLONE_NEWPID | libc::CLONE_NEWNS);
    if pid == 0 {
        child::program(&exec, Some(plan));
    }
    if pid < 0 {
        return Err(child::sys::errno());
    }
    Ok(pid)
}

/// A spare PID 1 for the next command (`child/spare.rs`), Z's end of its socket and of the
/// region the command is handed over in.
struct Spare {
    pid: libc::pid_t,
    socket: OwnedFd,
    region: *mut u8,
    /// Z's filter and bounding set were in force when it was cloned (it inherited them).
    filtered: bool,
    bounded: bool,
    /// It mounted a fresh `/proc`.
    private_proc: bool,
    /// It holds the seccomp programs, to install them itself.
    has_programs: bool,
}

impl Drop for Spare {
    fn drop(&mut self) {
        // SAFETY: unmapping Z's mapping of the region (the spare has its own); its socket
        // closes after this, and a spare still waiting then reads the end and exits.
        unsafe { libc::munmap(self.region.cast(), REGION) };
    }
}

impl Spare {
    /// Clones a spare with `plan` (Z's, as its commands find it) and Z's `(filtered, bounded)`
    /// state; `None` where a step here failed (then the next command is cloned fresh, and
    /// reports whatever fails).
    fn start(
        plan: &mut ChildPlan,
        own_pidfd: RawFd,
        (filtered, bounded): (bool, bool),
    ) -> Option<Spare> {
        let mut pair = [-1; 2];
        // SAFETY: socketpair into a local array.
        let paired = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        };
        if paired != 0 {
            return None;
        }
        // SAFETY: two new fds we own.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        // SAFETY: a new shared anonymous mapping, unmapped by `Spare`'s drop.
        let region = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                REGION,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if region == libc::MAP_FAILED {
            return None;
        }
        let seccomp = if filtered {
            None
        } else {
            super::seccomp::programs().as_ref().ok()
        };
        let args = SpareArgs {
            socket: theirs.as_raw_fd(),
            region: region as *const Handoff,
            // SAFETY: plain getter.
            parent: unsafe { libc::getpid() },
            parent_pidfd: own_pidfd,
            seccomp,
        };
        let private_proc = plan.private_proc;
        let pid = child::sys::raw_clone(libc::CLONE_NEWPID | libc::CLONE_NEWNS);
        if pid == 0 {
            child::spare::run(plan, &args);
        }
        drop(theirs);
        let spare = Spare {
            pid,
            socket: ours,
            region: region.cast(),
            filtered,
            bounded,
            private_proc,
            has_programs: seccomp.is_some(),
        };
        (pid > 0).then_some(spare)
    }

    /// Hands one command to this spare: writes `handoff` with its strings into the region,
    /// then sends its fds. `None`: the spare failed a step or is gone (its failure is the
    /// fresh clone's to report).
    fn hand_over(
        self,
        mut handoff: Handoff,
        argv: &[CString],
        env: &[CString],
        cwd: &CStr,
        fds: &[RawFd],
    ) -> Option<i32> {
        let mut ready = [0u8; 8];
        match wire::recv(self.socket.as_fd(), &mut ready) {
            Ok((1, _)) if ready[0] == b'R' => {}
            _ => return None, // a failed step's record, or its end
        }
        let pointers = argv.len() + 1 + env.len() + 1;
        let header = std::mem::size_of::<Handoff>().next_multiple_of(8);
        let strings: usize = argv
            .iter()
            .chain(env)
            .map(|s| s.as_bytes_with_nul().len())
            .sum::<usize>()
            + cwd.to_bytes_with_nul().len();
        if header + pointers * 8 + strings > REGION {
            return None;
        }
        let base = self.region;
        // SAFETY: every write below lands inside the region (sized just above), which only Z
        // writes until the spare has the message sent after them.
        unsafe {
            let table = base.add(header) as *mut *const libc::c_char;
            let mut text = base.add(header + pointers * 8);
            let mut put = |s: &CStr| -> *const libc::c_char {
                let bytes = s.to_bytes_with_nul();
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), text, bytes.len());
                let at = text as *const libc::c_char;
                text = text.add(bytes.len());
                at
            };
            let mut slot = 0;
            for s in argv {
                *table.add(slot) = put(s);
                slot += 1;
            }
            *table.add(slot) = std::ptr::null();
            slot += 1;
            handoff.argv = table;
            handoff.argv_len = argv.len() + 1;
            handoff.program = *table;
            handoff.envp = table.add(slot);
            handoff.envp_len = env.len() + 1;
            for s in env {
                *table.add(slot) = put(s);
                slot += 1;
            }
            *table.add(slot) = std::ptr::null();
            handoff.cwd = put(cwd);
            std::ptr::write(base as *mut Handoff, handoff);
        }
        wire::send(self.socket.as_fd(), b"G", fds).ok()?;
        Some(self.pid)
    }
}
