//! acp-bash's integration tests: one binary, a module per layer, one `support/`.
//!
//! Find a behaviour's test by its layer:
//!
//! - [`exec`]: the execution engine with real bash processes (cwd, timeouts, output, prelude).
//! - [`sandbox`]: the kernel sandbox against hostile commands, as root and as an ordinary user.
//! - [`tool`]: the bash tool's arguments and result text.
//! - [`present`]: the provider-neutral presentation, checked against the ACP schema and Zed's rules.
//! - [`acp`]: the agent over real pipes with the real SDK: protocol, streaming, modes, transcripts.
//! - [`cli`]: the `acp-bash` subcommands.
//! - [`model`]: the model driver against a fake provider on loopback.
//!
//! [`support`] holds what several layers share: a client for the real binary, the schema checker
//! (with the vendored ACP schema), the Zed card replay, and engine and sandbox helpers.

mod acp;
mod cli;
mod exec;
mod mcp;
mod model;
mod netproxy;
mod permit;
mod present;
// The Linux kernel sandbox's tests (macOS's backend is unit-tested in src/sandbox/macos/).
#[cfg(target_os = "linux")]
mod sandbox;
mod support;
mod tool;
