//! A complete ACP agent that embeds acp-bash: a scripted "model" makes bash tool calls, and the
//! library runs each one in the sandbox and shows it (a live terminal card in Zed, a console
//! block elsewhere). Run it as an editor's agent: `cargo run --example embed_agent`.
//!
//! The "model": for each prompt it calls the bash tool with the prompt as the command, then
//! once more to count the lines it printed, reading the tool's result text each time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use acp_bash::acp::sdk::v1::schema::{
    AgentCapabilities, ContentBlock, ContentChunk, InitializeRequest, InitializeResponse,
    NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse, SessionId, SessionUpdate,
    StopReason, ToolCallId,
};
use acp_bash::acp::sdk::{on_receive_request, Agent};
use acp_bash::acp::{
    prompt_text, AgentStdio, ConnectionSink, SandboxModes, ToolCallRunner, UpdateSink,
};
use acp_bash::exec::{Engine, EngineConfig, Session};
use acp_bash::present::model::{model_result, DEFAULT_MODEL_BUDGET};
use acp_bash::tool::BashArgs;
use acp_bash::CancellationToken;

/// The scripted model: the tool calls it makes (as a real model would, JSON arguments) after
/// reading the user's prompt and the results so far; `None` when it is done.
fn model(prompt: &str, results: &[String]) -> Option<String> {
    match results {
        [] => Some(
            serde_json::json!({ "command": prompt, "description": "What you asked" }).to_string(),
        ),
        [first] => {
            let lines = first.lines().count().saturating_sub(1); // the last line is the status
            Some(format!(
                r#"{{"command": "echo the first call printed {lines} lines"}}"#
            ))
        }
        _ => None,
    }
}

#[derive(Default)]
struct State {
    runner: Mutex<ToolCallRunner>,
    sessions: Mutex<HashMap<SessionId, Session>>,
    calls: Mutex<u64>,
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
                *on_init.runner.lock().unwrap() = ToolCallRunner::new(
                    ClientFeatures::from_capabilities(&request.client_capabilities),
                );
                responder.respond(
                    InitializeResponse::new(request.protocol_version)
                        .agent_capabilities(AgentCapabilities::new()),
                )
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, _cx| {
                let session = engine
                    .session(&request.cwd)
                    .map_err(|e| acp_bash::acp::sdk::Error::invalid_params().data(e.to_string()))?;
                let id = SessionId::new(format!("s{}", on_new.sessions.lock().unwrap().len() + 1));
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
                    return responder
                        .respond_with_error(acp_bash::acp::sdk::Error::invalid_params());
                };
                // Never await a turn in the handler: run it as a connection task.
                cx.clone().spawn(async move {
                    let mut sink = ConnectionSink::new(cx, request.session_id.clone());
                    let runner = *state.runner.lock().unwrap();
                    let prompt = prompt_text(&request.prompt);
                    let mut results = Vec::new();
                    while let Some(arguments) = model(&prompt, &results) {
                        let call = match BashArgs::from_json(&arguments) {
                            Ok(args) => args.into_call(),
                            Err(error) => {
                                results.push(error.to_string());
                                continue;
                            }
                        };
                        let id = ToolCallId::new(format!("call-{}", {
                            let mut n = state.calls.lock().unwrap();
                            *n += 1;
                            *n
                        }));
                        let result = runner
                            .run(&session, &id, &call, &mut sink, &CancellationToken::new())
                            .await;
                        results.push(model_result(&result.outcome, DEFAULT_MODEL_BUDGET));
                    }
                    let answer = format!(
                        "Done: {}",
                        results.last().and_then(|r| r.lines().last()).unwrap_or("")
                    );
                    sink.send(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                        ContentBlock::from(answer),
                    )));
                    responder.respond(PromptResponse::new(StopReason::EndTurn))
                })
            },
            on_receive_request!(),
        )
        .connect_to(AgentStdio::new())
        .await
}

use acp_bash::acp::bridge::ClientFeatures;
