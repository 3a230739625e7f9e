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

const MIB: usize = 1024 * 1024;

/// An image of `bytes` base64 bytes, every byte `fill` (a base64 letter, so each image of a
/// request can be told apart by its first letters).
fn image_of(fill: char, bytes: usize) -> ContentBlock {
    ContentBlock::Image(ImageContent::new(
        fill.to_string().repeat(bytes),
        "image/png",
    ))
}

/// Each image part of `message` (OpenAI's `image_url`) as its fill letter and base64 size.
fn images_in(message: &Value) -> Vec<(char, usize)> {
    let Some(parts) = message["content"].as_array() else {
        return Vec::new();
    };
    parts
        .iter()
        .filter(|p| p["type"] == "image_url")
        .map(|p| {
            let url = p["image_url"]["url"].as_str().unwrap();
            let data = url.strip_prefix("data:image/png;base64,").unwrap();
            (data.chars().next().unwrap(), data.len())
        })
        .collect()
}

/// Every image a request sent, in order.
fn images_sent(body: &Value) -> Vec<(char, usize)> {
    user_messages(body).iter().flat_map(images_in).collect()
}

/// The text the model read in a request's user messages (the parts' text and plain contents).
fn user_text(body: &Value) -> String {
    user_messages(body)
        .iter()
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A prompt's images may take 5 MiB of base64 in all: exactly 5 MiB (two images) is sent
/// whole; in a prompt whose images come to 5 MiB and 4 bytes, the image that passes the bound
/// is not sent, the model reads a line in its place and the user is told its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompts_images_are_sent_up_to_five_mib_and_the_one_past_it_is_named() {
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start(vec![
        openai::reply(&["Two images."], &[]),
        openai::reply(&["One image."], &[]),
    ])
    .await;
    let base = format!("{}/v1", fake.base);
    let client = served("openai:fake", &["--base-url", &base], &[]);
    let ((under, over), _) = converse_with(client, "prompt image bound", async |mut c| {
        let session = c.new_session(&dir).await?;
        let blocks = vec![
            "at the bound".into(),
            image_of('A', 3 * MIB),
            image_of('B', 2 * MIB),
        ];
        let (stop, under) = prompt_blocks(&mut c, &session, blocks).await?;
        assert_eq!(stop, StopReason::EndTurn);
        let blocks = vec![
            "past the bound".into(),
            image_of('C', 3 * MIB),
            image_of('D', 2 * MIB + 4),
        ];
        let (stop, over) = prompt_blocks(&mut c, &session, blocks).await?;
        assert_eq!(stop, StopReason::EndTurn);
        Ok((agent_text(&under), agent_text(&over)))
    })
    .await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{} requests", requests.len());
    assert_eq!(
        images_sent(&requests[0].body),
        [('A', 3 * MIB), ('B', 2 * MIB)]
    );
    assert!(!under.contains("Not sent"), "{under}");
    // The first prompt's images stay (8 MiB in all: under the conversation's bound); D is not
    // sent, and said so to both.
    assert_eq!(
        images_sent(&requests[1].body),
        [('A', 3 * MIB), ('B', 2 * MIB), ('C', 3 * MIB)]
    );
    assert!(
        over.contains("Not sent to the model: an image of 2048 KiB: a prompt's images may take 5 MiB in all (base64)."),
        "{over}"
    );
    let read = user_text(&requests[1].body);
    assert!(
        read.contains("(The user gave an image of 2048 KiB, not sent: the prompt's images reached their bound.)"),
        "{read}"
    );
}

