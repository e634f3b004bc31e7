//! Steering benchmark: how soon `plait tell` reaches a running agent, a model agent and
//! the real Claude Code, against its next turn (issue 48's goal: the next turn, ≤ 100 ms
//! beyond it). Asserts nothing about time. Run through `./bench --steer`.
//!
//! The model part: a real `plait run` (the binary) of one model agent against the
//! integration tests' mock model server (Anthropic, streaming), each answer taking
//! `--latency` ms (default 400), the agent viewing its file turn after turn; while a turn's
//! answer is awaited, `plait tell` sends a message, `--tells` times (default 10). Prints, for
//! each tell, the command's own time (from its start to the run's answer), and whether the
//! message was in the very next request the agent sent (the goal: its next turn), with how
//! long after the tell that request went out and how long after the answer it was waiting
//! for arrived.
//!
//! The Claude Code part: the same for the real Claude Code CLI (`PLAIT_TEST_CLAUDE`, the copy
//! `.ci/run` installs under `target/ci-tools`, or `claude` on PATH, as the integration tests
//! find it; skipped, saying why, without one), one `plait run` whose Claude Code (run with
//! `--input-format stream-json`, a told message written into its live session as a user
//! message) reads its file turn after turn against the mock (`start_claude_code`), each
//! answer taking `--latency` ms; `--claude-tells` tells (default 5), each `--latency`/4 ms
//! after the request awaited arrived at the mock. A thread notes when each of the task's
//! requests is answered; a request went out its answer less the latency. Prints a row a tell
//! (where the tell fell, the command's time, whether the very next request sent after the
//! tell held the message and, if not, which one did, and that request's sending after the
//! tell and after the answer before it arrived), then medians, and for comparison the
//! same gap in its turns that no message was added to.
//!
//! Flags: `--tells N`, `--claude-tells N`, `--latency MS`, `--part model|claude|both`
//! (default both), `--quick` (3 tells and 2 to Claude Code).

#[allow(dead_code)]
#[path = "../tests/it/mock/mod.rs"]
mod mock;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use mock::{claude_tools, edit, MockModel, Provider, Recorded, Turn};

const KEY: &str = "sk-bench-steer-0123456789";
const KEY_ENV: &str = "PLAIT_BENCH_STEER_KEY";

/// Which parts to run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Both,
    Model,
    Claude,
}

struct Config {
    tells: usize,
    claude_tells: usize,
    latency: u64,
    part: Part,
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("git").args(args).current_dir(dir).output()?;
    if !out.status.success() {
        bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

fn plait(dir: &Path, args: &[&str]) -> Result<std::process::Output> {
    Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .context("plait")
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn parse() -> Result<Config> {
    let mut cfg = Config {
        tells: 10,
        claude_tells: 5,
        latency: 400,
        part: Part::Both,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tells" => cfg.tells = args.next().context("--tells N")?.parse()?,
            "--claude-tells" => {
                cfg.claude_tells = args.next().context("--claude-tells N")?.parse()?
            }
            "--latency" => cfg.latency = args.next().context("--latency MS")?.parse()?,
            "--part" => {
                cfg.part = match args.next().as_deref() {
                    Some("model") => Part::Model,
                    Some("claude") => Part::Claude,
                    Some("both") => Part::Both,
                    _ => bail!("--part model|claude|both"),
                }
            }
            "--quick" => (cfg.tells, cfg.claude_tells) = (3, 2),
            "--bench" => {}
            other => bail!("unknown argument {other}"),
        }
    }
    Ok(cfg)
}

fn main() -> Result<()> {
    let cfg = parse()?;
    if cfg.part != Part::Claude {
        model_part(cfg.tells, cfg.latency)?;
    }
    if cfg.part != Part::Model {
        claude_part(&cfg)?;
    }
    Ok(())
}

fn model_part(tells: usize, latency: u64) -> Result<()> {
    let root = tempfile::tempdir()?;
    let repo: PathBuf = root.path().join("repo");
    std::fs::create_dir_all(&repo)?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    std::fs::write(repo.join("a.txt"), "one\n")?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "base"])?;

