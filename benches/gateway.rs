//! Gateway benchmark: what plait's gateway adds to an agent CLI's requests, against the
//! same server asked directly. Prints figures, asserts nothing about time.
//!
//! 1. Latency: `--requests` small JSON answers one after another, directly and through the
//!    gateway, in alternating blocks: p50 and p99 of each, and what the gateway adds.
//! 2. Time to first token: a tenth as many streams (the server sends `message_start`, then
//!    the first delta 20 ms later): p50 of the time to the first delta, both ways.
//! 3. Requests a second: 64 clients at once for 3 s, both ways (the route's limiter allows
//!    them all in flight: what is measured is its cost, not a cap).
//! 4. Memory: `--streams` streams held open at once (the server sends the first delta and
//!    waits), the process's resident memory before and after, both ways; the difference
//!    per stream is the gateway's.
//! 5. Agents: `--agents` real Claude Codes (3 requests each) against the mock model server
//!    as a bucketed account (`--rpm`, 60 requests a minute as a token bucket, 10 in flight,
//!    500 ms an answer): through plait (`plait run -j N`, the gateway and its limiter)
//!    against the same CLIs started at once on their own. Requests answered, 429s, the
//!    time, the CPU, and the share of the limit used: the floor the bucket allows (what is
//!    past its first minute's worth, at its refill rate) against the time taken. Each way
//!    has a timeline (`timeline`): CLIs started, first requests, answers, 429s, the
//!    server's bucket at its lowest, and through plait the limiter's waits by reason.
//!    Skipped without Claude Code (`PLAIT_TEST_CLAUDE`, `PATH`, or `target/ci-tools`);
//!    `--agents-only` runs this part alone.
//! 6. Reviews: `--reviews` exec tasks at `-j 1`, each reviewed by a model over the mock
//!    server's API, then by Claude Code against the mock (the CLI's start included): the
//!    time each review adds per task. Skipped without Claude Code.
//!
//! Run through `./bench --gateway` or `cargo bench --bench gateway`.

#[allow(dead_code)]
#[path = "../tests/it/mock/mod.rs"]
mod mock;
#[path = "gateway/timeline.rs"]
mod timeline;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use plait_core::state::Usage;
use plait_gateway::{Gateway, Meter, Route};
use plait_llm::limiter::Limiter;
use plait_llm::provider::{resolve_provider, Limits, ProviderFile};
use serde_json::{json, Value};

use mock::{claude_tools, MockModel, Turn};
use timeline::Timeline;

const KEY: &str = "sk-bench-gateway-0123456789";

struct Config {
    requests: usize,
    streams: usize,
    agents: usize,
    reviews: usize,
    /// The account's requests a minute in the agents' part.
    rpm: usize,
    /// Only the agents' part.
    agents_only: bool,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            requests: 2000,
            streams: 1000,
            agents: 30,
            reviews: 5,
            rpm: 60,
            agents_only: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |key: &str| -> Result<usize> {
                let v = args
                    .next()
                    .with_context(|| format!("{key} needs a value"))?;
                v.parse().with_context(|| format!("{key} {v}"))
            };
            match arg.as_str() {
                "--requests" => cfg.requests = value("--requests")?.max(100),
                "--streams" => cfg.streams = value("--streams")?.max(1),
                "--agents" => cfg.agents = value("--agents")?,
                "--reviews" => cfg.reviews = value("--reviews")?,
                "--rpm" => cfg.rpm = value("--rpm")?.max(1),
                "--agents-only" => cfg.agents_only = true,
                "-h" | "--help" => {
                    println!("usage: bench --gateway [--requests N] [--streams N] [--agents N] [--rpm N] [--reviews N] [--agents-only]");
                    std::process::exit(0);
                }
                _ => {}
            }
        }
        Ok(cfg)
    }
}

/// The server: a small JSON answer, or a stream whose first delta comes 20 ms after its
/// start (and whose end waits for `release` when the request says `"hold": true`).
#[derive(Default)]
struct Upstream {
    release: tokio::sync::Notify,
}

