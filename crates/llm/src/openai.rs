//! OpenAI-compatible chat completions (OpenAI, OpenRouter, vLLM, Ollama, llama.cpp, ...):
//! request bodies, replies, and streamed chunks, whose tool-call arguments arrive as pieces
//! of a JSON string. `data: [DONE]` ends a stream; comment lines are skipped by the decoder.
//!
//! Local servers bend the wire in ways the official API does not, and each is read here:
//! tool-call deltas without `index` or `id`, arguments sent whole in one delta or as a JSON
//! object instead of a string, `finish_reason: "stop"` beside tool calls, a tool call in a
//! final non-delta `message`, and no `usage` at all (the reply says so, for an estimate).
//! An answer that never says why it stopped, or says nothing, is no answer: it is an `Err`
//! the caller retries.

use serde_json::{json, Value};

use super::conversation::says_something;
use super::conversation::{Block, Message, Reply, Role, Stop, System, ToolSpec, TurnUsage};
use super::sse::{self, Progress};
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
    let offered = !tools.is_empty();
    let mut body = json!({
        "model": provider.model,
        "messages": wire,
        "tools": tools,
        "stream": stream,
    });
    // "auto" is the API's default with tools, but some servers read no choice as "none"
    // and never show the model its tools (llama-cpp-python's function-calling formats).
    if offered {
        body["tool_choice"] = json!("auto");
    }
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
            // Always a string, empty beside tool calls: the API takes null there too, but
            // llama-cpp-python refuses null and its chat templates fail on a missing one.
            let mut msg = json!({"role": "assistant", "content": text});
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
        estimated: false,
    }
}

fn tool_input(arguments: &str) -> Result<Value, String> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(arguments).map_err(|_| arguments.to_string())
}

