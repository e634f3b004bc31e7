//! Culprit-search benchmark: check runs used and wall time to isolate the tasks that break
//! the merged checks, among 64 tasks. Prints figures, asserts nothing about time.
//!
//! A generated repository of 64 shell modules and a test that calls them all; 64 exec tasks
//! (one per module) run by the `plait` binary with a merged check of that test. Cases: one
//! task renames its function (first, middle and last in the merge), and a pair that fails
//! only together. Each case runs with the search and with `bisect = false`; the difference
//! is the search's wall time. Against it: testing every task alone on the base, 64 runs at
//! the measured cost of one (which cannot find the pair).
//! Run it through `./bench --culprits`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

mod common;
use common::{git, isolate_git, secs, stage};

const TASKS: usize = 64;

fn repo(root: &Path) -> Result<std::path::PathBuf> {
    let path = root.join("repo");
    std::fs::create_dir_all(path.join("src"))?;
    std::fs::create_dir_all(path.join("tests"))?;
    let mut test = String::from("for m in src/m*.sh; do . ./$m; done\n");
    for k in 0..TASKS {
        std::fs::write(
            path.join(format!("src/m{k:02}.sh")),
            format!("f{k:02}() {{ echo {k}; }}\n"),
        )?;
        let _ = writeln!(test, "[ \"$(f{k:02})\" = {k} ] || exit 1");
    }
    test.push_str("[ -z \"$A_ON\" ] || [ -z \"$B_ON\" ]\n");
    std::fs::write(path.join("tests/run.sh"), test)?;
    git(&path, &["init", "-q", "-b", "main"])?;
    git(&path, &["add", "-A"])?;
    git(&path, &["commit", "-q", "-m", "base"])?;
    Ok(path)
}

fn plan(edits: &[(usize, &str)], bisect: bool) -> String {
    let mut toml = format!(
        "goal = \"bench\"\n[checks]\nmerged = [\"sh tests/run.sh\"]\nbisect = {bisect}\n\
         [groups]\nthreshold = 1000\n"
    );
    for k in 0..TASKS {
        let edit = edits.iter().find(|(i, _)| *i == k).map_or_else(
            || format!("echo '# touched' >> src/m{k:02}.sh"),
            |(_, e)| e.to_string(),
        );
        let _ = writeln!(toml, "[[task]]\nid = \"m{k:02}\"\nprompt = \"p\"\nowns = [\"/src/m{k:02}.sh\"]\nagent = {{ exec = \"{edit}\" }}");
    }
    toml
}

/// Runs a plan; wall seconds and the run's state.
fn run(repo: &Path, toml: &str, name: &str) -> Result<(f64, serde_json::Value)> {
    let plan = repo
        .parent()
        .context("no parent")?
        .join(format!("{name}.toml"));
    std::fs::write(&plan, toml)?;
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", &plan.display().to_string(), "-j", "2"])
        .current_dir(repo)
        .stdin(Stdio::null())
        .output()?;
    let wall = start.elapsed().as_secs_f64();
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if id.is_empty() {
        bail!("plait run failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let status = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["status", &id, "--json"])
        .current_dir(repo)
        .output()?;
    Ok((wall, serde_json::from_slice(&status.stdout)?))
}

fn main() -> Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("plait-culprits-")
        .tempdir()?;
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    let repo = repo(dir.path())?;
    println!(
        "plait culprit-search benchmark: {TASKS} exec tasks, merged check `sh tests/run.sh`, -j 2"
    );
    let rename = |k: usize| format!("sed -i s/f{k:02}/g{k:02}/ src/m{k:02}.sh");
    let cases: Vec<(String, Vec<(usize, String)>)> = vec![
        ("one culprit, first (m00)".into(), vec![(0, rename(0))]),
        ("one culprit, middle (m37)".into(), vec![(37, rename(37))]),
        ("one culprit, last (m63)".into(), vec![(63, rename(63))]),
        (
            "a pair that fails only together (m05 + m50)".into(),
            vec![
                (5, "echo A_ON=1 >> src/m05.sh".into()),
                (50, "echo B_ON=1 >> src/m50.sh".into()),
            ],
        ),
    ];
    let mut rows = Vec::new();
    for (k, (name, edits)) in cases.iter().enumerate() {
        stage(name);
        let edits: Vec<(usize, &str)> = edits.iter().map(|(i, e)| (*i, e.as_str())).collect();
        let (with, state) = run(&repo, &plan(&edits, true), &format!("case{k}"))?;
        let (without, _) = run(&repo, &plan(&edits, false), &format!("case{k}-off"))?;
        let runs = state["culprits"]["runs"].as_u64().unwrap_or(0);
        let found: Vec<String> = state["culprits"]["sets"]
            .as_array()
            .map(|sets| {
                sets.iter()
                    .map(|s| {
                        let mut text = s["tasks"].to_string();
                        if let Some(p) = s["partners"].as_array().filter(|p| !p.is_empty()) {
                            let _ = write!(text, " with {}", serde_json::Value::from(p.clone()));
                        }
                        text
                    })
                    .collect()
            })
            .unwrap_or_default();
        let green = state["merged_checks"][0]["passed"] == true;
        rows.push((name.clone(), runs, (with - without).max(0.0), found, green));
    }
    println!();
    println!(
        "{:<46} {:>6} {:>10}  found; the rest's merged check",
        "case", "runs", "search"
    );
    for (name, runs, search, found, green) in &rows {
        println!(
            "{name:<46} {runs:>6} {:>10}  {}; {}",
            secs(*search),
            found.join(", "),
            if *green { "passes" } else { "FAILS" }
        );
    }
    let per_run: Vec<f64> = rows
        .iter()
        .filter(|r| r.1 > 0)
        .map(|r| r.2 / r.1 as f64)
        .collect();
    let per_run = per_run.iter().sum::<f64>() / per_run.len().max(1) as f64;
    println!();
    println!(
        "goals: one culprit among {TASKS} in at most {} runs, a pair in at most 30",
        2 * (TASKS as f64).log2() as usize + 1
    );
    println!(
        "testing every task alone on the base: {TASKS} runs, about {} at the {} one run took here; it cannot find the pair",
        secs(per_run * TASKS as f64),
        secs(per_run)
    );
    println!("search: the run's wall time with the search less the same run with bisect = false");
    Ok(())
}
