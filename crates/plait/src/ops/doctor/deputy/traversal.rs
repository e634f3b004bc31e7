//! The gateway probe: a provider of plait's own on 127.0.0.1 records every request line it
//! hears; a lease of plait's gateway leads to it; the probe, behind walls that let it reach
//! that lease's port alone, sends paths that climb out of the provider's API (`..\`,
//! `%2e%2e`, `%5c`, `%2f`, absolute-form) and last one plain request. Refused when the
//! provider heard the plain request and nothing else.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::super::{judge, Probe, Prober};
use plait_core::sync::Locked as _;
use plait_gateway::{Admission, Gateway, Meter, Route};
use plait_llm::limiter::Limiter;
use plait_llm::provider::{resolve_provider, ProviderFile};
use plait_sandbox::sandbox::{Network, Sandbox, SandboxSettings};

/// The plain request, the only one the provider may hear.
const PLAIN: &str = "/v1/models";

/// The paths the probe sends under the lease's base URL, each climbing to the provider's
/// administration API.
const CLIMBS: &[&str] = &[
    "/v1/models/..\\..\\..\\..\\admin\\organizations\\keys",
    "/v1/models/%2e%2e/%2e%2e/admin/organizations/keys",
    "/v1/models/%2E%2E%2F%2E%2E%2Fadmin%2Forganizations%2Fkeys",
    "/v1/models/..%5c..%5c..%5cadmin%5corganizations%5ckeys",
    "/v1/models/..%2f..%2f..%2fadmin%2forganizations%2fkeys",
    "/v1/../../admin/organizations/keys",
    "/v1/models/%252e%252e/%252e%252e/admin/organizations/keys",
];

/// A meter that admits every request: the provider answers none with usage.
struct Free;

impl Meter for Free {
    fn admit(&self, _worst: f64) -> Admission<'_> {
        Box::pin(async { Ok(()) })
    }
    fn settle(&self, _worst: f64, _usage: Option<&plait_core::state::Usage>) {}
}

/// A provider on 127.0.0.1 that records each request line it hears and answers 404.
struct Provider {
    url: String,
    heard: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Provider {
    fn start() -> Result<Provider, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let url = format!(
            "http://{}",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        let heard = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (heard, stop) = (heard.clone(), stop.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            if let Some(line) = answer(stream) {
                                heard.locked().push(line);
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            }
        });
        Ok(Provider {
            url,
            heard,
            stop,
            thread: Some(thread),
        })
    }

    fn heard(&self) -> Vec<String> {
        self.heard.locked().clone()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one request's head from `stream`, answers 404; its request line.
fn answer(mut stream: TcpStream) -> Option<String> {
    stream.set_nonblocking(false).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let _ = stream
        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    let text = String::from_utf8_lossy(&head);
    text.lines().next().map(str::to_string)
}

/// The verdict on what the provider heard: refused when it heard the plain request and
/// nothing else; not tried when it heard nothing.
pub(super) fn gateway_verdict(heard: &[String]) -> (bool, String) {
    let path = |line: &str| {
        let target = line.split(' ').nth(1).unwrap_or("");
        target.split('?').next().unwrap_or("").to_string()
    };
    let climbed: Vec<&String> = heard.iter().filter(|l| path(l) != PLAIN).collect();
    if !climbed.is_empty() {
        let lines: Vec<&str> = climbed.iter().map(|l| l.as_str()).collect();
        return (
            false,
            format!("it went through (the provider heard {})", lines.join("; ")),
        );
    }
    if heard.is_empty() {
        return (
            false,
            format!("not tried: the provider never heard the plain GET {PLAIN} through the lease"),
        );
    }
    (true, String::new())
}

/// Opens a lease to a provider of plait's own and has the probe send its paths through it.
pub(super) async fn gateway_probe(
    plait: &Path,
    settings: &SandboxSettings,
    place: &Path,
    own: &Path,
) -> Result<Probe, String> {
    const WHAT: &str = "paths climbing out of the provider's API through the gateway";
    let provider = Provider::start()?;
    let file = ProviderFile {
        base_url: Some(provider.url.clone()),
        api_key_env: Some("KEY".to_string()),
        ..ProviderFile::default()
    };
    let env = |k: &str| (k == "KEY").then(|| "plait-doctor-provider-key".to_string());
    let settings_of =
        resolve_provider("anthropic", Some(&file), &env).map_err(|e| e.to_string())?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())?;
    let gateway = Gateway::start(client).await.map_err(|e| e.to_string())?;
    let lease = gateway
        .open(Route {
            task: "doctor".to_string(),
            limiter: Arc::new(Limiter::new(settings_of.limits)),
            provider: Arc::new(settings_of),
            transcript: place.join("gateway.jsonl"),
            meter: Arc::new(Free),
        })
        .map_err(|e| format!("cannot open a port of plait's gateway on 127.0.0.1: {e}"))?;
    let walls = settings
        .with_network(Network::Gateway)
        .through_gateway(lease.port());
    let prober = Prober {
        plait,
        sandbox: Sandbox::new(&walls, vec![own.to_path_buf()]),
        log: place.join("gateway.log"),
        own: own.to_path_buf(),
        cancel: plait_core::cancel::Cancel::new().1,
    };
    let key = lease.key().unwrap_or_default();
    let (outcome, said) = prober
        .attempt("traverse", format!("{} {key}", lease.base_url()))
        .await;
    drop(lease);
    let (refused, detail) = gateway_verdict(&provider.heard());
    let mut probe = judge(WHAT, &outcome, &said, refused);
    if !refused && !probe.detail.starts_with("the probe could not start") {
        probe.detail = detail;
    }
    Ok(probe)
}

/// The probe of the gateway: sends each of [`CLIMBS`] and then the plain request under
/// `target` (`BASE_URL KEY`) as raw HTTP/1.1, each on a connection of its own; says the
/// status line of each answer.
pub(super) fn traverse(target: &str) -> Result<String, String> {
    let (base, key) = target.split_once(' ').unwrap_or((target, ""));
    let rest = base
        .strip_prefix("http://")
        .ok_or(format!("not an http URL: {base}"))?;
    let (authority, prefix) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut said = Vec::new();
    let absolute = format!("{base}/v1/models/../../admin/organizations/keys");
    let targets = CLIMBS
        .iter()
        .map(|path| format!("{prefix}{path}"))
        .chain([absolute, format!("{prefix}{PLAIN}")]);
    for request_target in targets {
        let request = format!(
            "GET {request_target} HTTP/1.1\r\nhost: {authority}\r\nx-api-key: {key}\r\n\
             connection: close\r\n\r\n"
        );
        let status = send(authority, &request).unwrap_or_else(|e| format!("failed: {e}"));
        said.push(format!("{request_target}: {status}"));
    }
    Ok(said.join("\n"))
}

/// Sends `request` to `authority`; the answer's status line.
fn send(authority: &str, request: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    Ok(text.lines().next().unwrap_or("no answer").to_string())
}
