//! acp-bash: an ACP agent whose tool is a sandboxed bash.
//!
//! The crate is layered; data flows top to bottom and never back up:
//!
//! - [`driver`]: turns a prompt into bash tool calls (the shell driver: the prompt IS the script).
//! - [`tool`]: the bash tool: arguments in, result text with status markers out ([`tool::markers`]).
//! - [`jobs`]: background jobs owned by a session (start, list, read output, kill), on the engine.
//! - [`exec`]: the execution engine: spawn in a sandbox, env scrub, per-session cwd, process group,
//!   timeout, bounded and streamed output, kill on cancel.
//! - [`sandbox`]: kernel confinement applied to each command (Landlock, namespaces).
//! - [`present`]: pure, provider-neutral presentation of a call and its result.
//! - [`store`]: the session store: what is kept of each session on disk (provider-neutral).
//! - [`acp`]: the only layer that knows the Agent Client Protocol: the agent, the bridge that maps
//!   presentations to `tool_call` / `tool_call_update`, and a small client used by the CLI and tests.
//!
//! Only [`acp`] imports `agent_client_protocol`.
//!
//! # Features
//!
//! - `acp` (default): the ACP layer, [`acp`], on the `agent-client-protocol` SDK (re-exported
//!   as `acp::sdk`).
//! - `cli` (default): what the `acp-bash` binary needs (clap, tracing-subscriber) and the ACP
//!   client that spawns an agent (`acp::client`).
//!
//! `default-features = false` leaves the engine, the sandbox, the tool and the presentation,
//! without the SDK or clap.

#[cfg(feature = "acp")]
pub mod acp;
pub mod driver;
pub mod exec;
pub mod jobs;
pub mod present;
pub mod sandbox;
pub mod store;
pub mod tool;

/// The token that cancels a run ([`exec::Session::run`], [`acp::ToolCallRunner::run`]).
pub use tokio_util::sync::CancellationToken;
