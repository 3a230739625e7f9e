//! Counts prompt-cache reads the way the real APIs do, for the fake providers
//! (`fake_model::FakeModel::start_metered`) and the token-economy benchmark.
//!
//! - Anthropic (docs: "prompt caching"): the prompt is the tools, then the system blocks,
//!   then the messages' content blocks, in that order. A `cache_control` block is a breakpoint:
//!   the prefix up to and including it is written to the cache (if it has at least 1024
//!   tokens); a request reads the longest cached prefix that ends at one of its breakpoints or
//!   at one of the 20 blocks before each. Without breakpoints, nothing is read or written.
//! - OpenAI (docs: "prompt caching"): automatic for prompts of 1024 tokens or more; the longest
//!   prefix (in whole messages here) that an earlier request of the same `prompt_cache_key` sent,
//!   counted in steps of 128 tokens.
//!
//! Tokens are estimated as a quarter of the JSON bytes (rounded up) of each block or message.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use serde_json::{json, Value};

/// The fewest tokens a cached prefix has (both APIs).
pub const MIN_CACHED: u64 = 1024;

/// How far before a breakpoint Anthropic looks for a cached prefix, in blocks.
pub const LOOKBACK: usize = 20;

/// What one request cost, in tokens, as the meter counted it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counted {
    /// Every input token.
    pub total: u64,
    /// Of them, read from the cache.
    pub read: u64,
    /// Of them, written to the cache (Anthropic).
    pub written: u64,
    /// The request body's bytes.
    pub bytes: u64,
}

/// The tokens of `value`'s JSON text: a quarter of its bytes, rounded up.
pub fn tokens(value: &Value) -> u64 {
    (value.to_string().len() as u64).div_ceil(4)
}

fn without_mark(block: &Value) -> Value {
    let mut block = block.clone();
    if let Some(object) = block.as_object_mut() {
        object.remove("cache_control");
    }
    block
}

/// A body's units in order, each with its cumulative token count, the hash of the prefix
/// ending with it, and whether it is a breakpoint.
fn units(units: Vec<(Value, bool)>) -> Vec<(u64, u64, bool)> {
    let mut hasher = DefaultHasher::new();
    let mut total = 0;
    units
        .into_iter()
        .map(|(unit, marked)| {
            let unit = without_mark(&unit);
            unit.to_string().hash(&mut hasher);
            total += tokens(&unit);
            (total, hasher.finish(), marked)
        })
        .collect()
}

/// The Anthropic cache of one fake server.
#[derive(Debug, Default)]
pub struct AnthropicMeter {
    cached: HashSet<u64>,
    /// Every request counted, in order.
    pub counted: Vec<Counted>,
}

impl AnthropicMeter {
    /// Counts `body` (a messages request) and caches what its breakpoints write.
    pub fn count(&mut self, body: &Value) -> Counted {
        let marked = |v: &Value| v.get("cache_control").is_some();
        let mut list = Vec::new();
        for tool in body["tools"].as_array().into_iter().flatten() {
            list.push((tool.clone(), marked(tool)));
        }
        match &body["system"] {
            Value::String(text) => list.push((json!({"type": "text", "text": text}), false)),
            Value::Array(blocks) => {
                for block in blocks {
                    list.push((block.clone(), marked(block)));
                }
            }
            _ => {}
        }
        for message in body["messages"].as_array().into_iter().flatten() {
            match &message["content"] {
                Value::String(text) => list.push((
                    json!({"role": message["role"], "type": "text", "text": text}),
                    false,
                )),
                Value::Array(blocks) => {
                    for block in blocks {
                        list.push((
                            json!({"role": message["role"], "block": without_mark(block)}),
                            marked(block),
                        ));
                    }
                }
                _ => {}
            }
        }
        let units = units(list);
        let total = units.last().map_or(0, |u| u.0);
        let breakpoints: Vec<usize> = (0..units.len()).filter(|&i| units[i].2).collect();
        let mut read = 0;
        for &b in &breakpoints {
            for unit in &units[b.saturating_sub(LOOKBACK)..=b] {
                if self.cached.contains(&unit.1) {
                    read = read.max(unit.0);
                }
            }
        }
        let mut written = 0;
        for &b in &breakpoints {
            if units[b].0 >= MIN_CACHED && self.cached.insert(units[b].1) {
                written = written.max(units[b].0.saturating_sub(read));
            }
        }
        let counted = Counted {
            total,
            read,
            written,
            bytes: body.to_string().len() as u64,
        };
        self.counted.push(counted);
        counted
    }

    /// The usage object of a `message_start` event for `counted`.
    pub fn usage(counted: &Counted) -> Value {
        json!({
            "input_tokens": counted.total - counted.read - counted.written,
            "cache_read_input_tokens": counted.read,
            "cache_creation_input_tokens": counted.written,
            "output_tokens": 1,
        })
    }
}

/// The OpenAI cache of one fake server: prefixes seen, by `prompt_cache_key`.
#[derive(Debug, Default)]
pub struct OpenAiMeter {
    seen: HashMap<String, HashSet<u64>>,
    /// Every request counted, in order.
    pub counted: Vec<Counted>,
}

impl OpenAiMeter {
    /// Counts `body` (a chat-completions request) and remembers its prefixes.
    pub fn count(&mut self, body: &Value) -> Counted {
        let key = body["prompt_cache_key"].as_str().unwrap_or("").to_string();
        let mut list = vec![(
            json!({"tools": body["tools"], "model": body["model"]}),
            false,
        )];
        for message in body["messages"].as_array().into_iter().flatten() {
            list.push((message.clone(), false));
        }
        let units = units(list);
        let total = units.last().map_or(0, |u| u.0);
        let seen = self.seen.entry(key).or_default();
        let longest = units
            .iter()
            .filter(|u| seen.contains(&u.1))
            .map(|u| u.0)
            .max()
            .unwrap_or(0);
        let read = if longest >= MIN_CACHED {
            longest / 128 * 128
        } else {
            0
        };
        seen.extend(units.iter().map(|u| u.1));
        let counted = Counted {
            total,
            read,
            written: 0,
            bytes: body.to_string().len() as u64,
        };
        self.counted.push(counted);
        counted
    }

    /// The `usage` object of the last chunk for `counted`.
    pub fn usage(counted: &Counted) -> Value {
        json!({
            "prompt_tokens": counted.total,
            "completion_tokens": 20,
            "total_tokens": counted.total + 20,
            "prompt_tokens_details": {"cached_tokens": counted.read},
        })
    }
}

/// The share of input tokens read from the cache over `counted`.
pub fn read_share(counted: &[Counted]) -> f64 {
    let total: u64 = counted.iter().map(|c| c.total).sum();
    let read: u64 = counted.iter().map(|c| c.read).sum();
    if total == 0 {
        0.0
    } else {
        read as f64 / total as f64
    }
}
