//! The command line's shape: the top-level arguments and the subcommands, each with only the flag
//! groups that apply to it ([`super::flags`]): `serve` and `run` take the engine flags, `demo`
//! passes them to its child agent, `zed-config` writes them (and the session flags) into the
//! snippet, and `doctor` takes the environment flags, the only ones that change what it reports.
//! The value parsers (durations, sizes, limits) are in [`super::parse`].
//!
//! Flags given before the subcommand (`acp-bash --sandbox full run -- ls`, and what Zed starts:
//! `acp-bash --timeout 90s`) still work: [`Cli::invocation`] merges them into the subcommand's,
//! and refuses those the subcommand does not take.

use clap::builder::Resettable;
use clap::{ArgMatches, Args, FromArgMatches, Parser, Subcommand};

use super::flags::{EngineArgs, EnvArgs, ProtectionArgs, StoreArgs};
use super::login::{Login, LoginArgs};
use super::model::ModelArgs;
use super::permissions::PermissionsArgs;

/// An ACP agent whose tool is a sandboxed bash: every prompt is a bash script, run by the agent
/// itself and shown as a live terminal card in Zed (a console block in other ACP clients).
///
/// With no command, serves ACP on stdin/stdout: that is how an editor starts it.
#[derive(Parser, Debug)]
#[command(
    name = "acp-bash",
    version,
    after_help = "Examples:\n  acp-bash demo                      see what an editor shows\n  \
                  acp-bash run -- 'ls -la'           one command through the real protocol\n  \
                  acp-bash doctor                    what the sandbox enforces on this machine\n  \
                  acp-bash --timeout 90s zed-config  the snippet for Zed's settings.json\n  \
                  acp-bash login openai              store an API key for --model\n\n\
                  Each command's --help lists the flags it takes."
)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// How much the agent logs to stderr: error, warn, info, debug or trace (or any RUST_LOG
    /// filter). Overrides RUST_LOG; the default is warn. Logs never go to stdout.
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// The flags of `serve`, for a bare `acp-bash` (what an editor starts).
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve ACP v1 on stdin/stdout (the default). stdout carries only protocol messages.
    #[command(after_help = "Example (what an editor runs):\n  acp-bash serve --sandbox workspace")]
    Serve(Deferred<ServeArgs>),
    /// Start acp-bash as a child agent and run a few representative commands through it, showing
    /// what Zed's terminal card and what other clients' console block display.
    #[command(after_help = "Example:\n  acp-bash demo --sandbox workspace")]
    Demo(Deferred<DemoArgs>),
    /// Run one script through the real protocol, print what a client shows, exit with its exit
    /// status.
    #[command(after_help = RUN_HELP)]
    Run(Deferred<RunArgs>),
    /// Print the settings.json snippet that adds this binary to Zed's agents, with the engine
    /// and session flags given here in its `args`.
    #[command(after_help = "Example:\n  acp-bash zed-config --timeout 90s --sandbox read-only")]
    ZedConfig(Deferred<ServeArgs>),
    /// Check each sandbox layer on this machine (Landlock, namespaces, private /proc, network
    /// isolation): whether it works here and, if not, why and what to do about it; then what
    /// holds in each mode, and which of this environment's variables the scrub would remove.
    #[command(after_help = "Example:\n  acp-bash doctor --keep-env GH_TOKEN")]
    Doctor(Deferred<DoctorArgs>),
    /// Store an API key for `--model` (read from stdin, never shown nor taken as an argument)
    /// in the config directory, mode 600: `$XDG_CONFIG_HOME/acp-bash/keys/PROVIDER`, else
    /// `~/.config/acp-bash/keys/PROVIDER`. The key's variable (OPENAI_API_KEY,
    /// ANTHROPIC_API_KEY or `--api-key-env`) wins over the file when set. Editors run this as
    /// the agent's terminal login.
    #[command(after_help = LOGIN_HELP)]
    Login(Deferred<LoginArgs>),
    /// List what was allowed always when asked (`$XDG_CONFIG_HOME/acp-bash/permissions/allowed`,
    /// else `~/.config/…`), or take one back: `remove HOST` or `remove PREFIX`.
    #[command(
        after_help = "Examples:\n  acp-bash permissions\n  acp-bash permissions remove example.com\n  \
                      acp-bash permissions remove npm install"
    )]
    Permissions(Deferred<PermissionsArgs>),
}

const LOGIN_HELP: &str = "\
Where the model driver looks for the key, in order: the variable (--api-key-env NAME, else
OPENAI_API_KEY / ANTHROPIC_API_KEY), then the file stored here. A file that others may read is
refused. Delete the file to log out.

Examples:
  acp-bash login openai
  printf '%s\\n' \"$KEY\" | acp-bash login anthropic";

