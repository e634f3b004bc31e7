//! Review page benchmark: how long `plait serve` takes to make a big run's page ready.
//! Prints figures, asserts nothing about time.
//!
//! For each size (2,000 and 10,000 tasks by default): a generated repository whose base has
//! one file per task and one branch per task changing its file (written by `git
//! fast-import`, so the branches are real commits), and a finished run's record of that
//! many tasks written through plait's own types (`Store::save`): checks, reviews, usage,
//! some failed, rejected, sent back and with rounds of changes. Then the real `plait serve`:
//!
//! 1. each JSON endpoint the run page loads (`/api/runs/{run}`, and `/summary` and
//!    `/branches` where the server has them): time of the first request (nothing cached),
//!    the median of the next `--reps`, and the body's size, plain and gzipped (when the
//!    server compresses);
//! 2. in headless Chromium, when it and playwright-core are found as the browser tests find
//!    them (`PLAIT_TEST_CHROMIUM`, `PLAIT_TEST_PLAYWRIGHT`), on a server just started and
//!    again warm: the run page opened from the list of runs (the page itself already
//!    loaded), until its task list is rendered (`body[data-ready]`) and until every task's
//!    +/− lines are shown, and the rows in the DOM; then the run page's URL opened afresh,
//!    counted from the navigation's start (loading the page and its script too);
//! 3. the server's resident memory after it.
//!
//! `--sizes 2000,10000` picks the sizes, `--reps N` the warm repetitions (default 5),
//! `--plait BIN` serves with another plait binary (an older build, to compare), `--keep`
//! keeps the temporary directory. Run it through `./bench --page`.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use plait_core::state::{
    ChangeKind, CheckResult, Decision, FileChange, MergeOutcome, Review, RunPhase, RunState,
    SentBack, Store, TaskRecord, TaskState, Usage, Verdict,
};

mod common;
use common::{bytes, git, isolate_git, median, secs, stage, DATE, EMAIL, NAME};

const RUN: &str = "1bench";

struct Config {
    sizes: Vec<usize>,
    reps: usize,
    keep: bool,
    plait: PathBuf,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            sizes: vec![2_000, 10_000],
            reps: 5,
            keep: false,
            plait: PathBuf::from(env!("CARGO_BIN_EXE_plait")),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |key: &str| args.next().with_context(|| format!("{key} needs a value"));
            match arg.as_str() {
                "--sizes" => {
                    cfg.sizes = value("--sizes")?
                        .split(',')
                        .map(|n| n.trim().replace('_', "").parse::<usize>())
                        .collect::<Result<_, _>>()
                        .context("--sizes takes numbers separated by commas")?;
                }
                "--reps" => cfg.reps = value("--reps")?.parse()?,
                "--keep" => cfg.keep = true,
                "--plait" => cfg.plait = PathBuf::from(value("--plait")?),
                "-h" | "--help" => {
                    println!(
                        "usage: bench --page [--sizes N,N,...] [--reps N] [--plait BIN] [--keep]"
                    );
                    std::process::exit(0);
                }
                _ => {}
            }
        }
        cfg.reps = cfg.reps.max(1);
        Ok(cfg)
    }
}

fn task_id(k: usize) -> String {
    format!("t{k:05}")
}

fn task_path(k: usize) -> String {
    format!("src/d{:03}/f{k:05}.txt", k / 100)
}

