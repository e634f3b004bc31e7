//! The gateway: for each run (and each `plait worker`), one HTTP server on 127.0.0.1
//! through which every agent CLI (Claude Code, aider, a `{ cli }` agent that names a
//! provider) reaches its model. It passes the providers' own wire formats through to the
//! provider's real base URL: Anthropic's Messages (JSON and server-sent events), OpenAI's
//! chat completions and responses, count_tokens and models, and whatever else lies under
//! the base URL.
//!
//! - **One token per task.** An agent is given `http://127.0.0.1:<port>/t/<token>` as its
//!   base URL (or `plait-<token>` as its key, for a client whose base URL takes no path).
//!   The gateway swaps in the provider's real key, so the key never enters an agent's
//!   process; where plait holds no key (a Claude Code login), the client's own
//!   credentials go through as they are. Every request is attributed to its task.
//! - **One limiter.** A request for an answer is admitted by the same token buckets as
//!   plait's own model agents ([`plait_llm::limiter`], per provider and key, shared
//!   across machines through the store in a spread-out run), which learn from the
//!   answers' limit headers. A 429 (or an overloaded or failing server) is waited out,
//!   `retry-after` first, and the request sent again within a bound, so the CLI sees one
//!   slow answer instead of an error it would retry blindly.
//! - **Streams pass through as they arrive**: each chunk is sent on at once, and read on
//!   the way for the answer's usage (input, output, cache writes and reads), its time to
//!   the first token, and the task's transcript (the same JSON lines a model agent's
//!   requests leave). Each answered request's usage is handed to the task's [`Meter`] as
//!   it ends, so the task's tokens and cost are live; the meter can also refuse further
//!   requests (the run's budget is spent), which the CLI is told in its provider's words.
//!   An answer that carries no usage (a local server's stream) is estimated from its text
//!   and marked so ([`plait_llm::estimate`]).

use std::collections::HashMap;
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use plait_core::state::Usage;
use plait_llm::conversation::TurnUsage;
use plait_llm::http::{classify, without_url, CallError, Timing, Transcript};
use plait_llm::limiter::{Cost, Limiter};
use plait_llm::provider::{default_prices, ProviderKind, ProviderSettings};
use plait_llm::{anthropic, estimate, sse};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// The largest request body the gateway takes (a long conversation with images).
const MAX_BODY: usize = 64 << 20;
/// Tries of one request at most, the first included.
const MAX_ATTEMPTS: u32 = 5;
/// The longest single wait the gateway holds a request for before it hands the CLI the
/// provider's answer instead.
const MAX_WAIT: Duration = Duration::from_secs(180);
/// What an agent CLI is given as its key when the gateway holds the real one.
pub const KEY_PREFIX: &str = "plait-";

/// What a task's requests are counted against.
pub trait Meter: Send + Sync {
    /// Why no further request may be sent (the run's budget is spent), if so.
    fn refused(&self) -> Option<String>;
    /// One answered request: its tokens, cost and time.
    fn answered(&self, usage: &Usage);
}

/// Where one task's requests go, and what they are counted against.
pub struct Route {
    /// The task's id, for the logs.
    pub task: String,
    /// The provider whose base URL and key the requests are sent with (no key: the
    /// client's own credentials go through).
    pub provider: Arc<ProviderSettings>,
    /// The limiter of that provider and key, which plait's own requests share.
    pub limiter: Arc<Limiter>,
    /// The task's transcript, appended to.
    pub transcript: PathBuf,
    pub meter: Arc<dyn Meter>,
}

struct Entry {
    route: Route,
    /// The credentials file of a login (Claude Code's) whose bearer the gateway sends in
    /// place of the stand-in the client was given (see [`Lease::login`]).
    login: Mutex<Option<PathBuf>>,
    /// Requests for an answer so far, numbered in the transcript.
    turns: AtomicU32,
    /// Answers counted so far.
    answered: Arc<AtomicU64>,
    /// Requests for an answer received so far, answered or not.
    asked: Arc<AtomicU64>,
}

type Routes = Mutex<HashMap<String, Arc<Entry>>>;

struct Inner {
    client: reqwest::Client,
    routes: Routes,
}