const RUN_HELP: &str = "\
Exit status: the command's (128 + the signal's number when it was killed or cancelled); 0 when a
slash command (/help, /jobs, /bg …) answered or the prompt had nothing to run (empty, only
comments); 1 when the agent refused the prompt.

Examples:
  acp-bash run -- 'ls -la; exit 3'
  acp-bash run --plain -- 'for i in 1 2 3; do echo $i; sleep 1; done'
  acp-bash run -- /help";

/// A subcommand's flags, added to its `clap::Command` only when that subcommand is the one
/// parsed (or its help shown), through clap's `Command::defer`. A bare `acp-bash`, which is
/// what an editor starts, then builds the flags of no subcommand: five sets of 25–40 flags, each
/// with its help text copied, that every start-up used to build and drop before it could answer
/// `initialize` (notes/2026-12-03-start-up-clap-deferred.md).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deferred<T>(pub T);

impl<T: FromArgMatches> FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Deferred)
    }

    fn from_arg_matches_mut(matches: &mut ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(&mut self, matches: &mut ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

impl<T: Args> Args for Deferred<T> {
    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }

    fn augment_args(command: clap::Command) -> clap::Command {
        command.defer(keeping_about::<T, false>)
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        command.defer(keeping_about::<T, true>)
    }
}

/// `T`'s flags added to `command`, whose about stays its own: `T`'s doc comment would replace
/// it, since the derive sets the subcommand's about after its flags, and they now come later.
fn keeping_about<T: Args, const FOR_UPDATE: bool>(command: clap::Command) -> clap::Command {
    let about = command.get_about().cloned();
    let long_about = command.get_long_about().cloned();
    let command = match FOR_UPDATE {
        false => T::augment_args(command),
        true => T::augment_args_for_update(command),
    };
    command
        .about(Resettable::from(about))
        .long_about(Resettable::from(long_about))
}

/// The flags of `serve` (and of a bare `acp-bash`), which `zed-config` writes into the snippet.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct ServeArgs {
    /// How commands run.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Where sessions are kept.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Which model drives the turns (none: every prompt is a bash script).
    #[command(flatten)]
    pub model: ModelArgs,
}

/// The flags of `demo`: the engine flags of its child agent.
#[derive(Args, Debug, Clone, Default)]
pub struct DemoArgs {
    /// How commands run.
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// The flags of `doctor`: those that change what it reports.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct DoctorArgs {
    /// The environment scrub whose removals `doctor` lists.
    #[command(flatten)]
    pub env: EnvArgs,
    /// The masks and Git metadata rule whose effect `doctor` lists.
    #[command(flatten)]
    pub protection: ProtectionArgs,
    /// Workspace mode's network allowlist, which `doctor` lists.
    #[command(flatten)]
    pub network: super::flags::NetworkArgs,
}

/// The flags and script of `run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Act as a client without the terminal card (like any non-Zed editor): show the live
    /// console view while the command runs, then the console block such a client shows.
    #[arg(long)]
    pub plain: bool,
    /// Also print every JSON-RPC line exchanged with the agent, to stderr (so that stdout stays
    /// the command's output): `->` client to agent, `<-` agent to client.
    #[arg(long)]
    pub transcript: bool,
    /// The bash script (several words are joined with spaces), or a slash command (`/help`).
    /// It runs in the current directory. A flag of `run` goes before the script; an unknown
    /// one is refused, not taken as the script's start (`run --timout 5s -- ls`).
    #[arg(required = true, trailing_var_arg = true, value_name = "SCRIPT")]
    pub script: Vec<String>,
    /// How commands run.
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// What to do, with every flag that applies to it (those before the subcommand merged in).
#[derive(Debug)]
pub enum Invocation {
    /// `serve`, or no subcommand.
    Serve(ServeArgs),
    /// `demo`.
    Demo(EngineArgs),
    /// `run`.
    Run(RunArgs),
    /// `zed-config`.
    ZedConfig(ServeArgs),
    /// `doctor`.
    Doctor(DoctorArgs),
    /// `login`.
    Login(Login),
    /// `permissions`.
    Permissions(PermissionsArgs),
}

