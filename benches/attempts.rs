//! Best-of-N benchmark: what a task's attempts (`attempts = N`) cost a run, and how soon a
//! pick by checks takes the first attempt that passes and stops the others. Prints
//! figures, asserts nothing about time.
//!
//! 1. *the cost of an attempt*: `--tasks` (default 100) exec tasks, each owning one file of
//!    a generated repository and its agent appending to it, at `-j` (default 8), run once
//!    each against `--attempts` (default 3) attempts each (`[defaults] attempts`), with a
//!    task check (`true`) and without. The attempts are picked two ways: by checks (`[pick]
//!    by = "checks"`, the default: the first that passes becomes the task, and the others
//!    stop, or never start once it has), and by a command (`echo 1`), which waits for
//!    every attempt to end, so that each one runs whole. `--reps` (default 3) repetitions,
//!    the variants alternating within each, after a first run not counted (it makes the
//!    checks' base layer). Printed: the medians of the walls, their ratio, and what one
//!    attempt beyond a task's first costs, (wall(N × tasks) − wall(tasks)) / ((N − 1) ×
//!    tasks), against what a task costs, wall(tasks) / tasks. From the records: how the
//!    attempts ended (and how long after the pick those stopped while running ended), how
//!    many task checks ran and their median (they share the check pool, `[checks] jobs`,
//!    with the command's picks), the command's pick's time from the last attempt's end,
//!    and plait's own sums of the tasks' steps (`timings`; a task check's time there
//!    counts its wait for the pool).
//! 2. *a pick by checks*: `--picks` (default 10) tasks of three attempts each (`pick =
//!    "checks"` on the task), every attempt in a slot of its own at once: attempt 1 fails
//!    its check at once, attempt 2 sleeps 3 s then passes, attempt 3 sleeps 0.5 s then
//!    passes. From each task's record: the time from attempt 3's end to the pick and to the
//!    task's end (goal ≤ 100 ms), and whether attempt 2 was stopped and how long after the
//!    pick it ended; `--reps` runs after one not counted, their tasks pooled.
//!
//! `--quick` (10 tasks, 1 repetition, 3 picks), `--keep` keeps the directory. Run it
//! through `./bench --attempts`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::Value;

mod common;
use common::{dir_name, generate, isolate_git, median, secs, settle, stage};

struct Config {
    tasks: usize,
    attempts: usize,
    reps: usize,
    jobs: usize,
    picks: usize,
    keep: bool,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            tasks: 100,
            attempts: 3,
            reps: 3,
            jobs: 8,
            picks: 10,
            keep: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut number = |key: &str| -> Result<usize> {
                let text = args
                    .next()
                    .with_context(|| format!("{key} needs a value"))?;
                text.replace('_', "")
                    .parse()
                    .with_context(|| format!("{key} takes a number, not `{text}`"))
            };
            match arg.as_str() {
                "--tasks" => cfg.tasks = number("--tasks")?.max(1),
                "--attempts" => cfg.attempts = number("--attempts")?.clamp(2, 20),
                "--reps" => cfg.reps = number("--reps")?.max(1),
                "-j" | "--jobs" => cfg.jobs = number("--jobs")?.max(1),
                "--picks" => cfg.picks = number("--picks")?.max(1),
                "--quick" => (cfg.tasks, cfg.reps, cfg.picks) = (10, 1, 3),
                "--keep" => cfg.keep = true,
                "--bench" => {}
                other => bail!(
                    "unknown argument `{other}` (--tasks N, --attempts N, --reps N, -j N, \
                     --picks N, --quick, --keep)"
                ),
            }
        }
        Ok(cfg)
    }
}

/// A finished `plait run`: its wall time and record (`plait status --json`).
struct Run {
    wall: f64,
    state: Value,
}

impl Run {
    fn tasks(&self) -> impl Iterator<Item = &Value> {
        self.state["tasks"].as_array().into_iter().flatten()
    }

