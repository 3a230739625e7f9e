//! What the integration tests of several layers share.
//!
//! - [`acp`]: a client for the real binary, hang guards, readers for a turn's updates.
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
pub mod engine;
pub mod fake_model;
#[cfg(target_os = "linux")]
pub mod sandbox;
pub mod schema;
pub mod skip;
pub mod vt;
pub mod zed_replay;

pub use skip::skip_unless;
