//! A test host for model turns: the real `turn::Turn` over a `TurnPort` that runs each call on a
//! real engine session (real bash) and records every event in order; and [`served`], the built
//! binary as a client starts it, for the tests that go through ACP.

use std::sync::{Arc, Mutex};

use acp_bash::acp::client::{AcpClient, ClientProfile};

use acp_bash::driver::commands::{CommandHost, SlashCommand};
use acp_bash::driver::model::{ApiKey, ModelConfig, ModelDriver, Provider, RetryPolicy};
use acp_bash::driver::{Prompt, StopReason, TurnError, Usage};
use acp_bash::exec::{Engine, EngineConfig, Session};
use acp_bash::jobs::{Job, JobLimits, JobRegistry, StartError};
use acp_bash::sandbox::Mode;
use acp_bash::store::{SessionLog, SessionRecord};
use acp_bash::tool::{run_bash, BashCall, BashResult};
use acp_bash::turn::{run_turn, Turn, TurnPort};
use acp_bash::CancellationToken;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::mpsc;

/// The key the tests use: it must never show up anywhere but the request's header.
pub const KEY: &str = "sk-test-6f1c0ffee-SECRET";

/// One event of a turn, as the port saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Message(String),
    Thought(String),
    Usage(u64, u64),
    /// The tokens a usage read from the prompt cache and wrote to it (after its `Usage`).
    Cached(u64, u64),
    Call(String),
    CallEnd(String),
    Command(String),
}

struct Port {
    session: Session,
    jobs: JobRegistry,
    events: Mutex<Vec<Event>>,
    tx: mpsc::UnboundedSender<Event>,
}

impl Port {
    fn push(&self, event: Event) {
        self.events.lock().unwrap().push(event.clone());
        let _ = self.tx.send(event);
    }
}

impl TurnPort for Port {
    fn message(&self, text: &str) {
        self.push(Event::Message(text.to_string()));
    }

    fn thought(&self, text: &str) {
        self.push(Event::Thought(text.to_string()));
    }

    fn usage(&self, usage: &Usage) {
        self.push(Event::Usage(usage.used, usage.size));
        if let Some((read, written)) = usage.cached {
            self.push(Event::Cached(read, written));
        }
    }

    fn title(&self, _title: &str) {}

    fn run_call<'a>(
        &'a self,
        _call_id: &'a str,
        call: &'a BashCall,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, BashResult> {
        async move {
            self.push(Event::Call(call.command().to_string()));
            let result = run_bash(&self.session, call, &mut |_| {}, cancel).await;
            self.push(Event::CallEnd(result.text.clone()));
            result
        }
        .boxed()
    }

    fn run_command(&self, command: SlashCommand) -> BoxFuture<'_, String> {
        async move {
            let shown = format!("{command:?}");
            // The real command, on a host without cards (a job's end is shown when it ends).
            let answer = command.run(self).await;
            self.push(Event::Command(shown));
            answer
        }
        .boxed()
    }
}

impl CommandHost for Port {
    fn jobs(&self) -> &JobRegistry {
        &self.jobs
    }

    fn start_job(&self, script: String) -> BoxFuture<'_, Result<Job, StartError>> {
        async move { Ok(self.jobs.start(&self.session, script).await?.0) }.boxed()
    }

    fn shows_jobs_live(&self) -> bool {
        false
    }

    fn job_shown_ended<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, ()> {
        async move {
            job.wait().await;
        }
        .boxed()
    }
}

/// A session (real engine, `full` mode, its own temp dir) and its turn's plumbing.
pub struct Host {
    pub dir: tempfile::TempDir,
    port: Arc<Port>,
    log: SessionLog,
    rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Event>>,
}

