//! The macOS backend's implementation of the platform contract ([`Backend`]).

use std::collections::HashMap;
use std::ffi::{CStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

use super::seatbelt::{self, Policy, SANDBOX_EXEC};
use super::support::Support;
use super::{report, sweep};
use crate::sandbox::backend::Backend;
use crate::sandbox::{
    portable, Confined, Launch, LayerReport, Limits, Mode, Roots, SessionSandbox, SpawnRequest,
};

/// The macOS backend (see [`Backend`]).
pub(crate) struct MacOs;

/// What one command gets besides its launch.
pub(crate) struct Prepared {
    /// Why it must not start: its mode needs Seatbelt, which does not apply here.
    refuse: Option<String>,
    /// Its processes carry a mark, swept when its shell exits.
    sweep: bool,
    /// Its `TMPDIR`: the private temp dir its profile lets it write.
    tmpdir: Option<PathBuf>,
    /// Read-only mode: its own temp folder, removed once it has ended.
    temp: Option<Arc<TempFolder>>,
}

/// A folder removed (with what is in it, links not followed) when the last holder drops it.
pub(crate) struct TempFolder(PathBuf);

impl Drop for TempFolder {
    fn drop(&mut self) {
        if let Err(error) = crate::sandbox::remove_session_folder(&self.0) {
            tracing::debug!(%error, dir = %self.0.display(), "a command's temp folder");
        }
    }
}

/// A session's part: the prefix of its commands' marks. Dropped with the session, it sweeps
/// whatever of its commands is left.
pub(crate) struct Zygotes {
    mark: String,
}

/// A new random prefix for marks.
fn random_mark() -> String {
    let mut bytes = [0u8; 8];
    crate::random::random_bytes(&mut bytes);
    format!("{:016x}", u64::from_ne_bytes(bytes))
}

impl Default for Zygotes {
    fn default() -> Self {
        Zygotes {
            mark: random_mark(),
        }
    }
}

impl Drop for Zygotes {
    fn drop(&mut self) {
        let prefix = format!("{}-", self.mark);
        let swept = std::thread::Builder::new()
            .name("acp-bash-sweep".into())
            .spawn(move || sweep::sweep(&prefix, true, sweep::processes));
        if let Err(error) = swept {
            tracing::debug!(%error, "no thread to sweep an ended session's processes");
        }
    }
}

/// A started command: its waiter, which sweeps and removes its temp folder when it exits.
pub(crate) struct SpawnedChild(portable::Waiter);

/// What a spawned command needs once it has exited, from `spawn_confined` to `watch_child`.
struct Run {
    mark: Option<String>,
    temp: Option<Arc<TempFolder>>,
}

static RUNS: Mutex<Option<HashMap<i32, Run>>> = Mutex::new(None);

/// A command's setup failure (it did not run).
#[derive(Debug)]
struct SetupError(String);

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// A new folder of this command's own for read-only mode: under the temp dir's
/// `acp-bash-ro-<uid>` (0700, this user's), `run-<pid>-<n>-<random>`.
fn read_only_temp() -> io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    // SAFETY: plain getter.
    let uid = unsafe { libc::geteuid() };
    let root = std::env::temp_dir().join(format!("acp-bash-ro-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    let meta = std::fs::symlink_metadata(&root)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} is not a private folder of this user's",
            root.display()
        )));
    }
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut salt = [0u8; 4];
    crate::random::random_bytes(&mut salt);
    let dir = root.join(format!(
        "run-{}-{}-{:08x}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        u32::from_ne_bytes(salt)
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(canonical(&dir))
}

/// The Seatbelt-confined launch of a workspace or read-only command.
fn seatbelt_launch(launch: &Launch, mode: Mode, roots: &Roots) -> io::Result<(Launch, Prepared)> {
    let workspace = canonical(&roots.workspace);
    let (tmpdir, temp) = match (mode, &roots.session_temp) {
        (Mode::Workspace, Some(dir)) => (canonical(dir), None),
        (Mode::Workspace, None) => (canonical(&roots.temp), None),
        _ => {
            let dir = read_only_temp()?;
            (dir.clone(), Some(Arc::new(TempFolder(dir))))
        }
    };
    let masked = crate::sandbox::masked_paths(&roots.protection);
    let git_repos: Vec<PathBuf> =
        if mode == Mode::Workspace && !roots.protection.git_metadata_writable {
            std::iter::once(&roots.workspace)
                .chain(&roots.protection.git_repos)
                .map(|repo| canonical(repo))
                .filter(|repo| repo.join(".git").symlink_metadata().is_ok())
                .collect()
        } else {
            Vec::new()
        };
    let profile = seatbelt::profile(&Policy {
        mode,
        workspace: &workspace,
        temp: &tmpdir,
        masked: &masked,
        git_repos: &git_repos,
    });
    let wrapped = Launch {
        program: SANDBOX_EXEC.into(),
        args: profile.arguments(&launch.program, &launch.args),
    };
    Ok((
        wrapped,
        Prepared {
            refuse: None,
            sweep: true,
            tmpdir: Some(tmpdir),
            temp,
        },
    ))
}

/// A mark for processes started outside any session (`sandbox::spawn`).
fn process_mark() -> &'static str {
    static MARK: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MARK.get_or_init(random_mark)
}

