//! A complete ACP agent that embeds acp-bash: a scripted "model" makes bash tool calls, and the
//! library runs each one in the sandbox and shows it (a live terminal card in Zed, a console
//! block elsewhere). Run it as an editor's agent: `cargo run --example embed_agent`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use acp_bash::acp::bridge::ClientFeatures;
use acp_bash::acp::sdk::v1::schema::{
    ContentChunk, InitializeRequest, InitializeResponse, NewSessionRequest, NewSessionResponse,
    PromptRequest, PromptResponse, SessionId, SessionUpdate, StopReason, ToolCallId,
};
use acp_bash::acp::sdk::{on_receive_request, Agent, Error};
use acp_bash::acp::UpdateSink;
use acp_bash::acp::{prompt_text, AgentStdio, ConnectionSink, SandboxModes, ToolCallRunner};
use acp_bash::exec::{Engine, EngineConfig, Session};
use acp_bash::present::model::{model_result, DEFAULT_MODEL_BUDGET};
use acp_bash::{tool::BashArgs, CancellationToken};

/// The scripted model: given the prompt and the tool results so far, its next tool call (JSON
/// arguments, as a real model gives them), or `None` when it is done.
fn model(prompt: &str, results: &[String]) -> Option<String> {
    let call = match results {
        [] => serde_json::json!({ "command": prompt, "description": "Your command" }),
        [first] => {
            let lines = first.lines().count() - 1; // the last line is the status
            serde_json::json!({ "command": format!("echo the first call printed {lines} lines") })
        }
        _ => return None,
    };
    Some(call.to_string())
}

#[derive(Default)]
struct State {
    runner: Mutex<ToolCallRunner>,
    sessions: Mutex<HashMap<SessionId, Session>>,
    ids: AtomicU64,
}

/// One turn: each of the model's tool calls runs through the library; returns the answer.
async fn turn(state: &State, session: &Session, prompt: &str, sink: &mut ConnectionSink) -> String {
    let runner = *state.runner.lock().unwrap();
    let cancel = CancellationToken::new(); // a real agent cancels it on `session/cancel`
    let mut results = Vec::new();
    while let Some(arguments) = model(prompt, &results) {
        results.push(match BashArgs::from_json(&arguments) {
            Ok(args) => {
                let id = ToolCallId::new(format!("call-{}", state.ids.fetch_add(1, Relaxed)));
                let result = runner
                    .run(session, &id, &args.into_call(), sink, &cancel)
                    .await;
                model_result(&result.outcome, DEFAULT_MODEL_BUDGET)
            }
            Err(error) => error.to_string(), // the model reads what to fix
        });
    }
    let status = results.last().and_then(|r| r.lines().last());
    format!("Done: {}", status.unwrap_or_default())
}

fn invalid(why: impl ToString) -> Error {
    Error::invalid_params().data(why.to_string())
}

#[tokio::main]
async fn main() -> acp_bash::acp::sdk::Result<()> {
    let engine = Engine::new(EngineConfig::default());
    let state = Arc::new(State::default());
    let (on_init, on_new, on_prompt) = (state.clone(), state.clone(), state);
    Agent
        .v1()
        .name("embed-agent")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                let features = ClientFeatures::from_capabilities(&request.client_capabilities);
                *on_init.runner.lock().unwrap() = ToolCallRunner::new(features);
                responder.respond(InitializeResponse::new(request.protocol_version))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, _cx| {
                let session = match engine.session(&request.cwd) {
                    Ok(session) => session,
                    Err(error) => return responder.respond_with_error(invalid(error)),
                };
                let id = SessionId::new(format!("s{}", on_new.ids.fetch_add(1, Relaxed)));
                let modes = SandboxModes::new(false).state(session.mode());
                on_new.sessions.lock().unwrap().insert(id.clone(), session);
                responder.respond(NewSessionResponse::new(id).modes(modes))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                let state = on_prompt.clone();
                let session = state
                    .sessions
                    .lock()
                    .unwrap()
                    .get(&request.session_id)
                    .cloned();
                let Some(session) = session else {
                    return responder.respond_with_error(invalid("unknown session"));
                };
                // Never await a turn in a handler (SDK rule): run it as a connection task.
                cx.clone().spawn(async move {
                    let mut sink = ConnectionSink::new(cx, request.session_id.clone());
                    let prompt = prompt_text(&request.prompt);
                    let answer = turn(&state, &session, &prompt, &mut sink).await;
                    let chunk = ContentChunk::new(answer.into());
                    sink.send(SessionUpdate::AgentMessageChunk(chunk));
                    responder.respond(PromptResponse::new(StopReason::EndTurn))
                })
            },
            on_receive_request!(),
        )
        .connect_to(AgentStdio::new())
        .await
}