/// The running gateway; dropping it stops the server (requests in flight finish).
pub struct Gateway {
    port: u16,
    inner: Arc<Inner>,
    stop: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("port", &self.port).finish()
    }
}

/// A task's way through the gateway: held while its agent runs; dropping it closes it.
pub struct Lease {
    token: String,
    port: u16,
    routes: Weak<Inner>,
    holds_key: bool,
    answered: Arc<AtomicU64>,
    asked: Arc<AtomicU64>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("port", &self.port).finish()
    }
}

impl Lease {
    /// The base URL the agent is given: its provider's base URL, as the gateway serves it
    /// to this task.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/t/{}", self.port, self.token)
    }

    /// What the agent is given as its key: a stand-in the gateway replaces with the real
    /// one (or drops, for a server that takes no key); `None` when plait holds no key and
    /// the client's own credentials go through.
    pub fn key(&self) -> Option<String> {
        self.holds_key
            .then(|| format!("{KEY_PREFIX}{}", self.token))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many answers the gateway has counted for this task so far.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// How many requests for an answer the task's agent has sent so far, whatever became
    /// of them: none after a round means its model was never asked.
    pub fn asked(&self) -> u64 {
        self.asked.load(Ordering::Relaxed)
    }
}

impl Lease {
    /// Keeps a login in plait: the client is given `plait-<token>` as its bearer (in a
    /// credentials file of its own that plait writes), and the gateway sends the login's
    /// real access token, read from `credentials` (Claude Code's `.credentials.json`) at each
    /// request, so a refresh the user's own CLI makes meanwhile is taken. Returns the
    /// stand-in.
    pub fn login(&self, credentials: PathBuf) -> String {
        if let Some(inner) = self.routes.upgrade() {
            if let Some(entry) = lock(&inner.routes).get(&self.token) {
                *entry.login.lock().unwrap_or_else(|e| e.into_inner()) = Some(credentials);
            }
        }
        format!("{KEY_PREFIX}{}", self.token)
    }
}

