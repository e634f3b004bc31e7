//! A mock model server for the model-agent tests: real HTTP on `127.0.0.1:0`.
//!
//! It speaks the Anthropic Messages API or OpenAI chat completions as the project's wire facts
//! (API-FACTS.md) describe them. A request belongs to the task named by the `Task id: <id>` line
//! of its system prompt (`review:<id>` for a reviewer's, `manager` for a manager's) and is
//! answered with that task's next scripted [`Turn`]. Every request
//! is recorded; whatever breaks the wire rules is answered 400 and listed by
//! [`MockModel::problems`], so a test that ends with no problems has shown that its client speaks
//! the protocol. Streams are written a few bytes at a time, so clients meet events split anywhere.
//!
//! A mock started with [`MockModel::start_claude_code`] serves the real Claude Code CLI: it also
//! answers its preflight and token counts, accepts its own tools and `system` messages, and
//! [`claude_tools`] builds calls of those tools.
//!
//! This file holds the API the tests use and the path of one request: find its task, refuse what
//! is not a request to this API, [`check`] it against the wire rules, play the task's next turn
//! as an [`answer`], and send that as an HTTP [`reply`]. [`results`] reads back the tool results
//! a client sent.

mod answer;
mod check;
pub mod claude_tools;
mod reply;
mod results;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::Response;
use axum::Router;
use regex::Regex;
use serde_json::Value;
use tokio::sync::oneshot;

use answer::{play, Call};
use check::{check_anthropic, check_openai, text_of};
use reply::{error_reply, json_reply, InFlight, Reply};
pub use results::ToolResult;

/// The API a mock speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    OpenAi,
}

/// Which client the mock expects: plait's own model agent, the Claude Code CLI, or aider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Client {
    Plait,
    ClaudeCode,
    Aider,
}

/// Claude Code's token counting endpoint; only a Claude Code mock answers it.
const COUNT_TOKENS: &str = "/v1/messages/count_tokens";

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
    /// An answer that never finishes, as llama.cpp's server sometimes sends: OpenAI a role
    /// delta and then `[DONE]` (non-stream: an empty message, no `finish_reason`); Anthropic
    /// `message_start` and `message_stop` with no block and no `stop_reason`.
    Unfinished,
}

/// How the mock bends the OpenAI wire, as local servers do ([`MockModel::set_wire`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wire {
    /// Streams carry no `usage`, whatever `stream_options.include_usage` asks (llama.cpp's
    /// server, older vLLM); whole answers still do.
    pub no_stream_usage: bool,
    /// A streamed request that offers tools gets a 200 and a stream that ends before its
    /// first event (llama-cpp-python's `chatml-function-calling` raises "Automatic streaming
    /// tool choice is not supported" once the response has begun); whole answers work.
    pub no_streamed_tools: bool,
    /// How tool calls are sent.
    pub tool_calls: ToolCalls,
}

