//! The Anthropic Messages API: request bodies, replies, and the streaming events that
//! build a reply (`message_start`, `content_block_*`, `message_delta`, `message_stop`,
//! `ping`, `error`; unknown events are ignored). The shared part of the system prompt is
//! marked for prompt caching, so many agents that share it pay for it once.

use serde_json::{json, Value};

use super::conversation::{
    says_something, Block, Message, Reply, Role, Stop, System, ToolSpec, TurnUsage,
};
use super::sse::{self, Progress};
use crate::provider::ProviderSettings;

/// The version header every request carries.
pub const VERSION: &str = "2023-06-01";

/// The editor tool Claude is trained on, declared by its type.
/// The name of Anthropic's text editor tool, which model agents are given as their editor
/// (on OpenAI-compatible APIs, as a function of the same name).
pub const EDITOR: &str = "str_replace_based_edit_tool";
const EDITOR_TYPE: &str = "text_editor_20250728";

/// The JSON body of a request.
pub fn request_body(
    provider: &ProviderSettings,
    system: &System,
    tools: &[ToolSpec],
    messages: &[Message],
    stream: bool,
) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| {
            if t.name == EDITOR {
                json!({"type": EDITOR_TYPE, "name": t.name})
            } else {
                json!({"name": t.name, "description": t.description, "input_schema": t.schema})
            }
        })
        .collect();
    let mut wire: Vec<Value> = messages.iter().map(message).collect();
    let before =
        Value::Array(tools.clone()).to_string().len() + system.shared.len() + system.task.len();
    if provider.cache_history {
        mark_history(&mut wire, &provider.model, before);
    }
    json!({
        "model": provider.model,
        "max_tokens": provider.max_tokens,
        "system": [
            {"type": "text", "text": system.shared, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": system.task},
        ],
        "messages": wire,
        "tools": tools,
        "stream": stream,
    })
}

/// The input tokens of request `body` that count against an input-tokens limit, estimated
/// before it is sent (about four bytes a token): all but the prefix up to its latest
/// breakpoint before the newest block, which an earlier request wrote to the cache (the
/// shared system prompt, the history the turn before wrote) and which this one reads.
pub fn uncached_estimate(body: &Value) -> u64 {
    let mut blocks: Vec<&Value> = Vec::new();
    for key in ["tools", "system"] {
        blocks.extend(body[key].as_array().into_iter().flatten());
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        match message["content"].as_array() {
            Some(content) => blocks.extend(content),
            None => blocks.push(&message["content"]),
        }
    }
    // Only a prefix the model caches at all: at least its minimum length.
    let least = min_cacheable(body["model"].as_str().unwrap_or("")) as usize * 4;
    let mut total = 0usize;
    let mut cached = 0usize;
    let last = blocks.len().saturating_sub(1);
    for (k, block) in blocks.iter().enumerate() {
        total += block.to_string().len();
        if k < last && block.get("cache_control").is_some() && total >= least {
            cached = total;
        }
    }
    ((total - cached) / 4) as u64
}

/// The shortest prefix, in tokens, that `model` caches; a shorter one is not cached at
/// all, whatever the breakpoints say.
pub fn min_cacheable(model: &str) -> u64 {
    let m = model.to_ascii_lowercase();
    if m.contains("haiku-4-5") || m.contains("opus-4-5") || m.contains("opus-4-6") {
        4096
    } else if m.contains("sonnet-4-6") || m.contains("haiku") {
        2048
    } else {
        1024
    }
}

