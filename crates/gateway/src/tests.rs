//! The gateway between a real client and a real upstream server, both on 127.0.0.1.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::StreamExt as _;
use plait_core::state::Usage;
use plait_llm::estimate;
use plait_llm::limiter::Limiter;
use plait_llm::provider::{resolve_provider, ProviderFile, ProviderKind, ProviderSettings};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::*;
use crate::call::error;
use crate::endpoints::allowed;
use crate::usage::usage_of;

mod walls;

/// What the upstream saw, and how it answers.
#[derive(Default)]
struct Upstream {
    keys: Mutex<Vec<(String, String)>>,
    bodies: Mutex<Vec<Value>>,
    /// 429s still to give, with `retry-after: 1`.
    limited: AtomicUsize,
    /// Released by the test once it has read the stream's first chunk.
    release: tokio::sync::Notify,
    /// Answers carry no usage, as a local server's may not.
    no_usage: std::sync::atomic::AtomicBool,
}

async fn upstream(State(up): State<Arc<Upstream>>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    lock_keys(&up).push((header("x-api-key"), header("authorization")));
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    up.bodies.lock().unwrap().push(request.clone());
    if up
        .limited
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        let mut response = error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "slow down",
        );
        response
            .headers_mut()
            .insert("retry-after", HeaderValue::from_static("1"));
        return response;
    }
    if request["stream"] != true {
        let mut answer = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": request["model"],
            "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 11, "output_tokens": 7, "cache_read_input_tokens": 100,
                      "cache_creation_input_tokens": 0}
        });
        if up.no_usage.load(Ordering::SeqCst) {
            answer["usage"] = Value::Null;
        }
        return axum::Json(answer).into_response();
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let up = up.clone();
    tokio::spawn(async move {
        let event =
            |name: &str, data: Value| Ok(Bytes::from(format!("event: {name}\ndata: {data}\n\n")));
        let _ = tx
            .send(event(
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 20, "output_tokens": 1, "cache_creation_input_tokens": 5}}}),
            ))
            .await;
        let _ = tx
            .send(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ))
            .await;
        let _ = tx
            .send(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}),
            ))
            .await;
        // The rest only once the client has read what came so far: a gateway that
        // buffered the answer would wait here for ever.
        up.release.notified().await;
        let _ = tx
            .send(event(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 30}}),
            ))
            .await;
        let _ = tx
            .send(event("message_stop", json!({"type": "message_stop"})))
            .await;
    });
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    response
}

fn lock_keys(up: &Upstream) -> std::sync::MutexGuard<'_, Vec<(String, String)>> {
    up.keys.lock().unwrap()
}

async fn serve_upstream() -> (Arc<Upstream>, String) {
    let up = Arc::new(Upstream::default());
    let app = axum::Router::new()
        .route("/v1/messages", post(upstream))
        .with_state(up.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (up, url)
}

/// A meter that records what it is asked: each admission's worst case, each settlement.
#[derive(Default)]
struct Counted {
    usage: Mutex<Vec<Usage>>,
    refuse: Mutex<Option<String>>,
    /// The worst cases admitted, and those settled (with the cost, if answered).
    admitted: Mutex<Vec<f64>>,
    settled: Mutex<Vec<(f64, Option<f64>)>>,
}

impl Meter for Counted {
    fn admit(&self, worst: f64) -> Admission<'_> {
        let refused = self.refuse.lock().unwrap().clone();
        if refused.is_none() {
            self.admitted.lock().unwrap().push(worst);
        }
        Box::pin(async move { refused.map_or(Ok(()), Err) })
    }
    fn settle(&self, worst: f64, usage: Option<&Usage>) {
        self.settled
            .lock()
            .unwrap()
            .push((worst, usage.and_then(|u| u.cost_usd)));
        if let Some(usage) = usage {
            self.usage.lock().unwrap().push(usage.clone());
        }
    }
}

/// The provider at `base_url` with `key`; without one, plait holds none and the client's
/// own credentials go through (a login's).
fn provider(base_url: &str, key: Option<&str>) -> Arc<ProviderSettings> {
    let mut settings = keyless(base_url, key);
    settings.keyless = false;
    Arc::new(settings)
}

/// The provider as the plan resolves it: without a key, `api_key_env = ""`, a server that
/// takes none.
fn keyless(base_url: &str, key: Option<&str>) -> ProviderSettings {
    let file = ProviderFile {
        base_url: Some(base_url.to_string()),
        api_key_env: Some(if key.is_some() { "KEY" } else { "" }.to_string()),
        ..ProviderFile::default()
    };
    let key = key.map(str::to_string);
    let env = move |k: &str| (k == "KEY").then(|| key.clone()).flatten();
    resolve_provider("anthropic", Some(&file), &env).unwrap()
}

struct Setup {
    up: Arc<Upstream>,
    meter: Arc<Counted>,
    _gateway: Gateway,
    lease: Lease,
    transcript: PathBuf,
    _dir: tempdir::Dir,
}

