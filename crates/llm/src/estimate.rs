//! What an answer used when the server does not say: llama.cpp's server, older vLLM and
//! some proxies send no `usage` in a stream, whatever the request asks. A count that is
//! always zero would hold no `--max-cost` and tell nobody, so the tokens are estimated from
//! the text, as the limiter estimates a request's input before it is sent (about four bytes
//! a token), and the figure is marked estimated wherever it shows.

use serde_json::Value;

use super::conversation::{Block, Reply};

/// Bytes a token, about, in the text models read and write.
const BYTES_PER_TOKEN: usize = 4;

/// The input tokens of request `body`, estimated: its JSON's size.
pub fn input_tokens(body: &Value) -> u64 {
    (body.to_string().len() / BYTES_PER_TOKEN) as u64
}

/// The output tokens of an answer that said `content`: its text, and each tool call's
/// name and input.
pub fn output_tokens(content: &[Block]) -> u64 {
    let bytes: usize = content
        .iter()
        .map(|b| match b {
            Block::Text(text) => text.len(),
            Block::ToolUse { name, input, .. } => {
                name.len()
                    + match input {
                        Ok(v) => v.to_string().len(),
                        Err(raw) => raw.len(),
                    }
            }
            Block::ToolResult { .. } => 0,
        })
        .sum();
    (bytes.div_ceil(BYTES_PER_TOKEN)) as u64
}

/// The output tokens of an answer as it came over the wire (a whole body, or a stream's
/// events): the text of what the model wrote in it, wherever the wire puts it.
pub fn output_tokens_of(answer: &Value) -> u64 {
    (written(answer).div_ceil(BYTES_PER_TOKEN)) as u64
}

/// Bytes of what the model wrote in `value`: the strings under the keys both wires put
/// text and tool input under.
fn written(value: &Value) -> usize {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(key, v)| match (key.as_str(), v) {
                ("content" | "text" | "arguments" | "partial_json" | "delta", Value::String(s)) => {
                    s.len()
                }
                ("arguments" | "input", Value::Object(_)) => v.to_string().len(),
                _ => written(v),
            })
            .sum(),
        Value::Array(items) => items.iter().map(written).sum(),
        _ => 0,
    }
}

/// Fills in `reply`'s usage from `body` and its content when the server gave none, and
/// marks it estimated.
pub fn fill(reply: &mut Reply, body: &Value) {
    if reply.usage_known {
        return;
    }
    reply.usage.input = input_tokens(body);
    reply.usage.output = output_tokens(&reply.content);
    reply.usage.estimated = true;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::conversation::{Stop, TurnUsage};

    #[test]
    fn an_answer_without_usage_is_estimated_from_its_text_and_marked() {
        let body =
            json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(400)}]});
        let mut reply = Reply {
            content: vec![
                Block::Text("y".repeat(40)),
                Block::ToolUse {
                    id: "c".into(),
                    name: "run".into(),
                    input: Ok(json!({"command": "ls"})),
                },
            ],
            stop: Stop::ToolUse,
            usage: TurnUsage::default(),
            usage_known: false,
        };
        fill(&mut reply, &body);
        assert!(reply.usage.estimated);
        assert_eq!(reply.usage.input, body.to_string().len() as u64 / 4);
        assert_eq!(reply.usage.output, (40 + 3 + 16_u64).div_ceil(4));
        // What the server said stays as it said it.
        let mut known = reply.clone();
        known.usage = TurnUsage {
            input: 7,
            ..TurnUsage::default()
        };
        known.usage_known = true;
        fill(&mut known, &body);
        assert_eq!((known.usage.input, known.usage.estimated), (7, false));
    }

    #[test]
    fn what_the_model_wrote_is_read_from_either_wire() {
        let chunks = json!([
            {"data": {"choices": [{"delta": {"role": "assistant", "content": "abcd"}}]}},
            {"data": {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "run", "arguments": "{\"a\":1}"}}]}}]}},
            {"data": {"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": "{\"b\""}}},
        ]);
        // "abcd", the arguments (7), the partial JSON (4); names and roles are not text.
        assert_eq!(written(&chunks), 4 + 7 + 4);
        assert_eq!(output_tokens_of(&chunks), 4);
    }
}
