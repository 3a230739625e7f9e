//! The wire checker used by the ACP tests (`support::schema`) accepts what the ACP v1 schema
//! allows and refuses the rest with a message that says what is wrong.

use crate::support::schema::{schema, validate_wire_line, Direction, WireValidator};
use serde_json::json;

use Direction::{AgentToClient, ClientToAgent};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true,"_meta":{"terminal_output":true}},"clientInfo":{"name":"zed","version":"0.200.0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"agentInfo":{"name":"acp-bash","version":"0.1.0"}}}"#;
const NEW_SESSION: &str = r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/home/me/proj","mcpServers":[]}}"#;
const SESSION_CREATED: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#;
const PROMPT: &str = r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"echo hi"}]}}"#;
const TOOL_CALL: &str = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"echo hi","kind":"execute","status":"in_progress","content":[{"type":"terminal","terminalId":"call_1"}],"_meta":{"terminal_info":{"terminal_id":"call_1","cwd":"/home/me/proj"}}}}}"#;
const TOOL_CALL_DONE: &str = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"completed","_meta":{"terminal_output":{"terminal_id":"call_1","data":"hi\n"},"terminal_exit":{"terminal_id":"call_1","exit_code":0,"signal":null}}}}}"#;
const PROMPT_DONE: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#;

fn refusal(direction: Direction, line: &str) -> String {
    let mut wire = WireValidator::default();
    match wire.check(direction, line) {
        Ok(()) => panic!("accepted {line}"),
        Err(message) => message,
    }
}

#[test]
fn the_method_table_comes_from_the_schema() {
    for (method, params, result) in [
        (
            "initialize",
            "InitializeRequest",
            Some("InitializeResponse"),
        ),
        (
            "session/new",
            "NewSessionRequest",
            Some("NewSessionResponse"),
        ),
        ("session/prompt", "PromptRequest", Some("PromptResponse")),
        (
            "session/set_mode",
            "SetSessionModeRequest",
            Some("SetSessionModeResponse"),
        ),
        ("session/cancel", "CancelNotification", None),
        ("session/update", "SessionNotification", None),
    ] {
        let types = schema()
            .method(method)
            .unwrap_or_else(|| panic!("{method} is not in the schema"));
        assert_eq!(
            (types.params.as_str(), types.result.as_deref()),
            (params, result),
            "{method}"
        );
    }
    assert_eq!(
        schema().method("session/update").unwrap().direction,
        Some(AgentToClient)
    );
    assert_eq!(
        schema().method("session/prompt").unwrap().direction,
        Some(ClientToAgent)
    );
}

#[test]
fn a_whole_prompt_turn_on_the_card_path_is_valid() {
    let mut wire = WireValidator::default();
    for (direction, line) in [
        (ClientToAgent, INITIALIZE),
        (AgentToClient, INITIALIZED),
        (ClientToAgent, NEW_SESSION),
        (AgentToClient, SESSION_CREATED),
        (ClientToAgent, PROMPT),
        (AgentToClient, TOOL_CALL),
        (AgentToClient, TOOL_CALL_DONE),
        (AgentToClient, PROMPT_DONE),
    ] {
        wire.check(direction, line)
            .unwrap_or_else(|error| panic!("{error}"));
    }
    assert_eq!(wire.unanswered(), vec![]);
}

#[test]
fn cancel_and_set_mode_are_valid() {
    let mut wire = WireValidator::default();
    let cancel = r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}"#;
    wire.check(ClientToAgent, cancel).unwrap();
    let set_mode = r#"{"jsonrpc":"2.0","id":"m","method":"session/set_mode","params":{"sessionId":"s1","modeId":"read-only"}}"#;
    wire.check(ClientToAgent, set_mode).unwrap();
    wire.check(AgentToClient, r#"{"jsonrpc":"2.0","id":"m","result":{}}"#)
        .unwrap();
}

#[test]
fn an_error_response_is_checked_against_the_error_type() {
    let mut wire = WireValidator::default();
    wire.check(ClientToAgent, NEW_SESSION).unwrap();
    let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"cwd must be an absolute path, got \"rel\""}}"#;
    wire.check(AgentToClient, error).unwrap();

    wire.check(ClientToAgent, NEW_SESSION).unwrap();
    let message = refusal_after(
        &mut wire,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":"bad"}}"#,
    );
    assert!(message.contains("not a valid Error"), "{message}");
}

fn refusal_after(wire: &mut WireValidator, line: &str) -> String {
    wire.check(AgentToClient, line).expect_err("accepted")
}

#[test]
fn a_result_is_checked_against_the_type_of_the_request_it_answers() {
    let mut wire = WireValidator::default();
    wire.check(ClientToAgent, PROMPT).unwrap();
    let message = refusal_after(
        &mut wire,
        r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"done"}}"#,
    );
    assert!(message.contains("result of session/prompt"), "{message}");
    assert!(message.contains("not a valid PromptResponse"), "{message}");

    let mut wire = WireValidator::default();
    wire.check(ClientToAgent, INITIALIZE).unwrap();
    let message = refusal_after(
        &mut wire,
        r#"{"jsonrpc":"2.0","id":0,"result":{"stopReason":"end_turn"}}"#,
    );
    assert!(
        message.contains("not a valid InitializeResponse"),
        "{message}"
    );
}

