//! Linux layers: Landlock rulesets built in the parent ([`landlock`]), namespaces and the
//! filesystem view entered in the child ([`child`], started by [`spawn`]; the view planned in
//! [`view_plan`]), read-only mode's network namespaces ([`netns`]), and real probes of what this
//! kernel allows ([`probe`]). This file ties them into the per-command [`Prepared`] plan and
//! implements the sandbox's platform contract for Linux ([`Linux`]).

mod cgroup;
pub(crate) mod child;
pub(crate) mod child_process;
pub(crate) mod confine;
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
mod view_plan;
pub(crate) mod zygote;
mod zygote_wire;

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::ExitStatus;

use super::backend::Backend;
use super::{Confined, Launch, LayerReport, Limits, Mode, Roots, SpawnRequest, Support};
use child::ChildPlan;
pub(crate) use landlock::{handled_write_rights, ruleset};
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
        if let Some(session) = request.session {
            let (zygotes, program) = session.parts();
            let mut zygotes = zygotes.lock().unwrap_or_else(|e| e.into_inner());
            let started = zygote::spawn(&mut zygotes, program, prepared, &raw);
            if let Some(started) = started {
                return started.map(|(pid, status)| (pid, Some(status)));
            }
        }
        // The per-command path: this command builds its own namespaces and view.
        let netns = prepared.network_namespace_to_join();
        if netns.is_none() && !prepared.reused {
            return spawn::spawn(&raw, Some(&prepared.plan), false).map(|pid| (pid, None));
        }
        let plan = prepared.plan_to_mount(netns.as_ref());
        spawn::spawn(&raw, Some(&plan), false).map(|pid| (pid, None))
    }

    fn start_zygote_early(confined: &Confined, session: &super::SessionSandbox) {
        let Some(prepared) = &confined.plan else {
            return;
        };
        let (zygotes, program) = session.parts();
        let mut zygotes = zygotes.lock().unwrap_or_else(|e| e.into_inner());
        zygote::start_early(&mut zygotes, program, prepared);
    }

    fn zygote_pids(zygotes: &zygote::Zygotes) -> Vec<i32> {
        zygotes.pids()
    }

    fn zygote_main_if_asked() {
        zygote::main_if_asked()
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
        child.wait().await
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
        plan_cache::forget_under(dir)
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
    _cgroups: [Option<OwnedFd>; 2],
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
    match (cgroup::available(cgroup::Controller::Pids), user_namespace) {
        (Ok(how), _) => Ok(how),
        (Err(_), true) if current_ids().0 != 0 => {
            Ok("RLIMIT_NPROC, counted inside the user namespace: per command, or where the per-session zygote serves, for the running commands of a session and mode together".to_string())
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
        let pids = limits
            .max_processes
            .and_then(|max| cgroup::for_one_command(cgroup::Controller::Pids, max));
        let memory = limits
            .max_memory
            .and_then(|max| cgroup::for_one_command(cgroup::Controller::Memory, max));
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
                drop_capabilities: user_namespace && uid == 0,
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
                pids_cgroup_fd: pids.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
                memory_cgroup_fd: memory.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
                fresh_keyring: layers.fresh_keyring,
                seccomp: if layers.seccomp {
                    seccomp::programs().as_ref().ok()
                } else {
                    None
                },
                in_zygote: false,
            },
            _ruleset: ruleset,
            reused,
            _cgroups: [pids, memory],
        }
    }
}