    let mock = MockModel::start(Provider::Anthropic, KEY);
    // Enough turns for every tell, then done.
    let mut turns: Vec<Turn> = (0..tells * 4 + 4)
        .map(|_| Turn::Tools(vec![edit::view("a.txt")]))
        .collect();
    turns.push(Turn::Text("done".into()));
    mock.script("a", turns);
    mock.set_latency(Duration::from_millis(latency));
    let toml = format!(
        "[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_ENV}\"\nmodel = \"m\"\n\
         [review]\nagent = \"off\"\n[[task]]\nid = \"a\"\nprompt = \"look\"\nowns = [\"a.txt\"]\nagent = \"mock\"\nmax_turns = {}\n",
        mock.url(),
        tells * 4 + 10
    );
    let plan = root.path().join("plan.toml");
    std::fs::write(&plan, toml)?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan.to_str().unwrap()])
        .current_dir(&repo)
        .env(KEY_ENV, KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let requests = |mock: &MockModel| -> Vec<String> {
        mock.requests()
            .into_iter()
            .filter(|r| r.task.as_deref() == Some("a"))
            .map(|r| r.body.to_string())
            .collect()
    };
    let wait_for = |n: usize| -> Result<Instant> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while requests(&mock).len() < n {
            if Instant::now() > deadline {
                bail!("the agent sent no request {n}");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(Instant::now())
    };
    wait_for(1)?;
    let status = plait(&repo, &["status", "--json"])?;
    let status: serde_json::Value = serde_json::from_slice(&status.stdout)?;
    let run = status["id"].as_str().context("run id")?.to_string();
    let (mut command, mut after_tell, mut after_answer) = (Vec::new(), Vec::new(), Vec::new());
    let mut next = 0;
    // The mock records a request when it answers it (after `latency`): a request seen is
    // one answered.
    let lat = Duration::from_millis(latency);
    for i in 0..tells {
        let seen = requests(&mock).len();
        // Request `seen` answered: the agent sends the next one at once and waits for it.
        wait_for(seen + 1)?;
        std::thread::sleep(lat / 4);
        let text = format!("message number {i}");
        let told = Instant::now();
        let out = plait(&repo, &["tell", &run, "a", "-m", &text])?;
        let answered = told.elapsed().as_secs_f64() * 1000.0;
        if !out.status.success() {
            bail!("plait tell: {}", String::from_utf8_lossy(&out.stderr));
        }
        command.push(answered);
        // The request in flight when it was told, answered; then the first one sent after.
        let waited = wait_for(seen + 2)?;
        let next_answered = wait_for(seen + 3)?;
        let next_sent = next_answered - lat;
        if requests(&mock)[seen + 2].contains(&text) {
            next += 1;
        }
        after_tell.push(next_sent.saturating_duration_since(told).as_secs_f64() * 1000.0);
        after_answer.push(next_sent.saturating_duration_since(waited).as_secs_f64() * 1000.0);
    }
    let _ = child.wait();
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!(
        "steer: {tells} tells to a model agent whose answers take {latency} ms, each told {} ms into a turn's wait",
        latency / 4
    );
    println!("  (the mock notes a request as it answers it: a request's sending is its answer less {latency} ms, ±2 ms)");
    println!(
        "  plait tell, start to the run's answer: median {:.0} ms, max {:.0} ms",
        median(&mut command.clone()),
        max(&command)
    );
    println!("  in the agent's very next request (its next turn): {next} of {tells}");
    println!(
        "  that request went out after the tell: median {:.0} ms, max {:.0} ms (the rest of the turn in flight)",
        median(&mut after_tell.clone()),
        max(&after_tell)
    );
    println!(
        "  and after the answer before it arrived (the agent's turn, the message added; goal ≤ 100 ms): median {:.0} ms, max {:.0} ms",
        median(&mut after_answer.clone()),
        max(&after_answer)
    );
    if !mock.problems().is_empty() {
        println!("  the mock saw problems: {:?}", mock.problems());
    }
    Ok(())
}

/// The real Claude Code, as the integration tests find it; without one, why not.
fn real_claude() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("PLAIT_TEST_CLAUDE").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let local =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ci-tools/node_modules/.bin/claude");
    if local.exists() {
        return Ok(local);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("claude"))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| {
            "the Claude Code CLI is not installed (no PLAIT_TEST_CLAUDE, no target/ci-tools copy, \
             no `claude` on PATH)"
                .to_string()
        })
}

