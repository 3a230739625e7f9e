//! The model driver: a language model drives the turn, with bash as its only tool.
//!
//! [`ModelDriver`] is a [`Driver`]: for each prompt it runs the loop ([`agent_loop`]) against
//! one provider (OpenAI chat completions, [`openai`]; Anthropic messages, [`anthropic`]) behind
//! one provider-neutral interface ([`api`]: messages, tools, a stream of deltas, classified
//! errors), over HTTP ([`client`], with retries from [`retry`]). Tool calls run through the
//! turn like typed commands ([`tools`]); the model is told its environment ([`system`], then
//! what changed, [`turn_note`]). Requests carry prompt-cache hints ([`cache`]); near the
//! context window, on an overflow or on `/compact`, the model summarises the conversation
//! ([`compaction`]).
//!
//! The user stays in control: slash commands run as with the shell driver and never reach the
//! model; `!COMMAND` runs COMMAND directly, without a model request, and enters the
//! conversation. The conversation of each session is kept in memory for the driver's life;
//! a session first seen after `session/load` or `session/resume` starts from what its record
//! holds ([`history`]: the prompts, the calls and their results).
//!
//! Without a key the driver advertises an auth method and answers every prompt with an
//! auth-required error naming the variable to set. The key never appears in an error, a log
//! line or a debug print ([`ApiKey`]). Must not touch: ACP, the engine (commands run through
//! [`TurnHost`]).

pub mod agent_loop;
pub mod anthropic;
pub mod api;
pub mod cache;
pub mod catalog;
pub mod client;
pub mod compaction;
pub mod endpoint;
pub mod extras;
pub mod history;
pub mod keyfile;
pub mod mcp_tools;
pub mod openai;
pub mod project_docs;
pub mod retry;
pub mod system;
pub mod tools;
pub mod turn_note;

pub use api::{
    ApiError, Delta, Effort, Finish, Image, Message, ModelRequest, Reasoning, Reply, TokenUsage,
    ToolCall, ToolSpec,
};
pub use client::{ApiKey, ModelClient, Provider};
pub use extras::Extras;
pub use retry::RetryPolicy;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::FutureExt;

use super::commands;
use super::{
    AuthMethod, Driver, ModelChoice, Prompt, PromptBlock, StopReason, TurnError, TurnHost,
};
use crate::present::model::{model_text, DEFAULT_MODEL_BUDGET};
use crate::tool::BashCall;

/// The id of the auth method advertised when no key is found: a terminal method, the client
/// runs `acp-bash login PROVIDER` in a terminal.
pub const AUTH_METHOD_ID: &str = "acp-bash-login";

/// What the model driver is told to use.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ModelConfig {
    /// The API.
    pub provider: Provider,
    /// The model's name at the provider.
    pub model: String,
    /// The base URL (OpenAI's form ends in `/v1`; Anthropic's does not).
    pub base_url: String,
    /// The key, when one was found.
    pub key: Option<ApiKey>,
    /// The variable the key is (or would be) read from.
    pub key_env: String,
    /// The key file of `acp-bash login`, read when the variable is unset ([`keyfile`]).
    pub key_file: Option<std::path::PathBuf>,
    /// Most model requests per turn (default 50).
    pub max_steps: u32,
    /// Most tokens per reply (default 8192).
    pub max_tokens: u32,
    /// Bytes of a command's output the model reads (default 16 KiB).
    pub budget: usize,
    /// The context window reported in usage (default 200 000 tokens for Anthropic, 128 000
    /// for OpenAI); the provider's model list wins where it says, unless
    /// [`ModelConfig::window_from_list`] is off.
    pub context_window: u64,
    /// Whether the window comes from the provider's model list where it gives one (default
    /// on; `--context-window` turns it off): Ollama's `options.num_ctx` from `--extra-body`,
    /// else the list's entry ([`catalog`]), else [`ModelConfig::context_window`].
    pub window_from_list: bool,
    /// Retries of failed requests.
    pub retry: RetryPolicy,
    /// The most bytes of conversation kept per session (default 512 KiB, about 130 000
    /// tokens); past it the oldest tool output is trimmed first, then the oldest turns
    /// ([`history::bound`]).
    pub max_conversation_bytes: usize,
    /// Whether requests carry prompt-cache hints (default on): Anthropic `cache_control`
    /// breakpoints, OpenAI's `prompt_cache_key` ([`cache`]). Off: requests as before caching
    /// was built (`--no-prompt-cache`).
    pub prompt_cache: bool,
    /// Headers and body fields added to every request (`--header`, `--extra-body`).
    pub extras: Extras,
}

