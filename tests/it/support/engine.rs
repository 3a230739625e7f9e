//! Shared helper for the tests that drive the engine through `Session::run`.

use std::time::Duration;

use std::path::Path;

use acp_bash::exec::{Engine, EngineConfig, RunOutcome, RunRequest, Session};
use acp_bash::sandbox::Mode;
use tokio_util::sync::CancellationToken;

/// How long any run may take before the test calls it a hang.
// HANG_GUARD stays importable from here (new tests should wait with hang_guard()).
#[allow(unused_imports)]
pub use super::{hang_guard, HANG_GUARD};

/// A session rooted at `dir` of an engine in `full` mode (no file or network rules: the tests
/// that use it are about runs, not confinement).
pub fn full_session(dir: &Path) -> Session {
    Engine::new(EngineConfig::default().sandbox_mode(Mode::Full))
        .session(dir)
        .unwrap()
}

/// Makes a named pipe at `path`: a script that reads it waits until the test writes to it.
pub fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

/// Runs `script` to the end (output streamed nowhere).
pub async fn run(session: &Session, script: &str) -> RunOutcome {
    run_with(session, script, None, &CancellationToken::new()).await
}

/// Runs `script` with a timeout of its own and a cancel token; panics if it hangs.
pub async fn run_with(
    session: &Session,
    script: &str,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
) -> RunOutcome {
    let mut request = RunRequest::new(script);
    request.timeout = timeout;
    tokio::time::timeout(
        hang_guard(),
        session.run(request, &mut |_: &str| {}, cancel),
    )
    .await
    .expect("the run hung")
}

/// A `sleep` argument no other process on the machine uses: `1000.<pid><tag-digits>`. A script
/// that runs `sleep <marker>` can then be found in `/proc` by [`running`].
pub fn sleep_marker(tag: &str) -> String {
    let digits: u32 = tag.bytes().map(u32::from).sum();
    format!("1000.{}{digits}", std::process::id())
}

/// How many live (not zombie) processes run `sleep <marker>`.
pub fn running(marker: &str) -> usize {
    let needle = format!("sleep\0{marker}\0");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let alive = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'));
            alive
                && std::fs::read(entry.path().join("cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .count()
}

/// Waits (polling /proc, at most [`hang_guard()`]) until no process runs `sleep <marker>`;
/// returns whether that happened.
pub async fn gone(marker: &str) -> bool {
    let deadline = tokio::time::Instant::now() + hang_guard();
    while tokio::time::Instant::now() < deadline {
        if running(marker) == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}