impl Backend for MacOs {
    type Support = Support;
    type Prepared = Prepared;
    type SpawnedChild = SpawnedChild;
    type Zygotes = Zygotes;

    fn probe_support() -> Support {
        super::support::probe()
    }

    fn confine_with(
        launch: Launch,
        mode: Mode,
        roots: &Roots,
        _limits: Limits,
        support: &Support,
    ) -> Confined {
        let notices = report::notices(mode, support);
        let refused = |why: String| Confined {
            launch: launch.clone(),
            plan: Some(Prepared {
                refuse: Some(why),
                sweep: false,
                tmpdir: None,
                temp: None,
            }),
            notices: notices.clone(),
        };
        match (mode, &support.seatbelt) {
            (Mode::Off, _) => Confined {
                launch,
                plan: None,
                notices,
            },
            (Mode::Full, _) => Confined {
                launch,
                plan: Some(Prepared {
                    refuse: None,
                    sweep: true,
                    tmpdir: None,
                    temp: None,
                }),
                notices,
            },
            (_, Err(why)) => refused(report::refusal(mode, why)),
            (_, Ok(())) => match seatbelt_launch(&launch, mode, roots) {
                Ok((launch, plan)) => Confined {
                    launch,
                    plan: Some(plan),
                    notices,
                },
                Err(error) => refused(format!(
                    "{} mode: acp-bash could not make the command's private temp dir ({error}); \
                     the command did not run",
                    mode.name()
                )),
            },
        }
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
        let plan = confined.plan.as_ref();
        if let Some(why) = plan.and_then(|plan| plan.refuse.as_ref()) {
            return Err(io::Error::other(SetupError(why.clone())));
        }
        let mut env: Vec<(OsString, OsString)> = request.env.to_vec();
        let mut mark = None;
        if let Some(plan) = plan {
            if let Some(tmpdir) = &plan.tmpdir {
                env.retain(|(name, _)| name != "TMPDIR");
                env.push(("TMPDIR".into(), tmpdir.into()));
            }
            if plan.sweep {
                static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let session = match request.session {
                    Some(session) => {
                        let (zygotes, _) = session.parts();
                        let zygotes = zygotes.lock().unwrap_or_else(|e| e.into_inner());
                        zygotes.mark.clone()
                    }
                    None => process_mark().to_string(),
                };
                let value = format!(
                    "{session}-{}",
                    RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                );
                env.retain(|(name, _)| name != sweep::MARK_VAR);
                env.push((sweep::MARK_VAR.into(), value.clone().into()));
                mark = Some(value);
            }
        }
        let pass: Vec<(i32, i32)> = request
            .pass
            .iter()
            .map(|(fd, number)| (fd.as_raw_fd(), *number))
            .collect();
        let pid = portable::spawn(
            &confined.launch,
            &env,
            request.cwd,
            request.output.as_raw_fd(),
            &pass,
        )?;
        let temp = plan.and_then(|plan| plan.temp.clone());
        if mark.is_some() || temp.is_some() {
            let mut runs = RUNS.lock().unwrap_or_else(|e| e.into_inner());
            let runs = runs.get_or_insert_with(HashMap::new);
            // Runs nobody watched (`sandbox::spawn`) and that are gone: their folders go.
            runs.retain(|pid, _| {
                // SAFETY: kill with signal 0 only checks.
                unsafe { libc::kill(*pid, 0) == 0 }
            });
            runs.insert(pid, Run { mark, temp });
        }
        Ok((pid, None))
    }

