//! Support for the integration tests: `mod support;` in a `tests/*.rs` file.
//!
//! - [`schema`]: checks ACP wire lines against the ACP v1 JSON schema.
//! - [`zed_replay`]: replays `session/update`s the way Zed does, to see the card it would show.
//!
//! Each test binary uses only part of this, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod schema;
pub mod zed_replay;
