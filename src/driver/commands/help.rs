//! `/help [COMMAND]`: the commands, and that every other prompt is a bash script.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{Command, CommandHost, CommandSpec, Run, COMMANDS};

/// `/help`.
pub const COMMAND: Command = Command::new(SPEC, parse);

/// What the agent advertises about `/help`.
pub const SPEC: CommandSpec = CommandSpec {
    name: "help",
    description: "List the slash commands; every other prompt runs as a bash script",
    hint: "optional command name, e.g. bg",
    usage: "/help [COMMAND]",
};

/// `/help [COMMAND]`'s argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Help {
    /// The command to explain; `None`: all of them.
    pub topic: Option<&'static CommandSpec>,
}

fn parse(args: &str) -> Result<Box<dyn Run>, String> {
    if args.is_empty() {
        return Ok(Box::new(Help { topic: None }));
    }
    let name = args.strip_prefix('/').unwrap_or(args);
    match super::find(name) {
        Some(command) => Ok(Box::new(Help {
            topic: Some(&command.spec),
        })),
        None => {
            let names: Vec<&str> = COMMANDS.iter().map(|command| command.spec.name).collect();
            Err(format!(
                "there is no command {args:?}; the commands are {}",
                names.join(", ")
            ))
        }
    }
}

impl Run for Help {
    fn run<'a>(self: Box<Self>, _host: &'a dyn CommandHost) -> BoxFuture<'a, String> {
        futures::future::ready(answer(self.topic)).boxed()
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
    for spec in COMMANDS.iter().map(|command| &command.spec) {
        text.push_str(&format!("- `{}`: {}\n", spec.usage, spec.description));
    }
    text.push_str(
        "\nBackground jobs belong to this session: they are killed when it closes or when the \
         agent stops. Any other word starting with `/` (like `/usr/bin/env ls`) runs as bash.",
    );
    text
}
