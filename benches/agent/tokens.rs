// The token economy of the model driver: the bytes and tokens a scripted 30-step turn sends,
// and the share of input tokens the provider reads from its prompt cache, counted the way the
// APIs do (`tests/it/support/cache_meter.rs`, the same meter as the tests' fake providers).
//
// The requests are the driver's own bodies (`anthropic::body`, `openai::body`) over the
// conversation a 30-step turn builds (a prompt; 29 replies with one bash call each and their
// results, the fourth a `cd`; an answer), then a second prompt. "after": with the session's
// cache hints (breakpoints, `prompt_cache_key`) and the system prompt kept for the session;
// "before" (main at 0da851d): no hints, and the system prompt made again at the second prompt,
// where it names the new directory. Tokens are estimated as bytes / 4.

use acp_bash::driver::model::{anthropic, openai, tools, Message, ModelRequest, ToolCall};

#[path = "../../tests/it/support/cache_meter.rs"]
#[allow(dead_code)]
mod cache_meter;

use super::stats::Row;
use cache_meter::{read_share, AnthropicMeter, Counted, OpenAiMeter};

const STEPS: usize = 30;

fn system(cwd: &str) -> String {
    // As long as the driver's (about 2 KB), with the directory it names.
    format!(
        "You are a coding agent working in the user's project through one tool: bash. {}\n\
         - The project's directory is /work/project; commands start in {cwd}.",
        "Each result is the output, then a status line. ".repeat(40)
    )
}

/// Every request of the scripted session: (the system prompt, the messages so far).
fn requests(cached_system: bool) -> Vec<(String, Vec<Message>)> {
    let mut out = Vec::new();
    let mut messages = vec![Message::User("Work through it.".into())];
    let first_system = system("/work/project");
    for step in 0..STEPS {
        out.push((first_system.clone(), messages.clone()));
        if step == STEPS - 1 {
            messages.push(Message::assistant("Done.", vec![]));
            break;
        }
        let command = match step {
            3 => "mkdir -p sub && cd sub && pwd".to_string(),
            _ => format!("printf 'step {step} line %s\\n' $(seq 1 12)"),
        };
        let id = format!("toolu_{step:02}");
        let arguments = format!("{{\"command\":{command:?}}}");
        messages.push(Message::assistant(
            "Next.",
            vec![ToolCall::new(id.clone(), "bash", arguments)],
        ));
        let output: String = match step {
            3 => "/work/project/sub\n".into(),
            _ => (1..=12)
                .map(|n| format!("step {step} line {n}\n"))
                .collect(),
        };
        messages.push(Message::ToolResult {
            call_id: id,
            content: format!("{output}[exit code: 0]"),
            is_error: false,
        });
    }
    messages.push(Message::User("And now?".into()));
    let second_system = match cached_system {
        true => first_system,
        false => system("/work/project/sub"),
    };
    out.push((second_system, messages));
    out
}

fn count(anthropic_api: bool, hints: bool) -> Vec<Counted> {
    let specs = tools::specs();
    let key = hints.then_some("acp-bash-bench");
    let mut a = AnthropicMeter::default();
    let mut o = OpenAiMeter::default();
    requests(hints)
        .iter()
        .map(|(system, messages)| {
            let request = ModelRequest::new("bench", system, messages, &specs, 8192).cache_key(key);
            if anthropic_api {
                a.count(&anthropic::body(&request))
            } else {
                let options = openai::Options::for_base("https://api.openai.com/v1");
                o.count(&openai::body(&request, options))
            }
        })
        .collect()
}

pub fn economy(_bench: &super::Bench) -> super::client::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (name, anthropic_api) in [("anthropic", true), ("openai", false)] {
        let after = count(anthropic_api, true);
        let before = count(anthropic_api, false);
        let sum = |c: &[Counted], f: fn(&Counted) -> u64| c.iter().map(f).sum::<u64>();
        let row =
            |metric: &str, after: String, before: String, ratio: String, target: &str, met| Row {
                case: format!("tokens-{name}"),
                metric: metric.to_string(),
                median: after,
                baseline: before,
                ratio,
                target: target.to_string(),
                met,
            };
        let (ab, bb) = (sum(&after, |c| c.bytes), sum(&before, |c| c.bytes));
        rows.push(row(
            &format!("bytes sent, {} requests", after.len()),
            ab.to_string(),
            bb.to_string(),
            format!("{:.3}", ab as f64 / bb as f64),
            "-",
            None,
        ));
        let (at, bt) = (sum(&after, |c| c.total), sum(&before, |c| c.total));
        rows.push(row(
            "input tokens sent (bytes/4)",
            at.to_string(),
            bt.to_string(),
            format!("{:.3}", at as f64 / bt as f64),
            "-",
            None,
        ));
        let (ar, br) = (read_share(&after), read_share(&before));
        let uncached = |c: &[Counted]| sum(c, |c| c.total - c.read);
        rows.push(row(
            "share of input read from the cache",
            format!("{:.1}%", ar * 100.0),
            format!("{:.1}%", br * 100.0),
            format!("uncached {} vs {}", uncached(&after), uncached(&before)),
            if anthropic_api { ">= 85%" } else { "-" },
            anthropic_api.then_some(ar >= 0.85),
        ));
    }
    Ok(rows)
}
