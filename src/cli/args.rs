//! The command line's shape: the top-level arguments and the subcommands with their own
//! arguments. The flag groups several subcommands share are in [`super::flags`]; the value
//! parsers (durations, sizes, limits) in [`super::parse`].

use clap::{Args, Parser, Subcommand};

use super::flags::{EngineArgs, StoreArgs};

/// An ACP agent whose tool is a sandboxed bash: every prompt is a bash script, run by the agent
/// itself and shown as a live terminal card in Zed (a console block in other ACP clients).
///
/// With no command, serves ACP on stdin/stdout: that is how an editor starts it.
#[derive(Parser, Debug)]
#[command(name = "acp-bash", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// How much the agent logs to stderr: error, warn, info, debug or trace (or any RUST_LOG
    /// filter). Overrides RUST_LOG; the default is warn. Logs never go to stdout.
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve ACP v1 on stdin/stdout (the default). stdout carries only protocol messages.
    Serve,
    /// Start acp-bash as a child agent and run a few representative commands through it, showing
    /// what Zed's terminal card and what other clients' console block display.
    Demo,
    /// Run one script through the real protocol, print its output, exit with its exit status.
    Run(RunArgs),
    /// Print the settings.json snippet that adds this binary to Zed's agents.
    ZedConfig,
    /// Check each sandbox layer on this machine (Landlock, namespaces, private /proc, network
    /// isolation): whether it works here and, if not, why and what to do about it.
    Doctor,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Act as a client without the terminal card (like any non-Zed editor): print the console
    /// block that such a client shows instead of the live output.
    #[arg(long)]
    pub plain: bool,
    /// Also print every JSON-RPC line exchanged with the agent, to stderr (so that stdout stays
    /// the command's output): `->` client to agent, `<-` agent to client.
    #[arg(long)]
    pub transcript: bool,
    /// The bash script (several words are joined with spaces). It runs in the current directory.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "SCRIPT"
    )]
    pub script: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_takes_the_script_after_a_double_dash() {
        let cli =
            Cli::try_parse_from(["acp-bash", "run", "--plain", "--", "echo", "-n", "hi"]).unwrap();
        match cli.command {
            Some(Command::Run(args)) => {
                assert!(args.plain);
                assert_eq!(args.script.join(" "), "echo -n hi");
            }
            other => panic!("{other:?}"),
        }
    }
}