    fn start_zygote_early(_confined: &Confined, _session: &SessionSandbox) {}

    fn zygote_pids(_zygotes: &Zygotes) -> Vec<i32> {
        Vec::new()
    }

    fn zygote_main_if_asked() {}

    fn is_setup_failure(error: &io::Error) -> bool {
        error
            .get_ref()
            .is_some_and(|inner| inner.is::<SetupError>())
    }

    /// Waits on a thread of its own; once the shell has exited, sweeps what carries its mark
    /// and removes its private temp folder, before the status is handed over.
    fn watch_child(pid: i32, _status: Option<OwnedFd>) -> io::Result<SpawnedChild> {
        let run = RUNS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .and_then(|runs| runs.remove(&pid));
        let waiter = portable::Waiter::new(pid, move || {
            if let Some(Run { mark, temp }) = run {
                if let Some(mark) = mark {
                    sweep::sweep(&mark, false, sweep::processes);
                }
                drop(temp);
            }
        })?;
        Ok(SpawnedChild(waiter))
    }

    async fn wait_child(child: &mut SpawnedChild) -> io::Result<ExitStatus> {
        child.0.wait().await
    }

    /// No parent-death signal to tie to a thread here: each job gets a thread of its own, so
    /// that the runtime's workers never wait for a spawn.
    fn on_spawner_thread(job: Box<dyn FnOnce() + Send>) {
        let job = Arc::new(Mutex::new(Some(job)));
        let ours = job.clone();
        let started = std::thread::Builder::new()
            .name("acp-bash-spawner".into())
            .spawn(move || {
                if let Some(job) = ours.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    job()
                }
            });
        if started.is_err() {
            if let Some(job) = job.lock().unwrap_or_else(|e| e.into_inner()).take() {
                job()
            }
        }
    }

    /// Nothing: macOS has no `PR_SET_DUMPABLE`; another process's task port needs root or an
    /// entitlement, and workspace and read-only commands cannot read the agent's
    /// environment (no `kern.procargs2` in their profile). Full and off commands can.
    fn protect_agent_process() {}

    /// The host daemons' sockets workspace and read-only commands cannot connect to here (all
    /// Unix sockets outside the writable places are denied; these are the known ones).
    fn masked_host_sockets() -> Vec<(PathBuf, Option<PathBuf>)> {
        let mut found = Vec::new();
        if let Some(agent) = std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from) {
            found.push(agent);
        }
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
            found.push(home.join(".docker/run/docker.sock"));
        }
        if let Ok(entries) = std::fs::read_dir("/private/var/run") {
            use std::os::unix::fs::FileTypeExt as _;
            found.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
                    .map(|e| e.path()),
            );
        }
        found
            .into_iter()
            .filter(|p| p.exists())
            .map(|p| (p, None))
            .collect()
    }

    fn cache_layer_verdicts(home: &Path) -> Vec<(PathBuf, Result<(), String>)> {
        crate::sandbox::package_caches(home)
            .into_iter()
            .map(|(_, cache)| (cache, Err("no copy-on-write layer on macOS".to_string())))
            .collect()
    }

    fn cache_layers_unprobed(_home: &Path) -> bool {
        false
    }

    fn sealed_file(name: &CStr, contents: &[u8]) -> io::Result<OwnedFd> {
        crate::sandbox::temp_files::sealed_file(name, contents)
    }

    fn bounded_file(name: &CStr, _bound: u64) -> io::Result<OwnedFd> {
        crate::sandbox::temp_files::bounded_file(name)
    }
}
