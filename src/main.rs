//! The `acp-bash` binary: parses the command line and dispatches to one subcommand of [`cli`].

mod cli;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::init_logging(cli.log_level.as_deref());
    // One worker thread (plus the main thread, which only waits): commands run in processes of
    // their own, the agent's work per message and per byte is small, and tasks that wake each
    // other on one thread skip a futex hand-off each time: 0.1–0.9 ms less per command than two
    // workers here, at the same throughput (notes/2026-11-29-runtime-one-worker.md).
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
    let code = match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => runtime.block_on(cli::serve::serve(&cli.engine, &cli.store, &cli.model)),
        Command::Demo => runtime.block_on(cli::demo::demo(&cli.engine, cli.log_level.as_deref())),
        Command::Run(args) => {
            runtime.block_on(cli::run::run(&cli.engine, cli.log_level.as_deref(), args))
        }
        Command::ZedConfig => cli::zed_config::zed_config(&cli.engine, &cli.store, &cli.model),
        Command::Doctor => cli::doctor::doctor(),
    };
    // Commands were cancelled and reaped before we got here; don't wait for stray blocking
    // threads (the stdin reader) on the way out.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}
