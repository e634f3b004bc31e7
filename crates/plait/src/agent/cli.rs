//! The `cli` agent: any agent program — Codex, Gemini, an in-house tool — run in the
//! task's worktree from an argument list in the plan, with no shell in between. In each
//! argument `{prompt}`, `{goal}`, `{task}`, `{owned}` (the file listing the owned paths),
//! `{file}` (the one owned file, or empty) and `{worktree}` are filled in; the program also
//! gets the `PLAIT_*` variables. Exit 0 finishes the task; collect enforces ownership
//! afterwards, whatever the program did.

use super::exec::{outcome_of, task_env};
use super::{Agent, AgentFuture, TaskContext};
use crate::shell;

/// Runs one program per task.
#[derive(Debug, Clone)]
pub struct CliAgent {
    argv: Vec<String>,
}

impl CliAgent {
    pub fn new(argv: Vec<String>) -> CliAgent {
        CliAgent { argv }
    }

    /// The argument list with the task's placeholders filled in.
    pub fn argv_for(&self, task: &TaskContext) -> Vec<String> {
        let prompt =
            crate::prompts::worker::placeholder_prompt(&task.prompt, task.feedback.as_deref());
        self.argv
            .iter()
            .map(|arg| {
                arg.replace("{prompt}", &prompt)
                    .replace("{goal}", &task.goal)
                    .replace("{task}", &task.task)
                    .replace("{owned}", &task.owned_list.display().to_string())
                    .replace("{file}", task.single_file.as_deref().unwrap_or(""))
                    .replace("{worktree}", &task.worktree.display().to_string())
            })
            .collect()
    }
}

impl Agent for CliAgent {
    fn run<'a>(&'a self, task: &'a TaskContext) -> AgentFuture<'a> {
        Box::pin(async move {
            let argv = self.argv_for(task);
            let env = task_env(task);
            let outcome = shell::run_argv(&argv, &task.launch(&env)).await;
            outcome_of(outcome, task).into()
        })
    }
}
