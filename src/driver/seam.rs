//! The driver seam: what a driver is given, the events it makes, how its turn ends.
//!
//! A [`Driver`] turns one prompt into a turn. It never sees ACP: it reads a [`Prompt`], makes
//! turn events through the [`TurnHost`] it is handed (say text, think text, run a bash call and
//! read its result, run a slash command, report usage), and returns how the turn ended
//! ([`StopReason`]) or why it could not run ([`TurnError`]). The host (the `turn` layer) records
//! each event in the session's record and hands it to the client's bridge; the driver knows
//! neither.
//!
//! A turn may hold any number of calls: a model driver asks for `ls`, reads the result, asks for
//! `cat`, then answers. Each [`TurnHost::run_bash`] awaits the call's end (its card or console
//! block has got its final update by then) and hands back what the model needs to go on. The
//! shell driver ([`super::ShellDriver`]) is one implementation: the prompt is the script, one
//! call per prompt.
//!
//! Cancellation: [`TurnHost::cancellation`] is the turn's token, cancelled by `session/cancel`
//! and `$/cancel_request`. A running call is killed by the host (its result says `[cancelled]`);
//! a driver that waits on anything else (a model's stream) selects on the token and returns
//! soon after. Whatever the driver returns, a cancelled turn ends with
//! [`StopReason::Cancelled`] on the wire, as the protocol requires.

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::driver::commands::SlashCommand;
use crate::exec::Session;
use crate::jobs::JobRegistry;
use crate::mcp::{McpResult, McpTool};
use crate::store::SessionRecord;
use crate::tool::{BashCall, BashResult};

/// Makes turns out of prompts. One driver serves every session of an agent: keep per-session
/// state keyed by [`TurnHost::session_id`], or rebuild it from [`TurnHost::record`].
///
/// `drive` is a boxed future so that a driver can be chosen at run time
/// (`Arc<dyn Driver>`, see `AcpBashAgent::with_driver`).
pub trait Driver: Send + Sync + 'static {
    /// A short name for logs (`"shell"`, `"model"`).
    fn name(&self) -> &str;

    /// Runs one turn for `prompt`: every event goes through `turn`; returns how the turn ended.
    ///
    /// Turns of one session run one after another (the next prompt waits for this one to
    /// return); turns of different sessions run at the same time, each with its own host.
    fn drive<'a>(
        &'a self,
        prompt: &'a Prompt,
        turn: &'a mut dyn TurnHost,
    ) -> BoxFuture<'a, Result<StopReason, TurnError>>;

    /// The ways the client may authenticate this driver (advertised in `initialize`); empty for
    /// a driver that needs nothing (the shell driver).
    fn auth_methods(&self) -> Vec<AuthMethod> {
        Vec::new()
    }

    /// The client asks to authenticate with the method `method_id` (one of
    /// [`Driver::auth_methods`]). `Err` says what is wrong.
    fn authenticate(&self, method_id: &str) -> Result<(), TurnError> {
        Err(TurnError::Failed(format!(
            "{} needs no authentication (no method {method_id:?})",
            self.name()
        )))
    }

    /// The models a session may choose from, the default first (offered to the client as the
    /// `model` config option); empty for a driver without a model (the shell driver). A turn
    /// reads the session's choice with [`TurnHost::model`].
    fn models(&self) -> Vec<ModelChoice> {
        Vec::new()
    }

    /// A session is being opened (`session/new`, `load`, `resume`): the driver may start
    /// what it needs in the background (a provider's model list). `Some`: the session's
    /// [`Driver::models`] are known once the future resolves (it must be bounded in time), and
    /// the answer waits for it; `None` (the default): nothing to wait for.
    fn session_opening(&self) -> Option<BoxFuture<'static, ()>> {
        None
    }

    /// Session `session_id` was closed (its turns have ended): free what the driver keeps for
    /// it. A session loaded again later starts from its record.
    fn session_closed(&self, session_id: &str) {
        let _ = session_id;
    }

    /// The reasoning levels a session may choose from (offered to the client as the
    /// `reasoning` config option, category `thought_level`), the default first; empty for a
    /// driver without a model. A turn reads the session's choice with
    /// [`TurnHost::thought_level`].
    fn thought_levels(&self) -> Vec<ModelChoice> {
        Vec::new()
    }

    /// Whether the driver reads the text of `resource` blocks (files the client embeds, like
    /// Zed's @-mentions): `initialize` advertises `promptCapabilities.embeddedContext` so.
    /// The shell driver does not (a prompt is a script).
    fn embedded_context(&self) -> bool {
        false
    }

    /// Whether the driver sends `image` blocks on (to a model): `initialize` advertises
    /// `promptCapabilities.image` so. The shell driver does not (a prompt is a script).
    fn images(&self) -> bool {
        false
    }
}