/// The default [`ModelConfig::max_conversation_bytes`].
pub const DEFAULT_MAX_CONVERSATION_BYTES: usize = 512 * 1024;

/// The default `--max-steps`.
pub const DEFAULT_MAX_STEPS: u32 = 50;

impl ModelConfig {
    /// `provider`'s `model` at `base_url`, with `key` (read from `key_env`) and the defaults.
    pub fn new(
        provider: Provider,
        model: impl Into<String>,
        base_url: impl Into<String>,
        key: Option<ApiKey>,
        key_env: impl Into<String>,
    ) -> Self {
        ModelConfig {
            provider,
            model: model.into(),
            base_url: base_url.into(),
            key,
            key_env: key_env.into(),
            key_file: None,
            max_steps: DEFAULT_MAX_STEPS,
            max_tokens: 8192,
            budget: DEFAULT_MODEL_BUDGET,
            context_window: match provider {
                Provider::Anthropic => 200_000,
                Provider::OpenAi => 128_000,
            },
            window_from_list: true,
            retry: RetryPolicy::default(),
            max_conversation_bytes: DEFAULT_MAX_CONVERSATION_BYTES,
            prompt_cache: true,
            extras: Extras::default(),
        }
    }

    /// Reads the model spec `openai:NAME` or `anthropic:NAME`; a provider alone (`openai`,
    /// `anthropic`) gives an empty name: the models are read from the provider's list
    /// ([`ModelConfig::from_list`]).
    pub fn parse_spec(spec: &str) -> Result<(Provider, String), String> {
        match spec.trim() {
            "openai" => return Ok((Provider::OpenAi, String::new())),
            "anthropic" => return Ok((Provider::Anthropic, String::new())),
            _ => {}
        }
        let (provider, name) = spec.split_once(':').unwrap_or(("", spec));
        let provider = match provider {
            "openai" => Provider::OpenAi,
            "anthropic" => Provider::Anthropic,
            _ => {
                return Err(format!(
                    "{spec:?} names no provider: write openai:NAME (any OpenAI-compatible \
                     server) or anthropic:NAME, e.g. openai:gpt-4.1 or \
                     anthropic:claude-sonnet-4-5, or the provider alone (openai, anthropic) \
                     to offer the models its server lists"
                ))
            }
        };
        if name.trim().is_empty() {
            return Err(format!(
                "{spec:?} names no model: write {}:NAME, or {} alone to offer the models \
                 its server lists",
                provider.id(),
                provider.id()
            ));
        }
        Ok((provider, name.to_string()))
    }

    /// Whether this names a provider only: the models are those its server lists.
    pub fn from_list(&self) -> bool {
        self.model.is_empty()
    }
}

/// A [`Driver`] that hands each prompt to a language model.
#[derive(Debug)]
#[non_exhaustive]
pub struct ModelDriver {
    config: ModelConfig,
    client: ModelClient,
    /// The other models a session may choose ([`ModelDriver::with_model`]), after `config`.
    others: Vec<(ModelConfig, ModelClient)>,
    conversations: Mutex<HashMap<String, Conversation>>,
    /// The model list of each provider and base URL among the models ([`catalog`]).
    catalogs: Vec<Arc<catalog::Catalog>>,
}

/// What the driver keeps of one session: the conversation and what it cost so far.
#[derive(Debug, Default)]
struct Conversation {
    messages: Vec<Message>,
    cost: Option<f64>,
    /// The system prompt, made at the session's first model prompt (for the model whose id
    /// is the first field) and then sent unchanged: a provider's prompt cache matches it.
    system: Option<(String, String)>,
    /// The environment the conversation last told the model of ([`turn_note`]).
    noted: Option<turn_note::Told>,
}

