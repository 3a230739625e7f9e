//! What the integration tests of several layers share.
//!
//! - [`acp`]: a client for the real binary, hang guards, readers for a turn's updates.
//! - [`engine`]: runs scripts through the engine's `Session::run`.
//! - [`sandbox`]: spawns confined commands and watches for processes that escape.
//! - [`schema`]: checks ACP wire lines against the vendored ACP v1 JSON schema.
//! - [`zed_replay`]: replays `session/update`s the way Zed does, to see the card it would show.

pub mod acp;
pub mod engine;
#[cfg(target_os = "linux")]
pub mod sandbox;
pub mod schema;
pub mod zed_replay;
