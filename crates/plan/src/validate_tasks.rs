//! Resolving one task: its globs compiled against the tracked files, its agent, sandbox,
//! network, turns and timeout. Above `validate_agents` and `validate_settings`, below the plan's own
//! resolution (`validate`), which resolves every task and then assigns ownership.

use std::collections::HashMap;
use std::sync::Arc;

use super::layout::Layout;
use super::TaskFile;
use plait_core::git::TreeFile;
use plait_core::globs::{within, Globs};
use plait_llm::provider::ProviderSettings;
use plait_sandbox::sandbox::{Network, ViewMode};

use super::attempts::{AttemptSpec, Attempts};
use super::resolved::*;
use super::validate_agents::{
    model_cli, push_once, resolve_agent, resolve_max_turns, resolve_timeout, TaskInputs,
};
use super::validate_settings::resolve_sandbox;
use super::PickSpec;

/// Resolves one task's settings, adding what is wrong with them to `problems`; `None` when
/// anything is.
pub(super) fn resolve_task(
    inputs: &TaskInputs<'_>,
    task: &TaskFile,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
    problems: &mut Vec<String>,
) -> Option<ResolvedTask> {
    let (plan, files) = (inputs.plan, inputs.files);
    let before = problems.len();
    let id = &task.id;
    if task.prompt.trim().is_empty() {
        problems.push(format!("task `{id}` has an empty prompt"));
    }
    let max_turns = resolve_max_turns(plan, task, problems);
    let timeout = resolve_timeout(plan, task, problems);
    if task.owns.is_empty() {
        problems.push(format!("task `{id}` owns nothing: give it `owns` globs"));
    }
    let owns = compile(id, "owns", &task.owns, files, problems);
    let context_globs = task
        .context
        .as_ref()
        .or(plan.defaults.context.as_ref())
        .cloned()
        .unwrap_or_default();
    let context = compile(id, "context", &context_globs, files, problems);
    let own_checks = task.checks.clone().unwrap_or_default();
    if own_checks.iter().any(|c| c.trim().is_empty()) {
        problems.push(format!(
            "task `{id}`: `checks` holds an empty command; give each check a command line, \
             or leave `checks` out"
        ));
    }
    let (spec, attempts) = resolve_attempts(inputs, task, providers, problems);
    if problems.len() > before {
        return None;
    }
    let spec = spec?;
    Some(ResolvedTask {
        id: id.clone(),
        prompt: task.prompt.clone(),
        agent: spec.agent.clone(),
        expect_changes: spec.expect_changes,
        max_turns,
        token_budget: task.token_budget.or(plan.defaults.token_budget),
        checkout: task.checkout.or(plan.defaults.checkout).unwrap_or_default(),
        timeout,
        owns: owns?,
        context: context?,
        owned: Vec::new(),
        sandbox: spec.sandbox.clone(),
        check_sandbox: spec.check_sandbox.clone(),
        after: Vec::new(),
        layout: Layout::default(),
        attempts,
        own_checks,
    })
}

/// The task's way (its agent and walls) and, when it runs as several attempts, theirs:
/// one way per agent of `agents`, each resolved as the task's own agent would be. How
/// the attempt is picked is settled with the reviewers (`validate`).
fn resolve_attempts(
    inputs: &TaskInputs<'_>,
    task: &TaskFile,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
    problems: &mut Vec<String>,
) -> (Option<AttemptSpec>, Option<Arc<Attempts>>) {
    let (plan, id) = (inputs.plan, &task.id);
    let agents = task.agents.as_ref().or(plan.defaults.agents.as_ref());
    if task.agents.is_some() && task.agent.is_some() {
        problems.push(format!(
            "task `{id}` sets both `agent` and `agents`: `agents` lists what its attempts run \
             in turn; keep one of them"
        ));
        return (None, None);
    }
    // A task's own `agent` wins over `[defaults] agents`.
    let agents = agents.filter(|_| task.agent.is_none());
    if agents.is_some_and(Vec::is_empty) {
        problems.push(format!(
            "task `{id}`: `agents` is empty; name at least one agent"
        ));
        return (None, None);
    }
    let count = task
        .attempts
        .or(plan.defaults.attempts)
        .or(agents.map(|a| a.len() as u32))
        .unwrap_or(1);
    if count == 0 || count > super::MAX_ATTEMPTS {
        problems.push(format!(
            "task `{id}`: attempts = {count}; give 1 to {} (1: no attempts, the task runs once)",
            super::MAX_ATTEMPTS
        ));
        return (None, None);
    }
    let specs: Vec<Option<AttemptSpec>> = match agents {
        Some(list) => list
            .iter()
            .map(|spec| {
                let mut one = task.clone();
                one.agent = Some(spec.clone());
                resolve_attempt(inputs, &one, providers, problems)
            })
            .collect(),
        None => vec![resolve_attempt(inputs, task, providers, problems)],
    };
    let Some(specs) = specs.into_iter().collect::<Option<Vec<AttemptSpec>>>() else {
        return (None, None);
    };
    let first = specs[0].clone();
    let attempts = (count > 1).then(|| {
        Arc::new(Attempts {
            count,
            specs: specs.into_iter().map(Arc::new).collect(),
            // Settled with the reviewers.
            pick: task.pick.clone().unwrap_or(PickSpec::Checks),
            fallback: plan
                .pick
                .as_ref()
                .and_then(|p| p.fallback)
                .unwrap_or_default(),
        })
    });
    (Some(first), attempts)
}

