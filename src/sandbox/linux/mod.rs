//! Linux layers: Landlock rulesets built in the parent ([`landlock`]), namespaces and the
//! filesystem view entered in the child ([`child`], started by [`spawn`]; the view planned in
//! [`view_plan`]), read-only mode's network namespaces ([`netns`]), and real probes of what this
//! kernel allows ([`probe`]). This file ties them into the per-command [`Prepared`] plan and
//! implements the sandbox's platform contract for Linux ([`Linux`]).

mod cgroup;
pub(crate) mod cgroup_v2;
pub(crate) mod child;
pub(crate) mod child_process;
pub(crate) mod confine;
pub(crate) mod diagnose;
mod landlock;
mod netns;
mod plan_cache;
mod probe;
pub(crate) mod report;
mod sealed;
pub(crate) mod seccomp;
pub(crate) mod spawn;
pub mod step;
pub(crate) mod support;
pub(crate) mod systemd_scope;
mod view_plan;
pub(crate) mod zygote;
mod zygote_wire;

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::ExitStatus;

use super::backend::Backend;
use super::{Confined, Launch, LayerReport, Limits, Mode, Roots, SpawnRequest, Support};
use child::ChildPlan;
pub(crate) use landlock::{handled_write_rights, ruleset};
pub(crate) use netns::agent_network_namespace;
pub(crate) use netns::listen_in;
pub(crate) use netns::prepared_network_namespace;
pub(crate) use view_plan::view_for;

/// `[env_start, env_end)` of this process, from /proc/self/stat (fields 50 and 51); fixed for
/// the life of the process, so read once.
/// Where procfs is mounted in this mount namespace (`/proc`, and any other), deepest first,
/// from `/proc/self/mountinfo` (octal escapes such as `\040` decoded).
fn host_proc_mounts() -> Vec<CString> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return vec![CString::from(c"/proc")];
    };
    let mut mounts: Vec<Vec<u8>> = info
        .lines()
        .filter_map(|line| {
            let (fields, after) = line.split_once(" - ")?;
            (after.split(' ').next()? == "proc").then(|| fields.split(' ').nth(4))?
        })
        .map(unescape_mountinfo)
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    mounts.dedup();
    mounts
        .into_iter()
        .filter_map(|m| CString::new(m).ok())
        .collect()
}

/// A mountinfo path field with its `\NNN` octal escapes decoded.
fn unescape_mountinfo(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, b| n.wrapping_mul(8) + (b - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    out
}

pub(crate) fn env_region() -> Option<(usize, usize)> {
    static REGION: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
    *REGION.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let after_comm = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = after_comm.split_whitespace().collect();
        // After the comm, the first field is field 3.
        let start = fields.get(50 - 3)?.parse::<usize>().ok()?;
        let end = fields.get(51 - 3)?.parse::<usize>().ok()?;
        (start != 0 && end > start).then_some((start, end))
    })
}

/// The limit a fork or clone that failed with EAGAIN has reached, in words: the agent's pids
/// cgroup (`pids.max`, its own or an ancestor's), else its user's `RLIMIT_NPROC`.
pub(crate) fn process_limit() -> Option<String> {
    if let Some(max) = cgroup::own_pids_max() {
        return Some(format!(
            "the agent's process limit (pids.max {max}) is reached"
        ));
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit into a local struct.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut limit) } == 0;
    (got && limit.rlim_cur != libc::RLIM_INFINITY).then(|| {
        format!(
            "the agent's user may run at most {} processes (RLIMIT_NPROC), and that many run",
            limit.rlim_cur
        )
    })
}

/// The Linux backend (see [`crate::sandbox::backend::Backend`]).
pub(crate) struct Linux;

impl Backend for Linux {
    type Support = support::Support;
    type Prepared = Prepared;
    type SpawnedChild = child_process::SpawnedChild;
    type Zygotes = zygote::Zygotes;

