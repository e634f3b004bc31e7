//! One model request over HTTP, streamed or not, with the retry rules of the official
//! SDKs: `x-should-retry` decides when present; otherwise 408, 409, 429 and every 5xx,
//! connection errors, timeouts and broken streams are retried, waiting `retry-after-ms`,
//! `retry-after`, or a jittered exponential backoff. 400, 401, 403, 404, 413, a spend-cap
//! 429 and `insufficient_quota` are not. Every attempt is written to the task's transcript
//! (JSON lines); API keys are sent in headers only and never written anywhere.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::HeaderMap;
use serde_json::{json, Value};

use super::anthropic;
use super::conversation::Reply;
use super::limiter::{Cost, Limiter, Permit};
use super::sse::{self, Progress};
use super::{estimate, openai};
use crate::provider::{ProviderKind, ProviderSettings};
use plait_core::cancel::Cancel;
use plait_core::state::now_ms;

/// Attempts per request before the task fails.
pub const MAX_ATTEMPTS: u32 = 5;

/// Why a request failed.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// Worth another attempt, after `wait` if the server said how long; `limited` when
    /// the server answered 429.
    Retryable {
        /// Why it failed.
        reason: String,
        /// How long the server asked to wait.
        wait: Option<Duration>,
        /// Whether the server answered 429.
        limited: bool,
    },
    /// Not worth another attempt; the task fails with this reason.
    Fatal {
        /// Why it failed.
        reason: String,
    },
    /// The key was rejected: every request with it fails.
    Auth {
        /// Which provider refused it, and what to check.
        reason: String,
    },
}

impl CallError {
    fn reason(&self) -> &str {
        match self {
            CallError::Retryable { reason, .. }
            | CallError::Fatal { reason }
            | CallError::Auth { reason } => reason,
        }
    }

    fn retry(reason: String) -> CallError {
        CallError::Retryable {
            reason,
            wait: None,
            limited: false,
        }
    }
}

/// Timing of one successful request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    /// From sending the request to the first text or tool input.
    pub first_token: Duration,
    /// From sending the request to the end of the answer.
    pub total: Duration,
    /// Attempts that failed before this one.
    pub retries: u32,
}

/// The JSON-lines record of every request and response of a task.
pub struct Transcript {
    file: Option<File>,
}

impl Transcript {
    /// Appends to the transcript at `path`; one that cannot be opened records nothing.
    pub fn open(path: &Path) -> Transcript {
        Transcript {
            file: OpenOptions::new().create(true).append(true).open(path).ok(),
        }
    }

    /// Appends one record (a request, its attempt, status and response) as a line, in one
    /// write: formatted straight into the file, a request of 50 kB would be thousands of
    /// writes (one per token of its JSON), on the runtime's thread, and a reader could see
    /// half a line.
    pub fn write(&mut self, record: Value) {
        if let Some(file) = &mut self.file {
            let Ok(mut line) = serde_json::to_vec(&record) else {
                return;
            };
            line.push(b'\n');
            let _ = file.write_all(&line);
        }
    }
}

