//! The scripted answers: a [`Turn`] becomes a provider-neutral [`Answer`], then that
//! provider's JSON body or stream of events, complete or broken in one of the ways clients must
//! survive (malformed, truncated, an error mid-stream).

use serde_json::{json, Value};

use super::reply::{error_body, error_reply, overloaded, status_reply, Delivery, Reply};
use super::{Provider, TaskScript, ToolCall, ToolCalls, Turn, Usage};

/// What a request needs to know to render its answer.
pub(super) struct Call {
    pub(super) provider: Provider,
    pub(super) serial: u64,
    pub(super) model: String,
    pub(super) usage: Usage,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) tool_calls: ToolCalls,
}

/// A provider-neutral answer: optional text, then tool calls with their ids.
struct Answer {
    text: String,
    tools: Vec<(String, ToolCall)>,
    stop: Stop,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    EndTurn,
    ToolUse,
    MaxTokens,
    PauseTurn,
    Refusal,
}

impl Stop {
    fn reason(self, provider: Provider) -> &'static str {
        let (anthropic, openai) = match self {
            Stop::EndTurn => ("end_turn", "stop"),
            Stop::ToolUse => ("tool_use", "tool_calls"),
            Stop::MaxTokens => ("max_tokens", "length"),
            Stop::PauseTurn => ("pause_turn", "stop"),
            Stop::Refusal => ("refusal", "content_filter"),
        };
        match provider {
            Provider::Anthropic => anthropic,
            Provider::OpenAi => openai,
        }
    }
}

/// How the answer is delivered: whole, or broken in one of the ways clients must survive.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    Complete,
    Malformed,
    Truncated,
    ErrorEvent,
    /// Nothing said and no reason to stop, then the stream's end.
    Unfinished,
}

/// Plays one turn for a task; tool calls get ids, which the next request must answer.
pub(super) fn play(call: &Call, turn: Turn, task: &mut TaskScript, key: &str) -> Reply {
    let (text, stop, ending) = match turn {
        Turn::Status {
            status,
            body,
            headers,
        } => return status_reply(call, status, body, headers),
        Turn::Tools(calls) => return play_tools(call, calls, task, key),
        Turn::Text(text) => (text, Stop::EndTurn, Ending::Complete),
        Turn::MaxTokens(text) => (text, Stop::MaxTokens, Ending::Complete),
        Turn::PauseTurn => (
            "Pausing to go on.".into(),
            Stop::PauseTurn,
            Ending::Complete,
        ),
        Turn::Refusal => (
            "I can't help with that.".into(),
            Stop::Refusal,
            Ending::Complete,
        ),
        Turn::Malformed => ("Broken.".into(), Stop::EndTurn, Ending::Malformed),
        Turn::Truncated => (
            "This answer never ends.".into(),
            Stop::EndTurn,
            Ending::Truncated,
        ),
        Turn::ErrorEvent => (
            "This answer fails.".into(),
            Stop::EndTurn,
            Ending::ErrorEvent,
        ),
        Turn::Unfinished => (String::new(), Stop::EndTurn, Ending::Unfinished),
    };
    // A broken answer leaves the task waiting for the same tool results as before.
    if ending == Ending::Complete {
        task.pending.clear();
    }
    let tools = Vec::new();
    render(call, &Answer { text, tools, stop }, ending)
}

fn play_tools(call: &Call, calls: Vec<ToolCall>, task: &mut TaskScript, key: &str) -> Reply {
    let (prefix, text) = match call.provider {
        Provider::Anthropic => ("toolu", "I'll use the tools."),
        Provider::OpenAi => ("call", ""),
    };
    let mut tools = Vec::new();
    for tool in calls {
        task.tools_sent += 1;
        tools.push((format!("{prefix}_{key}_{}", task.tools_sent), tool));
    }
    task.pending = tools.iter().map(|(id, _)| id.clone()).collect();
    task.sent.extend(task.pending.iter().cloned());
    if call.provider == Provider::OpenAi && call.tool_calls == ToolCalls::Unindexed {
        // Sent without ids: the client names them, and the next request says how.
        task.pending.clear();
        task.adopt_ids = true;
    }
    let text = text.to_string();
    render(
        call,
        &Answer {
            text,
            tools,
            stop: Stop::ToolUse,
        },
        Ending::Complete,
    )
}