/// A repository whose base holds one file per task, and one branch per task
/// (`plait/<run>/<task>`) changing it; the base's id and each task's commit.
fn repo(root: &Path, n: usize) -> Result<(PathBuf, String, Vec<String>)> {
    let path = root.join(format!("repo-{n}"));
    std::fs::create_dir_all(&path)?;
    git(&path, &["init", "-q", "-b", "main"])?;
    let who = format!("{NAME} <{EMAIL}> {DATE}");
    let mut stream = Vec::new();
    let data = |out: &mut Vec<u8>, text: &str| {
        let _ = write!(out, "data {}\n{text}\n", text.len());
    };
    let _ = writeln!(stream, "commit refs/heads/main\nmark :1\ncommitter {who}");
    data(&mut stream, "base");
    for k in 0..n {
        let _ = writeln!(stream, "M 100644 inline {}", task_path(k));
        data(&mut stream, &format!("one {k}\ntwo\nthree\nfour\nfive\n"));
    }
    for k in 0..n {
        let branch = format!("refs/heads/plait/{RUN}/{}", task_id(k));
        let _ = writeln!(stream, "commit {branch}\nmark :{}\ncommitter {who}", k + 2);
        data(
            &mut stream,
            &format!("plait({}): fix it\n\nPlait-Run: {RUN}\n", task_id(k)),
        );
        let _ = writeln!(stream, "from :1\nM 100644 inline {}", task_path(k));
        // Each task adds k % 7 + 1 lines and changes one.
        let added: String = (0..k % 7).map(|i| format!("more {i}\n")).collect();
        data(
            &mut stream,
            &format!("one {k}\nTWO\nthree\nfour\nfive\n{added}new\n"),
        );
    }
    let marks = root.join(format!("marks-{n}"));
    let mut child = plait_core::git::git_command(&path)
        .args(["fast-import", "--quiet"])
        .arg(format!("--export-marks={}", marks.display()))
        .stdin(Stdio::piped())
        .spawn()
        .context("git fast-import")?;
    child
        .stdin
        .take()
        .context("fast-import's stdin")?
        .write_all(&stream)?;
    if !child.wait()?.success() {
        bail!("git fast-import failed");
    }
    git(&path, &["reset", "-q", "--hard", "main"])?;
    let mut ids = vec![String::new(); n + 1];
    for line in std::fs::read_to_string(&marks)?.lines() {
        let (mark, sha) = line.split_once(' ').context("a marks line")?;
        let mark: usize = mark.trim_start_matches(':').parse()?;
        if let Some(slot) = ids.get_mut(mark - 1) {
            *slot = sha.to_string();
        }
    }
    let base = ids.remove(0);
    Ok((path, base, ids))
}

/// One task's record as a finished run keeps it: mostly approved, some failed, rejected,
/// with rounds of changes or sent back by a person.
fn task(run_dir: &Path, repo: &Path, k: usize, commit: &str) -> TaskRecord {
    let id = task_id(k);
    let dir = run_dir.join("tasks").join(&id);
    let mut t = TaskRecord::pending(
        RUN,
        &id,
        repo.join(".plait-worktrees").join(&id),
        1,
        dir.join("agent.log"),
    );
    let at = 1_700_000_000_000 + k as u64 * 1000;
    t.started_at = Some(at);
    t.finished_at = Some(at + 20_000 + (k as u64 % 50) * 1000);
    t.commit = Some(commit.to_string());
    t.exit_code = Some(0);
    t.changes = vec![FileChange {
        path: task_path(k),
        kind: ChangeKind::Modified,
    }];
    t.usage = Some(Usage {
        requests: 4,
        turns: 4,
        input_tokens: 12_000 + k as u64 % 977,
        output_tokens: 900 + k as u64 % 313,
        cache_read_input_tokens: 8_000,
        cost_usd: Some(0.02 + (k % 17) as f64 / 1000.0),
        model_ms: 9_000,
        ..Usage::default()
    });
    t.summary = Some(format!("Changed {} as asked.", task_path(k)));
    t.sandbox = None;
    let failing = k % 25 == 3;
    t.checks = ["cargo test --quiet", "cargo clippy -- -D warnings"]
        .iter()
        .enumerate()
        .map(|(i, command)| CheckResult {
            command: command.to_string(),
            passed: !(failing && i == 0),
            exit_code: Some(if failing && i == 0 { 101 } else { 0 }),
            tail: if failing && i == 0 {
                "test tests::it_works ... FAILED\nfailures:\n    tests::it_works\ntest result: FAILED. 11 passed; 1 failed".to_string()
            } else {
                "test result: ok. 12 passed; 0 failed".to_string()
            },
            log: dir
                .join(format!("checks-{}", k % 3))
                .join(format!("check-{}.log", i + 1)),
            ms: 4_000 + (k as u64 % 100) * 10,
            refused: Vec::new(),
            at_base: false,
            as_on_base: false,
            beyond_base: Vec::new(),
        })
        .collect();
    t.rounds = k.is_multiple_of(5) as u32 + k.is_multiple_of(10) as u32;
    let verdict = match k % 33 {
        7 => Verdict::Reject,
        11 => Verdict::RequestChanges,
        _ => Verdict::Approve,
    };
    t.review = Some(Review {
        verdict,
        summary: match verdict {
            Verdict::Approve => "Looks right: the change does what the task asks.".to_string(),
            _ => "The change misses the second case the task names.".to_string(),
        },
        comments: Vec::new(),
        by: "model".to_string(),
        round: t.rounds,
        note: None,
        usage: None,
    });
    t.state = if failing {
        t.error = Some("its checks still fail after 2 round(s) of changes".to_string());
        TaskState::Failed
    } else if verdict == Verdict::Reject {
        TaskState::Rejected
    } else {
        TaskState::Done
    };
    if k % 97 == 5 {
        t.sent_back.push(SentBack {
            comment: "Please keep the old name as an alias.".to_string(),
            at: at + 60_000,
            round: t.rounds,
        });
    }
    if k % 51 == 9 {
        t.decision = Some(Decision {
            verdict: Verdict::Approve,
            at: at + 90_000,
        });
    }
    t
}

