//! A complete ACP agent that embeds acp-bash: a scripted "model" makes bash tool calls, and the
//! library runs each one in the sandbox and shows it (a live terminal card in Zed, a console
//! block elsewhere). Run it as an editor's agent: `cargo run --example embed_agent`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use acp_bash::acp::sdk::v1::schema::{
    ContentChunk, InitializeRequest, InitializeResponse, NewSessionRequest, NewSessionResponse,
    PromptRequest, PromptResponse, SessionId, SessionUpdate, StopReason, ToolCallId,
};
use acp_bash::acp::sdk::{on_receive_request, Agent, Error};
use acp_bash::acp::UpdateSink;
use acp_bash::acp::{prompt_text, AgentStdio, ConnectionSink, SandboxModes, ToolCallRunner};
use acp_bash::exec::{Engine, EngineConfig, Session};
use acp_bash::CancellationToken;

/// The scripted model: given the prompt and the tool results so far, its next tool call (JSON
/// arguments, as a real model gives them), or `None` when it is done.
fn model(prompt: &str, results: &[String]) -> Option<String> {
    let command = match results {
        [] => prompt.to_string(),
        [first] => {
            let lines = first.lines().count() - 1; // the model reads the output, then the status
            format!("echo the first call printed {lines} lines")
        }
        _ => return None,
    };
    Some(serde_json::json!({ "command": command, "description": "Scripted" }).to_string())
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
        let id = ToolCallId::new(format!("call-{}", state.ids.fetch_add(1, Relaxed)));
        let result = runner.run_model_call(session, &id, &arguments, sink, &cancel);
        results.push(result.await); // the output for the model, or what is wrong with its call
    }
    let status = results.last().and_then(|r| r.lines().last());
    format!("Done: {}", status.unwrap_or_default())
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
                *on_init.runner.lock().unwrap() =
                    ToolCallRunner::for_client(&request.client_capabilities);
                responder.respond(InitializeResponse::new(request.protocol_version))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, _cx| {
                let session = engine.session(&request.cwd)?; // an error response otherwise
                let id = SessionId::new(format!("s{}", on_new.ids.fetch_add(1, Relaxed)));
                let modes = SandboxModes::new(false).state(session.mode());
                on_new.sessions.lock().unwrap().insert(id.clone(), session);
                responder.respond(NewSessionResponse::new(id).modes(modes))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                let (state, id) = (on_prompt.clone(), request.session_id.clone());
                let session = state.sessions.lock().unwrap().get(&id).cloned();
                let session =
                    session.ok_or_else(|| Error::invalid_params().data("no such session"))?;
                // Never await a turn in a handler (SDK rule): run it as a connection task.
                cx.clone().spawn(async move {
                    let mut sink = ConnectionSink::new(cx, id);
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