mod tempdir {
    /// A directory removed at the end of the test.
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    pub fn new() -> Dir {
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!("plait-gateway-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

async fn setup(key: Option<&str>) -> Setup {
    setup_with(|url| provider(url, key)).await
}

async fn setup_with(provider: impl FnOnce(&str) -> Arc<ProviderSettings>) -> Setup {
    let (up, url) = serve_upstream().await;
    let gateway = Gateway::start(reqwest::Client::new()).await.unwrap();
    let meter = Arc::new(Counted::default());
    let dir = tempdir::new();
    let transcript = dir.0.join("transcript.jsonl");
    let provider = provider(&url);
    let lease = gateway
        .open(Route {
            task: "t1".to_string(),
            limiter: Arc::new(Limiter::new(provider.limits)),
            provider,
            transcript: transcript.clone(),
            meter: meter.clone(),
        })
        .unwrap();
    Setup {
        up,
        meter,
        _gateway: gateway,
        lease,
        transcript,
        _dir: dir,
    }
}

fn messages(stream: bool) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": stream,
           "messages": [{"role": "user", "content": "hello"}]})
}

#[tokio::test]
async fn a_stream_passes_through_as_it_arrives_and_its_usage_is_counted() {
    let s = setup(Some("sk-real")).await;
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{}/v1/messages?beta=true", s.lease.base_url()))
        .header("x-api-key", s.lease.key().unwrap())
        .json(&messages(true))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.bytes_stream();
    let mut read = String::new();
    // The first events arrive while the upstream still holds the rest back.
    while !read.contains("content_block_delta") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("the first events came before the answer ended")
            .unwrap()
            .unwrap();
        read.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(!read.contains("message_stop"));
    s.up.release.notify_one();
    while let Some(chunk) = body.next().await {
        read.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(read.contains("message_stop"), "{read}");
    // The real key went upstream, never the stand-in.
    assert_eq!(lock_keys(&s.up)[0].0, "sk-real");
    assert!(!s.lease.key().unwrap().contains("sk-real"));
    let usage = wait_for_usage(&s.meter).await;
    assert_eq!(usage.requests, 1);
    assert_eq!(usage.input_tokens, 20);
    assert_eq!(usage.output_tokens, 30);
    assert_eq!(usage.cache_creation_input_tokens, 5);
    assert!(usage.cost_usd.unwrap() > 0.0);
    assert!(usage.first_token_ms.is_some());
    let transcript = wait_for_transcript(&s.transcript, 1).await;
    let record: Value = serde_json::from_str(transcript.lines().next().unwrap()).unwrap();
    assert_eq!(record["request"]["messages"][0]["content"], "hello");
    assert_eq!(record["status"], 200);
    assert_eq!(record["response"]["events"].as_array().unwrap().len(), 5);
    let entries = plait_llm::readable::entries(&[record]);
    assert!(
        entries
            .iter()
            .any(|e| e.role == "assistant" && e.text == "hi"),
        "{entries:?}"
    );
}

/// The transcript once it holds `lines` lines: an answer's usage may be counted before its
/// record is written.
async fn wait_for_transcript(path: &std::path::Path, lines: usize) -> String {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.lines().count() >= lines {
                return text;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "the transcript never held {lines} line(s): {}",
        path.display()
    );
}

async fn wait_for_usage(meter: &Counted) -> Usage {
    for _ in 0..200 {
        if let Some(u) = meter.usage.lock().unwrap().first() {
            return u.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no usage was counted");
}

#[tokio::test]
async fn a_429_is_waited_out_and_the_client_sees_one_answer() {
    let s = setup(Some("sk-real")).await;
    s.up.limited.store(1, Ordering::SeqCst);
    let started = std::time::Instant::now();
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", s.lease.base_url()))
        .header("x-api-key", s.lease.key().unwrap())
        .json(&messages(false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["content"][0]["text"], "hello");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "retry-after was kept"
    );
    assert_eq!(s.up.bodies.lock().unwrap().len(), 2);
    let usage = wait_for_usage(&s.meter).await;
    assert_eq!((usage.requests, usage.retries), (2, 1));
    assert_eq!(usage.cache_read_input_tokens, 100);
    // Both attempts are in the transcript; the first says it was limited.
    let transcript = wait_for_transcript(&s.transcript, 2).await;
    let lines: Vec<Value> = transcript
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["status"], 429);
    assert_eq!(lines[1]["attempt"], 2);
}

#[tokio::test]
async fn the_key_can_carry_the_token_and_an_unknown_token_is_refused() {
    let s = setup(Some("sk-real")).await;
    let base = format!("http://127.0.0.1:{}", s.lease.port());
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{base}/v1/messages"))
        .header(
            "authorization",
            format!("Bearer {}", s.lease.key().unwrap()),
        )
        .json(&messages(false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(lock_keys(&s.up)[0], ("sk-real".to_string(), String::new()));
    for url in [
        format!("{base}/t/0123/v1/messages"),
        format!("{base}/v1/messages"),
    ] {
        let response = client
            .post(url)
            .header("x-api-key", "plait-0123")
            .json(&messages(false))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403);
        let said: Value = response.json().await.unwrap();
        assert!(said["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no running task"));
    }
    // A closed lease closes its way through: its port takes no request.
    let url = format!("{}/v1/messages", s.lease.base_url());
    drop(s.lease);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let sent = reqwest::Client::new()
        .post(url)
        .json(&messages(false))
        .send()
        .await;
    assert!(
        sent.is_err_and(|e| e.is_connect()),
        "the closed lease's port answered"
    );
    assert_eq!(s.up.bodies.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_login_s_own_bearer_goes_through_when_plait_holds_no_key() {
    let s = setup(None).await;
    assert!(s.lease.key().is_none());
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", s.lease.base_url()))
        .header("authorization", "Bearer oauth-of-the-login")
        .json(&messages(false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        lock_keys(&s.up)[0],
        (String::new(), "Bearer oauth-of-the-login".to_string())
    );
}

#[tokio::test]
async fn a_server_that_takes_no_key_gets_none_and_its_silent_usage_is_estimated() {
    let s = setup_with(|url| Arc::new(keyless(url, None))).await;
    s.up.no_usage.store(true, Ordering::SeqCst);
    // The client gets a stand-in (litellm sends nothing without a key) ...
    let stand_in = s.lease.key().expect("a stand-in for a keyless server");
    assert_eq!(s.lease.asked(), 0);
    let request = messages(false);
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", s.lease.base_url()))
        .header("x-api-key", &stand_in)
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // ... which never reaches the server.
    assert_eq!(lock_keys(&s.up)[0], (String::new(), String::new()));
    assert_eq!(s.lease.asked(), 1);
    // No usage in the answer: estimated from the request and the text, and marked.
    let usage = wait_for_usage(&s.meter).await;
    assert!(usage.estimated);
    assert_eq!(usage.input_tokens, estimate::input_tokens(&request));
    assert!(usage.input_tokens > 0);
    assert_eq!(usage.output_tokens, 2, "\"hello\" is five bytes");
}

#[tokio::test]
async fn a_spent_budget_refuses_in_the_provider_s_words() {
    let s = setup(Some("sk-real")).await;
    *s.meter.refuse.lock().unwrap() = Some("the run spent $1.02 of its $1.00".to_string());
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", s.lease.base_url()))
        .json(&messages(false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let said: Value = response.json().await.unwrap();
    assert_eq!(said["type"], "error");
    assert!(said["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--max-cost"));
    assert!(s.up.bodies.lock().unwrap().is_empty());
}

#[test]
fn openai_usage_keeps_cache_reads_apart() {
    let chat = json!({"usage": {"prompt_tokens": 100, "completion_tokens": 9,
                                "prompt_tokens_details": {"cached_tokens": 60}}});
    let u = usage_of(&[chat], ProviderKind::Openai).unwrap();
    assert_eq!((u.input, u.cache_read, u.output), (40, 60, 9));
    let responses = json!({"type": "response.completed", "response": {"usage": {"input_tokens": 50,
        "output_tokens": 4, "input_tokens_details": {"cached_tokens": 10}}}});
    let u = usage_of(&[responses], ProviderKind::Openai).unwrap();
    assert_eq!((u.input, u.cache_read, u.output), (40, 10, 4));
    assert!(usage_of(&[json!({"choices": []})], ProviderKind::Openai).is_none());
}

#[test]
fn only_answers_token_counts_and_models_are_passed_on() {
    for (method, path) in [
        (Method::POST, "v1/messages"),
        (Method::POST, "v1/messages/count_tokens"),
        (Method::GET, "v1/models"),
        (Method::GET, "v1/models/claude-sonnet-4-5"),
        (Method::POST, "chat/completions"),
        (Method::POST, "responses"),
    ] {
        assert!(allowed(&method, path).is_ok(), "{method} {path}");
    }
    for (method, path) in [
        (Method::GET, "v1/files"),
        (Method::POST, "v1/organizations/api_keys"),
        (Method::DELETE, "v1/models/x"),
        (Method::POST, "v1/messages/../organizations"),
        (Method::POST, "v1/messages/%2e%2e/batches"),
        (Method::POST, "v1/messages/batches"),
        (Method::GET, "v1/models/a/b"),
    ] {
        let why = allowed(&method, path).unwrap_err();
        assert!(why.contains("answers, token counts and models"), "{why}");
    }
}

#[tokio::test]
async fn a_request_beyond_the_model_s_endpoints_is_refused_before_the_provider() {
    let s = setup(Some("sk-real")).await;
    let response = reqwest::Client::new()
        .get(format!("{}/v1/files", s.lease.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    assert!(lock_keys(&s.up).is_empty());
}