/// Writes run [`RUN`]'s record of `n` tasks into `repo`'s store; its size on disk.
fn record(repo: &Path, base: &str, commits: &[String]) -> Result<u64> {
    let store = Store::new(repo.join(".git/plait"));
    let run_dir = store.run_dir(RUN);
    std::fs::create_dir_all(&run_dir)?;
    let tasks: Vec<TaskRecord> = commits
        .iter()
        .enumerate()
        .map(|(k, c)| task(&run_dir, repo, k, c))
        .collect();
    let included = tasks
        .iter()
        .filter(|t| t.state == TaskState::Done)
        .map(|t| t.id.clone())
        .collect();
    let excluded = tasks
        .iter()
        .filter(|t| t.state != TaskState::Done)
        .map(|t| t.id.clone())
        .collect();
    let state = RunState {
        version: plait_core::state::STATE_VERSION,
        id: RUN.to_string(),
        goal: format!("{} tasks, for the review page's benchmark", tasks.len()),
        plan: repo.join("plan.toml"),
        base: base.to_string(),
        base_name: "main".to_string(),
        worktree_root: repo.join(".plait-worktrees"),
        phase: RunPhase::Finished,
        pid: 0,
        created_at: 1_700_000_000_000,
        finished_at: Some(1_700_000_000_000 + tasks.len() as u64 * 1000 + 60_000),
        tasks,
        merge: Some(MergeOutcome {
            branch: format!("plait/{RUN}/merged"),
            commit: base.to_string(),
            included,
            excluded,
            conflicts: Vec::new(),
            waiting: Vec::new(),
            commits: Default::default(),
        }),
        landed: Vec::new(),
        cleaned: false,
        merged_checks: Vec::new(),
        environment: None,
        base_checks_ignored: false,
        max_cost: None,
        groups: Vec::new(),
        culprits: None,
        timings: Vec::new(),
    };
    store.save(&state)?;
    Ok(std::fs::metadata(run_dir.join("state.json"))?.len())
}

/// `plait serve --port 0` in `repo`, stopped when dropped.
struct Served {
    child: Child,
    addr: String,
}

