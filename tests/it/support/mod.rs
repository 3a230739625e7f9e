//! What the integration tests of several layers share.
//!
//! - [`acp`]: a client for the real binary, hang guards, readers for a turn's updates.
//! - [`cache_meter`]: counts prompt-cache reads as Anthropic and OpenAI do (metered fakes).
//! - [`engine`]: runs scripts through the engine's `Session::run`.
//! - [`fake_model`]: a fake OpenAI / Anthropic provider on 127.0.0.1 streaming scripted SSE.
//! - [`sandbox`]: spawns confined commands and watches for processes that escape.
//! - [`schema`]: checks ACP wire lines against the vendored ACP v1 JSON schema.
//! - [`skip`]: [`skip_unless`], the ONE way a test skips for lack of a capability. Use it at
//!   every skip site: `if !support::skip_unless("private /proc", support.private_proc.clone()) {
//!   return; }`. It lists the skip (`.ci/run` prints the list) and fails the test instead when CI
//!   requires the capability (`ACPBASH_REQUIRE_SANDBOX=1`, set by `.ci/run` as root, for each layer
//!   `acp-bash doctor` reports working). Name capabilities as doctor prints its layers.
//! - [`vt`]: an independent VT parser (`vte`) that judges escape sequences for the oracles.
//! - [`zed_replay`]: replays `session/update`s the way Zed does, to see the card it would show.

pub mod acp;
pub mod cache_meter;
pub mod engine;
pub mod fake_model;
pub mod sandbox;
pub mod schema;
pub mod skip;
pub mod vt;
pub mod zed_replay;

#[cfg_attr(not(target_os = "linux"), allow(unused_imports))]
pub use skip::skip_unless;

/// The default of [`hang_guard`]. Wait with [`hang_guard`], which the lab can stretch.
pub const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a test waits for something before it calls it a hang (generous, never a timing
/// assertion): 60 s, or `ACPBASH_HANG_GUARD_SECS` seconds. The platform lab sets that variable
/// under QEMU's TCG, where everything runs many times slower than here, so that a slow run is
/// not reported as a hang (scripts/lab/guest/suite.sh).
pub fn hang_guard() -> std::time::Duration {
    static GUARD: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
    *GUARD.get_or_init(|| {
        std::env::var("ACPBASH_HANG_GUARD_SECS")
            .ok()
            .and_then(|secs| secs.trim().parse::<u64>().ok())
            .filter(|&secs| secs > 0)
            .map_or(HANG_GUARD, std::time::Duration::from_secs)
    })
}

/// Set in a copy of the test binary that [`in_own_process`] started.
const IN_OWN_PROCESS: &str = "ACPBASH_TEST_IN_OWN_PROCESS";

/// For a test that measures its own process (peak RSS): returns `true` in a fresh copy of this
/// test binary that runs only the test named `test` (its full path); otherwise starts that copy,
/// fails if its test failed, and returns `false`. So what the test measures is its run alone,
/// not what the other tests of this binary did before or beside it.
pub fn in_own_process(test: &str) -> bool {
    if std::env::var_os(IN_OWN_PROCESS).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = std::process::Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(IN_OWN_PROCESS, "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the test binary again");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && text.contains("1 passed"),
        "{test} in its own process ({}):\n{text}",
        output.status
    );
    false
}
