//! The provider's model list: which models a server offers and, where it says, each one's
//! context window.
//!
//! Owns [`Catalog`] (one per provider and base URL, fetched once per process, at most
//! [`FETCH_BOUND`] in all) and the reading of the list's shapes:
//!
//! - OpenAI-compatible `GET {base}/models`: `data[].id`, and the window where an entry carries
//!   one: OpenRouter's `context_length` (or `top_provider.context_length`), vLLM's
//!   `max_model_len`, `context_window` (Groq and gateways), LM Studio's
//!   `loaded_context_length` / `max_context_length`, llama.cpp's `meta.n_ctx_train`;
//! - llama.cpp's `GET {root}/props` `default_generation_settings.n_ctx` (the context the
//!   server was started with, which wins over the trained one), asked when the list names
//!   llama.cpp or carries no window at all; LM Studio's `GET {root}/api/v0/models` likewise;
//! - Anthropic's `GET {base}/v1/models`: `data[].id` and `display_name` (no window).
//!
//! Ollama's `/v1/models` carries no window, and the context it runs with is its `num_ctx`:
//! [`told_window`] reads `options.num_ctx` from `--extra-body`, which comes first (the value
//! Ollama is told).
//! Must not touch: the loop, ACP.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::client::{redact_url, ApiKey, ModelClient, Provider};
use super::endpoint::{join, on_root};
use super::extras::Extras;

/// The longest a model list (with its `/props` or LM Studio question) may take: past it the
/// list counts as unreadable for the process, and the defaults hold.
pub const FETCH_BOUND: Duration = Duration::from_secs(5);

/// The most models a list offers a session (OpenRouter lists hundreds): the first ones, in
/// the server's order.
pub const MAX_LISTED: usize = 300;

/// One model of a provider's list.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Listed {
    /// Its id at the provider (what `model` is set to in a request).
    pub id: String,
    /// A name to show (Anthropic's `display_name`; else the id).
    pub name: String,
    /// Its context window in tokens, when the server says.
    pub window: Option<u64>,
}

/// What came of fetching a list: the models, or why there are none (a message that names the
/// URL without credentials and says what to do).
pub type Listing = Result<Vec<Listed>, String>;

/// The model list of one provider at one base URL, fetched once.
#[derive(Debug)]
#[non_exhaustive]
pub struct Catalog {
    client: ModelClient,
    provider: Provider,
    base_url: String,
    listing: tokio::sync::OnceCell<Listing>,
    started: AtomicBool,
}

impl Catalog {
    /// The list of `provider` at `base_url` (nothing is fetched yet); requests carry `extras`'
    /// headers.
    pub fn new(provider: Provider, base_url: &str, extras: &Extras) -> Self {
        let headers = Extras {
            headers: extras.headers.clone(),
            ..Extras::default()
        };
        Catalog {
            client: ModelClient::new(provider, base_url).with_extras(headers),
            provider,
            base_url: base_url.to_string(),
            listing: tokio::sync::OnceCell::new(),
            started: AtomicBool::new(false),
        }
    }

    /// Whether this is the list of `provider` at `base_url`.
    pub fn serves(&self, provider: Provider, base_url: &str) -> bool {
        self.provider == provider && self.base_url == base_url
    }