impl Host {
    /// A host whose commands start from `vars` (scrubbed by the standard policy).
    pub fn with_env(vars: Vec<(String, String)>) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::with_environment(
            EngineConfig::default().sandbox_mode(Mode::Full),
            vars.into_iter().map(|(n, v)| (n.into(), v.into())),
        );
        let session = engine.session(dir.path()).unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let port = Arc::new(Port {
            session,
            jobs: JobRegistry::new(JobLimits::default()),
            events: Mutex::new(Vec::new()),
            tx,
        });
        let record = SessionRecord::new("s1", dir.path().to_path_buf(), "full", 1);
        Host {
            dir,
            port,
            log: SessionLog::new(None, record),
            rx: tokio::sync::Mutex::new(rx),
        }
    }

    /// A host with this process's PATH only.
    pub fn new() -> Host {
        Host::with_env(vec![(
            "PATH".into(),
            std::env::var("PATH").unwrap_or_default(),
        )])
    }

    /// Runs one turn of `prompt` with `driver`.
    pub async fn turn(
        &self,
        driver: &ModelDriver,
        prompt: &Prompt,
    ) -> Result<StopReason, TurnError> {
        self.turn_with(driver, prompt, CancellationToken::new())
            .await
    }

    /// [`Host::turn`] with the session's choice of model and reasoning level.
    pub async fn turn_choosing(
        &self,
        driver: &ModelDriver,
        prompt: &Prompt,
        model: Option<&str>,
        level: Option<&str>,
    ) -> Result<StopReason, TurnError> {
        self.turn_full(
            driver,
            prompt,
            CancellationToken::new(),
            model.map(str::to_string),
            level.map(str::to_string),
        )
        .await
    }

    /// [`Host::turn`] with the turn's cancel token.
    pub async fn turn_with(
        &self,
        driver: &ModelDriver,
        prompt: &Prompt,
        cancel: CancellationToken,
    ) -> Result<StopReason, TurnError> {
        self.turn_full(driver, prompt, cancel, None, None).await
    }

    async fn turn_full(
        &self,
        driver: &ModelDriver,
        prompt: &Prompt,
        cancel: CancellationToken,
        model: Option<String>,
        level: Option<String>,
    ) -> Result<StopReason, TurnError> {
        let ids = std::sync::atomic::AtomicU64::new(0);
        let new_id = move || {
            format!(
                "call-{}",
                ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )
        };
        let turn = Turn::new(
            &*self.port,
            &self.port.session,
            "s1",
            &self.port.jobs,
            &self.log,
            cancel,
            &new_id,
            prompt.text(),
        )
        .model(model)
        .thought_level(level);
        let ended = tokio::time::timeout(
            crate::support::engine::hang_guard(),
            run_turn(driver, prompt, turn),
        );
        ended.await.expect("the turn hung")
    }

    /// Every event so far, and forgets them.
    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut *self.port.events.lock().unwrap())
    }

    /// Waits for the next event that `pick` accepts.
    pub async fn wait_for(&self, pick: impl Fn(&Event) -> bool) -> Event {
        let mut rx = self.rx.lock().await;
        loop {
            let event = rx.recv().await.expect("the port closed");
            if pick(&event) {
                return event;
            }
        }
    }

    /// The session's jobs.
    pub fn jobs(&self) -> &JobRegistry {
        &self.port.jobs
    }
}

/// The text of the agent's messages, joined.
pub fn said(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Message(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// A driver of `provider` at `base` with the test key and fast retries.
pub fn driver(provider: Provider, base: &str) -> ModelDriver {
    ModelDriver::new(config(provider, base))
}

/// The configuration [`driver`] uses.
pub fn config(provider: Provider, base: &str) -> ModelConfig {
    let base = match provider {
        Provider::OpenAi => format!("{base}/v1"),
        _ => base.to_string(),
    };
    let env = provider.key_env();
    let mut config = ModelConfig::new(
        provider,
        "fake-model",
        base,
        Some(ApiKey::new(KEY, env)),
        env,
    );
    let mut retry = RetryPolicy::default();
    retry.base_delay = std::time::Duration::from_millis(1);
    retry.max_delay = std::time::Duration::from_millis(5);
    config.retry = retry;
    config
}

/// A text prompt.
pub fn prompt(text: &str) -> Prompt {
    Prompt::text_only(text)
}

/// The built binary serving ACP (`serve`, full mode, no history, debug log) with
/// `--model MODEL`, the test key in both providers' variables, plus `args` and `env`.
pub fn served(model: &str, args: &[&str], env: &[(&str, &str)]) -> AcpClient {
    let mut all = vec![
        "serve",
        "--sandbox",
        "full",
        "--no-history",
        "--log-level",
        "acp_bash=debug",
        "--model",
        model,
    ];
    all.extend_from_slice(args);
    let mut client = AcpClient::new(crate::support::acp::binary(), all)
        .profile(ClientProfile::Zed)
        .env("XDG_CONFIG_HOME", "/nonexistent/acp-bash-tests")
        .env("OPENAI_API_KEY", KEY)
        .env("ANTHROPIC_API_KEY", KEY);
    for (name, value) in env {
        client = client.env(*name, *value);
    }
    client
}