impl Cli {
    /// The subcommand with the flags given before it merged into its own (a flag given after
    /// the subcommand wins), or an error naming a flag given before it that it does not take.
    pub fn invocation(self) -> Result<Invocation, String> {
        let top = self.serve;
        let refuse = |name: &str, given: Vec<String>| match given.first() {
            Some(flag) => Err(format!(
                "{flag} does not apply to `acp-bash {name}` (`acp-bash {name} --help` lists \
                 the flags it takes)"
            )),
            None => Ok(()),
        };
        Ok(match self.command {
            None => Invocation::Serve(top),
            Some(Command::Serve(Deferred(args))) => Invocation::Serve(merge(&top, &args)),
            Some(Command::ZedConfig(Deferred(args))) => Invocation::ZedConfig(merge(&top, &args)),
            Some(Command::Demo(Deferred(args))) => {
                refuse("demo", [top.store.to_args(), top.model.to_args()].concat())?;
                Invocation::Demo(merge_engine(&top.engine, &args.engine))
            }
            Some(Command::Run(Deferred(mut args))) => {
                refuse("run", [top.store.to_args(), top.model.to_args()].concat())?;
                args.engine = merge_engine(&top.engine, &args.engine);
                Invocation::Run(args)
            }
            // An editor's terminal login appends `login PROVIDER` to the agent's own arguments:
            // the serve flags before it are taken, and only `--model` counts.
            Some(Command::Login(Deferred(args))) => {
                Invocation::Login(args.login(top.model.spec())?)
            }
            Some(Command::Permissions(Deferred(args))) => {
                refuse(
                    "permissions",
                    [
                        top.store.to_args(),
                        top.model.to_args(),
                        top.engine.to_args(),
                    ]
                    .concat(),
                )?;
                Invocation::Permissions(args)
            }
            Some(Command::Doctor(Deferred(args))) => {
                refuse(
                    "doctor",
                    [top.store.to_args(), top.model.to_args()].concat(),
                )?;
                let mut engine_only = top.engine.clone();
                let env = std::mem::take(&mut engine_only.env);
                let protection = std::mem::take(&mut engine_only.protection);
                let network = std::mem::take(&mut engine_only.network);
                refuse("doctor", engine_only.to_args())?;
                Invocation::Doctor(DoctorArgs {
                    env: EnvArgs {
                        keep_env: [env.keep_env, args.env.keep_env].concat(),
                        set_env: [env.set_env, args.env.set_env].concat(),
                        no_env_scrub: env.no_env_scrub || args.env.no_env_scrub,
                    },
                    protection: ProtectionArgs {
                        allow_read: [protection.allow_read, args.protection.allow_read].concat(),
                        mask: [protection.mask, args.protection.mask].concat(),
                        allow_git_hooks_and_config_writes: protection
                            .allow_git_hooks_and_config_writes
                            || args.protection.allow_git_hooks_and_config_writes,
                    },
                    network: super::flags::NetworkArgs {
                        network: args.network.network.or(network.network),
                        allow_host: [network.allow_host, args.network.allow_host].concat(),
                        deny_host: [network.deny_host, args.network.deny_host].concat(),
                        map_host: [network.map_host, args.network.map_host].concat(),
                        map_unlisted_host: [
                            network.map_unlisted_host,
                            args.network.map_unlisted_host,
                        ]
                        .concat(),
                    },
                })
            }
        })
    }
}

/// Flags parsed again from their arguments: an option given twice keeps the last value, a
/// repeatable one keeps all.
#[derive(Parser, Debug)]
#[command(no_binary_name = true, args_override_self = true)]
struct Reparse {
    #[command(flatten)]
    serve: ServeArgs,
}

/// `before` (flags given before the subcommand) with `after` (the subcommand's own) on top.
fn merge(before: &ServeArgs, after: &ServeArgs) -> ServeArgs {
    let args = [
        before.engine.to_args(),
        before.store.to_args(),
        before.model.to_args(),
        after.engine.to_args(),
        after.store.to_args(),
        after.model.to_args(),
    ]
    .concat();
    match Reparse::try_parse_from(&args) {
        Ok(parsed) => parsed.serve,
        // Cannot happen (the arguments are what valid flags print as), but `after` is the
        // better answer than none.
        Err(_) => after.clone(),
    }
}