impl Conversation {
    /// The session's system prompt for `origin` (made once; a new model gets a new one).
    fn system_prompt(
        &mut self,
        origin: &str,
        session: &crate::exec::Session,
        budget: usize,
    ) -> String {
        match &self.system {
            Some((made_for, system)) if made_for == origin => system.clone(),
            _ => {
                let system = system::system_prompt(session, budget);
                self.system = Some((origin.to_string(), system.clone()));
                self.noted = Some(turn_note::now(session));
                system
            }
        }
    }
}

impl ModelDriver {
    /// A driver with `config` (no connection is made until the first prompt).
    pub fn new(config: ModelConfig) -> Self {
        let client = ModelClient::new(config.provider, config.base_url.clone())
            .with_extras(config.extras.clone());
        let catalogs = vec![Arc::new(catalog::Catalog::new(
            config.provider,
            &config.base_url,
            &config.extras,
        ))];
        ModelDriver {
            config,
            client,
            others: Vec::new(),
            conversations: Mutex::new(HashMap::new()),
            catalogs,
        }
    }

    /// Offers `config` too: a session may choose it ([`Driver::models`], by its id
    /// `PROVIDER:NAME`); the first model stays the default. The conversation carries over
    /// when a session changes models.
    pub fn with_model(mut self, config: ModelConfig) -> Self {
        let client = ModelClient::new(config.provider, config.base_url.clone())
            .with_extras(config.extras.clone());
        if !self
            .catalogs
            .iter()
            .any(|c| c.serves(config.provider, &config.base_url))
        {
            self.catalogs.push(Arc::new(catalog::Catalog::new(
                config.provider,
                &config.base_url,
                &config.extras,
            )));
        }
        self.others.push((config, client));
        self
    }

    /// The id a session chooses `config` by: `PROVIDER:NAME`.
    pub fn model_id(config: &ModelConfig) -> String {
        format!("{}:{}", config.provider.id(), config.model)
    }

    /// Every model given, the default first (a provider alone as itself).
    fn all(&self) -> impl Iterator<Item = (&ModelConfig, &ModelClient)> {
        std::iter::once((&self.config, &self.client))
            .chain(self.others.iter().map(|(config, client)| (config, client)))
    }

    /// The model list of `config`'s provider and base URL.
    fn catalog(&self, config: &ModelConfig) -> &Arc<catalog::Catalog> {
        self.catalogs
            .iter()
            .find(|c| c.serves(config.provider, &config.base_url))
            .expect("a catalog per provider and base URL")
    }

