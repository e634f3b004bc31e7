//! What an answer used when the server does not say: llama.cpp's server, older vLLM and
//! some proxies send no `usage` in a stream, whatever the request asks. A count that is
//! always zero would hold no `--max-cost` and tell nobody, so the tokens are estimated from
//! the text, about four bytes a token, and the figure is marked estimated wherever it shows.
//!
//! The input is the text the model reads, not the request's JSON: its messages' words, the
//! tools' names, descriptions and schemas, and a few tokens a message for the chat
//! template's markers; ids, roles and the envelope's keys are not. Measured against
//! llama-cpp-python's own counts on plait's three-task plan (18 requests), the JSON's size
//! came out 26% over, this 1% under.

use serde_json::Value;

use super::conversation::Reply;
use super::provider::{default_prices, ProviderSettings};

/// Bytes a token, about, in the text models read and write.
const BYTES_PER_TOKEN: usize = 4;

/// Tokens a chat template spends on each message's markers (role, start, end).
const PER_MESSAGE: u64 = 4;

/// Keys of a request whose values the model does not read as text.
const ENVELOPE: &[&str] = &[
    "id",
    "tool_call_id",
    "tool_use_id",
    "type",
    "role",
    "model",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "tool_choice",
    "cache_control",
    "is_error",
];

/// The input tokens of request `body` (either wire), estimated from the text it holds.
pub fn input_tokens(body: &Value) -> u64 {
    let messages = body["messages"].as_array().map_or(0, Vec::len) as u64
        + u64::from(body.get("system").is_some());
    (read(body) / BYTES_PER_TOKEN) as u64 + PER_MESSAGE * messages
}

/// Bytes of what a model reads in `value`: strings, and schemas and tool input as JSON.
fn read(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(read).sum(),
        Value::Object(map) => map
            .iter()
            .filter(|(key, _)| !ENVELOPE.contains(&key.as_str()))
            .map(|(key, v)| match (key.as_str(), v) {
                ("parameters" | "input_schema" | "input" | "arguments", Value::Object(_)) => {
                    v.to_string().len()
                }
                _ => read(v),
            })
            .sum(),
        _ => 0,
    }
}

/// The output tokens of an answer as it came over the wire (a whole body, or a stream's
/// events): the text of what the model wrote in it, wherever the wire puts it.
pub fn output_tokens_of(answer: &Value) -> u64 {
    (written(answer).div_ceil(BYTES_PER_TOKEN)) as u64
}

/// Bytes of what the model wrote in `value`: the strings under the keys both wires put
/// text, tool names and tool input under.
fn written(value: &Value) -> usize {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(key, v)| match (key.as_str(), v) {
                (
                    "content" | "text" | "arguments" | "partial_json" | "delta" | "name",
                    Value::String(s),
                ) => s.len(),
                ("arguments" | "input", Value::Object(_)) => v.to_string().len(),
                _ => written(v),
            })
            .sum(),
        Value::Array(items) => items.iter().map(written).sum(),
        _ => 0,
    }
}

/// Fills in `reply`'s usage, when the server gave none, from its request `body` and the
/// answer as it came over the wire (`answer`: its body, or its stream's events), and marks
/// it estimated.
pub fn fill(reply: &mut Reply, body: &Value, answer: &Value) {
    if reply.usage_known {
        return;
    }
    reply.usage.input = input_tokens(body);
    reply.usage.output = output_tokens_of(answer);
    reply.usage.estimated = true;
}

/// The most request `body` may cost, in dollars, for a budget to hold while it is in
/// flight: its input estimated at three bytes a token (denser than the four an estimate of
/// what was used takes) and priced as written to the cache (the dearer input), and its
/// `max_tokens` of output (the provider's where it names none); 0 where no prices are known
/// for its model.
pub fn worst_usd(provider: &ProviderSettings, body: &Value) -> f64 {
    let model = body["model"].as_str().unwrap_or("");
    let Some(p) = default_prices(model).or(provider.prices) else {
        return 0.0;
    };
    let input = input_tokens(body) * BYTES_PER_TOKEN as u64 / 3;
    let output = ["max_tokens", "max_completion_tokens", "max_output_tokens"]
        .iter()
        .find_map(|k| body[*k].as_u64())
        .unwrap_or(u64::from(provider.max_tokens));
    let write = p.cache_write.unwrap_or(p.input * 1.25);
    (input as f64 * p.input.max(write) + output as f64 * p.output) / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::conversation::{Block, Stop, TurnUsage};

    #[test]
    fn an_answer_without_usage_is_estimated_from_its_text_and_marked() {
        let body =
            json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(400)}]});
        // As the server wrote it: the arguments' spaces are the model's tokens too.
        let answer = json!({"choices": [{"message": {"role": "assistant", "content": "y".repeat(40),
            "tool_calls": [{"id": "c", "function": {"name": "run", "arguments": "{ \"command\": \"ls\" }"}}]}}]});
        let mut reply = Reply {
            content: vec![Block::Text("y".repeat(40))],
            stop: Stop::ToolUse,
            usage: TurnUsage::default(),
            usage_known: false,
        };
        fill(&mut reply, &body, &answer);
        assert!(reply.usage.estimated);
        // 400 bytes of text, one message.
        assert_eq!(reply.usage.input, 100 + PER_MESSAGE);
        assert_eq!(reply.usage.output, (40 + 3 + 19_u64).div_ceil(4));
        // What the server said stays as it said it.
        let mut known = reply.clone();
        known.usage = TurnUsage {
            input: 7,
            ..TurnUsage::default()
        };
        known.usage_known = true;
        fill(&mut known, &body, &answer);
        assert_eq!((known.usage.input, known.usage.estimated), (7, false));
    }

    #[test]
    fn the_input_is_the_text_the_model_reads_not_the_envelope() {
        let tools = json!([{"type": "function", "function": {"name": "run", "description": "d".repeat(40),
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]);
        let schema = tools[0]["function"]["parameters"].to_string().len();
        let body = json!({"model": "m", "stream": true, "tools": tools, "messages": [
            {"role": "system", "content": "s".repeat(100)},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0123456789", "type": "function",
                "function": {"name": "run", "arguments": "{\"command\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "call_0123456789", "content": "a.py"},
        ]});
        let text = 3 + 40 + schema + 100 + 3 + 16 + 4;
        assert_eq!(input_tokens(&body), (text / 4) as u64 + 3 * PER_MESSAGE);
        // An Anthropic body: its system and blocks, the tool's input as JSON.
        let body = json!({"model": "m", "system": [{"type": "text", "text": "s".repeat(40), "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "run", "input": {"command": "ls"}}]}]});
        assert_eq!(
            input_tokens(&body),
            ((40 + 3 + 16) / 4) as u64 + 2 * PER_MESSAGE
        );
    }

    #[test]
    fn what_the_model_wrote_is_read_from_either_wire() {
        let chunks = json!([
            {"data": {"choices": [{"delta": {"role": "assistant", "content": "abcd"}}]}},
            {"data": {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "run", "arguments": "{\"a\":1}"}}]}}]}},
            {"data": {"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": "{\"b\""}}},
        ]);
        // "abcd", the tool's name (the model writes it) and arguments (7), the partial JSON
        // (4); roles and types are not text.
        assert_eq!(written(&chunks), 4 + 3 + 7 + 4);
        assert_eq!(output_tokens_of(&chunks), 5);
    }
}
