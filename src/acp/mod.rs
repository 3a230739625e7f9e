//! The ACP layer: the only part of acp-bash that knows the Agent Client Protocol.
//!
//! Owns: the agent served over stdio ([`AcpBashAgent`], in `agent`), the pure mapping from a
//! presented bash call to `tool_call` / `tool_call_update` ([`bridge`]), the batching of live
//! output into terminal-card updates ([`stream`]), stdin/stdout as a transport ([`transport`]), and a small ACP client over the real binary
//! ([`client`], used by `acp-bash demo`, `acp-bash run` and the tests). Must not touch: how
//! commands run (the engine), what the result text says (the tool and its markers), how a result
//! is presented (the presentation layer).
//!
//! # Embedding
//!
//! A Rust agent (an LLM-driven one, say) can reuse the whole stack for its own bash tool: the
//! engine runs the command in the sandbox, the tool renders the result text with status markers,
//! the presentation reads it back, and the bridge turns it into ACP updates, a live terminal card
//! for Zed and a console block for every other client.
//!
//! ```no_run
//! use std::path::Path;
//! use std::time::Instant;
//!
//! use acp_bash::acp::bridge::{self, ClientFeatures};
//! use acp_bash::acp::stream::{Coalescer, StreamLimits};
//! use acp_bash::exec::{Engine, EngineConfig};
//! use acp_bash::present::{present_call, present_result};
//! use acp_bash::tool::{run_bash, BashCall};
//! use agent_client_protocol::v1::schema::{SessionUpdate, ToolCallId};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! // Once per process: the engine (sandbox mode, env scrub, timeouts, output bounds).
//! let engine = Engine::new(EngineConfig::default());
//! // Once per ACP session: its own working directory, which `cd` moves.
//! let session = engine.session(Path::new("/home/me/project"))?;
//!
//! // Per tool call (here from your model's tool arguments):
//! let call = BashCall {
//!     command: "cargo test".into(),
//!     description: Some("Run the tests".into()),
//!     cwd: session.cwd(),
//!     timeout: None,
//! };
//! // What the client advertised in `initialize` (`ClientFeatures::from_capabilities`).
//! let features = ClientFeatures { terminal_output: true, terminal: true };
//! let id = ToolCallId::new("call-1");
//! let view = present_call(&call);
//! let mut updates = vec![SessionUpdate::ToolCall(bridge::tool_call(&id, &call.command, &view, features))];
//!
//! // Run it; live output goes through the coalescer to `terminal_output` updates.
//! // (A real agent sends each update as a `session/update` notification as soon as it is made.)
//! let mut coalescer = Coalescer::new(StreamLimits::default());
//! let mut live = Vec::new();
//! let result = run_bash(
//!     &session,
//!     &call,
//!     &mut |chunk: &str| live.extend(coalescer.push(chunk, Instant::now())),
//!     &CancellationToken::new(),
//! )
//! .await;
//! live.extend(coalescer.finish(Instant::now()));
//! for data in &live {
//!     updates.push(SessionUpdate::ToolCallUpdate(bridge::output_update(&id, data)));
//! }
//!
//! // The final update: status and exit for the card, or the console block for other clients.
//! let presented = present_result(&call, &result.text);
//! updates.push(SessionUpdate::ToolCallUpdate(bridge::final_update(&id, &view, &presented, features)));
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
pub mod client;
pub mod commands;
pub mod stream;
pub mod summary;
pub mod transport;

pub use agent::{prompt_text, AcpBashAgent};
pub use transport::AgentStdio;
