//! Compaction: when the conversation nears the model's context window, the model summarises
//! it, and the summary replaces it (`notes/2026-12-06-model-cache-and-compaction.md`).
//!
//! Owns when ([`due`]: at [`THRESHOLD`] of the window, by the last reply's reported tokens or,
//! without them, an estimate from the bytes), the request that asks for the summary
//! ([`SUMMARY_PROMPT`]), and what the conversation becomes ([`replace`]): the user's own
//! messages (the most recent first, up to [`KEPT_USER_BYTES`]) and then the summary, as Codex
//! does. The loop ([`super::agent_loop`]) runs it before a request that would pass the
//! threshold, on a context overflow, and for `/compact`; each is told to the client
//! ([`crate::driver::Compaction`]). Must not touch: HTTP, ACP.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::agent_loop::LoopSettings;
use super::api::{Delta, Message, ModelRequest};
use super::client::{ApiKey, ModelClient};
use super::history;
use crate::driver::{Compaction, CompactionStatus, TurnHost};

/// The share of the window at which the conversation is compacted.
pub const THRESHOLD: f64 = 0.8;

/// The most bytes of the user's own messages kept word for word (about 20 000 tokens, as
/// Codex keeps), the most recent first.
pub const KEPT_USER_BYTES: usize = 80 * 1024;

/// What the model is asked, appended as a user message after the conversation.
pub const SUMMARY_PROMPT: &str = "\
[Context compaction] The conversation is about to exceed your context window. Write a summary \
that replaces everything above: another engineer (you, with no other memory) continues the work \
from it alone. Do not call any tool; answer with the summary only, in plain text:\n\
1. The user's goal and every request or constraint they gave, in their words where it matters.\n\
2. What has been done: commands that mattered, files read and changed (with paths), results \
of builds and tests, errors met and how they were solved.\n\
3. The current state: the working directory, what works, what does not.\n\
4. What remains, in order, with the next step first.\n\
Keep exact names, paths, commands and error messages; leave out what no longer matters.";

/// The first words of the message that holds a summary (so a later compaction knows it).
pub const SUMMARY_HEADER: &str = "[Summary of the conversation so far, written by you when \
the context was compacted; the user's own messages are kept above it.]";

/// Tokens estimated from bytes: a quarter, rounded up (what providers average for English
/// and code).
pub fn estimate_tokens(messages: &[Message], system: &str) -> u64 {
    ((history::size(messages) + system.len()) as u64).div_ceil(4)
}

/// Whether a conversation of `tokens` is due for compaction in a window of `window` tokens.
pub fn due(tokens: u64, window: u64) -> bool {
    window > 0 && tokens as f64 >= window as f64 * THRESHOLD
}

/// The conversation after compaction: the user's own messages, oldest first, as many of the
/// most recent as fit in [`KEPT_USER_BYTES`] (an earlier summary is not one of them: the new
/// summary covers it), then the summary. Nothing else is kept.
pub fn replace(messages: &[Message], summary: &str) -> Vec<Message> {
    let mut kept = Vec::new();
    let mut bytes = 0;
    for message in messages.iter().rev() {
        let Message::User(text) = message else {
            continue;
        };
        if text.starts_with(SUMMARY_HEADER) {
            continue;
        }
        if bytes + text.len() > KEPT_USER_BYTES {
            break;
        }
        bytes += text.len();
        kept.push(Message::User(text.clone()));
    }
    kept.reverse();
    kept.push(Message::User(format!(
        "{SUMMARY_HEADER}\n\n{}\n\n[Continue from here.]",
        summary.trim()
    )));
    kept
}

/// What a compaction says of the images it took out of the conversation (none: nothing).
fn images_dropped(images: usize) -> String {
    match images {
        0 => String::new(),
        1 => " The image you gave is no longer sent to the model: only what the summary says \
              of it is left (give it again if the model needs it)."
            .to_string(),
        n => format!(
            " The {n} images you gave are no longer sent to the model: only what the summary \
             says of them is left (give them again if the model needs them)."
        ),
    }
}

/// Why a compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Why {
    /// The conversation reached [`THRESHOLD`] of the window (`tokens` of it).
    Threshold {
        /// The tokens in context.
        tokens: u64,
    },
    /// The provider said the request did not fit.
    Overflow,
    /// The user asked (`/compact`).
    Asked,
}

