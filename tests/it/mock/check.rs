//! Request validation: what each API's wire rules demand of a request, and whether its tool
//! results answer the tool calls the mock sent that task.
//!
//! Every rule a request breaks becomes one problem; the mock answers such a request 400 and
//! lists the problems in [`MockModel::problems`](super::MockModel::problems).
//!
//! The Claude Code CLI is held to the same rules but for what it does its own way: it brings
//! its own tools, and puts `role: "system"` messages between the turns.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Client, Headers, TaskScript};

pub(super) fn check_anthropic(
    headers: &Headers,
    body: &Value,
    task: &TaskScript,
    client: Client,
) -> Vec<String> {
    let mut p = Vec::new();
    let version = headers.get("anthropic-version");
    if version.map(String::as_str) != Some("2023-06-01") {
        p.push(format!(
            "header anthropic-version is {version:?}, want \"2023-06-01\""
        ));
    }
    check_request_basics(headers, body, &mut p);
    check_positive(body, "max_tokens", &mut p);
    if body.get("system").is_some_and(|s| text_of(s).is_none()) {
        p.push("system must be a string or an array of text blocks".into());
    }
    let messages = array(&body["messages"]);
    let mut turn = 0;
    for (i, message) in messages.iter().enumerate() {
        if client == Client::ClaudeCode && message["role"] == "system" {
            if text_of(&message["content"]).is_none() {
                p.push(format!("messages[{i}] is a system message without text"));
            }
            continue;
        }
        let want = if turn % 2 == 0 { "user" } else { "assistant" };
        turn += 1;
        if message["role"] != want {
            let role = &message["role"];
            p.push(format!(
                "messages[{i}].role is {role}, want {want:?} (roles alternate from user)"
            ));
        }
        check_anthropic_content(i, &message["content"], &mut p);
    }
    if !check_review_tools(body, &mut p) {
        match client {
            Client::Plait => check_anthropic_tools(&body["tools"], &mut p),
            Client::ClaudeCode | Client::Aider => check_claude_code_tools(&body["tools"], &mut p),
        }
    }
    check_tool_results(messages, task, &mut p);
    check_cache_breakpoints(body, &mut p);
    p
}