/// One model a [`Driver`] offers ([`Driver::models`]), or one of its reasoning levels
/// ([`Driver::thought_levels`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelChoice {
    /// The id the session chooses it by (`openai:gpt-4.1`).
    pub id: String,
    /// What a client shows.
    pub name: String,
    /// A line about it (where it is served).
    pub description: Option<String>,
}

impl ModelChoice {
    /// The model `id`, shown as `name`.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        ModelChoice {
            id: id.into(),
            name: name.into(),
            description: None,
        }
    }

    /// Sets [`ModelChoice::description`].
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// What the turn gives a driver, and where the driver's events go. Each method is one turn event.
///
/// The events reach the client in the order they are made. Text may come in pieces (a model's
/// stream): consecutive [`TurnHost::say`] calls make one message, as do consecutive
/// [`TurnHost::think`] calls.
pub trait TurnHost: Send {
    /// Event "say this": the agent's text to the user (markdown), shown as it comes and kept
    /// in the session's record.
    fn say(&mut self, text: &str);

    /// Event "notice": the agent's own message to the user (a failed request, a stop), shown
    /// like [`TurnHost::say`] and kept in the record marked as a notice: a model never reads
    /// it again as its own words (after `session/load` or `session/resume` either).
    fn notice(&mut self, text: &str) {
        self.say(text);
    }

    /// Event "think this": the agent's reasoning, shown as a thought where the client shows
    /// them; not kept in the record.
    fn think(&mut self, text: &str);

    /// Event "usage": the tokens in context (and the cost so far), after a model reply.
    fn usage(&mut self, usage: Usage);

    /// Event "the context was compacted" (or a compaction started, failed): shown as a
    /// `compaction_update` to clients that advertise `session.compaction`, as the agent's
    /// text ([`Compaction::notice`]) to others. The default says the notice.
    fn compaction(&mut self, compaction: Compaction) {
        self.say(&compaction.notice);
    }

