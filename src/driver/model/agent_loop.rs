//! The loop: one prompt to a finished turn, in model requests and tool calls.
//!
//! Owns [`run_loop`]: add the prompt to the conversation, ask the model (its text and thinking
//! streamed to the turn as they arrive), run each tool call it made (each answered with its own
//! id), and ask again, until a reply without tool calls, the step limit, a cancel or an error
//! that retrying cannot cure. Failed requests are retried by the [`RetryPolicy`]; a context
//! overflow trims old tool output once, then says so. Every error ends the turn with a message
//! the user can act on and leaves the conversation usable. Must not touch: HTTP details (the
//! client's), ACP.

use std::time::Duration;

use super::api::{ApiError, Delta, Effort, Finish, Message, ModelRequest, ToolSpec};
use super::client::{ApiKey, ModelClient};
use super::compaction;
use super::retry::RetryPolicy;
use super::tools::run_tool_call;
use crate::driver::{StopReason, TurnHost, Usage};

/// What a tool result becomes when it is trimmed to fit the context window.
pub(crate) const TRIMMED: &str = "[output removed to fit the context window]";

/// The settings the loop runs with.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct LoopSettings<'a> {
    /// The model's name.
    pub model: &'a str,
    /// The model's id, `PROVIDER:NAME`: the origin of the reasoning its replies carry.
    pub origin: &'a str,
    /// The reasoning effort the session chose.
    pub effort: Option<Effort>,
    /// The system prompt.
    pub system: &'a str,
    /// The tools.
    pub tools: &'a [ToolSpec],
    /// Most model requests per turn.
    pub max_steps: u32,
    /// Most tokens per reply.
    pub max_tokens: u32,
    /// Bytes of a command's output the model reads.
    pub budget: usize,
    /// The model's context window (for usage reports).
    pub context_window: u64,
    /// Retries.
    pub retry: RetryPolicy,
    /// The session's prompt-cache key; `None`: no cache hints ([`ModelRequest::cache_key`]).
    pub cache_key: Option<&'a str>,
}