/// A conversation's images may take 10 MiB: two prompts of 5 MiB each are both sent again;
/// the prompt that takes the total past 10 MiB (by 4 bytes) gets the oldest image replaced by
/// a line, and the user is told; a fourth prompt of 5 MiB replaces the next oldest. Every
/// request sends at most 10 MiB of images, newest kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_ten_mib_in_a_conversation_the_oldest_images_give_way_and_the_user_is_told() {
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start((0..4).map(|_| openai::reply(&["Seen."], &[])).collect()).await;
    let base = format!("{}/v1", fake.base);
    let client = served("openai:fake", &["--base-url", &base], &[]);
    let (told, _) = converse_with(client, "conversation image bound", async |mut c| {
        let session = c.new_session(&dir).await?;
        let mut told = Vec::new();
        for (text, image) in [
            ("prompt-1", image_of('A', 5 * MIB)),
            ("prompt-2", image_of('B', 5 * MIB)),
            ("prompt-3", image_of('C', 4)),
            ("prompt-4", image_of('D', 5 * MIB)),
        ] {
            let (stop, updates) = prompt_blocks(&mut c, &session, vec![text.into(), image]).await?;
            assert_eq!(stop, StopReason::EndTurn);
            told.push(agent_text(&updates));
        }
        Ok(told)
    })
    .await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 4, "{} requests", requests.len());
    let sent: Vec<Vec<(char, usize)>> = requests.iter().map(|r| images_sent(&r.body)).collect();
    assert_eq!(sent[0], [('A', 5 * MIB)]);
    assert_eq!(
        sent[1],
        [('A', 5 * MIB), ('B', 5 * MIB)],
        "exactly 10 MiB: all sent"
    );
    assert_eq!(sent[2], [('B', 5 * MIB), ('C', 4)]);
    assert_eq!(sent[3], [('C', 4), ('D', 5 * MIB)]);
    assert!(!told[0].contains("No longer sent") && !told[1].contains("No longer sent"));
    for said in &told[2..] {
        assert!(
            said.contains("No longer sent to the model: the 1 oldest image(s) of this conversation (its images may take 10 MiB in all)."),
            "{said}"
        );
    }
    // The model reads, where each image was, that it was given and is no longer sent.
    let line = "(The user gave an image here; not sent to you: the conversation's images passed 10 MiB, the oldest are no longer sent.)";
    let last = user_messages(&requests[3].body);
    let at = |text: &str| {
        last.iter()
            .position(|m| m.to_string().contains(text))
            .unwrap()
    };
    assert_eq!(
        last[at("prompt-1") + 1]["content"],
        line,
        "{:?}",
        &last[..3]
    );
    assert_eq!(last[at("prompt-2") + 1]["content"], line);
    assert_eq!(user_text(&requests[3].body).matches(line).count(), 2);
}

/// A prompt with more images than a model is sent (three of 4 MiB: 12 MiB, past the 9 MiB a
/// line of a 1 MiB prompt may take) is taken, not refused whole: the first image is sent, the
/// others are named to the model and the user. A line past the room for images (seven of 4
/// MiB) is refused with an error that names both bounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_with_more_images_than_are_sent_is_answered_not_refused() {
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start(vec![openai::reply(&["One of three."], &[])]).await;
    let base = format!("{}/v1", fake.base);
    let client = served("openai:fake", &["--base-url", &base], &[]);
    let ((told, refused), _) = converse_with(client, "many images", async |mut c| {
        let session = c.new_session(&dir).await?;
        let mut blocks = vec![ContentBlock::from("three")];
        blocks.extend(['E', 'F', 'G'].map(|fill| image_of(fill, 4 * MIB)));
        let (stop, updates) = prompt_blocks(&mut c, &session, blocks).await?;
        assert_eq!(stop, StopReason::EndTurn);
        let mut blocks = vec![ContentBlock::from("seven")];
        blocks.extend((0..7).map(|_| image_of('H', 4 * MIB)));
        let refused = prompt_blocks(&mut c, &session, blocks)
            .await
            .expect_err("a line past its bound is refused");
        Ok((agent_text(&updates), refused))
    })
    .await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "{} requests", requests.len());
    assert_eq!(images_sent(&requests[0].body), [('E', 4 * MIB)]);
    assert_eq!(
        told.matches("Not sent to the model: an image of 4096 KiB")
            .count(),
        2,
        "{told}"
    );
    assert_eq!(
        user_text(&requests[0].body)
            .matches("(The user gave an image of 4096 KiB, not sent")
            .count(),
        2
    );
    let refused = format!("{refused:?}");
    assert!(
        refused.contains("--max-prompt-bytes") && refused.contains("images of at most 16 MiB"),
        "{refused}"
    );
}