fn merge_engine(before: &EngineArgs, after: &EngineArgs) -> EngineArgs {
    let wrap = |engine: &EngineArgs| ServeArgs {
        engine: engine.clone(),
        ..ServeArgs::default()
    };
    merge(&wrap(before), &wrap(after)).engine
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    fn invocation(args: &[&str]) -> Result<Invocation, String> {
        Cli::try_parse_from(args)
            .map_err(|e| e.to_string())?
            .invocation()
    }

    /// The help `acp-bash ARGS` prints.
    fn help(args: &[&str]) -> String {
        match Cli::try_parse_from(args) {
            Err(error) if error.kind() == clap::error::ErrorKind::DisplayHelp => error.to_string(),
            other => panic!("{args:?} printed no help: {other:?}"),
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        // Builds every subcommand, the deferred flags included.
        Cli::command().debug_assert();
    }

    #[test]
    fn a_subcommands_flags_are_built_only_when_it_is_the_one_parsed() {
        let command = Cli::command();
        for name in [
            "serve",
            "demo",
            "run",
            "zed-config",
            "doctor",
            "login",
            "permissions",
        ] {
            let subcommand = command.find_subcommand(name).unwrap();
            assert_eq!(subcommand.get_arguments().count(), 0, "{name}");
        }
        // The top level's own flags (a bare `acp-bash` serves) are there from the start.
        assert!(command.get_arguments().any(|a| a.get_id() == "sandbox"));
    }

    #[test]
    fn each_subcommands_help_has_its_own_about_and_its_flags() {
        // About: the variant's doc comment, not its flags struct's (`Deferred` adds the flags,
        // and their struct's doc, after the derive set the about).
        for (args, about, flag) in [
            (
                &["acp-bash", "serve", "--help"][..],
                "Serve ACP v1 on stdin/stdout",
                "--sandbox",
            ),
            (
                &["acp-bash", "help", "serve"],
                "Serve ACP v1 on stdin/stdout",
                "--model",
            ),
            (
                &["acp-bash", "demo", "--help"],
                "Start acp-bash as a child agent",
                "--timeout",
            ),
            (
                &["acp-bash", "run", "-h"],
                "Run one script through the real protocol",
                "--plain",
            ),
            (
                &["acp-bash", "zed-config", "--help"],
                "Print the settings.json snippet",
                "--no-history",
            ),
            (
                &["acp-bash", "doctor", "--help"],
                "Check each sandbox layer",
                "--keep-env",
            ),
            (
                &["acp-bash", "login", "--help"],
                "Store an API key for `--model`",
                "[PROVIDER]",
            ),
        ] {
            let help = help(args);
            assert!(help.starts_with(about), "{args:?}:\n{help}");
            assert!(help.contains(flag), "{args:?}:\n{help}");
            assert!(help.contains("--log-level <LEVEL>"), "{args:?}:\n{help}");
            assert!(!help.contains("The flags of"), "{args:?}:\n{help}");
        }
    }

    #[test]
    fn run_takes_the_script_after_a_double_dash() {
        match invocation(&["acp-bash", "run", "--plain", "--", "echo", "-n", "hi"]).unwrap() {
            Invocation::Run(args) => {
                assert!(args.plain);
                assert_eq!(args.script.join(" "), "echo -n hi");
            }
            other => panic!("{other:?}"),
        }
    }

    /// A flag `run` does not have, before the script, is refused by name (a typo is not run as
    /// the script's first word), and the script's own flags still pass after its first word.
    #[test]
    fn run_refuses_an_unknown_flag_before_the_script() {
        for flag in ["--require-sandboxes", "--timout"] {
            let error = invocation(&["acp-bash", "run", flag, "--", "echo hi"]).unwrap_err();
            let text = error.to_string();
            assert!(text.contains("unexpected argument"), "{text}");
            assert!(text.contains(flag), "{text}");
        }
        match invocation(&["acp-bash", "run", "echo", "-n", "--plain", "hi"]).unwrap() {
            Invocation::Run(args) => {
                assert!(
                    !args.plain,
                    "after the script's first word, words are the script's"
                );
                assert_eq!(args.script.join(" "), "echo -n --plain hi");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_before_the_subcommand_merge_into_its_own() {
        let Invocation::Run(args) = invocation(&[
            "acp-bash",
            "--timeout",
            "90s",
            "--keep-env",
            "A",
            "run",
            "--timeout",
            "5s",
            "--keep-env",
            "B",
            "--",
            "ls",
        ])
        .unwrap() else {
            panic!()
        };
        let config = args.engine.config();
        assert_eq!(config.default_timeout, std::time::Duration::from_secs(5));
        assert_eq!(config.env.keep, ["A", "B"]);
        let Invocation::ZedConfig(serve) = invocation(&[
            "acp-bash",
            "--no-history",
            "zed-config",
            "--sandbox",
            "full",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            [serve.engine.to_args(), serve.store.to_args()].concat(),
            ["--sandbox", "full", "--no-history"]
        );
        let Invocation::Doctor(doctor) = invocation(&[
            "acp-bash",
            "--keep-env",
            "A",
            "--mask",
            "/m",
            "doctor",
            "--no-env-scrub",
            "--allow-read",
            "/r",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(doctor.env.to_args(), ["--keep-env", "A", "--no-env-scrub"]);
        assert_eq!(
            doctor.protection.to_args(),
            ["--allow-read", "/r", "--mask", "/m"]
        );
    }

    #[test]
    fn a_flag_the_subcommand_does_not_take_is_refused_wherever_it_stands() {
        let before = invocation(&["acp-bash", "--max-jobs", "3", "doctor"]).unwrap_err();
        assert!(
            before.contains("--max-jobs does not apply to `acp-bash doctor`"),
            "{before}"
        );
        assert!(invocation(&["acp-bash", "doctor", "--max-jobs", "3"]).is_err());
        let store = invocation(&["acp-bash", "--no-history", "run", "--", "ls"]).unwrap_err();
        assert!(store.contains("--no-history"), "{store}");
    }
}