/// The OAuth access token of a Claude Code login's credentials file.
fn login_token(credentials: &std::path::Path) -> Option<String> {
    let text = std::fs::read(credentials).ok()?;
    let value: Value = serde_json::from_slice(&text).ok()?;
    value["claudeAiOauth"]["accessToken"]
        .as_str()
        .map(str::to_string)
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(inner) = self.routes.upgrade() {
            lock(&inner.routes).remove(&self.token);
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn lock(routes: &Routes) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Entry>>> {
    routes.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gateway {
    /// Starts the gateway on a free port of 127.0.0.1; `client` sends the requests on
    /// (its connections kept alive, HTTP/2 where the provider speaks it).
    pub async fn start(client: reqwest::Client) -> std::io::Result<Gateway> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let port = listener.local_addr()?.port();
        // Each event of a stream goes out as it comes, not when the last one is acked.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let inner = Arc::new(Inner {
            client,
            routes: Mutex::new(HashMap::new()),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(inner.clone());
        tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stopped.await;
            });
            if let Err(e) = served.await {
                tracing::warn!("the gateway stopped: {e}");
            }
        });
        Ok(Gateway {
            port,
            inner,
            stop: Some(stop),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Opens a way through for one task's agent.
    pub fn open(&self, route: Route) -> Lease {
        let token = token();
        // A server that takes no key gets none, but its clients get the stand-in: some
        // (litellm, under aider) refuse to send a request without a key.
        let holds_key = route.provider.api_key.is_some() || route.provider.keyless;
        let answered = Arc::new(AtomicU64::new(0));
        let asked = Arc::new(AtomicU64::new(0));
        lock(&self.inner.routes).insert(
            token.clone(),
            Arc::new(Entry {
                route,
                login: Mutex::new(None),
                turns: AtomicU32::new(0),
                answered: answered.clone(),
                asked: asked.clone(),
            }),
        );
        Lease {
            token,
            port: self.port,
            routes: Arc::downgrade(&self.inner),
            holds_key,
            answered,
            asked,
        }
    }
}

/// 128 random bits, in hex.
fn token() -> String {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // No /dev/urandom: the clock and an address, which no agent sees before it runs.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let here = &bytes as *const _ as usize as u128;
        bytes = (nanos ^ here.rotate_left(64)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An error in the shape both providers' clients read (`error.message`, `error.type`).
fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (status, axum::Json(body)).into_response()
}

/// The route a request belongs to and the path under its base URL: `/t/<token>/rest`, or
/// a key `plait-<token>` on a request to `/rest`.
fn find(inner: &Inner, path: &str, headers: &HeaderMap) -> Option<(Arc<Entry>, String)> {
    let routes = lock(&inner.routes);
    if let Some(rest) = path.strip_prefix("/t/") {
        let (token, rest) = rest.split_once('/').unwrap_or((rest, ""));
        return routes.get(token).map(|e| (e.clone(), rest.to_string()));
    }
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or(bearer)?;
    let token = key.trim().strip_prefix(KEY_PREFIX)?;
    let rest = path.trim_start_matches('/').to_string();
    routes.get(token).map(|e| (e.clone(), rest))
}

async fn handle(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Some((entry, rest)) = find(&inner, parts.uri.path(), &parts.headers) else {
        return error(
            StatusCode::FORBIDDEN,
            "authentication_error",
            "plait's gateway: no running task holds this token (its agent has ended, or the \
             request came from outside the run)",
        );
    };
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(e) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                &format!("plait's gateway could not read the request: {e}"),
            )
        }
    };
    if let Err(why) = allowed(&parts.method, &rest) {
        return error(StatusCode::FORBIDDEN, "permission_error", &why);
    }
    let path = match parts.uri.query() {
        Some(query) => format!("{rest}?{query}"),
        None => rest.clone(),
    };
    let call = Call::new(entry, parts.method, &rest, path, parts.headers, body);
    if call.answer.is_some() {
        call.entry.asked.fetch_add(1, Ordering::Relaxed);
        if let Some(why) = call.entry.route.meter.refused() {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("plait refused the request: {why} (--max-cost)"),
            );
        }
    }
    let (head, told) = oneshot::channel();
    let (chunks, body) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    tokio::spawn(call.exchange(inner.client.clone(), head, chunks));
    match told.await {
        Ok(Head::Answer { status, headers }) => {
            let stream = futures_util::stream::unfold(body, |mut body| async move {
                body.recv().await.map(|chunk| (chunk, body))
            });
            let mut response = Response::new(Body::from_stream(stream));
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            response
        }
        Ok(Head::Error(response)) => *response,
        Err(_) => error(
            StatusCode::BAD_GATEWAY,
            "api_error",
            "plait's gateway lost the request",
        ),
    }
}

/// What the exchange tells the handler first.
enum Head {
    Answer {
        status: StatusCode,
        headers: HeaderMap,
    },
    Error(Box<Response>),
}

/// A request for an answer (a Messages, chat completions or responses call): what the
/// limiter reserves for it, and its body for the transcript.
struct Answer {
    cost: Cost,
    request: Value,
}

/// One request on its way to the provider.
struct Call {
    entry: Arc<Entry>,
    method: Method,
    url: String,
    headers: HeaderMap,
    body: Bytes,
    answer: Option<Answer>,
}

/// Headers that belong to one connection, not to the request it carries; and the ones
/// plait sets itself.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host"
            | "content-length"
            | "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authorization"
            | "proxy-authenticate"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            // Answers come uncompressed, so the gateway can read their usage.
            | "accept-encoding"
    )
}