    /// Every model offered, the default first: a provider alone becomes the models of its
    /// list as far as it is known now (none while it is fetched, or when it failed).
    fn offered(&self) -> Vec<Offered<'_>> {
        let mut offered = Vec::new();
        for (config, client) in self.all() {
            if !config.from_list() {
                offered.push(Offered {
                    name: config.model.clone(),
                    config: config.clone(),
                    client,
                    listed: false,
                });
                continue;
            }
            if let Some(Ok(models)) = self.catalog(config).known() {
                for listed in models {
                    let mut listed_config = config.clone();
                    listed_config.model = listed.id.clone();
                    offered.push(Offered {
                        config: listed_config,
                        client,
                        name: listed.name.clone(),
                        listed: true,
                    });
                }
            }
        }
        offered
    }

    /// The model `id` names (the default for `None` or an id not offered). The default of a
    /// provider alone is the first model of its list, waited for (bounded); `Err` says why
    /// there is none.
    async fn chosen(&self, id: Option<&str>) -> Result<(ModelConfig, &ModelClient), String> {
        if self.all().any(|(config, _)| config.from_list()) {
            // Its list is known (or failed) before anything is chosen.
            for (config, _) in self.all().filter(|(config, _)| config.from_list()) {
                let key = key_of(config).ok();
                self.catalog(config).listing(key.as_ref()).await;
            }
        }
        let offered = self.offered();
        let at = id
            .and_then(|id| offered.iter().position(|o| Self::model_id(&o.config) == id))
            .unwrap_or(0);
        if let Some(chosen) = offered.into_iter().nth(at) {
            return Ok((chosen.config, chosen.client));
        }
        let catalog = self.catalog(&self.config);
        let why = match catalog.known() {
            Some(Err(error)) => error.clone(),
            _ => format!("the model list at {} lists no models", catalog.shown_url()),
        };
        let provider = self.config.provider.id();
        Err(format!(
            "`--model {provider}` names a provider only, and {why}. Name the model: \
             --model {provider}:NAME (check --base-url and that the server is running)."
        ))
    }

    /// The context window of `config`: `--context-window`; else Ollama's `num_ctx` from
    /// `--extra-body`; else what the provider's list says (waited for, bounded); else the
    /// default.
    async fn window(&self, config: &ModelConfig) -> u64 {
        if !config.window_from_list {
            return config.context_window;
        }
        if let Some(told) = catalog::told_window(&config.extras) {
            return told;
        }
        let key = key_of(config).ok();
        let listing = self.catalog(config).listing(key.as_ref()).await;
        catalog::window_of(listing, &config.model).unwrap_or(config.context_window)
    }

    /// The configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// A copy of session `session_id`'s conversation.
    pub fn conversation(&self, session_id: &str) -> Vec<Message> {
        self.conversations
            .lock()
            .unwrap()
            .get(session_id)
            .map(|c| c.messages.clone())
            .unwrap_or_default()
    }

    /// The default model's key (see [`key_of`]).
    fn key(&self) -> Result<ApiKey, String> {
        key_of(&self.config)
    }

    async fn drive_turn(
        &self,
        prompt: &Prompt,
        turn: &mut dyn TurnHost,
        state: &mut Conversation,
    ) -> Result<StopReason, TurnError> {
        let text = prompt.text();
        // The user's own commands never reach the model (nor wait for its list).
        let compact = match commands::parse(&text) {
            // The model driver compacts its own conversation.
            Some(Ok(command)) if command.spec().name == commands::compact::SPEC.name => true,
            Some(Ok(command)) => {
                turn.run_command(command).await;
                return Ok(StopReason::EndTurn);
            }
            Some(Err(message)) => {
                turn.notice(&message);
                return Ok(StopReason::EndTurn);
            }
            None => false,
        };
        if let (false, Some(command)) = (compact, text.trim_start().strip_prefix('!')) {
            if command.trim().is_empty() {
                turn.notice("Nothing to run: write the command after the `!`, like `!ls -la`.");
                return Ok(StopReason::EndTurn);
            }
            let result = turn.run_bash(BashCall::new(command.trim())).await;
            state.messages.push(Message::User(format!(
                "I ran this command myself:\n$ {}\n{}",
                command.trim(),
                model_text(&result, self.config.budget)
            )));
            return Ok(StopReason::EndTurn);
        }
        let (mut config, client) = match self.chosen(turn.model().as_deref()).await {
            Ok(chosen) => chosen,
            // No list without a key: the key is what is missing.
            Err(why) => {
                key_of(&self.config).map_err(TurnError::AuthRequired)?;
                return Err(TurnError::Failed(why));
            }
        };
        config.context_window = self.window(&config).await;
        let config = &config;
        let origin = Self::model_id(config);
        let effort = turn.thought_level().as_deref().and_then(Effort::parse);
        let conversation = &mut state.messages;
        // Reasoning goes back to the model that wrote it only.
        let dropped = api::drop_foreign_reasoning(conversation, &origin);
        if dropped > 0 {
            tracing::info!(
                model = %origin,
                messages = dropped,
                "another model's reasoning dropped from the conversation"
            );
        }
        if compact {
            return self.compact_now(config, client, &origin, state, turn).await;
        }
        let key = key_of(config).map_err(TurnError::AuthRequired)?;
        let key = &key;
        let (content, images) = user_content(prompt, turn);
        if content.trim().is_empty() && images.is_empty() {
            turn.notice("The prompt is empty: write what you want done.");
            return Ok(StopReason::EndTurn);
        }
        // The system prompt stays the same for the session's life; what changed since it (or
        // the last note) was made — directory, mode, date — goes with this prompt.
        let content = match content.trim().is_empty() {
            true => "(The user sent only images.)".to_string(),
            false => content,
        };
        let system = state.system_prompt(&origin, turn.session(), config.budget);
        let content = match turn_note::note_if_changed(turn.session(), &mut state.noted) {
            Some(note) => format!("{note}\n\n{content}"),
            None => content,
        };
        let conversation = &mut state.messages;
        conversation.push(Message::User(content));
        if !images.is_empty() {
            conversation.push(Message::Images(images));
            let replaced = bound_images(conversation, MAX_CONVERSATION_IMAGE_BYTES);
            if replaced > 0 {
                turn.notice(&format!(
                    "No longer sent to the model: the {replaced} oldest image(s) of this \
                     conversation (its images may take {} MiB in all).\n\n",
                    MAX_CONVERSATION_IMAGE_BYTES / (1024 * 1024)
                ));
            }
        }
        let cache_key = cache::cache_key(turn.session_id());
        let mut tools = tools::specs();
        tools.extend(mcp_tools::specs(&turn.mcp_tools().await));
        let settings = config.loop_settings(&origin, effort, &system, &tools, &cache_key);
        let cost = &mut state.cost;
        Ok(agent_loop::run_loop(client, key, &settings, conversation, cost, turn).await)
    }
}

