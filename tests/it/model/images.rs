//! Images from an ACP prompt, through the served binary against the fake provider on
//! loopback: the exact request shape each provider takes (OpenAI `image_url` parts with
//! `data:` URLs, Anthropic `image` blocks with a base64 source), in the user message they were
//! given with and kept there for the next turns; `promptCapabilities.image` advertised by the
//! model driver only; a model that refuses images (each server's words) gets the turn asked
//! again once without them, and the user reads why.

use std::sync::Arc;

use acp_bash::acp::client::{AcpClient, ClientProfile, Conversation};
use agent_client_protocol::v1::schema::{
    ContentBlock, ImageContent, PromptRequest, SessionUpdate, StopReason,
};
use serde_json::{json, Value};

use super::harness::served;
use crate::support::acp::*;
use crate::support::fake_model::{anthropic, openai, Answer, FakeModel};

/// A 1×1 PNG, in base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAcCBlCwAAAABJRU5ErkJggg==";

/// Sends `blocks` as one prompt; the stop reason and the turn's updates.
async fn prompt_blocks(
    c: &mut Conversation,
    session: &agent_client_protocol::v1::schema::SessionId,
    blocks: Vec<ContentBlock>,
) -> agent_client_protocol::Result<(StopReason, Vec<SessionUpdate>)> {
    let response = c
        .connection()
        .send_request(PromptRequest::new(session.clone(), blocks))
        .block_task()
        .await?;
    Ok((response.stop_reason, updates_already_here(c)))
}

fn with_image(text: &str) -> Vec<ContentBlock> {
    vec![
        ContentBlock::from(text),
        ContentBlock::Image(ImageContent::new(PNG, "image/png")),
    ]
}

/// The user messages of a request body.
fn user_messages(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .cloned()
        .collect()
}

/// OpenAI: the prompt's user message is a list of parts, its text, then the image as a
/// `data:` URL; the next turn sends it again in the same place, byte for byte. The model
/// driver advertises `promptCapabilities.image`; the shell driver does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_reaches_openai_as_an_image_url_part_of_its_user_message_and_stays() {
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start(vec![
        openai::reply(&["A red dot."], &[]),
        openai::reply(&["Still a red dot."], &[]),
    ])
    .await;
    let base = format!("{}/v1", fake.base);
    let client = served("openai:fake", &["--base-url", &base], &[]);
    let (advertised, _) = converse_with(client, "openai image", async |mut c| {
        let advertised = c.init.agent_capabilities.prompt_capabilities.image;
        let session = c.new_session(&dir).await?;
        let (stop, _) = prompt_blocks(&mut c, &session, with_image("what is this?")).await?;
        assert_eq!(stop, StopReason::EndTurn);
        let (stop, _) = prompt_blocks(&mut c, &session, vec!["and now?".into()]).await?;
        assert_eq!(stop, StopReason::EndTurn);
        Ok(advertised)
    })
    .await;
    assert!(advertised, "the model driver advertises images");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let first = &user_messages(&requests[0].body)[0];
    let parts = first["content"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "{first}");
    assert_eq!(parts[0]["type"], "text");
    assert!(
        parts[0]["text"]
            .as_str()
            .unwrap()
            .ends_with("what is this?"),
        "{first}"
    );
    assert_eq!(
        parts[1],
        json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}})
    );
    let later = user_messages(&requests[1].body);
    assert_eq!(
        &later[0], first,
        "kept in the user message it was given with"
    );
    assert!(later[1]["content"].as_str().unwrap().ends_with("and now?"));

    let shell = AcpClient::new(binary(), ["serve", "--no-history"]).profile(ClientProfile::Zed);
    let (image, _) = converse_with(shell, "shell capabilities", async |c| {
        Ok(c.init.agent_capabilities.prompt_capabilities.image)
    })
    .await;
    assert!(!image, "the shell driver runs no image");
}