impl Call {
    fn new(
        entry: Arc<Entry>,
        method: Method,
        rest: &str,
        path: String,
        incoming: HeaderMap,
        body: Bytes,
    ) -> Call {
        let provider = &entry.route.provider;
        let url = format!("{}/{}", provider.base_url.trim_end_matches('/'), path);
        let login = entry
            .login
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut headers = HeaderMap::new();
        let ours = |value: &HeaderValue| {
            value.to_str().is_ok_and(|v| {
                v.trim()
                    .trim_start_matches("Bearer ")
                    .starts_with(KEY_PREFIX)
            })
        };
        for (name, value) in &incoming {
            let auth = name == "x-api-key" || name == "authorization";
            // The real key replaces the stand-in; a client's own credentials (a login)
            // go through when plait holds none.
            if hop_by_hop(name) || (auth && (provider.api_key.is_some() || ours(value))) {
                continue;
            }
            headers.append(name.clone(), value.clone());
        }
        // A login plait holds: its bearer, in the stand-in's place.
        let bearer = login
            .filter(|_| provider.api_key.is_none())
            .and_then(|path| login_token(&path));
        if let Some(token) = bearer {
            if let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}")) {
                headers.insert(HeaderName::from_static("authorization"), value);
            }
        }
        if let Some(key) = &provider.api_key {
            let (name, value) = match provider.kind {
                ProviderKind::Anthropic => ("x-api-key", key.expose().to_string()),
                ProviderKind::Openai => ("authorization", format!("Bearer {}", key.expose())),
            };
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
        let mut body = body;
        let answer = answers(&method, rest)
            .then(|| serde_json::from_slice::<Value>(&body).ok())
            .flatten()
            .filter(Value::is_object)
            .map(|mut request| {
                // Chat completions stream their usage only when asked to.
                if provider.kind == ProviderKind::Openai
                    && rest.ends_with("chat/completions")
                    && request["stream"] == true
                    && request.get("stream_options").is_none()
                {
                    request["stream_options"] = json!({"include_usage": true});
                    body = Bytes::from(request.to_string());
                }
                Answer {
                    cost: estimate(provider, &request),
                    request,
                }
            });
        Call {
            entry,
            method,
            url,
            headers,
            body,
            answer,
        }
    }

    /// Sends the request on (again, while the provider asks to wait and the bound
    /// allows), tells `head` how the provider answered, and passes the answer's body
    /// through `chunks` as it arrives, accounting for it as it ends.
    async fn exchange(
        self,
        client: reqwest::Client,
        head: oneshot::Sender<Head>,
        chunks: mpsc::Sender<Result<Bytes, std::io::Error>>,
    ) {
        let route = &self.entry.route;
        let limiter = route.limiter.clone();
        let mut head = Some(head);
        let mut retries = 0u32;
        loop {
            let permit = match &self.answer {
                None => None,
                Some(answer) => {
                    let Some(waiting) = head.as_mut() else { return };
                    // Held here, not failed: the limiter admits it when the buckets allow.
                    let admitted = tokio::select! {
                        admitted = limiter.acquire(answer.cost) => admitted,
                        _ = waiting.closed() => return,
                    };
                    match admitted {
                        Ok(permit) => Some(permit),
                        Err(reason) => {
                            let response =
                                error(StatusCode::UNAUTHORIZED, "authentication_error", &reason);
                            tell(&mut head, response);
                            return;
                        }
                    }
                }
            };
            let started = Instant::now();
            let sent = client
                .request(self.method.clone(), &self.url)
                .headers(self.headers.clone())
                .body(self.body.clone())
                .send()
                .await;
            let response = match sent {
                Ok(response) => response,
                Err(e) => {
                    if let Some(permit) = permit {
                        limiter.finish(permit, None, None);
                    }
                    let reason = format!(
                        "plait's gateway cannot reach {}: {}",
                        route.provider.base_url,
                        without_url(&e)
                    );
                    self.record(retries, started, json!({"error": reason}));
                    retries += 1;
                    if retries < MAX_ATTEMPTS && !e.is_builder() {
                        tokio::time::sleep(backoff(retries)).await;
                        continue;
                    }
                    let response = error(StatusCode::BAD_GATEWAY, "api_error", &reason);
                    tell(&mut head, response);
                    return;
                }
            };
            let status = response.status();
            let headers = response.headers().clone();
            if let (Some(_), false) = (&self.answer, status.is_success()) {
                let text = response.text().await.unwrap_or_default();
                if let Some(permit) = permit {
                    limiter.finish(permit, None, Some(&headers));
                }
                let answer = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
                let said = json!({"status": status.as_u16(), "response": answer, "error": format!("{status}")});
                self.record(retries, started, said);
                if let CallError::Retryable { wait, limited, .. } =
                    classify(&route.provider, status.as_u16(), &headers, &text)
                {
                    let wait = wait.unwrap_or_else(|| backoff(retries + 1));
                    if limited {
                        // Every request of this provider and key waits, plait's own too.
                        limiter.pause(wait);
                    }
                    retries += 1;
                    if retries < MAX_ATTEMPTS && wait <= MAX_WAIT {
                        tracing::info!(task = %route.task, "the gateway holds a request {wait:?}: {status}");
                        let Some(waiting) = head.as_mut() else { return };
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => continue,
                            _ = waiting.closed() => return,
                        }
                    }
                }
                let response = passed_on(status, &headers, Body::from(text));
                tell(&mut head, response);
                return;
            }
            let Some(told) = head.take() else { return };
            if told
                .send(Head::Answer {
                    status,
                    headers: answer_headers(&headers),
                })
                .is_err()
            {
                if let Some(permit) = permit {
                    limiter.finish(permit, None, Some(&headers));
                }
                return;
            }
            let streamed = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            let mut tally = Tally::new(streamed, self.answer.is_some());
            let mut body = response.bytes_stream();
            let mut broke = None;
            while let Some(chunk) = body.next().await {
                match chunk {
                    Ok(chunk) => {
                        tally.push(&chunk, started);
                        if chunks.send(Ok(chunk)).await.is_err() {
                            broke = Some("the agent stopped reading the answer".to_string());
                            break;
                        }
                    }
                    Err(e) => {
                        let reason = format!("the answer broke off: {}", without_url(&e));
                        let _ = chunks
                            .send(Err(std::io::Error::other(reason.clone())))
                            .await;
                        broke = Some(reason);
                        break;
                    }
                }
            }
            drop(chunks);
            let Some(answer) = &self.answer else { return };
            let (mut tokens, response) = tally.finish(route.provider.kind);
            if tokens.is_none() && status.is_success() && broke.is_none() {
                // The server said nothing of what it used: estimated, and marked so.
                route
                    .limiter
                    .usage_unreported(&route.provider.name, streamed);
                tokens = Some(TurnUsage {
                    input: estimate::input_tokens(&answer.request),
                    output: estimate::output_tokens_of(&response),
                    estimated: true,
                    ..TurnUsage::default()
                });
            }
            let used = tokens.map(|u| Cost {
                input: match route.provider.kind {
                    // Reads from the cache do not count against Anthropic's input limit.
                    ProviderKind::Anthropic => u.input + u.cache_creation,
                    ProviderKind::Openai => u.input + u.cache_creation + u.cache_read,
                },
                output: u.output,
            });
            if let Some(permit) = permit {
                limiter.finish(permit, used, Some(&headers));
            }
            let mut said = json!({"status": status.as_u16(), "response": response});
            if let Some(reason) = &broke {
                said["broke"] = json!(reason);
            }
            self.record(retries, started, said);
            let model = answer.request["model"].as_str().unwrap_or("");
            let prices = default_prices(model).or(route.provider.prices);
            let mut usage = Usage {
                cost_usd: prices.map(|_| 0.0),
                ..Usage::default()
            };
            let timing = Timing {
                first_token: tally.first.unwrap_or_else(|| started.elapsed()),
                total: started.elapsed(),
                retries,
            };
            plait_llm::account_turn(&mut usage, prices, tokens.unwrap_or_default(), &timing);
            route.meter.answered(&usage);
            self.entry.answered.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }

    /// Appends one attempt of a request for an answer to the task's transcript.
    fn record(&self, retries: u32, started: Instant, said: Value) {
        let Some(answer) = &self.answer else { return };
        let turn = match retries {
            0 => self.entry.turns.fetch_add(1, Ordering::Relaxed) + 1,
            _ => self.entry.turns.load(Ordering::Relaxed),
        };
        let mut record = json!({
            "turn": turn,
            "attempt": retries + 1,
            "at": now_ms(),
            "via": "gateway",
            "request": answer.request,
            "ms": started.elapsed().as_millis() as u64,
        });
        if let (Some(record), Value::Object(said)) = (record.as_object_mut(), said) {
            record.extend(said);
        }
        Transcript::open(&self.entry.route.transcript).write(record);
    }
}