/// The shapes of tool calls local OpenAI-compatible servers send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolCalls {
    /// As the API documents them: `index` and `id`, arguments a string in pieces,
    /// `finish_reason: "tool_calls"`.
    #[default]
    Standard,
    /// Deltas without `index` or `id` (the client makes ids up; the mock takes them).
    Unindexed,
    /// Arguments as a JSON object, whole in one delta.
    ObjectArguments,
    /// `finish_reason: "stop"` although the answer calls tools.
    StopWithCalls,
    /// The calls not in deltas but in a final chunk's whole `message`.
    FinalMessage,
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
    /// When it arrived, and when its answer was decided: its first byte (a 200's after the
    /// latency). The gateway benchmark's timeline reads them.
    #[allow(dead_code)]
    pub received: SystemTime,
    #[allow(dead_code)]
    pub answered: SystemTime,
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
        MockModel::launch(provider, Client::Plait, api_key)
    }

    /// Starts an Anthropic server for the Claude Code CLI (point `ANTHROPIC_BASE_URL` at
    /// [`MockModel::url`]). Unlike [`MockModel::start`] it answers the CLI's `HEAD /` preflight
    /// (200) and `POST /v1/messages/count_tokens` (`{"input_tokens": body bytes / 4}`); accepts any
    /// custom tools (each with a name and an object `input_schema`, no editor tool required) or
    /// none, as the CLI's side requests have; and accepts `role: "system"` messages anywhere,
    /// skipping them when it checks that roles alternate and that tool results answer the calls
    /// just before. Side requests without a task line play the `""` script (`Text("done")`).
    pub fn start_claude_code(api_key: &str) -> MockModel {
        MockModel::launch(Provider::Anthropic, Client::ClaudeCode, api_key)
    }

    /// Starts an OpenAI-compatible server for aider (its `--openai-api-base` is
    /// [`MockModel::url`]). Aider sends no tools and no token limit, and its own system prompt:
    /// a request belongs to the task whose `Task id:` line is in any of its messages (plait
    /// puts it in aider's `--message`). Script its answers as [`Turn::Text`] in the edit format
    /// the plan asks aider for (e.g. `--edit-format whole`: the path, then the file in a fence).
    pub fn start_aider(api_key: &str) -> MockModel {
        MockModel::launch(Provider::OpenAi, Client::Aider, api_key)
    }

    fn launch(provider: Provider, client: Client, api_key: &str) -> MockModel {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the mock model");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let port = listener.local_addr().expect("mock address").port();
        let shared = Arc::new(Shared {
            provider,
            client,
            api_key: api_key.to_string(),
            state: Mutex::default(),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
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

    /// The API this mock speaks.
    pub fn provider(&self) -> Provider {
        self.shared.provider
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

    /// Prices input by the request's size (bytes / 4 a token) and caches prompts as the
    /// Anthropic API does: a prefix (tools, system, messages, in that order) up to a block
    /// marked `cache_control` is written to the cache when it is at least the model's
    /// minimum cacheable length; a later request reads the longest cached prefix that ends
    /// at one of its breakpoints or up to 20 blocks before one. The answer's usage then says
    /// `cache_read_input_tokens`, `cache_creation_input_tokens` and the rest as
    /// `input_tokens`. Output tokens stay as [`MockModel::set_usage`] says.
    #[allow(dead_code)]
    pub fn set_caching(&self, on: bool) {
        self.shared.lock().cache = on.then(PromptCache::default);
    }

    /// Bends the OpenAI wire as local servers do (see [`Wire`]).
    #[allow(dead_code)]
    pub fn set_wire(&self, wire: Wire) {
        self.shared.lock().wire = wire;
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

    /// Requests received for one task, token counts and `HEAD` preflights left out; `""` counts
    /// the requests without a task id.
    pub fn count(&self, task: &str) -> usize {
        let state = self.shared.lock();
        let of_task = |r: &&Recorded| r.task.as_deref().unwrap_or("") == task;
        let turns = state.requests.iter();
        let turns = turns.filter(|r| r.path != COUNT_TOKENS && r.method != "HEAD");
        turns.filter(of_task).count()
    }

    /// The tool results `task` sent back, each once, in the order they first arrived (later
    /// requests repeat the history). `""` reads the requests without a task id.
    pub fn tool_results(&self, task: &str) -> Vec<ToolResult> {
        let state = self.shared.lock();
        let of_task = state
            .requests
            .iter()
            .filter(|r| r.task.as_deref().unwrap_or("") == task);
        results::tool_results(self.shared.provider, of_task.map(|r| &r.body))
    }

    /// The text of every tool result `task` sent back, in order, and whether it is an error
    /// (OpenAI's API has no flag: plait starts the text with `Error: `).
    pub fn tool_texts(&self, task: &str) -> Vec<(String, bool)> {
        let openai = self.provider() == Provider::OpenAi;
        self.tool_results(task)
            .into_iter()
            .map(|r| {
                let is_error = r.is_error || (openai && r.text.starts_with("Error: "));
                (r.text, is_error)
            })
            .collect()
    }

    /// Everything wrong in what the mock received; it answered those requests 400 (404 for a
    /// wrong path).
    pub fn problems(&self) -> Vec<String> {
        self.shared.lock().problems.clone()
    }

    // Load mode, for the benchmarks: everything below is off by default.

    /// Each answer (not a 429) waits `latency` before its first byte.
    #[allow(dead_code)]
    pub fn set_latency(&self, latency: Duration) {
        self.shared.lock().load.latency = latency;
    }

    /// Enforces `itpm` input tokens a minute (a request's bytes / 4) as a token bucket, as
    /// [`MockModel::set_limits`] does requests; its headers are
    /// `anthropic-ratelimit-input-tokens-*`. 0 means no limit.
    #[allow(dead_code)]
    pub fn set_input_limit(&self, itpm: usize) {
        let mut state = self.shared.lock();
        state.load.itpm = itpm;
        state.load.input_bucket = None;
    }

    /// Enforces `otpm` output tokens a minute as the Anthropic API does: a request reserves
    /// its `max_tokens` (at most the whole bucket) when it is admitted and gets back what its
    /// answer did not use; its headers are `anthropic-ratelimit-output-tokens-*`. A request
    /// the bucket cannot pay for is answered 429. 0 means no limit.
    #[allow(dead_code)]
    pub fn set_output_limit(&self, otpm: usize) {
        let mut state = self.shared.lock();
        state.load.otpm = otpm;
        state.load.output_bucket = None;
    }

    /// Enforces at most `concurrency` requests in flight and `rpm` requests a minute as the
    /// Anthropic API does, as a token bucket: it starts full (`rpm`), refills continuously at
    /// `rpm / 60 s`, and each accepted request takes one. Every answer carries
    /// `anthropic-ratelimit-requests-limit`, `-remaining` (the bucket's level) and `-reset`
    /// (RFC 3339: when it will be full again). An empty bucket answers 429
    /// `rate_limit_error` with `retry-after`: the whole seconds until one request has
    /// refilled (at least 1); a full concurrency, `retry_after_secs` (at least 1). A 429 takes
    /// nothing from the bucket. 0 means no limit.
    #[allow(dead_code)]
    pub fn set_limits(&self, concurrency: usize, rpm: usize, retry_after_secs: u64) {
        let mut state = self.shared.lock();
        state.load.concurrency = concurrency;
        state.load.rpm = rpm;
        state.load.retry_after = retry_after_secs;
    }

    /// Answers a deterministic pseudo-random fraction of well-formed requests with a fault
    /// instead of the task's next turn: 529 overloaded (`p529`), 500 (`p500`), or a 200
    /// stream that ends in an error event mid-way (`p_midstream`; non-stream: 529). The draw
    /// depends on `seed`, the task and how many requests that task made before.
    #[allow(dead_code)]
    pub fn set_faults(&self, p529: f64, p500: f64, p_midstream: f64, seed: u64) {
        self.shared.lock().load.faults = Some(Faults {
            p529,
            p500,
            p_midstream,
            seed,
        });
    }

    /// Whether request bodies are kept for [`MockModel::requests`] (default true); a load
    /// test turns it off so the mock's memory does not grow with every request.
    #[allow(dead_code)]
    pub fn keep_bodies(&self, keep: bool) {
        self.shared.lock().load.drop_bodies = !keep;
    }

    /// The load counters so far.
    #[allow(dead_code)]
    pub fn load_stats(&self) -> LoadStats {
        self.shared.lock().load.stats
    }

    /// Zeroes the load counters (and fills the request bucket again).
    #[allow(dead_code)]
    pub fn reset_load_stats(&self) {
        let mut state = self.shared.lock();
        state.load.stats = LoadStats::default();
        state.load.bucket = None;
    }
}

/// What the mock did in load mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Requests answered 200 with the task's turn (not a fault).
    pub ok: u64,
    /// Requests refused 429 by [`MockModel::set_limits`].
    pub limited: u64,
    /// Of those, refused for the rate (the rest: for concurrency).
    pub limited_rpm: u64,
    /// Faults injected by [`MockModel::set_faults`].
    pub faults: u64,
    /// The most requests in flight at once (received and not yet fully answered).
    pub peak_in_flight: usize,
    pub in_flight: usize,
    /// Input tokens taken from the bucket of [`MockModel::set_input_limit`].
    pub input_tokens: u64,
    /// Output tokens the answers used, of the bucket of [`MockModel::set_output_limit`].
    pub output_tokens: u64,
    /// The most output tokens reserved at once by requests in flight.
    pub peak_output_reserved: u64,
    pub output_reserved: u64,
}

#[derive(Clone, Copy, Debug)]
struct Faults {
    p529: f64,
    p500: f64,
    p_midstream: f64,
    seed: u64,
}

#[derive(Default)]
struct Load {
    latency: Duration,
    concurrency: usize,
    rpm: usize,
    retry_after: u64,
    faults: Option<Faults>,
    drop_bodies: bool,
    /// The request bucket's level and when it was last brought up to date (`None`: full).
    bucket: Option<(f64, Instant)>,
    /// Input tokens a minute (0: no limit), and that bucket's level.
    itpm: usize,
    input_bucket: Option<(f64, Instant)>,
    /// Output tokens a minute (0: no limit), and that bucket's level.
    otpm: usize,
    output_bucket: Option<(f64, Instant)>,
    stats: LoadStats,
}

/// A request the load mode let through.
struct Admitted {
    /// Counts it in flight, and settles its output reservation, until its answer is sent.
    guard: Option<InFlight>,
    latency: Duration,
    /// The rate limit headers its answer carries.
    headers: Vec<(String, String)>,
    /// The output tokens its answer used, set once it is known.
    used: Arc<AtomicU64>,
}

/// A token bucket of `capacity` a minute: its level now, refilled since it was last read.
fn refill(bucket: &mut Option<(f64, Instant)>, capacity: usize, now: Instant) -> f64 {
    let capacity = capacity as f64;
    let (level, at) = bucket.unwrap_or((capacity, now));
    let level = (level + now.duration_since(at).as_secs_f64() * capacity / 60.0).min(capacity);
    *bucket = Some((level, now));
    level
}

/// Anthropic's headers for the bucket `name` of `capacity` a minute at `level`.
fn bucket_headers(name: &str, capacity: usize, level: f64) -> Vec<(String, String)> {
    let cap = capacity as f64;
    let until_full = Duration::from_secs_f64((cap - level).max(0.0) * 60.0 / cap);
    let full_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now() + until_full);
    vec![
        (
            format!("anthropic-ratelimit-{name}-limit"),
            capacity.to_string(),
        ),
        (
            format!("anthropic-ratelimit-{name}-remaining"),
            (level.max(0.0).floor() as u64).to_string(),
        ),
        (
            format!("anthropic-ratelimit-{name}-reset"),
            full_at.to_string(),
        ),
    ]
}

impl Load {
    /// The request bucket's level now.
    fn level(&mut self, now: Instant) -> f64 {
        refill(&mut self.bucket, self.rpm, now)
    }

    /// Anthropic's headers for the request bucket at `level` and the input bucket as it is.
    fn rate_headers(&self, level: f64) -> Vec<(String, String)> {
        let mut headers = Vec::new();
        if self.rpm > 0 {
            headers.extend(bucket_headers("requests", self.rpm, level));
        }
        if self.itpm > 0 {
            let input = self.input_bucket.map_or(self.itpm as f64, |(l, _)| l);
            headers.extend(bucket_headers("input-tokens", self.itpm, input));
        }
        if self.otpm > 0 {
            let output = self.output_bucket.map_or(self.otpm as f64, |(l, _)| l);
            headers.extend(bucket_headers("output-tokens", self.otpm, output));
        }
        headers
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
    client: Client,
    api_key: String,
    state: Mutex<MockState>,
}

#[derive(Default)]
struct MockState {
    tasks: HashMap<String, TaskScript>,
    usage: Usage,
    /// Prompt caching as the Anthropic API does it, when on: the prefixes written so far.
    cache: Option<PromptCache>,
    requests: Vec<Recorded>,
    problems: Vec<String>,
    serial: u64,
    load: Load,
    wire: Wire,
}

/// A task's remaining turns and the tool ids the mock gave it.
#[derive(Default)]
struct TaskScript {
    turns: VecDeque<Turn>,
    /// Requests of this task that reached its script (for the fault draw).
    played: u64,
    /// Every tool id sent to this task in a complete answer.
    sent: BTreeSet<String>,
    /// The ids of the last complete answer if it called tools: the next request must answer them.
    pending: Vec<String>,
    tools_sent: u64,
    /// The last answer's tool calls went without ids: the client's are taken as the mock's.
    adopt_ids: bool,
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
    LazyLock::new(|| Regex::new(r"Task id: ([A-Za-z0-9._~-]+)").expect("task line regex"));

/// A reviewer's request names the task it reviews; its script is `review:<id>`.
static REVIEW_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Review of task: ([A-Za-z0-9._~-]+)").expect("review line regex"));

/// A judge's request names the task whose attempts it compares; its script is `pick:<id>`.
static PICK_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Pick among the attempts of task: ([A-Za-z0-9._-]+)").expect("pick line regex")
});

/// The server's one handler: every method and path comes here.
async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let received = SystemTime::now();
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
    let admitted = match shared.admit(&raw) {
        Ok(admitted) => admitted,
        Err(refusal) => {
            let path = parts.uri.path();
            let reply = shared.record(&parts.method, path, headers, &raw, (refusal, received));
            return reply.into_response();
        }
    };
    if !admitted.latency.is_zero() {
        tokio::time::sleep(admitted.latency).await;
    }
    let mut reply = shared.reply(&parts.method, parts.uri.path(), headers, &raw, received);
    reply.headers.extend(admitted.headers);
    admitted.used.store(reply.output_tokens, Ordering::Relaxed);
    reply.in_flight = admitted.guard;
    reply.into_response()
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, MockState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Load mode: admits a request (a guard that counts it in flight, the latency to wait,
    /// the rate headers) or refuses it with a 429.
    fn admit(self: &Arc<Self>, raw: &[u8]) -> Result<Admitted, Reply> {
        let mut state = self.lock();
        let body = if state.load.itpm > 0 || state.load.otpm > 0 {
            serde_json::from_slice::<Value>(raw).ok()
        } else {
            None
        };
        // What the request takes from the input bucket: its size, less what it reads from
        // the prompt cache (reads do not count against the limit).
        let input = if state.load.itpm == 0 {
            0
        } else {
            match (&state.cache, &body) {
                (Some(cache), Some(body)) => cache.charged(body),
                _ => (raw.len() / 4) as u64,
            }
        };
        // What it reserves from the output bucket: its `max_tokens`, at most the bucket.
        let reserve = body
            .as_ref()
            .and_then(|b| {
                b["max_tokens"]
                    .as_u64()
                    .or(b["max_completion_tokens"].as_u64())
            })
            .unwrap_or(4096)
            .min(state.load.otpm as u64);
        let now = Instant::now();
        let load = &mut state.load;
        let latency = load.latency;
        let used = Arc::new(AtomicU64::new(0));
        if load.concurrency == 0
            && load.rpm == 0
            && load.itpm == 0
            && load.otpm == 0
            && load.latency.is_zero()
        {
            return Ok(Admitted {
                guard: None,
                latency,
                headers: Vec::new(),
                used,
            });
        }
        let level = if load.rpm > 0 { load.level(now) } else { 0.0 };
        let input_level = refill(&mut load.input_bucket, load.itpm, now);
        let output_level = refill(&mut load.output_bucket, load.otpm, now);
        // A request larger than the whole bucket goes when it is full.
        let input_need = (input as f64).min(load.itpm as f64);
        let refusal = if load.concurrency > 0 && load.stats.in_flight >= load.concurrency {
            Some((load.retry_after.max(1), "concurrent requests"))
        } else if load.rpm > 0 && level < 1.0 {
            let refill = (1.0 - level) * 60.0 / load.rpm as f64;
            Some((refill.ceil().max(1.0) as u64, "requests per minute"))
        } else if load.itpm > 0 && input_level < input_need {
            let refill = (input_need - input_level) * 60.0 / load.itpm as f64;
            Some((refill.ceil().max(1.0) as u64, "input tokens per minute"))
        } else if load.otpm > 0 && output_level < reserve as f64 {
            let refill = (reserve as f64 - output_level) * 60.0 / load.otpm as f64;
            Some((refill.ceil().max(1.0) as u64, "output tokens per minute"))
        } else {
            None
        };
        if let Some((wait, what)) = refusal {
            let rate = what != "concurrent requests";
            load.stats.limited += 1;
            load.stats.limited_rpm += u64::from(rate);
            state.serial += 1;
            let message = format!("Number of {what} has exceeded your rate limit");
            let mut reply = error_reply(self.provider, state.serial, 429, &message);
            reply.headers.push(("retry-after".into(), wait.to_string()));
            let headers = state.load.rate_headers(level);
            reply.headers.extend(headers);
            return Err(reply);
        }
        if load.rpm > 0 {
            load.bucket = Some((level - 1.0, now));
        }
        if load.itpm > 0 {
            load.input_bucket = Some((input_level - input as f64, now));
            load.stats.input_tokens += input;
        }
        if load.otpm > 0 {
            load.output_bucket = Some((output_level - reserve as f64, now));
            load.stats.output_reserved += reserve;
            load.stats.peak_output_reserved = load
                .stats
                .peak_output_reserved
                .max(load.stats.output_reserved);
        }
        let rate_headers = load.rate_headers(level - 1.0);
        load.stats.in_flight += 1;
        load.stats.peak_in_flight = load.stats.peak_in_flight.max(load.stats.in_flight);
        let shared = self.clone();
        let settled = used.clone();
        let guard = InFlight::new(move || {
            let mut state = shared.lock();
            let load = &mut state.load;
            load.stats.in_flight -= 1;
            if load.otpm > 0 {
                // The answer is done: what it did not use of its reservation goes back.
                let used = settled.load(Ordering::Relaxed).min(reserve);
                let level = refill(&mut load.output_bucket, load.otpm, Instant::now());
                let back = (level + (reserve - used) as f64).min(load.otpm as f64);
                load.output_bucket = Some((back, Instant::now()));
                load.stats.output_reserved -= reserve;
                load.stats.output_tokens += used;
            }
        });
        Ok(Admitted {
            guard: Some(guard),
            latency,
            headers: rate_headers,
            used,
        })
    }

    /// Checks and records one request and decides the answer.
    fn reply(
        &self,
        method: &Method,
        path: &str,
        headers: Headers,
        raw: &[u8],
        received: SystemTime,
    ) -> Reply {
        let body = serde_json::from_slice::<Value>(raw).ok();
        let task = body
            .as_ref()
            .and_then(|b| task_id(self.provider, self.client, b));
        let mut state = self.lock();
        state.serial += 1;
        let reply = self.decide(&mut state, method, path, &headers, body.as_ref(), &task);
        let body = body.unwrap_or_else(|| Value::String(String::from_utf8_lossy(raw).into()));
        let request = (method, path, received);
        push_record(&mut state, task, request, headers, body, reply.status);
        reply
    }

    /// Records a request refused before it was read (a load-mode 429).
    fn record(
        &self,
        method: &Method,
        path: &str,
        headers: Headers,
        raw: &[u8],
        (reply, received): (Reply, SystemTime),
    ) -> Reply {
        let body = serde_json::from_slice::<Value>(raw).ok();
        let task = body
            .as_ref()
            .and_then(|b| task_id(self.provider, self.client, b));
        let body = body.unwrap_or_else(|| Value::String(String::from_utf8_lossy(raw).into()));
        let mut state = self.lock();
        let request = (method, path, received);
        push_record(&mut state, task, request, headers, body, reply.status);
        reply
    }

    /// Refuses a request to the wrong endpoint, with the wrong key or without a JSON body;
    /// plays the next turn for any other.
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
        if self.client == Client::ClaudeCode {
            // The CLI checks that the server is there with a bare `HEAD /` (no key) first.
            if method == Method::HEAD && path == "/" {
                return json_reply(provider, serial, &serde_json::json!({}));
            }
            if method == Method::POST && path == COUNT_TOKENS {
                return self.count_tokens(state, headers, body, task);
            }
        }
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
        let Some(body) = body else {
            let problem = "the body is not JSON".to_string();
            state
                .problems
                .push(format!("{}: {problem}", label(serial, &key)));
            return error_reply(provider, serial, 400, &problem);
        };
        self.play_next(state, headers, body, &key)
    }

    /// Answers a token count: `{"input_tokens": N}`, N the body's bytes / 4.
    fn count_tokens(
        &self,
        state: &mut MockState,
        headers: &Headers,
        body: Option<&Value>,
        task: &Option<String>,
    ) -> Reply {
        let serial = state.serial;
        if !self.authorized(headers) {
            return error_reply(self.provider, serial, 401, "invalid x-api-key");
        }
        let version = headers.get("anthropic-version").map(String::as_str);
        let problem = match body {
            None => Some("the body is not JSON".to_string()),
            Some(body) if !body["messages"].is_array() => Some("messages is not an array".into()),
            Some(_) if version != Some("2023-06-01") => Some(format!(
                "header anthropic-version is {version:?}, want \"2023-06-01\""
            )),
            Some(_) => None,
        };
        if let Some(problem) = problem {
            let label = label(serial, task.as_deref().unwrap_or_default());
            state
                .problems
                .push(format!("{label}: count_tokens: {problem}"));
            return error_reply(self.provider, serial, 400, &problem);
        }
        let bytes = body.map(|b| b.to_string().len()).unwrap_or_default();
        let count = serde_json::json!({"input_tokens": (bytes / 4).max(1)});
        json_reply(self.provider, serial, &count)
    }

    /// Checks a JSON request against the wire rules and its task's tool ids, then plays the
    /// task's next turn.
    fn play_next(
        &self,
        state: &mut MockState,
        headers: &Headers,
        body: &Value,
        key: &str,
    ) -> Reply {
        let provider = self.provider;
        let serial = state.serial;
        let script = state.tasks.entry(key.to_string()).or_default();
        if std::mem::take(&mut script.adopt_ids) {
            adopt_ids(script, body);
        }
        let problems = match provider {
            Provider::Anthropic => check_anthropic(headers, body, script, self.client),
            Provider::OpenAi => check_openai(headers, body, script, self.client),
        };
        if !problems.is_empty() {
            let message = problems.join("; ");
            let label = label(serial, key);
            state
                .problems
                .extend(problems.iter().map(|p| format!("{label}: {p}")));
            return error_reply(provider, serial, 400, &message);
        }
        script.played += 1;
        let fault = state
            .load
            .faults
            .and_then(|f| draw_fault(f, key, script.played));
        let faulted = fault.is_some();
        let cannot_stream = state.wire.no_streamed_tools
            && body["stream"] == true
            && body["tools"].as_array().is_some_and(|t| !t.is_empty());
        let turn = match fault {
            Some(turn) => turn,
            None if cannot_stream => Turn::Text(String::new()),
            None => script
                .turns
                .pop_front()
                .unwrap_or_else(|| Turn::Text("done".into())),
        };
        let call = Call {
            provider,
            serial,
            model: body["model"].as_str().unwrap_or("unknown").to_string(),
            usage: match &mut state.cache {
                Some(cache) if provider == Provider::Anthropic => cache.usage(body, state.usage),
                _ => state.usage,
            },
            stream: body["stream"] == true,
            include_usage: body["stream_options"]["include_usage"] == true
                && !state.wire.no_stream_usage,
            tool_calls: state.wire.tool_calls,
        };
        if cannot_stream {
            return Reply::new(&call, 200, "text/event-stream", Vec::new());
        }
        let mut reply = play(&call, turn, script, key);
        if faulted {
            state.load.stats.faults += 1;
        } else if reply.status == 200 {
            state.load.stats.ok += 1;
            reply.output_tokens = call.usage.output;
        }
        reply
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

fn push_record(
    state: &mut MockState,
    task: Option<String>,
    (method, path, received): (&Method, &str, SystemTime),
    headers: Headers,
    body: Value,
    status: u16,
) {
    let body = if state.load.drop_bodies {
        Value::Null
    } else {
        body
    };
    state.requests.push(Recorded {
        task,
        method: method.to_string(),
        path: path.to_string(),
        headers,
        body,
        status,
        received,
        answered: SystemTime::now(),
    });
}

/// Takes the ids a client made up for tool calls sent without any as the ones the mock sent:
/// those of the last assistant message of `body`, which its next messages must answer.
fn adopt_ids(script: &mut TaskScript, body: &Value) {
    let mut messages = body["messages"].as_array().into_iter().flatten();
    let Some(last) = messages.rfind(|m| m["role"] == "assistant") else {
        return;
    };
    let calls = last["tool_calls"].as_array().into_iter().flatten();
    let ids: Vec<String> = calls
        .filter_map(|c| c["id"].as_str().map(str::to_string))
        .collect();
    script.sent.extend(ids.iter().cloned());
    script.pending = ids;
}

/// The fault, if any, for the `n`-th request of task `key`: a splitmix64 draw of the seed,
/// the task and `n`.
fn draw_fault(faults: Faults, key: &str, n: u64) -> Option<Turn> {
    let mut x = faults.seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for b in key.bytes() {
        x = (x ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let u = (x >> 11) as f64 / (1u64 << 53) as f64;
    let status = |status: u16| Turn::Status {
        status,
        body: String::new(),
        headers: Vec::new(),
    };
    if u < faults.p529 {
        Some(status(529))
    } else if u < faults.p529 + faults.p500 {
        Some(status(500))
    } else if u < faults.p529 + faults.p500 + faults.p_midstream {
        Some(Turn::ErrorEvent)
    } else {
        None
    }
}

/// How a problem names the request it was found in.
fn label(serial: u64, task: &str) -> String {
    format!("request {serial} (task {task:?})")
}

/// The task id in a request's system prompt.
fn task_id(provider: Provider, client: Client, body: &Value) -> Option<String> {
    let system = match (provider, client) {
        (Provider::OpenAi, Client::Aider) => body["messages"]
            .as_array()?
            .iter()
            .filter_map(|m| text_of(&m["content"]))
            .find(|t| TASK_LINE.is_match(t))?,
        (Provider::Anthropic, _) => text_of(&body["system"])?,
        (Provider::OpenAi, _) => body["messages"]
            .as_array()?
            .iter()
            .find(|m| m["role"] == "system")
            .and_then(|m| text_of(&m["content"]))?,
    };
    if system.contains("Manager of a plait run") {
        return Some("manager".to_string());
    }
    if let Some(review) = REVIEW_LINE.captures(&system) {
        return Some(format!("review:{}", &review[1]));
    }
    if let Some(pick) = PICK_LINE.captures(&system) {
        return Some(format!("pick:{}", &pick[1]));
    }
    let captures = TASK_LINE.captures(&system)?;
    Some(captures[1].to_string())
}

/// The Anthropic API's prompt cache, for [`MockModel::set_caching`].
#[derive(Default)]
struct PromptCache {
    /// Hashes of the prefixes written.
    written: std::collections::HashSet<u64>,
}

impl PromptCache {
    /// The input tokens of a request that count against an input-tokens limit: all but
    /// what it reads from the cache.
    fn charged(&self, body: &Value) -> u64 {
        let (tokens, hashes, breakpoints) = Self::prefixes(body);
        let read = self.read(&tokens, &hashes, &breakpoints);
        tokens.last().copied().unwrap_or(0) - read
    }

    /// The longest cached prefix ending at a breakpoint or up to 20 blocks before one.
    fn read(&self, tokens: &[u64], hashes: &[u64], breakpoints: &[usize]) -> u64 {
        breakpoints
            .iter()
            .flat_map(|&b| (b.saturating_sub(20)..=b).rev())
            .filter(|&k| self.written.contains(&hashes[k]))
            .map(|k| tokens[k])
            .max()
            .unwrap_or(0)
    }

    /// Per block of the prompt (tools, system, messages): the tokens up to and including
    /// it, the hash of that prefix, and which blocks are breakpoints.
    fn prefixes(body: &Value) -> (Vec<u64>, Vec<u64>, Vec<usize>) {
        use std::hash::{Hash as _, Hasher as _};
        let mut blocks: Vec<&Value> = Vec::new();
        for key in ["tools", "system"] {
            if let Some(items) = body[key].as_array() {
                blocks.extend(items);
            }
        }
        for message in body["messages"].as_array().into_iter().flatten() {
            match message["content"].as_array() {
                Some(content) => blocks.extend(content),
                None => blocks.push(&message["content"]),
            }
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let mut tokens = Vec::with_capacity(blocks.len());
        let mut hashes = Vec::with_capacity(blocks.len());
        let mut total = 0u64;
        for block in &blocks {
            let mut plain = (*block).clone();
            if let Some(map) = plain.as_object_mut() {
                map.remove("cache_control");
            }
            let text = plain.to_string();
            total += (text.len() / 4) as u64;
            text.hash(&mut hasher);
            tokens.push(total);
            hashes.push(hasher.finish());
        }
        let breakpoints: Vec<usize> = (0..blocks.len())
            .filter(|&k| blocks[k].get("cache_control").is_some())
            .collect();
        (tokens, hashes, breakpoints)
    }

    /// The usage of a request: what it reads from the cache, what it writes, the rest.
    fn usage(&mut self, body: &Value, base: Usage) -> Usage {
        let (tokens, hashes, breakpoints) = Self::prefixes(body);
        let total = tokens.last().copied().unwrap_or(0);
        let least = min_cacheable(body["model"].as_str().unwrap_or(""));
        let read = self.read(&tokens, &hashes, &breakpoints);
        let mut written = read;
        for &b in &breakpoints {
            if tokens[b] >= least && self.written.insert(hashes[b]) {
                written = written.max(tokens[b]);
            }
        }
        Usage {
            input: total - written,
            cache_creation: written - read,
            cache_read: read,
            ..base
        }
    }
}

/// The shortest prefix each model caches, in tokens (as the API documents it).
fn min_cacheable(model: &str) -> u64 {
    if model.contains("haiku-4-5") || model.contains("opus-4-5") || model.contains("opus-4-6") {
        4096
    } else if model.contains("sonnet-4-6") || model.contains("haiku") {
        2048
    } else {
        1024
    }
}