/// Sends `body` through the provider's shared `limiter`, retrying what is worth retrying,
/// until a reply or a final failure.
pub async fn call(
    client: &reqwest::Client,
    provider: &ProviderSettings,
    limiter: &Limiter,
    body: &Value,
    turn: u32,
    transcript: &mut Transcript,
    cancel: &Cancel,
) -> Result<(Reply, Timing), String> {
    let mut retries = 0;
    let mut empty_streams = 0;
    let cost = reservation(provider, body);
    let unstreamed = without_stream(body);
    loop {
        let permit = tokio::select! {
            permit = limiter.acquire(cost) => permit?,
            _ = cancel.cancelled() => return Err("interrupted".to_string()),
        };
        let started = Instant::now();
        let streaming = body["stream"] == true && !limiter.streams_refused();
        let body = if streaming { body } else { &unstreamed };
        let mut record =
            json!({"turn": turn, "attempt": retries + 1, "at": now_ms(), "request": body});
        let mut headers = None;
        let mut result = attempt(client, provider, body, started, &mut record, &mut headers).await;
        // A server that ends a streamed answer before its first event, twice, cannot
        // stream these requests: asked without streaming from then on.
        let empty = record
            .pointer("/response/events")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty);
        if streaming && result.is_err() && empty {
            empty_streams += 1;
            if empty_streams >= 2 {
                limiter.refuse_streams(&provider.name);
            }
        }
        settle(
            limiter,
            permit,
            provider,
            body,
            &mut result,
            &mut record,
            headers.as_ref(),
        );
        record["ms"] = json!(started.elapsed().as_millis() as u64);
        transcript.write(record);
        match result {
            Ok((reply, first_token)) => {
                let timing = Timing {
                    first_token,
                    total: started.elapsed(),
                    retries,
                };
                return Ok((reply, timing));
            }
            Err(CallError::Fatal { reason }) => return Err(reason),
            Err(CallError::Auth { reason }) => {
                limiter.poison(&reason);
                return Err(reason);
            }
            Err(CallError::Retryable {
                reason,
                wait,
                limited,
            }) => {
                retries += 1;
                let wait = wait.unwrap_or_else(|| backoff(retries));
                if limited {
                    // The whole provider waits, not just this agent.
                    limiter.pause(wait);
                }
                if retries >= MAX_ATTEMPTS {
                    return Err(format!("{reason} (gave up after {MAX_ATTEMPTS} attempts)"));
                }
                tracing::info!(provider = %provider.name, "retrying in {wait:?}: {reason}");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = cancel.cancelled() => return Err("interrupted".to_string()),
                }
            }
        }
    }
}

/// `body` asking for the whole answer at once (`stream` off, OpenAI's `stream_options`
/// gone).
fn without_stream(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(map) = body.as_object_mut() {
        if map.get("stream") == Some(&Value::Bool(true)) {
            map.insert("stream".to_string(), Value::Bool(false));
            map.remove("stream_options");
        }
    }
    body
}

