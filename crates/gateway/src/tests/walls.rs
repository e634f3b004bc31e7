//! The gateway attacked as an agent would attack it, over real connections on 127.0.0.1:
//! targets that would leave the model's endpoints, another task's token, a provider that
//! echoes the key, and many requests at once against a budget.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::*;

/// An upstream that answers whatever it is sent, and records it: every request's method
/// and target, as the provider saw them.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(String, String)>>,
    /// Answers echo the request's headers (in their own and in the body).
    echo: std::sync::atomic::AtomicBool,
    /// Answers are a 401 instead.
    refuse: std::sync::atomic::AtomicBool,
}

async fn record(
    State(up): State<Arc<Recorder>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    _body: Bytes,
) -> Response {
    up.seen
        .lock()
        .unwrap()
        .push((method.to_string(), uri.to_string()));
    let echoed: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(n, v)| (n.to_string(), json!(v.to_str().unwrap_or(""))))
        .collect();
    let mut response = if up.refuse.load(Ordering::SeqCst) {
        let message = format!("invalid x-api-key: {echoed:?}");
        error(StatusCode::UNAUTHORIZED, "authentication_error", &message)
    } else {
        let mut answer = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 11, "output_tokens": 7}
        });
        if up.echo.load(Ordering::SeqCst) {
            answer["headers"] = Value::Object(echoed);
        }
        axum::Json(answer).into_response()
    };
    if up.echo.load(Ordering::SeqCst) {
        let echoed = headers.iter().filter(|(n, _)| {
            !matches!(
                n.as_str(),
                "host"
                    | "content-length"
                    | "content-type"
                    | "connection"
                    | "accept"
                    | "transfer-encoding"
            )
        });
        for (name, value) in echoed {
            response.headers_mut().append(name.clone(), value.clone());
            if let Ok(echo) =
                HeaderValue::from_str(&format!("seen {}", value.to_str().unwrap_or("")))
            {
                response.headers_mut().append("x-echo", echo);
            }
        }
    }
    response
}