    /// Event "run this bash call": runs `call` in the session's current directory (a `cd`
    /// carries over to the next call), through the same card or console block as a typed
    /// command, recorded with its end. Resolves when the call has ended and the client has got
    /// its final update; the result is what the command printed and how it ended (use
    /// [`crate::present::model::model_result`] for the text a model reads). A cancelled turn
    /// kills the call: the result then says so.
    fn run_bash<'a>(&'a mut self, call: BashCall) -> BoxFuture<'a, BashResult>;

    /// Event "run this slash command" (`/bg`, `/jobs`, `/kill`, `/logs`, `/help`): runs it as
    /// if the user had typed it; its answer is shown as the agent's message and returned. A job
    /// started by `/bg` gets its own card, which streams after the turn has ended.
    fn run_command<'a>(&'a mut self, command: SlashCommand) -> BoxFuture<'a, String>;

    /// The turn's cancellation token (see the module's doc).
    fn cancellation(&self) -> CancellationToken;

    /// The engine session the calls run on: its root, current directory and sandbox mode.
    fn session(&self) -> &Session;

    /// The session's id (stable across load and resume; a key for per-session state).
    fn session_id(&self) -> &str;

    /// The session's background jobs (read them; start and kill them with
    /// [`TurnHost::run_command`] so that their cards follow).
    fn jobs(&self) -> &JobRegistry;

    /// A copy of the session's record as it is now: its earlier turns (prompt, the agent's
    /// text, each call with its end), oldest first, bounded. After `session/load` or
    /// `session/resume` it holds what the earlier process recorded.
    fn record(&self) -> SessionRecord;

    /// The id of the model the session chose (one of [`Driver::models`], by
    /// `session/set_config_option`) when the turn began; `None`: the driver's default (the
    /// first).
    fn model(&self) -> Option<String> {
        None
    }

    /// The id of the reasoning level the session chose (one of [`Driver::thought_levels`])
    /// when the turn began; `None`: the driver's default (the first).
    fn thought_level(&self) -> Option<String> {
        None
    }

    /// The tools of the MCP servers the client gave the session (waiting for the starts still
    /// under way); empty without any. A server that failed is told to the user here, once.
    fn mcp_tools<'a>(&'a mut self) -> BoxFuture<'a, Vec<McpTool>> {
        Box::pin(async { Vec::new() })
    }

    /// Event "call this MCP tool": calls `tool` (one of [`TurnHost::mcp_tools`]) with
    /// `arguments` as a tool call of its own on the wire; resolves with its result (an error
    /// result when the server is gone, does not answer in time, or the turn is cancelled).
    fn run_mcp<'a>(
        &'a mut self,
        tool: McpTool,
        arguments: serde_json::Value,
    ) -> BoxFuture<'a, McpResult> {
        let _ = arguments;
        Box::pin(async move {
            McpResult::failed(format!(
                "There is no MCP server here to call {}.",
                tool.qualified
            ))
        })
    }
}

/// A prompt as the user sent it, without its protocol's types.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Prompt {
    /// The prompt's parts, in order.
    pub blocks: Vec<PromptBlock>,
}

impl Prompt {
    /// A prompt of `blocks`.
    pub fn new(blocks: Vec<PromptBlock>) -> Self {
        Prompt { blocks }
    }

    /// A prompt of one text block.
    pub fn text_only(text: impl Into<String>) -> Self {
        Prompt {
            blocks: vec![PromptBlock::Text(text.into())],
        }
    }

    /// The prompt's text: its text blocks and the text of its embedded resources, joined by
    /// newlines (what the shell driver runs). Links, images and the like carry no text.
    pub fn text(&self) -> String {
        let parts: Vec<&str> = self
            .blocks
            .iter()
            .filter_map(|block| match block {
                PromptBlock::Text(text) => Some(text.as_str()),
                PromptBlock::Resource {
                    text: Some(text), ..
                } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        parts.join("\n")
    }
}

/// One part of a [`Prompt`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PromptBlock {
    /// Text the user typed.
    Text(String),
    /// A resource the client embedded (an @-mentioned file, say).
    Resource {
        /// Its URI (`file:///…`).
        uri: String,
        /// Its text, when it is text.
        text: Option<String>,
        /// Its MIME type, when the client said.
        mime_type: Option<String>,
    },
    /// A link to a resource, not its content.
    Link {
        /// Its URI.
        uri: String,
        /// Its name, as the client shows it.
        name: String,
    },
    /// An image (ACP `image` content): sent to models that take images; the shell driver
    /// says it does not run it.
    Image {
        /// Its MIME type, as the client gave it.
        mime_type: String,
        /// Its bytes in base64, as the client gave them.
        data: String,
    },
    /// Something else (audio, …): its kind, for a message saying it is not used.
    Other {
        /// `"image"`, `"audio"`, …
        kind: String,
    },
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The driver has finished (a model answered without a tool call; a shell call ended).
    EndTurn,
    /// The model hit its token limit.
    MaxTokens,
    /// The turn made as many requests as it may (`--max-steps`).
    MaxTurnRequests,
    /// The model refused.
    Refusal,
    /// The turn was cancelled.
    Cancelled,
}

/// Why a turn could not run: the prompt is answered with an error (a turn that ran into trouble
/// but can say so should rather [`TurnHost::say`] it and end with [`StopReason::EndTurn`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TurnError {
    /// The driver needs credentials first; the message says which (the variable to set). The
    /// client gets an `auth_required` error.
    AuthRequired(String),
    /// Anything else; the message says what went wrong and what to do.
    Failed(String),
}

