//! The shell driver: the prompt IS the script (see [`super::call_from_prompt`]), or one of
//! acp-bash's own slash commands ([`super::commands`]); one call per prompt.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::seam::{Driver, Prompt, StopReason, TurnError, TurnHost};
use super::{call_from_prompt, commands};

/// The driver acp-bash uses unless told otherwise: a prompt `/NAME …` naming one of the slash
/// commands runs it (bad arguments are answered with what is expected); any other prompt is a
/// bash script, run as one call; a prompt with nothing to run is answered with what to type.
/// Every turn ends with [`StopReason::EndTurn`] (the host turns it into `cancelled` after a
/// cancel). A typed command is a terminal card, unless [`ShellDriver::classifying`] asks for
/// reads, searches and listings to be shown as such ([`crate::classify`]), as a model's are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShellDriver {
    classify: bool,
}

impl ShellDriver {
    /// The shell driver whose calls are classified when `classify` ([`BashCall::classify`]:
    /// display only).
    ///
    /// [`BashCall::classify`]: crate::tool::BashCall::classify
    pub fn classifying(classify: bool) -> Self {
        ShellDriver { classify }
    }
}

impl Driver for ShellDriver {
    fn name(&self) -> &str {
        "shell"
    }

    fn drive<'a>(
        &'a self,
        prompt: &'a Prompt,
        turn: &'a mut dyn TurnHost,
    ) -> BoxFuture<'a, Result<StopReason, TurnError>> {
        async move {
            let text = prompt.text();
            match commands::parse(&text) {
                Some(Ok(command)) => {
                    turn.run_command(command).await;
                }
                Some(Err(message)) => turn.say(&message),
                // It runs in the session's cwd as the turn finds it.
                None => match call_from_prompt(&text, None) {
                    Ok(call) => {
                        turn.run_bash(call.classified(self.classify)).await;
                    }
                    // Not an error: the user is told what to type, and the turn ends.
                    Err(nothing_to_run) => turn.say(&nothing_to_run.to_string()),
                },
            }
            Ok(StopReason::EndTurn)
        }
        .boxed()
    }
}
