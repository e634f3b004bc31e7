//! The `exec` agent: a shell command run with `sh -c` in the task's worktree — codemods,
//! formatters, scripts — once for the task, or (`exec_each`) once per owned file in order,
//! started in the task's view when the run has a base layer (so the project's
//! `node_modules/.bin`, its venv and its build are there; `[sandbox] view = false` keeps
//! the sparse worktree),
//! stopping at the first that fails. It learns its task from `PLAIT_*` environment
//! variables (and, in a later round, what the checks or the reviewer asked for in
//! `PLAIT_FEEDBACK`); its output goes to the task's log; a non-zero exit or a timeout fails
//! the task.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use super::context::{Agent, AgentFuture, AgentOutcome, TaskContext};
use plait_plan::ExecCommand;
use plait_sandbox::shell::{self, ShellOutcome};

/// The name of the file, in the task's directory, that lists its owned paths NUL-separated.
pub const FILES_LIST: &str = "owned.nul";

/// Runs one shell command per task, or per owned file.
#[derive(Debug, Clone)]
pub struct ExecAgent {
    command: ExecCommand,
}

impl ExecAgent {
    /// An agent that runs `command` in the task's worktree.
    pub fn new(command: ExecCommand) -> ExecAgent {
        ExecAgent { command }
    }

    async fn run_task(&self, task: &TaskContext) -> AgentOutcome {
        let mut env = task_env(task);
        match write_files_list(task) {
            Ok(path) => env.push(("PLAIT_FILES", path.display().to_string())),
            Err(reason) => {
                return AgentOutcome::Failed {
                    reason,
                    exit_code: None,
                }
            }
        }
        if self.command.each_file {
            return self.run_each(task, env).await;
        }
        let outcome = shell::run(&self.command.command, &task.launch(&env)).await;
        outcome_of(outcome, task)
    }

    /// The command on each owned file in order, within the task's one timeout; the first
    /// failure ends the task, naming its file.
    async fn run_each(&self, task: &TaskContext, env: Vec<(&str, String)>) -> AgentOutcome {
        let started = Instant::now();
        let files = self.command.files_of(&task.owned);
        let total = files.len();
        if total < task.owned.len() {
            note(
                task,
                &format!(
                    "plait: {total} of {} owned file(s) match files = {:?}",
                    task.owned.len(),
                    self.command.files
                ),
            );
        }
        for (n, file) in files.into_iter().enumerate() {
            let command = with_file(&self.command.command, file);
            note(task, &format!("plait: {} of {total}: {command}", n + 1));
            let mut env = env.clone();
            env.retain(|(key, _)| *key != "PLAIT_FILE");
            env.push(("PLAIT_FILE", file.clone()));
            let mut launch = task.launch(&env);
            launch.timeout = task.timeout.saturating_sub(started.elapsed());
            let outcome = if launch.timeout.is_zero() {
                ShellOutcome::TimedOut
            } else {
                shell::run(&command, &launch).await
            };
            match (&outcome, outcome_of(outcome.clone(), task)) {
                (_, AgentOutcome::Finished) => {}
                (ShellOutcome::Interrupted, interrupted) => return interrupted,
                (_, AgentOutcome::Failed { reason, exit_code }) => {
                    return AgentOutcome::Failed {
                        reason: format!("on {file} ({} of {total}): {reason}", n + 1),
                        exit_code,
                    }
                }
                (_, other) => return other,
            }
        }
        AgentOutcome::Finished
    }
}

/// `command` with `{file}` replaced by `file` quoted for the shell; a `{file}` already in
/// quotes (`'{file}'`, `"{file}"`) is replaced quotes and all.
pub fn with_file(command: &str, file: &str) -> String {
    let quoted = shell_quote(file);
    command
        .replace("'{file}'", &quoted)
        .replace("\"{file}\"", &quoted)
        .replace("{file}", &quoted)
}

