//! Check commands run against a full checkout of a commit: the owned-files worktree alone
//! cannot build. A pool of full worktrees ("slots", as many as checks may run at once) is
//! made on first use and reused: moving a slot to the next commit rewrites only the files
//! that differ, and ignored build output (such as `target/`) stays, so builds are
//! incremental. Checks are CPU-bound; the pool's size is their concurrency limit.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use git2::Oid;
use tokio::sync::Semaphore;

use crate::cancel::Cancel;
use crate::git::run_git;
use crate::sandbox::{Sandbox, SandboxSettings};
use crate::shell::{self, Launch, ShellOutcome};
use crate::state::CheckResult;

/// Full worktrees for checks, shared by the tasks of a run.
pub struct CheckPool {
    root: PathBuf,
    workdir: PathBuf,
    free: Mutex<Vec<PathBuf>>,
    made: Mutex<usize>,
    permits: Semaphore,
    /// Held while `git worktree add` runs: concurrent adds race on `.git/worktrees`.
    adding: std::sync::Arc<Mutex<()>>,
}

/// What to run and where its output goes.
pub struct CheckJob<'a> {
    pub commit: Oid,
    pub commands: &'a [String],
    /// Extra environment for the commands.
    pub env: Vec<(&'a str, String)>,
    /// Directory for one log per command.
    pub logs: &'a Path,
    pub timeout: Duration,
    /// The walls the commands run in, besides their own checkout.
    pub sandbox: &'a SandboxSettings,
}

impl CheckPool {
    /// A pool of at most `jobs` slots under `root`, for the repository at `workdir`.
    pub fn new(root: PathBuf, workdir: PathBuf, jobs: usize) -> CheckPool {
        CheckPool {
            root,
            workdir,
            free: Mutex::new(Vec::new()),
            made: Mutex::new(0),
            permits: Semaphore::new(jobs.max(1)),
            adding: std::sync::Arc::new(Mutex::new(())),
        }
    }

    /// Runs every command of `job` in a slot checked out at its commit.
    pub async fn run(
        &self,
        job: &CheckJob<'_>,
        cancel: &Cancel,
    ) -> Result<Vec<CheckResult>, String> {
        let _permit = self.permits.acquire().await.map_err(|e| e.to_string())?;
        let slot = self.take_slot();
        let prepared = {
            let (slot, workdir, commit) = (slot.clone(), self.workdir.clone(), job.commit);
            let adding = self.adding.clone();
            tokio::task::spawn_blocking(move || prepare(&workdir, &slot, commit, &adding)).await
        };
        let result = match prepared {
            Ok(Ok(())) => Ok(self.run_commands(&slot, job, cancel).await),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(format!("preparing a check checkout panicked: {e}")),
        };
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(slot);
        result
    }

    async fn run_commands(
        &self,
        slot: &Path,
        job: &CheckJob<'_>,
        cancel: &Cancel,
    ) -> Vec<CheckResult> {
        let _ = std::fs::create_dir_all(job.logs);
        let mut results = Vec::new();
        // A check may write its own checkout (build output), nothing of the task's.
        for (i, command) in job.commands.iter().enumerate() {
            let log = job.logs.join(format!("check-{}.log", i + 1));
            let _ = std::fs::write(&log, format!("$ {command}\n"));
            let started = Instant::now();
            let sandbox = Sandbox::new(job.sandbox, vec![slot.to_path_buf()]);
            let launch = Launch {
                dir: slot,
                env: &job.env,
                log: &log,
                timeout: job.timeout,
                cancel,
                sandbox: &sandbox,
            };
            let outcome = shell::run(command, &launch).await;
            let passed = outcome == ShellOutcome::Exited(0);
            if !passed && !matches!(outcome, ShellOutcome::Exited(_)) {
                let _ = append(
                    &log,
                    &format!("\nplait: {}\n", outcome.describe(job.timeout)),
                );
            }
            results.push(CheckResult {
                command: command.clone(),
                passed,
                exit_code: match outcome {
                    ShellOutcome::Exited(code) => Some(code),
                    _ => None,
                },
                tail: shell::tail(&log, 40, 4000),
                log,
                ms: started.elapsed().as_millis() as u64,
                refused: sandbox.denials(),
            });
            if outcome == ShellOutcome::Interrupted {
                break;
            }
        }
        results
    }

    fn take_slot(&self) -> PathBuf {
        if let Some(slot) = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return slot;
        }
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        *made += 1;
        self.root.join(format!("slot-{made}"))
    }

    /// Removes every slot the pool made.
    pub fn remove_all(&self) {
        let made = *self.made.lock().unwrap_or_else(|e| e.into_inner());
        for k in 1..=made {
            remove_slot(&self.workdir, &self.root.join(format!("slot-{k}")));
        }
        let _ = std::fs::remove_dir(&self.root);
    }
}

/// Removes one check worktree, if it exists.
pub fn remove_slot(workdir: &Path, slot: &Path) {
    if slot.exists() {
        let path = slot.display().to_string();
        if run_git(workdir, &["worktree", "remove", "--force", &path], &[]).is_err() {
            let _ = std::fs::remove_dir_all(slot);
            let _ = run_git(workdir, &["worktree", "prune"], &[]);
        }
    }
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// Puts `slot` at `commit`: a new detached worktree, or an existing one moved there with
/// untracked files removed (ignored build output stays).
fn prepare(workdir: &Path, slot: &Path, commit: Oid, adding: &Mutex<()>) -> Result<(), String> {
    let hex = commit.to_string();
    let path = slot.display().to_string();
    if !slot.exists() {
        let _adding = adding.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(parent) = slot.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        run_git(
            workdir,
            &["worktree", "add", "--detach", "--quiet", &path, &hex],
            &[],
        )
        .map_err(|e| format!("cannot make a checkout for checks: {e}"))?;
        return Ok(());
    }
    run_git(
        slot,
        &["checkout", "--detach", "--force", "--quiet", &hex],
        &[],
    )
    .and_then(|_| run_git(slot, &["clean", "-fdq"], &[]))
    .map(|_| ())
    .map_err(|e| format!("cannot move the check checkout to {hex}: {e}"))
}

/// Runs the merged checks of `state`'s run on `commit`, logging under `logs`; a checkout
/// that cannot be made is a failed check.
pub async fn checks_at(
    pool: &CheckPool,
    state: &crate::state::RunState,
    commit: Oid,
    checks: &crate::plan::CheckSettings,
    logs: &Path,
    cancel: &Cancel,
) -> Vec<CheckResult> {
    let job = CheckJob {
        commit,
        commands: &checks.merged,
        env: vec![
            ("PLAIT_RUN", state.id.clone()),
            ("PLAIT_TASK", "merged".to_string()),
            ("PLAIT_BASE", state.base.clone()),
            ("PLAIT_COMMIT", commit.to_string()),
        ],
        logs,
        timeout: checks.timeout,
        sandbox: &checks.sandbox,
    };
    match pool.run(&job, cancel).await {
        Ok(results) => results,
        Err(e) => vec![CheckResult {
            command: "(prepare a checkout to check)".to_string(),
            passed: false,
            exit_code: None,
            tail: e,
            log: logs.to_path_buf(),
            ms: 0,
            refused: Vec::new(),
        }],
    }
}