/// Runs the turn for the conversation whose last message is the user's prompt. `cost` is the
/// session's cost so far (USD), added to when a reply reports one.
pub async fn run_loop(
    client: &ModelClient,
    key: &ApiKey,
    settings: &LoopSettings<'_>,
    conversation: &mut Vec<Message>,
    cost: &mut Option<f64>,
    turn: &mut dyn TurnHost,
) -> StopReason {
    let cancel = turn.cancellation();
    // The tokens the last request reported, and the conversation's length then.
    let mut reported: Option<(u64, usize)> = None;
    // The reply's token limit: raised once when a reply with calls is cut off by it.
    let mut current = *settings;
    for _step in 0..settings.max_steps {
        let settings = &current;
        // Near the window, the model summarises first (`compaction`).
        let tokens = match reported {
            Some((tokens, len)) if len <= conversation.len() => {
                tokens + compaction::estimate_tokens(&conversation[len..], "")
            }
            _ => compaction::estimate_tokens(conversation, settings.system),
        };
        if compaction::due(tokens, settings.context_window) {
            let why = compaction::Why::Threshold { tokens };
            if compaction::compact(client, key, settings, conversation, why, turn)
                .await
                .is_ok()
            {
                reported = None;
            }
            if cancel.is_cancelled() {
                return StopReason::Cancelled;
            }
        }
        let reply = match request(client, key, settings, conversation, turn).await {
            Ok(reply) => reply,
            Err(message) => {
                if !cancel.is_cancelled() {
                    turn.notice(&message);
                }
                return StopReason::EndTurn;
            }
        };
        if let Some(spent) = reply.usage.cost {
            *cost = Some(cost.unwrap_or(0.0) + spent);
        }
        let used = reply.usage.input + reply.usage.output;
        if used > 0 {
            reported = Some((used, conversation.len()));
            let mut usage = Usage::new(used, settings.context_window);
            if reply.usage.cache_read > 0 || reply.usage.cache_write > 0 {
                usage = usage.cached(reply.usage.cache_read, reply.usage.cache_write);
            }
            turn.usage(match cost {
                Some(total) => usage.cost(*total, "USD"),
                None => usage,
            });
        }
        let reasoning = reply.reasoning.map(|mut reasoning| {
            reasoning.origin = settings.origin.to_string();
            reasoning
        });
        if cancel.is_cancelled() {
            // What was said stays; calls the model had not finished asking for never run.
            // (A cut reply's reasoning may be unsigned: it is not kept.)
            if !reply.text.is_empty() {
                conversation.push(Message::assistant(reply.text, Vec::new()));
            }
            return StopReason::Cancelled;
        }
        let calls = reply.tool_calls.clone();
        conversation.push(Message::Assistant {
            text: reply.text,
            tool_calls: reply.tool_calls,
            reasoning,
        });
        if calls.is_empty() {
            return match reply.finish {
                Some(Finish::Length) => StopReason::MaxTokens,
                Some(Finish::Refused) => StopReason::Refusal,
                _ => StopReason::EndTurn,
            };
        }
        if reply.finish == Some(Finish::Length) {
            // Cut off by the token limit: the last call's arguments are unfinished. Nothing
            // runs; the model reads why and gets a larger budget for the next reply.
            let raised = raised_limit(settings.max_tokens);
            let hint = cut_off_hint(settings.max_tokens, raised);
            tracing::info!(
                max_tokens = settings.max_tokens,
                raised,
                "a reply with tool calls was cut off by the token limit"
            );
            for call in &calls {
                conversation.push(Message::ToolResult {
                    call_id: call.id.clone(),
                    content: hint.clone(),
                    is_error: true,
                });
            }
            current.max_tokens = raised;
            continue;
        }
        for call in &calls {
            let answer = if cancel.is_cancelled() {
                super::tools::ToolAnswer {
                    content: "[not run: the user cancelled the turn]".into(),
                    is_error: true,
                }
            } else {
                run_tool_call(turn, call, settings.budget).await
            };
            conversation.push(Message::ToolResult {
                call_id: call.id.clone(),
                content: answer.content,
                is_error: answer.is_error,
            });
        }
        if cancel.is_cancelled() {
            return StopReason::Cancelled;
        }
    }
    turn.notice(&format!(
        "\n\nStopped: this turn made {} model requests, the most allowed (`--max-steps`). Send \
         another prompt to go on.",
        settings.max_steps
    ));
    StopReason::MaxTurnRequests
}

/// The most tokens a reply is given after a cut-off: 16 384, which every current model's
/// output takes (Claude 3.5 Haiku and GPT-4o stop there).
pub const MAX_RAISED_TOKENS: u32 = 16_384;

/// The token limit after a reply was cut off at `max_tokens`: doubled, up to
/// [`MAX_RAISED_TOKENS`] (never lowered).
pub fn raised_limit(max_tokens: u32) -> u32 {
    max_tokens.max(max_tokens.saturating_mul(2).min(MAX_RAISED_TOKENS))
}

/// What each call of a cut-off reply is answered with.
pub fn cut_off_hint(max_tokens: u32, raised: u32) -> String {
    let budget = if raised > max_tokens {
        format!("The next reply may be up to {raised} tokens.")
    } else {
        "The limit cannot be raised further.".to_string()
    };
    format!(
        "[Not run: your reply was cut off by its token limit ({max_tokens} tokens) before          this call's arguments were complete, so no call of that reply ran. {budget} Make each          call smaller: write a long file in parts (`cat > f <<'EOF'` for the first, then          `cat >> f <<'EOF'`), or change only the lines that need it with a short Python          script.]"
    )
}

