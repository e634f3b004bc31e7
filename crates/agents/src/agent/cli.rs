//! The `cli` agent: any agent program — Codex, Gemini, an in-house tool — run in the
//! task's worktree from an argument list in the plan, with no shell in between. In each
//! argument `{prompt}`, `{goal}`, `{task}`, `{owned}` (the file listing the owned paths),
//! `{file}` (the one owned file, or empty) and `{worktree}` are filled in; the program also
//! gets the `PLAIT_*` variables. With `gateway = "PROVIDER"` it reaches its model through
//! plait's gateway: `{gateway}` is the task's base URL there, and the provider's own
//! variables (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`, their keys) point at it. Exit 0 finishes the task (unless, through the gateway, it
//! never asked its model: then the round failed); collect enforces ownership afterwards,
//! whatever the program did.

use super::context::{Agent, AgentFuture, TaskContext};
use super::exec::{outcome_of, task_env};
use plait_llm::provider::ProviderKind;
use plait_plan::CliSettings;
use plait_sandbox::shell;

/// The variables that point a program at its provider, set to the task's way through the
/// gateway (and `PLAIT_GATEWAY_URL`, `PLAIT_GATEWAY_KEY`, for a program that reads others):
/// the base URL, and the stand-in key when plait holds the real one.
pub fn gateway_env(
    lease: &plait_gateway::Lease,
    kind: ProviderKind,
) -> Vec<(&'static str, String)> {
    let url = lease.base_url();
    let mut env = vec![("PLAIT_GATEWAY_URL", url.clone())];
    let (urls, key): (&[&'static str], &'static str) = match kind {
        ProviderKind::Anthropic => (&["ANTHROPIC_BASE_URL"], "ANTHROPIC_API_KEY"),
        ProviderKind::Openai => (&["OPENAI_BASE_URL", "OPENAI_API_BASE"], "OPENAI_API_KEY"),
    };
    env.extend(urls.iter().map(|name| (*name, url.clone())));
    if let Some(stand_in) = lease.key() {
        env.push(("PLAIT_GATEWAY_KEY", stand_in.clone()));
        env.push((key, stand_in));
    }
    env
}

/// Runs one program per task.
#[derive(Debug, Clone)]
pub struct CliAgent {
    argv: Vec<String>,
    /// The API the program speaks through the gateway, when the plan names a provider.
    gateway: Option<ProviderKind>,
}

impl CliAgent {
    /// An agent that runs the `{ cli }` program `settings` names.
    pub fn new(settings: &CliSettings) -> CliAgent {
        CliAgent {
            argv: settings.argv.clone(),
            gateway: settings.gateway.as_ref().map(|p| p.kind),
        }
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
                    .replace(
                        "{gateway}",
                        &task
                            .gateway
                            .as_ref()
                            .map(|l| l.base_url())
                            .unwrap_or_default(),
                    )
            })
            .collect()
    }
}

impl Agent for CliAgent {
    fn run<'a>(&'a self, task: &'a TaskContext) -> AgentFuture<'a> {
        Box::pin(async move {
            let argv = self.argv_for(task);
            let mut env = task_env(task);
            if let (Some(lease), Some(kind)) = (&task.gateway, self.gateway) {
                env.extend(gateway_env(lease, kind));
            }
            let asked = task.asked();
            let outcome = shell::run_argv(&argv, &task.launch(&env)).await;
            let program = argv.first().map(String::as_str).unwrap_or("the agent");
            let program = program.rsplit('/').next().unwrap_or(program);
            task.unasked(outcome_of(outcome, task), (asked, 0), program, "")
                .into()
        })
    }
}
