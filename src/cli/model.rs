//! The model flags: `--model`, `--base-url`, `--api-key-env`, `--max-steps`, `--header`,
//! `--extra-body`, and building the
//! model driver from them and the environment (`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`,
//! `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`).
//!
//! The key: the variable's, else the file `acp-bash login` stored (`super::login`).
//! Without `--model` nothing here runs: the agent is the shell driver and does no HTTP work.
//! The key is read once, here, and the variable it came from is removed from the environment
//! the engine hands to commands (whatever the scrub would say about its name).

use std::ffi::OsString;
use std::sync::Arc;

use acp_bash::driver::model::{keyfile, ApiKey, Extras, ModelConfig, ModelDriver};
use acp_bash::driver::Driver;
use clap::Args;

/// Let a language model drive: it gets the prompt, runs bash through the same cards, and
/// answers. Without `--model`, every prompt is a bash script (the default).
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
#[command(next_help_heading = "Model")]
pub struct ModelArgs {
    /// The model that drives each turn: `openai:NAME` (the OpenAI chat-completions API, also
    /// any OpenAI-compatible server: llama.cpp, vLLM, Ollama, LM Studio, gateways) or
    /// `anthropic:NAME` (the Anthropic messages API), e.g. `openai:gpt-4.1`,
    /// `anthropic:claude-sonnet-4-5`. Slash commands and `!COMMAND` still run directly.
    /// Give it more than once to let each session choose (the `model` config option); the
    /// first is the default. `--base-url` and `--api-key-env` apply to every one. A provider
    /// alone (`openai`, `anthropic`) offers every model its server lists (`GET /v1/models`),
    /// the first the default.
    #[arg(long, value_name = "PROVIDER:NAME", value_parser = parse_model,
          action = clap::ArgAction::Append)]
    model: Vec<String>,
    /// The API's base URL: for openai, up to and including `/v1` (as OPENAI_BASE_URL), e.g.
    /// `http://localhost:8080/v1`; for anthropic, without `/v1` (as ANTHROPIC_BASE_URL).
    /// Default: OPENAI_BASE_URL / ANTHROPIC_BASE_URL, else the provider's own.
    #[arg(long, value_name = "URL", requires = "model")]
    base_url: Option<String>,
    /// The environment variable that holds the API key (default OPENAI_API_KEY or
    /// ANTHROPIC_API_KEY). It is removed from the environment of every command.
    #[arg(long, value_name = "NAME", requires = "model")]
    api_key_env: Option<String>,
    /// The most model requests in one turn; a turn that reaches it ends with
    /// `max_turn_requests` (default 50).
    #[arg(long, value_name = "N", requires = "model",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_steps: Option<u32>,
    /// The model's context window, in tokens. Default: what the server's model list says
    /// (OpenRouter, vLLM, LM Studio, llama.cpp's `/props`; Ollama's `num_ctx` from
    /// --extra-body), else 200000 for anthropic, 128000 for openai. The conversation is
    /// compacted (the model summarises it) at 80% of it.
    #[arg(long, value_name = "TOKENS", requires = "model",
          value_parser = clap::value_parser!(u64).range(1024..))]
    context_window: Option<u64>,
    /// Send no prompt-cache hints (Anthropic `cache_control`, OpenAI `prompt_cache_key`), for
    /// a gateway that refuses them.
    #[arg(long, requires = "model")]
    no_prompt_cache: bool,
    /// A header added to every model request, as NAME=VALUE (give it once per header), e.g.
    /// `--header 'HTTP-Referer=https://example.com'` for OpenRouter, or a gateway's own. Not
    /// for the key (that is read from --api-key-env's variable). Values are never logged.
    #[arg(long = "header", value_name = "NAME=VALUE", requires = "model",
          value_parser = parse_header, action = clap::ArgAction::Append)]
    headers: Vec<String>,
    /// A JSON object whose fields are added to every model request's body (objects merged
    /// key by key), e.g. `--extra-body '{"options":{"num_ctx":32768}}'` so that Ollama does
    /// not cut the conversation at its default context, or `'{"top_k":20}'` for vLLM.
    #[arg(long, value_name = "JSON", requires = "model", value_parser = parse_extra_body)]
    extra_body: Option<String>,
}

fn parse_header(spec: &str) -> Result<String, String> {
    Extras::parse_header(spec).map(|_| spec.to_string())
}

fn parse_extra_body(json: &str) -> Result<String, String> {
    Extras::parse_body(json).map(|_| json.to_string())
}

