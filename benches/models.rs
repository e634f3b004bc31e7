//! Model-agent benchmark: real plait runs of model agents against the integration tests'
//! mock model server (Anthropic, streaming), in load mode. Prints figures, asserts nothing
//! about time.
//!
//! 1. Latency: N tasks of one turn each, no limits (`limits = { concurrency = N }`, `-j N`),
//!    the mock answering after 1 s; the same N tasks with latency 0 measure everything that
//!    is not the latency (worktrees, state, merge). N = 100 and 1,000.
//! 2. Limits: the mock enforces 60 requests in flight and 600 requests a minute as a token
//!    bucket, as the Anthropic API does (starts full, refills 10 a second; headers say the
//!    level and when it is full again; 429 `rate_limit_error` with `retry-after` when
//!    empty); 200 tasks of `--turns` requests each (`pause_turn` answers, then "done"),
//!    first with plait's default limits, then with `limits = { concurrency = 60, rpm = 600 }`.
//!    The floor: the first 600 go at the concurrency's pace, the rest at 10 a second.
//! 3. Faults: 20% 529, 5% 500, 5% streams that end in an error event, 100 tasks.
//! 4. Memory: VmHWM after the 1,000-task runs; state.json size and the time of one save.
//! 6. Input-bound (with the limits): 40 tasks of two requests carrying 20 KB files against
//!    a server of 150,000 input tokens a minute (a token bucket, prompt caching on): the
//!    time against the floor the bucket allows.
//! 5. Caching: one agent of 20 turns, each viewing an 8 KB file, against a mock that caches
//!    prompts as the Anthropic API does, with `cache_history = false` and `true`: input
//!    tokens uncached, written and read, and the cost.
//!
//! `--quick`: 100 and 200 tasks for (1), (2) skipped, 50 tasks for (3). `--keep` keeps the
//! temporary directory. Run through `./bench-models` or `cargo bench --bench models`.

#[allow(dead_code)]
#[path = "../tests/it/mock/mod.rs"]
mod mock;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use plait_core::state::{RunState, Store, TaskState};
use plait_run::orchestrator::{self, RunSettings};

use mock::{LoadStats, MockModel, Provider, Turn};

const KEY: &str = "sk-bench-0123456789";
const KEY_ENV: &str = "PLAIT_BENCH_MODEL_KEY";

struct Config {
    sizes: Vec<usize>,
    limit_tasks: usize,
    turns: usize,
    fault_tasks: usize,
    skip_limits: bool,
    keep: bool,
    /// Supervisor groups per run (`--groups N`; 0: none); default: the plan's.
    groups: Option<usize>,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            sizes: vec![100, 1000],
            limit_tasks: 200,
            turns: 4,
            fault_tasks: 100,
            skip_limits: false,
            keep: false,
            groups: None,
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
                "--quick" => {
                    cfg.sizes = vec![100, 200];
                    cfg.skip_limits = true;
                    cfg.fault_tasks = 50;
                }
                "--large" => cfg.sizes = vec![100, value("--large")?],
                "--limit-tasks" => cfg.limit_tasks = value("--limit-tasks")?,
                "--turns" => cfg.turns = value("--turns")?.max(1),
                "--no-limits" => cfg.skip_limits = true,
                "--only-limits" => {
                    cfg.sizes.clear();
                    cfg.skip_limits = false;
                    cfg.fault_tasks = 0;
                }
                "--keep" => cfg.keep = true,
                "--groups" => cfg.groups = Some(value("--groups")?),
                "-h" | "--help" => {
                    println!(
                        "usage: bench-models [--quick] [--large N] [--limit-tasks N] [--turns N] \
                         [--no-limits] [--only-limits] [--keep] [--groups N]"
                    );
                    std::process::exit(0);
                }
                // `cargo bench` passes `--bench`.
                _ => {}
            }
        }
        Ok(cfg)
    }
}