/// Hands the handler an answer made here (an error, or the provider's refusal).
fn tell(head: &mut Option<oneshot::Sender<Head>>, response: Response) {
    if let Some(head) = head.take() {
        let _ = head.send(Head::Error(Box::new(response)));
    }
}

/// The endpoints an agent may reach with the key plait holds: a model's answers, their
/// token counts, the list of models and a `HEAD` of the base URL; not the rest of what the key may do (files,
/// batches, fine-tuning, an organization's administration).
const ENDPOINTS: &[(&str, &[&str])] = &[
    (
        "POST",
        &[
            "messages",
            "messages/count_tokens",
            "chat/completions",
            "responses",
            "completions",
            "embeddings",
        ],
    ),
    ("GET", &["models", "models/*"]),
    // Claude Code's check that the server is there.
    ("HEAD", &[""]),
];

/// Whether `method` on `path` (under the provider's base URL) is one of [`ENDPOINTS`]; the
/// refusal names them.
fn allowed(method: &Method, path: &str) -> Result<(), String> {
    let refuse = || {
        Err(format!(
            "plait's gateway passes on a model's answers, token counts and models only, not \
             {method} /{path}"
        ))
    };
    let path = path.trim_end_matches('/');
    // No way out of the base URL: no dot segments, escaped or not.
    let lower = path.to_ascii_lowercase();
    if path.split('/').any(|s| s == "." || s == "..")
        || lower.contains("%2e")
        || lower.contains("%2f")
    {
        return refuse();
    }
    // Anthropic's paths start with `v1/`; an OpenAI-compatible base URL holds it already.
    let path = path.strip_prefix("v1/").unwrap_or(path);
    let fits = |pattern: &str| match pattern.strip_suffix("/*") {
        Some(dir) => path
            .strip_prefix(dir)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|id| !id.is_empty() && !id.contains('/')),
        None => path == pattern,
    };
    let known = ENDPOINTS
        .iter()
        .any(|(m, patterns)| method.as_str() == *m && patterns.iter().any(|p| fits(p)));
    if known {
        Ok(())
    } else {
        refuse()
    }
}