fn render(call: &Call, answer: &Answer, ending: Ending) -> Reply {
    let provider = call.provider;
    if call.stream {
        let frames = match provider {
            Provider::Anthropic => anthropic_events(call, answer),
            Provider::OpenAi => openai_chunks(call, answer),
        };
        let mut reply = Reply::new(
            call,
            200,
            "text/event-stream",
            end_stream(call, frames, ending),
        );
        reply
            .headers
            .push(("cache-control".into(), "no-cache".into()));
        reply.delivery = Delivery::Trickle;
        return reply;
    }
    let body = match provider {
        Provider::Anthropic => anthropic_message(call, answer),
        Provider::OpenAi => openai_completion(call, answer),
    };
    match ending {
        Ending::Complete => Reply::new(call, 200, "application/json", body.to_string().into()),
        Ending::Malformed => {
            let broken = "{\"id\": \"broken\", \"choices\": [<html>]}";
            Reply::new(call, 200, "application/json", broken.into())
        }
        Ending::Truncated => {
            let mut reply = Reply::new(call, 200, "application/json", body.to_string().into());
            reply.delivery = Delivery::CutShort;
            reply
        }
        Ending::ErrorEvent => {
            let (status, message) = overloaded(provider);
            error_reply(provider, call.serial, status, message)
        }
        Ending::Unfinished => {
            let mut body = body;
            match provider {
                Provider::Anthropic => body["stop_reason"] = Value::Null,
                Provider::OpenAi => body["choices"][0]["finish_reason"] = Value::Null,
            }
            Reply::new(call, 200, "application/json", body.to_string().into())
        }
    }
}

/// An event whose data line breaks off inside a string.
const BROKEN_ANTHROPIC_EVENT: &str = concat!(
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bro"#,
    "\n\n",
);

/// A chunk whose data line breaks off inside a string.
const BROKEN_OPENAI_CHUNK: &str = concat!(
    r#"data: {"id":"chatcmpl-0","choices":[{"index":0,"delta":{"content":"bro"#,
    "\n\n",
);

/// Cuts or spoils a stream after its first content delta, as `ending` asks.
fn end_stream(call: &Call, mut frames: Vec<String>, ending: Ending) -> Vec<u8> {
    let at = match call.provider {
        Provider::Anthropic => 4, // message_start, ping, content_block_start, first delta
        Provider::OpenAi => 3,    // role chunk, comment, first content chunk
    }
    .min(frames.len());
    let anthropic = call.provider == Provider::Anthropic;
    match ending {
        Ending::Complete => {}
        Ending::Unfinished => {
            // The opening and the close, nothing between.
            let (first, last) = (frames[0].clone(), frames[frames.len() - 1].clone());
            frames = if anthropic {
                vec![first, last]
            } else {
                vec![
                    data(
                        &json!({"id": format!("chatcmpl-{}", call.serial), "object": "chat.completion.chunk",
                    "model": call.model, "choices": [{"index": 0, "delta": {"role": "assistant"}, "logprobs": null, "finish_reason": null}]}),
                    ),
                    last,
                ]
            };
        }
        Ending::Malformed => {
            let broken = match call.provider {
                Provider::Anthropic => BROKEN_ANTHROPIC_EVENT,
                Provider::OpenAi => BROKEN_OPENAI_CHUNK,
            };
            frames.insert(at, broken.to_string());
        }
        Ending::Truncated => {
            let mut bytes = frames[..at].concat().into_bytes();
            let next = frames.get(at).map(String::as_bytes).unwrap_or_default();
            bytes.extend_from_slice(&next[..next.len() / 2]);
            return bytes;
        }
        Ending::ErrorEvent => {
            frames.truncate(at);
            let (status, message) = overloaded(call.provider);
            let error = error_body(call.provider, call.serial, status, message);
            frames.push(if anthropic {
                sse("error", &error)
            } else {
                data(&error)
            });
        }
    }
    frames.concat().into_bytes()
}

