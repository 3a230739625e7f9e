//! The Zed replay used by the ACP tests (`support::zed_replay`) shows the card Zed would show,
//! following `shared/notes/zed-terminal-card.md`.

use crate::support::zed_replay::{ends_inside_escape, Card, ZedReplay};
use serde_json::{json, Value};

fn tool_call(id: &str) -> Value {
    json!({"sessionId": "s1", "update": {
        "sessionUpdate": "tool_call", "toolCallId": id, "title": "cargo test", "kind": "execute",
        "status": "in_progress",
        "content": [{"type": "content", "content": {"type": "text", "text": "Run the unit tests"}},
                    {"type": "terminal", "terminalId": id}],
        "_meta": {"terminal_info": {"terminal_id": id, "cwd": "/home/me/proj"}}}})
}

fn output(id: &str, data: &str) -> Value {
    json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
           "_meta": {"terminal_output": {"terminal_id": id, "data": data}}})
}

fn exit(id: &str, status: &str, exit_code: Value, signal: Value) -> Value {
    json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status,
           "_meta": {"terminal_exit": {"terminal_id": id, "exit_code": exit_code, "signal": signal}}})
}

fn replay(updates: &[Value]) -> ZedReplay {
    let mut zed = ZedReplay::default();
    for update in updates {
        zed.apply(update);
    }
    zed
}

fn card(zed: &ZedReplay, id: &str) -> Card {
    zed.card(id)
        .unwrap_or_else(|| panic!("no tool call {id}; problems: {:?}", zed.problems()))
}

#[test]
fn a_streamed_run_shows_a_card_with_all_its_output_and_its_exit() {
    let zed = replay(&[
        tool_call("call_7"),
        output("call_7", "running 12 tests\n"),
        output("call_7", "\u{1b}[32mok\u{1b}[0m\n"),
        exit("call_7", "completed", json!(0), Value::Null),
    ]);
    assert_eq!(
        card(&zed, "call_7"),
        Card {
            title: "cargo test".to_string(),
            cwd: Some("/home/me/proj".to_string()),
            output: "running 12 tests\n\u{1b}[32mok\u{1b}[0m\n".to_string(),
            status: "completed".to_string(),
            kind: Some("execute".to_string()),
            exit_code: Some(0),
            signal: None,
            exited: true,
            has_terminal_block: true,
            texts: vec!["Run the unit tests".to_string()],
        }
    );
    assert_eq!(zed.problems(), &[] as &[String]);
}

#[test]
fn the_last_output_status_and_exit_may_share_one_update() {
    let last = json!({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "failed",
        "_meta": {"terminal_output": {"terminal_id": "c", "data": "Killed\n"},
                  "terminal_exit": {"terminal_id": "c", "exit_code": null, "signal": "SIGKILL"}}});
    let zed = replay(&[tool_call("c"), last]);
    let card = card(&zed, "c");
    assert_eq!(card.output, "Killed\n");
    assert_eq!(
        (card.status.as_str(), card.exit_code, card.signal.as_deref()),
        ("failed", None, Some("SIGKILL"))
    );
    assert!(card.exited);
}

#[test]
fn output_and_exit_before_the_tool_call_are_replayed_when_it_arrives() {
    let zed = replay(&[
        output("early", "one\n"),
        exit("early", "completed", json!(0), Value::Null),
        tool_call("early"),
        output("early", "two\n"),
    ]);
    // The early update's status was for a tool call Zed did not know yet.
    assert_eq!(zed.problems().len(), 2, "{:?}", zed.problems());
    assert!(zed.problems()[0].contains("Tool call not found"));
    let card = card(&zed, "early");
    assert_eq!(card.output, "one\ntwo\n");
    assert_eq!(card.exit_code, Some(0));
}

#[test]
fn terminal_events_for_a_terminal_that_never_appears_show_nothing() {
    let mut zed = replay(&[tool_call("a")]);
    zed.apply(&json!({"sessionUpdate": "tool_call_update", "toolCallId": "a",
                      "_meta": {"terminal_output": {"terminal_id": "elsewhere", "data": "lost\n"}}}));
    assert_eq!(card(&zed, "a").output, "");
}

#[test]
fn an_update_with_content_replaces_the_content_and_removes_the_card() {
    let fenced = json!({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "```console\nhi\n[exit code: 0]\n```"}}]});
    let zed = replay(&[tool_call("c"), output("c", "hi\n"), fenced]);
    let card = card(&zed, "c");
    assert!(
        !card.has_terminal_block,
        "the terminal block was replaced away: {card:?}"
    );
    assert_eq!(
        card.texts,
        vec!["```console\nhi\n[exit code: 0]\n```".to_string()]
    );
}

#[test]
fn an_update_without_content_leaves_the_content_alone() {
    let zed = replay(&[
        tool_call("c"),
        exit("c", "completed", json!(0), Value::Null),
    ]);
    let card = card(&zed, "c");
    assert!(card.has_terminal_block);
    assert_eq!(card.texts, vec!["Run the unit tests".to_string()]);
}

#[test]
fn terminal_info_without_a_terminal_block_makes_no_card() {
    let mut call = tool_call("c");
    call["update"]["content"] = json!([]);
    let zed = replay(&[call, output("c", "hi\n")]);
    let card = card(&zed, "c");
    assert!(!card.has_terminal_block);
    assert_eq!((card.output.as_str(), card.cwd), ("", None));
    assert!(
        zed.problems()[0].contains("no terminal block"),
        "{:?}",
        zed.problems()
    );
}