/// The API allows at most four `cache_control` breakpoints in tools, system and messages,
/// each `{"type": "ephemeral"}` (with an optional `ttl`).
fn check_cache_breakpoints(body: &Value, p: &mut Vec<String>) {
    fn walk<'a>(value: &'a Value, found: &mut Vec<&'a Value>) {
        match value {
            Value::Object(map) => {
                if let Some(mark) = map.get("cache_control") {
                    found.push(mark);
                }
                map.values().for_each(|v| walk(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    for key in ["tools", "system", "messages"] {
        walk(&body[key], &mut found);
    }
    if found.len() > 4 {
        p.push(format!(
            "{} cache_control breakpoints; the API allows at most 4",
            found.len()
        ));
    }
    for mark in found {
        if mark["type"] != "ephemeral" {
            p.push(format!("cache_control {mark} is not of type \"ephemeral\""));
        }
    }
}

fn check_anthropic_content(i: usize, content: &Value, p: &mut Vec<String>) {
    if content.is_string() {
        return;
    }
    let Some(blocks) = content.as_array().filter(|b| !b.is_empty()) else {
        return p.push(format!(
            "messages[{i}].content is neither a string nor blocks"
        ));
    };
    for (j, block) in blocks.iter().enumerate() {
        let at = format!("messages[{i}].content[{j}]");
        let ok = match block["type"].as_str() {
            Some("text") => block["text"].as_str().is_some_and(|t| !t.is_empty()),
            Some("tool_use") => {
                block["id"].is_string() && block["name"].is_string() && block["input"].is_object()
            }
            Some("tool_result") => {
                block["tool_use_id"].is_string()
                    && block
                        .get("content")
                        .is_none_or(|c| c.is_string() || c.is_array())
                    && block.get("is_error").is_none_or(Value::is_boolean)
            }
            Some(_) => true,
            None => false,
        };
        if !ok {
            p.push(format!("{at} is not a well-formed block: {block}"));
        }
    }
}

/// The tools a request may force, and the fields each one's schema must require: a
/// reviewer's `submit_review`, a judge's `submit_pick` and a manager's `submit_plan`.
const FORCED_TOOLS: &[(&str, &[&str])] = &[
    ("submit_review", &["verdict", "summary"]),
    ("submit_pick", &["attempt", "why"]),
    ("submit_plan", &["tasks"]),
];

/// A review or planning request forces its tool (Anthropic `{type: "tool", name}`, OpenAI
/// `{type: "function", function: {name}}`) and offers only it. Returns whether the request is
/// one.
fn check_review_tools(body: &Value, p: &mut Vec<String>) -> bool {
    let choice = &body["tool_choice"];
    let forced = choice["name"]
        .as_str()
        .or(choice["function"]["name"].as_str());
    let Some(&(name, want)) = FORCED_TOOLS.iter().find(|(n, _)| Some(*n) == forced) else {
        return false;
    };
    let tools = array(&body["tools"]);
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["name"].as_str().or(t["function"]["name"].as_str()))
        .collect();
    if names != [name] {
        p.push(format!(
            "a request forcing {name} offers {names:?}, not just it"
        ));
    }
    let schema = tools.first().map(|t| {
        if t["input_schema"].is_null() {
            &t["function"]["parameters"]
        } else {
            &t["input_schema"]
        }
    });
    let required = schema.map(|s| s["required"].clone()).unwrap_or_default();
    if required != serde_json::json!(want) {
        p.push(format!("{name} must require {want:?}, not {required}"));
    }
    true
}

fn check_anthropic_tools(tools: &Value, p: &mut Vec<String>) {
    let Some(tools) = tools.as_array() else {
        return p.push("tools is missing or not an array".into());
    };
    let mut editor = false;
    let mut names = BTreeSet::new();
    for (i, tool) in tools.iter().enumerate() {
        let name = tool["name"].as_str().unwrap_or_default();
        match tool["type"].as_str() {
            Some("text_editor_20250728") if name == "str_replace_based_edit_tool" => editor = true,
            Some(kind) if kind != "custom" => {
                p.push(format!(
                    "tools[{i}] is a built-in tool {kind:?} named {name:?}"
                ));
            }
            _ => {
                if tool["input_schema"]["type"] != "object" {
                    p.push(format!(
                        "tools[{i}] ({name:?}) has no input_schema of type object"
                    ));
                }
                names.insert(name);
            }
        }
    }
    if !editor {
        let want = r#"{"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}"#;
        p.push(format!("tools lack {want}"));
    }
    for want in ["list_files", "search"] {
        if !names.contains(want) {
            p.push(format!("tools lack the client tool {want:?}"));
        }
    }
}

/// Claude Code offers its own tools, custom ones without a `type`, and none at all on its side
/// requests; each needs a name, and a custom one an object schema.
fn check_claude_code_tools(tools: &Value, p: &mut Vec<String>) {
    if tools.is_null() {
        return;
    }
    let Some(tools) = tools.as_array() else {
        return p.push("tools is not an array".into());
    };
    for (i, tool) in tools.iter().enumerate() {
        let name = tool["name"].as_str().unwrap_or_default();
        let custom = tool.get("type").is_none_or(|t| t == "custom");
        if name.is_empty() {
            p.push(format!("tools[{i}] has no name"));
        } else if custom && tool["input_schema"]["type"] != "object" {
            p.push(format!(
                "tools[{i}] ({name:?}) has no input_schema of type object"
            ));
        }
    }
}

/// The ids of the `ty` blocks of an Anthropic message, read from their `field`.
fn block_ids<'a>(message: Option<&'a Value>, ty: &str, field: &str) -> BTreeSet<&'a str> {
    let blocks = message.map(|m| array(&m["content"])).unwrap_or_default();
    let of_type = blocks.iter().filter(|b| b["type"] == ty);
    of_type.filter_map(|b| b[field].as_str()).collect()
}

/// Anthropic: every tool_use is answered in the next message, tool_results come first and
/// answer the previous message, and the previous answer's calls are answered last. System
/// messages (Claude Code's) do not count as the next or previous message.
fn check_tool_results(messages: &[Value], task: &TaskScript, p: &mut Vec<String>) {
    let pending = |id: &str| task.pending.iter().any(|x| x == id);
    let turns: Vec<(usize, &Value)> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m["role"] != "system")
        .collect();
    for (k, &(i, message)) in turns.iter().enumerate() {
        if message["role"] == "assistant" {
            let next = turns.get(k + 1).map(|&(_, m)| m);
            let answered = block_ids(next, "tool_result", "tool_use_id");
            for id in block_ids(Some(message), "tool_use", "id") {
                if !task.sent.contains(id) {
                    p.push(format!(
                        "messages[{i}] has tool_use {id:?}, which the mock never sent"
                    ));
                } else if !answered.contains(id) && !pending(id) {
                    p.push(format!(
                        "messages[{i}] has tool_use {id:?}; the next message lacks its tool_result"
                    ));
                }
            }
            continue;
        }
        let previous = k.checked_sub(1).map(|j| turns[j].1);
        check_results_answer(i, message, previous, task, p);
    }
    let last_user = messages.iter().rev().find(|m| m["role"] == "user");
    let answered = block_ids(last_user, "tool_result", "tool_use_id");
    // A request without assistant messages starts a new conversation: nothing is owed.
    let continues = messages.iter().any(|m| m["role"] == "assistant");
    for id in task.pending.iter().filter(|_| continues) {
        if !answered.contains(id.as_str()) {
            p.push(format!(
                "the last user message lacks a tool_result for {id:?} of the previous answer"
            ));
        }
    }
}