#[test]
fn a_response_needs_a_waiting_request() {
    let message = refusal(AgentToClient, PROMPT_DONE);
    assert!(
        message.contains("no request with that id is waiting"),
        "{message}"
    );

    // A request answered from the same side it was sent is not answered.
    let mut wire = WireValidator::default();
    wire.check(ClientToAgent, PROMPT).unwrap();
    let message = wire
        .check(ClientToAgent, PROMPT_DONE)
        .expect_err("accepted");
    assert!(
        message.contains("no request with that id is waiting"),
        "{message}"
    );
    assert_eq!(wire.unanswered().len(), 1);
}

#[test]
fn invalid_params_are_refused_with_where_and_why() {
    let message = refusal(
        ClientToAgent,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/x"}}"#,
    );
    assert!(message.contains("params of session/new"), "{message}");
    assert!(message.contains("mcpServers"), "{message}");
}

#[test]
fn a_bad_session_update_names_its_variant_and_the_problem() {
    // `status: "done"` is not a ToolCallStatus.
    let line = TOOL_CALL_DONE.replace("\"completed\"", "\"done\"");
    let message = refusal(AgentToClient, &line);
    assert!(
        message.contains("as a \"tool_call_update\" update"),
        "{message}"
    );
    assert!(message.contains("/status"), "{message}");

    // A tool_call must have a title.
    let line = TOOL_CALL.replace(r#""title":"echo hi","#, "");
    let message = refusal(AgentToClient, &line);
    assert!(
        message.contains("\"title\" is a required property"),
        "{message}"
    );
}

#[test]
fn messages_going_the_wrong_way_are_refused() {
    let message = refusal(ClientToAgent, TOOL_CALL);
    assert!(
        message.contains("session/update travels AgentToClient"),
        "{message}"
    );
}

#[test]
fn requests_and_notifications_must_be_what_the_method_is() {
    let cancel_with_id =
        r#"{"jsonrpc":"2.0","id":5,"method":"session/cancel","params":{"sessionId":"s1"}}"#;
    assert!(refusal(ClientToAgent, cancel_with_id).contains("is a notification but has an id"));
    let prompt_without_id = PROMPT.replace(r#""id":2,"#, "");
    assert!(refusal(ClientToAgent, &prompt_without_id).contains("is a request but has no id"));
}

#[test]
fn the_envelope_is_json_rpc_2() {
    assert!(refusal(ClientToAgent, "not json").contains("not JSON"));
    assert!(refusal(ClientToAgent, r#"{"id":1,"method":"initialize"}"#)
        .contains("\"jsonrpc\" must be \"2.0\""));
    assert!(
        refusal(ClientToAgent, r#"{"jsonrpc":"2.0","method":"nope"}"#)
            .contains("not an ACP method")
    );
    assert!(refusal(
        AgentToClient,
        r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#
    )
    .contains("both \"result\" and \"error\""));
    assert!(refusal(
        ClientToAgent,
        r#"{"jsonrpc":"2.0","id":[1],"method":"initialize"}"#
    )
    .contains("not a string, an integer or null"));
}

#[test]
fn reusing_an_id_in_flight_is_refused() {
    let mut wire = WireValidator::default();
    wire.check(ClientToAgent, PROMPT).unwrap();
    let message = wire.check(ClientToAgent, PROMPT).expect_err("accepted");
    assert!(message.contains("already in use"), "{message}");
}

#[test]
fn extension_methods_pass_with_the_envelope_checked() {
    let mut wire = WireValidator::default();
    wire.check(
        AgentToClient,
        r#"{"jsonrpc":"2.0","method":"_acp_bash/notice","params":{"x":1}}"#,
    )
    .unwrap();
}

#[test]
fn validate_wire_line_checks_single_messages_without_context() {
    for line in [
        INITIALIZE,
        NEW_SESSION,
        PROMPT,
        TOOL_CALL,
        TOOL_CALL_DONE,
        PROMPT_DONE,
    ] {
        let json: serde_json::Value = serde_json::from_str(line).unwrap();
        validate_wire_line(&json).unwrap_or_else(|error| panic!("{line}: {error}"));
    }
    let bad_prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                            "params": {"sessionId": "s1", "prompt": "echo hi"}});
    let message = validate_wire_line(&bad_prompt).expect_err("accepted");
    assert!(message.contains("not a valid PromptRequest"), "{message}");
    let bad_error = json!({"jsonrpc": "2.0", "id": 3, "error": {"message": "no code"}});
    assert!(validate_wire_line(&bad_error).is_err());
}
