//! Prompt caching over a scripted 30-step turn, against fakes that count cache reads the way
//! the real APIs do (`support::cache_meter`): Anthropic reads most of its input from the cache
//! through the breakpoints; each OpenAI request begins with the previous request's messages
//! unchanged (a `cd` and a new prompt included), under one `prompt_cache_key` per session; the
//! cached tokens reach the usage report. The same turn without cache hints (main's requests)
//! reads nothing from Anthropic's cache: the breakpoints are what the share measures.

use std::sync::{Arc, Mutex};

use acp_bash::driver::model::{ModelDriver, Provider};
use acp_bash::driver::StopReason;
use serde_json::{json, Value};

use super::harness::{config, prompt, Event, Host};
use crate::support::cache_meter::{read_share, AnthropicMeter, OpenAiMeter};
use crate::support::fake_model::{anthropic, openai, Answer, FakeModel, Meter};

/// The steps of the scripted turn.
const STEPS: usize = 30;

/// 29 replies that each run a command (the fourth makes a folder and `cd`s into it), then an
/// answer.
fn script(provider: Provider) -> Vec<Answer> {
    let mut answers = Vec::new();
    for step in 0..STEPS - 1 {
        let command = match step {
            3 => "mkdir -p sub && cd sub && pwd".to_string(),
            _ => format!("printf 'step {step} line %s\\n' $(seq 1 12)"),
        };
        let id = format!("toolu_{step:02}");
        let arguments = json!({ "command": command }).to_string();
        let call = (id.as_str(), "bash", &[arguments.as_str()][..]);
        answers.push(match provider {
            Provider::Anthropic => anthropic::reply(&["Next."], &[call]),
            _ => openai::reply(&["Next."], &[call]),
        });
    }
    answers.push(match provider {
        Provider::Anthropic => anthropic::reply(&["Done."], &[]),
        _ => openai::reply(&["Done."], &[]),
    });
    answers
}

