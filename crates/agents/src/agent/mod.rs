//! Stage 3: agents. The worker that edits a task's worktree, behind one trait so the
//! orchestrator treats a shell command, a model over HTTP and an agent CLI alike. An agent's
//! failure is an outcome recorded on the task, never an error of plait's.

pub mod aider;
pub mod claude_code;
pub mod cli;
pub mod context;
pub mod exec;
pub mod identity;
pub mod model;

pub use context::{
    Agent, AgentOutcome, AgentReport, Budget, Inbox, RoleGateway, Tally, TaskContext,
};

use plait_plan::AgentConfig;

/// Builds the agent a resolved plan names; model agents share `client`'s connections and
/// their provider's limiter.
pub fn from_config(
    config: &AgentConfig,
    client: &reqwest::Client,
    limiters: &plait_llm::limiter::Limiters,
) -> Box<dyn Agent> {
    match config {
        AgentConfig::Exec(command) => Box::new(exec::ExecAgent::new(command.clone())),
        AgentConfig::Cli(settings) => Box::new(cli::CliAgent::new(settings)),
        AgentConfig::ClaudeCode(settings) => {
            Box::new(claude_code::ClaudeCodeAgent::new(settings.clone()))
        }
        AgentConfig::Aider(settings) => Box::new(aider::AiderAgent::new(settings.clone())),
        AgentConfig::Model { provider, run } => Box::new(model::ModelAgent::new(
            provider.clone(),
            run.clone(),
            client.clone(),
            limiters.get(provider),
        )),
    }
}

/// Where a role's processes (a reviewer, a judge, a supervisor, the planner) may write in the
/// directory `dir` they are given: a directory of their own in it. The rest of it (the
/// worker's log, transcript, Claude Code's settings and its guard's rules, the owned list)
/// they may read but never change, so a role cannot turn the worker's next round.
pub fn role_own(dir: &std::path::Path) -> std::path::PathBuf {
    let own = dir.join("roles");
    let _ = std::fs::create_dir_all(&own);
    own
}