async fn answer(State(up): State<Arc<Upstream>>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let usage = json!({"input_tokens": 12, "output_tokens": 3});
    if request["stream"] != true {
        return axum::Json(json!({
            "id": "msg", "type": "message", "role": "assistant", "model": request["model"],
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": usage
        }))
        .into_response();
    }
    let hold = request["hold"] == true;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        let event =
            |name: &str, data: Value| Ok(Bytes::from(format!("event: {name}\ndata: {data}\n\n")));
        let start = json!({"type": "message_start", "message": {"usage": usage}});
        let _ = tx.send(event("message_start", start)).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let delta = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}});
        let _ = tx.send(event("content_block_delta", delta)).await;
        if hold {
            up.release.notified().await;
        }
        let _ = tx
            .send(event("message_stop", json!({"type": "message_stop"})))
            .await;
    });
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    let mut response = Response::new(Body::from_stream(stream));
    response
        .headers_mut()
        .insert("content-type", "text/event-stream".parse().unwrap());
    response
}

struct Quiet;
impl Meter for Quiet {
    fn admit(&self, _: f64) -> plait_gateway::Admission<'_> {
        Box::pin(async { Ok(()) })
    }
    fn settle(&self, _: f64, _: Option<&Usage>) {}
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn raise_file_limit() {
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn body(stream: bool, hold: bool) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream, "hold": hold,
           "messages": [{"role": "user", "content": "hi"}]})
}

async fn one(client: &reqwest::Client, url: &str) -> Result<Duration> {
    let started = Instant::now();
    let response = client
        .post(url)
        .header("x-api-key", KEY)
        .json(&body(false, false))
        .send()
        .await?;
    if !response.status().is_success() {
        bail!("{url} answered {}", response.status());
    }
    response.bytes().await?;
    Ok(started.elapsed())
}

