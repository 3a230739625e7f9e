//! `/help [COMMAND]`: the commands, and that every other prompt is a bash script.

use super::{CommandSpec, COMMANDS};

/// What the agent advertises about `/help`.
pub const SPEC: CommandSpec = CommandSpec {
    name: "help",
    description: "List the slash commands; every other prompt runs as a bash script",
    hint: "optional command name, e.g. bg",
    usage: "/help [COMMAND]",
};

pub(super) fn parse(args: &str) -> Result<super::SlashCommand, String> {
    if args.is_empty() {
        return Ok(super::SlashCommand::Help { topic: None });
    }
    let name = args.strip_prefix('/').unwrap_or(args);
    match super::find(name) {
        Some(spec) => Ok(super::SlashCommand::Help { topic: Some(spec) }),
        None => {
            let names: Vec<&str> = COMMANDS.iter().map(|spec| spec.name).collect();
            Err(format!(
                "there is no command {args:?}; the commands are {}",
                names.join(", ")
            ))
        }
    }
}

/// The help text: one command's, or all of them.
pub fn answer(topic: Option<&CommandSpec>) -> String {
    if let Some(spec) = topic {
        return format!("`{}`: {}.", spec.usage, spec.description);
    }
    let mut text = String::from(
        "Every prompt is a bash script, run in this session's sandbox and current directory \
         (`cd` carries over; a first line `# words` describes it). A prompt whose first word is \
         one of these commands is a command instead:\n\n",
    );
    for spec in COMMANDS {
        text.push_str(&format!("- `{}`: {}\n", spec.usage, spec.description));
    }
    text.push_str(
        "\nBackground jobs belong to this session: they are killed when it closes or when the \
         agent stops. Any other word starting with `/` (like `/usr/bin/env ls`) runs as bash.",
    );
    text
}
