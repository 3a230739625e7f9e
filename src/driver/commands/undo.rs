//! `/undo [N | CALL-ID]`: puts back what a command changed in the session folder
//! ([`crate::changes`]): the last command's changes, the `N`th last's, or those of the call
//! with that id; refuses, naming the files, when any of them changed since.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{Command, CommandHost, CommandSpec, Run};
use crate::changes::{UndoError, Which};
use crate::present::changes::printable;

/// `/undo`.
pub const COMMAND: Command = Command::new(SPEC, parse);

/// What the agent advertises about `/undo`.
pub const SPEC: CommandSpec = CommandSpec {
    name: "undo",
    description: "Put back the files the last command (or the Nth last) changed",
    hint: "nothing, N, or a call id",
    usage: "/undo [N | CALL-ID]",
};

/// `/undo`'s argument.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Undo {
    /// Which command's changes.
    pub which: Which,
}

fn parse(args: &str) -> Result<Box<dyn Run>, String> {
    let mut words = args.split_whitespace();
    let which = match words.next() {
        None => Which::Back(1),
        Some(word) => match word.parse::<usize>() {
            Ok(0) => return Err("/undo N counts from 1 (the last command)".to_string()),
            Ok(n) => Which::Back(n),
            Err(_) => Which::Call(word.to_string()),
        },
    };
    if let Some(extra) = words.next() {
        return Err(format!("/undo takes one argument, got also {extra:?}"));
    }
    Ok(Box::new(Undo { which }))
}

impl Run for Undo {
    fn run<'a>(self: Box<Self>, host: &'a dyn CommandHost) -> BoxFuture<'a, String> {
        async move {
            let Some(tracker) = host.changes() else {
                return "What commands change is not tracked in this session (workspace mode \
                        only, and not with `--no-changes`): nothing to undo."
                    .to_string();
            };
            let which = self.which.clone();
            let result = tokio::task::spawn_blocking(move || tracker.undo(&which)).await;
            match result {
                Ok(Ok(undone)) => {
                    host.show_changes(&undone.reverted, "Reverted");
                    let all = undone.record.changes.files.len();
                    let call = &undone.record.call_id;
                    if undone.failed.is_empty() {
                        return format!(
                            "Put back {all} file(s) as they were before call `{call}`."
                        );
                    }
                    let list: Vec<String> = undone
                        .failed
                        .iter()
                        .map(|(path, why)| format!("- `{}`: {why}", printable(path)))
                        .collect();
                    format!(
                        "Put back {} of {all} file(s) as they were before call `{call}`; these \
                         could not be put back (the changes are no longer kept for undo):\n{}",
                        all.saturating_sub(undone.failed.len()),
                        list.join("\n")
                    )
                }
                Ok(Err(UndoError::Nothing(why))) => format!("Nothing to undo: {why}."),
                Ok(Err(UndoError::Conflict(files))) => {
                    let list: Vec<String> = files
                        .iter()
                        .map(|(path, why)| format!("- `{}`: {why}", printable(path)))
                        .collect();
                    format!(
                        "Not undone (no file was touched): these files changed since, or \
                         cannot be put back:\n{}",
                        list.join("\n")
                    )
                }
                Err(error) => format!("The undo failed: {error}"),
            }
        }
        .boxed()
    }
}
