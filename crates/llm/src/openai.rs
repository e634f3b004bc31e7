//! OpenAI-compatible chat completions (OpenAI, OpenRouter, vLLM, Ollama, ...): request
//! bodies, replies, and streamed chunks, whose tool-call arguments arrive as pieces of a
//! JSON string. `data: [DONE]` ends a stream; comment lines are skipped by the decoder.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::conversation::{Block, Message, Reply, Role, Stop, System, ToolSpec, TurnUsage};
use super::sse;
use crate::provider::ProviderSettings;

/// The JSON body of a request.
pub fn request_body(
    provider: &ProviderSettings,
    system: &System,
    tools: &[ToolSpec],
    messages: &[Message],
    stream: bool,
) -> Value {
    let mut wire =
        vec![json!({"role": "system", "content": format!("{}\n\n{}", system.shared, system.task)})];
    for m in messages {
        push_message(&mut wire, m);
    }
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.schema}}))
        .collect();
    let mut body = json!({
        "model": provider.model,
        "messages": wire,
        "tools": tools,
        "stream": stream,
    });
    // OpenAI's own API wants the newer name (its reasoning models refuse `max_tokens`);
    // compatible servers (OpenRouter, vLLM, Ollama) know `max_tokens`.
    let limit = if provider.base_url.contains("://api.openai.com") {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body[limit] = json!(provider.max_tokens);
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn push_message(wire: &mut Vec<Value>, m: &Message) {
    match m.role {
        Role::Assistant => {
            let text = super::conversation::text_of(&m.content);
            let calls: Vec<Value> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => Some(json!({
                        "id": id,
                        "type": "function",
                        "function": {
                            "name": name,
                            "arguments": match input {
                                Ok(v) => v.to_string(),
                                Err(raw) => raw.clone(),
                            },
                        },
                    })),
                    _ => None,
                })
                .collect();
            let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            wire.push(msg);
        }
        Role::User => {
            let mut text = Vec::new();
            for b in &m.content {
                match b {
                    Block::ToolResult {
                        id,
                        content,
                        is_error,
                    } => wire.push(json!({
                        "role": "tool",
                        "tool_call_id": id,
                        "content": if *is_error { format!("Error: {content}") } else { content.clone() },
                    })),
                    Block::Text(t) => text.push(t.as_str()),
                    Block::ToolUse { .. } => {}
                }
            }
            if !text.is_empty() {
                wire.push(json!({"role": "user", "content": text.join("\n")}));
            }
        }
    }
}

fn stop(reason: Option<&str>, has_tools: bool) -> Stop {
    match reason {
        _ if has_tools => Stop::ToolUse,
        Some("stop") | None => Stop::EndTurn,
        Some("tool_calls") | Some("function_call") => Stop::ToolUse,
        Some("length") => Stop::MaxTokens,
        Some("content_filter") => Stop::Refusal,
        Some(other) => Stop::Other(other.to_string()),
    }
}

fn usage(u: &Value) -> TurnUsage {
    let get = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let cached = get("/prompt_tokens_details/cached_tokens");
    TurnUsage {
        input: get("/prompt_tokens").saturating_sub(cached),
        output: get("/completion_tokens"),
        cache_creation: 0,
        cache_read: cached,
    }
}

fn tool_input(arguments: &str) -> Result<Value, String> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(arguments).map_err(|_| arguments.to_string())
}

/// Reads a whole (non-streamed) reply.
pub fn parse_reply(body: &Value) -> Result<Reply, String> {
    let choice = body
        .pointer("/choices/0")
        .ok_or("the reply has no `choices`")?;
    let message = choice.get("message").ok_or("the reply has no `message`")?;
    let mut content = Vec::new();
    if let Some(text) = message.get("content").and_then(Value::as_str) {
        if !text.is_empty() {
            content.push(Block::Text(text.to_string()));
        }
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let arguments = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        content.push(Block::ToolUse {
            id: call
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            name: call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            input: tool_input(arguments),
        });
    }
    let has_tools = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
    Ok(Reply {
        stop: stop(
            choice.get("finish_reason").and_then(Value::as_str),
            has_tools,
        ),
        usage: body.get("usage").map(usage).unwrap_or_default(),
        content,
    })
}

#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// A reply being assembled from streamed chunks.
#[derive(Default)]
pub struct Stream {
    text: String,
    calls: BTreeMap<u64, Call>,
    finish: Option<String>,
    usage: TurnUsage,
    done: bool,
}

pub use super::anthropic::Progress;

impl Stream {
    /// Takes one event; an error chunk or unreadable data is an `Err`.
    pub fn event(&mut self, event: &sse::Event) -> Result<Progress, String> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Progress::Nothing);
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(Progress::Done);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| format!("a streamed chunk is not valid JSON: {e}"))?;
        if let Some(error) = chunk.get("error") {
            return Err(format!(
                "the stream reported an error: {}",
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message")
            ));
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = usage(u);
        }
        let mut progress = Progress::Nothing;
        if let Some(choice) = chunk.pointer("/choices/0") {
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(reason.to_string());
            }
            let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                self.text.push_str(text);
                progress = Progress::Content;
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                let entry = self.calls.entry(index).or_default();
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    entry.id = id.to_string();
                }
                if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                    entry.name.push_str(name);
                }
                if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str) {
                    entry.arguments.push_str(args);
                }
                progress = Progress::Content;
            }
        }
        Ok(progress)
    }

    /// The reply, if the stream reached `[DONE]`.
    pub fn finish(self) -> Result<Reply, String> {
        if !self.done {
            return Err("the stream ended before `data: [DONE]`".to_string());
        }
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(Block::Text(self.text));
        }
        for call in self.calls.into_values() {
            content.push(Block::ToolUse {
                input: tool_input(&call.arguments),
                id: call.id,
                name: call.name,
            });
        }
        let has_tools = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
        Ok(Reply {
            stop: stop(self.finish.as_deref(), has_tools),
            usage: self.usage,
            content,
        })
    }
}
