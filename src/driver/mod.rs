//! Drivers: turning what the user typed into a turn of events.
//!
//! Owns the driver seam ([`seam`]: the [`Driver`] trait, the turn events a driver makes through
//! its [`TurnHost`], how a turn ends) and the shell driver ([`ShellDriver`], built on
//! [`call_from_prompt`]: the prompt IS the script, one call per prompt, with an optional first
//! line `# what it does` as the call's description). A model driver (one prompt, many tool
//! calls) is another [`Driver`]. Must not touch: running commands, presentation, recording, ACP
//! (those are the host's: [`crate::turn`] and below).
//!
//! Also owns the slash commands ([`commands`]): prompts like `/bg npm run dev` or `/jobs` that
//! drive the session's background jobs instead of running as bash.

pub mod commands;
#[cfg(feature = "model")]
pub mod model;
pub mod seam;
pub mod shell;

pub use seam::{
    AuthMethod, Cost, Driver, ModelChoice, Prompt, PromptBlock, StopReason, TurnError, TurnHost,
    Usage,
};
pub use seam::{Compaction, CompactionStatus};
pub use shell::ShellDriver;

use std::fmt;
use std::time::Duration;

use crate::tool::BashCall;

/// Why a prompt does not make a bash call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DriverError {
    /// The prompt is empty, blank, or only comments (a description with nothing to run). Its
    /// message is meant for the user: it says what to type instead.
    NoCommand,
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::NoCommand => write!(
                f,
                "Nothing to run: acp-bash runs each prompt as a bash script. Type a command such \
                 as `ls -la` (a first line `# what it does` becomes its description), or /help \
                 for acp-bash's own commands."
            ),
        }
    }
}

impl std::error::Error for DriverError {}

/// The bash call a prompt asks for (it runs in the session's current directory).
///
/// If the first non-blank line is `# words` (a `#`, a space, then text), the words are the
/// description and the command is the rest; otherwise the whole prompt is the command. A shebang
/// (`#!…`) or a `#comment` without the space is part of the command. The command is trimmed of
/// blank lines before and after it, and Windows line endings become `\n` (bash would otherwise
/// see a `\r` at the end of every word that ends a line). A command made only of comments and
/// blank lines is no command.
pub fn call_from_prompt(
    prompt_text: &str,
    timeout: Option<Duration>,
) -> Result<BashCall, DriverError> {
    let text = prompt_text.replace("\r\n", "\n");
    let mut lines: Vec<&str> = text.split('\n').collect();
    drop_blank_ends(&mut lines);

    let description = lines.first().and_then(|first| description_of(first));
    if description.is_some() {
        lines.remove(0);
        drop_blank_ends(&mut lines);
    }

    let runs_something = lines.iter().any(|line| {
        let line = line.trim_start();
        !line.is_empty() && !line.starts_with('#')
    });
    if !runs_something {
        return Err(DriverError::NoCommand);
    }
    let mut call = BashCall::new(lines.join("\n"));
    call.description = description;
    call.request.timeout = timeout;
    Ok(call)
}

/// `Some("words")` for a line `# words`.
fn description_of(line: &str) -> Option<String> {
    let words = line.trim().strip_prefix("# ")?.trim();
    (!words.is_empty()).then(|| words.to_string())
}

fn drop_blank_ends(lines: &mut Vec<&str>) {
    while lines.last().is_some_and(|line| line.trim().is_empty()) {
        lines.pop();
    }
    let leading = lines
        .iter()
        .take_while(|line| line.trim().is_empty())
        .count();
    lines.drain(..leading);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(prompt: &str) -> Result<BashCall, DriverError> {
        call_from_prompt(prompt, None)
    }

    fn command_and_description(prompt: &str) -> (String, Option<String>) {
        let call = call(prompt).unwrap_or_else(|error| panic!("{prompt:?}: {error}"));
        (call.request.script, call.description)
    }

    #[test]
    fn the_prompt_is_the_script() {
        assert_eq!(
            command_and_description("ls -la"),
            ("ls -la".to_string(), None)
        );
    }

    #[test]
    fn a_first_comment_line_is_the_description() {
        assert_eq!(
            command_and_description("# Run the unit tests\ncargo test\n"),
            (
                "cargo test".to_string(),
                Some("Run the unit tests".to_string())
            )
        );
    }

    #[test]
    fn blank_lines_around_the_description_and_command_are_dropped() {
        assert_eq!(
            command_and_description("\n  \n# List files  \n\n\nls\n  cat x\n\n \n"),
            ("ls\n  cat x".to_string(), Some("List files".to_string()))
        );
    }

    #[test]
    fn blank_lines_and_indentation_inside_the_script_are_kept() {
        let script = "for f in *; do\n\n    echo \"$f\"\ndone";
        assert_eq!(command_and_description(script), (script.to_string(), None));
    }

    #[test]
    fn only_the_first_comment_is_the_description() {
        assert_eq!(
            command_and_description("# Build\n# release mode\ncargo build --release"),
            (
                "# release mode\ncargo build --release".to_string(),
                Some("Build".to_string())
            )
        );
    }

    #[test]
    fn a_shebang_is_part_of_the_command() {
        let script = "#!/usr/bin/env bash\necho hi";
        assert_eq!(command_and_description(script), (script.to_string(), None));
    }

    #[test]
    fn a_comment_without_a_space_is_part_of_the_command() {
        let script = "#TODO\necho hi";
        assert_eq!(command_and_description(script), (script.to_string(), None));
    }

    #[test]
    fn windows_line_endings_become_newlines() {
        assert_eq!(
            command_and_description("# Two steps\r\necho a\r\necho b\r\n"),
            ("echo a\necho b".to_string(), Some("Two steps".to_string()))
        );
    }

    #[test]
    fn the_call_carries_the_timeout_and_nothing_else() {
        let timeout = Duration::from_secs(30);
        let call = call_from_prompt("make", Some(timeout)).unwrap();
        assert_eq!(
            call,
            BashCall::from(crate::exec::RunRequest::new("make").timeout(timeout))
        );
    }

    #[test]
    fn a_prompt_with_nothing_to_run_is_refused() {
        for prompt in [
            "",
            "   ",
            "\n\n \t\n",
            "# Just a description",
            "# Words\n\n",
            "#!/bin/bash\n",
        ] {
            assert_eq!(call(prompt), Err(DriverError::NoCommand), "{prompt:?}");
        }
    }

    #[test]
    fn the_refusal_says_what_to_send_instead() {
        let message = DriverError::NoCommand.to_string();
        assert!(message.starts_with("Nothing to run"), "{message}");
        assert!(message.contains("bash script"), "{message}");
        assert!(message.contains("/help"), "{message}");
        assert!(message.contains("`ls -la`"), "{message}");
        assert!(message.contains("`# what it does`"), "{message}");
    }
}
