//! Kernel confinement for each command: what a command may write, whether it reaches the
//! network, and that nothing it starts outlives the run.
//!
//! Owns: the sandbox [`Mode`]s, turning a [`Launch`] into a confined one, and probing which
//! layers this machine enforces. Must not touch: output handling, the environment scrub, ACP.
//!
//! (The kernel layers themselves are the sandbox issue's work; until then [`confine`] enforces
//! nothing and says so.)

use std::ffi::OsString;
use std::path::PathBuf;

/// How much a command may do. Offered to ACP clients as session modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Writes only under the session root, the temp dir and a few devices; network allowed.
    #[default]
    Workspace,
    /// No writes except the temp dir; no network.
    ReadOnly,
    /// No filesystem or network restriction (the environment scrub still applies).
    Full,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Workspace, Mode::ReadOnly, Mode::Full];

    /// The stable identifier used on the command line and as the ACP mode id.
    pub fn id(self) -> &'static str {
        match self {
            Mode::Workspace => "workspace",
            Mode::ReadOnly => "read-only",
            Mode::Full => "full",
        }
    }

    pub fn from_id(id: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|mode| mode.id() == id)
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// A program and its arguments, before the engine adds env, cwd and stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// The directories a confined command is measured against.
#[derive(Debug, Clone)]
pub struct Roots {
    /// The session's root directory (writable in `workspace` mode).
    pub workspace: PathBuf,
    /// The temp dir (writable in every mode).
    pub temp: PathBuf,
}

/// Code run in the child between fork and exec (async-signal-safe only).
pub type PreExec = Box<dyn FnMut() -> std::io::Result<()> + Send + Sync>;

/// A launch with its confinement applied.
pub struct Confined {
    pub launch: Launch,
    /// Run in the child after the engine's own pre-exec steps.
    pub pre_exec: Option<PreExec>,
    /// What is and is not enforced for this launch, in words a person can act on.
    pub notices: Vec<String>,
}

/// Applies `mode` to `launch`.
pub fn confine(launch: Launch, mode: Mode, roots: &Roots) -> Confined {
    let _ = roots;
    let notices = match mode {
        Mode::Full => Vec::new(),
        other => vec![format!(
            "sandbox mode {other} is not enforced yet: commands run unconfined"
        )],
    };
    Confined {
        launch,
        pre_exec: None,
        notices,
    }
}
