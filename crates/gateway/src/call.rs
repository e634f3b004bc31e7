//! One request on its way to the provider: its headers with the real key in place of the
//! stand-in, admitted by the limiter when it asks for an answer, sent again within a bound
//! while the provider asks to wait, and its answer passed through to the client as it
//! arrives (every secret of the request taken out of it: `redact`), kept in the task's
//! transcript and accounted as it ends, settling what its admission reserved.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use plait_llm::http::{classify, without_url, CallError, Timing, Transcript};
use plait_llm::limiter::{Cost, Permit, Waited};
use plait_llm::provider::{ProviderKind, ProviderSettings};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::endpoints::{answers, Target};
use crate::lease::{login_token, Entry, Reservation, KEY_PREFIX};
use crate::redact::Redactor;
use crate::usage::{self, reserved, Tally};
use plait_core::sync::Locked as _;

/// Tries of one request at most, the first included.
const MAX_ATTEMPTS: u32 = 5;
/// The longest single wait the gateway holds a request for before it hands the CLI the
/// provider's answer instead.
const MAX_WAIT: Duration = Duration::from_secs(180);

/// An error in the shape both providers' clients read (`error.message`, `error.type`).
pub(crate) fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (status, axum::Json(body)).into_response()
}

/// What the exchange tells the handler first.
pub(crate) enum Head {
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
pub(crate) struct Call {
    entry: Arc<Entry>,
    method: Method,
    url: reqwest::Url,
    headers: HeaderMap,
    body: Bytes,
    answer: Option<Answer>,
    /// The secrets the request carries to the provider, kept out of what goes back.
    secrets: Vec<String>,
    /// What the budget holds for it while it is in flight (a request for an answer).
    reservation: Option<Reservation>,
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

/// What became of one try of a request.
enum Attempt {
    /// It is to be sent again.
    Again,
    /// The client has its answer, or has gone.
    Over,
}

/// One try of a request: how many came before it, when it was sent, and how long the
/// limiter held it first (for the transcript).
#[derive(Clone, Copy)]
struct Try {
    retries: u32,
    started: Instant,
    waited: Option<Waited>,
}

/// Where the answer's body goes: to the handler, chunk by chunk. Unbounded, so the answer
/// is read from the provider as fast as it comes and its slot (one of the provider's
/// `concurrency`) is let go when the provider has done, not when a slow client (a CLI
/// starved of CPU among a hundred) has read it all. What a client has not read yet is at
/// most one answer.
type Chunks = mpsc::UnboundedSender<Result<Bytes, std::io::Error>>;

impl Call {
    /// The request `method` to `target` under the base URL of `entry`'s provider, with
    /// the provider's key in place of the client's stand-in; refused when the URL it makes
    /// is not exactly `target`'s path under the base URL.
    pub(crate) fn new(
        entry: Arc<Entry>,
        method: Method,
        target: &Target,
        incoming: HeaderMap,
        mut body: Bytes,
    ) -> Result<Call, String> {
        let provider = &entry.route.provider;
        let url = under_base(&provider.base_url, target)?;
        let (headers, secrets) = Call::headers(&entry, &incoming);
        let answer = Call::answer(provider, &method, &target.rest, &mut body);
        Ok(Call {
            entry,
            method,
            url,
            headers,
            body,
            answer,
            secrets,
            reservation: None,
        })
    }

    /// The client's headers less the connection's and its stand-in key, with the
    /// provider's key (or a login's bearer plait holds) in their place; and those secrets.
    fn headers(entry: &Entry, incoming: &HeaderMap) -> (HeaderMap, Vec<String>) {
        let provider = &entry.route.provider;
        let login = entry.login.locked().clone();
        let mut headers = HeaderMap::new();
        let mut secrets = Vec::new();
        let ours = |value: &HeaderValue| {
            value.to_str().is_ok_and(|v| {
                v.trim()
                    .trim_start_matches("Bearer ")
                    .starts_with(KEY_PREFIX)
            })
        };
        for (name, value) in incoming {
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
            secrets.push(token);
        }
        if let Some(key) = &provider.api_key {
            let (name, value) = match provider.kind {
                ProviderKind::Anthropic => ("x-api-key", key.expose().to_string()),
                ProviderKind::Openai => ("authorization", format!("Bearer {}", key.expose())),
            };
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(HeaderName::from_static(name), value);
            }
            secrets.push(key.expose().to_string());
        }
        (headers, secrets)
    }

