//! The driver seam through the agent: a driver other than the shell's (a scripted "model")
//! makes a turn of many calls with text between them, reads each call's result, reports usage
//! and chooses the stop reason; cancel stops it; a driver that needs a key makes the prompt
//! fail with `auth_required`. The agent is served in this process (it is the only way to give
//! it another driver) over a real socket pair, with the product's line transport.

use std::sync::{Arc, Mutex};

use acp_bash::acp::client::{AcpClient, ClientProfile};
use acp_bash::acp::{AcpBashAgent, LineTransport, TransportLimits};
use acp_bash::driver::{AuthMethod, Driver, Prompt, StopReason, TurnError, TurnHost, Usage};
use acp_bash::exec::{Engine, EngineConfig};
use acp_bash::sandbox::Mode;
use acp_bash::store::Store;
use acp_bash::tool::BashCall;
use agent_client_protocol::v1::schema::{SessionUpdate, StopReason as AcpStop, ToolCallStatus};
use agent_client_protocol::ByteStreams;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::support::acp::{guard, temp_dir, wait_for_file};

/// Serves `driver` in this process and runs `conversation` against it as `profile`.
pub(crate) async fn with_driver<R>(
    driver: Arc<dyn Driver>,
    profile: ClientProfile,
    conversation: impl AsyncFnOnce(
        acp_bash::acp::client::Conversation,
    ) -> agent_client_protocol::Result<R>,
) -> R {
    with_driver_and_store(driver, None, profile, conversation).await
}

/// Like [`with_driver`], keeping the sessions in `store` when given.
async fn with_driver_and_store<R>(
    driver: Arc<dyn Driver>,
    store: Option<Store>,
    profile: ClientProfile,
    conversation: impl AsyncFnOnce(
        acp_bash::acp::client::Conversation,
    ) -> agent_client_protocol::Result<R>,
) -> R {
    let (agent_end, client_end) = tokio::net::UnixStream::pair().expect("a socket pair");
    let (read, write) = agent_end.into_split();
    let transport = LineTransport::new(read, write, TransportLimits::default());
    let engine = Engine::new(EngineConfig::default().sandbox_mode(Mode::Full));
    let mut agent = AcpBashAgent::new(engine)
        .with_client_behind(transport.client_behind())
        .with_driver(driver);
    if let Some(store) = store {
        agent = agent.with_session_store(store);
    }
    let serving = tokio::spawn(agent.serve(transport));
    let (read, write) = client_end.into_split();
    let client = ByteStreams::new(write.compat_write(), read.compat());
    let result = guard(
        "a driver's conversation",
        AcpClient::new("unused", Vec::<String>::new())
            .profile(profile)
            .run_over(client, conversation),
    )
    .await
    .expect("the conversation");
    guard("the agent's end", serving)
        .await
        .expect("the agent's task")
        .expect("the agent ends cleanly at EOF");
    result
}

/// A scripted model: says what it does, runs two calls (the second depends on the first's
/// result and on the `cd` the first made), reports usage, answers, and stops because it may make
/// no more requests.
struct Scripted {
    /// What the driver read back from its calls.
    read: Mutex<Vec<String>>,
}

impl Driver for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn drive<'a>(
        &'a self,
        prompt: &'a Prompt,
        turn: &'a mut dyn TurnHost,
    ) -> BoxFuture<'a, Result<StopReason, TurnError>> {
        async move {
            turn.say("Looking at ");
            turn.say(&prompt.text());
            turn.think("first make a directory");
            let first = turn
                .run_bash(BashCall::new("mkdir -p sub && cd sub && echo one").description("Step 1"))
                .await;
            turn.say("Now where am I?");
            let second = turn.run_bash(BashCall::new("pwd")).await;
            self.read
                .lock()
                .unwrap()
                .extend([first.text.clone(), second.text.clone()]);
            turn.usage(Usage::new(120, 1000).cost(0.5, "USD"));
            turn.say(&format!("I am in {}", second.outcome.output.trim()));
            Ok(StopReason::MaxTurnRequests)
        }
        .boxed()
    }
}

fn kind(update: &SessionUpdate) -> &'static str {
    match update {
        SessionUpdate::AgentMessageChunk(_) => "message",
        SessionUpdate::AgentThoughtChunk(_) => "thought",
        SessionUpdate::ToolCall(_) => "tool_call",
        SessionUpdate::ToolCallUpdate(update) if update.fields.status.is_some() => "final",
        SessionUpdate::ToolCallUpdate(_) => "live",
        SessionUpdate::UsageUpdate(_) => "usage",
        SessionUpdate::SessionInfoUpdate(_) => "title",
        _ => "other",
    }
}

