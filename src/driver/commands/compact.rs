//! `/compact`: the model summarises the conversation so far, and the summary replaces it (the
//! user's own messages stay). The model driver runs it itself
//! ([`crate::driver::model::compaction`]); any other driver has no conversation to compact,
//! and says so.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{Command, CommandHost, CommandSpec, Run};

/// `/compact`.
pub const COMMAND: Command = Command::new(SPEC, parse);

/// What the agent advertises about `/compact`.
pub const SPEC: CommandSpec = CommandSpec {
    name: "compact",
    description: "Summarise the model's conversation so far to free its context window (your messages are kept)",
    hint: "no arguments",
    usage: "/compact",
};

/// `/compact` (no arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compact;

fn parse(args: &str) -> Result<Box<dyn Run>, String> {
    if !args.is_empty() {
        return Err(format!("/compact takes no arguments, got {args:?}"));
    }
    Ok(Box::new(Compact))
}

impl Run for Compact {
    /// What a session without a model answers (the model driver never runs it here).
    fn run<'a>(self: Box<Self>, _host: &'a dyn CommandHost) -> BoxFuture<'a, String> {
        futures::future::ready(
            "Nothing to compact: `/compact` summarises a model's conversation, and no model \
             drives this session (start acp-bash with `--model`)."
                .to_string(),
        )
        .boxed()
    }
}