impl ModelConfig {
    /// The agent loop's settings for a request with this configuration (cache hints only
    /// where [`ModelConfig::prompt_cache`] is on).
    fn loop_settings<'a>(
        &'a self,
        origin: &'a str,
        effort: Option<Effort>,
        system: &'a str,
        tools: &'a [ToolSpec],
        cache_key: &'a str,
    ) -> agent_loop::LoopSettings<'a> {
        agent_loop::LoopSettings {
            model: &self.model,
            origin,
            effort,
            system,
            tools,
            max_steps: self.max_steps,
            max_tokens: self.max_tokens,
            budget: self.budget,
            context_window: self.context_window,
            retry: self.retry,
            cache_key: self.prompt_cache.then_some(cache_key),
        }
    }
}

impl ModelDriver {
    /// `/compact`: the model summarises the conversation now.
    async fn compact_now(
        &self,
        config: &ModelConfig,
        client: &ModelClient,
        origin: &str,
        state: &mut Conversation,
        turn: &mut dyn TurnHost,
    ) -> Result<StopReason, TurnError> {
        if state.messages.is_empty() {
            turn.say("Nothing to compact yet: the conversation is empty.");
            return Ok(StopReason::EndTurn);
        }
        let key = key_of(config).map_err(TurnError::AuthRequired)?;
        let system = state.system_prompt(origin, turn.session(), config.budget);
        let tools = tools::specs();
        let cache_key = cache::cache_key(turn.session_id());
        let settings = config.loop_settings(origin, None, &system, &tools, &cache_key);
        let why = compaction::Why::Asked;
        // Told to the client either way (a failure leaves the conversation as it was).
        let _ = compaction::compact(client, &key, &settings, &mut state.messages, why, turn).await;
        Ok(StopReason::EndTurn)
    }
}

/// `config`'s key: the variable's (read at start-up), else the key file's, read anew each time
/// (a login may have happened since). `Err` is the auth-required message.
fn key_of(config: &ModelConfig) -> Result<ApiKey, String> {
    if let Some(key) = &config.key {
        return Ok(key.clone());
    }
    let Some(path) = &config.key_file else {
        return Err(missing_key(config, None));
    };
    match keyfile::read_key(path) {
        Ok(Some(key)) => Ok(ApiKey::from_file(key, path)),
        Ok(None) => Err(missing_key(config, None)),
        Err(problem) => Err(missing_key(config, Some(&problem))),
    }
}