fn message_text(update: &SessionUpdate) -> Option<String> {
    match update {
        SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
            agent_client_protocol::v1::schema::ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        },
        _ => None,
    }
}

async fn many_calls_for(profile: ClientProfile) {
    let driver = Arc::new(Scripted {
        read: Mutex::new(Vec::new()),
    });
    let (_temp, dir) = temp_dir();
    let turn = with_driver(driver.clone(), profile, async |mut conversation| {
        let session = conversation.new_session(&dir).await?;
        conversation.prompt(&session, "the tree").await
    })
    .await;
    assert_eq!(turn.stop_reason, AcpStop::MaxTurnRequests);
    let kinds: Vec<&str> = turn
        .updates
        .iter()
        .map(kind)
        .filter(|kind| *kind != "live")
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "message",
            "thought",
            "tool_call",
            "final",
            "title",
            "message",
            "tool_call",
            "final",
            "usage",
            "message"
        ],
        "{:#?}",
        turn.updates
    );
    let ids: Vec<String> = turn
        .updates
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::ToolCall(call) => Some(call.tool_call_id.0.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "each call has its own id");
    let finals: Vec<ToolCallStatus> = turn
        .updates
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::ToolCallUpdate(update) => update.fields.status,
            _ => None,
        })
        .collect();
    assert_eq!(
        finals,
        [ToolCallStatus::Completed, ToolCallStatus::Completed]
    );
    let read = driver.read.lock().unwrap().clone();
    assert!(read[0].starts_with("one\n"), "{read:?}");
    let sub = dir.join("sub").canonicalize().unwrap();
    assert!(
        read[1].starts_with(&format!("{}\n", sub.display())),
        "the second call starts where the first `cd` left: {read:?}"
    );
    let last = turn.updates.last().and_then(message_text).unwrap();
    assert_eq!(last, format!("I am in {}", sub.display()));
    let first = message_text(&turn.updates[0]).unwrap();
    assert_eq!(first, "Looking at ");
}

#[tokio::test]
async fn a_driver_turn_holds_many_calls_with_text_between_for_a_card_client() {
    many_calls_for(ClientProfile::Zed).await;
}

#[tokio::test]
async fn a_driver_turn_holds_many_calls_with_text_between_for_a_plain_client() {
    many_calls_for(ClientProfile::Plain).await;
}

/// Runs one long call, then reports what it read back.
struct Sleeper {
    marker: std::path::PathBuf,
    read: Mutex<Option<(bool, bool)>>,
}

impl Driver for Sleeper {
    fn name(&self) -> &str {
        "sleeper"
    }

    fn drive<'a>(
        &'a self,
        _prompt: &'a Prompt,
        turn: &'a mut dyn TurnHost,
    ) -> BoxFuture<'a, Result<StopReason, TurnError>> {
        async move {
            let script = format!("touch {} && sleep 60", self.marker.display());
            let result = turn.run_bash(BashCall::new(script)).await;
            *self.read.lock().unwrap() = Some((
                result.outcome.status.cancelled,
                turn.cancellation().is_cancelled(),
            ));
            // A driver that ignores the cancel still ends `cancelled` on the wire.
            Ok(StopReason::EndTurn)
        }
        .boxed()
    }
}

#[tokio::test]
async fn cancel_stops_a_driver_turn_and_its_call() {
    let (_temp, dir) = temp_dir();
    let marker = dir.join("started");
    let driver = Arc::new(Sleeper {
        marker: marker.clone(),
        read: Mutex::new(None),
    });
    let stop = with_driver(
        driver.clone(),
        ClientProfile::Zed,
        async |mut conversation| {
            let session = conversation.new_session(&dir).await?;
            let answer = conversation.start_prompt(&session, "go").block_task();
            wait_for_file(&marker).await;
            conversation.cancel(&session)?;
            Ok(answer.await?.stop_reason)
        },
    )
    .await;
    assert_eq!(stop, AcpStop::Cancelled);
    assert_eq!(
        *driver.read.lock().unwrap(),
        Some((true, true)),
        "the call was killed and the driver saw the turn's token cancelled"
    );
}

/// Needs a key it does not have.
struct Locked;

impl Driver for Locked {
    fn name(&self) -> &str {
        "locked"
    }

    fn drive<'a>(
        &'a self,
        _prompt: &'a Prompt,
        _turn: &'a mut dyn TurnHost,
    ) -> BoxFuture<'a, Result<StopReason, TurnError>> {
        async { Err(TurnError::AuthRequired("set EXAMPLE_API_KEY".into())) }.boxed()
    }

    fn auth_methods(&self) -> Vec<AuthMethod> {
        vec![AuthMethod::new("example-login", "Log in")
            .description("stores a key")
            .terminal(vec!["login".into()])]
    }
}