/// Anthropic: an `image` block with a base64 source, after the prompt's text in the same user
/// message. An image of a type models do not take is named, not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_reaches_anthropic_as_a_base64_image_block_of_its_user_message() {
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start(vec![anthropic::reply(&["A red dot."], &[])]).await;
    let client = served("anthropic:fake", &["--base-url", &fake.base], &[]);
    let (updates, _) = converse_with(client, "anthropic image", async |mut c| {
        let session = c.new_session(&dir).await?;
        let mut blocks = with_image("what is this?");
        blocks.push(ContentBlock::Image(ImageContent::new(
            "PHN2Zy8+",
            "image/svg+xml",
        )));
        let (stop, updates) = prompt_blocks(&mut c, &session, blocks).await?;
        assert_eq!(stop, StopReason::EndTurn);
        Ok(updates)
    })
    .await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let user = &user_messages(&requests[0].body)[0];
    let content = user["content"].as_array().unwrap();
    // The block as Anthropic takes it (the cache breakpoint on the last block aside).
    let images: Vec<Value> = content
        .iter()
        .filter(|b| b["type"] == "image")
        .map(|b| {
            let mut b = b.clone();
            b.as_object_mut().unwrap().remove("cache_control");
            b
        })
        .collect();
    assert_eq!(
        images,
        [
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}})
        ],
        "{user}"
    );
    let text_at = content
        .iter()
        .position(|b| b["type"] == "text" && b["text"].as_str().unwrap().contains("what is this?"));
    let image_at = content.iter().position(|b| b["type"] == "image");
    assert!(text_at < image_at, "the text, then the image: {user}");
    assert!(
        user.to_string().contains("image/svg+xml"),
        "named to the model: {user}"
    );
    let shown = agent_text(&updates);
    assert!(
        shown.contains("Not sent to the model: an image of type image/svg+xml"),
        "{shown}"
    );
}

/// A model that refuses images, in each server's words (OpenAI at 400, llama.cpp's
/// `server_error` at 500, Ollama's at 400): the request is asked again once without the
/// images, each replaced by a line saying so; the user reads why, and the turn goes on with
/// the model's answer. The next turn sends no image either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_refuses_images_gets_the_turn_without_them_and_the_user_is_told() {
    let cases = [
        (
            400,
            json!({"error": {"message": "Invalid content type. image_url is only supported by certain models.", "type": "invalid_request_error", "param": "messages.[1].content.[1].type", "code": null}}),
        ),
        (
            500,
            json!({"error": {"code": 500, "message": "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj", "type": "server_error"}}),
        ),
        (
            400,
            json!({"error": {"message": "this model does not support image input", "type": "invalid_request_error", "param": null, "code": null}}),
        ),
    ];
    for (status, body) in cases {
        let (_tmp, dir) = temp_dir();
        let refusal = body.to_string();
        let fake = FakeModel::start_refusing(
            vec![
                openai::reply(&["I cannot see images, but go on."], &[]),
                openai::reply(&["Fine."], &[]),
            ],
            Arc::new(move |request: &Value| {
                request
                    .to_string()
                    .contains("image_url")
                    .then(|| Answer::Status(status, Vec::new(), refusal.clone()))
            }),
        )
        .await;
        let base = format!("{}/v1", fake.base);
        let client = served("openai:fake", &["--base-url", &base], &[]);
        let (updates, _) = converse_with(client, "image refused", async |mut c| {
            let session = c.new_session(&dir).await?;
            let (stop, updates) =
                prompt_blocks(&mut c, &session, with_image("what is this?")).await?;
            assert_eq!(stop, StopReason::EndTurn);
            let (stop, _) = prompt_blocks(&mut c, &session, vec!["ok".into()]).await?;
            assert_eq!(stop, StopReason::EndTurn);
            Ok(updates)
        })
        .await;
        let shown = agent_text(&updates);
        assert!(
            shown.contains("does not take images")
                && shown.contains("I cannot see images, but go on."),
            "{status} {body}: {shown}"
        );
        let requests = fake.requests();
        // Refused once (recorded), asked again without it, then the next turn.
        assert_eq!(requests.len(), 3, "{status}: {requests:?}");
        for request in &requests[1..] {
            let sent = request.body.to_string();
            assert!(!sent.contains("image_url"), "{sent}");
            assert!(
                sent.contains("(The user gave an image here; not sent to you: this model does not take images.)"),
                "{sent}"
            );
        }
    }
}