/// Anthropic: the tool_results of user message `i` come before its other blocks and answer
/// calls of the `previous` message that the mock sent.
fn check_results_answer(
    i: usize,
    message: &Value,
    previous: Option<&Value>,
    task: &TaskScript,
    p: &mut Vec<String>,
) {
    let called = block_ids(previous, "tool_use", "id");
    let mut other_before = false;
    for block in array(&message["content"]) {
        if block["type"] != "tool_result" {
            other_before = true;
            continue;
        }
        let id = block["tool_use_id"].as_str().unwrap_or_default();
        if other_before {
            p.push(format!(
                "messages[{i}]: tool_result {id:?} comes after a non-tool_result block"
            ));
        }
        if !task.sent.contains(id) {
            p.push(format!(
                "messages[{i}] has a tool_result for {id:?}, which the mock never sent"
            ));
        } else if !called.contains(id) {
            p.push(format!(
                "messages[{i}] answers {id:?}, which the previous message did not call"
            ));
        }
    }
}

pub(super) fn check_openai(
    headers: &Headers,
    body: &Value,
    task: &TaskScript,
    client: Client,
) -> Vec<String> {
    let mut p = Vec::new();
    check_request_basics(headers, body, &mut p);
    let limits = ["max_tokens", "max_completion_tokens"];
    let limits: Vec<_> = limits
        .into_iter()
        .filter(|k| body.get(*k).is_some())
        .collect();
    // aider leaves the limit to the server.
    if limits.is_empty() && client != Client::Aider {
        p.push("neither max_tokens nor max_completion_tokens is set".into());
    }
    for key in limits {
        check_positive(body, key, &mut p);
    }
    if body.get("stream_options").is_some() && body["stream"] != true {
        p.push("stream_options is only allowed when stream is true".into());
    }
    let messages = array(&body["messages"]);
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if !["system", "developer", "user", "assistant", "tool"].contains(&role) {
            p.push(format!(
                "messages[{i}].role is {}, not a chat role",
                message["role"]
            ));
        }
        // The API takes null or none beside tool calls; llama-cpp-python's server refuses
        // null and its templates fail without one: a string, empty if need be.
        if role == "assistant" && !message["content"].is_string() {
            p.push(format!(
                "messages[{i}].content is {}, not a string (llama-cpp-python refuses it)",
                message["content"]
            ));
        }
    }
    if client != Client::Aider && !check_review_tools(body, &mut p) {
        check_openai_tools(&body["tools"], &mut p);
    }
    check_tool_messages(messages, task, &mut p);
    p
}

fn check_openai_tools(tools: &Value, p: &mut Vec<String>) {
    let Some(tools) = tools.as_array() else {
        return p.push("tools is missing or not an array".into());
    };
    let mut names = BTreeSet::new();
    for (i, tool) in tools.iter().enumerate() {
        let function = &tool["function"];
        let name = function["name"].as_str();
        names.extend(name);
        let ok = tool["type"] == "function"
            && name.is_some()
            && function["description"].is_string()
            && function["parameters"]["type"] == "object";
        if !ok {
            let want = "{type: \"function\", function: {name, description, parameters}}";
            p.push(format!(
                "tools[{i}] is not {want} with an object schema: {tool}"
            ));
        }
    }
    for want in ["str_replace_based_edit_tool", "list_files", "search"] {
        if !names.contains(want) {
            p.push(format!("tools lack the function {want:?}"));
        }
    }
}

