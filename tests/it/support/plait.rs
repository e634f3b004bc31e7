//! Running plait: the real binary in a repository, and a plan run through the library.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use plait_core::state::RunState;
use plait_plan as plan;
use plait_run::orchestrator::{self, RunSettings};

use super::{init, runtime, stderr, wait_until, TestRepo};

impl TestRepo {
    /// Runs the real `plait` binary in the repository.
    pub fn plait(&self, args: &[&str]) -> Output {
        plait_in(&self.path, args)
    }

    /// Runs the real `plait` binary in the repository with extra environment variables.
    pub fn plait_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        init();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_plait"));
        cmd.args(args).current_dir(&self.path).env("NO_COLOR", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run plait")
    }

    /// `plait status ARGS --json`, parsed.
    pub fn status_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["status"];
        all.extend_from_slice(args);
        all.push("--json");
        let out = self.plait(&all);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("plait status --json: {e}: {}", stderr(&out)))
    }

    /// Validates and runs a plan through the library; returns the final state.
    pub fn run(&self, toml: &str, jobs: usize) -> RunState {
        self.run_with_env(toml, jobs, &|_| None)
    }

    /// Like [`TestRepo::run`], with `env` as the environment the plan sees.
    pub fn run_with_env(
        &self,
        toml: &str,
        jobs: usize,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> RunState {
        let plan_path = self.plan(toml);
        let repo = plait_core::git::open(&self.path).unwrap();
        let parsed = plan::parse(toml, &plan_path).unwrap();
        let resolved = plan::resolve_with_env(&repo, parsed, &plan_path, env).unwrap();
        let settings = RunSettings {
            store: None,
            remote: None,
            context: plait_stages::context::Context::from_repo(
                repo,
                &self.path,
                plait_stages::context::process_env(),
                std::path::PathBuf::from(env!("CARGO_BIN_EXE_plait")),
            ),
            plan: Arc::new(resolved),
            plan_path,
            plan_text: toml.to_string(),
            jobs,
            worktree_root: None,
            max_cost: self.max_cost.get(),
            groups: None,
        };
        let prepared = orchestrator::prepare(settings).unwrap();
        runtime()
            .block_on(orchestrator::execute(
                prepared,
                None,
                plait_core::cancel::Cancel::new().1,
            ))
            .unwrap()
    }
}

impl TestRepo {
    /// Every line beginning with `mark` that a process of run `run` printed (an agent, a
    /// check, the seed's warm-up), read from the logs plait keeps for the run
    /// (`.git/plait/runs/<run>/**/*.log`), in the order of the logs' paths. How a test
    /// observes what a confined process saw without widening its walls: it prints it.
    pub fn printed_in(&self, run: &str, mark: &str) -> Vec<String> {
        printed(&self.path.join(".git/plait/runs").join(run), mark)
    }

    /// [`TestRepo::printed_in`] over every run of the repository.
    pub fn printed(&self, mark: &str) -> Vec<String> {
        printed(&self.path.join(".git/plait/runs"), mark)
    }
}

/// The lines beginning with `mark` of every `*.log` file under `dir`, by path: what the
/// processes of the runs whose logs are there printed (a worker's, under its directory).
pub fn printed(dir: &Path, mark: &str) -> Vec<String> {
    let mut logs = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => dirs.push(path),
                Ok(t) if t.is_file() && path.extension().is_some_and(|e| e == "log") => {
                    logs.push(path)
                }
                _ => {}
            }
        }
    }
    logs.sort();
    logs.iter()
        .filter_map(|log| std::fs::read(log).ok())
        .flat_map(|text| {
            String::from_utf8_lossy(&text)
                .lines()
                .filter(|l| l.starts_with(mark))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Runs the real `plait` binary in `dir`.
pub fn plait_in(dir: &Path, args: &[&str]) -> Output {
    init();
    Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("run plait")
}

/// Polls `plait status --json` until `n` tasks are running; returns that status.
pub fn wait_for_running(repo: &TestRepo, n: usize) -> serde_json::Value {
    let mut status = serde_json::Value::Null;
    wait_until(&format!("status showed {n} running tasks"), || {
        let out = repo.plait(&["status", "--json"]);
        if !out.status.success() {
            return false;
        }
        status = serde_json::from_slice(&out.stdout).unwrap();
        let running = status["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["state"] == "running")
            .count();
        running == n
    });
    status
}

/// Each task's id and owned files in the plan `text`, as `plait run` would resolve it.
pub fn owned_by_task(repo: &TestRepo, text: &str) -> Vec<(String, Vec<String>)> {
    let path = repo.plan(text);
    let git = plait_core::git::open(&repo.path).unwrap();
    let parsed = plan::parse(text, &path).unwrap();
    let resolved = plan::resolve(&git, parsed, std::path::Path::new("x"))
        .unwrap_or_else(|e| panic!("the split plan is not valid: {e}\n{text}"));
    resolved
        .tasks
        .iter()
        .map(|t| (t.id.clone(), t.owned.clone()))
        .collect()
}