impl std::fmt::Display for TurnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurnError::AuthRequired(message) | TurnError::Failed(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for TurnError {}

/// A context compaction's state (`compaction_update`): the model summarised the conversation
/// so far, and the summary replaced it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compaction {
    /// Unique within the session; the same for a compaction's updates.
    pub id: String,
    /// Where it is.
    pub status: CompactionStatus,
    /// The summary, once written.
    pub summary: Option<String>,
    /// What a client without compaction updates is told (the agent's text; may be empty).
    pub notice: String,
}

impl Compaction {
    /// Compaction `id` at `status`, with `notice` for clients without compaction updates.
    pub fn new(id: impl Into<String>, status: CompactionStatus, notice: impl Into<String>) -> Self {
        Compaction {
            id: id.into(),
            status,
            summary: None,
            notice: notice.into(),
        }
    }

    /// Sets [`Compaction::summary`].
    pub fn summary(mut self, summary: impl Into<String>) -> Self {
        self.summary = Some(summary.into());
        self
    }
}

/// Where a [`Compaction`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompactionStatus {
    /// The summary is being written.
    InProgress,
    /// The summary replaced the conversation.
    Completed,
    /// It failed; the conversation is as it was.
    Failed,
}

/// Token use after a model reply (`usage_update`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens now in context.
    pub used: u64,
    /// The context window, in tokens.
    pub size: u64,
    /// The session's cost so far, when the provider says.
    pub cost: Option<Cost>,
    /// Of the last request's input, the tokens read from the provider's prompt cache and
    /// written to it, when the provider says (sent as `_meta.cachedReadTokens` /
    /// `_meta.cachedWriteTokens`: `usage_update` has no field for them).
    pub cached: Option<(u64, u64)>,
}

impl Usage {
    /// `used` of `size` tokens, no cost.
    pub fn new(used: u64, size: u64) -> Self {
        Usage {
            used,
            size,
            cost: None,
            cached: None,
        }
    }

    /// Sets [`Usage::cached`]: `read` tokens came from the cache, `written` went into it.
    pub fn cached(mut self, read: u64, written: u64) -> Self {
        self.cached = Some((read, written));
        self
    }

    /// Sets [`Usage::cost`].
    pub fn cost(mut self, amount: f64, currency: impl Into<String>) -> Self {
        self.cost = Some(Cost {
            amount,
            currency: currency.into(),
        });
        self
    }
}

/// A cost, in a currency.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Cost {
    /// The amount.
    pub amount: f64,
    /// ISO 4217 (`"USD"`).
    pub currency: String,
}

/// A way to authenticate a driver, advertised to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthMethod {
    /// The id the client sends back in `authenticate`.
    pub id: String,
    /// Its name, as the client shows it.
    pub name: String,
    /// What it does (which variable or command supplies the key).
    pub description: Option<String>,
    /// `Some(args)`: a terminal method, the client runs the agent's program with `args` in a
    /// terminal (`acp-bash login`, say) and never calls `authenticate`; `None`: the agent
    /// handles [`Driver::authenticate`] itself.
    pub terminal_args: Option<Vec<String>>,
}

impl AuthMethod {
    /// A method `id` named `name`, with no description.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        AuthMethod {
            id: id.into(),
            name: name.into(),
            description: None,
            terminal_args: None,
        }
    }

    /// Makes it a terminal method: the client runs the agent's program with `args`.
    pub fn terminal(mut self, args: Vec<String>) -> Self {
        self.terminal_args = Some(args);
        self
    }

    /// Sets [`AuthMethod::description`].
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}
