//! The user stays in control and the key stays safe: slash commands and `!COMMAND` make no
//! model request; without a key the prompt gets an auth-required error; the model's own `env`
//! does not see the key; background jobs; embedded resources reach the model.

use acp_bash::driver::model::{ModelConfig, ModelDriver, Provider};
use acp_bash::driver::{Driver, Prompt, PromptBlock, StopReason, TurnError};

use super::harness::{config, driver, prompt, said, Event, Host, KEY};
use crate::support::fake_model::{anthropic, openai, FakeModel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_and_bang_commands_never_reach_the_model() {
    let fake = FakeModel::start(vec![openai::reply(&["Seen."], &[])]).await;
    let driver = driver(Provider::OpenAi, &fake.base);
    let host = Host::new();
    assert_eq!(
        host.turn(&driver, &prompt("/jobs")).await,
        Ok(StopReason::EndTurn)
    );
    assert_eq!(
        host.turn(&driver, &prompt("/kill x")).await,
        Ok(StopReason::EndTurn)
    );
    assert_eq!(
        host.turn(&driver, &prompt("!echo from-the-user")).await,
        Ok(StopReason::EndTurn)
    );
    assert!(fake.requests().is_empty(), "a model request was made");
    let events = host.take_events();
    assert!(
        events.contains(&Event::Command("Jobs".into())),
        "{events:?}"
    );
    assert!(said(&events).contains("job id"), "{events:?}");
    assert!(events.contains(&Event::Call("echo from-the-user".into())));
    // The next model request sees the command and its output.
    host.turn(&driver, &prompt("what did I run?"))
        .await
        .unwrap();
    let messages = fake.requests()[0].body["messages"].clone();
    let user = messages[1]["content"].as_str().unwrap();
    assert!(
        user.contains("$ echo from-the-user\nfrom-the-user\n[exit code: 0]"),
        "{user}"
    );
    assert_eq!(messages[2]["content"], "what did I run?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_prompts_get_auth_required_naming_the_variable() {
    let fake = FakeModel::start(vec![]).await;
    let config = ModelConfig::new(
        Provider::Anthropic,
        "m",
        fake.base.clone(),
        None,
        "MY_LLM_KEY",
    );
    let driver = ModelDriver::new(config);
    let methods = driver.auth_methods();
    assert_eq!(methods.len(), 1);
    assert_eq!(
        methods[0].terminal_args.as_deref(),
        Some(&["login".to_string(), "anthropic".to_string()][..])
    );
    assert!(methods[0]
        .description
        .as_deref()
        .is_some_and(|d| d.contains("MY_LLM_KEY") && d.contains("acp-bash login anthropic")));
    let host = Host::new();
    let ended = host.turn(&driver, &prompt("hi")).await;
    let Err(TurnError::AuthRequired(message)) = ended else {
        panic!("{ended:?}");
    };
    assert!(message.contains("MY_LLM_KEY"), "{message}");
    assert!(fake.requests().is_empty());
    // The user's own commands still work.
    assert_eq!(
        host.turn(&driver, &prompt("!true")).await,
        Ok(StopReason::EndTurn)
    );
}

/// The key is in the agent's environment; the model asks to run `env`: the key is not in
/// what the command printed, nor in what went back to the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_own_env_does_not_see_the_key() {
    let fake = FakeModel::start(vec![
        openai::reply(
            &[],
            &[("c1", "bash", &["{\"command\":\"env; echo env-ran\"}"])],
        ),
        openai::reply(&["ok"], &[]),
    ])
    .await;
    let host = Host::with_env(vec![
        ("PATH".into(), std::env::var("PATH").unwrap()),
        ("OPENAI_API_KEY".into(), KEY.into()),
        ("HARMLESS".into(), "visible".into()),
    ]);
    host.turn(&driver(Provider::OpenAi, &fake.base), &prompt("env"))
        .await
        .unwrap();
    let result = fake.requests()[1].body["messages"][3]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(result.contains("HARMLESS=visible"), "{result}");
    assert!(result.contains("env-ran"), "{result}");
    assert!(!result.contains(KEY), "{result}");
    assert!(!result.contains("OPENAI_API_KEY"), "{result}");
    let events = format!("{:?}", host.take_events());
    assert!(!events.contains(KEY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_jobs_start_are_read_and_killed() {
    let fake = FakeModel::start(vec![
        anthropic::reply(
            &[],
            &[(
                "t1",
                "bash",
                &[
                    "{\"command\":\"echo serving; exec sleep 600\",",
                    "\"background\":true}",
                ],
            )],
        ),
        anthropic::reply(&[], &[("t2", "job_output", &["{\"id\":1}"])]),
        anthropic::reply(&[], &[("t3", "job_kill", &["{\"id\":1}"])]),
        anthropic::reply(&[], &[("t4", "job_output", &["{\"id\":7}"])]),
        anthropic::reply(&["Stopped."], &[]),
    ])
    .await;
    let host = Host::new();
    let driver = driver(Provider::Anthropic, &fake.base);
    assert_eq!(
        host.turn(&driver, &prompt("serve")).await,
        Ok(StopReason::EndTurn)
    );
    let requests = fake.requests();
    let result = |r: usize| {
        requests[r].body["messages"][2 * r]["content"][0]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        result(1).starts_with("Started job 1 (pid "),
        "{}",
        result(1)
    );
    assert!(
        result(2).starts_with("job 1 `echo serving; exec sleep 600`"),
        "{}",
        result(2)
    );
    assert!(result(3).starts_with("Killed job 1 "), "{}", result(3));
    assert!(result(4).contains("no job 7"), "{}", result(4));
    assert!(!host.jobs().get("1".parse().unwrap()).unwrap().is_running());
}

/// Embedded files reach the model with their URI; links are named; an image is not dropped
/// silently: the user is told it was not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_reach_the_model_and_nothing_is_dropped_silently() {
    let fake = FakeModel::start(vec![openai::reply(&["Read."], &[])]).await;
    let host = Host::new();
    let mut prompt = Prompt::text_only("explain");
    prompt.blocks.push(PromptBlock::Resource {
        uri: "file:///w/main.rs".into(),
        text: Some("fn main() {}".into()),
        mime_type: None,
    });
    prompt.blocks.push(PromptBlock::Link {
        uri: "file:///w/lib.rs".into(),
        name: "lib.rs".into(),
    });
    prompt.blocks.push(PromptBlock::Other {
        kind: "image".into(),
    });
    host.turn(&driver(Provider::OpenAi, &fake.base), &prompt)
        .await
        .unwrap();
    let user = fake.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(user.starts_with("explain"), "{user}");
    assert!(
        user.contains("<resource uri=\"file:///w/main.rs\">\nfn main() {}\n</resource>"),
        "{user}"
    );
    assert!(user.contains("lib.rs: file:///w/lib.rs"), "{user}");
    assert!(said(&host.take_events()).contains("Not sent to the model: an image block"));
    let _ = config;
}
