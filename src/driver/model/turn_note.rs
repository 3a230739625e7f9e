//! What changes during a session, told with the turn's own message instead of a new system
//! prompt: the directory commands start in, the sandbox mode and the date.
//!
//! The system prompt is made once per session and model and then sent byte-identical, so a
//! provider's prompt cache keeps matching it (`notes/2026-12-06-model-cache-and-compaction.md`);
//! when the directory, the mode or the date is no longer what it said, the next prompt starts
//! with this note ([`note_if_changed`]), which the conversation then keeps unchanged.
//! Must not touch: HTTP, ACP.

use std::time::SystemTime;

use crate::exec::Session;
use crate::sandbox;

/// What the model was last told: where commands start, the sandbox mode, the date.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Told {
    cwd: String,
    mode: String,
    date: String,
}

/// What `session` is now.
pub fn now(session: &Session) -> Told {
    Told {
        cwd: session.cwd().display().to_string(),
        mode: session.mode().id().to_string(),
        date: today(),
    }
}

/// The note for `session` when it differs from `last` (what the system prompt or the last note
/// said): the parts that changed only. Then `last` becomes what is now; `None` when nothing
/// changed.
pub fn note_if_changed(session: &Session, last: &mut Option<Told>) -> Option<String> {
    let now = now(session);
    let mut parts = Vec::new();
    let before = last.as_ref();
    if before.map(|b| &b.cwd) != Some(&now.cwd) {
        parts.push(format!("commands now start in {}", now.cwd));
    }
    if before.map(|b| &b.mode) != Some(&now.mode) {
        let mode = session.mode();
        parts.push(format!(
            "the sandbox mode is now `{}`: {}",
            mode.id(),
            sandbox::describe(mode).trim_end()
        ));
    }
    if before.map(|b| &b.date) != Some(&now.date) {
        parts.push(format!("today is {} (UTC)", now.date));
    }
    *last = Some(now);
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "[Environment changed since the system prompt: {}.]",
        parts.join("; ")
    ))
}

/// Today's date in UTC, `YYYY-MM-DD`.
pub fn today() -> String {
    super::system::today(SystemTime::now())
}
