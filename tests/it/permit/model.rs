//! The model driver asks too: a reject is told to the model as such in the tool result, and an
//! allow gives it the second run's result with a note that the user allowed it.

use serde_json::Value;

use super::{calls, in_namespaces, Agent, Face, Pick, Places};
use crate::support::fake_model::{openai, FakeModel};

/// The tool results the model got back in its `n`th request (OpenAI chat: `role: tool`).
fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_model_is_told_what_the_user_answered() {
    crate::support::sandbox::as_root_and_nobody(
        "permit::model::a_model_is_told_what_the_user_answered",
        a_model_is_told_what_the_user_answered_once,
    );
}

/// [`a_model_is_told_what_the_user_answered`], as this user.
fn a_model_is_told_what_the_user_answered_once() {
    in_namespaces(async {
        let places = Places::new();
        let outside = tempfile::Builder::new()
            .prefix("acpbash-permit-outside-")
            .tempdir_in("/var/tmp")
            .unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o777))
                .unwrap();
        }
        let touch = |name: &str| {
            format!(
                "{{\"command\": \"touch {}\"}}",
                outside.path().join(name).display()
            )
        };
        let (first, second) = (touch("rejected"), touch("allowed"));
        let fake = FakeModel::start(vec![
            openai::reply(&[], &[("call_1", "bash", &[first.as_str()])]),
            openai::reply(&["Rejected."], &[]),
            openai::reply(&[], &[("call_2", "bash", &[second.as_str()])]),
            openai::reply(&["Done."], &[]),
        ])
        .await;
        let base = format!("{}/v1", fake.base);
        let args = [
            "--sandbox",
            "workspace",
            "--model",
            "openai:fake-model",
            "--base-url",
            base.as_str(),
        ];
        let env = [("OPENAI_API_KEY", "sk-test-permit")];
        let mut agent = Agent::start_with_env(Face::Plain, &args, places.config.path(), &env);
        agent.initialize().await;
        let session = agent.new_session(&places.ws()).await;
        agent.will_answer(&[Pick::Option("reject")]);
        let turn = agent.turn(&session, "make the file").await;
        assert_eq!(calls(&turn), 1);
        agent.will_answer(&[Pick::Option("allow-once")]);
        let turn = agent.turn(&session, "make the other file").await;
        assert_eq!(calls(&turn), 2);
        agent.finish().await;
        assert!(!outside.path().join("rejected").exists());
        assert!(outside.path().join("allowed").exists());
        let requests = fake.requests();
        let rejected = tool_results(&requests[1].body).join("\n");
        assert!(rejected.contains("the user rejected"), "{rejected}");
        assert!(rejected.contains("Read-only file system"), "{rejected}");
        let allowed = tool_results(&requests[3].body);
        let allowed = allowed.last().unwrap();
        assert!(
            allowed.contains("the user allowed it this once"),
            "{allowed}"
        );
        assert!(
            allowed.contains("[exit code: 0]") || !allowed.contains("exit code"),
            "{allowed}"
        );
    });
}
