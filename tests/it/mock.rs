//! A mock model server for the model-agent tests: real HTTP on `127.0.0.1:0`.
//!
//! It speaks the Anthropic Messages API or OpenAI chat completions as the project's wire facts
//! (API-FACTS.md) describe them. A request belongs to the task named by the `Task id: <id>` line
//! of its system prompt and is answered with that task's next scripted [`Turn`]. Every request
//! is recorded; whatever breaks the wire rules is answered 400 and listed by
//! [`MockModel::problems`], so a test that ends with no problems has shown that its client speaks
//! the protocol. Streams are written a few bytes at a time, so clients meet events split anywhere.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::Response;
use axum::Router;
use futures_util::StreamExt;
use regex::Regex;
use serde_json::{json, Value};
use tokio::sync::oneshot;

/// The API a mock speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    OpenAi,
}

/// One tool call the scripted assistant makes.
#[derive(Clone, Debug)]
pub struct ToolCall {
    pub name: String,
    pub input: Value,
}

impl ToolCall {
    pub fn new(name: &str, input: Value) -> ToolCall {
        ToolCall {
            name: name.to_string(),
            input,
        }
    }
}

/// Calls of the editor tool, `str_replace_based_edit_tool`, one function per command.
pub mod edit {
    use serde_json::json;

    use super::ToolCall;

    const NAME: &str = "str_replace_based_edit_tool";

    pub fn view(path: &str) -> ToolCall {
        ToolCall::new(NAME, json!({"command": "view", "path": path}))
    }

    pub fn create(path: &str, text: &str) -> ToolCall {
        ToolCall::new(
            NAME,
            json!({"command": "create", "path": path, "file_text": text}),
        )
    }

    pub fn str_replace(path: &str, old: &str, new: &str) -> ToolCall {
        let input = json!({"command": "str_replace", "path": path, "old_str": old, "new_str": new});
        ToolCall::new(NAME, input)
    }

    pub fn insert(path: &str, line: u64, text: &str) -> ToolCall {
        let input =
            json!({"command": "insert", "path": path, "insert_line": line, "insert_text": text});
        ToolCall::new(NAME, input)
    }
}

/// One scripted answer of the mock.
#[derive(Clone, Debug)]
#[allow(clippy::enum_variant_names)] // PauseTurn is named after the API's "pause_turn".
pub enum Turn {
    /// The assistant calls these tools (Anthropic stop_reason "tool_use", after a short text
    /// block; OpenAI finish_reason "tool_calls", content null).
    Tools(Vec<ToolCall>),
    /// Plain text and the end of the turn (Anthropic "end_turn"; OpenAI "stop").
    Text(String),
    /// Text cut off by the token limit (Anthropic "max_tokens"; OpenAI "length").
    MaxTokens(String),
    /// Anthropic "pause_turn" with some text (OpenAI: plain text and "stop").
    PauseTurn,
    /// Anthropic stop_reason "refusal"; OpenAI finish_reason "content_filter".
    Refusal,
    /// An HTTP error: status, raw body, extra headers (e.g. retry-after). An empty `body` becomes
    /// the provider's error body for that status.
    Status {
        status: u16,
        body: String,
        headers: Vec<(String, String)>,
    },
    /// 200 with a body that is not valid JSON (non-stream), or a data line with broken JSON
    /// amid an otherwise complete stream.
    Malformed,
    /// The answer stops early: a stream ends cleanly in the middle of an event, before
    /// message_stop / [DONE]; a non-stream body claims its full content-length, sends half and
    /// drops the connection.
    Truncated,
    /// Stream: a 200, a few events, then an error event (Anthropic `event: error` with
    /// overloaded_error; OpenAI a `data: {"error": ...}` chunk). Non-stream: 529 (Anthropic) or
    /// 500 (OpenAI) with the provider's error body.
    ErrorEvent,
}

/// One request the mock received, and the status it answered.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub task: Option<String>,
    pub method: String,
    pub path: String,
    /// Header names are lowercase.
    pub headers: BTreeMap<String, String>,
    /// The JSON body; a body that is not JSON is kept as a string.
    pub body: Value,
    pub status: u16,
}