/// What a prompt is told when `config` has no key (`problem`: why the key file was refused).
fn missing_key(config: &ModelConfig, problem: Option<&str>) -> String {
    let provider = config.provider.id();
    let file = match &config.key_file {
        Some(path) => format!(", which stores it in {}", path.display()),
        None => String::new(),
    };
    let problem = match problem {
        Some(problem) => format!(" ({problem})"),
        None => String::new(),
    };
    format!(
        "No API key for {provider}{problem}: set the environment variable {} to your key \
         where the editor starts acp-bash (or pass `--api-key-env NAME` to read another \
         variable), or run `acp-bash login {provider}` in a terminal{file}. The variable \
         is looked at first, then the file.",
        config.key_env
    )
}

/// The most bytes of one embedded resource (an @-mentioned file) sent to the model: 64 KiB,
/// about 16 000 tokens; the rest is left for the model to read with bash, and the user is told.
pub const MAX_RESOURCE_BYTES: usize = 64 * 1024;

/// The most bytes of all the embedded resources of one prompt sent to the model: 256 KiB
/// (four whole files of [`MAX_RESOURCE_BYTES`]); a resource past it is cut to what is left, or
/// only named (the model can read it with bash), and the user is told.
pub const MAX_PROMPT_RESOURCE_BYTES: usize = 256 * 1024;

/// The image types sent to a model (those both OpenAI and Anthropic take); an image of another
/// type is named to the user and the model, not sent.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The most base64 bytes of images one prompt sends (5 MiB: Anthropic's limit for one image);
/// an image past it is not sent, and the user is told. Images have their own budget, apart
/// from [`MAX_PROMPT_RESOURCE_BYTES`].
pub const MAX_PROMPT_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// The most base64 bytes of images a conversation keeps sending (10 MiB): past it, the
/// oldest prompts' images are replaced by a line saying they were given and are no longer
/// sent, and the user is told. A model that refuses images gets none (each replaced so).
pub const MAX_CONVERSATION_IMAGE_BYTES: usize = 10 * 1024 * 1024;

// A session's record keeps what the driver sends, so that a loaded session sends it again.
const _: () = assert!(
    MAX_PROMPT_IMAGE_BYTES == crate::store::record::KEEP_PROMPT_IMAGE_BYTES
        && MAX_CONVERSATION_IMAGE_BYTES == crate::store::record::KEEP_IMAGE_BYTES
);

/// Replaces the oldest images of `conversation` by a line saying so until what is left fits
/// `max` bytes; the number of images replaced.
pub fn bound_images(conversation: &mut [Message], max: usize) -> usize {
    let size = |m: &Message| match m {
        Message::Images(images) => images.iter().map(|i| i.data.len()).sum(),
        _ => 0,
    };
    let mut total: usize = conversation.iter().map(size).sum();
    let mut replaced = 0;
    for message in conversation.iter_mut() {
        if total <= max {
            break;
        }
        if let Message::Images(images) = message {
            total -= images.iter().map(|i| i.data.len()).sum::<usize>();
            replaced += images.len();
            let why = format!(
                "the conversation's images passed {} MiB, the oldest are no longer sent",
                max / (1024 * 1024)
            );
            *message = api::images_not_sent(images.len(), &why);
        }
    }
    replaced
}

/// The first `max` bytes of `text` at a line end (else a character boundary) and whether
/// anything was cut.
fn bounded(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let cut = text[..cut].rfind('\n').map_or(cut, |at| at + 1);
    (&text[..cut], true)
}