    /// The request for an answer `body` holds, if it is one; a streamed chat completion is
    /// asked for its usage.
    fn answer(
        provider: &ProviderSettings,
        method: &Method,
        rest: &str,
        body: &mut Bytes,
    ) -> Option<Answer> {
        answers(method, rest)
            .then(|| serde_json::from_slice::<Value>(body).ok())
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
                    *body = Bytes::from(request.to_string());
                }
                Answer {
                    cost: reserved(provider, &request),
                    request,
                }
            })
    }

    /// The most a request for an answer may cost, in dollars, at its model's prices
    /// (0 where plait knows none); `None` for any other request.
    pub(crate) fn worst_usd(&self) -> Option<f64> {
        let answer = self.answer.as_ref()?;
        Some(plait_llm::estimate::worst_usd(
            &self.entry.route.provider,
            &answer.request,
        ))
    }

    /// Holds `reservation` until the request ends.
    pub(crate) fn reserve(&mut self, reservation: Reservation) {
        self.reservation = Some(reservation);
    }

    /// The task the request belongs to.
    pub(crate) fn entry(&self) -> &Entry {
        &self.entry
    }

    /// Sends the request on (again, while the provider asks to wait and the bound
    /// allows), tells `head` how the provider answered, and passes the answer's body
    /// through `chunks` as it arrives, accounting for it as it ends.
    pub(crate) async fn exchange(
        self,
        client: reqwest::Client,
        head: oneshot::Sender<Head>,
        chunks: Chunks,
    ) {
        let mut head = Some(head);
        let mut retries = 0u32;
        loop {
            let Some(permit) = self.admit(&mut head).await else {
                return;
            };
            let sent = Try {
                retries,
                started: Instant::now(),
                waited: permit.as_ref().map(Permit::waited),
            };
            let attempt = match self.send(&client).await {
                Err(e) => self.unreachable(&e, permit, sent, &mut head).await,
                Ok(response) if self.answer.is_some() && !response.status().is_success() => {
                    self.refused(response, permit, sent, &mut head).await
                }
                Ok(response) => {
                    let Some(head) = head.take() else { return };
                    self.pass_on(response, permit, sent, head, chunks).await;
                    return;
                }
            };
            match attempt {
                Attempt::Again => retries += 1,
                Attempt::Over => return,
            }
        }
    }

    /// Waits until the limiter admits a request for an answer (any other passes at once):
    /// `None` when the client has gone, or the limiter refuses the key (the client is told).
    async fn admit(&self, head: &mut Option<oneshot::Sender<Head>>) -> Option<Option<Permit<'_>>> {
        let Some(answer) = &self.answer else {
            return Some(None);
        };
        let waiting = head.as_mut()?;
        // Held here, not failed: the limiter admits it when the buckets allow.
        let admitted = tokio::select! {
            admitted = self.entry.route.limiter.acquire(answer.cost) => admitted,
            _ = waiting.closed() => return None,
        };
        match admitted {
            Ok(permit) => Some(Some(permit)),
            Err(reason) => {
                let response = error(StatusCode::UNAUTHORIZED, "authentication_error", &reason);
                tell(head, response);
                None
            }
        }
    }

    /// One try: the request as the client sent it, with the provider's key.
    async fn send(&self, client: &reqwest::Client) -> reqwest::Result<reqwest::Response> {
        client
            .request(self.method.clone(), self.url.clone())
            .headers(self.headers.clone())
            .body(self.body.clone())
            .send()
            .await
    }

    /// After the provider could not be reached: tried again after a pause, within the
    /// bound, or the client is told why not.
    async fn unreachable(
        &self,
        e: &reqwest::Error,
        permit: Option<Permit<'_>>,
        sent: Try,
        head: &mut Option<oneshot::Sender<Head>>,
    ) -> Attempt {
        let route = &self.entry.route;
        if let Some(permit) = permit {
            route.limiter.finish(permit, None, None);
        }
        let reason = format!(
            "plait's gateway cannot reach {}: {}",
            route.provider.base_url,
            without_url(e)
        );
        self.record(sent, json!({"error": reason}));
        if sent.retries + 1 < MAX_ATTEMPTS && !e.is_builder() {
            tokio::time::sleep(backoff(sent.retries + 1)).await;
            return Attempt::Again;
        }
        tell(head, error(StatusCode::BAD_GATEWAY, "api_error", &reason));
        Attempt::Over
    }

    /// After the provider refused a request for an answer: held and tried again where it
    /// asks to wait (a 429, an overloaded server) and the bound allows, else its refusal is
    /// passed on.
    async fn refused(
        &self,
        response: reqwest::Response,
        permit: Option<Permit<'_>>,
        sent: Try,
        head: &mut Option<oneshot::Sender<Head>>,
    ) -> Attempt {
        let route = &self.entry.route;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.bytes().await.unwrap_or_default();
        let text =
            String::from_utf8_lossy(&Redactor::new(self.secrets.clone()).whole(&text)).into_owned();
        if let Some(permit) = permit {
            route.limiter.finish(permit, None, Some(&headers));
        }
        let answer = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
        let said =
            json!({"status": status.as_u16(), "response": answer, "error": format!("{status}")});
        self.record(sent, said);
        if let CallError::Retryable { wait, limited, .. } =
            classify(&route.provider, status.as_u16(), &headers, &text)
        {
            let wait = wait.unwrap_or_else(|| backoff(sent.retries + 1));
            if limited {
                // Every request of this provider and key waits, plait's own too.
                route.limiter.pause(wait);
            }
            if sent.retries + 1 < MAX_ATTEMPTS && wait <= MAX_WAIT {
                tracing::info!(task = %route.task, "the gateway holds a request {wait:?}: {status}");
                let Some(waiting) = head.as_mut() else {
                    return Attempt::Over;
                };
                return tokio::select! {
                    _ = tokio::time::sleep(wait) => Attempt::Again,
                    _ = waiting.closed() => Attempt::Over,
                };
            }
        }
        let headers = Redactor::new(self.secrets.clone()).headers(answer_headers(&headers));
        tell(head, passed_on(status, headers, Body::from(text)));
        Attempt::Over
    }

    /// Hands the client the provider's answer as it arrives and, for a request for an
    /// answer, accounts for it as it ends: the limiter, the transcript, the task's meter.
    async fn pass_on(
        &self,
        response: reqwest::Response,
        permit: Option<Permit<'_>>,
        sent: Try,
        head: oneshot::Sender<Head>,
        chunks: Chunks,
    ) {
        let route = &self.entry.route;
        let status = response.status();
        let headers = response.headers().clone();
        let mut redactor = Redactor::new(self.secrets.clone());
        let told = head.send(Head::Answer {
            status,
            headers: redactor.headers(answer_headers(&headers)),
        });
        if told.is_err() {
            if let Some(permit) = permit {
                route.limiter.finish(permit, None, Some(&headers));
            }
            return;
        }
        let streamed = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut tally = Tally::new(streamed, self.answer.is_some());
        let broke = relay(response, &mut tally, &mut redactor, sent.started, chunks).await;
        let Some(answer) = &self.answer else { return };
        let (mut tokens, response) = tally.finish(route.provider.kind);
        if tokens.is_none() && status.is_success() {
            // The server said nothing of what it used (or the answer broke off before it
            // did): estimated, and marked so.
            if broke.is_none() {
                route
                    .limiter
                    .usage_unreported(&route.provider.name, streamed);
            }
            tokens = Some(usage::estimated(&answer.request, &response));
        }
        let used = tokens.map(|u| usage::limit_cost(route.provider.kind, u));
        if let Some(permit) = permit {
            route.limiter.finish(permit, used, Some(&headers));
        }
        let mut said = json!({"status": status.as_u16(), "response": response});
        if let Some(reason) = &broke {
            said["broke"] = json!(reason);
        }
        self.record(sent, said);
        let timing = Timing {
            first_token: tally.first().unwrap_or_else(|| sent.started.elapsed()),
            total: sent.started.elapsed(),
            retries: sent.retries,
        };
        let tokens = tokens.unwrap_or_default();
        let used = usage::answered(&route.provider, &answer.request, tokens, &timing);
        match &self.reservation {
            Some(reservation) => reservation.settle(Some(&used)),
            None => route.meter.settle(0.0, Some(&used)),
        }
        self.entry.answered.fetch_add(1, Ordering::Relaxed);
    }

    /// Appends one attempt of a request for an answer to the task's transcript, with how
    /// long the limiter held it before it was sent (`waited`, when it did).
    fn record(&self, sent: Try, said: Value) {
        let Some(answer) = &self.answer else { return };
        let turn = match sent.retries {
            0 => self.entry.turns.fetch_add(1, Ordering::Relaxed) + 1,
            _ => self.entry.turns.load(Ordering::Relaxed),
        };
        let mut record = json!({
            "turn": turn,
            "attempt": sent.retries + 1,
            "at": plait_core::state::now_ms(),
            "via": "gateway",
            "request": answer.request,
            "ms": sent.started.elapsed().as_millis() as u64,
        });
        if let Some(waited) = sent
            .waited
            .filter(|w| w.total() >= Duration::from_millis(1))
        {
            let ms = |d: Duration| d.as_millis() as u64;
            record["waited"] = json!({
                "ms": ms(waited.total()),
                "slot": ms(waited.slot),
                "turn": ms(waited.turn),
                "shared": ms(waited.shared),
                "limit": ms(waited.limit),
                "for": waited.why,
            });
        }
        if let (Some(record), Value::Object(said)) = (record.as_object_mut(), said) {
            record.extend(said);
        }
        Transcript::open(&self.entry.route.transcript).write(record);
    }
}