    /// Starts fetching in the background (once; only inside a tokio runtime): a later
    /// [`Catalog::listing`] finds it done or under way.
    pub fn start(self: &Arc<Self>, key: Option<ApiKey>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.started.store(false, Ordering::Release);
            return;
        };
        let this = self.clone();
        runtime.spawn(async move {
            this.listing(key.as_ref()).await;
        });
    }

    /// The list once known (fetched now if nobody started it; waits for a fetch under way).
    pub async fn listing(&self, key: Option<&ApiKey>) -> &Listing {
        self.listing.get_or_init(|| self.fetch(key)).await
    }

    /// The list if it is known already.
    pub fn known(&self) -> Option<&Listing> {
        self.listing.get()
    }

    /// The list URL, as messages show it.
    pub fn shown_url(&self) -> String {
        redact_url(&self.models_url())
    }

    fn models_url(&self) -> String {
        match self.provider {
            Provider::OpenAi => join(&self.base_url, "/models", None),
            Provider::Anthropic => join(&self.base_url, "/v1/models", Some("limit=1000")),
        }
    }

    /// `path` on the server's root: the base URL without its `/v1` (its query kept).
    fn on_root(&self, path: &str) -> String {
        on_root(&self.base_url, path)
    }

    async fn fetch(&self, key: Option<&ApiKey>) -> Listing {
        let started = std::time::Instant::now();
        let listing = match tokio::time::timeout(FETCH_BOUND, self.fetch_inner(key)).await {
            Ok(listing) => listing,
            Err(_) => Err(format!(
                "the model list at {} gave no answer within {} s",
                self.shown_url(),
                FETCH_BOUND.as_secs()
            )),
        };
        match &listing {
            Ok(models) => tracing::info!(
                url = %self.shown_url(),
                models = models.len(),
                windows = models.iter().filter(|m| m.window.is_some()).count(),
                ms = started.elapsed().as_millis() as u64,
                "read the provider's model list"
            ),
            Err(error) => tracing::info!(%error, "no model list"),
        }
        listing
    }

    async fn fetch_inner(&self, key: Option<&ApiKey>) -> Listing {
        let url = self.models_url();
        let value = self.client.get_json(&url, key).await.map_err(|error| {
            format!(
                "the model list at {} could not be read: {error}",
                self.shown_url()
            )
        })?;
        let mut models = read_list(&value).ok_or_else(|| {
            format!(
                "the model list at {} is not a list of models (no `data` array)",
                self.shown_url()
            )
        })?;
        if self.provider == Provider::OpenAi && !is_cloud(&self.base_url) {
            let llama = value["data"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|entry| entry["owned_by"] == "llamacpp" || entry["meta"].is_object());
            let none = models.iter().all(|m| m.window.is_none());
            if llama || none {
                let props = self.on_root("/props");
                if let Ok(props) = self.client.get_json(&props, key).await {
                    if let Some(n_ctx) = number(&props["default_generation_settings"]["n_ctx"]) {
                        // One model per llama.cpp server: the context it was started with.
                        for model in &mut models {
                            model.window = Some(n_ctx);
                        }
                    }
                }
            }
            if models.iter().all(|m| m.window.is_none()) {
                let lm_studio = self.on_root("/api/v0/models");
                if let Ok(list) = self.client.get_json(&lm_studio, key).await {
                    if let Some(described) = read_list(&list) {
                        for model in &mut models {
                            model.window = described
                                .iter()
                                .find(|d| d.id == model.id)
                                .and_then(|d| d.window);
                        }
                    }
                }
            }
        }
        Ok(models)
    }
}

/// `base` without its query, and the query.
/// The context window that `extras` tell the server to use (Ollama's `options.num_ctx`).
pub fn told_window(extras: &Extras) -> Option<u64> {
    extras
        .body
        .get("options")
        .and_then(|options| number(&options["num_ctx"]))
}

/// The window of `model` in `listing`, if the list says.
pub fn window_of(listing: &Listing, model: &str) -> Option<u64> {
    listing
        .as_ref()
        .ok()?
        .iter()
        .find(|listed| listed.id == model)
        .and_then(|listed| listed.window)
}

/// Whether `base` is a provider's own cloud API, which has neither `/props` nor LM Studio's
/// list (asking would be two wasted requests).
fn is_cloud(base: &str) -> bool {
    let rest = base.split("://").nth(1).unwrap_or(base);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority
        .rsplit('@')
        .next()
        .unwrap_or("")
        .split(':')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    [
        "api.openai.com",
        "openrouter.ai",
        "api.deepseek.com",
        "api.anthropic.com",
    ]
    .iter()
    .any(|cloud| host == *cloud)
        || host.ends_with(".googleapis.com")
        || host.ends_with(".openai.azure.com")
}

/// A count that a server sends as a number or as a string of digits (0 is no count).
fn number(value: &Value) -> Option<u64> {
    value
        .as_u64()
        .or_else(|| value.as_f64().filter(|f| *f >= 1.0).map(|f| f as u64))
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
        .filter(|n| *n > 0)
}

