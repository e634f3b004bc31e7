//! Lineage benchmark: what checkouts with a lineage cost a whole run against the shared
//! checkouts they replaced, and against cleaning every checkout before each use. Prints
//! figures, asserts nothing about time.
//!
//! A real crate with its own test suite (regex-syntax from the local cargo registry, or the
//! directory `--crate` names), one exec task per source file (each appends a comment), task
//! check `cargo check --offline`, merged check `cargo test --offline`, checks two at once.
//! Three runs, each in its own copy of the repository:
//! - *shared*: the plait of `--baseline REV` (default: the last commit with one shared
//!   pool of check checkouts), built once into `target/bench-baseline/`;
//! - *lineage*: this plait;
//! - *lineage-2*: this plait again in the lineage run's repository, its seed kept warm;
//! - *clean*: this plait removing the ignored build output (`target/`, what `git clean
//!   -ffdx` removes here) before every check command.
//!
//! Run it through `./bench --lineage [--crate DIR] [--baseline REV]`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Result};

mod common;
use common::krate::{self, cargo_home};
use common::{baseline, isolate_git, secs, stage};

/// The last commit whose checks shared one pool of checkouts.
const BASELINE: &str = "78adbf5";

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn plan(files: &[String], clean: bool) -> String {
    // What `git clean -ffdx` removes here: the ignored build output.
    let prefix = if clean { "rm -rf target && " } else { "" };
    let mut toml = format!(
        "goal = \"bench\"\n[checks]\ntask = [\"{prefix}cargo check --offline -q\"]\n\
         merged = [\"{prefix}cargo test --offline -q\"]\njobs = 2\ntimeout = \"30m\"\n\
         [review]\nagent = \"off\"\n[defaults]\nsandbox = {{ writable = [\"{}\"] }}\n",
        cargo_home().display()
    );
    for (k, file) in files.iter().enumerate() {
        let _ = writeln!(
            toml,
            "[[task]]\nid = \"t{k:02}\"\nprompt = \"p\"\nowns = [\"/{file}\"]\n\
             agent = {{ exec = \"echo '// touched by plait' >> {file}\" }}"
        );
    }
    toml
}

struct Figures {
    wall: f64,
    task_checks: f64,
    merged_checks: f64,
    green: bool,
}

/// Runs `toml` with `plait` in a copy of `repo` named `copy` (made unless it exists: a
/// second run there finds the first one's seed).
fn run(plait: &Path, repo: &Path, toml: &str, copy: &str, name: &str) -> Result<Figures> {
    let copy = repo.with_file_name(copy);
    if !copy.exists() {
        let status = Command::new("cp").arg("-a").arg(repo).arg(&copy).status()?;
        if !status.success() {
            bail!("cannot copy the repository");
        }
    }
    let plan = repo.with_file_name(format!("{name}.toml"));
    std::fs::write(&plan, toml)?;
    let start = Instant::now();
    let out = Command::new(plait)
        .args(["run", &plan.display().to_string(), "-j", "2"])
        .current_dir(&copy)
        .stdin(Stdio::null())
        .output()?;
    let wall = start.elapsed().as_secs_f64();
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if id.is_empty() || id.contains(char::is_whitespace) {
        bail!("plait run failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let status = Command::new(plait)
        .args(["status", &id, "--json"])
        .current_dir(&copy)
        .output()?;
    let state: serde_json::Value = serde_json::from_slice(&status.stdout)?;
    let ms = |checks: &serde_json::Value| -> f64 {
        checks
            .as_array()
            .map(|c| c.iter().filter_map(|r| r["ms"].as_f64()).sum::<f64>())
            .unwrap_or(0.0)
            / 1000.0
    };
    let task_checks = state["tasks"]
        .as_array()
        .map(|tasks| tasks.iter().map(|t| ms(&t["checks"])).sum())
        .unwrap_or(0.0);
    Ok(Figures {
        wall,
        task_checks,
        merged_checks: ms(&state["merged_checks"]),
        green: state["merged_checks"]
            .as_array()
            .is_some_and(|c| !c.is_empty() && c.iter().all(|r| r["passed"] == true)),
    })
}

fn main() -> Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("plait-lineage-")
        .tempdir()?;
    let rev = arg("--baseline").unwrap_or_else(|| BASELINE.to_string());
    let shared_plait = baseline(&rev)?;
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    let krate = krate::find(arg("--crate"))?;
    let repo = dir.path().join("repo");
    krate::repo(&repo, &krate)?;
    let files = krate::sources(&repo)?;
    println!(
        "plait lineage benchmark: {} ({} tasks, one per source file), task check `cargo check`, \
         merged check `cargo test`, checks 2 at once, -j 2",
        krate.file_name().unwrap_or_default().to_string_lossy(),
        files.len()
    );
    let this = PathBuf::from(env!("CARGO_BIN_EXE_plait"));
    let mut rows = Vec::new();
    for (name, copy, plait, clean) in [
        ("shared", "shared", shared_plait.as_path(), false),
        ("lineage", "lineage", this.as_path(), false),
        ("clean", "clean", this.as_path(), true),
        // The same plan again in the first lineage run's repository: its seed is warm.
        ("lineage-2", "lineage", this.as_path(), false),
    ] {
        stage(&format!("run: {name}"));
        rows.push((name, run(plait, &repo, &plan(&files, clean), copy, name)?));
    }
    println!();
    println!(
        "{:<10} {:>10} {:>14} {:>14}  merged checks",
        "checkouts", "wall", "task checks", "merged checks"
    );
    for (name, f) in &rows {
        println!(
            "{name:<10} {:>10} {:>14} {:>14}  {}",
            secs(f.wall),
            secs(f.task_checks),
            secs(f.merged_checks),
            if f.green { "passed" } else { "FAILED" }
        );
    }
    let wall = |n: &str| {
        rows.iter()
            .find(|(r, _)| *r == n)
            .map_or(0.0, |(_, f)| f.wall)
    };
    println!();
    println!(
        "lineage / shared: {:.2}x (goal <= 1.1x); lineage / clean: {:.2}x (goal <= 0.35x); \
         a second run, its seed kept: {:.2}x the first",
        wall("lineage") / wall("shared"),
        wall("lineage") / wall("clean"),
        wall("lineage-2") / wall("lineage")
    );
    Ok(())
}
