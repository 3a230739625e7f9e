//! Slash commands: the prompts that drive the session's background jobs instead of running as
//! bash. One file per command; this module holds the list the agent advertises, the parser that
//! recognises them and the provider-neutral [`CommandHost`] their runners are given.
//!
//! A prompt is a slash command only when its first word is `/NAME` and NAME is one of
//! [`COMMANDS`]: `/usr/bin/env ls` and `/tmp/x.sh` are still bash. Answers are plain markdown
//! text, provider-neutral: the ACP layer sends them as agent messages. Must not touch: ACP,
//! how jobs run (that is [`crate::jobs`]).
//!
//! # Adding a command
//!
//! Write `NAME.rs` here with `pub const COMMAND: Command = Command::new(SPEC, parse);`: its
//! [`CommandSpec`], and a `parse` that reads the arguments into a value implementing [`Run`]
//! (what the command does, given a [`CommandHost`]). Then add `NAME,` to the `commands!` list
//! below. Nothing else changes: the ACP layer advertises [`COMMANDS`] and runs any
//! [`SlashCommand`] through its one [`CommandHost`], `/help` lists it, and the transcript
//! snapshots redact the command list (all but `zed__success`, which pins it).

use std::fmt;

use futures::future::BoxFuture;

use crate::jobs::{Job, JobId, JobRegistry, StartError};

/// Declares the command modules and [`COMMANDS`] from one list: a command is registered by its
/// one line here.
macro_rules! commands {
    ($($name:ident,)*) => {
        $(pub mod $name;)*

        /// Every command, in the order they are advertised and listed by `/help`.
        pub const COMMANDS: &[&Command] = &[$(&$name::COMMAND,)*];
    };
}

commands! {
    bg,
    jobs,
    kill,
    logs,
    compact,
    undo,
    permissions,
    help,
}

/// What the agent advertises about one command (callers only read it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandSpec {
    /// The name, typed after the `/`.
    pub name: &'static str,
    /// One line: what it does.
    pub description: &'static str,
    /// What to type after the name (shown by the client before anything is typed).
    pub hint: &'static str,
    /// How to write it, for help and for messages about bad arguments.
    pub usage: &'static str,
}

/// One slash command: what it advertises, and how it reads its arguments into what it runs.
/// Each command's file exports one as `COMMAND`; [`COMMANDS`] lists them.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Command {
    /// Its name, description, hint and usage.
    pub spec: CommandSpec,
    parse: fn(&str) -> Result<Box<dyn Run>, String>,
}

impl Command {
    /// The command advertised as `spec` whose arguments (the prompt after `/NAME`, trimmed)
    /// `parse` reads: `Err(problem)` says what is wrong with them (nothing runs).
    pub const fn new(spec: CommandSpec, parse: fn(&str) -> Result<Box<dyn Run>, String>) -> Self {
        Command { spec, parse }
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command").field("spec", &self.spec).finish()
    }
}

/// What a parsed command does. Its `Debug` form names the command and its arguments
/// (`Kill { id: JobId(1) }`), for logs and tests.
pub trait Run: Send + Sync + fmt::Debug {
    /// Runs the command on `host`; returns its answer, the agent's message (markdown).
    fn run<'a>(self: Box<Self>, host: &'a dyn CommandHost) -> BoxFuture<'a, String>;
}

/// What a command's runner is given: the session's jobs and the client's side of them, without
/// protocol types. The ACP layer implements it (a job's card); so can any other front.
pub trait CommandHost: Send + Sync {
    /// The session's background jobs.
    fn jobs(&self) -> &JobRegistry;

    /// Starts `script` as a background job of the session and shows it to the client (the ACP
    /// layer gives it a tool call that follows it after the turn).
    fn start_job(&self, script: String) -> BoxFuture<'_, Result<Job, StartError>>;

    /// Whether the client shows a job's output as it comes (a live card), rather than when it
    /// ends.
    fn shows_jobs_live(&self) -> bool;

    /// Resolves once `job` has ended and the client has been shown its end.
    fn job_shown_ended<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, ()>;

    /// The session's change tracker ([`crate::changes`]), when what commands change is tracked.
    fn changes(&self) -> Option<std::sync::Arc<crate::changes::ChangeTracker>> {
        None
    }

    /// The session's permissions ([`crate::permit`]: what the user allowed when asked), when
    /// it keeps any.
    fn permits(&self) -> Option<crate::permit::SessionPermits> {
        None
    }

    /// Shows `changes` to the client as an edit card titled with `verb` (`Reverted 2 files`).
    fn show_changes(&self, changes: &crate::changes::Changes, verb: &str) {
        let _ = (changes, verb);
    }
}

/// A recognised slash command with its arguments, ready to run.
#[non_exhaustive]
pub struct SlashCommand {
    command: &'static Command,
    run: Box<dyn Run>,
}

impl SlashCommand {
    /// `command` with the arguments `run` (as its `parse` would make them).
    pub fn new(command: &'static Command, run: impl Run + 'static) -> Self {
        SlashCommand {
            command,
            run: Box::new(run),
        }
    }

    /// What the command advertises.
    pub fn spec(&self) -> &'static CommandSpec {
        &self.command.spec
    }

    /// Runs it on `host`; returns its answer (markdown, for the agent's message).
    pub async fn run(self, host: &dyn CommandHost) -> String {
        self.run.run(host).await
    }
}

impl fmt::Debug for SlashCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.run, f)
    }
}

