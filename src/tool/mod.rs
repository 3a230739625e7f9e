//! The bash tool: a [`BashCall`] in, a result text with status markers out.
//!
//! Owns the tool's arguments ([`BashCall`]), running them on an engine session ([`run_bash`]),
//! the status markers that end every result text ([`markers`]) and the tool as a model sees it
//! ([`model`]: definition, arguments). Must not touch: how a command is
//! spawned or confined (that is `exec` and `sandbox`), how a result is shown (`present`), ACP.

pub mod bash;
pub mod markers;
pub mod model;

pub use bash::{run_bash, BashCall, BashResult};
pub use markers::{
    parse_console_result, parse_result, render_console_result, render_result, MarkerError,
};
pub use model::{ArgsError, BashArgs, ToolDefinition, TOOL_NAME};
