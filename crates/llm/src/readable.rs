//! A task's transcript (every request and response as sent, one JSON line each) read back
//! as a conversation a person can follow: who said what, each tool call with its input and
//! each tool's result, for `plait serve`.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::conversation::{Block, Reply};
use super::{anthropic, openai, sse};

/// One entry of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// The conversation it belongs to, from 1 (a task's rounds, its reviews).
    pub round: u32,
    /// `user`, `assistant` or `tool`.
    pub role: &'static str,
    /// `text`, `tool_call` or `tool_result`.
    pub kind: &'static str,
    /// What was said or passed.
    pub text: String,
    /// The tool called (or whose result this is, when the wire says).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// A tool call's input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// A tool result that reports an error.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub error: bool,
}

/// The conversations of the transcript at `path`, in order; empty when there is none.
pub fn read(path: &Path) -> Vec<Entry> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let records: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    entries(&records)
}

/// The conversations of `records`: each ends with the last answered request before one
/// that starts afresh (fewer messages than the one before), and reads as that request's
/// messages followed by its reply.
pub fn entries(records: &[Value]) -> Vec<Entry> {
    let answered: Vec<&Value> = records
        .iter()
        .filter(|r| r.get("error").is_none() && r.get("response").is_some())
        .collect();
    let mut out = Vec::new();
    let mut round = 0;
    for (i, record) in answered.iter().enumerate() {
        let count = messages(record).len();
        let next_count = answered.get(i + 1).map(|r| messages(r).len());
        // The last request of its conversation: the next one starts another.
        if next_count.is_some_and(|n| n > count) {
            continue;
        }
        round += 1;
        conversation(record, round, &mut out);
    }
    out
}

fn messages(record: &Value) -> &[Value] {
    record
        .pointer("/request/messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The request's messages and the reply of `record`, as entries of `round`.
fn conversation(record: &Value, round: u32, out: &mut Vec<Entry>) {
    let mut tools_by_id: Vec<(String, String)> = Vec::new();
    let entry = |role: &'static str, kind: &'static str, text: String| Entry {
        round,
        role,
        kind,
        text,
        tool: None,
        input: None,
        error: false,
    };
    for message in messages(record) {
        let role = match message.get("role").and_then(Value::as_str) {
            Some("assistant") => "assistant",
            Some("tool") => "tool",
            Some("system") | Some("developer") => continue,
            _ => "user",
        };
        match message.get("content") {
            Some(Value::String(text)) if role == "tool" => {
                let id = message.get("tool_call_id").and_then(Value::as_str);
                out.push(Entry {
                    tool: tool_named(&tools_by_id, id),
                    ..entry("tool", "tool_result", text.clone())
                })
            }
            Some(Value::String(text)) if !text.is_empty() => {
                out.push(entry(role, "text", text.clone()))
            }
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    block_entry(block, role, round, &mut tools_by_id, out);
                }
            }
            _ => {}
        }
        // OpenAI's tool calls ride beside the assistant's content.
        for call in message
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let arguments = call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .unwrap_or("");
            let input = serde_json::from_str(arguments)
                .unwrap_or_else(|_| Value::String(arguments.to_string()));
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                tools_by_id.push((id.to_string(), name.clone()));
            }
            out.push(Entry {
                tool: Some(name),
                input: Some(input),
                ..entry("assistant", "tool_call", String::new())
            });
        }
    }
    if let Some(reply) = reply(record) {
        for block in reply.content {
            match block {
                Block::Text(text) if !text.is_empty() => out.push(entry("assistant", "text", text)),
                Block::ToolUse { name, input, .. } => out.push(Entry {
                    tool: Some(name),
                    input: Some(input.unwrap_or_else(Value::String)),
                    ..entry("assistant", "tool_call", String::new())
                }),
                _ => {}
            }
        }
    }
}

