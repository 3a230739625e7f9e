//! The bash tool: a [`BashCall`] in, a result text with status markers out.
//!
//! Owns the tool's arguments ([`BashCall`]), running them on an engine session ([`run_bash`]) and
//! the status markers that end every result text ([`markers`]). Must not touch: how a command is
//! spawned or confined (that is `exec` and `sandbox`), how a result is shown (`present`), ACP.

pub mod bash;
pub mod markers;

pub use bash::{run_bash, BashCall, BashResult};
pub use markers::{parse_result, render_result, MarkerError};