    fn attempts(&self) -> impl Iterator<Item = &Value> {
        self.tasks()
            .flat_map(|t| t["attempts"].as_array().into_iter().flatten())
    }
}

/// `plait run` of `plan` in `repo`, `jobs` slots at a time, to its end; an error unless
/// every task ended done.
fn plait_run(repo: &Path, plan: &Path, jobs: usize) -> Result<Run> {
    let bin = env!("CARGO_BIN_EXE_plait");
    settle();
    let start = Instant::now();
    let out = Command::new(bin)
        .args(["run", &plan.display().to_string(), "-j", &jobs.to_string()])
        .current_dir(repo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()?;
    let wall = start.elapsed().as_secs_f64();
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if id.is_empty() || id.contains(char::is_whitespace) {
        bail!("plait run failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let status = Command::new(bin)
        .args(["status", &id, "--json"])
        .current_dir(repo)
        .output()?;
    let state = serde_json::from_slice(&status.stdout).context("plait status --json")?;
    let run = Run { wall, state };
    if let Some(t) = run.tasks().find(|t| t["state"] != "done") {
        bail!(
            "run {id}: task {} ended {} ({})",
            t["id"],
            t["state"],
            t["error"]
        );
    }
    Ok(run)
}

/// How the attempts of part 1 are picked.
#[derive(Clone, Copy)]
enum Pick {
    /// One attempt a task: no pick.
    None,
    /// `[pick] by = "checks"`.
    Checks,
    /// `[pick] by = { command = "echo 1" }`: every attempt runs to its end.
    Command,
}

/// Part 1's plan: `tasks` exec tasks, task `k` owning `d<k>/f000.txt` and appending its id
/// to it; `attempts` each when picked, and `[checks] task = ["true"]` with `checks`.
fn cost_plan(tasks: usize, attempts: usize, checks: bool, pick: Pick) -> String {
    let mut toml = String::from("goal = \"attempts\"\n[review]\nagent = \"off\"\n");
    if checks {
        toml.push_str("[checks]\ntask = [\"true\"]\n");
    }
    match pick {
        Pick::None => {}
        Pick::Checks => toml.push_str("[pick]\nby = \"checks\"\n"),
        Pick::Command => toml.push_str("[pick]\nby = { command = \"echo 1\" }\n"),
    }
    if !matches!(pick, Pick::None) {
        let _ = writeln!(toml, "[defaults]\nattempts = {attempts}");
    }
    for k in 0..tasks {
        let _ = write!(
            toml,
            "[[task]]\nid = \"t{k:03}\"\nprompt = \"p\"\nowns = [\"/{d}/f000.txt\"]\n\
             agent = {{ exec = \"echo $PLAIT_TASK >> {d}/f000.txt\" }}\n",
            d = dir_name(k)
        );
    }
    toml
}

fn ms(s: f64) -> String {
    format!("{:.0} ms", s * 1000.0)
}

/// Milliseconds from `from` to `to` (both ms since the epoch), negative when `to` is first.
fn gap_ms(from: &Value, to: &Value) -> Option<f64> {
    Some(to.as_u64()? as f64 - from.as_u64()? as f64)
}

/// Milliseconds from each task's pick to the end of each of its attempts stopped while
/// running.
fn stopped_after_pick(run: &Run) -> Vec<f64> {
    run.tasks()
        .flat_map(|t| {
            let at = &t["pick"]["at"];
            t["attempts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| {
                    a["state"] == "stopped"
                        && !a["error"]
                            .as_str()
                            .is_some_and(|e| e.starts_with("not started"))
                })
                .filter_map(move |a| gap_ms(at, &a["finished_at"]))
        })
        .collect()
}

/// How a run's attempts ended: done, failed, stopped while running, never started.
fn ends(run: &Run) -> String {
    let (mut done, mut failed, mut stopped, mut unstarted) = (0, 0, 0, 0);
    for a in run.attempts() {
        let never = a["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("not started"));
        match a["state"].as_str() {
            Some("done") => done += 1,
            Some("stopped") if never => unstarted += 1,
            Some("stopped") => stopped += 1,
            _ => failed += 1,
        }
    }
    format!("{done} done, {stopped} stopped running, {unstarted} never started, {failed} other")
}

/// How many task checks a run ran (each task's own, or its attempts') and their median
/// milliseconds.
fn checks(run: &Run) -> (usize, f64) {
    let ms: Vec<f64> = run
        .tasks()
        .flat_map(|t| match t["attempts"].as_array() {
            Some(attempts) => attempts.iter().collect(),
            None => vec![t],
        })
        .flat_map(|t| t["checks"].as_array().into_iter().flatten())
        .filter_map(|c| c["ms"].as_f64())
        .collect();
    (ms.len(), median(&ms))
}

/// plait's own sums of its tasks' steps (`timings`: worktree, agent, collect, checks), as
/// `step count× ms each`; an attempt counts as a task there.
fn steps(run: &Run) -> String {
    let steps: Vec<String> = run.state["timings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["task"] == true)
        .filter_map(|t| {
            let count = t["count"].as_f64()?.max(1.0);
            let each = t["ms"].as_f64()? / count;
            Some(format!("{} {count}× {each:.0} ms", t["step"].as_str()?))
        })
        .collect();
    steps.join(", ")
}

/// Milliseconds from each task's last attempt's end to its pick.
fn judging_ms(run: &Run) -> Vec<f64> {
    run.tasks()
        .filter_map(|t| {
            let last = t["attempts"]
                .as_array()?
                .iter()
                .filter_map(|a| a["finished_at"].as_u64())
                .max()?;
            Some(t["pick"]["at"].as_u64()? as f64 - last as f64)
        })
        .collect()
}

/// One variant of part 1, across the repetitions.
struct Variant {
    label: &'static str,
    checks: bool,
    pick: Pick,
    runs: Vec<Run>,
}

impl Variant {
    fn wall(&self) -> f64 {
        median(&self.runs.iter().map(|r| r.wall).collect::<Vec<_>>())
    }

    /// Each repetition's wall, in seconds.
    fn walls(&self) -> String {
        let walls: Vec<String> = self.runs.iter().map(|r| format!("{:.2}", r.wall)).collect();
        format!("{} s", walls.join(", "))
    }
}

/// The task checks of a variant's last repetition: how many ran, and their median.
fn checks_line(v: &Variant) -> String {
    let (count, ms) = v.runs.last().map_or((0, f64::NAN), checks);
    format!("its task checks (last repetition): {count} run, median {ms:.0} ms each")
}

/// Part 1: the tasks once each against their attempts, with a check and without.
fn cost(root: &Path, cfg: &Config) -> Result<()> {
    let repo = root.join("cost").join("repo");
    generate(&repo, cfg.tasks * 10, 10)?;
    let mut variants = Vec::new();
    for checks in [true, false] {
        for (label, pick) in [
            ("once", Pick::None),
            ("by checks", Pick::Checks),
            ("by command", Pick::Command),
        ] {
            variants.push(Variant {
                label,
                checks,
                pick,
                runs: Vec::new(),
            });
        }
    }
    for (i, v) in variants.iter().enumerate() {
        let n = if matches!(v.pick, Pick::None) {
            1
        } else {
            cfg.attempts
        };
        let plan = cost_plan(cfg.tasks, n, v.checks, v.pick);
        std::fs::write(root.join(format!("cost-{i}.toml")), plan)?;
    }
    // A run not counted: the first with checks makes the base layer every later one uses.
    stage("part 1: a first run, not counted (the checks' base layer)");
    plait_run(&repo, &root.join("cost-0.toml"), cfg.jobs)?;
    for rep in 0..cfg.reps {
        stage(&format!("part 1: repetition {} of {}", rep + 1, cfg.reps));
        // Alternating, and in the other order every other repetition.
        let mut order: Vec<usize> = (0..variants.len()).collect();
        if rep % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let plan = root.join(format!("cost-{i}.toml"));
            let run = plait_run(&repo, &plan, cfg.jobs)?;
            variants[i].runs.push(run);
        }
    }
    let (tasks, n) = (cfg.tasks as f64, cfg.attempts as f64);
    println!(
        "part 1: {} exec tasks once against {} attempts each, -j {}, median of {}",
        cfg.tasks, cfg.attempts, cfg.jobs, cfg.reps
    );
    for group in variants.chunks(3) {
        let [once, by_checks, by_command] = group else {
            continue;
        };
        let check = if once.checks {
            "with a task check (`true`)"
        } else {
            "without checks"
        };
        println!("  {check}:");
        let per_task = once.wall() / tasks;
        println!(
            "    {} tasks once: {} ({} a task; each repetition {})",
            cfg.tasks,
            secs(once.wall()),
            ms(per_task),
            once.walls()
        );
        if let Some(last) = once.runs.last() {
            println!("      plait's steps (last repetition): {}", steps(last));
        }
        if once.checks {
            println!("      {}", checks_line(once));
        }
        for v in [by_checks, by_command] {
            let extra = (v.wall() - once.wall()) / ((n - 1.0) * tasks);
            println!(
                "    {} attempts, {}: {} (× {:.2}); an attempt beyond the first {} against a \
                 task's {} (goal: no more)",
                cfg.tasks * cfg.attempts,
                v.label,
                secs(v.wall()),
                v.wall() / once.wall(),
                ms(extra),
                ms(per_task)
            );
            println!("      each repetition: {}", v.walls());
            if let Some(last) = v.runs.last() {
                println!("      its attempts (last repetition): {}", ends(last));
                println!("      plait's steps (last repetition): {}", steps(last));
            }
            let after: Vec<f64> = v.runs.iter().flat_map(stopped_after_pick).collect();
            if !after.is_empty() {
                println!(
                    "      an attempt stopped while running ended after its task's pick: \
                     median {:.0} ms, max {:.0} ms (of {})",
                    median(&after),
                    after.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    after.len()
                );
            }
            if v.checks {
                println!("      {}", checks_line(v));
            }
        }
        let judging: Vec<f64> = by_command.runs.iter().flat_map(judging_ms).collect();
        println!(
            "    the command's pick, from the last attempt's end: median {:.0} ms, max {:.0} ms",
            median(&judging),
            judging.iter().copied().fold(0.0, f64::max)
        );
    }
    Ok(())
}

/// Part 2's plan: `tasks` tasks of three attempts picked by checks, the task check failing
/// on a file that says `BAD`: attempt 1 writes it, attempts 2 and 3 sleep 3 s and 0.5 s
/// and write `ok`.
fn pick_plan(tasks: usize) -> String {
    let mut toml = String::from(
        "goal = \"pick\"\n[review]\nagent = \"off\"\n[checks]\ntask = [\"! grep -rq BAD d*\"]\n",
    );
    for k in 0..tasks {
        let f = format!("{}/f000.txt", dir_name(k));
        let _ = write!(
            toml,
            "[[task]]\nid = \"p{k:03}\"\nprompt = \"p\"\nowns = [\"/{f}\"]\nattempts = 3\n\
             pick = \"checks\"\nagent = {{ exec = \"case $PLAIT_ATTEMPT in \
             1) echo BAD >> {f};; 2) sleep 3; echo ok >> {f};; *) sleep 0.5; echo ok >> {f};; \
             esac\" }}\n"
        );
    }
    toml
}

/// One task's figures in part 2, in milliseconds.
#[derive(Default)]
struct Picked {
    to_pick: f64,
    to_end: f64,
    /// Attempt 2's end after the pick, when it was stopped while running.
    stopped_after: Option<f64>,
    /// Attempt 2's end: `stopped` (running or not yet started) or otherwise.
    slow_state: String,
    chosen: u64,
}

fn picked(task: &Value) -> Result<Picked> {
    let pick = &task["pick"];
    let chosen = pick["attempt"].as_u64().context("no pick")?;
    let attempts = task["attempts"].as_array().context("no attempts")?;
    let winner = &attempts[chosen as usize - 1];
    let slow = &attempts[1];
    let never = slow["error"]
        .as_str()
        .is_some_and(|e| e.starts_with("not started"));
    let slow_state = match slow["state"].as_str() {
        Some("stopped") if never => "never started".to_string(),
        Some(s) => s.to_string(),
        None => "?".to_string(),
    };
    Ok(Picked {
        to_pick: gap_ms(&winner["finished_at"], &pick["at"]).context("no times")?,
        to_end: gap_ms(&winner["finished_at"], &task["finished_at"]).context("no end")?,
        stopped_after: (slow_state == "stopped")
            .then(|| gap_ms(&pick["at"], &slow["finished_at"]))
            .flatten(),
        slow_state,
        chosen,
    })
}

fn spread(label: &str, values: &[f64]) {
    println!(
        "  {label}: median {:.0} ms, max {:.0} ms (of {})",
        median(values),
        values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        values.len()
    );
}

/// Part 2: picks by checks among attempts of different lengths.
fn pick_by_checks(root: &Path, cfg: &Config) -> Result<()> {
    let repo = root.join("pick").join("repo");
    generate(&repo, cfg.picks * 10, 10)?;
    let plan = root.join("pick.toml");
    std::fs::write(&plan, pick_plan(cfg.picks))?;
    let jobs = cfg.picks * 3;
    let mut all = Vec::new();
    let mut walls = Vec::new();
    stage("part 2: a first run, not counted (the checks' base layer)");
    plait_run(&repo, &plan, jobs)?;
    for rep in 0..cfg.reps {
        stage(&format!("part 2: repetition {} of {}", rep + 1, cfg.reps));
        let run = plait_run(&repo, &plan, jobs)?;
        walls.push(run.wall);
        for task in run.tasks() {
            all.push(picked(task)?);
        }
    }
    println!(
        "part 2: {} tasks of 3 attempts picked by checks (1 fails its check, 2 sleeps 3 s, 3 \
         sleeps 0.5 s), -j {jobs}, {} run(s)",
        cfg.picks, cfg.reps
    );
    println!("  whole run: median {}", secs(median(&walls)));
    let third = all.iter().filter(|p| p.chosen == 3).count();
    println!("  attempt 3 chosen in {third} of {}", all.len());
    let of = |f: fn(&Picked) -> f64| all.iter().map(f).collect::<Vec<_>>();
    spread(
        "from the chosen attempt's end to the pick",
        &of(|p| p.to_pick),
    );
    spread(
        "from the chosen attempt's end to the task's end (goal ≤ 100 ms)",
        &of(|p| p.to_end),
    );
    let mut states: Vec<(String, usize)> = Vec::new();
    for p in &all {
        match states.iter_mut().find(|(s, _)| *s == p.slow_state) {
            Some((_, n)) => *n += 1,
            None => states.push((p.slow_state.clone(), 1)),
        }
    }
    let states: Vec<String> = states.iter().map(|(s, n)| format!("{n} {s}")).collect();
    println!("  attempt 2 (3 s): {}", states.join(", "));
    let after: Vec<f64> = all.iter().filter_map(|p| p.stopped_after).collect();
    if !after.is_empty() {
        spread("attempt 2's end after the pick, when stopped", &after);
    }
    Ok(())
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let root = tempfile::Builder::new()
        .prefix("plait-bench-attempts")
        .tempdir()?;
    let empty = root.path().join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    std::env::set_var("XDG_CACHE_HOME", root.path().join("cache"));

    cost(root.path(), &cfg)?;
    pick_by_checks(root.path(), &cfg)?;

    if cfg.keep {
        let kept = root.keep();
        println!("kept {}", kept.display());
    }
    Ok(())
}