/// The prompt as the model reads it: its text, the text of embedded resources (@-mentioned
/// files) with their URIs, and a line for each link. Parts that cannot be sent (images, a
/// resource without text) are named to the user, never dropped silently.
fn user_content(prompt: &Prompt, turn: &mut dyn TurnHost) -> (String, Vec<Image>) {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    let mut images_left = MAX_PROMPT_IMAGE_BYTES;
    // What the prompt's resources may still send.
    let mut left = MAX_PROMPT_RESOURCE_BYTES;
    for block in &prompt.blocks {
        match block {
            PromptBlock::Text(text) => parts.push(text.clone()),
            PromptBlock::Resource {
                uri,
                text: Some(text),
                ..
            } if left == 0 => {
                turn.notice(&format!(
                    "Not sent to the model: {uri} ({} bytes): the prompt's embedded files \
                     reached {} KiB; it can read the file with bash.\n\n",
                    text.len(),
                    MAX_PROMPT_RESOURCE_BYTES / 1024
                ));
                parts.push(format!(
                    "(The user attached {uri}, {} bytes, not sent: the prompt's attachments \
                     reached their bound. Read it with bash if you need it.)",
                    text.len()
                ));
            }
            PromptBlock::Resource {
                uri,
                text: Some(text),
                ..
            } => {
                let max = MAX_RESOURCE_BYTES.min(left);
                let (kept, cut) = bounded(text, max);
                // A file cut by the prompt's bound uses it up: the next ones are only named.
                left = if cut && max < MAX_RESOURCE_BYTES {
                    0
                } else {
                    left - kept.len()
                };
                if cut {
                    let first = if max == MAX_RESOURCE_BYTES {
                        format!("{} KiB", MAX_RESOURCE_BYTES / 1024)
                    } else {
                        format!("{} bytes (what was left of the prompt's bound)", kept.len())
                    };
                    turn.notice(&format!(
                        "Sent to the model: the first {first} of {uri} ({} bytes in all); it \
                         can read the rest with bash.\n\n",
                        text.len()
                    ));
                    parts.push(format!(
                        "<resource uri=\"{uri}\">\n{kept}\n[… cut here: the first {} of {} \
                         bytes; read the rest with bash, e.g. `tail -c +{} FILE | head -c 65536`]\n</resource>",
                        kept.len(),
                        text.len(),
                        kept.len() + 1
                    ));
                } else {
                    parts.push(format!("<resource uri=\"{uri}\">\n{text}\n</resource>"));
                }
            }
            PromptBlock::Resource {
                uri, text: None, ..
            } => {
                turn.notice(&format!(
                    "Not sent to the model: {uri} has no text content (the model can read files \
                     with bash).\n\n"
                ));
                parts.push(format!("(The user attached {uri}, which is not text.)"));
            }
            PromptBlock::Link { uri, name } => {
                parts.push(format!("(The user points at {name}: {uri})"))
            }
            PromptBlock::Image { mime_type, data } => {
                let mime_type = mime_type.to_ascii_lowercase();
                if !IMAGE_TYPES.contains(&mime_type.as_str()) {
                    turn.notice(&format!(
                        "Not sent to the model: an image of type {mime_type} (models take {}).\n\n",
                        IMAGE_TYPES.join(", ")
                    ));
                    parts.push(format!(
                        "(The user gave an image of type {mime_type}, not sent: models take {} only.)",
                        IMAGE_TYPES.join(", ")
                    ));
                } else if data.len() > images_left {
                    turn.notice(&format!(
                        "Not sent to the model: an image of {} KiB: a prompt's images may \
                         take {} MiB in all (base64).\n\n",
                        data.len() / 1024,
                        MAX_PROMPT_IMAGE_BYTES / (1024 * 1024)
                    ));
                    parts.push(format!(
                        "(The user gave an image of {} KiB, not sent: the prompt's images \
                         reached their bound.)",
                        data.len() / 1024
                    ));
                } else {
                    images_left -= data.len();
                    images.push(Image::new(mime_type, data.trim()));
                }
            }
            PromptBlock::Other { kind } => turn.notice(&format!(
                "Not sent to the model: an {kind} block (acp-bash sends text only).\n\n"
            )),
        }
    }
    (parts.join("\n\n"), images)
}

impl Driver for ModelDriver {
    fn name(&self) -> &str {
        "model"
    }