    /// `/dev/fd/N` is `/proc/self/fd/N`: it opens the memfd anew.
    const DEV_FD_REOPENS: bool = true;

    fn probe_support() -> Support {
        probe::probe_support()
    }

    fn confine_with(
        launch: Launch,
        mode: Mode,
        roots: &Roots,
        limits: Limits,
        support: &Support,
    ) -> Confined {
        confine::confine_with(launch, mode, roots, limits, support)
    }

    fn describe(mode: Mode, support: &Support) -> String {
        report::describe(mode, support)
    }

    fn layers(support: &Support) -> Vec<LayerReport> {
        report::layers(support)
    }

    fn verdict(mode: Mode, support: &Support) -> super::Verdict {
        report::verdict(mode, support)
    }

    fn advice(support: &Support) -> Vec<String> {
        support.advice.clone()
    }

    fn per_session_sandbox(support: &Support) -> Result<String, String> {
        report::per_session_sandbox(support)
    }

    fn spawn_confined(
        confined: &Confined,
        request: &SpawnRequest,
    ) -> io::Result<(i32, Option<OwnedFd>)> {
        let pass: Vec<(i32, i32)> = request
            .pass
            .iter()
            .map(|(fd, number)| (fd.as_raw_fd(), *number))
            .collect();
        let raw = spawn::Request {
            launch: &confined.launch,
            env: request.env,
            cwd: request.cwd,
            output: request.output.as_raw_fd(),
            pass: &pass,
        };
        let Some(prepared) = &confined.plan else {
            return spawn::spawn(&raw, None, false).map(|pid| (pid, None));
        };
        let started = Self::spawn_prepared(prepared, request, &raw);
        if let (Ok((pid, _)), Some(run)) = (&started, &prepared.cgroup_v2) {
            run.started(*pid);
        }
        started
    }

    fn start_zygote_early(confined: &Confined, session: &super::SessionSandbox) {
        let Some(prepared) = &confined.plan else {
            return;
        };
        let (zygotes, program) = session.parts();
        let mut zygotes = zygotes.lock().unwrap_or_else(|e| e.into_inner());
        zygote::start_early(&mut zygotes, program, prepared, session.network.as_ref());
    }

    fn zygote_pids(zygotes: &zygote::Zygotes) -> Vec<i32> {
        zygotes.pids()
    }

    fn end_helpers(zygotes: &mut zygote::Zygotes) {
        zygotes.end()
    }

    fn let_spares_go(zygotes: &mut zygote::Zygotes) {
        zygotes.let_spares_go()
    }

    fn zygote_main_if_asked() {
        zygote::main_if_asked()
    }

    fn command_ended() {
        // Off the runtime's thread: an `rmdir` of a cgroup waits for the kernel.
        if cgroup::any_to_remove() {
            spawn::on_spawner_thread(Box::new(cgroup::command_ended));
        }
    }

    fn leave() {
        cgroup_v2::release();
        cgroup::leave(std::time::Duration::from_secs(2))
    }

    fn remove_abandoned() {
        cgroup::remove_abandoned_everywhere();
        probe::remove_abandoned_folders();
    }

    /// A failed step comes back from [`spawn::spawn`] wrapping a [`step::StepError`].
    fn is_setup_failure(error: &io::Error) -> bool {
        error
            .get_ref()
            .is_some_and(|inner| inner.is::<step::StepError>())
    }

    fn watch_child(pid: i32, status: Option<OwnedFd>) -> io::Result<child_process::SpawnedChild> {
        match status {
            Some(status) => child_process::SpawnedChild::reported(pid, status),
            None => child_process::SpawnedChild::new(pid),
        }
    }

    async fn wait_child(child: &mut child_process::SpawnedChild) -> io::Result<ExitStatus> {
        let status = child.wait().await;
        cgroup_v2::ended(child.pid());
        status
    }

    fn on_spawner_thread(job: Box<dyn FnOnce() + Send>) {
        spawn::on_spawner_thread(job)
    }

