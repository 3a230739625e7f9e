//! What the model driver keeps, and for how long: a closed session's conversation is freed
//! (through the agent, `session/close`), and the embedded resources of one prompt are bounded
//! in all, not only each.

use std::sync::Arc;

use acp_bash::acp::client::ClientProfile;
use acp_bash::driver::model::{
    ModelDriver, Provider, MAX_PROMPT_RESOURCE_BYTES, MAX_RESOURCE_BYTES,
};
use acp_bash::driver::{Driver, Prompt, PromptBlock};
use agent_client_protocol::v1::schema::{CloseSessionRequest, StopReason};

use super::harness::{config, said, Host};
use crate::acp::turns::with_driver;
use crate::support::acp::temp_dir;
use crate::support::fake_model::{openai, FakeModel};

/// The conversation is there while the session is open and gone once it is closed; another
/// open session keeps its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_sessions_free_their_conversation() {
    let fake = FakeModel::start(vec![
        openai::reply(&["one"], &[]),
        openai::reply(&["two"], &[]),
    ])
    .await;
    let driver = Arc::new(ModelDriver::new(config(Provider::OpenAi, &fake.base)));
    let served: Arc<dyn Driver> = driver.clone();
    let (_tmp, dir) = temp_dir();
    let inspect = driver.clone();
    with_driver(served, ClientProfile::Plain, async move |mut c| {
        let closed = c.new_session(&dir).await?;
        let kept = c.new_session(&dir).await?;
        assert_eq!(
            c.prompt(&closed, "hello").await?.stop_reason,
            StopReason::EndTurn
        );
        assert_eq!(
            c.prompt(&kept, "hello").await?.stop_reason,
            StopReason::EndTurn
        );
        assert_eq!(
            inspect.conversation(&closed.0).len(),
            2,
            "prompt and answer"
        );
        c.connection()
            .send_request(CloseSessionRequest::new(closed.clone()))
            .block_task()
            .await?;
        assert!(inspect.conversation(&closed.0).is_empty(), "freed");
        assert_eq!(inspect.conversation(&kept.0).len(), 2, "the other one kept");
        Ok(())
    })
    .await;
}

/// Six files of 100 000 bytes: the first four go up to 64 KiB each, the fifth is cut to what
/// is left of the prompt's 256 KiB, the sixth is only named; the user is told of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompts_embedded_resources_are_bounded_in_all() {
    let fake = FakeModel::start(vec![openai::reply(&["read"], &[])]).await;
    let host = Host::new();
    let line = "x".repeat(99) + "\n";
    let big = line.repeat(1000);
    let mut prompt = Prompt::text_only("look");
    for n in 0..6 {
        prompt.blocks.push(PromptBlock::Resource {
            uri: format!("file:///w/{n}.txt"),
            text: Some(big.clone()),
            mime_type: None,
        });
    }
    let driver = ModelDriver::new(config(Provider::OpenAi, &fake.base));
    host.turn(&driver, &prompt).await.unwrap();
    let sent = fake.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        sent.len() < MAX_PROMPT_RESOURCE_BYTES + 4096,
        "{} bytes sent",
        sent.len()
    );
    assert!(
        sent.len() > 4 * (MAX_RESOURCE_BYTES - 100),
        "{}",
        sent.len()
    );
    assert!(sent.contains("(The user attached file:///w/5.txt, 100000 bytes, not sent"));
    let told = said(&host.take_events());
    assert!(
        told.contains("the first 64 KiB of file:///w/3.txt"),
        "{told}"
    );
    assert!(
        told.contains("of file:///w/4.txt") && told.contains("what was left of the prompt's bound"),
        "{told}"
    );
    assert!(
        told.contains("Not sent to the model: file:///w/5.txt"),
        "{told}"
    );
}