/// A running mock model server; it stops on drop.
pub struct MockModel {
    url: String,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MockModel {
    /// Starts a server for `provider` on its own thread and runtime, expecting `api_key`.
    pub fn start(provider: Provider, api_key: &str) -> MockModel {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the mock model");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let port = listener.local_addr().expect("mock address").port();
        let shared = Arc::new(Shared {
            provider,
            api_key: api_key.to_string(),
            state: Mutex::default(),
        });
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("mock-model".to_string())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("mock runtime");
                // Dropping the runtime afterwards ends every open connection.
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                    tokio::select! {
                        _ = async { axum::serve(listener, app).await } => {}
                        _ = stopped => {}
                    }
                });
            })
            .expect("spawn the mock model thread");
        let base = format!("http://127.0.0.1:{port}");
        let url = match provider {
            Provider::Anthropic => base,
            Provider::OpenAi => format!("{base}/v1"),
        };
        MockModel {
            url,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The base URL for a client: Anthropic without `/v1`, OpenAI with it.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Appends turns to `task`'s script; once it runs out the task is answered Text("done").
    pub fn script(&self, task: &str, turns: Vec<Turn>) {
        let mut state = self.shared.lock();
        state
            .tasks
            .entry(task.to_string())
            .or_default()
            .turns
            .extend(turns);
    }

    /// Sets the usage of every successful answer. OpenAI reports `prompt_tokens` = input +
    /// cache_read (its prompt count includes cached tokens, also given as
    /// `prompt_tokens_details.cached_tokens`) and `completion_tokens` = output.
    pub fn set_usage(&self, input: u64, output: u64, cache_creation: u64, cache_read: u64) {
        self.shared.lock().usage = Usage {
            input,
            output,
            cache_creation,
            cache_read,
        };
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    /// Requests received for one task; `""` counts the requests without a task id.
    pub fn count(&self, task: &str) -> usize {
        let state = self.shared.lock();
        let of_task = |r: &&Recorded| r.task.as_deref().unwrap_or("") == task;
        state.requests.iter().filter(of_task).count()
    }

    /// Everything wrong in what the mock received; it answered those requests 400 (404 for a
    /// wrong path).
    pub fn problems(&self) -> Vec<String> {
        self.shared.lock().problems.clone()
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

type Headers = BTreeMap<String, String>;

struct Shared {
    provider: Provider,
    api_key: String,
    state: Mutex<MockState>,
}

#[derive(Default)]
struct MockState {
    tasks: HashMap<String, TaskScript>,
    usage: Usage,
    requests: Vec<Recorded>,
    problems: Vec<String>,
    serial: u64,
}

/// A task's remaining turns and the tool ids the mock gave it.
#[derive(Default)]
struct TaskScript {
    turns: VecDeque<Turn>,
    /// Every tool id sent to this task in a complete answer.
    sent: BTreeSet<String>,
    /// The ids of the last complete answer if it called tools: the next request must answer them.
    pending: Vec<String>,
    tools_sent: u64,
}

#[derive(Clone, Copy)]
struct Usage {
    input: u64,
    output: u64,
    cache_creation: u64,
    cache_read: u64,
}

impl Default for Usage {
    fn default() -> Usage {
        Usage {
            input: 100,
            output: 20,
            cache_creation: 0,
            cache_read: 0,
        }
    }
}

static TASK_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Task id: ([A-Za-z0-9._-]+)").expect("task line regex"));

async fn answer(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let raw = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let headers: Headers = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into(),
            )
        })
        .collect();
    shared
        .reply(&parts.method, parts.uri.path(), headers, &raw)
        .into_response()
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, MockState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Checks and records one request and decides the answer.
    fn reply(&self, method: &Method, path: &str, headers: Headers, raw: &[u8]) -> Reply {
        let body = serde_json::from_slice::<Value>(raw).ok();
        let task = body.as_ref().and_then(|b| task_id(self.provider, b));
        let mut state = self.lock();
        state.serial += 1;
        let reply = self.decide(&mut state, method, path, &headers, body.as_ref(), &task);
        let body = body.unwrap_or_else(|| Value::String(String::from_utf8_lossy(raw).into()));
        state.requests.push(Recorded {
            task,
            method: method.to_string(),
            path: path.to_string(),
            headers,
            body,
            status: reply.status,
        });
        reply
    }

    fn decide(
        &self,
        state: &mut MockState,
        method: &Method,
        path: &str,
        headers: &Headers,
        body: Option<&Value>,
        task: &Option<String>,
    ) -> Reply {
        let provider = self.provider;
        let serial = state.serial;
        let endpoint = match provider {
            Provider::Anthropic => "/v1/messages",
            Provider::OpenAi => "/v1/chat/completions",
        };
        if method != Method::POST || path != endpoint {
            let problem = format!("{method} {path}: not this API's endpoint (POST {endpoint})");
            state.problems.push(problem.clone());
            return error_reply(provider, serial, 404, &problem);
        }
        if !self.authorized(headers) {
            let message = match provider {
                Provider::Anthropic => "invalid x-api-key",
                Provider::OpenAi => "Incorrect API key provided",
            };
            return error_reply(provider, serial, 401, message);
        }
        let key = task.clone().unwrap_or_default();
        let label = format!("request {serial} (task {key:?})");
        let Some(body) = body else {
            let problem = "the body is not JSON".to_string();
            state.problems.push(format!("{label}: {problem}"));
            return error_reply(provider, serial, 400, &problem);
        };
        let script = state.tasks.entry(key.clone()).or_default();
        let problems = match provider {
            Provider::Anthropic => check_anthropic(headers, body, script),
            Provider::OpenAi => check_openai(headers, body, script),
        };
        if !problems.is_empty() {
            let message = problems.join("; ");
            state
                .problems
                .extend(problems.iter().map(|p| format!("{label}: {p}")));
            return error_reply(provider, serial, 400, &message);
        }
        let turn = script
            .turns
            .pop_front()
            .unwrap_or_else(|| Turn::Text("done".into()));
        let call = Call {
            provider,
            serial,
            model: body["model"].as_str().unwrap_or("unknown").to_string(),
            usage: state.usage,
            stream: body["stream"] == true,
            include_usage: body["stream_options"]["include_usage"] == true,
        };
        play(&call, turn, script, &key)
    }

    fn authorized(&self, headers: &Headers) -> bool {
        let key = Some(self.api_key.as_str());
        let bearer = headers
            .get("authorization")
            .and_then(|v| v.strip_prefix("Bearer "));
        match self.provider {
            Provider::Anthropic => {
                headers.get("x-api-key").map(String::as_str) == key || bearer == key
            }
            Provider::OpenAi => bearer == key,
        }
    }
}