/// A turn's request of task `a` to the model (not a token count or a preflight).
fn turn_of_a(r: &Recorded) -> bool {
    r.task.as_deref() == Some("a") && r.method == "POST" && !r.path.ends_with("/count_tokens")
}

/// Notes when each of task `a`'s turn requests is answered (the mock records a request as
/// it answers it), until `stop`.
fn watch(mock: &MockModel, answered: &Mutex<Vec<Instant>>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let n = mock.count("a");
        let now = Instant::now();
        let mut seen = answered.lock().unwrap_or_else(|e| e.into_inner());
        while seen.len() < n {
            seen.push(now);
        }
        drop(seen);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Polls `done` every millisecond for up to a minute; the moment it held.
fn wait_until(what: &str, done: impl Fn() -> bool) -> Result<Instant> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        if Instant::now() > deadline {
            bail!("waited a minute for {what}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(Instant::now())
}

/// One tell to Claude Code, and when it was made.
struct Told {
    text: String,
    at: Instant,
    /// `plait tell`, from its start to the run's answer (ms).
    command: f64,
}

/// What became of one tell, read from the requests the run sent.
struct Heard {
    /// The very next request sent after the tell, among the task's.
    index: Option<usize>,
    /// The tell fell while the request before the next one was at the model.
    in_wait: bool,
    /// The message was in the very next request sent after the tell.
    next: bool,
    /// Which request after the tell first held it (1: the very next).
    first: Option<usize>,
    after_tell: f64,
    after_answer: f64,
}

fn claude_part(cfg: &Config) -> Result<()> {
    let claude = match real_claude() {
        Ok(claude) => claude,
        Err(why) => {
            println!("steer, Claude Code: skipped: {why}");
            return Ok(());
        }
    };
    let version = Command::new(&claude).arg("--version").output()?;
    let version = String::from_utf8_lossy(&version.stdout);
    let version = version.split_whitespace().next().unwrap_or("?").to_string();
    let lat = Duration::from_millis(cfg.latency);
    let root = tempfile::tempdir()?;
    let repo = root.path().join("repo");
    let home = root.path().join("home");
    std::fs::create_dir_all(&repo)?;
    std::fs::create_dir_all(&home)?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    std::fs::write(repo.join("a.txt"), "one\n")?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "base"])?;

    let mock = MockModel::start_claude_code(KEY);
    // Enough turns for every tell (each takes about two), then done.
    let reads = cfg.claude_tells * 3 + 4;
    let mut turns: Vec<Turn> = (0..reads)
        .map(|_| Turn::Tools(vec![claude_tools::read("a.txt")]))
        .collect();
    turns.push(Turn::Text("Done.".into()));
    mock.script("a", turns);
    mock.set_latency(lat);
    let toml = format!(
        "goal = \"Look\"\n[defaults]\ntimeout = \"600s\"\n[review]\nagent = \"off\"\n\
         [agents.claude-code]\nbin = \"{}\"\nprovider = \"mock\"\n\
         [providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_ENV}\"\nmodel = \"claude-sonnet-4-5\"\n\
         [[task]]\nid = \"a\"\nprompt = \"Look at a.txt\"\nowns = [\"a.txt\"]\nagent = \"claude-code\"\nmax_turns = {}\n",
        claude.display(),
        mock.url(),
        reads + 10
    );
    let plan = root.path().join("plan.toml");
    std::fs::write(&plan, toml)?;
    let log = root.path().join("run.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan.to_str().unwrap()])
        .current_dir(&repo)
        .env(KEY_ENV, KEY)
        .env("HOME", &home)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;

    let answered = Mutex::new(Vec::<Instant>::new());
    let stop = AtomicBool::new(false);
    let told = std::thread::scope(|s| {
        s.spawn(|| watch(&mock, &answered, &stop));
        let told = tell_claude(cfg, &repo, &mock, &answered);
        if told.is_err() {
            let _ = child.kill();
        }
        let _ = child.wait();
        // The last answers noted before the watch ends.
        std::thread::sleep(Duration::from_millis(20));
        stop.store(true, Ordering::Relaxed);
        told
    });
    let told = match told {
        Ok(told) => told,
        Err(e) => {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            bail!("{e:#}\nplait run said:\n{log}");
        }
    };
    let answered = answered.into_inner().unwrap_or_else(|e| e.into_inner());
    let bodies: Vec<String> = mock
        .requests()
        .iter()
        .filter(|r| turn_of_a(r))
        .map(|r| r.body.to_string())
        .collect();
    let heard: Vec<Heard> = told
        .iter()
        .map(|t| heard(t, &answered, &bodies, lat))
        .collect();
    print_claude(cfg, &version, &told, &heard, &answered, &bodies);
    let status = plait(&repo, &["status", "--json"])?;
    let status: serde_json::Value = serde_json::from_slice(&status.stdout)?;
    let task = status["tasks"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["id"] == "a"))
        .cloned()
        .unwrap_or_default();
    println!(
        "  the task ended {}, its tells heard {:?}",
        task["state"],
        task["told"]
            .as_array()
            .map(|t| t
                .iter()
                .map(|t| t["way"].as_str().unwrap_or("?"))
                .collect::<Vec<_>>())
            .unwrap_or_default()
    );
    if !mock.problems().is_empty() {
        println!("  the mock saw problems: {:?}", mock.problems());
    }
    Ok(())
}