#[tokio::test]
async fn a_driver_without_its_key_advertises_auth_and_the_prompt_says_auth_required() {
    let (_temp, dir) = temp_dir();
    let (methods, error) = with_driver(
        Arc::new(Locked),
        ClientProfile::Zed,
        async |mut conversation| {
            let methods =
                serde_json::to_value(&conversation.init.auth_methods).expect("serializable");
            let session = conversation.new_session(&dir).await?;
            let error = conversation.prompt(&session, "hello").await.unwrap_err();
            Ok((methods, error))
        },
    )
    .await;
    assert_eq!(
        methods,
        serde_json::json!([{
            "type": "terminal", "id": "example-login", "name": "Log in",
            "description": "stores a key", "args": ["login"]
        }])
    );
    assert_eq!(error.code, agent_client_protocol::ErrorCode::AUTH_REQUIRED);
    assert_eq!(error.data, Some(serde_json::json!("set EXAMPLE_API_KEY")));
}

/// The store keeps the turn (the prompt once, the agent's text, both calls with their ends), and
/// a later agent replays it in that order: the prompt once, then the text and calls as they came.
async fn replayed_for(profile: ClientProfile) {
    let (_temp, dir) = temp_dir();
    let (_state, state_dir) = temp_dir();
    let driver = || {
        Arc::new(Scripted {
            read: Mutex::new(Vec::new()),
        })
    };
    let session = with_driver_and_store(
        driver(),
        Some(Store::new(&state_dir)),
        profile,
        async |mut conversation| {
            let session = conversation.new_session(&dir).await?;
            conversation.prompt(&session, "the tree").await?;
            Ok(session)
        },
    )
    .await;
    let replayed = with_driver_and_store(
        driver(),
        Some(Store::new(&state_dir)),
        profile,
        async |mut conversation| Ok(conversation.load_session(&session, &dir).await?.1),
    )
    .await;
    let sub = dir.join("sub").canonicalize().unwrap();
    let shown: Vec<String> = replayed
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::UserMessageChunk(chunk) => {
                Some(format!("user: {}", text_of(&chunk.content)))
            }
            SessionUpdate::AgentMessageChunk(_) => {
                message_text(update).map(|t| format!("agent: {t}"))
            }
            SessionUpdate::ToolCall(call) => Some(format!("call: {}", call.title)),
            SessionUpdate::ToolCallUpdate(update) => update
                .fields
                .status
                .map(|status| format!("end: {status:?}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        shown,
        [
            "user: the tree".to_string(),
            "agent: Looking at the tree".into(),
            "call: mkdir -p sub && cd sub && echo one".into(),
            "end: Completed".into(),
            "agent: Now where am I?".into(),
            "call: pwd".into(),
            "end: Completed".into(),
            format!("agent: I am in {}", sub.display()),
        ],
        "{replayed:#?}"
    );
}

fn text_of(content: &agent_client_protocol::v1::schema::ContentBlock) -> String {
    match content {
        agent_client_protocol::v1::schema::ContentBlock::Text(text) => text.text.clone(),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn a_driver_turn_is_recorded_and_replayed_in_order_for_a_card_client() {
    replayed_for(ClientProfile::Zed).await;
}

#[tokio::test]
async fn a_driver_turn_is_recorded_and_replayed_in_order_for_a_plain_client() {
    replayed_for(ClientProfile::Plain).await;
}

/// `session/close` frees what the model driver kept of the session: its conversation.
#[tokio::test]
async fn a_closed_session_frees_its_model_conversation() {
    use acp_bash::driver::model::{ApiKey, ModelConfig, ModelDriver, Provider};
    use agent_client_protocol::v1::schema::CloseSessionRequest;
    let fake = crate::support::fake_model::FakeModel::start(vec![
        crate::support::fake_model::openai::reply(&["hi"], &[]),
    ])
    .await;
    let config = ModelConfig::new(
        Provider::OpenAi,
        "fake",
        format!("{}/v1", fake.base),
        Some(ApiKey::new("sk-close-test", "OPENAI_API_KEY")),
        "OPENAI_API_KEY",
    );
    let driver = Arc::new(ModelDriver::new(config));
    let (_tmp, dir) = temp_dir();
    let seen = driver.clone();
    let (id, before) = with_driver(driver.clone(), ClientProfile::Zed, async |mut c| {
        let session = c.new_session(&dir).await?;
        c.prompt(&session, "hello").await?;
        let before = seen.conversation(&session.0).len();
        c.connection()
            .send_request(CloseSessionRequest::new(session.clone()))
            .block_task()
            .await?;
        Ok((session, before))
    })
    .await;
    assert_eq!(before, 2, "the prompt and the answer");
    assert!(driver.conversation(&id.0).is_empty());
}