/// The models of a list answer (`{data: [...]}`, or a bare array), at most [`MAX_LISTED`],
/// without the ones that cannot chat (embeddings, speech, images, moderation); `None`: not a
/// list.
pub fn read_list(value: &Value) -> Option<Vec<Listed>> {
    let entries = value["data"].as_array().or(value.as_array())?;
    Some(
        entries
            .iter()
            .filter_map(|entry| {
                let id = entry["id"].as_str()?.trim();
                if id.is_empty() || !can_chat(id, entry) {
                    return None;
                }
                let name = entry["display_name"]
                    .as_str()
                    .or(entry["name"].as_str())
                    .filter(|name| !name.trim().is_empty())
                    .unwrap_or(id);
                Some(Listed {
                    id: id.to_string(),
                    name: name.to_string(),
                    window: entry_window(entry),
                })
            })
            .take(MAX_LISTED)
            .collect(),
    )
}

/// The window an entry carries, in the first field of the known shapes that has one.
fn entry_window(entry: &Value) -> Option<u64> {
    [
        &entry["loaded_context_length"],
        &entry["context_length"],
        &entry["max_model_len"],
        &entry["context_window"],
        &entry["max_context_length"],
        &entry["top_provider"]["context_length"],
        &entry["meta"]["n_ctx_train"],
    ]
    .into_iter()
    .find_map(number)
}

/// Whether a listed model can chat: not an embedding, speech, image or moderation model (by
/// LM Studio's `type` or the id).
fn can_chat(id: &str, entry: &Value) -> bool {
    if matches!(entry["type"].as_str(), Some("embeddings" | "embedding")) {
        return false;
    }
    let id = id.to_ascii_lowercase();
    ![
        "embedding",
        "embed-",
        "tts-",
        "whisper",
        "dall-e",
        "moderation",
        "transcribe",
    ]
    .iter()
    .any(|not| id.contains(not))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_servers_shape_gives_its_window() {
        let list = json!({"object": "list", "data": [
            {"id": "openrouter/a", "context_length": 32768, "top_provider": {"context_length": 16000}},
            {"id": "vllm-model", "object": "model", "max_model_len": 8192},
            {"id": "lmstudio", "type": "llm", "max_context_length": 131072, "loaded_context_length": 4096},
            {"id": "llama", "owned_by": "llamacpp", "meta": {"n_ctx_train": "65536"}},
            {"id": "groq", "context_window": 131072},
            {"id": "gpt-4.1", "owned_by": "system"},
            {"id": "text-embedding-3-small"},
            {"id": "nomic", "type": "embeddings"},
        ]});
        let models = read_list(&list).unwrap();
        let windows: Vec<(&str, Option<u64>)> =
            models.iter().map(|m| (m.id.as_str(), m.window)).collect();
        assert_eq!(
            windows,
            [
                ("openrouter/a", Some(32768)),
                ("vllm-model", Some(8192)),
                ("lmstudio", Some(4096)),
                ("llama", Some(65536)),
                ("groq", Some(131072)),
                ("gpt-4.1", None),
            ]
        );
        let anthropic =
            json!({"data": [{"type": "model", "id": "claude-x", "display_name": "Claude X"}]});
        assert_eq!(read_list(&anthropic).unwrap()[0].name, "Claude X");
        assert!(read_list(&json!({"error": "no"})).is_none());
        let extras = Extras {
            body: json!({"options": {"num_ctx": 32768}})
                .as_object()
                .unwrap()
                .clone(),
            ..Extras::default()
        };
        assert_eq!(told_window(&extras), Some(32768));
        assert!(is_cloud("https://user:x@api.openai.com/v1"));
        assert_eq!(
            join("http://h/v1/?key=k", "/models", None),
            "http://h/v1/models?key=k"
        );
        assert_eq!(
            join("http://h", "/v1/models", Some("limit=1000")),
            "http://h/v1/models?limit=1000"
        );
        assert!(!is_cloud("http://127.0.0.1:8080/v1"));
    }
}
