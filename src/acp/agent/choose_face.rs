//! Which face serves a connection, read from the client's first message before anything is
//! connected: the v1 face or the v2 face directly when the first message leaves no doubt, the
//! SDK's protocol router for everything else.
//!
//! Owns: the rule, which is the SDK router's own (`AgentProtocolRouter`, agent-client-protocol
//! 5.2, with both faces configured) restricted to the messages it hands on unchanged. Must not
//! touch: what either face does with the message, the transport.
//!
//! The router parses every first message into a frame and then: a request for `initialize`
//! asking for exactly version 1, and any first message that asks for no version at all (a
//! notification, another request, an `initialize` without a readable `protocolVersion`) go to
//! the v1 face as they came; an `initialize` for exactly version 2, with an id that is not
//! `null` and params that parse as v2's, goes to the v2 face as it came. Everything else it
//! rewrites (a version below 1 or above 2), answers itself and keeps reading (a response, a
//! batch, a frame that is not JSON-RPC, a v2 request it refuses): those go to the router, so
//! that they behave exactly as they did (`notes/2026-12-02-start-up-face.md`).

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::{RawJsonRpcId, RawJsonRpcMessage, RawJsonRpcParams, TransportFrame};
use serde_json::Value;

/// What serves a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FaceFor {
    /// The v1 face, connected directly.
    V1,
    /// The v2 face, connected directly.
    V2,
    /// The SDK's protocol router, with both faces behind it.
    Router,
}

impl FaceFor {
    /// The name the debug log gives the choice.
    pub(super) fn name(self) -> &'static str {
        match self {
            FaceFor::V1 => "v1",
            FaceFor::V2 => "v2",
            FaceFor::Router => "the SDK's protocol router",
        }
    }
}

/// The face for a connection whose first line is `first` (`None`: none came).
pub(super) fn face_for(first: Option<&str>) -> FaceFor {
    let Some(line) = first else {
        return FaceFor::Router;
    };
    let TransportFrame::Single(message) = TransportFrame::parse_json(line) else {
        return FaceFor::Router;
    };
    let request = match message {
        RawJsonRpcMessage::Request(request) => request,
        RawJsonRpcMessage::Notification(_) => return FaceFor::V1,
        RawJsonRpcMessage::Response(_) => return FaceFor::Router,
    };
    if &*request.method != "initialize" {
        return FaceFor::V1;
    }
    let Some(RawJsonRpcParams::Object(params)) = request.params else {
        return FaceFor::V1;
    };
    let Some(version) = params.get("protocolVersion") else {
        return FaceFor::V1;
    };
    let Ok(version) = serde_json::from_value::<ProtocolVersion>(version.clone()) else {
        return FaceFor::V1;
    };
    if version == ProtocolVersion::V1 {
        return FaceFor::V1;
    }
    if version == ProtocolVersion::V2
        && request.id != RawJsonRpcId::Null
        && serde_json::from_value::<agent_client_protocol::v2::schema::InitializeRequest>(
            Value::Object(params),
        )
        .is_ok()
    {
        return FaceFor::V2;
    }
    FaceFor::Router
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn face(message: Value) -> FaceFor {
        face_for(Some(&message.to_string()))
    }

    fn initialize(id: Value, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params})
    }

    #[test]
    fn initialize_for_version_1_goes_to_the_v1_face_whatever_else_it_holds() {
        let zed = json!({"protocolVersion": 1, "clientCapabilities": {
            "fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true,
            "_meta": {"terminal_output": true}}});
        assert_eq!(face(initialize(json!(0), zed)), FaceFor::V1);
        // The router validates and hands it on unchanged even when the params do not parse.
        let bad = json!({"protocolVersion": 1, "clientCapabilities": "no"});
        assert_eq!(face(initialize(json!(1), bad)), FaceFor::V1);
        assert_eq!(
            face(initialize(Value::Null, json!({"protocolVersion": 1}))),
            FaceFor::V1
        );
    }

    #[test]
    fn a_first_message_that_asks_for_no_version_goes_to_the_v1_face() {
        let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                         "params": {"cwd": "/", "mcpServers": []}});
        assert_eq!(face(new), FaceFor::V1);
        let cancel = json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {}});
        assert_eq!(face(cancel), FaceFor::V1);
        for params in [json!({}), json!([1]), json!({"protocolVersion": "1.0"})] {
            assert_eq!(face(initialize(json!(1), params)), FaceFor::V1);
        }
        let bare = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"});
        assert_eq!(face(bare), FaceFor::V1);
    }

    #[test]
    fn a_valid_v2_initialize_goes_to_the_v2_face() {
        let v2 = json!({"protocolVersion": 2, "info": {"name": "c", "version": "0"},
                        "capabilities": {}});
        assert_eq!(face(initialize(json!(0), v2.clone())), FaceFor::V2);
        assert_eq!(face(initialize(json!("a"), v2.clone())), FaceFor::V2);
        // The router refuses these and keeps reading: it answers them.
        assert_eq!(face(initialize(Value::Null, v2)), FaceFor::Router);
        assert_eq!(
            face(initialize(json!(0), json!({"protocolVersion": 2}))),
            FaceFor::Router
        );
    }

    #[test]
    fn what_the_router_rewrites_or_answers_itself_stays_with_the_router() {
        // Rewritten: below 1, above 2.
        assert_eq!(
            face(initialize(json!(0), json!({"protocolVersion": 0}))),
            FaceFor::Router
        );
        let v3 = json!({"protocolVersion": 3, "info": {"name": "c", "version": "0"},
                        "capabilities": {}});
        assert_eq!(face(initialize(json!(0), v3)), FaceFor::Router);
        // Answered (or skipped) by the router before any face is chosen.
        for line in [
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
            json!([initialize(json!(1), json!({"protocolVersion": 1}))]),
            json!({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
            json!({"jsonrpc": "2.0", "id": {}, "method": "initialize"}),
            json!(7),
        ] {
            assert_eq!(face(line.clone()), FaceFor::Router, "{line}");
        }
        assert_eq!(face_for(None), FaceFor::Router);
    }
}