/// One model request with its retries and the overflow trim; `Err` is the message for the user.
async fn request(
    client: &ModelClient,
    key: &ApiKey,
    settings: &LoopSettings<'_>,
    conversation: &mut Vec<Message>,
    turn: &mut dyn TurnHost,
) -> Result<super::api::Reply, String> {
    let cancel = turn.cancellation();
    let mut retry = 0;
    let mut trimmed = false;
    let mut compacted = false;
    let mut without_images = false;
    loop {
        let request = ModelRequest {
            model: settings.model,
            system: settings.system,
            messages: conversation,
            tools: settings.tools,
            max_tokens: settings.max_tokens,
            effort: settings.effort,
            cache_key: settings.cache_key,
        };
        // Whether this attempt's reply was already shown in part (a stream that failed midway).
        let mut shown = false;
        let mut on_delta = |delta: &Delta| match delta {
            Delta::Text(text) => {
                shown = true;
                turn.say(text);
            }
            Delta::Thinking(text) => turn.think(text),
            _ => {}
        };
        let error = match client.stream(&request, key, &mut on_delta, &cancel).await {
            Ok(reply) => return Ok(reply),
            Err(error) => error,
        };
        let refusal = image_refusal(&error).filter(|_| !without_images);
        if let Some(refusal) = refusal.filter(|_| has_images(conversation)) {
            // The turn goes on without them (once): each becomes a line saying so.
            without_images = true;
            let count = drop_images(conversation, refusal.why());
            turn.notice(&match refusal {
                ImageRefusal::Model => format!(
                    "\n\nThe model does not take images ({error}); asked again without the \
                     {count} image(s) of this conversation. Choose a model that reads images \
                     to send them.\n\n"
                ),
                ImageRefusal::Image => format!(
                    "\n\nThe provider refused an image ({error}); asked again without the \
                     {count} image(s) of this conversation. Send a smaller PNG or JPEG to \
                     show it.\n\n"
                ),
            });
            tracing::info!(
                images = count,
                "the model refused images: asked again without them"
            );
            continue;
        }
        if let ApiError::ContextOverflow(_) = error {
            // Summarise first; if that fails too, old output goes (and the user is told).
            if !compacted {
                compacted = true;
                let why = compaction::Why::Overflow;
                if compaction::compact(client, key, settings, conversation, why, turn)
                    .await
                    .is_ok()
                {
                    continue;
                }
                if cancel.is_cancelled() {
                    return Err(String::new());
                }
            }
            if !trimmed && trim_old_output(conversation) {
                turn.say(
                    "\n\n[The conversation did not fit the model's context window: the output \
                     of old commands was removed from what the model reads (the record keeps \
                     it).]\n\n",
                );
                trimmed = true;
                tracing::warn!(
                    "the conversation overflowed the context window: old tool output trimmed"
                );
                continue;
            }
        }
        match settings.retry.delay(retry, &error) {
            Some(delay) => {
                retry += 1;
                // A reply cut off midway is asked for again whole: say that the text above
                // was cut, so its repetition is not taken for the model's.
                let cut = match shown {
                    true => "; the reply above was cut off there and is asked for again",
                    false => "",
                };
                // Shown while it happens (as a thought: it is not the model's word, and is
                // neither recorded nor sent to the model).
                turn.think(&format!(
                    "\n[The {} API failed ({error}){cut}; trying again in {:.1}s, retry {retry} \
                     of {}.]\n",
                    client.provider().id(),
                    delay.as_secs_f64(),
                    settings.retry.max_retries
                ));
                tracing::warn!(
                    "model request failed ({error}); retry {retry} of {} in {:.1}s",
                    settings.retry.max_retries,
                    delay.as_secs_f64()
                );
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = cancel.cancelled() => return Err(String::new()),
                }
            }
            None => return Err(user_message(client, key, &error, retry, &settings.retry)),
        }
    }
}

/// Why a server refused a request's images ([`image_refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageRefusal {
    /// The model takes no images at all.
    Model,
    /// The model takes images, but not one of these (unreadable, too large, too many pixels).
    Image,
}

impl ImageRefusal {
    /// What the model reads in each image's place.
    pub fn why(self) -> &'static str {
        match self {
            ImageRefusal::Model => "this model does not take images",
            ImageRefusal::Image => "the provider refused an image of this conversation",
        }
    }
}