    /// `PR_SET_DUMPABLE 0` for this process.
    fn protect_agent_process() {
        // SAFETY: prctl on this process.
        unsafe {
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
    }

    fn masked_host_sockets() -> Vec<(PathBuf, Option<PathBuf>)> {
        view_plan::hidden_sockets()
            .into_iter()
            .map(|hidden| match hidden {
                view_plan::Hidden::Dir(dir, keep) => (dir, keep),
                view_plan::Hidden::File(file) => (file, None),
            })
            .collect()
    }

    fn cache_layer_verdicts(home: &std::path::Path) -> Vec<(PathBuf, Result<(), String>)> {
        probe::cache_layer_verdicts(home)
    }

    fn cache_layers_unprobed(home: &std::path::Path) -> bool {
        probe::cache_layers_unprobed(home)
    }

    fn sealed_file(name: &CStr, contents: &[u8]) -> io::Result<OwnedFd> {
        sealed::sealed_memfd(name, contents)
    }

    fn bounded_file(name: &CStr, bound: u64) -> io::Result<OwnedFd> {
        sealed::bounded_memfd(name, bound)
    }

    fn forget_session(dir: &std::path::Path) {
        plan_cache::forget_under(dir);
        cgroup_v2::sweep();
    }
}

impl Linux {
    /// [`Backend::spawn_confined`] with a plan: the session's zygote, else per command.
    fn spawn_prepared(
        prepared: &Prepared,
        request: &SpawnRequest,
        raw: &spawn::Request,
    ) -> io::Result<(i32, Option<OwnedFd>)> {
        // A command with hosts of its own never runs in the zygote: it needs a network
        // namespace (and a listener) of its own.
        if let Some(session) = request.session.filter(|_| prepared.also_hosts.is_empty()) {
            let (zygotes, program) = session.parts();
            let mut zygotes = zygotes.lock().unwrap_or_else(|e| e.into_inner());
            let network = session.network.as_ref();
            let started = zygote::spawn(&mut zygotes, program, prepared, raw, network);
            if let Some(started) = started {
                return started.map(|(pid, status)| (pid, Some(status)));
            }
        }
        // The per-command path: this command builds its own namespaces and view, and its
        // processes are forked straight into their cgroup v2 folders where that works.
        let netns = prepared.network_namespace_to_join();
        let network = request.session.and_then(|s| s.network.as_ref());
        let bridge = bridge(prepared, netns.as_ref(), network)?;
        let from_child = match &bridge {
            Bridge::FromChild(network) => Some((*network, seqpacket_pair()?)),
            _ => None,
        };
        if netns.is_none()
            && !prepared.reused
            && prepared.cgroup_v2_clone_into().is_none()
            && from_child.is_none()
        {
            return spawn::spawn(raw, Some(&prepared.plan), false).map(|pid| (pid, None));
        }
        let mut plan = prepared.plan_to_mount(netns.as_ref());
        if let Some(clone_into) = prepared.cgroup_v2_clone_into() {
            plan.clone_into = clone_into;
        }
        if let Some((_, (_, theirs))) = &from_child {
            plan.bridge_socket = Some(theirs.as_raw_fd());
        }
        let pid = spawn::spawn(raw, Some(&plan), false)?;
        match (bridge, network, from_child) {
            (Bridge::Serving(serving), Some(network), _) => network.keep(pid, serving),
            (_, _, Some((network, (ours, theirs)))) => {
                // W sent the listener before its shell exec'd, which `spawn` waited for.
                drop(theirs);
                let serve = |l| network.serve_also(l, &prepared.also_hosts);
                match receive_listener(&ours).and_then(serve) {
                    Ok(serving) => network.keep(pid, serving),
                    // The command runs with no way out (its namespace has only a loopback).
                    Err(error) => tracing::warn!(%error, "no bridge to the proxy for a command"),
                }
            }
            _ => {}
        }
        Ok((pid, None))
    }
}

/// How a workspace command's network namespace reaches the proxy ([`bridge`]).
pub(crate) enum Bridge<'a> {
    /// No bridge: the plan has no network namespace, or is not workspace mode's.
    None,
    /// The proxy serves a listener the agent made in the prepared namespace (root).
    Serving(crate::netproxy::Serving),
    /// The process that creates the namespace (a command's W, or the session's zygote) makes
    /// the listener there and passes it back: the agent cannot enter a namespace made inside
    /// another user namespace without root (an ordinary user's agent).
    FromChild(&'a crate::netproxy::SessionNetwork),
}

/// Workspace mode's allowlist (a workspace plan with a network namespace): how the proxy
/// reaches `netns` (the prepared namespace the command or its zygote joins; `None`: it makes
/// its own). `Err`: a bridge is needed and cannot be made, and the command must not run (it
/// would have no network at all, and not say why).
pub(crate) fn bridge<'a>(
    prepared: &Prepared,
    netns: Option<&OwnedFd>,
    network: Option<&'a crate::netproxy::SessionNetwork>,
) -> io::Result<Bridge<'a>> {
    if prepared.mode != Mode::Workspace || !prepared.plan.network_namespace {
        return Ok(Bridge::None);
    }
    let why = match (netns, network) {
        (Some(netns), Some(network)) => {
            let addr = ([127, 0, 0, 1], crate::netproxy::PROXY_PORT).into();
            let serve = |l| network.serve_also(l, &prepared.also_hosts);
            match listen_in(netns.as_fd(), addr).and_then(serve) {
                Ok(serving) => return Ok(Bridge::Serving(serving)),
                Err(error) => error.to_string(),
            }
        }
        (None, Some(network)) => return Ok(Bridge::FromChild(network)),
        (_, None) => "this command has no session, so no proxy".to_string(),
    };
    Err(io::Error::other(format!(
        "acp-bash could not bridge this command's network to its proxy ({why}); start acp-bash \
         with --network full to give workspace commands the whole network instead"
    )))
}