/// `min(0.5 * 2^n, 8) s`, less up to a quarter at random.
fn backoff(retry: u32) -> Duration {
    let base = (0.5 * 2f64.powi(retry.saturating_sub(1) as i32)).min(8.0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let jitter = 1.0 - 0.25 * (f64::from(nanos % 1000) / 1000.0);
    Duration::from_secs_f64(base * jitter)
}

fn endpoint(provider: &ProviderSettings) -> String {
    match provider.kind {
        ProviderKind::Anthropic => format!("{}/v1/messages", provider.base_url),
        ProviderKind::Openai => format!("{}/chat/completions", provider.base_url),
    }
}

/// What the limiter reserves for a request of `body`: about four bytes a token for the
/// input, the output at most `max_tokens`. The answer's usage gives back what was not used.
fn reservation(provider: &ProviderSettings, body: &Value) -> Cost {
    Cost {
        input: match provider.kind {
            ProviderKind::Anthropic => anthropic::uncached_estimate(body),
            ProviderKind::Openai => (body.to_string().len() / 4) as u64,
        },
        output: body["max_tokens"]
            .as_u64()
            .or_else(|| body["max_completion_tokens"].as_u64())
            .unwrap_or(u64::from(provider.max_tokens)),
    }
}

/// Settles one attempt with the limiter: what its answer used (estimated, and marked so
/// in its `record`, when the server said nothing of it), or, when it failed, that nothing
/// is known; `headers` are the server's, with its limits.
fn settle(
    limiter: &Limiter,
    permit: Permit<'_>,
    provider: &ProviderSettings,
    body: &Value,
    result: &mut Result<(Reply, Duration), CallError>,
    record: &mut Value,
    headers: Option<&HeaderMap>,
) {
    match result {
        Ok((reply, _)) => {
            if !reply.usage_known {
                let streamed = body["stream"] == true;
                limiter.usage_unreported(&provider.name, streamed);
                estimate::fill(reply, body, &record["response"]);
                record["estimated"] =
                    json!({"input": reply.usage.input, "output": reply.usage.output});
            }
            let u = reply.usage;
            // What counts against an input-tokens limit: on Anthropic, reads from the
            // cache do not; OpenAI counts every prompt token.
            let input = match provider.kind {
                ProviderKind::Anthropic => u.input + u.cache_creation,
                ProviderKind::Openai => u.input + u.cache_creation + u.cache_read,
            };
            let used = Cost {
                input,
                output: u.output,
            };
            limiter.finish(permit, Some(used), headers);
        }
        Err(e) => {
            record["error"] = Value::String(e.reason().to_string());
            limiter.finish(permit, None, headers);
        }
    }
}

async fn attempt(
    client: &reqwest::Client,
    provider: &ProviderSettings,
    body: &Value,
    started: Instant,
    record: &mut Value,
    headers_out: &mut Option<HeaderMap>,
) -> Result<(Reply, Duration), CallError> {
    let mut request = client.post(endpoint(provider)).json(body);
    request = match (provider.kind, &provider.api_key) {
        (ProviderKind::Anthropic, Some(key)) => request.header("x-api-key", key.expose()),
        (ProviderKind::Openai, Some(key)) => request.bearer_auth(key.expose()),
        (_, None) => request,
    };
    if provider.kind == ProviderKind::Anthropic {
        request = request.header("anthropic-version", anthropic::VERSION);
    }
    let response = request.send().await.map_err(|e| {
        CallError::retry(format!(
            "cannot reach {}: {}",
            provider.base_url,
            without_url(&e)
        ))
    })?;
    let status = response.status().as_u16();
    record["status"] = json!(status);
    *headers_out = Some(response.headers().clone());
    if let Some(id) = response
        .headers()
        .get("request-id")
        .or_else(|| response.headers().get("x-request-id"))
        .and_then(|v| v.to_str().ok())
    {
        record["request_id"] = json!(id);
    }
    if !response.status().is_success() {
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        record["response"] = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
        return Err(classify(provider, status, &headers, &text));
    }
    let streamed = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if streamed {
        read_stream(provider, response, started, record).await
    } else {
        let bytes = response.bytes().await.map_err(|e| {
            CallError::retry(format!("the response broke off: {}", without_url(&e)))
        })?;
        let first = started.elapsed();
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            record["response"] = Value::String(String::from_utf8_lossy(&bytes).into_owned());
            CallError::retry(format!("the response is not valid JSON ({e})"))
        })?;
        record["response"] = value.clone();
        let reply = match provider.kind {
            ProviderKind::Anthropic => anthropic::parse_reply(&value),
            ProviderKind::Openai => openai::parse_reply(&value),
        }
        .map_err(CallError::retry)?;
        Ok((reply, first))
    }
}

enum Assembly {
    Anthropic(anthropic::Stream),
    Openai(openai::Stream),
}

