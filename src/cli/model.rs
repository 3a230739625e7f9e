//! The model flags: `--model`, `--base-url`, `--api-key-env`, `--max-steps`, and building the
//! model driver from them and the environment (`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`,
//! `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`).
//!
//! The key: the variable's, else the file `acp-bash login` stored (`super::login`).
//! Without `--model` nothing here runs: the agent is the shell driver and does no HTTP work.
//! The key is read once, here, and the variable it came from is removed from the environment
//! the engine hands to commands (whatever the scrub would say about its name).

use std::ffi::OsString;
use std::sync::Arc;

use acp_bash::driver::model::{keyfile, ApiKey, ModelConfig, ModelDriver};
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
    #[arg(long, value_name = "PROVIDER:NAME", value_parser = parse_model)]
    model: Option<String>,
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
}

fn parse_model(spec: &str) -> Result<String, String> {
    ModelConfig::parse_spec(spec).map(|_| spec.to_string())
}

impl ModelArgs {
    /// `--model`'s value.
    pub fn spec(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// The variable the key is read from, when a model is chosen.
    pub fn key_env(&self) -> Option<String> {
        let model = self.model.as_deref()?;
        let (provider, _) = ModelConfig::parse_spec(model).ok()?;
        Some(
            self.api_key_env
                .clone()
                .unwrap_or_else(|| provider.key_env().to_string()),
        )
    }

    /// The model driver these flags ask for, reading base URL and key from `env`; `None`
    /// without `--model`.
    pub fn driver(&self, env: &[(OsString, OsString)]) -> Option<Arc<dyn Driver>> {
        let model = self.model.as_deref()?;
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
        let key_env = self.key_env().expect("a model is chosen");
        let key = var(&key_env).map(|key| ApiKey::new(key, key_env.clone()));
        let key_file = keyfile::config_home(var)
            .map(|home| keyfile::key_file(&keyfile::key_dir(&home), provider));
        let mut config = ModelConfig::new(provider, name, base_url, key, key_env);
        config.key_file = key_file;
        if let Some(max_steps) = self.max_steps {
            config.max_steps = max_steps;
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
            base_url = %config.base_url,
            key_from = %config.key_env,
            "a model drives each turn"
        );
        Some(Arc::new(ModelDriver::new(config)))
    }

    /// `env` without the key's variable (for the engine, so that no command ever sees it).
    pub fn commands_env(&self, env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
        match self.key_env() {
            Some(key_env) => env.into_iter().filter(|(n, _)| *n != *key_env).collect(),
            None => env,
        }
    }

    /// The flags again, for `zed-config`.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        let pairs = [
            ("--model", self.model.clone()),
            ("--base-url", self.base_url.clone()),
            ("--api-key-env", self.api_key_env.clone()),
            ("--max-steps", self.max_steps.map(|n| n.to_string())),
        ];
        for (flag, value) in pairs {
            if let Some(value) = value {
                args.push(flag.to_string());
                args.push(value);
            }
        }
        args
    }
}
