//! What changes during a session, told with the turn's own message instead of a new system
//! prompt: the directory commands start in, the sandbox mode and the date.
//!
//! The system prompt is made once per session and model and then sent byte-identical, so a
//! provider's prompt cache keeps matching it (`notes/2026-12-06-model-cache-and-compaction.md`);
//! when the directory, the mode or the date is no longer what it said, the next prompt starts
//! with this note ([`note_if_changed`]), which the conversation then keeps unchanged.
//! Must not touch: HTTP, ACP.

use std::time::{SystemTime, UNIX_EPOCH};

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
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of day `z` since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_become_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_793), (2026, 12, 6));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