/// The time to the first delta of one stream; with `hold`, the stream is returned open.
async fn first_delta(
    client: &reqwest::Client,
    url: &str,
    hold: bool,
) -> Result<(Duration, Option<impl futures_util::Stream>)> {
    let started = Instant::now();
    let response = client
        .post(url)
        .header("x-api-key", KEY)
        .json(&body(true, hold))
        .send()
        .await?;
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("content_block_delta") {
        let chunk = stream.next().await.context("the stream ended early")??;
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let took = started.elapsed();
    if hold {
        return Ok((took, Some(stream)));
    }
    while stream.next().await.is_some() {}
    Ok((took, None))
}

async fn rate(client: &reqwest::Client, url: &str) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(3);
    let workers: Vec<_> = (0..64)
        .map(|_| {
            let (client, url, done) = (client.clone(), url.to_string(), done.clone());
            tokio::spawn(async move {
                while Instant::now() < until {
                    if one(&client, &url).await.is_ok() {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    done.load(Ordering::Relaxed) as f64 / 3.0
}

async fn held_memory(
    client: &reqwest::Client,
    url: &str,
    streams: usize,
    up: &Upstream,
) -> Result<f64> {
    let before = rss_kb();
    let mut open = Vec::with_capacity(streams);
    let opened =
        futures_util::future::join_all((0..streams).map(|_| first_delta(client, url, true))).await;
    for o in opened {
        open.push(o?.1);
    }
    let during = rss_kb();
    up.release.notify_waiters();
    drop(open);
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(during.saturating_sub(before) as f64 / streams as f64)
}

async fn http_part(cfg: &Config) -> Result<()> {
    raise_file_limit();
    let up = Arc::new(Upstream::default());
    let app = axum::Router::new()
        .fallback(axum::routing::post(answer))
        .with_state(up.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()?;
    let gateway = Gateway::start(client.clone()).await?;
    let file = ProviderFile {
        base_url: Some(base.clone()),
        api_key_env: Some("KEY".into()),
        ..ProviderFile::default()
    };
    let provider = Arc::new(
        resolve_provider("anthropic", Some(&file), &|k| {
            (k == "KEY").then(|| KEY.to_string())
        })
        .map_err(anyhow::Error::msg)?,
    );
    let transcript = tempfile::NamedTempFile::new()?;
    let lease = gateway.open(Route {
        task: "bench".into(),
        // Room for every stream held open at once: the limiter's own cost, not its cap.
        limiter: Arc::new(Limiter::new(Limits {
            concurrency: cfg.streams + 64,
            ..provider.limits
        })),
        provider,
        transcript: transcript.path().to_path_buf(),
        meter: Arc::new(Quiet),
    })?;
    let direct = format!("{base}/v1/messages");
    let through = format!("{}/v1/messages", lease.base_url());
    // Warm both paths' connections.
    for _ in 0..50 {
        one(&client, &direct).await?;
        one(&client, &through).await?;
    }

    let (mut d, mut g) = (Vec::new(), Vec::new());
    for _ in 0..cfg.requests / 100 {
        for _ in 0..100 {
            d.push(one(&client, &direct).await?);
        }
        for _ in 0..100 {
            g.push(one(&client, &through).await?);
        }
    }
    d.sort();
    g.sort();
    let (d50, d99, g50, g99) = (
        percentile(&d, 0.5),
        percentile(&d, 0.99),
        percentile(&g, 0.5),
        percentile(&g, 0.99),
    );
    println!(
        "1. latency, {} small answers each way, one at a time:",
        cfg.requests
    );
    println!("   direct  p50 {}  p99 {}", ms(d50), ms(d99));
    println!("   gateway p50 {}  p99 {}", ms(g50), ms(g99));
    println!(
        "   added   p50 {}  p99 {}   (goal: p50 <= 1 ms, p99 <= 5 ms)",
        ms(g50.saturating_sub(d50)),
        ms(g99.saturating_sub(d99))
    );

    let n = (cfg.requests / 10).max(20);
    let (mut d, mut g) = (Vec::new(), Vec::new());
    for _ in 0..n {
        d.push(first_delta(&client, &direct, false).await?.0);
        g.push(first_delta(&client, &through, false).await?.0);
    }
    d.sort();
    g.sort();
    println!("2. time to first token, {n} streams each way (the server's first delta at 20 ms):");
    println!(
        "   direct p50 {}  gateway p50 {}  added {}   (goal: within 2 ms)",
        ms(percentile(&d, 0.5)),
        ms(percentile(&g, 0.5)),
        ms(percentile(&g, 0.5).saturating_sub(percentile(&d, 0.5)))
    );

    let rd = rate(&client, &direct).await;
    let rg = rate(&client, &through).await;
    println!("3. requests a second, 64 clients for 3 s (server, gateway and clients in one process, 2 CPUs):");
    println!("   direct {rd:.0}/s  gateway {rg:.0}/s   (goal: >= 2,000/s through the gateway)");

    let md = held_memory(&client, &direct, cfg.streams, &up).await?;
    let mg = held_memory(&client, &through, cfg.streams, &up).await?;
    println!(
        "4. memory, {} streams held open at once (resident, whole process):",
        cfg.streams
    );
    println!(
        "   direct {md:.1} KB a stream  gateway {mg:.1} KB a stream  the gateway's {:.1} KB a stream",
        (mg - md).max(0.0)
    );
    Ok(())
}

/// The real Claude Code, as the integration tests find it.
fn real_claude() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PLAIT_TEST_CLAUDE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let local =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ci-tools/node_modules/.bin/claude");
    if local.exists() {
        return Some(local);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("claude"))
            .find(|p| p.is_file())
    })
}

fn bucketed(agents: usize, rpm: usize) -> MockModel {
    let mock = MockModel::start_claude_code(KEY);
    mock.set_limits(10, rpm, 1);
    mock.set_latency(Duration::from_millis(500));
    mock.keep_bodies(false);
    for k in 0..agents {
        let file = format!("src/f{k}.txt");
        mock.script(
            &format!("t{k}"),
            vec![
                Turn::Tools(vec![claude_tools::read(&file)]),
                Turn::Tools(vec![claude_tools::edit(&file, "hi", "hello")]),
                Turn::Text("Done.".into()),
            ],
        );
    }
    mock
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("git").args(args).current_dir(dir).output()?;
    if !out.status.success() {
        bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// The CPU time (user and system, in seconds) of this process's children that have ended.
fn children_cpu() -> f64 {
    // SAFETY: getrusage fills a local struct.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The run's figures (`cpu`: its processes' CPU seconds); its time.
fn report(how: &str, mock: &MockModel, took: Duration, rpm: usize, cpu: f64) -> f64 {
    let s = mock.load_stats();
    let floor = s.ok.saturating_sub(rpm as u64) as f64 * 60.0 / rpm as f64;
    println!(
        "   {how}: {} answered, {} answered 429 ({:.1}%), {:.1} s, CPU {cpu:.0} s; floor {floor:.0} s, share of the limit used {:.0}%",
        s.ok,
        s.limited,
        100.0 * s.limited as f64 / (s.ok + s.limited).max(1) as f64,
        took.as_secs_f64(),
        100.0 * floor / took.as_secs_f64()
    );
    took.as_secs_f64()
}

fn agents_part(cfg: &Config) -> Result<()> {
    if cfg.agents == 0 {
        return Ok(());
    }
    let Some(claude) = real_claude() else {
        println!("5. agents: skipped, Claude Code is not installed");
        return Ok(());
    };
    println!(
        "5. {} Claude Codes, 3 requests each, on an account of {} requests a minute (a bucket), 10 in flight, 500 ms a request:",
        cfg.agents, cfg.rpm
    );
    let dir = tempfile::tempdir()?;
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("src"))?;
    let mut tasks = String::new();
    for k in 0..cfg.agents {
        std::fs::write(repo.join(format!("src/f{k}.txt")), "hi\n")?;
        let _ = writeln!(
            tasks,
            "[[task]]\nid = \"t{k}\"\nprompt = \"Say hello in src/f{k}.txt\"\nowns = [\"src/f{k}.txt\"]"
        );
    }
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-qm", "base"],
    ] {
        git(&repo, args)?;
    }
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    let plait = through_plait(cfg, &claude, dir.path(), &repo, &home)?;
    let alone = on_their_own(cfg, &claude, dir.path(), &repo, &home)?;
    println!(
        "   through plait {:.2}x the CLIs' own time (goal: <= 0.8x, < 5% answered 429)",
        plait / alone
    );
    Ok(())
}

/// Through plait: one gateway, one limiter for every CLI. The time taken.
fn through_plait(cfg: &Config, claude: &Path, dir: &Path, repo: &Path, home: &Path) -> Result<f64> {
    let mock = bucketed(cfg.agents, cfg.rpm);
    let plan = dir.join("plan.toml");
    let tasks = std::fs::read_dir(repo.join("src"))?.count();
    let mut text = format!(
        "goal = \"Greet\"\n[defaults]\nagent = \"claude-code\"\ntimeout = \"600s\"\n[review]\nagent = \"off\"\n\
         [agents.claude-code]\nbin = \"{}\"\nprovider = \"mock\"\n\
         [providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key_env = \"PLAIT_BENCH_KEY\"\n\
         model = \"claude-sonnet-4-5\"\nlimits = {{ concurrency = 10 }}\n",
        claude.display(),
        mock.url()
    );
    for k in 0..tasks {
        let _ = writeln!(
            text,
            "[[task]]\nid = \"t{k}\"\nprompt = \"Say hello in src/f{k}.txt\"\nowns = [\"src/f{k}.txt\"]"
        );
    }
    std::fs::write(&plan, text)?;
    let (origin, cpu) = (SystemTime::now(), children_cpu());
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan.to_str().unwrap(), "-j", &cfg.agents.to_string()])
        .current_dir(repo)
        .env("PLAIT_BENCH_KEY", KEY)
        .env("HOME", home)
        .output()?;
    if !out.status.success() {
        bail!("plait run: {}", String::from_utf8_lossy(&out.stderr));
    }
    let took = started.elapsed();
    let cpu = children_cpu() - cpu;
    let secs = report("through plait's gateway", &mock, took, cfg.rpm, cpu);
    Timeline::new(origin, &mock.requests(), took, cfg.rpm)
        .plait(origin, repo)
        .print("through plait");
    Ok(secs)
}

/// The same CLIs on their own, all at once against the account. The time taken.
fn on_their_own(cfg: &Config, claude: &Path, dir: &Path, repo: &Path, home: &Path) -> Result<f64> {
    let mock = bucketed(cfg.agents, cfg.rpm);
    let (origin, cpu) = (SystemTime::now(), children_cpu());
    let started = Instant::now();
    let children: Vec<_> = (0..cfg.agents)
        .map(|k| {
            let config = dir.join(format!("config-{k}"));
            let _ = std::fs::create_dir_all(&config);
            Command::new(claude)
                .args([
                    "-p",
                    &format!("Say hello in src/f{k}.txt"),
                    "--output-format",
                    "json",
                ])
                .args(["--append-system-prompt", &format!("Task id: t{k}")])
                .args(["--permission-mode", "bypassPermissions", "--max-turns", "7"])
                .args(["--model", "claude-sonnet-4-5"])
                .current_dir(repo)
                .env("ANTHROPIC_BASE_URL", mock.url())
                .env("ANTHROPIC_API_KEY", KEY)
                .env("CLAUDE_CONFIG_DIR", &config)
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("IS_SANDBOX", "1")
                .env("HOME", home)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
        })
        .collect::<std::io::Result<_>>()?;
    let spawned = started.elapsed().as_secs_f64();
    for mut child in children {
        child.wait()?;
    }
    let took = started.elapsed();
    let cpu = children_cpu() - cpu;
    let secs = report("on their own (no gateway)", &mock, took, cfg.rpm, cpu);
    Timeline::new(origin, &mock.requests(), took, cfg.rpm)
        .spawned(cfg.agents, spawned)
        .print("on their own");
    Ok(secs)
}

/// Runs `tasks` exec tasks reviewed by `review` (TOML for `[review]` and what it needs)
/// at `-j 1`; the time.
fn reviewed_run(dir: &Path, tasks: usize, review: &str) -> Result<Duration> {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let repo = dir.join(format!("repo-{}", RUNS.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(repo.join("src"))?;
    let mut plan = format!(
        "goal = \"Greet\"\n[defaults]\nagent = {{ exec = \"echo hello > \\\"$PLAIT_FILE\\\"\" }}\ntimeout = \"300s\"\n{review}\n"
    );
    for k in 0..tasks {
        std::fs::write(repo.join(format!("src/f{k}.txt")), "hi\n")?;
        let _ = writeln!(
            plan,
            "[[task]]\nid = \"t{k}\"\nprompt = \"Say hello in src/f{k}.txt\"\nowns = [\"src/f{k}.txt\"]"
        );
    }
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-qm", "base"],
    ] {
        git(&repo, args)?;
    }
    let path = dir.join("review-plan.toml");
    std::fs::write(&path, plan)?;
    let home = dir.join("home");
    std::fs::create_dir_all(&home)?;
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", path.to_str().unwrap(), "-j", "1"])
        .current_dir(&repo)
        .env("PLAIT_BENCH_KEY", KEY)
        .env("HOME", &home)
        .output()?;
    let took = started.elapsed();
    if !out.status.success() {
        bail!("plait run: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(took)
}

fn reviews_part(cfg: &Config) -> Result<()> {
    if cfg.reviews == 0 {
        return Ok(());
    }
    let Some(claude) = real_claude() else {
        println!("6. reviews: skipped, Claude Code is not installed");
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let provider = |url: &str| {
        format!(
            "[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{url}\"\napi_key_env = \"PLAIT_BENCH_KEY\"\nmodel = \"claude-sonnet-4-5\"\n"
        )
    };
    let verdict = json!({"verdict": "approve", "summary": "fine"});
    let model = MockModel::start(mock::Provider::Anthropic, KEY);
    let code = MockModel::start_claude_code(KEY);
    for k in 0..cfg.reviews {
        let id = format!("review:t{k}");
        model.script(
            &id,
            vec![Turn::Tools(vec![mock::ToolCall::new(
                "submit_review",
                verdict.clone(),
            )])],
        );
        code.script(
            &id,
            vec![Turn::Tools(vec![mock::ToolCall::new(
                "StructuredOutput",
                verdict.clone(),
            )])],
        );
    }
    let none = reviewed_run(dir.path(), cfg.reviews, "[review]\nagent = \"off\"")?;
    let by_model = reviewed_run(
        dir.path(),
        cfg.reviews,
        &format!("[review]\nagent = \"mock\"\n{}", provider(&model.url())),
    )?;
    let by_code = reviewed_run(
        dir.path(),
        cfg.reviews,
        &format!(
            "[review]\nagent = \"claude-code\"\n[agents.claude-code]\nbin = \"{}\"\nprovider = \"mock\"\n{}",
            claude.display(),
            provider(&code.url())
        ),
    )?;
    let per = |d: Duration| d.saturating_sub(none).as_secs_f64() * 1000.0 / cfg.reviews as f64;
    println!(
        "6. reviews, {} exec tasks at -j 1 (no review: {:.2} s):",
        cfg.reviews,
        none.as_secs_f64()
    );
    println!(
        "   a model review adds {:.0} ms a task; a Claude Code review {:.0} ms a task (its start included); Claude Code adds {:.0} ms a task more",
        per(by_model),
        per(by_code),
        per(by_code) - per(by_model)
    );
    Ok(())
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    for (k, v) in [
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_AUTHOR_NAME", "Plait Bench"),
        ("GIT_AUTHOR_EMAIL", "bench@plait.invalid"),
        ("GIT_COMMITTER_NAME", "Plait Bench"),
        ("GIT_COMMITTER_EMAIL", "bench@plait.invalid"),
    ] {
        std::env::set_var(k, v);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if !cfg.agents_only {
        runtime.block_on(http_part(&cfg))?;
    }
    drop(runtime);
    agents_part(&cfg)?;
    if cfg.agents_only {
        return Ok(());
    }
    reviews_part(&cfg)
}