fn anthropic_content(answer: &Answer) -> Vec<Value> {
    let text = (!answer.text.is_empty()).then(|| json!({"type": "text", "text": answer.text}));
    let tools = answer.tools.iter().map(
        |(id, tool)| json!({"type": "tool_use", "id": id, "name": tool.name, "input": tool.input}),
    );
    text.into_iter().chain(tools).collect()
}

fn anthropic_message(call: &Call, answer: &Answer) -> Value {
    let u = call.usage;
    json!({
        "id": format!("msg_{}", call.serial),
        "type": "message",
        "role": "assistant",
        "model": call.model,
        "content": anthropic_content(answer),
        "stop_reason": answer.stop.reason(Provider::Anthropic),
        "stop_sequence": null,
        "usage": {
            "input_tokens": u.input,
            "output_tokens": u.output,
            "cache_creation_input_tokens": u.cache_creation,
            "cache_read_input_tokens": u.cache_read,
        },
    })
}

fn anthropic_events(call: &Call, answer: &Answer) -> Vec<String> {
    let mut start = anthropic_message(call, answer);
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    let mut frames = vec![
        sse(
            "message_start",
            &json!({"type": "message_start", "message": start}),
        ),
        sse("ping", &json!({"type": "ping"})),
    ];
    for (index, block) in anthropic_content(answer).into_iter().enumerate() {
        let delta = |delta: Value| {
            let event = json!({"type": "content_block_delta", "index": index, "delta": delta});
            sse("content_block_delta", &event)
        };
        let mut opening = block.clone();
        let deltas: Vec<String> = if block["type"] == "text" {
            opening["text"] = json!("");
            let text = block["text"].as_str().unwrap_or_default();
            let pieces = split(text, call.serial + index as u64).into_iter();
            pieces
                .map(|t| delta(json!({"type": "text_delta", "text": t})))
                .collect()
        } else {
            opening["input"] = json!({});
            let input = block["input"].to_string();
            let pieces = std::iter::once(String::new()).chain(split(&input, index as u64));
            let partial = |j| delta(json!({"type": "input_json_delta", "partial_json": j}));
            pieces.map(partial).collect()
        };
        let event =
            json!({"type": "content_block_start", "index": index, "content_block": opening});
        frames.push(sse("content_block_start", &event));
        frames.extend(deltas);
        let stop = json!({"type": "content_block_stop", "index": index});
        frames.push(sse("content_block_stop", &stop));
    }
    let future = json!({"type": "future_event", "note": "clients ignore unknown events"});
    frames.push(sse("future_event", &future));
    let delta = json!({
        "type": "message_delta",
        "delta": {"stop_reason": answer.stop.reason(Provider::Anthropic), "stop_sequence": null},
        "usage": {"output_tokens": call.usage.output},
    });
    frames.push(sse("message_delta", &delta));
    frames.push(sse("message_stop", &json!({"type": "message_stop"})));
    frames
}

fn openai_usage(usage: Usage) -> Value {
    let prompt = usage.input + usage.cache_read;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
    })
}

fn openai_completion(call: &Call, answer: &Answer) -> Value {
    let content = (!answer.text.is_empty()).then_some(answer.text.as_str());
    let mut message = json!({"role": "assistant", "content": content});
    if !answer.tools.is_empty() {
        message["tool_calls"] = whole_calls(call, answer);
    }
    json!({
        "id": format!("chatcmpl-{}", call.serial),
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": call.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(call, answer),
        }],
        "usage": openai_usage(call.usage),
    })
}

/// The answer's tool calls whole, as a non-streamed message (or a final chunk) holds them,
/// in the shape `call.tool_calls` asks for.
fn whole_calls(call: &Call, answer: &Answer) -> Value {
    let calls = answer.tools.iter().map(|(id, tool)| {
        let arguments = match call.tool_calls {
            ToolCalls::ObjectArguments => tool.input.clone(),
            _ => json!(tool.input.to_string()),
        };
        let function = json!({"name": tool.name, "arguments": arguments});
        match call.tool_calls {
            ToolCalls::Unindexed => json!({"type": "function", "function": function}),
            _ => json!({"id": id, "type": "function", "function": function}),
        }
    });
    calls.collect()
}