/// The recorder on 127.0.0.1:0, and its URL.
async fn serve_recorder() -> (Arc<Recorder>, String) {
    let up = Arc::new(Recorder::default());
    let app = axum::Router::new().fallback(record).with_state(up.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (up, url)
}

/// A lease on `gateway` to `provider`, counted by `meter`, its transcript in `dir`.
fn lease_to(
    gateway: &Gateway,
    provider: Arc<ProviderSettings>,
    meter: Arc<dyn Meter>,
    dir: &tempdir::Dir,
) -> Lease {
    gateway
        .open(Route {
            task: "t".to_string(),
            limiter: Arc::new(Limiter::new(provider.limits)),
            provider,
            transcript: dir.0.join("transcript.jsonl"),
            meter,
        })
        .unwrap()
}

/// Sends `target` as it is, byte for byte (no client library's URL parser in between), to
/// `port`; the answer's status and its whole text.
async fn raw(port: u16, method: &str, target: &[u8], key: &str) -> (u16, String) {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut request = Vec::new();
    request.extend_from_slice(method.as_bytes());
    request.push(b' ');
    request.extend_from_slice(target);
    request.extend_from_slice(
        format!(
            " HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: {key}\r\ncontent-type: application/json\r\n\
             content-length: 2\r\nconnection: close\r\n\r\n{{}}"
        )
        .as_bytes(),
    );
    tcp.write_all(&request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// Every spelling of a way out of the model's endpoints this test knows, each after the
/// token in the path and after none (the token in the key).
fn ways_out(upstream: &str) -> Vec<Vec<u8>> {
    let tails: &[&str] = &[
        r"v1/models/..\..\..\..\admin\organizations\keys",
        r"v1/models\..\..\admin",
        "v1/models/..%5c..%5c..%5cadmin%5corganizations",
        "v1/models/..%5C..%5Cadmin",
        "v1/models/%2e%2e/%2e%2e/admin",
        "v1/models/%2E%2E/%2E%2E/admin",
        "v1/models/.%2e/.%2e/admin",
        "v1/models/%2e./admin",
        "v1/models/%252e%252e/%252e%252e/admin",
        "v1/models/%25252e%25252e/admin",
        "v1/models/..%2f..%2fadmin",
        "v1/models/a%2F..%2F..%2Fadmin",
        "v1/models/../../admin",
        "v1/models/..",
        "v1/./messages",
        "v1/messages/.",
        "v1//messages",
        "v1/messages%00",
        "v1/models/%00",
        "v1/models/x%20y",
        "v1/models/..;/admin",
        "v1/models/%u002e%u002e/admin",
        "v1/models/%c0%ae%c0%ae/admin",
        "v1/models/\u{ff0e}\u{ff0e}/admin",
        "v1/models/a\tb",
        "v1/models/a\0b",
    ];
    let mut out = Vec::new();
    for tail in tails {
        out.push(format!("/{tail}").into_bytes());
        out.push(format!("/t/TOKEN/{tail}").into_bytes());
    }
    for absolute in [
        format!("{upstream}/admin/organizations/keys"),
        format!("{upstream}/t/TOKEN/v1/messages"),
        "//evil.example/v1/messages".to_string(),
        "/t/TOKEN//v1/messages".to_string(),
        "/t/TOKEN/..%2f..%2fadmin".to_string(),
        "/t/TOKEN/%2e%2e/admin".to_string(),
        "/t/TOKEN/v1/messages?beta=true\\".to_string(),
    ] {
        out.push(absolute.into_bytes());
    }
    out
}

#[tokio::test]
async fn every_spelling_of_dot_dot_and_backslash_is_refused_and_never_reaches_the_provider() {
    let (up, url) = serve_recorder().await;
    let gateway = Gateway::start(reqwest::Client::new()).await.unwrap();
    let dir = tempdir::new();
    let lease = lease_to(
        &gateway,
        provider(&url, Some("sk-real-key-0123456789")),
        Arc::new(Counted::default()),
        &dir,
    );
    let key = lease.key().unwrap();
    let token = key.strip_prefix("plait-").unwrap();
    let port = lease.port();
    let targets = ways_out(&url);
    for target in &targets {
        let target: Vec<u8> = String::from_utf8_lossy(target)
            .replace("TOKEN", token)
            .into_bytes();
        for method in ["GET", "POST"] {
            let (status, text) = raw(port, method, &target, &key).await;
            let shown = String::from_utf8_lossy(&target);
            assert!(
                (400..500).contains(&status),
                "{method} {shown} was answered {status}: {text}"
            );
        }
    }
    // The headline attack is refused saying what was refused.
    let (status, text) = raw(
        port,
        "GET",
        format!(r"/t/{token}/v1/models/..\..\..\..\admin\organizations\keys").as_bytes(),
        &key,
    )
    .await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("backslash"), "{text}");
    let (_, text) = raw(port, "GET", b"/v1/models/%252e%252e/admin", &key).await;
    assert!(text.contains("%25"), "{text}");
    let seen = up.seen.lock().unwrap().clone();
    assert!(seen.is_empty(), "reached the provider: {seen:?}");
    // The same connection path still carries what a client legitimately sends.
    let (status, text) = raw(
        port,
        "GET",
        format!("/t/{token}/v1/models").as_bytes(),
        &key,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(up.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn what_clients_send_reaches_exactly_that_path_under_the_base_url() {
    let (up, url) = serve_recorder().await;
    let gateway = Gateway::start(reqwest::Client::new()).await.unwrap();
    let dir = tempdir::new();
    let anthropic = lease_to(
        &gateway,
        provider(&url, Some("sk-real-key-0123456789")),
        Arc::new(Counted::default()),
        &dir,
    );
    let mut openai = keyless(&format!("{url}/v1"), Some("sk-real-key-0123456789"));
    openai.kind = ProviderKind::Openai;
    openai.keyless = false;
    let openai = lease_to(
        &gateway,
        Arc::new(openai),
        Arc::new(Counted::default()),
        &dir,
    );
    let client = reqwest::Client::new();
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": []});
    let cases = [
        (
            &anthropic,
            Method::POST,
            "v1/messages?beta=true",
            "/v1/messages?beta=true",
        ),
        (
            &anthropic,
            Method::POST,
            "v1/messages/count_tokens",
            "/v1/messages/count_tokens",
        ),
        (&anthropic, Method::GET, "v1/models", "/v1/models"),
        (
            &anthropic,
            Method::GET,
            "v1/models/claude-sonnet-4-5",
            "/v1/models/claude-sonnet-4-5",
        ),
        (&anthropic, Method::GET, "v1/models/", "/v1/models"),
        (&anthropic, Method::HEAD, "", "/"),
        (
            &openai,
            Method::POST,
            "chat/completions",
            "/v1/chat/completions",
        ),
        (&openai, Method::POST, "responses", "/v1/responses"),
        (&openai, Method::GET, "models", "/v1/models"),
        (
            &openai,
            Method::GET,
            "models/ft:gpt-4o:org@2",
            "/v1/models/ft:gpt-4o:org@2",
        ),
    ];
    for (lease, method, path, upstream) in cases {
        let response = client
            .request(method.clone(), format!("{}/{path}", lease.base_url()))
            .header("x-api-key", lease.key().unwrap())
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{method} {path}");
        let seen = up.seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(seen, (method.to_string(), upstream.to_string()));
    }
}

#[tokio::test]
async fn another_task_s_token_is_refused_on_this_task_s_port() {
    let (up, url) = serve_recorder().await;
    let gateway = Gateway::start(reqwest::Client::new()).await.unwrap();
    let dir = tempdir::new();
    let p = provider(&url, Some("sk-real-key-0123456789"));
    let a = lease_to(&gateway, p.clone(), Arc::new(Counted::default()), &dir);
    let b = lease_to(&gateway, p, Arc::new(Counted::default()), &dir);
    assert_ne!(a.port(), b.port());
    let client = reqwest::Client::new();
    let b_token = b.key().unwrap();
    let b_token = b_token.strip_prefix("plait-").unwrap();
    // B's base URL and B's key, taken from B's command line, sent to A's port (the one
    // A's walls let it reach): in the path, as the key, as a bearer.
    let on_a = format!("http://127.0.0.1:{}", a.port());
    let tries = [
        client
            .get(format!("{on_a}/t/{b_token}/v1/models"))
            .header("x-api-key", a.key().unwrap()),
        client
            .get(format!("{on_a}/v1/models"))
            .header("x-api-key", b.key().unwrap()),
        client
            .get(format!("{on_a}/v1/models"))
            .bearer_auth(b.key().unwrap()),
        // A's own path with B's key beside it is no lease of A's either.
        client
            .get(format!("{}/v1/models", a.base_url()))
            .header("x-api-key", b.key().unwrap()),
        // No token at all is no lease either.
        client.get(format!("{on_a}/v1/models")),
    ];
    for request in tries {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 403);
        let said: Value = response.json().await.unwrap();
        assert!(
            said["error"]["message"]
                .as_str()
                .unwrap()
                .contains("its own port"),
            "{said}"
        );
    }
    assert!(up.seen.lock().unwrap().is_empty());
    // Each lease on its own port passes.
    for lease in [&a, &b] {
        let response = client
            .get(format!("{}/v1/models", lease.base_url()))
            .header("x-api-key", lease.key().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
}

#[tokio::test]
async fn a_provider_that_echoes_the_key_hands_none_of_it_back() {
    const REAL: &str = "sk-ant-real-key-0123456789";
    let (up, url) = serve_recorder().await;
    up.echo.store(true, Ordering::SeqCst);
    let gateway = Gateway::start(reqwest::Client::new()).await.unwrap();
    let dir = tempdir::new();
    let transcript = dir.0.join("t.jsonl");
    let p = provider(&url, Some(REAL));
    let lease = gateway
        .open(Route {
            task: "t".to_string(),
            limiter: Arc::new(Limiter::new(p.limits)),
            provider: p,
            transcript: transcript.clone(),
            meter: Arc::new(Counted::default()),
        })
        .unwrap();
    let client = reqwest::Client::new();
    for refuse in [false, true] {
        up.refuse.store(refuse, Ordering::SeqCst);
        for path in ["v1/messages", "v1/models"] {
            let request = if path == "v1/messages" {
                client
                    .post(format!("{}/{path}", lease.base_url()))
                    .json(&messages(false))
            } else {
                client.get(format!("{}/{path}", lease.base_url()))
            };
            let response = request
                .header("x-api-key", lease.key().unwrap())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), if refuse { 401 } else { 200 });
            for name in ["x-api-key", "authorization", "x-goog-api-key"] {
                assert!(response.headers().get(name).is_none(), "{name} came back");
            }
            let headers = format!("{:?}", response.headers());
            let body = response.text().await.unwrap();
            assert!(!headers.contains(REAL), "the key came back: {headers}");
            assert!(!body.contains(REAL), "the key came back: {body}");
            assert!(body.contains("[redacted by plait]"), "{body}");
        }
    }
    // The provider did see it, and the task's transcript holds none of it.
    assert!(up.seen.lock().unwrap().len() >= 4);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let kept = std::fs::read_to_string(&transcript).unwrap();
    assert!(
        kept.contains("[redacted by plait]") && !kept.contains(REAL),
        "{kept}"
    );
}

#[tokio::test]
async fn a_request_reserves_its_worst_case_and_settles_it_whatever_its_end() {
    let s = setup(Some("sk-real")).await;
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", s.lease.base_url()))
        .header("x-api-key", s.lease.key().unwrap())
        .json(&messages(false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let _ = response.bytes().await;
    wait_for_usage(&s.meter).await;
    let admitted = s.meter.admitted.lock().unwrap().clone();
    let settled = s.meter.settled.lock().unwrap().clone();
    assert_eq!(admitted.len(), 1);
    // 100 tokens of output at most, at claude-sonnet-4-5's $15 a million, and the input.
    assert!(admitted[0] >= 100.0 * 15.0 / 1e6, "{admitted:?}");
    let (worst, cost) = settled[0];
    assert_eq!(worst, admitted[0]);
    assert!(cost.unwrap() > 0.0 && cost.unwrap() <= worst, "{settled:?}");
    // A request the provider refuses for good gives its reservation back, counting nothing.
    s.up.limited.store(100, Ordering::SeqCst);
    let client = reqwest::Client::new();
    let request = client
        .post(format!("{}/v1/messages", s.lease.base_url()))
        .header("x-api-key", s.lease.key().unwrap())
        .json(&messages(false));
    // The client gives up while the gateway waits the 429 out.
    let _ = tokio::time::timeout(Duration::from_millis(300), request.send()).await;
    for _ in 0..100 {
        if s.meter.settled.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let settled = s.meter.settled.lock().unwrap().clone();
    assert_eq!(settled.len(), 2, "{settled:?}");
    assert_eq!(settled[1].1, None, "{settled:?}");
}
