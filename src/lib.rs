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
//! - [`classify`]: what a command does (a read, a search, a listing), for display only.
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
pub mod changes;
pub mod classify;
pub mod driver;
pub mod exec;
pub mod jobs;
pub mod mcp;
pub mod netproxy;
pub mod permit;
pub mod present;
mod random;
pub mod sandbox;
pub mod store;
pub mod text;
pub mod tool;
pub mod turn;

/// The token that cancels a run ([`exec::Session::run`], [`acp::ToolCallRunner::run`]).
pub use tokio_util::sync::CancellationToken;

/// The public structs are `#[non_exhaustive]`: they may gain fields in a minor release, so
/// outside this crate a struct expression of one does not compile, not even with `..base`.
/// Callers build them with their constructors and builders (`RunRequest::new(..).cwd(..)`),
/// or `Default` and field assignment. `notes/2026-11-30-non-exhaustive-api.md` says which types
/// and why. These doctests keep the attribute on one type of each family: each `compile_fail`
/// block is the block before it plus one struct expression (so it fails for that reason only).
///
/// The engine's request:
///
/// ```
/// let mut request = acp_bash::exec::RunRequest::new("true");
/// request.timeout = None;
/// ```
///
/// ```compile_fail
/// let mut request = acp_bash::exec::RunRequest::new("true");
/// request = acp_bash::exec::RunRequest { timeout: None, ..request };
/// ```
///
/// The tool's call:
///
/// ```
/// let mut call = acp_bash::tool::BashCall::new("true");
/// call.description = None;
/// ```
///
/// ```compile_fail
/// let mut call = acp_bash::tool::BashCall::new("true");
/// call = acp_bash::tool::BashCall { description: None, ..call };
/// ```
///
/// A presentation view:
///
/// ```
/// use acp_bash::present::{present_call, CallView};
/// let mut view: CallView = present_call(&acp_bash::tool::BashCall::new("true"), "/".as_ref());
/// view.description = None;
/// ```
///
/// ```compile_fail
/// use acp_bash::present::{present_call, CallView};
/// let mut view: CallView = present_call(&acp_bash::tool::BashCall::new("true"), "/".as_ref());
/// view = CallView { description: None, ..view };
/// ```
#[cfg(doctest)]
#[non_exhaustive]
pub struct NonExhaustiveStructs;

/// `#[non_exhaustive]` on the ACP layer's settings (see [`NonExhaustiveStructs`]).
///
/// ```
/// let mut features = acp_bash::acp::bridge::ClientFeatures::CARD;
/// features.terminal = true;
/// ```
///
/// ```compile_fail
/// let mut features = acp_bash::acp::bridge::ClientFeatures::CARD;
/// features = acp_bash::acp::bridge::ClientFeatures { terminal: true, ..features };
/// ```
#[cfg(all(doctest, feature = "acp"))]
#[non_exhaustive]
pub struct NonExhaustiveAcpStructs;

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Source files of private modules (and the binary): nothing in them is reachable from the
    /// public API unless re-exported, so their `pub struct`s need no `#[non_exhaustive]`.
    const PRIVATE: &[&str] = &[
        "src/main.rs",
        "src/cli/",
        "src/exec/prelude.rs",
        "src/exec/process.rs",
        "src/exec/run.rs",
        "src/jobs/start.rs",
        "src/acp/transport/envelope.rs",
        "src/acp/transport/incoming.rs",
        "src/acp/transport/outgoing.rs",
        "src/sandbox/linux/child/",
        "src/sandbox/linux/spawn.rs",
        "src/sandbox/linux/cgroup.rs",
    ];

    fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, files);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }

    /// Every `pub struct` of a public module is `#[non_exhaustive]` (a new one too), so that
    /// adding a field is never a breaking change (`notes/2026-11-30-non-exhaustive-api.md`).
    #[test]
    fn every_public_struct_is_non_exhaustive() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        let mut missing = Vec::new();
        for file in files {
            let name = file
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .to_string();
            if PRIVATE.iter().any(|private| name.starts_with(private)) {
                continue;
            }
            let source = std::fs::read_to_string(&file).unwrap();
            let lines: Vec<&str> = source.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if !line.trim_start().starts_with("pub struct ") {
                    continue;
                }
                let attributes = lines[..i]
                    .iter()
                    .rev()
                    .map(|line| line.trim_start())
                    .take_while(|line| line.starts_with("#[") || line.starts_with("///"));
                if !attributes.into_iter().any(|a| a == "#[non_exhaustive]") {
                    missing.push(format!("{name}:{}: {}", i + 1, line.trim()));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "public structs without #[non_exhaustive] (add it, and a constructor if callers \
             build the struct; or make the struct pub(crate)):\n{}",
            missing.join("\n")
        );
    }
}
