//! The ACP layer: the only part of acp-bash that knows the Agent Client Protocol.
//!
//! Owns: the agent served over stdio ([`AcpBashAgent`], in `agent`), the pure mapping from a
//! presented bash call to `tool_call` / `tool_call_update` ([`bridge`]), the batching of live
//! output into terminal-card updates ([`stream`]), and a small ACP client over the real binary
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
//! use acp_bash::acp::default_engine_config;
//! use acp_bash::exec::Engine;
//! use acp_bash::present::{present_call, present_result};
//! use acp_bash::tool::{run_bash, BashCall};
//! use agent_client_protocol::v1::schema::{SessionUpdate, ToolCallId};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! // Once per process: the engine (sandbox mode, env scrub, timeouts, output bounds).
//! let engine = Engine::new(default_engine_config());
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
//! Or serve the whole agent on any transport:
//!
//! ```no_run
//! use acp_bash::acp::{default_engine_config, AcpBashAgent};
//! use acp_bash::exec::Engine;
//!
//! # async fn example() -> agent_client_protocol::Result<()> {
//! AcpBashAgent::new(Engine::new(default_engine_config()))
//!     .serve(agent_client_protocol::Stdio::new())
//!     .await
//! # }
//! ```

mod agent;
pub mod bridge;
pub mod client;
pub mod stream;

use std::path::PathBuf;
use std::time::Duration;

pub use agent::{prompt_text, AcpBashAgent};

use crate::exec::env::EnvPolicy;
use crate::exec::EngineConfig;
use crate::sandbox;

/// The engine settings `acp-bash` starts from (each can be changed on the command line):
/// a 600 s timeout, 32 KiB of head and 32 KiB of tail kept from a long output (the full output
/// goes to `$TMPDIR/acp-bash-logs`), 1 s between SIGTERM and SIGKILL, 1 s for grandchildren that
/// hold the output pipe after the shell exits, the environment scrub on, `workspace` sandbox mode.
pub fn default_engine_config() -> EngineConfig {
    EngineConfig {
        default_timeout: Duration::from_secs(600),
        env: EnvPolicy {
            scrub: true,
            keep: Vec::new(),
            set: Vec::new(),
        },
        keep_head_bytes: 32 * 1024,
        keep_tail_bytes: 32 * 1024,
        log_dir: default_log_dir(),
        kill_grace: Duration::from_secs(1),
        pipe_grace: Duration::from_secs(1),
        sandbox_mode: sandbox::Mode::default(),
    }
}

fn default_log_dir() -> PathBuf {
    std::env::temp_dir().join("acp-bash-logs")
}