/// Tells Claude Code `--claude-tells` times, each `--latency`/4 ms after the request it
/// awaits arrived at the mock, then lets the next request go out and be answered.
fn tell_claude(
    cfg: &Config,
    repo: &Path,
    mock: &MockModel,
    answered: &Mutex<Vec<Instant>>,
) -> Result<Vec<Told>> {
    let count = || answered.lock().map(|a| a.len()).unwrap_or(0);
    wait_until("Claude Code's first answer", || count() >= 1)?;
    let status = plait(repo, &["status", "--json"])?;
    let status: serde_json::Value = serde_json::from_slice(&status.stdout)?;
    let run = status["id"].as_str().context("run id")?.to_string();
    let mut told = Vec::new();
    for i in 0..cfg.claude_tells {
        let seen = count();
        let answer = wait_until("an answer", || count() > seen)?;
        // The next request at the mock (the answer's own reply has gone out by then).
        wait_until("a request in flight", || {
            answer.elapsed() >= Duration::from_millis(5) && mock.load_stats().in_flight >= 1
        })?;
        std::thread::sleep(Duration::from_millis(cfg.latency / 4));
        let text = format!("message number {i}");
        let at = Instant::now();
        let out = plait(repo, &["tell", &run, "a", "-m", &text])?;
        let command = at.elapsed().as_secs_f64() * 1000.0;
        if !out.status.success() {
            bail!("plait tell: {}", String::from_utf8_lossy(&out.stderr));
        }
        if i == 0 {
            let said = String::from_utf8_lossy(&out.stdout);
            println!(
                "steer, Claude Code: `plait tell` answered {:?}",
                said.trim()
            );
        }
        told.push(Told { text, at, command });
        // The request in flight answered, then the first one sent after it.
        wait_until("the next answers", || count() >= seen + 3)?;
    }
    Ok(told)
}

