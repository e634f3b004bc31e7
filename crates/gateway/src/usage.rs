//! What an answer used, read as it passes: its tokens from the providers' usage objects
//! (or estimated from its text when the server gave none), when its first token came, and
//! what it costs the limiter and the task.

use std::time::Duration;

use plait_core::state::Usage;
use plait_llm::conversation::TurnUsage;
use plait_llm::http::Timing;
use plait_llm::limiter::Cost;
use plait_llm::provider::{default_prices, ProviderKind, ProviderSettings};
use plait_llm::{anthropic, estimate, sse};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::endpoints::MAX_BODY;

/// What an answer said, read as it passes: its usage, when its first token came, and
/// its events (or its JSON) for the transcript.
pub(crate) struct Tally {
    sse: Option<sse::Decoder>,
    /// Whether the answer is one to account for (a transcript is kept).
    keep: bool,
    events: Vec<Value>,
    json: Vec<u8>,
    first: Option<Duration>,
    seen: Vec<Value>,
}

impl Tally {
    pub(crate) fn new(streamed: bool, keep: bool) -> Tally {
        Tally {
            sse: streamed.then(sse::Decoder::default),
            keep,
            events: Vec::new(),
            json: Vec::new(),
            first: None,
            seen: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, chunk: &[u8], started: Instant) {
        if !self.keep {
            return;
        }
        match &mut self.sse {
            Some(decoder) => {
                for event in decoder.push(chunk) {
                    self.event(event, started);
                }
            }
            None => {
                if self.json.len() + chunk.len() <= MAX_BODY {
                    self.json.extend_from_slice(chunk);
                }
            }
        }
    }

    fn event(&mut self, event: sse::Event, started: Instant) {
        let data: Value =
            serde_json::from_str(&event.data).unwrap_or_else(|_| Value::String(event.data.clone()));
        if self.first.is_none() && is_content(&event.name, &data) {
            self.first = Some(started.elapsed());
        }
        if has_usage(&data) {
            self.seen.push(data.clone());
        }
        self.events.push(json!({"event": event.name, "data": data}));
    }

    /// The answer's tokens (`None` when it gave none) and what the transcript keeps of it.
    pub(crate) fn finish(&mut self, kind: ProviderKind) -> (Option<TurnUsage>, Value) {
        if let Some(mut decoder) = self.sse.take() {
            if let Some(event) = decoder.finish() {
                self.event(event, Instant::now());
            }
            let response = json!({"events": std::mem::take(&mut self.events)});
            return (usage_of(&self.seen, kind), response);
        }
        let value: Value = serde_json::from_slice(&self.json)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&self.json).into_owned()));
        (usage_of(std::slice::from_ref(&value), kind), value)
    }
}

/// Whether an event carries the answer's first content: a text or tool-input delta.
fn is_content(name: &str, data: &Value) -> bool {
    let kind = data["type"].as_str().unwrap_or(name);
    kind == "content_block_delta"
        || (kind.starts_with("response.") && kind.ends_with(".delta"))
        || data
            .pointer("/choices/0/delta")
            .is_some_and(|d| !d["content"].is_null() || !d["tool_calls"].is_null())
}

/// The usage objects a value carries: Anthropic's (at the top, or in `message_start`'s
/// message), OpenAI's chat completions' and responses'.
fn usages(value: &Value) -> impl Iterator<Item = &Value> {
    [
        value.get("usage"),
        value.pointer("/message/usage"),
        value.pointer("/response/usage"),
    ]
    .into_iter()
    .flatten()
    .filter(|u| u.is_object())
}

fn has_usage(value: &Value) -> bool {
    usages(value).next().is_some()
}

/// An answer's tokens from the usage its values carry. Anthropic's come in parts
/// (`message_start`, then `message_delta`'s running output count), each the total so far;
/// OpenAI's prompt counts include what was read from the cache, kept apart here as
/// plait's own requests keep it.
pub(crate) fn usage_of(values: &[Value], kind: ProviderKind) -> Option<TurnUsage> {
    let mut total = TurnUsage::default();
    let mut any = false;
    for usage in values.iter().flat_map(usages) {
        let get = |p: &str| usage.pointer(p).and_then(Value::as_u64);
        if let Some(prompt) = get("/prompt_tokens") {
            let cached = get("/prompt_tokens_details/cached_tokens").unwrap_or(0);
            total.input = prompt.saturating_sub(cached);
            total.cache_read = cached;
            total.output = get("/completion_tokens").unwrap_or(0);
        } else if kind == ProviderKind::Openai || usage.get("input_tokens_details").is_some() {
            let cached = get("/input_tokens_details/cached_tokens").unwrap_or(0);
            total.input = get("/input_tokens").unwrap_or(0).saturating_sub(cached);
            total.cache_read = cached;
            total.output = get("/output_tokens").unwrap_or(0);
        } else {
            let most = |field: &mut u64, p: &str| *field = (*field).max(get(p).unwrap_or(0));
            most(&mut total.input, "/input_tokens");
            most(&mut total.output, "/output_tokens");
            most(&mut total.cache_creation, "/cache_creation_input_tokens");
            most(&mut total.cache_read, "/cache_read_input_tokens");
        }
        any = true;
    }
    any.then_some(total)
}

impl Tally {
    /// How long after the request the answer's first content came, if it came.
    pub(crate) fn first(&self) -> Option<Duration> {
        self.first
    }
}

/// What the limiter reserves for `request`: its input as estimated (about four bytes a
/// token, less what Anthropic reads from its cache) and its output at most.
pub(crate) fn reserved(provider: &ProviderSettings, request: &Value) -> Cost {
    Cost {
        input: match provider.kind {
            ProviderKind::Anthropic => anthropic::uncached_estimate(request),
            ProviderKind::Openai => (request.to_string().len() / 4) as u64,
        },
        output: ["max_tokens", "max_completion_tokens", "max_output_tokens"]
            .iter()
            .find_map(|k| request[*k].as_u64())
            .unwrap_or(u64::from(provider.max_tokens)),
    }
}

/// What an answer whose server told nothing of its usage is taken to have used: its input
/// and output estimated from their text, and marked so.
pub(crate) fn estimated(request: &Value, response: &Value) -> TurnUsage {
    TurnUsage {
        input: estimate::input_tokens(request),
        output: estimate::output_tokens_of(response),
        estimated: true,
        ..TurnUsage::default()
    }
}

/// What an answer's tokens take from the limiter's buckets.
pub(crate) fn limit_cost(kind: ProviderKind, u: TurnUsage) -> Cost {
    Cost {
        input: match kind {
            // Reads from the cache do not count against Anthropic's input limit.
            ProviderKind::Anthropic => u.input + u.cache_creation,
            ProviderKind::Openai => u.input + u.cache_creation + u.cache_read,
        },
        output: u.output,
    }
}

/// One answered request's usage, for the task's meter: `tokens` at the prices of the
/// model `request` names (the provider's where plait knows none), and its `timing`.
pub(crate) fn answered(
    provider: &ProviderSettings,
    request: &Value,
    tokens: TurnUsage,
    timing: &Timing,
) -> Usage {
    let model = request["model"].as_str().unwrap_or("");
    let prices = default_prices(model).or(provider.prices);
    let mut usage = Usage {
        cost_usd: prices.map(|_| 0.0),
        ..Usage::default()
    };
    plait_llm::account_turn(&mut usage, prices, tokens, timing);
    usage
}