/// The `finish_reason` of an OpenAI answer: `stop` for tool calls where the wire says so.
fn finish_reason(call: &Call, answer: &Answer) -> &'static str {
    match (call.tool_calls, answer.stop) {
        (ToolCalls::StopWithCalls, Stop::ToolUse) => "stop",
        (_, stop) => stop.reason(Provider::OpenAi),
    }
}

fn openai_chunks(call: &Call, answer: &Answer) -> Vec<String> {
    let chunk = |choices: Value, usage: Value| {
        let mut chunk = json!({
            "id": format!("chatcmpl-{}", call.serial),
            "object": "chat.completion.chunk",
            "created": 1_767_225_600,
            "model": call.model,
            "choices": choices,
        });
        if call.include_usage {
            chunk["usage"] = usage;
        }
        data(&chunk)
    };
    let delta = |delta: Value, finish: Value| {
        let choice = json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish});
        chunk(json!([choice]), Value::Null)
    };
    let content = if answer.text.is_empty() {
        Value::Null
    } else {
        json!("")
    };
    let mut frames = vec![
        delta(
            json!({"role": "assistant", "content": content}),
            Value::Null,
        ),
        ": OPENROUTER PROCESSING\n\n".to_string(),
    ];
    for piece in split(&answer.text, call.serial) {
        frames.push(delta(json!({"content": piece}), Value::Null));
    }
    frames.extend(tool_call_chunks(call, answer, &delta));
    let finish = json!(finish_reason(call, answer));
    if call.tool_calls == ToolCalls::FinalMessage && !answer.tools.is_empty() {
        let message =
            json!({"role": "assistant", "content": null, "tool_calls": whole_calls(call, answer)});
        let choice =
            json!({"index": 0, "message": message, "logprobs": null, "finish_reason": finish});
        frames.push(chunk(json!([choice]), Value::Null));
    } else {
        frames.push(delta(json!({}), finish));
    }
    if call.include_usage {
        frames.push(chunk(json!([]), openai_usage(call.usage)));
    }
    frames.push("data: [DONE]\n\n".to_string());
    frames
}

/// The deltas of the answer's tool calls, in the shape `call.tool_calls` asks for (none when
/// they come in a final whole message).
fn tool_call_chunks(
    call: &Call,
    answer: &Answer,
    delta: &dyn Fn(Value, Value) -> String,
) -> Vec<String> {
    let mut frames = Vec::new();
    for (index, (id, tool)) in answer.tools.iter().enumerate() {
        match call.tool_calls {
            ToolCalls::FinalMessage => {}
            ToolCalls::ObjectArguments => {
                let function = json!({"name": tool.name, "arguments": tool.input});
                let whole =
                    json!({"index": index, "id": id, "type": "function", "function": function});
                frames.push(delta(json!({"tool_calls": [whole]}), Value::Null));
            }
            ToolCalls::Unindexed | ToolCalls::Standard | ToolCalls::StopWithCalls => {
                let bare = call.tool_calls == ToolCalls::Unindexed;
                let mut pieces = split(&tool.input.to_string(), index as u64).into_iter();
                let first = pieces.next().unwrap_or_default();
                let function = json!({"name": tool.name, "arguments": first});
                let opening = if bare {
                    json!({"type": "function", "function": function})
                } else {
                    json!({"index": index, "id": id, "type": "function", "function": function})
                };
                frames.push(delta(json!({"tool_calls": [opening]}), Value::Null));
                for piece in pieces {
                    let more = if bare {
                        json!({"function": {"arguments": piece}})
                    } else {
                        json!({"index": index, "function": {"arguments": piece}})
                    };
                    frames.push(delta(json!({"tool_calls": [more]}), Value::Null));
                }
            }
        }
    }
    frames
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

fn data(data: &Value) -> String {
    format!("data: {data}\n\n")
}

/// Splits `text` into pieces of 1 to 6 characters, chosen by `seed`; when it holds a
/// backslash, a piece ends right after the first one, inside an escape sequence.
fn split(text: &str, seed: u64) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let escape = chars.iter().position(|&c| c == '\\');
    let mut state = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let mut end = (start + 1 + (state >> 33) as usize % 6).min(chars.len());
        if let Some(e) = escape.filter(|e| (start..end).contains(e)) {
            end = e + 1;
        }
        pieces.push(chars[start..end].iter().collect());
        start = end;
    }
    pieces
}