impl Served {
    fn start(plait: &Path, repo: &Path) -> Result<Served> {
        let mut child = Command::new(plait)
            .args(["serve", "--port", "0"])
            .current_dir(repo)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("start plait serve")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("its stdout")?).read_line(&mut line)?;
        let addr = line
            .trim()
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .with_context(|| format!("plait serve printed {line:?}"))?
            .to_string();
        Ok(Served { child, addr })
    }

    /// `GET path`: the status, the body's size as sent, its `Content-Encoding`, and the
    /// seconds until the whole body arrived.
    fn get(&self, path: &str, gzip: bool) -> Result<(u16, usize, Option<String>, f64)> {
        let start = Instant::now();
        let mut stream = TcpStream::connect(&self.addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        let accept = if gzip {
            "Accept-Encoding: gzip\r\n"
        } else {
            ""
        };
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{accept}\r\n",
            self.addr
        )?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        let took = start.elapsed().as_secs_f64();
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .context("no end of the head")?;
        let head = String::from_utf8_lossy(&response[..split]).to_lowercase();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let encoding = head
            .lines()
            .find_map(|l| l.strip_prefix("content-encoding:"))
            .map(|v| v.trim().to_string());
        let mut body = response.len() - split - 4;
        if head.contains("transfer-encoding: chunked") {
            body = dechunked_len(&response[split + 4..]);
        }
        Ok((status, body, encoding, took))
    }

    /// The server's resident memory.
    fn rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The length of a chunked body's data.
fn dechunked_len(mut body: &[u8]) -> usize {
    let mut total = 0;
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..end])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        total += size;
        body = &body[(end + 2 + size + 2).min(body.len())..];
    }
    total
}

/// Node, playwright-core and Chromium, found as the browser tests find them.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let playwright = std::env::var_os("PLAIT_TEST_PLAYWRIGHT")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/ci-tools"));
    let chromium = std::env::var_os("PLAIT_TEST_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    let node = Command::new("node").arg("--version").output();
    let found = node.is_ok_and(|o| o.status.success())
        && playwright.join("node_modules/playwright-core").is_dir()
        && chromium.exists();
    found.then_some((playwright, chromium))
}

/// What the page took in Chromium, in ms: the run page opened from the list of runs until
/// its task list is rendered and until every task's lines are shown (when it shows them),
/// the rows then in the DOM, and the run page's URL opened afresh until its list is
/// rendered, from the navigation's start.
#[derive(Debug, Default)]
struct PageFigures {
    ready_ms: f64,
    lines_ms: Option<f64>,
    rows: u64,
    fresh_ms: f64,
}

/// Opens the run's page from the list of runs; resolves to the ms until the task list is
/// rendered and until `#tasks` says every line is known (`data-lines="all"`; null after
/// 60 s, or on a page that does not say it).
const OPEN_JS: &str = "new Promise((done) => { const t0 = performance.now(); let ready = null; \
    location.hash = '#/runs/RUN'; \
    const look = () => { const el = document.querySelector('#tasks'); \
      if (ready == null && document.body.dataset.ready === 'true' && el && el.querySelector('[data-task]')) ready = performance.now() - t0; \
      if (ready != null && (el.dataset.lines === 'all' || el.dataset.lines == null)) \
        return done({ready, lines: el.dataset.lines === 'all' ? performance.now() - t0 : null}); \
      if (performance.now() - t0 > 60000) return done({ready, lines: null}); setTimeout(look, 5); }; \
    setTimeout(look, 0); })";

