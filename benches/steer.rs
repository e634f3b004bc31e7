//! Steering benchmark: how soon `plait tell` reaches a running model agent. A real `plait
//! run` (the binary) of one model agent against the integration tests' mock model server
//! (Anthropic, streaming), each answer taking `--latency` ms (default 400), the agent
//! viewing its file turn after turn; while a turn's answer is awaited, `plait tell` sends a
//! message, `--tells` times (default 10). Prints, for each tell, the command's own time
//! (from its start to the run's answer), and whether the message was in the very next
//! request the agent sent (the goal: its next turn), with how long after the tell that
//! request went out and how long after the answer it was waiting for arrived. Asserts
//! nothing about time. Run through `./bench --steer`.

#[allow(dead_code)]
#[path = "../tests/it/mock/mod.rs"]
mod mock;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use mock::{edit, MockModel, Provider, Turn};

const KEY: &str = "sk-bench-steer-0123456789";
const KEY_ENV: &str = "PLAIT_BENCH_STEER_KEY";

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

fn main() -> Result<()> {
    let mut tells = 10usize;
    let mut latency = 400u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tells" => tells = args.next().context("--tells N")?.parse()?,
            "--latency" => latency = args.next().context("--latency MS")?.parse()?,
            "--quick" => tells = 3,
            "--bench" => {}
            other => bail!("unknown argument {other}"),
        }
    }
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