/// The task id in a request's system prompt.
fn task_id(provider: Provider, body: &Value) -> Option<String> {
    let system = match provider {
        Provider::Anthropic => text_of(&body["system"]),
        Provider::OpenAi => body["messages"]
            .as_array()?
            .iter()
            .find(|m| m["role"] == "system")
            .and_then(|m| text_of(&m["content"])),
    }?;
    let captures = TASK_LINE.captures(&system)?;
    Some(captures[1].to_string())
}

/// The elements of an array, or none.
fn array(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The text of a string or of an array of `{type: "text", text}` blocks.
fn text_of(value: &Value) -> Option<String> {
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

// ---- Validation ----

fn check_anthropic(headers: &Headers, body: &Value, task: &TaskScript) -> Vec<String> {
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
    for (i, message) in messages.iter().enumerate() {
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if message["role"] != want {
            let role = &message["role"];
            p.push(format!(
                "messages[{i}].role is {role}, want {want:?} (roles alternate from user)"
            ));
        }
        check_anthropic_content(i, &message["content"], &mut p);
    }
    check_anthropic_tools(&body["tools"], &mut p);
    check_tool_results(messages, task, &mut p);
    p
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

/// The ids of the `ty` blocks of an Anthropic message, read from their `field`.
fn block_ids<'a>(message: Option<&'a Value>, ty: &str, field: &str) -> BTreeSet<&'a str> {
    let blocks = message.map(|m| array(&m["content"])).unwrap_or_default();
    let of_type = blocks.iter().filter(|b| b["type"] == ty);
    of_type.filter_map(|b| b[field].as_str()).collect()
}

/// Anthropic: every tool_use is answered in the next message, tool_results come first and
/// answer the previous message, and the previous answer's calls are answered last.
fn check_tool_results(messages: &[Value], task: &TaskScript, p: &mut Vec<String>) {
    let pending = |id: &str| task.pending.iter().any(|x| x == id);
    for (i, message) in messages.iter().enumerate() {
        if message["role"] == "assistant" {
            let answered = block_ids(messages.get(i + 1), "tool_result", "tool_use_id");
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
        let called = block_ids(i.checked_sub(1).map(|j| &messages[j]), "tool_use", "id");
        let blocks = array(&message["content"]);
        let mut other_before = false;
        for block in blocks {
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
    let last_user = messages.iter().rev().find(|m| m["role"] == "user");
    let answered = block_ids(last_user, "tool_result", "tool_use_id");
    for id in &task.pending {
        if !answered.contains(id.as_str()) {
            p.push(format!(
                "the last user message lacks a tool_result for {id:?} of the previous answer"
            ));
        }
    }
}

fn check_openai(headers: &Headers, body: &Value, task: &TaskScript) -> Vec<String> {
    let mut p = Vec::new();
    check_request_basics(headers, body, &mut p);
    let limits = ["max_tokens", "max_completion_tokens"];
    let limits: Vec<_> = limits
        .into_iter()
        .filter(|k| body.get(*k).is_some())
        .collect();
    if limits.is_empty() {
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
    }
    check_openai_tools(&body["tools"], &mut p);
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
            "assistant" => {
                let calls = array(&message["tool_calls"]);
                let following = messages[i + 1..].iter().take_while(|m| m["role"] == "tool");
                let answered: BTreeSet<_> = following
                    .filter_map(|m| m["tool_call_id"].as_str())
                    .collect();
                open.clear();
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
            }
            "tool" => {
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
            _ => open.clear(),
        }
    }
    let tool_messages = messages.iter().filter(|m| m["role"] == "tool");
    let answered: BTreeSet<_> = tool_messages
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    for id in &task.pending {
        if !answered.contains(id.as_str()) {
            p.push(format!(
                "no tool message answers {id:?} of the previous answer"
            ));
        }
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

// ---- Answers ----

/// What a request needs to know to render its answer.
struct Call {
    provider: Provider,
    serial: u64,
    model: String,
    usage: Usage,
    stream: bool,
    include_usage: bool,
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
}

/// Plays one turn for a task; tool calls get ids, which the next request must answer.
fn play(call: &Call, turn: Turn, task: &mut TaskScript, key: &str) -> Reply {
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
        let calls = answer.tools.iter().map(|(id, tool)| {
            let function = json!({"name": tool.name, "arguments": tool.input.to_string()});
            json!({"id": id, "type": "function", "function": function})
        });
        message["tool_calls"] = calls.collect();
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
            "finish_reason": answer.stop.reason(Provider::OpenAi),
        }],
        "usage": openai_usage(call.usage),
    })
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
    for (index, (id, tool)) in answer.tools.iter().enumerate() {
        let mut pieces = split(&tool.input.to_string(), index as u64).into_iter();
        let first = pieces.next().unwrap_or_default();
        let function = json!({"name": tool.name, "arguments": first});
        let opening = json!({"index": index, "id": id, "type": "function", "function": function});
        frames.push(delta(json!({"tool_calls": [opening]}), Value::Null));
        for piece in pieces {
            let more = json!({"index": index, "function": {"arguments": piece}});
            frames.push(delta(json!({"tool_calls": [more]}), Value::Null));
        }
    }
    frames.push(delta(
        json!({}),
        json!(answer.stop.reason(Provider::OpenAi)),
    ));
    if call.include_usage {
        frames.push(chunk(json!([]), openai_usage(call.usage)));
    }
    frames.push("data: [DONE]\n\n".to_string());
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

// ---- HTTP replies ----

/// An answer before it becomes an HTTP response.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    delivery: Delivery,
}

#[derive(Clone, Copy)]
enum Delivery {
    /// The body in one piece.
    Whole,
    /// Chunks of 5 to 13 bytes, each flushed on its own.
    Trickle,
    /// The full body's content-length, half the body, then the connection drops.
    CutShort,
}

impl Reply {
    fn new(call: &Call, status: u16, content_type: &str, body: Vec<u8>) -> Reply {
        Reply {
            status,
            headers: base_headers(call.provider, call.serial, content_type),
            body,
            delivery: Delivery::Whole,
        }
    }

    fn into_response(self) -> Response {
        let mut response = Response::builder().status(self.status);
        for (name, value) in &self.headers {
            response = response.header(name, value);
        }
        let pieces = match self.delivery {
            Delivery::Whole => return response.body(Body::from(self.body)).expect("a response"),
            Delivery::Trickle => trickle(self.body).into_iter().map(Ok).collect(),
            Delivery::CutShort => {
                response = response.header("content-length", self.body.len());
                let half = Bytes::copy_from_slice(&self.body[..self.body.len() / 2]);
                vec![
                    Ok(half),
                    Err(std::io::Error::other("the mock cuts the body short")),
                ]
            }
        };
        let body = futures_util::stream::iter(pieces).then(|piece| async move {
            // Pending once, so the server flushes each piece by itself.
            tokio::task::yield_now().await;
            piece
        });
        response.body(Body::from_stream(body)).expect("a response")
    }
}

/// Cuts a body into pieces of 5 to 13 bytes, wherever they fall.
fn trickle(body: Vec<u8>) -> Vec<Bytes> {
    let sizes = [5, 9, 13, 7, 11, 6, 12, 8, 10].into_iter().cycle();
    let mut rest = body.as_slice();
    let mut pieces = Vec::new();
    for size in sizes {
        if rest.is_empty() {
            break;
        }
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        pieces.push(Bytes::copy_from_slice(piece));
        rest = tail;
    }
    pieces
}

fn base_headers(provider: Provider, serial: u64, content_type: &str) -> Vec<(String, String)> {
    let request_id = match provider {
        Provider::Anthropic => "request-id",
        Provider::OpenAi => "x-request-id",
    };
    vec![
        ("content-type".into(), content_type.into()),
        (request_id.into(), format!("req_{serial}")),
    ]
}

/// A scripted HTTP error; its headers replace the mock's own of the same name.
fn status_reply(call: &Call, status: u16, body: String, headers: Vec<(String, String)>) -> Reply {
    let mut reply = error_reply(call.provider, call.serial, status, default_message(status));
    if !body.is_empty() {
        if serde_json::from_str::<Value>(&body).is_err() {
            let content_type = reply.headers.iter_mut().find(|(n, _)| n == "content-type");
            content_type.expect("error replies have a content-type").1 = "text/plain".into();
        }
        reply.body = body.into_bytes();
    }
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        reply.headers.retain(|(n, _)| *n != name);
        reply.headers.push((name, value));
    }
    reply
}