/// Sends the answer's body on to the client chunk by chunk, the request's secrets taken
/// out by `redactor`, reading it on the way into `tally`; why it broke off, if it did.
async fn relay(
    response: reqwest::Response,
    tally: &mut Tally,
    redactor: &mut Redactor,
    started: Instant,
    chunks: Chunks,
) -> Option<String> {
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => {
                let chunk = redactor.chunk(chunk);
                tally.push(&chunk, started);
                if chunks.send(Ok(chunk)).is_err() {
                    return Some("the agent stopped reading the answer".to_string());
                }
            }
            Err(e) => {
                let reason = format!("the answer broke off: {}", without_url(&e));
                let _ = chunks.send(Err(std::io::Error::other(reason.clone())));
                return Some(reason);
            }
        }
    }
    let rest = redactor.finish();
    if !rest.is_empty() {
        tally.push(&rest, started);
        if chunks.send(Ok(rest)).is_err() {
            return Some("the agent stopped reading the answer".to_string());
        }
    }
    None
}

/// The URL of `target` under `base`: refused unless it is on `base`'s scheme, host and
/// port, with `base`'s path followed by exactly `target`'s, as the URL parser sees it
/// (no segment of it resolved or taken for a separator).
fn under_base(base: &str, target: &Target) -> Result<reqwest::Url, String> {
    let refuse = |why: &str| format!("plait's gateway will not send /{}: {why}", target.rest);
    let parsed = reqwest::Url::parse(base).map_err(|e| refuse(&format!("{base}: {e}")))?;
    let joined = format!("{}/{}", base.trim_end_matches('/'), target.path_and_query());
    let url = reqwest::Url::parse(&joined).map_err(|e| refuse(&e.to_string()))?;
    let path = format!("{}/{}", parsed.path().trim_end_matches('/'), target.rest);
    if url.origin() != parsed.origin() || url.path() != path {
        return Err(refuse(&format!(
            "it would reach {} under {base}",
            url.path()
        )));
    }
    Ok(url)
}

/// Hands the handler an answer made here (an error, or the provider's refusal).
fn tell(head: &mut Option<oneshot::Sender<Head>>, response: Response) {
    if let Some(head) = head.take() {
        let _ = head.send(Head::Error(Box::new(response)));
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

/// The provider's answer as it was (its `headers` already made fit for the client).
fn passed_on(status: StatusCode, headers: HeaderMap, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// `min(0.5 * 2^n, 8) s`.
fn backoff(retry: u32) -> Duration {
    Duration::from_secs_f64((0.5 * 2f64.powi(retry.saturating_sub(1) as i32)).min(8.0))
}
