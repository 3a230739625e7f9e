//! The system prompt: what the model is told about how to work and where.
//!
//! Owns [`system_prompt`], which fills in the one prompt file, `prompt.md` (a workflow:
//! explore, reproduce, edit, verify, summarise; editing idioms that work through bash; the
//! environment: the OS, the date, the command timeout, the session's directories, the
//! sandbox mode and what it forbids, no stdin, the output budget, background jobs), then the
//! project's `AGENTS.md` / `CLAUDE.md` ([`super::project_docs`]). Changes to the prompt are
//! measured: `tests/it/model/prompt.rs` pins its parts, `benches/agent/prompt.rs` (`cargo bench -- model-prompt`) reports its size.
//! Must not touch: HTTP, ACP.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::project_docs::project_instructions;
use crate::exec::Session;
use crate::sandbox;

/// The prompt's text, with `{name}` holes that [`system_prompt`] fills.
pub const PROMPT_TEMPLATE: &str = include_str!("prompt.md");

/// The system prompt for a turn on `session`.
pub fn system_prompt(session: &Session, budget: usize) -> String {
    let mode = session.mode();
    let cwd = session.cwd();
    let timeout = session.engine().config().default_timeout;
    let holes = [
        ("{os}", os_name()),
        ("{date}", today(SystemTime::now())),
        ("{root}", session.root().display().to_string()),
        ("{cwd}", cwd.display().to_string()),
        ("{mode_id}", mode.id().to_string()),
        ("{mode_text}", sandbox::describe(mode).to_string()),
        ("{timeout}", human(timeout)),
        ("{budget}", budget.to_string()),
        ("{instructions}", project_instructions(&cwd)),
    ];
    fill(PROMPT_TEMPLATE, &holes)
}

/// `template` with each hole replaced once, left to right, so that a value holding `{name}`
/// (a path, a project's instructions) is never filled in again.
fn fill(template: &str, holes: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len() + 1024);
    let mut rest = template;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match holes.iter().find(|(hole, _)| rest.starts_with(hole)) {
            Some((hole, value)) => {
                out.push_str(value);
                rest = &rest[hole.len()..];
            }
            None => {
                out.push('{');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out.trim_end().to_string()
}

/// The operating system as the model should know it: `Linux (Debian GNU/Linux 12
/// (bookworm))`, `macOS`.
pub fn os_name() -> String {
    let family = match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "macOS",
        other => other,
    };
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("PRETTY_NAME="))
                .map(|name| name.trim().trim_matches('"').to_string())
        })
        .filter(|name| !name.is_empty());
    match pretty {
        Some(pretty) => format!("{family} ({pretty}, {})", std::env::consts::ARCH),
        None => format!("{family} ({})", std::env::consts::ARCH),
    }
}

/// The UTC date of `now` as `YYYY-MM-DD` (a day's resolution: the prompt stays the same all day).
pub fn today(now: SystemTime) -> String {
    let ms = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let mut date = crate::store::iso8601(u64::try_from(ms).unwrap_or(u64::MAX));
    date.truncate("YYYY-MM-DD".len());
    date
}

/// `600s` as `10 minutes`, `90s` as `90 seconds`.
fn human(duration: Duration) -> String {
    let secs = duration.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        let minutes = secs / 60;
        format!("{minutes} minute{}", if minutes == 1 { "" } else { "s" })
    } else {
        format!("{secs} second{}", if secs == 1 { "" } else { "s" })
    }
}