impl PartialEq for SlashCommand {
    fn eq(&self, other: &Self) -> bool {
        self.command.spec == other.command.spec && format!("{self:?}") == format!("{other:?}")
    }
}

/// Reads `prompt` as a slash command.
///
/// `None`: it is not one (run it as bash). `Some(Err(message))`: it names one of ours, but its
/// arguments are wrong; `message` says what is expected (show it, don't run anything).
pub fn parse(prompt: &str) -> Option<Result<SlashCommand, String>> {
    let text = prompt.trim_start();
    let name_end = text.find(char::is_whitespace).unwrap_or(text.len());
    let command = find(text[..name_end].strip_prefix('/')?)?;
    let args = text[name_end..].trim();
    Some(match (command.parse)(args) {
        Ok(run) => Ok(SlashCommand { command, run }),
        Err(problem) => Err(format!("{problem}. Usage: `{}`", command.spec.usage)),
    })
}

/// The command named `name` (without the `/`).
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS
        .iter()
        .copied()
        .find(|command| command.spec.name == name)
}

/// A job id argument, or what is wrong with it.
fn job_id(word: Option<&str>) -> Result<JobId, String> {
    let word = word.ok_or_else(|| "which job? Give its id (see /jobs)".to_string())?;
    word.parse()
        .map_err(|error: crate::jobs::BadJobId| error.to_string())
}

/// `text` as inline markdown code on one line: the first line, cut at `max` characters (with
/// `…` when anything was left out), fenced with more backticks than it contains.
pub fn inline_code(text: &str, max: usize) -> String {
    let first = text.trim().lines().next().unwrap_or("");
    let mut shown: String = first.chars().take(max).collect();
    if shown.len() < text.trim().len() {
        shown.push('…');
    }
    let longest = shown.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if shown.starts_with('`') || shown.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{shown}{pad}{fence}")
}

pub use crate::text::human_duration;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_advertised_names_are_commands() {
        for bash in [
            "/usr/bin/env ls",
            "/tmp/x.sh arg",
            "/bgx sleep 1",
            "/ bg",
            "ls /bg",
            "echo /jobs",
            "//jobs",
            "/JOBS",
            "",
        ] {
            assert_eq!(parse(bash), None, "{bash:?} is bash");
        }
        let jobs = || SlashCommand::new(&jobs::COMMAND, jobs::Jobs);
        assert_eq!(parse("/jobs"), Some(Ok(jobs())));
        assert_eq!(parse("  \n/jobs\n"), Some(Ok(jobs())));
        assert_eq!(
            parse("/bg\tnpm run dev"),
            Some(Ok(SlashCommand::new(
                &bg::COMMAND,
                bg::Bg {
                    script: "npm run dev".into()
                }
            )))
        );
        assert_eq!(format!("{:?}", jobs()), "Jobs");
    }

    /// What makes a new command its file plus one line: whatever is registered is advertised,
    /// parsed and listed by `/help`, with nothing else to add anywhere.
    #[test]
    fn every_registered_command_is_unique_found_parsed_and_listed_by_help() {
        let names: Vec<&str> = COMMANDS.iter().map(|command| command.spec.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            names.len(),
            "a name is registered twice: {names:?}"
        );
        assert_eq!(names.last(), Some(&"help"), "help comes last: {names:?}");
        let help = help::answer(None);
        for command in COMMANDS {
            let spec = &command.spec;
            assert!(
                !spec.name.is_empty()
                    && spec.name.chars().all(|c| c.is_ascii_lowercase())
                    && !spec.description.is_empty()
                    && !spec.hint.is_empty(),
                "{spec:?}"
            );
            assert!(
                spec.usage == format!("/{}", spec.name)
                    || spec.usage.starts_with(&format!("/{} ", spec.name)),
                "{spec:?}"
            );
            assert_eq!(find(spec.name).map(|found| found.spec), Some(*spec));
            assert!(
                help.contains(&format!("- `{}`: {}\n", spec.usage, spec.description)),
                "/help does not list {spec:?}:\n{help}"
            );
            // Recognised: the prompt `/NAME` is this command (well or badly used), not bash.
            let parsed = parse(&format!("/{}", spec.name)).expect("a command");
            match parsed {
                Ok(parsed) => assert_eq!(parsed.spec(), spec),
                Err(message) => assert!(
                    message.ends_with(&format!("Usage: `{}`", spec.usage)),
                    "{message}"
                ),
            }
            let topic = parse(&format!("/help {}", spec.name)).unwrap().unwrap();
            assert_eq!(
                topic,
                SlashCommand::new(&help::COMMAND, help::Help { topic: Some(spec) })
            );
        }
    }

    #[test]
    fn bad_arguments_say_what_is_wrong_and_how_to_write_it() {
        let message = parse("/kill").unwrap().unwrap_err();
        assert!(message.contains("which job?"), "{message}");
        assert!(message.contains("Usage: `/kill ID`"), "{message}");
        let message = parse("/kill one").unwrap().unwrap_err();
        assert!(message.contains("\"one\" is not a job id"), "{message}");
    }

    #[test]
    fn inline_code_is_one_line_and_fenced_safely() {
        assert_eq!(inline_code("npm run dev", 60), "`npm run dev`");
        assert_eq!(inline_code("echo `date`", 60), "`` echo `date` ``");
        assert_eq!(inline_code("make\nmake test", 60), "`make…`");
        assert_eq!(inline_code("abcdef", 3), "`abc…`");
    }
}