/// OpenAI: every tool call is answered by the `tool` messages right after it, each of those
/// answers a call of that assistant message, and the previous answer's calls are answered.
fn check_tool_messages(messages: &[Value], task: &TaskScript, p: &mut Vec<String>) {
    let mut open = BTreeSet::new();
    for (i, message) in messages.iter().enumerate() {
        match message["role"].as_str().unwrap_or_default() {
            "assistant" => open = check_tool_calls(messages, i, task, p),
            "tool" => check_tool_message(i, message, &open, task, p),
            _ => open.clear(),
        }
    }
    let tool_messages = messages.iter().filter(|m| m["role"] == "tool");
    let answered: BTreeSet<_> = tool_messages
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    // A request without assistant messages starts a new conversation: nothing is owed.
    let continues = messages.iter().any(|m| m["role"] == "assistant");
    for id in task.pending.iter().filter(|_| continues) {
        if !answered.contains(id.as_str()) {
            p.push(format!(
                "no tool message answers {id:?} of the previous answer"
            ));
        }
    }
}

/// OpenAI: the tool calls of assistant message `i` are well formed and were sent by the mock,
/// and the `tool` messages right after it answer them; returns the ids it calls.
fn check_tool_calls<'a>(
    messages: &'a [Value],
    i: usize,
    task: &TaskScript,
    p: &mut Vec<String>,
) -> BTreeSet<&'a str> {
    let calls = array(&messages[i]["tool_calls"]);
    let following = messages[i + 1..].iter().take_while(|m| m["role"] == "tool");
    let answered: BTreeSet<_> = following
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    let mut open = BTreeSet::new();
    for (j, call) in calls.iter().enumerate() {
        let id = call["id"].as_str().unwrap_or_default();
        let arguments = call["function"]["arguments"].as_str();
        let ok = call["type"] == "function"
            && call["function"]["name"].is_string()
            && arguments.is_some_and(|a| serde_json::from_str::<Value>(a).is_ok());
        if !ok {
            let want = "{id, type: \"function\", function: {name, arguments}}";
            let at = format!("messages[{i}].tool_calls[{j}]");
            p.push(format!("{at} is not {want} with JSON arguments: {call}"));
        }
        if !task.sent.contains(id) {
            p.push(format!(
                "messages[{i}] calls {id:?}, which the mock never sent"
            ));
        } else if !answered.contains(id) && !task.pending.iter().any(|x| x == id) {
            p.push(format!(
                "messages[{i}] calls {id:?}; no tool message right after answers it"
            ));
        }
        open.insert(id);
    }
    open
}

/// OpenAI: `tool` message `i` answers a call of the assistant message just before it (`open`)
/// and carries text.
fn check_tool_message(
    i: usize,
    message: &Value,
    open: &BTreeSet<&str>,
    task: &TaskScript,
    p: &mut Vec<String>,
) {
    let id = message["tool_call_id"].as_str().unwrap_or_default();
    if !task.sent.contains(id) {
        p.push(format!(
            "messages[{i}] answers tool call {id:?}, which the mock never sent"
        ));
    } else if !open.contains(id) {
        p.push(format!(
            "messages[{i}] answers {id:?}, not called just before"
        ));
    }
    if text_of(&message["content"]).is_none() {
        p.push(format!(
            "messages[{i}].content is neither a string nor text parts"
        ));
    }
}

/// Both APIs: a JSON content type, an object body, a model, messages and a boolean stream flag.
fn check_request_basics(headers: &Headers, body: &Value, p: &mut Vec<String>) {
    let content_type = headers.get("content-type");
    if !content_type.is_some_and(|c| c.to_ascii_lowercase().starts_with("application/json")) {
        p.push(format!(
            "content-type is {content_type:?}, want application/json"
        ));
    }
    if !body["model"].is_string() {
        p.push(format!("model is {}, want a string", body["model"]));
    }
    if array(&body["messages"]).is_empty() {
        p.push("messages is missing, empty or not an array".into());
    }
    if body.get("stream").is_some_and(|s| !s.is_boolean()) {
        p.push(format!("stream is {}, want a boolean", body["stream"]));
    }
}

fn check_positive(body: &Value, key: &str, p: &mut Vec<String>) {
    if body[key].as_u64().unwrap_or(0) == 0 {
        p.push(format!("{key} is {}, want an integer > 0", body[key]));
    }
}

/// The elements of an array, or none.
fn array(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The text of a string or of an array of `{type: "text", text}` blocks.
pub(super) fn text_of(value: &Value) -> Option<String> {
    if let Some(text) = value.as_str() {
        return Some(text.to_string());
    }
    let texts = value
        .as_array()?
        .iter()
        .map(|block| match block["text"].as_str() {
            Some(text) if block["type"] == "text" => Some(text),
            _ => None,
        });
    texts.collect::<Option<Vec<_>>>().map(|t| t.join("\n"))
}