fn in_chromium(
    (playwright, chromium): &(PathBuf, PathBuf),
    served: &Served,
    dir: &Path,
) -> Result<PageFigures> {
    let root_url = format!("http://{}/", served.addr);
    let script = serde_json::json!({"timeout_ms": 120000, "viewport": [1280, 900], "steps": [
        {"goto": root_url},
        {"wait_attr": ["body", "data-ready", "true"]},
        {"wait": "#runs"},
        {"eval": OPEN_JS.replace("RUN", RUN)},
        {"eval": "document.querySelectorAll('#tasks [data-task]').length"},
        {"goto": "about:blank"},
        {"goto": format!("{root_url}#/runs/{RUN}")},
        {"wait_attr": ["body", "data-ready", "true"]},
        {"wait": "#tasks [data-task]"},
        {"eval": "performance.now()"},
    ]});
    let path = dir.join("page-script.json");
    std::fs::write(&path, script.to_string())?;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("node")
        .arg(root.join("tests/browser/drive.mjs"))
        .arg(&path)
        .env("PLAIT_TEST_PLAYWRIGHT", playwright)
        .env("PLAIT_TEST_CHROMIUM", chromium)
        .output()
        .context("node")?;
    if !out.status.success() {
        bail!(
            "the browser script failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let evals: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("eval").cloned())
        .collect();
    let opened = evals.first().cloned().unwrap_or_default();
    Ok(PageFigures {
        ready_ms: opened["ready"].as_f64().unwrap_or(f64::NAN),
        lines_ms: opened["lines"].as_f64(),
        rows: evals.get(1).and_then(|v| v.as_u64()).unwrap_or(0),
        fresh_ms: evals.get(2).and_then(|v| v.as_f64()).unwrap_or(f64::NAN),
    })
}

fn measure(root: &Path, n: usize, cfg: &Config) -> Result<()> {
    stage(&format!(
        "{n} tasks: making the repository and its branches"
    ));
    let started = Instant::now();
    let (repo, base, commits) = repo(root, n)?;
    let size = record(&repo, &base, &commits)?;
    stage(&format!(
        "made in {}",
        secs(started.elapsed().as_secs_f64())
    ));
    println!("\n== {n} tasks (state.json {})", bytes(size));

    let served = Served::start(&cfg.plait, &repo)?;
    let endpoints = [
        format!("/api/runs/{RUN}"),
        format!("/api/runs/{RUN}/summary"),
        format!("/api/runs/{RUN}/branches"),
    ];
    println!(
        "{:<28} {:>10} {:>10} {:>11} {:>11}",
        "endpoint", "first", "warm", "bytes", "gzipped"
    );
    for path in &endpoints {
        let (status, size, _, first) = served.get(path, false)?;
        if status == 404 {
            println!("{:<28} (not served)", short(path));
            continue;
        }
        if status != 200 {
            bail!("GET {path}: {status}");
        }
        let mut warm = Vec::new();
        for _ in 0..cfg.reps {
            warm.push(served.get(path, false)?.3);
        }
        let (_, zipped, encoding, _) = served.get(path, true)?;
        let zipped = match encoding.as_deref() {
            Some("gzip") => bytes(zipped as u64),
            _ => "—".to_string(),
        };
        println!(
            "{:<28} {:>10} {:>10} {:>11} {:>11}",
            short(path),
            secs(first),
            secs(median(&warm)),
            bytes(size as u64),
            zipped
        );
    }
    if let Some(rss) = served.rss() {
        println!("server memory after: {}", bytes(rss));
    }
    drop(served);

    match browser() {
        None => println!("Chromium: not found (PLAIT_TEST_CHROMIUM, PLAIT_TEST_PLAYWRIGHT)"),
        Some(found) => {
            let served = Served::start(&cfg.plait, &repo)?;
            for label in ["cold server", "warm server"] {
                match in_chromium(&found, &served, root) {
                    Ok(p) => println!(
                        "Chromium, {label}: opened from the runs, task list rendered in {} ({} rows in the DOM), all +/− lines in {}; the URL afresh: rendered {} after the navigation's start",
                        secs(p.ready_ms / 1e3),
                        p.rows,
                        p.lines_ms
                            .map_or("— (not shown)".to_string(), |ms| secs(ms / 1e3)),
                        secs(p.fresh_ms / 1e3),
                    ),
                    Err(e) => println!("Chromium, {label}: {e:#}"),
                }
            }
        }
    }
    Ok(())
}

fn short(path: &str) -> String {
    path.replace(&format!("/api/runs/{RUN}"), "/api/runs/RUN")
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let root = tempfile::Builder::new().prefix("plait-page-").tempdir()?;
    let empty = root.path().join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    println!("review page benchmark: plait serve, a finished run of N tasks");
    for &n in &cfg.sizes {
        measure(root.path(), n, &cfg)?;
    }
    if cfg.keep {
        let kept = root.keep();
        println!("\nkept {}", kept.display());
    }
    Ok(())
}