async fn anthropic_turn(prompt_cache: bool) -> (Vec<Value>, f64, Vec<Event>) {
    let meter = Arc::new(Mutex::new(AnthropicMeter::default()));
    let fake =
        FakeModel::start_metered(script(Provider::Anthropic), Meter::Anthropic(meter.clone()))
            .await;
    let mut config = config(Provider::Anthropic, &fake.base);
    config.prompt_cache = prompt_cache;
    let host = Host::new();
    let ended = host
        .turn(&ModelDriver::new(config), &prompt("Work through it."))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let counted = meter.lock().unwrap().counted.clone();
    assert_eq!(counted.len(), STEPS);
    let bodies = fake.requests().into_iter().map(|r| r.body).collect();
    (bodies, read_share(&counted), host.take_events())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_reads_most_of_a_30_step_turn_from_the_cache() {
    let (bodies, share, events) = anthropic_turn(true).await;
    assert!(
        share >= 0.85,
        "only {:.1}% read from the cache",
        share * 100.0
    );
    for body in &bodies {
        let marks = body.to_string().matches("\"cache_control\"").count();
        assert!((2..=4).contains(&marks), "{marks} breakpoints");
        // The system prompt never changed, though the model `cd`ed.
        assert_eq!(body["system"], bodies[0]["system"]);
        assert_eq!(body["tools"], bodies[0]["tools"]);
    }
    // The last user message carries a rolling breakpoint.
    let last = bodies.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert!(last["content"].as_array().unwrap().last().unwrap()["cache_control"].is_object());
    // The reads reach the usage report (`usage_update`'s `_meta`).
    let cached: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Cached(read, written) => Some((*read, *written)),
            _ => None,
        })
        .collect();
    let reads = cached.iter().filter(|(read, _)| *read > 0).count();
    assert!(reads >= STEPS - 2, "{cached:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cache_hints_anthropic_reads_nothing_from_the_cache() {
    let (bodies, share, events) = anthropic_turn(false).await;
    assert_eq!(share, 0.0);
    assert!(bodies
        .iter()
        .all(|b| !b.to_string().contains("cache_control")));
    assert!(!events.iter().any(|e| matches!(e, Event::Cached(..))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_openai_request_begins_with_the_previous_requests_messages() {
    let meter = Arc::new(Mutex::new(OpenAiMeter::default()));
    let mut answers = script(Provider::OpenAi);
    answers.push(openai::reply(&["Second turn."], &[]));
    answers.push(openai::reply(&["Third turn."], &[]));
    let fake = FakeModel::start_metered(answers, Meter::OpenAi(meter.clone())).await;
    let host = Host::new();
    let driver = ModelDriver::new(config(Provider::OpenAi, &fake.base));
    for text in ["Work through it.", "And now?", "Once more."] {
        let ended = host.turn(&driver, &prompt(text)).await;
        assert_eq!(ended, Ok(StopReason::EndTurn));
    }
    let bodies: Vec<Value> = fake.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), STEPS + 2);
    for pair in bodies.windows(2) {
        let before = pair[0]["messages"].as_array().unwrap();
        let after = pair[1]["messages"].as_array().unwrap();
        assert!(after.len() > before.len());
        assert_eq!(after[..before.len()], before[..], "the prefix changed");
        assert_eq!(pair[1]["prompt_cache_key"], "acp-bash-s1");
    }
    // The `cd` shows in the next prompt's note; the system prompt never changes.
    for body in &bodies {
        assert_eq!(body["messages"][0], bodies[0]["messages"][0]);
    }
    let user = |body: &Value| -> String {
        let messages = body["messages"].as_array().unwrap();
        let last_user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
        last_user["content"].as_str().unwrap().to_string()
    };
    let root = host.dir.path().canonicalize().unwrap();
    assert_eq!(user(&bodies[0]), "Work through it.");
    let note = user(&bodies[STEPS]);
    assert!(
        note.starts_with(&format!(
            "[Environment changed since the system prompt: commands now start in {}.]",
            root.join("sub").display()
        )),
        "{note}"
    );
    assert!(note.ends_with("\n\nAnd now?"), "{note}");
    assert_eq!(user(&bodies[STEPS + 1]), "Once more.", "nothing changed");
    let counted = meter.lock().unwrap().counted.clone();
    let share = read_share(&counted);
    assert!(
        share >= 0.85,
        "only {:.1}% read from the cache",
        share * 100.0
    );
}

// The meter itself: what the fakes count is what the APIs document.

#[test]
fn anthropic_reads_only_up_to_a_breakpoint_it_wrote_before() {
    let big = "w".repeat(5000);
    let body = |marks: bool, n: usize| {
        let mark = |b: Value| {
            let mut b = b;
            if marks {
                b["cache_control"] = json!({"type": "ephemeral"});
            }
            b
        };
        let mut messages = Vec::new();
        for i in 0..n {
            let block = json!({"type": "text", "text": format!("{big}{i}")});
            let block = if i + 1 == n { mark(block) } else { block };
            messages.push(json!({"role": "user", "content": [block]}));
        }
        json!({"tools": [], "system": "s", "messages": messages})
    };
    let mut meter = AnthropicMeter::default();
    let first = meter.count(&body(true, 1));
    assert_eq!((first.read, first.written), (0, first.total));
    let second = meter.count(&body(true, 2));
    assert_eq!(second.read, first.total);
    assert_eq!(second.written, second.total - first.total);
    let mut unmarked = AnthropicMeter::default();
    unmarked.count(&body(false, 1));
    assert_eq!(unmarked.count(&body(false, 2)).read, 0);
}

#[test]
fn openai_reads_the_longest_earlier_prefix_in_steps_of_128() {
    let big = "w".repeat(5000);
    let body = |n: usize, first: &str| {
        let mut messages = vec![json!({"role": "system", "content": first})];
        for i in 0..n {
            messages.push(json!({"role": "user", "content": format!("{big}{i}")}));
        }
        json!({"model": "m", "tools": [], "messages": messages, "prompt_cache_key": "k"})
    };
    let mut meter = OpenAiMeter::default();
    let first = meter.count(&body(1, "a"));
    assert_eq!(first.read, 0);
    let second = meter.count(&body(2, "a"));
    assert_eq!(second.read, first.total / 128 * 128);
    assert_eq!(
        meter.count(&body(3, "b")).read,
        0,
        "a changed system message"
    );
}