/// `text` as one shell word: in single quotes, each `'` written `'\''`.
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Writes the owned paths, each followed by NUL, beside the task's log; returns its path
/// (`PLAIT_FILES`).
fn write_files_list(task: &TaskContext) -> Result<PathBuf, String> {
    let path = task.dir().join(FILES_LIST);
    let mut bytes = Vec::new();
    for file in &task.owned {
        bytes.extend_from_slice(file.as_bytes());
        bytes.push(0);
    }
    std::fs::write(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Adds a line of plait's own to the task's log, so the log says which file the output
/// that follows is about.
fn note(task: &TaskContext, line: &str) {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&task.log);
    if let Ok(mut log) = log {
        let _ = writeln!(log, "{line}");
    }
}

/// The `PLAIT_*` variables a command-line agent learns its task from.
pub fn task_env(task: &TaskContext) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("PLAIT_RUN", task.run.clone()),
        // An attempt's is its task's id; `PLAIT_ATTEMPT` says which attempt it is.
        (
            "PLAIT_TASK",
            plait_core::state::split_attempt_id(&task.task)
                .map_or(task.task.as_str(), |(id, _)| id)
                .to_string(),
        ),
        ("PLAIT_GOAL", task.goal.clone()),
        ("PLAIT_PROMPT", task.prompt.clone()),
        ("PLAIT_BASE", task.base.clone()),
        ("PLAIT_WORKTREE", task.worktree.display().to_string()),
        ("PLAIT_OWNED", task.owned_list.display().to_string()),
        ("PLAIT_ROUND", task.round.to_string()),
        // A directory of the task's own its processes may write, kept across rounds.
        ("PLAIT_SCRATCH", task.scratch().display().to_string()),
        // How the task's whole-tree view is made, and the way into it for a command.
        (
            "PLAIT_VIEW",
            if task.view.layered() {
                "overlay"
            } else {
                "filled"
            }
            .to_string(),
        ),
        // Meant to be expanded unquoted (`$PLAIT_RUN_IN make test`), so the path is not
        // quoted: the shell does not read quotes that come out of an expansion.
        (
            "PLAIT_RUN_IN",
            format!("{} run-in-view --", task.plait_program.display()),
        ),
    ];
    if let Some(fd) = task.sandbox.passed_fd() {
        env.push((plait_sandbox::forward::FD_VAR, fd.to_string()));
    }
    if let Some(file) = &task.single_file {
        env.push(("PLAIT_FILE", file.clone()));
    }
    if let Some(feedback) = &task.feedback {
        env.push(("PLAIT_FEEDBACK", feedback.clone()));
    }
    if let Some((n, of)) = task.attempt {
        env.push(("PLAIT_ATTEMPT", n.to_string()));
        env.push(("PLAIT_ATTEMPTS", of.to_string()));
    }
    env
}

/// A process's end as an agent's outcome: exit 0 finished, anything else failed.
pub fn outcome_of(outcome: ShellOutcome, task: &TaskContext) -> AgentOutcome {
    match outcome {
        ShellOutcome::Exited(0) => AgentOutcome::Finished,
        ShellOutcome::Exited(code) => AgentOutcome::Failed {
            reason: outcome.describe(task.timeout),
            exit_code: Some(code),
        },
        other => AgentOutcome::Failed {
            reason: other.describe(task.timeout),
            exit_code: None,
        },
    }
}

impl Agent for ExecAgent {
    fn run<'a>(&'a self, task: &'a TaskContext) -> AgentFuture<'a> {
        Box::pin(async move { self.run_task(task).await.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_is_one_shell_word_quoted_or_not() {
        assert_eq!(
            with_file("rustfmt {file}", "src/a b.rs"),
            "rustfmt 'src/a b.rs'"
        );
        assert_eq!(
            with_file("x \"{file}\" '{file}'", "it's"),
            r"x 'it'\''s' 'it'\''s'"
        );
        assert_eq!(with_file("true", "a"), "true");
    }
}