/// Whether `method` on `path` asks for an answer (and so is paced and accounted).
fn answers(method: &Method, path: &str) -> bool {
    let path = path.trim_end_matches('/');
    method == Method::POST
        && ["messages", "chat/completions", "responses", "completions"]
            .iter()
            .any(|end| path == *end || path.ends_with(&format!("/{end}")))
}

/// What the limiter reserves for `request`: its input as estimated (about four bytes a
/// token, less what Anthropic reads from its cache) and its output at most.
fn estimate(provider: &ProviderSettings, request: &Value) -> Cost {
    Cost {
        input: match provider.kind {
            ProviderKind::Anthropic => anthropic::uncached_estimate(request),
            ProviderKind::Openai => (request.to_string().len() / 4) as u64,
        },
        output: ["max_tokens", "max_completion_tokens", "max_output_tokens"]
            .iter()
            .find_map(|k| request[*k].as_u64())
            .unwrap_or(u64::from(provider.max_tokens)),
    }
}

/// The provider's headers, for the client, less those of the connection.
fn answer_headers(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        if !hop_by_hop(name) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

fn passed_on(status: StatusCode, headers: &HeaderMap, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = answer_headers(headers);
    response
}

/// What an answer said, read as it passes: its usage, when its first token came, and
/// its events (or its JSON) for the transcript.
struct Tally {
    sse: Option<sse::Decoder>,
    /// Whether the answer is one to account for (a transcript is kept).
    keep: bool,
    events: Vec<Value>,
    json: Vec<u8>,
    first: Option<Duration>,
    seen: Vec<Value>,
}

impl Tally {
    fn new(streamed: bool, keep: bool) -> Tally {
        Tally {
            sse: streamed.then(sse::Decoder::default),
            keep,
            events: Vec::new(),
            json: Vec::new(),
            first: None,
            seen: Vec::new(),
        }
    }

    fn push(&mut self, chunk: &[u8], started: Instant) {
        if !self.keep {
            return;
        }
        match &mut self.sse {
            Some(decoder) => {
                for event in decoder.push(chunk) {
                    self.event(event, started);
                }
            }
            None => {
                if self.json.len() + chunk.len() <= MAX_BODY {
                    self.json.extend_from_slice(chunk);
                }
            }
        }
    }

    fn event(&mut self, event: sse::Event, started: Instant) {
        let data: Value =
            serde_json::from_str(&event.data).unwrap_or_else(|_| Value::String(event.data.clone()));
        if self.first.is_none() && is_content(&event.name, &data) {
            self.first = Some(started.elapsed());
        }
        if has_usage(&data) {
            self.seen.push(data.clone());
        }
        self.events.push(json!({"event": event.name, "data": data}));
    }

    /// The answer's tokens (`None` when it gave none) and what the transcript keeps of it.
    fn finish(&mut self, kind: ProviderKind) -> (Option<TurnUsage>, Value) {
        if let Some(mut decoder) = self.sse.take() {
            if let Some(event) = decoder.finish() {
                self.event(event, Instant::now());
            }
            let response = json!({"events": std::mem::take(&mut self.events)});
            return (usage_of(&self.seen, kind), response);
        }
        let value: Value = serde_json::from_slice(&self.json)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&self.json).into_owned()));
        (usage_of(std::slice::from_ref(&value), kind), value)
    }
}