/// A compaction id unique within a session (and this process): the clock and a counter.
fn new_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!(
        "compaction-{millis}-{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Compacts `conversation`: asks the model for a summary (with retries), and replaces the
/// conversation by the user's messages and the summary ([`replace`]). The client is told when
/// it starts and how it ended. `Ok(())` once replaced; `Err(message)` (already told) leaves the
/// conversation as it was.
pub async fn compact(
    client: &ModelClient,
    key: &ApiKey,
    settings: &LoopSettings<'_>,
    conversation: &mut Vec<Message>,
    why: Why,
    turn: &mut dyn TurnHost,
) -> Result<(), String> {
    let id = new_id();
    let window = settings.context_window;
    let before = estimate_tokens(conversation, settings.system);
    let reason = match why {
        Why::Threshold { tokens } => format!(
            "it holds about {tokens} of the model's {window} tokens ({}% is the mark)",
            (THRESHOLD * 100.0) as u32
        ),
        Why::Overflow => "the model's server said it no longer fits the context window".into(),
        Why::Asked => "you asked (`/compact`)".into(),
    };
    turn.compaction(Compaction::new(
        &id,
        CompactionStatus::InProgress,
        format!(
            "

[Compacting the conversation: {reason}. The model is writing a summary…]
"
        ),
    ));
    let mut messages = conversation.clone();
    messages.push(Message::User(SUMMARY_PROMPT.to_string()));
    let request = ModelRequest {
        model: settings.model,
        system: settings.system,
        messages: &messages,
        tools: settings.tools,
        max_tokens: settings.max_tokens,
        // No extended thinking: the summary is text, and Anthropic's thinking rules for a
        // tool loop do not apply to it.
        effort: None,
        cache_key: settings.cache_key,
    };
    let cancel = turn.cancellation();
    let mut retry = 0;
    let outcome = loop {
        let mut on_delta = |_: &Delta| {};
        match client.stream(&request, key, &mut on_delta, &cancel).await {
            Ok(_) if cancel.is_cancelled() => break Err("the turn was cancelled".to_string()),
            Ok(reply) if reply.text.trim().is_empty() => {
                break Err("the model wrote no summary".to_string())
            }
            Ok(reply) => break Ok(reply.text),
            Err(error) => match settings.retry.delay(retry, &error) {
                Some(delay) if !cancel.is_cancelled() => {
                    retry += 1;
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = cancel.cancelled() => break Err("the turn was cancelled".into()),
                    }
                }
                _ => {
                    break Err(format!(
                        "the {} API failed: {error}",
                        client.provider().id()
                    ))
                }
            },
        }
    };
    match outcome {
        Ok(summary) => {
            let count = conversation.len();
            let images: usize = conversation
                .iter()
                .map(|message| match message {
                    Message::Images(images) => images.len(),
                    _ => 0,
                })
                .sum();
            *conversation = replace(conversation, &summary);
            let after = estimate_tokens(conversation, settings.system);
            tracing::info!(before, after, messages = count, "conversation compacted");
            turn.compaction(
                Compaction::new(
                    &id,
                    CompactionStatus::Completed,
                    format!(
                        "[Compacted: the {count} messages so far (about {before} tokens) were \
                         replaced by the model's summary and your own messages (about {after} \
                         tokens now).{} The session's record keeps everything.]\n\n",
                        images_dropped(images)
                    ),
                )
                .summary(summary.trim()),
            );
            Ok(())
        }
        Err(problem) => {
            let message = format!(
                "[Compaction failed ({problem}): the conversation is kept as it was.]

"
            );
            turn.compaction(Compaction::new(
                &id,
                CompactionStatus::Failed,
                message.clone(),
            ));
            Err(message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::api::ToolCall;
    use super::*;

    #[test]
    fn the_users_messages_and_the_summary_stay() {
        let messages = vec![
            Message::User("fix the build".into()),
            Message::assistant("", vec![ToolCall::new("c1", "bash", "{}")]),
            Message::ToolResult {
                call_id: "c1".into(),
                content: "error".into(),
                is_error: false,
            },
            Message::User(format!("{SUMMARY_HEADER}\n\nold")),
            Message::User("and run the tests".into()),
        ];
        let after = replace(&messages, "The build is fixed.");
        assert_eq!(after.len(), 3);
        assert_eq!(after[0], Message::User("fix the build".into()));
        assert_eq!(after[1], Message::User("and run the tests".into()));
        let Message::User(summary) = &after[2] else {
            panic!()
        };
        assert!(summary.starts_with(SUMMARY_HEADER));
        assert!(summary.contains("The build is fixed."));
        assert!(!summary.contains("old"));
    }

    #[test]
    fn only_the_most_recent_user_messages_fit() {
        let big = "x".repeat(KEPT_USER_BYTES / 2 + 1);
        let messages = vec![
            Message::User(format!("first {big}")),
            Message::User(format!("second {big}")),
        ];
        let after = replace(&messages, "s");
        assert_eq!(after.len(), 2);
        assert!(matches!(&after[0], Message::User(t) if t.starts_with("second")));
    }

    #[test]
    fn due_at_eighty_percent() {
        assert!(!due(79_999, 100_000));
        assert!(due(80_000, 100_000));
        assert!(!due(10, 0));
    }
}
