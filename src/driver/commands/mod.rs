//! Slash commands: the prompts that drive the session's background jobs instead of running as
//! bash. One file per command (its name, description, input hint, argument parsing and answer
//! text); this module holds the list the agent advertises and the parser that recognises them.
//!
//! A prompt is a slash command only when its first word is `/NAME` and NAME is one of
//! [`COMMANDS`]: `/usr/bin/env ls` and `/tmp/x.sh` are still bash. Answers are plain markdown
//! text, provider-neutral: the ACP layer sends them as agent messages. Must not touch: ACP,
//! how jobs run (that is [`crate::jobs`]).

pub mod bg;
pub mod help;
pub mod jobs;
pub mod kill;
pub mod logs;

use crate::jobs::JobId;

/// What the agent advertises about one command (an entry of [`COMMANDS`]; callers only read it).
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

/// Every command, in the order they are advertised and listed by `/help`.
pub const COMMANDS: [&CommandSpec; 5] = [
    &bg::SPEC,
    &jobs::SPEC,
    &kill::SPEC,
    &logs::SPEC,
    &help::SPEC,
];

/// A recognised slash command with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlashCommand {
    /// `/bg SCRIPT`: start SCRIPT as a background job.
    Bg {
        /// The script to run.
        script: String,
    },
    /// `/jobs`: list the session's jobs.
    Jobs,
    /// `/kill ID`: kill a job's process tree.
    Kill {
        /// The job to kill.
        id: JobId,
    },
    /// `/logs ID [N]`: the last N lines of a job's output.
    Logs {
        /// The job whose output to show.
        id: JobId,
        /// How many of the last lines to show.
        lines: usize,
    },
    /// `/help [COMMAND]`.
    Help {
        /// The command to explain; `None`: all of them.
        topic: Option<&'static CommandSpec>,
    },
}

/// Reads `prompt` as a slash command.
///
/// `None`: it is not one (run it as bash). `Some(Err(message))`: it names one of ours, but its
/// arguments are wrong; `message` says what is expected (show it, don't run anything).
pub fn parse(prompt: &str) -> Option<Result<SlashCommand, String>> {
    let text = prompt.trim_start();
    let name_end = text.find(char::is_whitespace).unwrap_or(text.len());
    let spec = find(text[..name_end].strip_prefix('/')?)?;
    let args = text[name_end..].trim();
    let parsed = match spec.name {
        "bg" => bg::parse(args),
        "jobs" => jobs::parse(args),
        "kill" => kill::parse(args),
        "logs" => logs::parse(args),
        "help" => help::parse(args),
        other => unreachable!("/{other} is in COMMANDS but has no parser"),
    };
    Some(parsed.map_err(|problem| format!("{problem}. Usage: `{}`", spec.usage)))
}

/// The command named `name` (without the `/`).
pub fn find(name: &str) -> Option<&'static CommandSpec> {
    COMMANDS.into_iter().find(|spec| spec.name == name)
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
        assert_eq!(parse("/jobs"), Some(Ok(SlashCommand::Jobs)));
        assert_eq!(parse("  \n/jobs\n"), Some(Ok(SlashCommand::Jobs)));
        assert_eq!(
            parse("/bg\tnpm run dev"),
            Some(Ok(SlashCommand::Bg {
                script: "npm run dev".into()
            }))
        );
    }

    #[test]
    fn every_command_has_a_description_a_hint_and_a_usage_naming_it() {
        let names: Vec<&str> = COMMANDS.iter().map(|spec| spec.name).collect();
        assert_eq!(names, ["bg", "jobs", "kill", "logs", "help"]);
        for spec in COMMANDS {
            assert!(
                !spec.description.is_empty() && !spec.hint.is_empty(),
                "{spec:?}"
            );
            assert!(
                spec.usage.starts_with(&format!("/{}", spec.name)),
                "{spec:?}"
            );
            assert_eq!(find(spec.name), Some(spec));
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
