//! Running plans and commands for the benchmarks: `plait run` of a plan to its end with
//! its state, a shell script, a copy, a TOML string.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::settle;

/// A finished `plait run`: its wall time, id and `plait status --json`.
pub struct Run {
    pub wall: f64,
    pub id: String,
    pub state: serde_json::Value,
}

impl Run {
    /// Milliseconds making (or finding) the run's environment took.
    pub fn environment_ms(&self) -> f64 {
        self.state["environment"]["ms"].as_f64().unwrap_or(0.0)
    }

    pub fn tasks(&self) -> impl Iterator<Item = &serde_json::Value> {
        self.state["tasks"].as_array().into_iter().flatten()
    }

    /// Whether every task ended done.
    pub fn all_done(&self) -> bool {
        self.tasks().all(|t| t["state"] == "done")
    }

    fn check_secs(checks: &serde_json::Value) -> f64 {
        checks.as_array().map_or(0.0, |c| {
            c.iter().filter_map(|r| r["ms"].as_f64()).sum::<f64>()
        }) / 1000.0
    }

    /// Seconds of every task check of every task.
    pub fn task_checks(&self) -> f64 {
        self.tasks().map(|t| Run::check_secs(&t["checks"])).sum()
    }

    /// Seconds of the merged checks.
    pub fn merged_checks(&self) -> f64 {
        Run::check_secs(&self.state["merged_checks"])
    }

    /// Whether there were merged checks and all passed.
    pub fn merged_green(&self) -> bool {
        self.state["merged_checks"]
            .as_array()
            .is_some_and(|c| !c.is_empty() && c.iter().all(|r| r["passed"] == true))
    }
}

/// Runs plan `toml` (written as `<root>/plans/<name>.toml`) with this plait in `repo`, two
/// tasks at a time, to its end.
pub fn plait_run(root: &Path, repo: &Path, toml: &str, name: &str) -> Result<Run> {
    let plans = root.join("plans");
    std::fs::create_dir_all(&plans)?;
    let plan = plans.join(format!("{name}.toml"));
    std::fs::write(&plan, toml)?;
    let bin = env!("CARGO_BIN_EXE_plait");
    settle();
    let start = Instant::now();
    let out = Command::new(bin)
        .args(["run", &plan.display().to_string(), "-j", "2"])
        .current_dir(repo)
        .stdin(Stdio::null())
        .output()?;
    let wall = start.elapsed().as_secs_f64();
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if id.is_empty() || id.contains(char::is_whitespace) {
        bail!(
            "plait run {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let status = Command::new(bin)
        .args(["status", &id, "--json"])
        .current_dir(repo)
        .output()?;
    let state = serde_json::from_slice(&status.stdout).context("plait status --json")?;
    Ok(Run { wall, id, state })
}

/// Runs `script` with `sh -c` in `dir`; a non-zero exit is an error.
pub fn sh(dir: &Path, script: &str) -> Result<()> {
    sh_env(dir, script, &[])
}

/// [`sh`] with `env` added to its environment.
pub fn sh_env(dir: &Path, script: &str, env: &[(&str, &Path)]) -> Result<()> {
    let out = Command::new("sh")
        .args(["-c", script])
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        bail!(
            "`{script}` in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// `cp -a --reflink=auto from to`.
pub fn cp(from: &Path, to: &Path) -> Result<()> {
    let status = Command::new("cp")
        .args(["-a", "--reflink=auto"])
        .arg(from)
        .arg(to)
        .status()?;
    if !status.success() {
        bail!("cannot copy {} to {}", from.display(), to.display());
    }
    Ok(())
}

/// `text` as a TOML string.
pub fn toml_str(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}