/// Whether an event carries the answer's first content: a text or tool-input delta.
fn is_content(name: &str, data: &Value) -> bool {
    let kind = data["type"].as_str().unwrap_or(name);
    kind == "content_block_delta"
        || (kind.starts_with("response.") && kind.ends_with(".delta"))
        || data
            .pointer("/choices/0/delta")
            .is_some_and(|d| !d["content"].is_null() || !d["tool_calls"].is_null())
}

/// The usage objects a value carries: Anthropic's (at the top, or in `message_start`'s
/// message), OpenAI's chat completions' and responses'.
fn usages(value: &Value) -> impl Iterator<Item = &Value> {
    [
        value.get("usage"),
        value.pointer("/message/usage"),
        value.pointer("/response/usage"),
    ]
    .into_iter()
    .flatten()
    .filter(|u| u.is_object())
}

fn has_usage(value: &Value) -> bool {
    usages(value).next().is_some()
}

/// An answer's tokens from the usage its values carry. Anthropic's come in parts
/// (`message_start`, then `message_delta`'s running output count), each the total so far;
/// OpenAI's prompt counts include what was read from the cache, kept apart here as
/// plait's own requests keep it.
fn usage_of(values: &[Value], kind: ProviderKind) -> Option<TurnUsage> {
    let mut total = TurnUsage::default();
    let mut any = false;
    for usage in values.iter().flat_map(usages) {
        let get = |p: &str| usage.pointer(p).and_then(Value::as_u64);
        if let Some(prompt) = get("/prompt_tokens") {
            let cached = get("/prompt_tokens_details/cached_tokens").unwrap_or(0);
            total.input = prompt.saturating_sub(cached);
            total.cache_read = cached;
            total.output = get("/completion_tokens").unwrap_or(0);
        } else if kind == ProviderKind::Openai || usage.get("input_tokens_details").is_some() {
            let cached = get("/input_tokens_details/cached_tokens").unwrap_or(0);
            total.input = get("/input_tokens").unwrap_or(0).saturating_sub(cached);
            total.cache_read = cached;
            total.output = get("/output_tokens").unwrap_or(0);
        } else {
            let most = |field: &mut u64, p: &str| *field = (*field).max(get(p).unwrap_or(0));
            most(&mut total.input, "/input_tokens");
            most(&mut total.output, "/output_tokens");
            most(&mut total.cache_creation, "/cache_creation_input_tokens");
            most(&mut total.cache_read, "/cache_read_input_tokens");
        }
        any = true;
    }
    any.then_some(total)
}

/// `min(0.5 * 2^n, 8) s`.
fn backoff(retry: u32) -> Duration {
    Duration::from_secs_f64((0.5 * 2f64.powi(retry.saturating_sub(1) as i32)).min(8.0))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