/// Whether `error` is a server's refusal of a request's images, and why. The model takes
/// none: OpenAI's "does not support image input" and "image_url is only supported by certain
/// models", Ollama's "this model does not support image input" (also on its Anthropic
/// endpoint), llama.cpp's "image input is not supported", vLLM's "is not a multimodal model".
/// One image is refused (Anthropic's wording, which then refuses every later request that
/// still holds it): "Could not process image", "Image format … not supported", "image exceeds
/// 5 MB maximum", "At least one of the image dimensions exceed max allowed size".
/// llama.cpp's comes as a 500 (`server_error`), which is not retried when it says so.
pub fn image_refusal(error: &ApiError) -> Option<ImageRefusal> {
    let message = match error {
        ApiError::BadRequest { message, .. } | ApiError::Server { message, .. } => message,
        _ => return None,
    };
    let message = message.to_ascii_lowercase();
    let model = message.contains("does not support image")
        || message.contains("image_url is only supported")
        || message.contains("image input is not supported")
        || message.contains("not a multimodal model");
    let image = message.contains("could not process image")
        || (message.contains("image format") && message.contains("not supported"))
        || message.contains("image exceeds")
        || message.contains("image dimensions exceed");
    match (model, image) {
        (true, _) => Some(ImageRefusal::Model),
        (false, true) => Some(ImageRefusal::Image),
        (false, false) => None,
    }
}

fn has_images(conversation: &[Message]) -> bool {
    conversation
        .iter()
        .any(|m| matches!(m, Message::Images(images) if !images.is_empty()))
}

/// Replaces every image of `conversation` by a line saying it was given and why it is not
/// sent; how many were replaced.
pub fn drop_images(conversation: &mut [Message], why: &str) -> usize {
    let mut count = 0;
    for message in conversation.iter_mut() {
        if let Message::Images(images) = message {
            count += images.len();
            *message = super::api::images_not_sent(images.len(), why);
        }
    }
    count
}

/// Replaces the content of every tool result but the last two with a note; `false` if there
/// was nothing worth trimming.
fn trim_old_output(conversation: &mut [Message]) -> bool {
    let results: Vec<usize> = conversation
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, Message::ToolResult { content, .. } if content != TRIMMED && content.len() > TRIMMED.len()))
        .map(|(i, _)| i)
        .collect();
    let keep = results.len().saturating_sub(2);
    for &i in &results[..keep] {
        if let Message::ToolResult { content, .. } = &mut conversation[i] {
            *content = TRIMMED.to_string();
        }
    }
    keep > 0
}

/// What the user reads when a request failed for good.
fn user_message(
    client: &ModelClient,
    key: &ApiKey,
    error: &ApiError,
    retries: u32,
    policy: &RetryPolicy,
) -> String {
    let provider = client.provider().id();
    let text = match error {
        ApiError::Auth { status, message } => format!(
            "The {provider} API refused the key (HTTP {status}): {message}. The key comes from \
             {}: set it to a valid key for {provider} (or run `acp-bash login {provider}`), \
             or pass `--api-key-env NAME` to read another variable, then restart the agent.",
            key.origin()
        ),
        ApiError::Quota { status, message } => format!(
            "The {provider} account has no credit left (HTTP {status}): {message}. Add credit \
             or a payment method at the provider, or use another key ({}); retrying will not \
             help.",
            key.origin()
        ),
        ApiError::ContextOverflow(message) => format!(
            "The conversation no longer fits the model's context window ({message}), even \
             with old command output removed. Start a new session, or ask for less output \
             (e.g. pipe long commands through `tail`)."
        ),
        error
            if error.is_retryable()
                && error
                    .retry_after()
                    .is_some_and(|w| w > policy.max_retry_after) =>
        {
            format!(
                "The {provider} API asked to wait {} before the next request ({error}); that is \
             longer than acp-bash waits ({}s). Try again later.",
                human(error.retry_after().unwrap_or_default()),
                policy.max_retry_after.as_secs()
            )
        }
        error if error.is_retryable() => format!(
            "The {provider} API failed {} times in a row ({error}) at {}. Try again later, or \
             check `--base-url`.",
            retries + 1,
            client.shown_url()
        ),
        error => format!(
            "The {provider} API rejected the request ({error}). Check `--model` and \
             `--base-url` ({}).",
            client.shown_url()
        ),
    };
    // The provider may echo the key; never show it.
    text.replace(key.expose(), "[redacted]")
}

fn human(duration: Duration) -> String {
    format!("{}s", duration.as_secs())
}
