//! The backend for platforms without a kernel sandbox (anything but Linux, until a backend such
//! as `macos.rs` exists): every layer is reported missing, commands run unconfined in `off`'s
//! sense, and `doctor` and the mode descriptions say so. Not compiled on Linux.

use crate::sandbox::{Confined, SpawnRequest};

/// Nothing between fork and exec here.
pub(crate) struct Prepared;

/// This machine's support: none, and why.
pub(crate) fn probe_support() -> support::Support {
    support::Support::none(&format!(
        "the kernel sandbox is Linux-only and this is {}",
        std::env::consts::OS
    ))
}

pub(crate) mod support {
    //! [`Support`] where no layer exists.
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
}

pub(crate) mod confine {
    //! No confinement: the launch as it is, with a notice for the modes that promise one.
    use crate::sandbox::{Confined, Launch, Limits, Mode, Roots, Support};

    /// `launch` unchanged; every mode but `off` says what it does not enforce.
    pub(crate) fn confine_with(
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
}

pub(crate) mod report {
    //! The descriptions and doctor's table where nothing is enforced.
    use crate::sandbox::{LayerReport, Mode, Support};

    /// The mode's promise, then that none of it is enforced here.
    pub(crate) fn describe(mode: Mode, support: &Support) -> String {
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
    pub(crate) fn layers(support: &Support) -> Vec<LayerReport> {
        vec![LayerReport {
            name: "kernel sandbox",
            purpose: "every mode: confinement of writes, network, processes and resources",
            status: Err(support.reason.clone()),
        }]
    }
}

/// No sandbox to start commands in: refuses, so that nothing runs unconfined by surprise.
pub(crate) fn spawn_confined(
    _confined: &Confined,
    _request: &SpawnRequest,
) -> std::io::Result<i32> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!(
            "acp-bash starts commands only on Linux so far; this is {}",
            std::env::consts::OS
        ),
    ))
}

pub(crate) mod child_process {
    //! No process is ever started here, so there is none to wait for.

    /// A started command: none can exist on this platform.
    pub(crate) enum SpawnedChild {}

    impl SpawnedChild {
        /// Refuses: nothing was started.
        pub(crate) fn new(_pid: i32) -> std::io::Result<SpawnedChild> {
            Err(std::io::ErrorKind::Unsupported.into())
        }

        /// Never called: no value exists.
        pub(crate) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
            match *self {}
        }
    }
}

/// Runs `job` right away.
pub(crate) fn on_spawner_thread(job: Box<dyn FnOnce() + Send>) {
    job()
}

/// Nothing to do here.
pub(crate) fn protect_agent_process() {}

pub(crate) fn masked_host_sockets() -> Vec<(std::path::PathBuf, Option<std::path::PathBuf>)> {
    Vec::new()
}
