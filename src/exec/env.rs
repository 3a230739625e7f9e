//! The environment scrub: which of the agent's variables a command may see.
//!
//! Owns: the rules that recognise a secret by its variable's name or by its value, the keep-list
//! and set-list, and the report of what was removed (names only, never values).
//! The exact rules are written down in `notes/2026-11-29-env-scrub-rules.md`.

use std::ffi::OsString;

/// What the scrub removes, keeps and sets.
#[derive(Debug, Clone, Default)]
pub struct EnvPolicy {
    /// Remove variables that look like secrets (on by default).
    pub scrub: bool,
    /// Names kept even when they look like secrets (exact names).
    pub keep: Vec<String>,
    /// Variables set for every command, after the scrub (they win over inherited ones).
    pub set: Vec<(String, String)>,
}

/// Why a variable was removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScrubReason {
    /// Its name marks a secret (the word that matched, e.g. `token`).
    Name(String),
    /// Its value looks like a credential (what kind, e.g. `GitHub token`).
    Value(&'static str),
}

/// One variable the scrub removed: its name and why. Never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scrubbed {
    pub name: String,
    pub reason: ScrubReason,
}

/// The environment commands start from, and what was removed to get it.
#[derive(Debug, Clone, Default)]
pub struct PreparedEnv {
    pub vars: Vec<(OsString, OsString)>,
    pub removed: Vec<Scrubbed>,
}
