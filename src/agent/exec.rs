//! The `exec` agent: a shell command run with `sh -c` in the task's worktree — codemods,
//! formatters, scripts. It learns its task from `PLAIT_*` environment variables (and, in a
//! later round, what the checks or the reviewer asked for in `PLAIT_FEEDBACK`); its output
//! goes to the task's log; a non-zero exit or a timeout fails the task.

use super::{Agent, AgentFuture, AgentOutcome, TaskContext};
use crate::shell::{self, ShellOutcome};

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
        let env = task_env(task);
        let outcome = shell::run(&self.command, &task.launch(&env)).await;
        outcome_of(outcome, task)
    }
}

/// The `PLAIT_*` variables a command-line agent learns its task from.
pub fn task_env(task: &TaskContext) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("PLAIT_RUN", task.run.clone()),
        ("PLAIT_TASK", task.task.clone()),
        ("PLAIT_GOAL", task.goal.clone()),
        ("PLAIT_PROMPT", task.prompt.clone()),
        ("PLAIT_BASE", task.base.clone()),
        ("PLAIT_WORKTREE", task.worktree.display().to_string()),
        ("PLAIT_OWNED", task.owned_list.display().to_string()),
        ("PLAIT_ROUND", task.round.to_string()),
    ];
    if let Some(file) = &task.single_file {
        env.push(("PLAIT_FILE", file.clone()));
    }
    if let Some(feedback) = &task.feedback {
        env.push(("PLAIT_FEEDBACK", feedback.clone()));
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
