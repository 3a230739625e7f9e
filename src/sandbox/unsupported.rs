//! The backend for platforms without a kernel sandbox (anything but Linux, until a backend such
//! as `macos.rs` exists): every layer is reported missing, commands are refused rather than run
//! unconfined by surprise, and `doctor` and the mode descriptions say so. Not compiled on Linux
//! or macOS: CI type-checks it for `x86_64-unknown-freebsd` (`.ci/run`). Portable std only: no
//! platform call; its temp files are `temp_files.rs`'s.

use std::ffi::CStr;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::ExitStatus;

use super::backend::Backend;
use super::{Confined, Launch, LayerReport, Limits, Mode, Roots, SessionSandbox, SpawnRequest};

/// Which sandbox layers work on this machine: none.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Support {
    /// Why there is no kernel sandbox.
    pub reason: String,
}

impl Support {
    /// No layer works, for `reason`.
    pub fn none(reason: &str) -> Support {
        Support {
            reason: reason.to_string(),
        }
    }
}

/// Nothing between fork and exec here.
pub(crate) struct Prepared;

/// A started command: none can exist on this platform.
pub(crate) enum NoChild {}

/// The backend that enforces nothing (see [`Backend`]).
pub(crate) struct Unsupported;

impl Backend for Unsupported {
    type Support = Support;
    type Prepared = Prepared;
    type SpawnedChild = NoChild;
    type Zygotes = ();

    fn probe_support() -> Support {
        Support::none(&format!(
            "the kernel sandbox is Linux-only and this is {}",
            std::env::consts::OS
        ))
    }

    /// `launch` unchanged; every mode but `off` says what it does not enforce.
    fn confine_with(
        launch: Launch,
        mode: Mode,
        _roots: &Roots,
        _limits: Limits,
        support: &Support,
    ) -> Confined {
        let notices = if mode == Mode::Off {
            Vec::new()
        } else {
            vec![format!(
                "{} mode is NOT enforced here ({})",
                mode.name(),
                support.reason
            )]
        };
        Confined {
            launch,
            plan: None,
            notices,
        }
    }

    /// The mode's promise, then that none of it is enforced here.
    fn describe(mode: Mode, support: &Support) -> String {
        format!(
            "{} Not enforced on this machine: any of it ({}) — run `acp-bash doctor`.",
            match mode {
                Mode::Workspace =>
                    "Commands change files only in the session folder and the temp dir.",
                Mode::ReadOnly => "Commands change nothing outside a temp dir, with no network.",
                Mode::Full | Mode::Off => "Commands run with no kernel sandbox.",
            },
            support.reason
        )
    }

    /// One row: the kernel sandbox, missing.
    fn per_session_sandbox(support: &Support) -> Result<String, String> {
        Err(support.reason.clone())
    }

    fn layers(support: &Support) -> Vec<LayerReport> {
        vec![LayerReport {
            name: "kernel sandbox",
            purpose: "every mode: confinement of writes, network, processes and resources",
            status: Err(support.reason.clone()),
        }]
    }

    /// No sandbox to start commands in: refuses, so that nothing runs unconfined by surprise.
    fn spawn_confined(
        _confined: &Confined,
        _request: &SpawnRequest,
    ) -> io::Result<(i32, Option<OwnedFd>)> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "acp-bash starts commands only on Linux so far; this is {}",
                std::env::consts::OS
            ),
        ))
    }

    /// The refusal above is not a failed step: no sandbox was set up.
    fn is_setup_failure(_error: &io::Error) -> bool {
        false
    }

    /// Refuses: nothing was started.
    fn watch_child(_pid: i32, _status: Option<OwnedFd>) -> io::Result<NoChild> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// No zygotes here.
    fn start_zygote_early(_confined: &Confined, _session: &SessionSandbox) {}

    /// No zygotes here.
    fn zygote_pids(_zygotes: &()) -> Vec<i32> {
        Vec::new()
    }

    /// Nothing to serve here.
    fn zygote_main_if_asked() {}

    async fn wait_child(child: &mut NoChild) -> io::Result<ExitStatus> {
        match *child {}
    }

    /// Runs `job` right away.
    fn on_spawner_thread(job: Box<dyn FnOnce() + Send>) {
        job()
    }

    /// Nothing to do here.
    fn protect_agent_process() {}

    /// No view, so nothing hidden.
    fn masked_host_sockets() -> Vec<(PathBuf, Option<PathBuf>)> {
        Vec::new()
    }

    /// No layers, so nothing to probe.
    fn cache_layers_unprobed(_home: &std::path::Path) -> bool {
        false
    }

    /// No layers: every cache stays read-only.
    fn cache_layer_verdicts(home: &std::path::Path) -> Vec<(PathBuf, Result<(), String>)> {
        super::package_caches(home)
            .into_iter()
            .map(|(_, cache)| (cache, Err("no kernel sandbox on this platform".to_string())))
            .collect()
    }

    /// The portable stand-in for a sealed memfd ([`super::temp_files::sealed_file`]).
    fn sealed_file(name: &CStr, contents: &[u8]) -> io::Result<OwnedFd> {
        super::temp_files::sealed_file(name, contents)
    }

    /// The portable stand-in for a bounded memfd ([`super::temp_files::bounded_file`]).
    fn bounded_file(name: &CStr, _bound: u64) -> io::Result<OwnedFd> {
        super::temp_files::bounded_file(name)
    }
}