fn isolate_git(empty: &Path) -> Result<()> {
    for var in plait_core::git::REDIRECTING_VARS {
        std::env::remove_var(var);
    }
    for (k, v) in [
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_AUTHOR_NAME", "Plait Bench"),
        ("GIT_AUTHOR_EMAIL", "bench@plait.invalid"),
        ("GIT_COMMITTER_NAME", "Plait Bench"),
        ("GIT_COMMITTER_EMAIL", "bench@plait.invalid"),
        ("GIT_AUTHOR_DATE", "1700000000 +0000"),
        ("GIT_COMMITTER_DATE", "1700000000 +0000"),
    ] {
        std::env::set_var(k, v);
    }
    std::fs::create_dir_all(empty)?;
    for level in [
        git2::ConfigLevel::Global,
        git2::ConfigLevel::XDG,
        git2::ConfigLevel::System,
        git2::ConfigLevel::ProgramData,
    ] {
        // SAFETY: before any repository is opened.
        unsafe { git2::opts::set_search_path(level, empty) }?;
    }
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("git").args(args).current_dir(dir).output()?;
    if !out.status.success() {
        bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// A repository of `n` directories of one small file each; one task per directory.
fn make_repo(root: &Path, name: &str, n: usize) -> Result<PathBuf> {
    let path = root.join(name).join("repo");
    std::fs::create_dir_all(&path)?;
    git(&path, &["init", "-q", "-b", "main"])?;
    for d in 0..n {
        let dir = path.join(format!("d{d:04}"));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("f.txt"), format!("file {d}\n"))?;
    }
    git(&path, &["add", "-A"])?;
    git(&path, &["commit", "-q", "-m", "base"])?;
    Ok(path)
}

fn plan(url: &str, n: usize, limits: Option<&str>) -> String {
    let mut toml = format!(
        "goal = \"Benchmark\"\n\
         [providers.mock]\nkind = \"anthropic\"\nbase_url = \"{url}\"\napi_key_env = \"{KEY_ENV}\"\n\
         model = \"claude-sonnet-4-5\"\nmax_tokens = 1024\nstream = true\n"
    );
    if let Some(limits) = limits {
        let _ = writeln!(toml, "limits = {limits}");
    }
    toml.push_str("[review]\nagent = \"off\"\n[defaults]\nagent = \"mock\"\ntimeout = \"30m\"\n");
    for d in 0..n {
        let _ = writeln!(
            toml,
            "[[task]]\nid = \"t{d:04}\"\nprompt = \"Look at d{d:04}\"\nowns = [\"/d{d:04}/\"]"
        );
    }
    toml
}

/// What one run took.
struct Timed {
    state: RunState,
    prepare: f64,
    execute: f64,
    /// From the start of `execute` to the last task reaching `running`.
    all_running: Option<f64>,
    /// From the start of `execute` to the last task reaching an end state.
    all_final: Option<f64>,
    events: usize,
}

impl Timed {
    fn wall(&self) -> f64 {
        self.prepare + self.execute
    }

    fn count(&self, state: TaskState) -> usize {
        self.state.tasks.iter().filter(|t| t.state == state).count()
    }

    fn retries(&self) -> u64 {
        let usage = self.state.tasks.iter().filter_map(|t| t.usage.as_ref());
        usage.map(|u| u.retries).sum()
    }

    fn first_error(&self) -> Option<String> {
        self.state.tasks.iter().find_map(|t| t.error.clone())
    }
}

/// `--groups N`, for every run of the benchmark.
static GROUPS: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();

fn run(repo: &Path, toml: &str, jobs: usize) -> Result<Timed> {
    let plan_path = repo.parent().context("repo parent")?.join("plait.toml");
    std::fs::write(&plan_path, toml)?;
    let git_repo = plait_core::git::open(repo)?;
    let parsed = plait_plan::parse(toml, &plan_path)?;
    let env = |name: &str| (name == KEY_ENV).then(|| KEY.to_string());
    let resolved = plait_plan::resolve_with_env(&git_repo, parsed, &plan_path, &env)?;
    let settings = RunSettings {
        context: plait_stages::context::Context::from_repo(
            git_repo,
            repo,
            plait_stages::context::process_env(),
            std::env::current_exe()?,
        ),
        store: None,
        remote: None,
        plan: Arc::new(resolved),
        plan_path,
        plan_text: toml.to_string(),
        jobs,
        worktree_root: None,
        max_cost: None,
        groups: GROUPS.get().copied().flatten(),
    };
    let started = Instant::now();
    let prepared = orchestrator::prepare(settings)?;
    let prepare = started.elapsed().as_secs_f64();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<orchestrator::Update>();
    let seen = Arc::new(Mutex::new((0usize, None::<f64>, None::<f64>)));
    let started = Instant::now();
    let tasks = prepared_task_count(toml);
    let (state, execute) = runtime.block_on(async {
        let seen2 = seen.clone();
        let listener = tokio::spawn(async move {
            let (mut running, mut done) = (0usize, 0usize);
            while let Some(update) = rx.recv().await {
                let orchestrator::Update::Task(event) = update else {
                    continue;
                };
                let at = started.elapsed().as_secs_f64();
                let mut seen = seen2.lock().unwrap();
                seen.0 += 1;
                if event.state == TaskState::Running {
                    running += 1;
                    if running == tasks {
                        seen.1 = Some(at);
                    }
                }
                if event.state.is_final() {
                    done += 1;
                    if done == tasks {
                        seen.2 = Some(at);
                    }
                }
            }
        });
        let state =
            orchestrator::execute(prepared, Some(tx), plait_core::cancel::Cancel::new().1).await;
        let execute = started.elapsed().as_secs_f64();
        let _ = listener.await;
        (state, execute)
    });
    let state = state?;
    let (events, all_running, all_final) = *seen.lock().unwrap();
    Ok(Timed {
        state,
        prepare,
        execute,
        all_running,
        all_final,
        events,
    })
}

fn prepared_task_count(toml: &str) -> usize {
    toml.matches("[[task]]").count()
}

fn status_kb(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn secs(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else {
        format!("{s:.2} s")
    }
}

fn opt_secs(s: Option<f64>) -> String {
    s.map(secs).unwrap_or_else(|| "-".into())
}

fn stage(msg: &str) {
    eprintln!("[bench] {msg}");
}

#[derive(Default)]
struct Summary {
    rows: Vec<(String, String)>,
}

impl Summary {
    fn row(&mut self, label: impl Into<String>, value: impl Into<String>) {
        let (label, value) = (label.into(), value.into());
        eprintln!("[bench]   {label}: {value}");
        self.rows.push((label, value));
    }

    fn gap(&mut self) {
        self.rows.push((String::new(), String::new()));
    }

    fn print(&self) {
        let width = self.rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
        for (label, value) in &self.rows {
            if label.is_empty() {
                println!();
            } else {
                println!("  {label:<width$}  {value}");
            }
        }
    }
}

fn mock(latency: Duration) -> MockModel {
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.keep_bodies(false);
    mock.set_latency(latency);
    mock
}

fn outcome(t: &Timed) -> String {
    let n = t.state.tasks.len();
    let mut text = format!(
        "{}/{n} done, {} failed",
        t.count(TaskState::Done),
        t.count(TaskState::Failed)
    );
    if let Some(e) = t.first_error() {
        let _ = write!(text, " (first error: {e})");
    }
    text
}

/// How many requests the server answered 429, against the target.
fn refusals(s: &LoadStats) -> String {
    let total = s.ok + s.limited + s.faults;
    format!(
        "{} of {total} requests = {:.1}% (target < 5%); {}",
        s.limited,
        s.limited as f64 * 100.0 / total.max(1) as f64,
        load_line(s)
    )
}

fn load_line(s: &LoadStats) -> String {
    format!(
        "200: {}, 429: {} ({} for the rate), faults: {}, peak in flight: {}",
        s.ok, s.limited, s.limited_rpm, s.faults, s.peak_in_flight
    )
}

/// (1): N one-turn tasks, latency 0 then 1 s.
fn latency(root: &Path, n: usize, sum: &mut Summary) -> Result<Timed> {
    let limits = format!("{{ concurrency = {n} }}");
    stage(&format!("{n} tasks, latency 0"));
    let zero = {
        let mock = mock(Duration::ZERO);
        let repo = make_repo(root, &format!("lat0-{n}"), n)?;
        let t = run(&repo, &plan(&mock.url(), n, Some(&limits)), n)?;
        assert!(mock.problems().is_empty(), "{:?}", mock.problems());
        t
    };
    stage(&format!("{n} tasks, latency 1 s"));
    let mock = mock(Duration::from_secs(1));
    let repo = make_repo(root, &format!("lat1-{n}"), n)?;
    let one = run(&repo, &plan(&mock.url(), n, Some(&limits)), n)?;
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
    let stats = mock.load_stats();
    sum.row(
        format!("{n} tasks, latency 0: wall (prepare + execute)"),
        format!(
            "{} ({} + {}); all running at {}, all ended at {}; {}",
            secs(zero.wall()),
            secs(zero.prepare),
            secs(zero.execute),
            opt_secs(zero.all_running),
            opt_secs(zero.all_final),
            outcome(&zero)
        ),
    );
    sum.row(
        format!("{n} tasks, latency 1 s: wall (prepare + execute)"),
        format!(
            "{} ({} + {}); all running at {}, all ended at {}; {}",
            secs(one.wall()),
            secs(one.prepare),
            secs(one.execute),
            opt_secs(one.all_running),
            opt_secs(one.all_final),
            outcome(&one)
        ),
    );
    sum.row(format!("{n} tasks, latency 1 s: mock"), load_line(&stats));
    let ratio = one.wall() / (1.0 + zero.wall());
    sum.row(
        format!("{n} tasks: wall / (1 s + wall at latency 0)"),
        format!(
            "{ratio:.2}x (target 1.1x: {})",
            if ratio <= 1.1 { "met" } else { "missed" }
        ),
    );
    let over = one.wall() - 1.0;
    sum.row(
        format!("{n} tasks: overhead over the 1 s latency"),
        format!(
            "{} (target ≤ 1.5 s: {}); of it, the latency-0 run's own time {}, the rest {}",
            secs(over),
            if over <= 1.5 { "met" } else { "missed" },
            secs(zero.wall()),
            secs(one.wall() - 1.0 - zero.wall())
        ),
    );
    sum.row(
        format!("{n} tasks: wall per task at latency 0"),
        format!(
            "{:.2} ms; {} progress events",
            zero.wall() * 1000.0 / n as f64,
            zero.events
        ),
    );
    Ok(one)
}

/// (2): the server's limits, 200 tasks of several requests each.
fn limits(root: &Path, cfg: &Config, plait_limits: Option<&str>, sum: &mut Summary) -> Result<()> {
    let n = cfg.limit_tasks;
    let label = match plait_limits {
        Some(l) => format!("limits = {l}"),
        None => "default limits".to_string(),
    };
    stage(&format!(
        "{n} tasks × {} requests, server 60 / 600 rpm, plait {label}",
        cfg.turns
    ));
    let mock = mock(Duration::from_secs(1));
    mock.set_limits(60, 600, 1);
    for d in 0..n {
        mock.script(&format!("t{d:04}"), vec![Turn::PauseTurn; cfg.turns - 1]);
    }
    let repo = make_repo(root, &format!("limits-{}", plait_limits.is_some()), n)?;
    let t = run(&repo, &plan(&mock.url(), n, plait_limits), n)?;
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
    let s = mock.load_stats();
    let minutes = t.execute / 60.0;
    let rpm = s.ok as f64 / minutes;
    // The least time the server's buckets allow for `ok` requests of 1 s each: 60 in
    // flight, and beyond the full bucket's 600 only 10 a second; then the last latency.
    // And no task is done before its own requests, one after another.
    let ok = s.ok as f64;
    let least = (((ok - 600.0).max(0.0) / 10.0).max(ok / 60.0) + 1.0).max(cfg.turns as f64);
    let allowed = s.ok as f64 / least * 60.0;
    sum.row(
        format!("plait {label}: tasks"),
        format!("{}; retries {}", outcome(&t), t.retries()),
    );
    sum.row(
        format!("plait {label}: execute"),
        format!(
            "{} (setup: all running at {}); the server's rule allows {} requests in {}",
            secs(t.execute),
            opt_secs(t.all_running),
            s.ok,
            secs(least)
        ),
    );
    sum.row(
        format!("plait {label}: throughput"),
        format!(
            "{rpm:.0} requests/min answered 200 = {:.0}% of 600/min; {:.0}% of the {allowed:.0}/min \
             the buckets allow for this workload",
            rpm / 6.0,
            rpm / allowed * 100.0
        ),
    );
    sum.row(format!("plait {label}: 429s"), refusals(&s));
    Ok(())
}

/// (5): one agent of `turns` turns, each viewing an 8 KB file, against a mock that caches
/// prompts as the Anthropic API does, with and without conversation caching.
fn caching(root: &Path, turns: usize, sum: &mut Summary) -> Result<()> {
    let mut figures = Vec::new();
    for history in [false, true] {
        stage(&format!(
            "one agent, {turns} turns, cache_history = {history}"
        ));
        let mock = mock(Duration::ZERO);
        mock.set_caching(true);
        let mut script: Vec<Turn> = (1..turns)
            .map(|_| Turn::Tools(vec![mock::edit::view("d0000/f.txt")]))
            .collect();
        script.push(Turn::Text("done".into()));
        mock.script("t0000", script);
        let repo = make_repo(root, &format!("caching-{history}"), 1)?;
        std::fs::write(
            repo.join("d0000/f.txt"),
            "a line of the file the agent reads again and again
"
            .repeat(160),
        )?;
        git(&repo, &["commit", "-q", "-am", "a larger file"])?;
        let toml = plan(&mock.url(), 1, None).replace(
            "stream = true
",
            &format!(
                "stream = true
cache_history = {history}
"
            ),
        );
        let t = run(&repo, &toml, 1)?;
        assert!(mock.problems().is_empty(), "{:?}", mock.problems());
        let u = t.state.tasks[0].usage.clone().unwrap_or_default();
        let all = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
        let cost = u.cost_usd.unwrap_or(0.0);
        sum.row(
            format!("{turns} turns, cache_history = {history}"),
            format!(
                "{}; input {} tokens: {} uncached, {} written to the cache, {} read from it \
                 ({:.0}%); cost ${cost:.4}, the cache saved ${:.4}",
                outcome(&t),
                all,
                u.input_tokens,
                u.cache_creation_input_tokens,
                u.cache_read_input_tokens,
                u.cache_read_input_tokens as f64 * 100.0 / all.max(1) as f64,
                u.cache_saved_usd
            ),
        );
        figures.push(cost);
    }
    if let [without, with] = figures[..] {
        sum.row(
            format!("{turns} turns: conversation caching"),
            format!(
                "costs {:.0}% of the run without it (goal: at most 50%)",
                with * 100.0 / without.max(f64::MIN_POSITIVE)
            ),
        );
    }
    Ok(())
}

/// (6): an input-token-bound run: 40 tasks of two requests, the second carrying a 20 KB
/// file, against a server of 60 in flight, 600 requests and `ITPM` input tokens a minute,
/// with prompt caching; plait learns the limits from the headers.
fn input_bound(root: &Path, sum: &mut Summary) -> Result<()> {
    const TASKS: usize = 40;
    const ITPM: usize = 150_000;
    stage(&format!(
        "{TASKS} tasks × 2 requests with a 20 KB file, server {ITPM} input tokens a minute"
    ));
    let mock = mock(Duration::from_secs(1));
    mock.set_limits(60, 600, 1);
    mock.set_input_limit(ITPM);
    mock.set_caching(true);
    let repo = make_repo(root, "input-bound", TASKS)?;
    for d in 0..TASKS {
        std::fs::write(
            repo.join(format!("d{d:04}/f.txt")),
            format!(
                "task {d}: a line of a file large enough to bind the input limit
"
            )
            .repeat(300),
        )?;
        mock.script(
            &format!("t{d:04}"),
            vec![
                Turn::Tools(vec![mock::edit::view(&format!("d{d:04}/f.txt"))]),
                Turn::Text("done".into()),
            ],
        );
    }
    git(&repo, &["commit", "-q", "-am", "larger files"])?;
    let t = run(&repo, &plan(&mock.url(), TASKS, None), TASKS)?;
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
    let s = mock.load_stats();
    // The floor: the full bucket, then the rest at ITPM / 60 a second, then a latency.
    let input = s.input_tokens as f64;
    let least = ((input - ITPM as f64).max(0.0) / (ITPM as f64 / 60.0)).max(2.0) + 1.0;
    sum.row(
        "input-bound: tasks".to_string(),
        format!("{}; retries {}", outcome(&t), t.retries()),
    );
    sum.row(
        "input-bound: execute".to_string(),
        format!(
            "{} for {} input tokens; the server's buckets allow it in {} = {:.0}% of the limit used",
            secs(t.execute),
            s.input_tokens,
            secs(least),
            least / t.execute * 100.0
        ),
    );
    sum.row("input-bound: 429s".to_string(), refusals(&s));
    Ok(())
}

/// (3): faults.
fn faults(root: &Path, n: usize, sum: &mut Summary) -> Result<()> {
    stage(&format!(
        "{n} tasks, faults 20% 529 / 5% 500 / 5% mid-stream"
    ));
    let mock = mock(Duration::from_millis(200));
    mock.set_faults(0.20, 0.05, 0.05, 7);
    let repo = make_repo(root, "faults", n)?;
    let t = run(&repo, &plan(&mock.url(), n, None), n)?;
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
    let s = mock.load_stats();
    sum.row("faults: tasks", outcome(&t));
    sum.row(
        "faults: retries (sum of usage.retries)",
        format!(
            "{} (faults injected {}; {}); execute {}",
            t.retries(),
            s.faults,
            load_line(&s),
            secs(t.execute)
        ),
    );
    Ok(())
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let _ = GROUPS.set(cfg.groups);
    let dir = tempfile::Builder::new().prefix("plait-models-").tempdir()?;
    let root = dir.path().to_path_buf();
    isolate_git(&root.join("no-config"))?;
    println!("plait model-agent benchmark (Anthropic, streaming, mock server)");
    println!("temporary directory: {}", root.display());
    let mut sum = Summary::default();

    let mut largest = None;
    for &n in &cfg.sizes {
        largest = Some(latency(&root, n, &mut sum)?);
        sum.gap();
    }
    if let Some(t) = &largest {
        let n = t.state.tasks.len();
        sum.row(
            format!("memory after the {n}-task runs"),
            format!(
                "VmHWM (peak RSS) {} MB, VmRSS now {} MB (mock server in-process, bodies not kept)",
                status_kb("VmHWM:") / 1024,
                status_kb("VmRSS:") / 1024
            ),
        );
        let repo = git2::Repository::open(root.join(format!("lat1-{n}/repo")))?;
        let store = Store::new(plait_core::git::plait_dir(&repo));
        let bytes = serde_json::to_vec_pretty(&t.state)?.len();
        let mut times = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            store.save(&t.state)?;
            times.push(started.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let save = times[times.len() / 2];
        sum.row(
            format!("state.json of {n} tasks"),
            format!(
                "{} KB ({} bytes per task); one save {} (median of 5); {} progress events in \
                 the run, each marks the state dirty (saves coalesce)",
                bytes / 1024,
                bytes / n,
                secs(save),
                t.events
            ),
        );
        sum.row(
            format!("{n} tasks: wall per task at latency 1 s"),
            format!("{:.2} ms", t.wall() * 1000.0 / n as f64),
        );
        sum.gap();
    }
    if cfg.skip_limits {
        sum.row("limits", "skipped (--quick / --no-limits)");
    } else {
        limits(&root, &cfg, None, &mut sum)?;
        limits(
            &root,
            &cfg,
            Some("{ concurrency = 60, rpm = 600 }"),
            &mut sum,
        )?;
    }
    sum.gap();
    if !cfg.skip_limits {
        input_bound(&root, &mut sum)?;
        sum.gap();
    }
    caching(&root, 20, &mut sum)?;
    sum.gap();
    if cfg.fault_tasks > 0 {
        faults(&root, cfg.fault_tasks, &mut sum)?;
    }

    println!();
    println!("summary:");
    sum.print();
    if cfg.keep {
        println!("\nkept {}", dir.keep().display());
    }
    Ok(())
}