/// A close-on-exec `SOCK_SEQPACKET` pair: (ours, theirs).
fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
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
    Ok(unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) })
}

/// The listener a process sent on `socket` ([`child::sys::send_listener`]: `b"L"` and one fd),
/// already queued (no waiting).
pub(crate) fn receive_listener(socket: &OwnedFd) -> io::Result<std::net::TcpListener> {
    let mut fds = [-1; zygote_wire::MAX_FDS];
    let mut byte = [0u8; 1];
    // SAFETY: fcntl on an fd we own.
    unsafe { libc::fcntl(socket.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let (n, count, _) = child::sys::recv_with_fds(socket.as_raw_fd(), &mut byte, &mut fds);
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fds the kernel just gave this process, each taken over once.
    let mut got: Vec<OwnedFd> = fds
        .iter()
        .take(count)
        .map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect();
    match (n, byte, got.len()) {
        (1, [b'L'], 1) => Ok(std::net::TcpListener::from(got.remove(0))),
        _ => Err(io::Error::other(
            "the command's process did not pass the proxy's listener",
        )),
    }
}

/// The per-command plan the child runs, with the fds it refers to.
pub(crate) struct Prepared {
    pub(crate) plan: ChildPlan,
    /// The mode the plan is for: a session keeps one zygote per mode.
    pub(crate) mode: Mode,
    /// Keeps the Landlock ruleset open until the command has started (the command's own:
    /// `landlock::ruleset_for_one_command`).
    _ruleset: Option<std::sync::Arc<OwnedFd>>,
    /// The view came from an earlier command's plan: its caches' work folders are that
    /// command's, renewed wherever the overlays are mounted again (a new zygote, the
    /// per-command path).
    pub(crate) reused: bool,
    /// The command's pids and memory cgroups (their `tasks` files), kept open until then too.
    _cgroups: [Option<cgroup::RunCgroup>; 2],
    /// Or its cgroup v2 folders (`cgroup_v2.rs`): open until then, removed once it has ended.
    cgroup_v2: Option<cgroup_v2::Run>,
    /// The hosts this command alone may also reach ([`crate::sandbox::Roots::also_hosts`]):
    /// it runs on the per-command path, with a proxy listener of its own.
    pub(crate) also_hosts: Vec<crate::netproxy::HostPattern>,
}

impl Prepared {
    /// Read-only as root: a network namespace from the pool for the process that joins it
    /// (a new zygote, or a command on the per-command path).
    pub(crate) fn network_namespace_to_join(&self) -> Option<OwnedFd> {
        let plan = &self.plan;
        if plan.network_namespace && plan.namespaces && plan.uid == 0 && current_ids().0 == 0 {
            prepared_network_namespace()
        } else {
            None
        }
    }

    /// The cgroup v2 folders to fork this command's W and B into (`clone3`), where it has
    /// them and the kernel allows it: only on the per-command path (the zygote's commands
    /// join by migration).
    fn cgroup_v2_clone_into(&self) -> Option<child::CloneInto> {
        let run = self.cgroup_v2.as_ref()?;
        let (init, shell) = (run.init_dir.as_ref()?, run.shell_dir.as_ref()?);
        Some(child::CloneInto {
            init: init.as_raw_fd(),
            shell: shell.as_raw_fd(),
        })
    }

    /// The plan for a process that mounts the view itself: `netns` to join, and where the
    /// view was reused, fresh work folders for the caches' overlays.
    pub(crate) fn plan_to_mount(&self, netns: Option<&OwnedFd>) -> ChildPlan {
        let mut plan = self.plan.clone();
        if let Some(netns) = netns {
            plan.netns_fd = netns.as_raw_fd();
        }
        if self.reused {
            if let Some(view) = &mut plan.view {
                view_plan::renew_work(view);
            }
        }
        plan
    }
}

/// How `--max-processes` is enforced here, or why it is not.
pub(crate) fn process_limit_support(user_namespace: bool) -> Result<String, String> {
    let cgroup = cgroup::available(cgroup::Controller::Pids)
        .or_else(|v1| cgroup_v2::available(true).map_err(|v2| format!("{v1}; cgroup v2: {v2}")));
    match (cgroup, user_namespace) {
        (Ok(how), _) => Ok(how),
        (Err(_), true) if current_ids().0 != 0 => {
            Ok("RLIMIT_NPROC in the user namespace (no pids cgroup), counted there: per command, or where the per-session zygote serves, for the running commands of a session and mode together".to_string())
        }
        (Err(why), _) => Err(format!(
            "{why}; RLIMIT_NPROC does not bind root or counts every process of this user"
        )),
    }
}

/// How `--max-memory` is enforced here: `Ok` for the whole tree (a memory cgroup), `Err(why
/// not)` when only RLIMIT_DATA per process is left.
pub(crate) fn memory_limit_support() -> Result<String, String> {
    cgroup::available(cgroup::Controller::Memory)
        .or_else(|v1| cgroup_v2::available(false).map_err(|v2| format!("{v1}; cgroup v2: {v2}")))
}

/// Sets the cgroup v2 subtree up now where cgroup v1 serves neither limit (`doctor`).
pub(crate) fn cgroup_v2_now() {
    if !v1_serves(cgroup::Controller::Pids) || !v1_serves(cgroup::Controller::Memory) {
        cgroup_v2::set_up_now();
    }
}

/// Whether cgroup v1 serves `controller` here (else cgroup v2 may).
fn v1_serves(controller: cgroup::Controller) -> bool {
    cgroup::serves(controller)
}

/// Which layers a launch uses (decided by `confine_with` from the mode and the support).
pub(crate) struct Layers {
    pub namespaces: bool,
    pub user_namespace: bool,
    pub private_ipc_uts: bool,
    pub private_proc: bool,
    pub network_namespace: bool,
    pub view: bool,
    pub seccomp: bool,
    pub fresh_keyring: bool,
}

pub(crate) fn current_ids() -> (u32, u32) {
    // SAFETY: plain getters.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

impl Prepared {
    /// The plan of one command: `view` and `ruleset` from the session's plan for `mode`, the
    /// cgroups its own. Read-only's network namespace is taken where it is joined (a new
    /// zygote, or the per-command path right before its fork), not here.
    pub(crate) fn new(
        mode: Mode,
        layers: Layers,
        view: Option<child::view::View>,
        ruleset: Option<std::sync::Arc<OwnedFd>>,
        limits: Limits,
        reused: bool,
    ) -> Self {
        let (uid, gid) = current_ids();
        let user_namespace = layers.namespaces && layers.user_namespace;
        let (v1_pids, v1_memory) = (
            v1_serves(cgroup::Controller::Pids),
            v1_serves(cgroup::Controller::Memory),
        );
        let pids = limits
            .max_processes
            .filter(|_| v1_pids)
            .and_then(|max| cgroup::for_one_command(cgroup::Controller::Pids, max));
        let memory = limits
            .max_memory
            .filter(|_| v1_memory)
            .and_then(|max| cgroup::for_one_command(cgroup::Controller::Memory, max));
        let cgroup_v2 = cgroup_v2::for_one_command(
            limits.max_processes.filter(|_| !v1_pids),
            limits.max_memory.filter(|_| !v1_memory),
        );
        let pids_fd = pids
            .as_ref()
            .map(cgroup::RunCgroup::fd)
            .or(cgroup_v2.as_ref().map(|run| run.init_procs.as_raw_fd()))
            .unwrap_or(-1);
        let memory_fd = memory
            .as_ref()
            .map(cgroup::RunCgroup::fd)
            .or(cgroup_v2.as_ref().map(|run| run.shell_procs.as_raw_fd()))
            .unwrap_or(-1);
        Prepared {
            mode,
            plan: ChildPlan {
                namespaces: layers.namespaces,
                user_namespace,
                private_ipc_uts: layers.private_ipc_uts,
                parent_maps_ids: user_namespace && uid == 0,
                uid,
                gid,
                private_proc: layers.private_proc,
                network_namespace: layers.network_namespace,
                netns_fd: -1,
                bridge_socket: None,
                view,
                landlock_fd: ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
                landlock_write_rights: if ruleset.is_some() {
                    handled_write_rights()
                } else {
                    0
                },
                env_region: if layers.namespaces {
                    env_region()
                } else {
                    None
                },
                reaper: !layers.namespaces,
                // Full mode's root keeps its capabilities (inside its user namespace, where
                // one is needed: `Support::root_needs_user_namespace`).
                drop_capabilities: user_namespace && uid == 0 && mode != Mode::Full,
                drop_ptrace: !user_namespace && uid == 0,
                host_proc_mounts: if !user_namespace && uid == 0 && layers.private_proc {
                    host_proc_mounts()
                } else {
                    Vec::new()
                },
                // RLIMIT_NPROC counts per user namespace: per command only inside one.
                max_processes: if user_namespace {
                    limits.max_processes.unwrap_or(0)
                } else {
                    0
                },
                max_memory: limits.max_memory.unwrap_or(0),
                pids_cgroup_fd: pids_fd,
                memory_cgroup_fd: memory_fd,
                clone_into: child::CloneInto::default(),
                fresh_keyring: layers.fresh_keyring,
                seccomp: if layers.seccomp {
                    seccomp::programs().as_ref().ok()
                } else {
                    None
                },
                in_zygote: false,
                #[cfg(test)]
                fault: None,
            },
            _ruleset: ruleset,
            reused,
            _cgroups: [pids, memory],
            cgroup_v2,
            also_hosts: Vec::new(),
        }
    }
}
