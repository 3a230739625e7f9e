//! The ACP layer: the only part of acp-bash that knows the Agent Client Protocol.
//!
//! Owns: the agent served over stdio ([`AcpBashAgent`], in `agent`), the pure mapping from a
//! presented bash call to `tool_call` / `tool_call_update` ([`bridge`]), the replay of a stored session on `session/load`
//! ([`replay`]), stdin/stdout as a transport ([`transport`]), and a small ACP client over the real binary
//! ([`client`], used by `acp-bash demo`, `acp-bash run` and the tests). Must not touch: how
//! commands run (the engine), what the result text says (the tool and its markers), how a result
//! is presented (the presentation layer).
//!
//! # Embedding
//!
//! A Rust agent (an LLM-driven one, say) reuses the whole stack for its own bash tool: one call,
//! [`ToolCallRunner::run`], runs a tool call in the sandbox and sends its `tool_call`, its live
//! output (a terminal card for Zed, nothing live for other clients), the cap notice and the final
//! update (a console block for clients without the card), and returns the result.
//!
//! In an agent whose model calls the `bash` tool ([`crate::tool::ToolDefinition::bash`]), this
//! is the whole embedding (the README's snippet; a test keeps the two equal;
//! `examples/embed_agent.rs` is a complete agent around it):
//!
//! ```no_run
//! # use acp_bash::acp::sdk::v1::schema::{InitializeRequest, NewSessionRequest};
//! # use acp_bash::acp::sdk::v1::schema::{SessionId, ToolCallId};
//! # use acp_bash::acp::sdk::{v1::ConnectionTo, Client};
//! # use acp_bash::acp::{ConnectionSink, ToolCallRunner};
//! # use acp_bash::exec::{Engine, EngineConfig};
//! # use acp_bash::CancellationToken;
//! # async fn embed(
//! #     init: InitializeRequest,
//! #     new_session: NewSessionRequest,
//! #     cx: ConnectionTo<Client>,
//! #     session_id: SessionId,
//! #     tool_call_id: ToolCallId,
//! #     arguments: String,
//! #     cancel: CancellationToken,
//! # ) -> acp_bash::acp::sdk::Result<String> {
//! let engine = Engine::new(EngineConfig::default()); // once per process
//! let runner = ToolCallRunner::for_client(&init.client_capabilities); // on `initialize`
//! let session = engine.session(&new_session.cwd)?; // on `session/new` (else an error response)
//! let mut sink = ConnectionSink::new(cx, session_id); // per prompt: its `session/update`s
//! // Per tool call of your model: the JSON arguments it wrote in; out, the tool_call, its live
//! // output and final update on the wire, and the text the model reads back.
//! let for_the_model = runner
//!     .run_model_call(&session, &tool_call_id, &arguments, &mut sink, &cancel)
//!     .await;
//! # Ok(for_the_model)
//! # }
//! ```
//!
//! The same, one step at a time ([`ToolCallRunner::run`] takes a [`crate::tool::BashCall`] and
//! returns the whole result):
//!
//! ```no_run
//! use std::path::Path;
//!
//! use acp_bash::acp::bridge::ClientFeatures;
//! use acp_bash::acp::sdk::v1::schema::{SessionUpdate, ToolCallId};
//! use acp_bash::acp::ToolCallRunner;
//! use acp_bash::exec::{Engine, EngineConfig};
//! use acp_bash::present::model::{model_result, DEFAULT_MODEL_BUDGET};
//! use acp_bash::tool::BashArgs;
//! use acp_bash::CancellationToken;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! // Once per process: the engine (sandbox mode, env scrub, timeouts, output bounds).
//! let engine = Engine::new(EngineConfig::default());
//! // Once per ACP session: its own working directory, which `cd` moves.
//! let session = engine.session(Path::new("/home/me/project"))?;
//! // Once per connection: what the client renders (`ClientFeatures::from_capabilities`).
//! let runner = ToolCallRunner::new(ClientFeatures::CARD);
//!
//! // Per tool call, from your model's arguments:
//! let call = BashArgs::from_json(r#"{"command": "cargo test", "description": "Run the tests"}"#)?
//!     .into_call();
//! // A real agent sends each update as a `session/update` at once (`acp::ConnectionSink`).
//! let mut sink = |update: SessionUpdate| println!("{}", serde_json::to_string(&update).unwrap());
//! let id = ToolCallId::new("call-1");
//! let result = runner.run(&session, &id, &call, &mut sink, &CancellationToken::new()).await;
//! // What the model reads: plain output within a budget, then the status markers.
//! let text = model_result(&result.outcome, DEFAULT_MODEL_BUDGET);
//! # let _ = text;
//! # Ok(())
//! # }
//! ```
//!
//! Or serve the whole agent on any transport ([`AgentStdio`] is stdin/stdout as the binary
//! serves them; the SDK's `Stdio` works too, with a thread hop per read and per write):
//!
//! ```no_run
//! use acp_bash::acp::AcpBashAgent;
//! use acp_bash::exec::{Engine, EngineConfig};
//!
//! # async fn example() -> agent_client_protocol::Result<()> {
//! AcpBashAgent::new(Engine::new(EngineConfig::default()))
//!     .serve(acp_bash::acp::AgentStdio::new())
//!     .await
//! # }
//! ```

mod agent;
pub mod bridge;
pub mod call_wire;
pub mod changes_card;
#[cfg(feature = "cli")]
pub mod client;
pub mod commands;
pub mod modes;
pub mod replay;
pub use crate::present::stream;
pub mod summary;
pub mod tool_call;
pub mod transport;
pub mod v2;

pub use agent::{
    prompt_of, prompt_text, AcpBashAgent, DEFAULT_MAX_PROMPT_BYTES, MODEL_OPTION_ID,
    MODE_OPTION_ID, PROMPT_IMAGE_LINE_BYTES,
};
pub use call_wire::CallWire;
pub use modes::{ModeChoice, SandboxModes};
pub use tool_call::{run_tool_call, ConnectionSink, ToolCallRunner, UpdateSink};

/// The ACP SDK this layer is built on (`agent-client-protocol`), so that embedders name exactly
/// the types acp-bash takes and returns.
pub use agent_client_protocol as sdk;
pub use transport::{AgentStdio, ClientBehind, LineTransport, TransportLimits};
