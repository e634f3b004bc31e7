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
        let prompt = match &task.feedback {
            Some(feedback) => format!("{}\n\n{feedback}", task.prompt),
            None => task.prompt.clone(),
        };
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

/// Whether `program` can be run: a path to an executable file, or a name found in one of
/// the `path` directories.
pub fn findable(program: &str, path: Option<&str>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        // Relative paths are relative to the worktree, which does not exist yet.
        return !program.starts_with('/') || executable(std::path::Path::new(program));
    }
    path.unwrap_or("")
        .split(':')
        .filter(|d| !d.is_empty())
        .any(|dir| executable(&std::path::Path::new(dir).join(program)))
}