async fn read_stream(
    provider: &ProviderSettings,
    response: reqwest::Response,
    started: Instant,
    record: &mut Value,
) -> Result<(Reply, Duration), CallError> {
    let mut assembly = match provider.kind {
        ProviderKind::Anthropic => Assembly::Anthropic(anthropic::Stream::default()),
        ProviderKind::Openai => Assembly::Openai(openai::Stream::default()),
    };
    let mut decoder = sse::Decoder::default();
    let mut events: Vec<Value> = Vec::new();
    let mut first: Option<Duration> = None;
    let mut bytes = response.bytes_stream();
    let retry = CallError::retry;
    let mut finished = false;
    while let Some(chunk) = bytes.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                record["response"] = json!({"events": events});
                return Err(retry(format!("the stream broke off: {}", without_url(&e))));
            }
        };
        for event in decoder.push(&chunk) {
            let progress = feed(&mut assembly, &event, &mut events);
            match progress {
                Ok(Progress::Content) => {
                    first.get_or_insert_with(|| started.elapsed());
                }
                Ok(Progress::Done) => finished = true,
                Ok(Progress::Nothing) => {}
                Err(reason) => {
                    record["response"] = json!({"events": events});
                    return Err(retry(reason));
                }
            }
        }
        if finished {
            break;
        }
    }
    if !finished {
        if let Some(event) = decoder.finish() {
            let _ = feed(&mut assembly, &event, &mut events);
        }
    }
    record["response"] = json!({"events": events});
    let reply = match assembly {
        Assembly::Anthropic(s) => s.finish(),
        Assembly::Openai(s) => s.finish(),
    }
    .map_err(retry)?;
    Ok((reply, first.unwrap_or_else(|| started.elapsed())))
}

fn feed(
    assembly: &mut Assembly,
    event: &sse::Event,
    events: &mut Vec<Value>,
) -> Result<Progress, String> {
    let data: Value =
        serde_json::from_str(&event.data).unwrap_or_else(|_| Value::String(event.data.clone()));
    events.push(json!({"event": event.name, "data": data}));
    match assembly {
        Assembly::Anthropic(s) => s.event(event),
        Assembly::Openai(s) => s.event(event),
    }
}

/// A reqwest error without the URL (which the caller already names, and which may carry
/// a gateway's task token) and with its causes.
pub fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(&format!(" for url ({url})"), "");
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let _ = write!(text, ": {s}");
        source = s.source();
    }
    text
}

/// Sorts an error response into retryable or not, by the SDKs' rules.
pub fn classify(
    provider: &ProviderSettings,
    status: u16,
    headers: &HeaderMap,
    body: &str,
) -> CallError {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = parsed
        .pointer("/error/message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| body.chars().take(200).collect());
    let code = parsed
        .pointer("/error/code")
        .or_else(|| parsed.pointer("/error/type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let reason = format!("{} answered {status}: {message}", provider.name);
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let wait = header("retry-after-ms")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0))
        .or_else(|| header("retry-after").and_then(parse_retry_after));
    if status == 401 {
        let fix = if provider.key_env.is_empty() {
            format!("set api_key_env in [providers.{}]", provider.name)
        } else {
            format!("check {}", provider.key_env)
        };
        return CallError::Auth {
            reason: format!("{} rejected the API key (401): {fix}", provider.name),
        };
    }
    if code == "insufficient_quota"
        || (status == 429 && provider.kind == ProviderKind::Anthropic && wait.is_none())
    {
        return CallError::Fatal {
            reason: format!("{reason} (quota or spend limit; not retried)"),
        };
    }
    let limited = status == 429;
    match header("x-should-retry") {
        Some("true") => {
            return CallError::Retryable {
                reason,
                wait,
                limited,
            }
        }
        Some("false") => return CallError::Fatal { reason },
        _ => {}
    }
    if matches!(status, 408 | 409 | 429) || status >= 500 {
        CallError::Retryable {
            reason,
            wait,
            limited,
        }
    } else {
        CallError::Fatal { reason }
    }
}

/// `retry-after` in seconds or as an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return Some(Duration::from_secs_f64(secs.max(0.0)));
    }
    let when = httpdate(value)?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

fn httpdate(value: &str) -> Option<std::time::SystemTime> {
    humantime::parse_rfc3339_weak(value).ok().or_else(|| {
        // RFC 7231: "Sun, 06 Nov 1994 08:49:37 GMT"
        let parts: Vec<&str> = value.split_whitespace().collect();
        let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
            return None;
        };
        let months = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let m = months.iter().position(|x| x == month)? + 1;
        let text = format!("{year}-{m:02}-{:0>2}T{time}Z", day);
        humantime::parse_rfc3339(&text).ok()
    })
}