/// Anthropic's refusals of an image, as its API words them (`fixtures/providers/anthropic/`,
/// sources in `SOURCES.md`): an image it cannot read, one past 5 MB, one with too many pixels,
/// each a 400 `invalid_request_error` that every later request holding the image gets again.
/// The turn is asked again once without the conversation's images, each replaced by a line;
/// the user reads the provider's words and the model's answer; the next turn sends no image.
/// Ollama's Anthropic endpoint's refusal of images by a text-only model, in Anthropic's error
/// shape, is told as the model's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropics_refusal_of_an_image_gets_the_turn_without_it_and_the_user_is_told() {
    use crate::support::fake_model::recorded;
    let ollama = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "this model does not support image input"}})
    .to_string();
    let cases = [
        (
            recorded("anthropic/could_not_process_image.json"),
            "Could not process image",
            "the provider refused an image of this conversation",
        ),
        (
            recorded("anthropic/image_exceeds_5_mb.json"),
            "image exceeds 5 MB maximum",
            "the provider refused an image of this conversation",
        ),
        (
            recorded("anthropic/image_dimensions_exceed.json"),
            "At least one of the image dimensions exceed max allowed size",
            "the provider refused an image of this conversation",
        ),
        (
            ollama,
            "this model does not support image input",
            "this model does not take images",
        ),
    ];
    for (refusal, words, why) in cases {
        let (_tmp, dir) = temp_dir();
        let body = refusal.clone();
        let fake = FakeModel::start_refusing(
            vec![
                anthropic::reply(&["I see no image, but go on."], &[]),
                anthropic::reply(&["Fine."], &[]),
            ],
            Arc::new(move |request: &Value| {
                request["messages"]
                    .to_string()
                    .contains(r#""type":"image""#)
                    .then(|| Answer::Status(400, Vec::new(), body.clone()))
            }),
        )
        .await;
        let client = served("anthropic:fake", &["--base-url", &fake.base], &[]);
        let (updates, _) = converse_with(client, "anthropic image refused", async |mut c| {
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
            shown.contains(words)
                && shown.contains("asked again without the 1 image(s)")
                && shown.contains("I see no image, but go on."),
            "{refusal}: {shown}"
        );
        let requests = fake.requests();
        // Refused once (recorded), asked again without the image, then the next turn.
        assert_eq!(requests.len(), 3, "{refusal}: {} requests", requests.len());
        assert!(requests[0].body["messages"].to_string().contains(PNG));
        for request in &requests[1..] {
            let sent = request.body["messages"].to_string();
            assert!(!sent.contains(r#""type":"image""#), "{sent}");
            let line = format!("(The user gave an image here; not sent to you: {why}.)");
            assert!(sent.contains(&line), "{line} in {sent}");
        }
    }
}

/// `session/load` in another agent process replays the user's images as they were given
/// (each an `image` `user_message_chunk` after its prompt's text), and the model gets them again
/// in the history it is sent, in their user messages. Bounded as sent live: in the prompt whose
/// images pass 5 MiB the image past the bound, and, once a session's images pass 10 MiB, the
/// oldest, are kept by type and size only: the replay says so in a line where each was, and
/// the model reads a line in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_session_replays_its_images_and_the_model_still_gets_them() {
    use super::harness::KEY;
    let (_tmp, dir) = temp_dir();
    let state = tempfile::tempdir().unwrap();
    let serve = |base: String| {
        AcpClient::new(
            binary(),
            [
                "serve".to_string(),
                "--sandbox".into(),
                "full".into(),
                "--state-dir".into(),
                state.path().to_str().unwrap().into(),
                "--model".into(),
                "openai:fake".into(),
                "--base-url".into(),
                format!("{base}/v1"),
            ],
        )
        .profile(ClientProfile::Zed)
        .env("XDG_CONFIG_HOME", "/nonexistent/acp-bash-tests")
        .env("OPENAI_API_KEY", KEY)
    };
    let first = FakeModel::start((0..3).map(|_| openai::reply(&["Seen."], &[])).collect()).await;
    let (session, _) = converse_with(
        serve(first.base.clone()),
        "the first process",
        async |mut c| {
            let session = c.new_session(&dir).await?;
            for blocks in [
                vec!["prompt-1".into(), image_of('A', 5 * MIB)],
                vec![
                    "prompt-2".into(),
                    image_of('B', 5 * MIB),
                    image_of('C', MIB),
                ],
                vec!["prompt-3".into(), image_of('D', 8)],
            ] {
                let (stop, _) = prompt_blocks(&mut c, &session, blocks).await?;
                assert_eq!(stop, StopReason::EndTurn);
            }
            Ok(session)
        },
    )
    .await;
    // What the first process sent last: A no longer (the conversation passed 10 MiB), C never
    // (its prompt passed 5 MiB).
    assert_eq!(
        images_sent(&first.requests()[2].body),
        [('B', 5 * MIB), ('D', 8)]
    );
    let second = FakeModel::start(vec![openai::reply(&["Still seen."], &[])]).await;
    let (replayed, _) = converse_with(
        serve(second.base.clone()),
        "the second process",
        async |mut c| {
            let (_, replayed) = c.load_session(&session, &dir).await?;
            let (stop, _) = prompt_blocks(&mut c, &session, vec!["prompt-4".into()]).await?;
            assert_eq!(stop, StopReason::EndTurn);
            Ok(replayed)
        },
    )
    .await;
    // The replay: each prompt's text, then its images as given, or the line for one not kept.
    let user: Vec<String> = replayed
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::UserMessageChunk(chunk) => Some(match &chunk.content {
                ContentBlock::Text(t) => t.text.clone(),
                ContentBlock::Image(i) => {
                    format!("image {} {}{}", i.mime_type, &i.data[..1], i.data.len())
                }
                other => panic!("{other:?}"),
            }),
            _ => None,
        })
        .collect();
    let not_kept = |kib: usize| {
        format!(
            "(An image of type image/png, {kib} KiB, given here is not kept in this session's \
             history: a prompt's images are kept up to 5 MiB, a session's up to 10 MiB, newest \
             first.)"
        )
    };
    assert_eq!(
        user,
        [
            "prompt-1".to_string(),
            not_kept(5120),
            "prompt-2".into(),
            format!("image image/png B{}", 5 * MIB),
            not_kept(1024),
            "prompt-3".into(),
            "image image/png D8".into(),
        ]
    );
    // The model, after the load: the kept images in their user messages, a line for the others.
    let body = &second.requests()[0].body;
    assert_eq!(images_sent(body), [('B', 5 * MIB), ('D', 8)]);
    let messages = user_messages(body);
    let of = |text: &str| {
        messages
            .iter()
            .find(|m| m.to_string().contains(text))
            .unwrap_or_else(|| panic!("{text} not sent"))
    };
    assert_eq!(images_in(of("prompt-2")), [('B', 5 * MIB)]);
    assert_eq!(images_in(of("prompt-3")), [('D', 8)]);
    let read = user_text(body);
    assert!(
        read.contains("prompt-1\n\n(The user gave an image of 5120 KiB here; not sent to you: this session's history no longer keeps it.)"),
        "{read}"
    );
    assert!(
        read.contains("prompt-2\n\n(The user gave an image of 1024 KiB here; not sent to you: this session's history no longer keeps it.)"),
        "{read}"
    );
}