/// Finds the first request sent after the tell (its answer less the latency), whether it
/// held the message, and which did.
fn heard(told: &Told, answered: &[Instant], bodies: &[String], lat: Duration) -> Heard {
    let sent = |j: usize| answered[j].checked_sub(lat).unwrap_or(answered[j]);
    let n = answered.len().min(bodies.len());
    let next = (0..n).find(|&j| sent(j) > told.at);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    match next {
        Some(j) => Heard {
            index: Some(j),
            in_wait: j > 0 && sent(j - 1) <= told.at && told.at < answered[j - 1],
            next: bodies[j].contains(&told.text),
            first: (j..n)
                .find(|&k| bodies[k].contains(&told.text))
                .map(|k| k - j + 1),
            after_tell: ms(sent(j).saturating_duration_since(told.at)),
            after_answer: if j > 0 {
                ms(sent(j).saturating_duration_since(answered[j - 1]))
            } else {
                f64::NAN
            },
        },
        None => Heard {
            index: None,
            in_wait: false,
            next: false,
            first: None,
            after_tell: f64::NAN,
            after_answer: f64::NAN,
        },
    }
}

fn print_claude(
    cfg: &Config,
    version: &str,
    told: &[Told],
    heard: &[Heard],
    answered: &[Instant],
    bodies: &[String],
) {
    let lat = Duration::from_millis(cfg.latency);
    println!(
        "steer, Claude Code {version}: {} tells in one run whose answers take {} ms, each told {} ms after the awaited request reached the mock",
        told.len(),
        cfg.latency,
        cfg.latency / 4
    );
    println!(
        "  ({} turn requests, {} answers noted; a request's sending is its answer less {} ms, ±2 ms)",
        bodies.len(),
        answered.len(),
        cfg.latency
    );
    println!("   tell  fell            plait tell  next request  first held by  sent after tell  after the answer before");
    for (i, (t, h)) in told.iter().zip(heard).enumerate() {
        let fell = if h.in_wait {
            "in the wait"
        } else {
            "in its own turn"
        };
        let first = h
            .first
            .map_or("none".to_string(), |k| format!("request +{k}"));
        println!(
            "   {i:>4}  {fell:<15} {:>7.0} ms  {:<12}  {first:<13}  {:>12.0} ms  {:>20.0} ms",
            t.command,
            if h.next { "held it" } else { "did not" },
            h.after_tell,
            h.after_answer
        );
    }
    let next = heard.iter().filter(|h| h.next).count();
    let figures = |mut v: Vec<f64>| {
        let max = v.iter().copied().fold(0.0, f64::max);
        format!("median {:.0} ms, max {max:.0} ms", median(&mut v))
    };
    println!(
        "  plait tell, start to the run's answer: {}",
        figures(told.iter().map(|t| t.command).collect())
    );
    println!(
        "  in Claude Code's very next request (its next turn): {next} of {}",
        told.len()
    );
    println!(
        "  that request went out after the tell: {} (the rest of the turn in flight)",
        figures(heard.iter().map(|h| h.after_tell).collect())
    );
    println!(
        "  and after the answer before it arrived (its turn, the message added; goal ≤ 100 ms): {}",
        figures(heard.iter().map(|h| h.after_answer).collect())
    );
    // Its other turns, no message added: a request's sending after the answer before.
    let untold: Vec<f64> = (1..answered.len().min(bodies.len()))
        .filter(|&j| !heard.iter().any(|h| h.index == Some(j)))
        .map(|j| {
            let sent = answered[j].checked_sub(lat).unwrap_or(answered[j]);
            sent.saturating_duration_since(answered[j - 1])
                .as_secs_f64()
                * 1000.0
        })
        .collect();
    println!(
        "  its {} other turns, no message added, for comparison: {}",
        untold.len(),
        figures(untold)
    );
}