/// One agent of the task (its `agent`, or the default's) with the walls that go with it.
fn resolve_attempt(
    inputs: &TaskInputs<'_>,
    task: &TaskFile,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
    problems: &mut Vec<String>,
) -> Option<AttemptSpec> {
    let (plan, id) = (inputs.plan, &task.id);
    let before = problems.len();
    let agent = resolve_agent(inputs, task, providers, problems);
    let mut sandbox = resolve_sandbox(
        &format!("task `{id}` sandbox"),
        plan.defaults.sandbox.as_ref(),
        task.sandbox.as_ref(),
        inputs.env,
        problems,
    );
    let asked = task.sandbox.as_ref().and_then(|s| s.network).or(plan
        .defaults
        .sandbox
        .as_ref()
        .and_then(|s| s.network));
    if let Some(agent) = &agent {
        sandbox.network = asked.unwrap_or_else(|| default_network(agent));
        match (asked, agent.gateway(), model_cli(agent)) {
            (Some(Network::Off), Some(_), _) => push_once(problems, format!(
                "task `{id}`: its agent reaches its model through plait's gateway, and sandbox network = \"off\" leaves it none; \
                 set network = \"gateway\" (the default for agent CLIs: the gateway's port and nothing else) or \"on\""
            )),
            (Some(Network::Off), None, Some(name)) => push_once(problems, format!(
                "task `{id}`: {name} talks to its model over the network, and sandbox network = \"off\" leaves it none; \
                 set network = \"on\" for this task"
            )),
            (Some(Network::Gateway), None, _) => push_once(problems, format!(
                "task `{id}`: sandbox network = \"gateway\" opens the port of plait's gateway, which only an agent CLI with a model uses \
                 (claude-code, aider, {{ cli = [...], gateway = \"PROVIDER\" }}); set network = \"off\" or \"on\""
            )),
            _ => {}
        }
        if sandbox.view == ViewMode::Off
            && !matches!(agent, AgentConfig::Exec(_) | AgentConfig::Cli(_))
        {
            push_once(problems, format!(
                "task `{id}`: sandbox view = false keeps an exec or {{ cli }} agent's own command in its sparse worktree; \
                 {} runs its commands through plait, in the view; drop view = false for this task (or say \"filled\")",
                agent.describe()
            ));
        }
        if matches!(agent, AgentConfig::ClaudeCode(_)) && sandbox.network.walled() {
            // A login's own bearer, which the gateway passes through as it is.
            for name in ["ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"] {
                if !sandbox.keep_env.iter().any(|k| k == name) {
                    sandbox.keep_env.push(name.to_string());
                }
            }
        }
    }
    let check_sandbox = sandbox.for_checks(inputs.check_network);
    if problems.len() > before {
        return None;
    }
    let agent = agent?;
    let expect_changes = task
        .expect_changes
        .or(plan.defaults.expect_changes)
        .unwrap_or(!matches!(agent, AgentConfig::Exec(_)));
    Some(AttemptSpec {
        agent,
        sandbox,
        check_sandbox,
        expect_changes,
    })
}

/// What an agent's processes reach over the network when the plan does not say: nothing
/// outside for exec agents and a model's `run` commands (plait makes the model's requests
/// itself); for agent CLIs the gateway's port alone, through which they reach their
/// model; the network for Claude Code where the gateway cannot stand in (Bedrock,
/// Vertex).
fn default_network(agent: &AgentConfig) -> Network {
    match agent {
        AgentConfig::Exec(_) | AgentConfig::Model { .. } => Network::Off,
        AgentConfig::ClaudeCode(_) if agent.gateway().is_none() => Network::On,
        // A program that names no provider for the gateway reaches nothing through it.
        AgentConfig::Cli(_) if agent.gateway().is_none() => Network::Off,
        AgentConfig::Cli(_) | AgentConfig::ClaudeCode(_) | AgentConfig::Aider(_) => {
            Network::Gateway
        }
    }
}

/// Compiles one task's globs and checks that each pattern matches a tracked file.
fn compile(
    id: &str,
    field: &str,
    patterns: &[String],
    files: &[TreeFile],
    problems: &mut Vec<String>,
) -> Option<Globs> {
    let globs = match Globs::new(patterns) {
        Ok(g) => g,
        Err(e) => {
            problems.push(format!("task `{id}` {field}: {e}"));
            return None;
        }
    };
    for pattern in patterns.iter().filter(|p| !p.starts_with('!')) {
        let single = Globs::new(std::slice::from_ref(pattern)).ok()?;
        let scopes = single.scopes();
        if !within(files, &scopes).any(|i| files[i].is_blob() && single.matches(&files[i].path)) {
            problems.push(format!(
                "task `{id}` {field}: glob `{pattern}` matches no tracked file at the base"
            ));
        }
    }
    Some(globs)
}