/// A call's `arguments` as text: the JSON string the API sends, or the object some
/// local servers send in its place, written out.
fn arguments_text(arguments: Option<&Value>) -> String {
    match arguments {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The id of the `k`-th tool call of an answer that gave it none: the conversation sends
/// the tool's result back under it, so it must be there and unique within the answer.
fn made_up_id(k: usize) -> String {
    format!("call_plait_{k}")
}

/// The tool calls of a whole `message` (a non-streamed reply's, or a final non-delta
/// chunk's), ids made up where it gave none.
fn message_calls(message: &Value) -> Vec<Block> {
    let calls = message.get("tool_calls").and_then(Value::as_array);
    calls
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(k, call)| {
            let id = call.get("id").and_then(Value::as_str).unwrap_or("");
            Block::ToolUse {
                id: if id.is_empty() {
                    made_up_id(k)
                } else {
                    id.to_string()
                },
                name: call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                input: tool_input(&arguments_text(call.pointer("/function/arguments"))),
            }
        })
        .collect()
}

/// Reads a whole (non-streamed) reply; one without a `finish_reason`, or with neither
/// text nor a tool call, is an `Err` naming what it held.
pub(crate) fn parse_reply(body: &Value) -> Result<Reply, String> {
    let reply = read_reply(body)?;
    let finish = body
        .pointer("/choices/0/finish_reason")
        .and_then(Value::as_str);
    let has_tools = reply
        .content
        .iter()
        .any(|b| matches!(b, Block::ToolUse { .. }));
    if finish.is_none() && !has_tools {
        return Err(format!(
            "the answer did not finish: no `finish_reason`; it held {}",
            brief(&body["choices"][0]["message"])
        ));
    }
    if !says_something(&reply.content) && finish != Some("content_filter") {
        return Err(format!(
            "the answer was empty: neither text nor a tool call (finish_reason {:?})",
            finish.unwrap_or("none")
        ));
    }
    Ok(reply)
}

/// What a whole reply holds, finished or not (for reading a transcript back).
pub(crate) fn read_reply(body: &Value) -> Result<Reply, String> {
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
    content.extend(message_calls(message));
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    let has_tools = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
    let usage = body.get("usage").filter(|u| u.is_object()).map(usage);
    Ok(Reply {
        stop: stop(finish, has_tools),
        usage: usage.unwrap_or_default(),
        usage_known: usage.is_some(),
        content,
    })
}

/// At most 200 characters of `value`, for a message.
fn brief(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[derive(Default)]
struct Call {
    /// The `index` the server gave it, if any.
    index: Option<u64>,
    id: String,
    name: String,
    arguments: String,
}

/// A reply being assembled from streamed chunks.
#[derive(Default)]
pub struct Stream {
    text: String,
    calls: Vec<Call>,
    /// Tool calls of a final non-delta `message`, for a server that sends them there.
    whole: Vec<Block>,
    finish: Option<String>,
    usage: Option<TurnUsage>,
    done: bool,
    /// Chunks read, for what an unfinished answer held.
    chunks: usize,
    roles: usize,
}

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
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(format!(
                "the stream reported an error: {}",
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message")
            ));
        }
        self.chunks += 1;
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage(u));
        }
        let mut progress = Progress::Nothing;
        if let Some(choice) = chunk.pointer("/choices/0") {
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(reason.to_string());
            }
            let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
            if delta.get("role").is_some() {
                self.roles += 1;
            }
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
                self.call_delta(call);
                progress = Progress::Content;
            }
            if let Some(message) = choice.get("message").filter(|m| m.is_object()) {
                if self.text.is_empty() {
                    if let Some(text) = message.get("content").and_then(Value::as_str) {
                        self.text.push_str(text);
                    }
                }
                self.whole = message_calls(message);
                progress = Progress::Content;
            }
        }
        Ok(progress)
    }

    /// Adds one tool-call delta to the call it continues: the one of its `index`; without
    /// one, the one of its `id`, else the last, unless it names a tool while the last has
    /// its name and arguments already (then it starts a new call).
    fn call_delta(&mut self, call: &Value) {
        let index = call.get("index").and_then(Value::as_u64);
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|i| !i.is_empty());
        let name = call.pointer("/function/name").and_then(Value::as_str);
        let at = match (index, id) {
            (Some(index), _) => self.calls.iter().position(|c| c.index == Some(index)),
            (None, Some(id)) => self.calls.iter().position(|c| c.id == id),
            (None, None) => match self.calls.last() {
                Some(last)
                    if name.is_some() && !last.name.is_empty() && !last.arguments.is_empty() =>
                {
                    None
                }
                Some(_) => Some(self.calls.len() - 1),
                None => None,
            },
        };
        let at = at.unwrap_or_else(|| {
            self.calls.push(Call {
                index,
                ..Call::default()
            });
            self.calls.len() - 1
        });
        let entry = &mut self.calls[at];
        if let Some(id) = id {
            entry.id = id.to_string();
        }
        if let Some(name) = name {
            // Whole from most servers, again in every delta from some, in pieces from a few.
            if entry.name != name {
                entry.name.push_str(name);
            }
        }
        entry
            .arguments
            .push_str(&arguments_text(call.pointer("/function/arguments")));
    }

    /// The reply, if the stream reached `data: [DONE]` after saying why it stopped and
    /// saying something; otherwise what it held, for the retry and, at last, the task.
    pub fn finish(self) -> Result<Reply, String> {
        if !self.done {
            return Err(format!(
                "the stream ended before `data: [DONE]`, after {} chunk(s)",
                self.chunks
            ));
        }
        let held = format!(
            "{} chunk(s) ({} naming the role), then `[DONE]`",
            self.chunks, self.roles
        );
        let finish = self.finish.clone();
        let reply = self.read();
        let has_tools = reply
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolUse { .. }));
        if finish.is_none() && !has_tools {
            let what = if says_something(&reply.content) {
                "text"
            } else {
                "nothing"
            };
            return Err(format!(
                "the stream ended without a `finish_reason`: {held} holding {what}"
            ));
        }
        if !says_something(&reply.content) && finish.as_deref() != Some("content_filter") {
            return Err(format!(
                "the answer was empty: {held} with neither text nor a tool call (finish_reason {:?})",
                finish.as_deref().unwrap_or("none")
            ));
        }
        Ok(reply)
    }

    /// What the stream held so far, finished or not (for reading a transcript back).
    pub fn read(self) -> Reply {
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(Block::Text(self.text));
        }
        let streamed: Vec<Block> = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(k, call)| Block::ToolUse {
                input: tool_input(&call.arguments),
                id: if call.id.is_empty() {
                    made_up_id(k)
                } else {
                    call.id
                },
                name: call.name,
            })
            .collect();
        content.extend(if streamed.is_empty() {
            self.whole
        } else {
            streamed
        });
        let has_tools = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
        Reply {
            stop: stop(self.finish.as_deref(), has_tools),
            usage: self.usage.unwrap_or_default(),
            usage_known: self.usage.is_some(),
            content,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reply a stream of these chunks makes, each sent as one `data:` event.
    fn streamed(chunks: &[Value]) -> Result<Reply, String> {
        let mut stream = Stream::default();
        for chunk in chunks {
            let event = sse::Event {
                name: String::new(),
                data: chunk.to_string(),
            };
            stream.event(&event)?;
        }
        let done = sse::Event {
            name: String::new(),
            data: "[DONE]".into(),
        };
        stream.event(&done)?;
        stream.finish()
    }

    fn delta(delta: Value, finish: Option<&str>) -> Value {
        json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    }

    fn calls(reply: &Reply) -> Vec<(String, String, Value)> {
        reply
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, name, input } => Some((
                    id.clone(),
                    name.clone(),
                    input.clone().unwrap_or(Value::Null),
                )),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_role_delta_then_done_is_no_answer() {
        let said = streamed(&[delta(json!({"role": "assistant"}), None)]);
        let err = said.unwrap_err();
        assert!(err.contains("without a `finish_reason`"), "{err}");
        assert!(err.contains("1 chunk(s) (1 naming the role)"), "{err}");
        // Finished, but nothing said.
        let err = streamed(&[delta(
            json!({"role": "assistant", "content": ""}),
            Some("stop"),
        )])
        .unwrap_err();
        assert!(err.contains("the answer was empty"), "{err}");
        // The same, not streamed.
        let body = json!({"choices": [{"message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]});
        assert!(parse_reply(&body).unwrap_err().contains("empty"));
        let body = json!({"choices": [{"message": {"role": "assistant", "content": "hi"}}]});
        assert!(parse_reply(&body)
            .unwrap_err()
            .contains("no `finish_reason`"));
    }

    #[test]
    fn tool_call_deltas_without_index_or_id_make_one_call_each() {
        let reply = streamed(&[
            delta(json!({"role": "assistant"}), None),
            delta(
                json!({"tool_calls": [{"function": {"name": "view", "arguments": ""}}]}),
                None,
            ),
            delta(
                json!({"tool_calls": [{"function": {"arguments": "{\"path\":"}}]}),
                None,
            ),
            delta(
                json!({"tool_calls": [{"function": {"arguments": "\"a.py\"}"}}]}),
                None,
            ),
            delta(
                json!({"tool_calls": [{"function": {"name": "list_files", "arguments": "{}"}}]}),
                None,
            ),
            delta(json!({}), Some("tool_calls")),
        ])
        .unwrap();
        assert_eq!(
            calls(&reply),
            [
                (
                    "call_plait_0".into(),
                    "view".into(),
                    json!({"path": "a.py"})
                ),
                ("call_plait_1".into(), "list_files".into(), json!({})),
            ]
        );
        assert_eq!(reply.stop, Stop::ToolUse);
        assert!(!reply.usage_known);
    }

    #[test]
    fn arguments_whole_or_as_an_object_and_stop_beside_tool_calls() {
        // Arguments as a JSON object, whole in one delta, with "stop" as the reason.
        let reply = streamed(&[delta(
            json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "run", "arguments": {"command": "ls"}}}]}),
            Some("stop"),
        )])
        .unwrap();
        assert_eq!(
            calls(&reply),
            [("c1".into(), "run".into(), json!({"command": "ls"}))]
        );
        assert_eq!(reply.stop, Stop::ToolUse);
        // Ids without indexes tell calls apart.
        let reply = streamed(&[
            delta(json!({"tool_calls": [{"id": "a", "function": {"name": "run", "arguments": "{\"command\":"}}]}), None),
            delta(json!({"tool_calls": [{"id": "b", "function": {"name": "run", "arguments": "{}"}}]}), None),
            delta(json!({"tool_calls": [{"id": "a", "function": {"arguments": "\"ls\"}"}}]}), None),
            delta(json!({}), Some("tool_calls")),
        ])
        .unwrap();
        let got: Vec<String> = calls(&reply)
            .into_iter()
            .map(|(id, _, v)| format!("{id}={v}"))
            .collect();
        assert_eq!(got, [r#"a={"command":"ls"}"#, "b={}"]);
        // Not streamed: an object, no id, "stop".
        let body = json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"type": "function", "function": {"name": "run", "arguments": {"command": "pwd"}}}]},
            "finish_reason": "stop"}]});
        let reply = parse_reply(&body).unwrap();
        assert_eq!(
            calls(&reply),
            [(
                "call_plait_0".into(),
                "run".into(),
                json!({"command": "pwd"})
            )]
        );
        assert_eq!(reply.stop, Stop::ToolUse);
    }

    #[test]
    fn a_tool_call_in_a_final_whole_message_is_read() {
        let reply = streamed(&[
            delta(json!({"role": "assistant", "content": null}), None),
            json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "m1", "type": "function", "function": {"name": "run", "arguments": "{\"command\":\"ls\"}"}}]}}]}),
        ])
        .unwrap();
        assert_eq!(
            calls(&reply),
            [("m1".into(), "run".into(), json!({"command": "ls"}))]
        );
    }
}
