//! The `acp-bash` command line, one file per subcommand: [`serve`] (the default: ACP over stdio),
//! [`demo`], [`run`], [`doctor`], [`zed_config`], [`login`] and [`permissions`]. The arguments are apart from their parsers:
//! [`args`] (the command line's shape), [`flags`] (the flag groups subcommands share and what
//! they turn into), [`parse`] (value parsers); [`child`] holds logging and the child agent that
//! `demo` and `run` talk to.
//!
//! Owns: argument parsing, logging setup, and the terminal rendering of `demo` and `run`.
//! Everything protocol-related lives in `acp_bash::acp`.

pub mod args;
pub mod child;
pub mod demo;
pub mod doctor;
pub mod flags;
pub mod login;
pub mod model;
pub mod parse;
pub mod permissions;
pub mod run;
pub mod serve;
pub mod zed_config;

pub use args::{Cli, DoctorArgs, Invocation, RunArgs};
pub use child::{child_client, describe_error, init_logging};
pub use flags::{EngineArgs, EnvArgs, StoreArgs};

use std::process::ExitCode;
use std::time::Duration;

/// Runs `work` to its end on the agent's async runtime, then shuts the runtime down.
///
/// One worker thread (plus the thread that calls this, which only waits): commands run in
/// processes of their own, the agent's work per message and per byte is small, and tasks that
/// wake each other on one thread skip a futex hand-off each time: 0.1–0.9 ms less per command
/// than two workers here, at the same throughput (notes/2026-11-29-runtime-one-worker.md).
pub fn block_on(work: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("acp-bash: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(work);
    // Commands were cancelled and reaped before we got here; don't wait for stray blocking
    // threads (the stdin reader) on the way out.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}