/// One Anthropic content block of a message.
fn block_entry(
    block: &Value,
    role: &'static str,
    round: u32,
    tools_by_id: &mut Vec<(String, String)>,
    out: &mut Vec<Entry>,
) {
    let str_of = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    let base = Entry {
        round,
        role,
        kind: "text",
        text: String::new(),
        tool: None,
        input: None,
        error: false,
    };
    match str_of("type") {
        "text" if !str_of("text").is_empty() => out.push(Entry {
            text: str_of("text").to_string(),
            ..base
        }),
        "tool_use" => {
            tools_by_id.push((str_of("id").to_string(), str_of("name").to_string()));
            out.push(Entry {
                kind: "tool_call",
                tool: Some(str_of("name").to_string()),
                input: block.get("input").cloned(),
                ..base
            })
        }
        "tool_result" => {
            let text = match block.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            };
            out.push(Entry {
                role: "tool",
                kind: "tool_result",
                text,
                tool: tool_named(
                    tools_by_id,
                    block.get("tool_use_id").and_then(Value::as_str),
                ),
                error: block
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                ..base
            })
        }
        _ => {}
    }
}

fn tool_named(tools_by_id: &[(String, String)], id: Option<&str>) -> Option<String> {
    let id = id?;
    tools_by_id
        .iter()
        .rev()
        .find(|(known, _)| known == id)
        .map(|(_, name)| name.clone())
}

/// The reply a record holds, whole or streamed, in either wire format.
fn reply(record: &Value) -> Option<Reply> {
    let response = record.get("response")?;
    if let Some(events) = response.get("events").and_then(Value::as_array) {
        let anthropic = events.iter().any(|e| {
            e.get("event")
                .and_then(Value::as_str)
                .is_some_and(|n| n.starts_with("message_") || n.starts_with("content_block"))
        });
        let as_sse = |e: &Value| sse::Event {
            name: e
                .get("event")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            data: match e.get("data") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
        };
        return if anthropic {
            let mut stream = anthropic::Stream::default();
            for e in events {
                let _ = stream.event(&as_sse(e));
            }
            Some(stream.read())
        } else {
            let mut stream = openai::Stream::default();
            for e in events {
                let _ = stream.event(&as_sse(e));
            }
            Some(stream.read())
        };
    }
    if response.get("choices").is_some() {
        openai::read_reply(response).ok()
    } else {
        anthropic::read_reply(response).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn anthropic_turns_read_as_one_conversation_with_tool_calls_and_results() {
        let first = json!({"turn": 1, "request": {"messages": [
            {"role": "user", "content": [{"type": "text", "text": "Fix it"}]}]},
            "response": {"content": [{"type": "tool_use", "id": "t1", "name": "write_file", "input": {"path": "a.rs"}}]}});
        let second = json!({"turn": 2, "request": {"messages": [
            {"role": "user", "content": [{"type": "text", "text": "Fix it"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "write_file", "input": {"path": "a.rs"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "wrote a.rs"}]}]},
            "response": {"content": [{"type": "text", "text": "Done."}]}});
        let failed = json!({"turn": 2, "error": "429", "request": {"messages": []}});
        let got = entries(&[first, failed, second]);
        let kinds: Vec<(&str, &str)> = got.iter().map(|e| (e.role, e.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("user", "text"),
                ("assistant", "tool_call"),
                ("tool", "tool_result"),
                ("assistant", "text")
            ]
        );
        assert_eq!(got[2].tool.as_deref(), Some("write_file"));
        assert_eq!(got[3].text, "Done.");
        assert!(got.iter().all(|e| e.round == 1));
    }

    #[test]
    fn a_new_conversation_starts_a_new_round_and_openai_tool_calls_are_read() {
        let one = json!({"request": {"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "Round one"}]},
            "response": {"choices": [{"message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}}]}}]}});
        let two = json!({"request": {"messages": [{"role": "user", "content": "Round two"}]},
            "response": {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}});
        let got = entries(&[one, two]);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[1].tool.as_deref(), Some("read_file"));
        assert_eq!(got[1].input, Some(json!({"path": "x"})));
        assert_eq!((got[2].round, got[2].text.as_str()), (2, "Round two"));
        assert_eq!(got[3].text, "ok");
    }
}