fn parse_model(spec: &str) -> Result<String, String> {
    ModelConfig::parse_spec(spec).map(|_| spec.to_string())
}

impl ModelArgs {
    /// The first (default) `--model`'s value.
    pub fn spec(&self) -> Option<&str> {
        self.model.first().map(String::as_str)
    }

    /// The variables the keys are read from (one per provider among the models, or
    /// `--api-key-env`); empty without `--model`.
    pub fn key_envs(&self) -> Vec<String> {
        let mut envs = Vec::new();
        for model in &self.model {
            let Ok((provider, _)) = ModelConfig::parse_spec(model) else {
                continue;
            };
            let env = self
                .api_key_env
                .clone()
                .unwrap_or_else(|| provider.key_env().to_string());
            if !envs.contains(&env) {
                envs.push(env);
            }
        }
        envs
    }

    /// The model driver these flags ask for, reading base URL and key from `env`; `None`
    /// without `--model`. More than one `--model`: the first is the default, and each session
    /// may choose another.
    pub fn driver(&self, env: &[(OsString, OsString)]) -> Option<Arc<dyn Driver>> {
        let mut configs = self.model.iter().map(|model| self.config(model, env));
        let mut driver = ModelDriver::new(configs.next()?);
        for config in configs {
            driver = driver.with_model(config);
        }
        Some(Arc::new(driver))
    }

    /// The configuration of `model` (`PROVIDER:NAME`) from these flags and `env`.
    fn config(&self, model: &str, env: &[(OsString, OsString)]) -> ModelConfig {
        let (provider, name) = ModelConfig::parse_spec(model).expect("checked by clap");
        let var = |name: &str| {
            env.iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| v.to_str())
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let base_url = self
            .base_url
            .clone()
            .or_else(|| var(provider.base_url_env()))
            .unwrap_or_else(|| provider.default_base_url().to_string());
        let key_env = self
            .api_key_env
            .clone()
            .unwrap_or_else(|| provider.key_env().to_string());
        let key = var(&key_env).map(|key| ApiKey::new(key, key_env.clone()));
        let key_file = keyfile::config_home(var)
            .map(|home| keyfile::key_file(&keyfile::key_dir(&home), provider));
        let mut config = ModelConfig::new(provider, name, base_url, key, key_env);
        config.key_file = key_file;
        if let Some(max_steps) = self.max_steps {
            config.max_steps = max_steps;
        }
        if let Some(window) = self.context_window {
            config.context_window = window;
            config.window_from_list = false;
        }
        config.prompt_cache = !self.no_prompt_cache;
        for header in &self.headers {
            let header = Extras::parse_header(header).expect("checked by clap");
            config.extras.headers.push(header);
        }
        if let Some(json) = &self.extra_body {
            config.extras.body = Extras::parse_body(json).expect("checked by clap");
        }
        if config.key.is_none() {
            tracing::info!(
                "no API key in ${}: the key file {:?} is read at each prompt",
                config.key_env,
                config.key_file
            );
        }
        tracing::info!(
            provider = provider.id(),
            model = %config.model,
            // Never the credentials a URL may carry (`user:token@`, `?key=`).
            base_url = %acp_bash::driver::model::client::redact_url(&config.base_url),
            key_from = %config.key_env,
            extras = ?config.extras,
            "a model may drive the turns"
        );
        config
    }

    /// `env` without the key's variable (for the engine, so that no command ever sees it).
    pub fn commands_env(&self, env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
        let key_envs = self.key_envs();
        env.into_iter()
            .filter(|(n, _)| !key_envs.iter().any(|k| n == k.as_str()))
            .collect()
    }

    /// The flags again, for `zed-config`.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for model in &self.model {
            args.push("--model".to_string());
            args.push(model.clone());
        }
        let pairs = [
            ("--base-url", self.base_url.clone()),
            ("--api-key-env", self.api_key_env.clone()),
            ("--max-steps", self.max_steps.map(|n| n.to_string())),
            (
                "--context-window",
                self.context_window.map(|n| n.to_string()),
            ),
        ];
        for (flag, value) in pairs {
            if let Some(value) = value {
                args.push(flag.to_string());
                args.push(value);
            }
        }
        if self.no_prompt_cache {
            args.push("--no-prompt-cache".to_string());
        }
        for header in &self.headers {
            args.push("--header".to_string());
            args.push(header.clone());
        }
        if let Some(json) = &self.extra_body {
            args.push("--extra-body".to_string());
            args.push(json.clone());
        }
        args
    }
}
