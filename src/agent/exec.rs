//! The `exec` agent: a shell command run with `sh -c` in the task's worktree — codemods,
//! formatters, scripts. It learns its task from `PLAIT_*` environment variables; its output
//! goes to the task's log; a non-zero exit or a timeout fails the task. On timeout the
//! whole process group is killed, so no grandchild keeps writing.

use std::fs::OpenOptions;
use std::process::Stdio;

use tokio::process::Command;

use super::{Agent, AgentFuture, AgentOutcome, TaskContext};

/// Runs one shell command per task.
#[derive(Debug, Clone)]
pub struct ExecAgent {
    command: String,
}

impl ExecAgent {
    pub fn new(command: String) -> ExecAgent {
        ExecAgent { command }
    }

    async fn run_task(&self, task: &TaskContext) -> AgentOutcome {
        let failed = |reason: String| AgentOutcome::Failed {
            reason,
            exit_code: None,
        };
        let log = match OpenOptions::new().create(true).append(true).open(&task.log) {
            Ok(f) => f,
            Err(e) => return failed(format!("cannot open log {}: {e}", task.log.display())),
        };
        let log_err = match log.try_clone() {
            Ok(f) => f,
            Err(e) => return failed(format!("cannot open log {}: {e}", task.log.display())),
        };
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .current_dir(&task.worktree)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .env("PLAIT_RUN", &task.run)
            .env("PLAIT_TASK", &task.task)
            .env("PLAIT_GOAL", &task.goal)
            .env("PLAIT_PROMPT", &task.prompt)
            .env("PLAIT_BASE", &task.base)
            .env("PLAIT_WORKTREE", &task.worktree)
            .env("PLAIT_OWNED", &task.owned_list)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .process_group(0)
            .kill_on_drop(true);
        match &task.single_file {
            Some(file) => cmd.env("PLAIT_FILE", file),
            None => cmd.env_remove("PLAIT_FILE"),
        };
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return failed(format!("cannot start sh: {e}")),
        };
        let pid = child.id();
        let waited = tokio::select! {
            waited = tokio::time::timeout(task.timeout, child.wait()) => waited,
            _ = task.cancel.cancelled() => {
                if let Some(pid) = pid {
                    kill_group(pid);
                }
                let _ = child.wait().await;
                return failed("interrupted".to_string());
            }
        };
        match waited {
            Ok(Ok(status)) if status.success() => AgentOutcome::Finished,
            Ok(Ok(status)) => AgentOutcome::Failed {
                reason: match status.code() {
                    Some(code) => format!("command exited with status {code}"),
                    None => "command was killed by a signal".to_string(),
                },
                exit_code: status.code(),
            },
            Ok(Err(e)) => failed(format!("waiting for the command failed: {e}")),
            Err(_) => {
                if let Some(pid) = pid {
                    kill_group(pid);
                }
                let _ = child.wait().await;
                failed(format!(
                    "timed out after {}",
                    humantime::format_duration(task.timeout)
                ))
            }
        }
    }
}

fn kill_group(pid: u32) {
    // SAFETY: signalling the process group the child leads; it was created by us.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

impl Agent for ExecAgent {
    fn run<'a>(&'a self, task: &'a TaskContext) -> AgentFuture<'a> {
        Box::pin(async move { self.run_task(task).await.into() })
    }
}