/// Conversation caching: breakpoints that move with the conversation, so each turn reads
/// its history from the cache and writes only what is new. One on the last block of the
/// newest message, and one where the turn before ended (the cache entry the newest turn
/// reads), each only where the prefix up to it is long enough to be cached (about four
/// bytes a token). With the shared system prompt's, that is three of the API's four.
fn mark_history(wire: &mut [Value], model: &str, before: usize) {
    let least = min_cacheable(model) as usize * 4;
    let mut prefix = Vec::with_capacity(wire.len());
    let mut length = before;
    for m in wire.iter() {
        length += m.to_string().len();
        prefix.push(length);
    }
    let mut marks = Vec::new();
    if let Some(last) = wire.len().checked_sub(1) {
        marks.push(last);
        // The newest turn is [.., user(k), assistant, user(last)]: the turn before ended at k.
        if let Some(before) = last.checked_sub(2) {
            marks.push(before);
        }
    }
    for k in marks {
        if prefix[k] < least {
            continue;
        }
        if let Some(block) = wire[k]["content"]
            .as_array_mut()
            .and_then(|blocks| blocks.last_mut())
        {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
    }
}

fn message(m: &Message) -> Value {
    let content: Vec<Value> = m
        .content
        .iter()
        .map(|b| match b {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::ToolUse { id, name, input } => json!({
                "type": "tool_use",
                "id": id,
                "name": name,
                "input": input.clone().unwrap_or_else(|_| json!({})),
            }),
            Block::ToolResult {
                id,
                content,
                is_error,
            } => json!({
                "type": "tool_result",
                "tool_use_id": id,
                "content": content,
                "is_error": is_error,
            }),
        })
        .collect();
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    json!({"role": role, "content": content})
}

fn stop(reason: Option<&str>) -> Stop {
    match reason {
        Some("end_turn") | Some("stop_sequence") | None => Stop::EndTurn,
        Some("tool_use") => Stop::ToolUse,
        Some("max_tokens") => Stop::MaxTokens,
        Some("pause_turn") => Stop::PauseTurn,
        Some("refusal") => Stop::Refusal,
        Some("model_context_window_exceeded") => Stop::ContextWindow,
        Some(other) => Stop::Other(other.to_string()),
    }
}

fn usage(u: &Value, into: &mut TurnUsage) {
    let get = |k: &str| u.get(k).and_then(Value::as_u64);
    if let Some(v) = get("input_tokens") {
        into.input = v;
    }
    if let Some(v) = get("output_tokens") {
        into.output = v;
    }
    if let Some(v) = get("cache_creation_input_tokens") {
        into.cache_creation = v;
    }
    if let Some(v) = get("cache_read_input_tokens") {
        into.cache_read = v;
    }
}

/// Reads a whole (non-streamed) reply; one without a `stop_reason`, or that says nothing
/// without a reason that explains it, is an `Err`.
pub(crate) fn parse_reply(body: &Value) -> Result<Reply, String> {
    let reply = read_reply(body)?;
    let reason = body.get("stop_reason").and_then(Value::as_str);
    let Some(reason) = reason else {
        return Err("the answer did not finish: no `stop_reason`".to_string());
    };
    check_said(&reply.content, reason)?;
    Ok(reply)
}

/// What a whole reply holds, finished or not (for reading a transcript back).
pub(crate) fn read_reply(body: &Value) -> Result<Reply, String> {
    let blocks = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or("the reply has no `content` array")?;
    let mut content = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => content.push(Block::Text(
                b.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )),
            Some("tool_use") => content.push(Block::ToolUse {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                input: Ok(b.get("input").cloned().unwrap_or_else(|| json!({}))),
            }),
            _ => {}
        }
    }
    let mut u = TurnUsage::default();
    let known = body.get("usage").filter(|v| v.is_object());
    if let Some(v) = known {
        usage(v, &mut u);
    }
    Ok(Reply {
        content,
        stop: stop(body.get("stop_reason").and_then(Value::as_str)),
        usage: u,
        usage_known: known.is_some(),
    })
}

enum Partial {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
    },
    Other,
}

/// A reply being assembled from streamed events.
#[derive(Default)]
pub struct Stream {
    blocks: Vec<Partial>,
    stop: Option<String>,
    usage: TurnUsage,
    usage_known: bool,
    done: bool,
}

/// An answer that says nothing (no text, no tool call) is an `Err`, unless it stopped for
/// a reason that explains it (a refusal, a pause, a full context window).
fn check_said(content: &[Block], reason: &str) -> Result<(), String> {
    let explained = matches!(
        reason,
        "refusal" | "pause_turn" | "model_context_window_exceeded"
    );
    if explained || says_something(content) {
        return Ok(());
    }
    Err(format!(
        "the answer was empty: neither text nor a tool call (stop_reason {reason:?})"
    ))
}

