//! The `acp-bash` binary: parses the command line and dispatches to one subcommand of [`cli`].

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Invocation};

fn main() -> ExitCode {
    // First: a session's zygote is this binary under a hidden argv[0] (it serves and exits).
    acp_bash::sandbox::zygote_main_if_asked();
    one_malloc_arena();
    let cli = Cli::parse();
    let log_level = cli.log_level.clone();
    let invocation = match cli.invocation() {
        Ok(invocation) => invocation,
        Err(error) => {
            eprintln!("acp-bash: {error}");
            return ExitCode::from(2);
        }
    };
    cli::init_logging(log_level.as_deref());
    let log_level = log_level.as_deref();
    match invocation {
        // Builds its runtime itself, once the client's `initialize` is answered.
        Invocation::Serve(args) => cli::serve::serve(&args.engine, &args.store, &args.model),
        Invocation::Demo(engine) => cli::block_on(cli::demo::demo(&engine, log_level)),
        Invocation::Run(args) => cli::block_on(cli::run::run(log_level, args)),
        Invocation::ZedConfig(args) => {
            cli::zed_config::zed_config(&args.engine, &args.store, &args.model)
        }
        Invocation::Doctor(args) => cli::doctor::doctor(&args),
        Invocation::Login(login) => cli::login::login(&login),
        Invocation::Permissions(args) => cli::permissions::permissions(&args),
    }
}

/// Makes every thread allocate from glibc's main heap instead of one arena per thread. The agent
/// has one worker that does nearly all the work, a main thread that only waits, and short-lived
/// helpers (the preparation thread, the blocking pool): their own arenas each reserve 64 MiB and
/// keep pages of their own resident, for no contention worth avoiding
/// (`notes/2026-12-02-start-up.md`). Called before any thread starts.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; no thread has started yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