#[test]
fn a_terminal_block_for_an_unknown_terminal_drops_the_tool_call() {
    let mut call = tool_call("c");
    call["update"]["_meta"] = json!({});
    let zed = replay(&[call]);
    assert_eq!(zed.card("c"), None);
    assert!(
        zed.problems()[0].contains("which Zed does not know"),
        "{:?}",
        zed.problems()
    );
}

#[test]
fn terminal_info_on_an_update_is_ignored() {
    let mut call = tool_call("c");
    call["update"]["_meta"] = json!({});
    call["update"]["content"] = json!([]);
    let late_info = json!({"sessionUpdate": "tool_call_update", "toolCallId": "c",
        "content": [{"type": "terminal", "terminalId": "c"}],
        "_meta": {"terminal_info": {"terminal_id": "c", "cwd": "/x"}}});
    let zed = replay(&[call, late_info]);
    assert!(!card(&zed, "c").has_terminal_block);
    assert!(
        zed.problems()
            .iter()
            .any(|p| p.contains("ignores terminal_info")),
        "{:?}",
        zed.problems()
    );
}

#[test]
fn a_tool_call_without_the_card_keeps_its_text_blocks() {
    let fallback = json!({"sessionUpdate": "tool_call", "toolCallId": "f", "title": "ls", "kind": "execute",
        "content": [{"type": "content", "content": {"type": "text", "text": "List files"}}]});
    let zed = replay(&[fallback]);
    let card = card(&zed, "f");
    assert_eq!(
        (card.status.as_str(), card.has_terminal_block),
        ("pending", false)
    );
    assert_eq!(card.texts, vec!["List files".to_string()]);
    assert_eq!(zed.problems(), &[] as &[String]);
}

#[test]
fn an_update_for_an_unknown_tool_call_is_a_failure() {
    let zed = replay(&[exit("ghost", "completed", json!(0), Value::Null)]);
    assert_eq!(zed.card("ghost"), None);
    assert!(zed.problems()[0].contains("Tool call not found"));
}

#[test]
fn a_reused_terminal_id_is_a_problem() {
    let zed = replay(&[tool_call("c"), tool_call("c")]);
    assert!(
        zed.problems()[0].contains("reuses terminal id c"),
        "{:?}",
        zed.problems()
    );
}

#[test]
fn an_exit_code_zed_cannot_read_is_a_problem() {
    let zed = replay(&[tool_call("c"), exit("c", "failed", json!(-1), Value::Null)]);
    assert!(
        zed.problems()[0].contains("not an unsigned"),
        "{:?}",
        zed.problems()
    );
    assert!(!card(&zed, "c").exited);
}

#[test]
fn output_split_inside_an_escape_sequence_is_a_problem() {
    let zed = replay(&[
        tool_call("c"),
        output("c", "\u{1b}[3"),
        output("c", "2mgreen\n"),
    ]);
    assert!(
        zed.problems()[0].contains("ends inside an escape sequence"),
        "{:?}",
        zed.problems()
    );
    assert_eq!(card(&zed, "c").output, "\u{1b}[32mgreen\n");
}

#[test]
fn delta_output_is_ignored_like_zed_does() {
    let delta = json!({"sessionUpdate": "tool_call_update", "toolCallId": "c",
        "_meta": {"terminal_output_delta": {"terminal_id": "c", "data": "x"}}});
    let zed = replay(&[tool_call("c"), delta]);
    assert_eq!(card(&zed, "c").output, "");
    assert!(zed.problems()[0].contains("terminal_output_delta"));
}

#[test]
fn other_session_updates_do_not_touch_tool_calls() {
    let chunk =
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}});
    let zed = replay(&[tool_call("c"), chunk]);
    assert_eq!(card(&zed, "c").output, "");
    assert_eq!(zed.problems(), &[] as &[String]);
}

#[test]
fn escape_sequence_boundaries() {
    for complete in [
        "",
        "plain",
        "\u{1b}[0m",
        "a\u{1b}[1;31mb",
        "\u{1b}]0;t\u{7}",
        "\u{1b}]8;;u\u{1b}\\",
        "\u{1b}(B",
        "\u{1b}7",
    ] {
        assert!(!ends_inside_escape(complete), "{complete:?}");
    }
    for cut in [
        "\u{1b}",
        "a\u{1b}[",
        "\u{1b}[1;3",
        "\u{1b}]0;title",
        "\u{1b}(",
        "\u{1b}Pq",
    ] {
        assert!(ends_inside_escape(cut), "{cut:?}");
    }
}

#[test]
fn whole_wire_messages_can_be_replayed() {
    let mut zed = ZedReplay::default();
    zed.apply_message(
        &json!({"jsonrpc": "2.0", "method": "session/update", "params": tool_call("w")}),
    );
    zed.apply_message(&json!({"jsonrpc": "2.0", "method": "session/update",
                              "params": {"sessionId": "s1", "update": output("w", "hi\n")}}));
    zed.apply_message(&json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}));
    assert_eq!(card(&zed, "w").output, "hi\n");
    assert_eq!(zed.problems(), &[] as &[String]);
}