    fn drive<'a>(
        &'a self,
        prompt: &'a Prompt,
        turn: &'a mut dyn TurnHost,
    ) -> BoxFuture<'a, Result<StopReason, TurnError>> {
        async move {
            let id = turn.session_id().to_string();
            let mut conversation = self
                .conversations
                .lock()
                .unwrap()
                .remove(&id)
                // A session of another process (loaded, resumed): what its record holds.
                .unwrap_or_else(|| Conversation {
                    messages: history::conversation_from_record(&turn.record(), self.config.budget),
                    cost: None,
                    system: None,
                    noted: None,
                });
            let ended = self.drive_turn(prompt, turn, &mut conversation).await;
            let max = self.config.max_conversation_bytes;
            if let Some(trimmed) = history::bound(&mut conversation.messages, max) {
                tracing::info!(
                    bytes = history::size(&conversation.messages),
                    ?trimmed,
                    "the conversation reached its bound: trimmed"
                );
                // Nothing is dropped silently.
                turn.say(&trimmed.notice(max));
            }
            self.conversations.lock().unwrap().insert(id, conversation);
            ended
        }
        .boxed()
    }

    fn auth_methods(&self) -> Vec<AuthMethod> {
        let Err(missing) = self.key() else {
            return Vec::new();
        };
        let provider = self.config.provider.id();
        vec![
            AuthMethod::new(AUTH_METHOD_ID, format!("Log in to {provider}"))
                .description(missing)
                .terminal(vec!["login".into(), provider.into()]),
        ]
    }

    fn models(&self) -> Vec<ModelChoice> {
        self.offered()
            .into_iter()
            .map(|offered| {
                let config = &offered.config;
                let api = match config.provider {
                    Provider::OpenAi => "the OpenAI chat-completions API",
                    Provider::Anthropic => "the Anthropic messages API",
                };
                let from = if offered.listed {
                    " (from the server's model list)"
                } else {
                    ""
                };
                ModelChoice::new(Self::model_id(config), &offered.name)
                    .description(format!("{} through {api}{from}", config.model))
            })
            .collect()
    }

    /// Starts reading the model list of a provider given alone in the background; `Some`
    /// while it is not known yet: the session's models are known once it resolves (bounded
    /// by [`catalog::FETCH_BOUND`]).
    fn session_opening(&self) -> Option<BoxFuture<'static, ()>> {
        let mut pending = Vec::new();
        // Only a provider alone's list is read at session/new: a session that never prompts
        // makes no HTTP request (the window's list is read at the first prompt).
        for (config, _) in self.all() {
            if !config.from_list() {
                continue;
            }
            let catalog = self.catalog(config);
            let key = key_of(config).ok();
            catalog.start(key.clone());
            if config.from_list() && catalog.known().is_none() {
                pending.push((catalog.clone(), key));
            }
        }
        if pending.is_empty() {
            return None;
        }
        Some(
            async move {
                for (catalog, key) in pending {
                    catalog.listing(key.as_ref()).await;
                }
            }
            .boxed(),
        )
    }

    /// Reads the key again (the variable's, else the key file's): `Ok` once there is one.
    fn authenticate(&self, method_id: &str) -> Result<(), TurnError> {
        if method_id != AUTH_METHOD_ID {
            return Err(TurnError::Failed(format!(
                "no auth method {method_id:?}: the one method is {AUTH_METHOD_ID:?}"
            )));
        }
        self.key().map(|_| ()).map_err(TurnError::AuthRequired)
    }

    fn session_closed(&self, session_id: &str) {
        self.conversations.lock().unwrap().remove(session_id);
    }

    fn thought_levels(&self) -> Vec<ModelChoice> {
        let default = ModelChoice::new(THOUGHT_DEFAULT, "Default").description(
            "The model's own default: OpenAI-compatible models get no reasoning_effort, \
             Anthropic models no extended thinking",
        );
        std::iter::once(default)
            .chain(Effort::ALL.into_iter().map(|effort| {
                let name = match effort {
                    Effort::Low => "Low",
                    Effort::Medium => "Medium",
                    _ => "High",
                };
                ModelChoice::new(effort.id(), name).description(format!(
                    "reasoning_effort {:?}; Anthropic: extended thinking with {} tokens",
                    effort.id(),
                    effort.thinking_budget()
                ))
            }))
            .collect()
    }

    fn embedded_context(&self) -> bool {
        true
    }

    fn images(&self) -> bool {
        true
    }
}

/// One model a session may choose ([`ModelDriver::offered`]).
struct Offered<'a> {
    config: ModelConfig,
    client: &'a ModelClient,
    /// What a client shows.
    name: String,
    /// Whether it came from the provider's list.
    listed: bool,
}

/// The id of the reasoning level that leaves the model's default alone.
pub const THOUGHT_DEFAULT: &str = "default";