fn error_reply(provider: Provider, serial: u64, status: u16, message: &str) -> Reply {
    Reply {
        status,
        headers: base_headers(provider, serial, "application/json"),
        body: error_body(provider, serial, status, message)
            .to_string()
            .into_bytes(),
        delivery: Delivery::Whole,
    }
}

/// The provider's error body for `status`.
fn error_body(provider: Provider, serial: u64, status: u16, message: &str) -> Value {
    match provider {
        Provider::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                402 => "billing_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                500.. => "api_error",
                _ => "invalid_request_error",
            };
            let error = json!({"type": kind, "message": message});
            json!({"type": "error", "error": error, "request_id": format!("req_{serial}")})
        }
        Provider::OpenAi => {
            let (kind, code) = match status {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                404 => ("invalid_request_error", json!("unknown_url")),
                429 => ("requests", json!("rate_limit_exceeded")),
                500.. => ("server_error", Value::Null),
                _ => ("invalid_request_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
    }
}

/// The status and message of the provider's "try again later" error.
fn overloaded(provider: Provider) -> (u16, &'static str) {
    match provider {
        Provider::Anthropic => (529, "Overloaded"),
        Provider::OpenAi => (500, "The server had an error while processing your request"),
    }
}

fn default_message(status: u16) -> &'static str {
    match status {
        401 => "invalid api key",
        429 => "Rate limit reached; slow down",
        529 => "Overloaded",
        500.. => "Internal server error",
        _ => "Request failed",
    }
}