impl Stream {
    /// Takes one event; an `error` event or unreadable data is an `Err`.
    pub fn event(&mut self, event: &sse::Event) -> Result<Progress, String> {
        if event.name == "ping" || (event.name.is_empty() && event.data.is_empty()) {
            return Ok(Progress::Nothing);
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| format!("a streamed `{}` event is not valid JSON: {e}", event.name))?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&event.name);
        match kind {
            "message_start" => {
                if let Some(u) = data.pointer("/message/usage").filter(|u| u.is_object()) {
                    usage(u, &mut self.usage);
                    self.usage_known = true;
                }
                Ok(Progress::Nothing)
            }
            "content_block_start" => {
                let block = data.get("content_block").cloned().unwrap_or(Value::Null);
                let partial = match block.get("type").and_then(Value::as_str) {
                    Some("text") => Partial::Text(
                        block
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    ),
                    Some("tool_use") => Partial::Tool {
                        id: block
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        json: String::new(),
                    },
                    _ => Partial::Other,
                };
                self.blocks.push(partial);
                Ok(Progress::Nothing)
            }
            "content_block_delta" => {
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                match (
                    self.blocks.last_mut(),
                    delta.get("type").and_then(Value::as_str),
                ) {
                    (Some(Partial::Text(text)), Some("text_delta")) => {
                        text.push_str(delta.get("text").and_then(Value::as_str).unwrap_or(""));
                    }
                    (Some(Partial::Tool { json, .. }), Some("input_json_delta")) => {
                        json.push_str(
                            delta
                                .get("partial_json")
                                .and_then(Value::as_str)
                                .unwrap_or(""),
                        );
                    }
                    _ => {}
                }
                Ok(Progress::Content)
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(reason.to_string());
                }
                if let Some(u) = data.get("usage").filter(|u| u.is_object()) {
                    usage(u, &mut self.usage);
                    self.usage_known = true;
                }
                Ok(Progress::Nothing)
            }
            "message_stop" => {
                self.done = true;
                Ok(Progress::Done)
            }
            "error" => Err(format!(
                "the stream reported an error: {}",
                data.pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message")
            )),
            _ => Ok(Progress::Nothing),
        }
    }

    /// The reply, if the stream reached `message_stop` after a `stop_reason`, and said
    /// something.
    pub fn finish(self) -> Result<Reply, String> {
        if !self.done {
            return Err("the stream ended before `message_stop`".to_string());
        }
        let Some(reason) = self.stop.clone() else {
            return Err("the stream reached `message_stop` without a `stop_reason`".to_string());
        };
        let reply = self.read();
        check_said(&reply.content, &reason)?;
        Ok(reply)
    }

    /// What the stream held so far, finished or not (for reading a transcript back).
    pub fn read(self) -> Reply {
        let content: Vec<Block> = self
            .blocks
            .into_iter()
            .filter_map(|b| match b {
                Partial::Text(text) => Some(Block::Text(text)),
                Partial::Tool { id, name, json } => {
                    let input = if json.trim().is_empty() {
                        Ok(json!({}))
                    } else {
                        serde_json::from_str(&json).map_err(|_| json)
                    };
                    Some(Block::ToolUse { id, name, input })
                }
                Partial::Other => None,
            })
            .collect();
        Reply {
            content,
            stop: stop(self.stop.as_deref()),
            usage: self.usage,
            usage_known: self.usage_known,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turns(n: usize, text: &str) -> Vec<Message> {
        (0..n)
            .map(|k| Message {
                role: if k % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                content: vec![Block::Text(format!("{k}: {text}"))],
            })
            .collect()
    }

    fn marked(wire: &[Value]) -> Vec<usize> {
        (0..wire.len())
            .filter(|&k| {
                wire[k]["content"]
                    .as_array()
                    .is_some_and(|b| b.iter().any(|b| b.get("cache_control").is_some()))
            })
            .collect()
    }

    #[test]
    fn breakpoints_move_with_the_conversation_and_respect_the_minimum() {
        let long = "x".repeat(2000);
        for n in [1, 3, 5, 9] {
            let mut wire: Vec<Value> = turns(n, &long).iter().map(message).collect();
            mark_history(&mut wire, "claude-sonnet-4-5", 0);
            let want: Vec<usize> = if n >= 3 {
                vec![n - 3, n - 1]
            } else {
                vec![n - 1]
            };
            // Only where the prefix is at least 1,024 tokens (~4 KB): not before message 2.
            let want: Vec<usize> = want.into_iter().filter(|&k| k >= 2).collect();
            assert_eq!(marked(&wire), want, "{n} messages");
            // With the system prompt's, never more than the API's four.
            assert!(marked(&wire).len() < 4);
        }
        // A short conversation is not marked: it would not be cached anyway.
        let mut wire: Vec<Value> = turns(5, "short").iter().map(message).collect();
        mark_history(&mut wire, "claude-sonnet-4-5", 100);
        assert!(marked(&wire).is_empty());
        // A long system prompt before it counts towards the prefix.
        mark_history(&mut wire, "claude-sonnet-4-5", 5000);
        assert_eq!(marked(&wire), [2, 4]);
        assert_eq!(min_cacheable("claude-haiku-4-5"), 4096);
        // What the turn before wrote is not counted against the input limit again.
        let body = json!({"model": "claude-sonnet-4-5",
                          "system": [{"type": "text", "text": "s".repeat(5000), "cache_control": {"type": "ephemeral"}}],
                          "messages": wire});
        let all = (body["system"].to_string().len() + body["messages"].to_string().len()) / 4;
        let estimate = uncached_estimate(&body) as usize;
        assert!(estimate * 3 < all, "{estimate} of {all}");
        assert!(estimate > 0);
        // Below the minimum nothing is cached, so nothing is left out.
        let short = json!({"model": "claude-sonnet-4-5", "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
                           "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]});
        assert_eq!(
            uncached_estimate(&short) as usize,
            (short["system"][0].to_string().len()
                + short["messages"][0]["content"][0].to_string().len())
                / 4
        );
        assert_eq!(min_cacheable("claude-sonnet-4-6"), 2048);
    }
}
