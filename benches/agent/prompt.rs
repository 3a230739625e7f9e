// The model driver's system prompt and tools: their size in bytes and estimated tokens, so that
// a change to `src/driver/model/prompt.md` shows what it costs on every request. The tokens are
// an estimate (bytes / 4, OpenAI's rule of thumb for English text and code; no tokenizer is
// available offline): compare runs with each other, not with a provider's bill.

use acp_bash::driver::model::{project_docs, system, tools};
use acp_bash::exec::{Engine, EngineConfig};
use acp_bash::sandbox::Mode;

use super::stats::Row;
use super::Bench;

fn row(metric: &str, bytes: usize, target: &str, met: Option<bool>) -> Row {
    Row {
        case: "model-prompt".into(),
        metric: metric.into(),
        median: format!("{bytes} B ≈ {} tokens", bytes.div_ceil(4)),
        baseline: "-".into(),
        ratio: "-".into(),
        target: target.into(),
        met,
    }
}

pub fn size(bench: &Bench) -> Vec<Row> {
    let engine = Engine::new(EngineConfig::default().sandbox_mode(Mode::Full));
    let session = engine
        .session(bench.session_dir())
        .expect("a session on the bench's directory");
    let prompt = system::system_prompt(&session, 16 * 1024);
    let tools: usize = tools::specs()
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    let template = system::PROMPT_TEMPLATE.len();
    vec![
        // The prompt as sent (no AGENTS.md in the bench's directory).
        row(
            "system prompt",
            prompt.len(),
            "< 6000 B",
            Some(prompt.len() < 6000),
        ),
        row("prompt.md template", template, "-", None),
        row("tool definitions", tools, "-", None),
        row(
            "AGENTS.md bound",
            project_docs::MAX_INSTRUCTION_BYTES,
            "-",
            None,
        ),
    ]
}
