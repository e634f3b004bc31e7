//! Resolving who does the work: a task's agent (a model over its provider, a named agent
//! CLI, or a command), an agent CLI's `[agents.NAME]` table (`resolve_tool`, and Claude Code
//! for the manager), a role's CLI, the providers they name, each once per plan, and a
//! task's turns and timeout. The lowest of the resolution's files: `validate_settings`,
//! `validate_tasks` and the plan's own resolution (`validate`) name it; it names none of them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::tools::RunCommands;
use super::{AgentSpec, PlanFile, TaskFile, DEFAULT_MAX_TURNS, DEFAULT_TIMEOUT};
use plait_core::git::TreeFile;
use plait_llm::provider::{resolve_provider, ProviderSettings};
use plait_sandbox::sandbox::Network;

use super::resolved::*;

/// What resolving any one task needs of the plan and the repository.
pub(super) struct TaskInputs<'a> {
    pub(super) plan: &'a PlanFile,
    pub(super) files: &'a [TreeFile],
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    /// The plan's `[tools] run`, shared by its model agents.
    pub(super) run: &'a Arc<RunCommands>,
    /// What checks and command reviewers reach over the network.
    pub(super) check_network: Network,
}

/// Provider `name`, resolved once per plan (its error says what to set); `None` when it is
/// neither built in nor a `[providers.NAME]` table.
pub(super) fn provider_named(
    plan: &PlanFile,
    name: &str,
    env: &dyn Fn(&str) -> Option<String>,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
) -> Option<Result<Arc<ProviderSettings>, String>> {
    if !plan.providers.contains_key(name) && plait_llm::provider::builtin_kind(name).is_none() {
        return None;
    }
    let resolved = providers
        .entry(name.to_string())
        .or_insert_with(|| resolve_provider(name, plan.providers.get(name), env).map(Arc::new));
    Some(resolved.clone())
}

/// Adds `problem` unless it is there already (one provider can fail many tasks).
pub(super) fn push_once(problems: &mut Vec<String>, problem: String) {
    if !problems.contains(&problem) {
        problems.push(problem);
    }
}

/// The name of an agent CLI that cannot work without reaching its model.
pub(super) fn model_cli(agent: &AgentConfig) -> Option<&'static str> {
    match agent {
        AgentConfig::ClaudeCode(_) => Some("Claude Code"),
        AgentConfig::Aider(_) => Some("aider"),
        _ => None,
    }
}

/// The task's agent (its own, else the plan's default), or `None` with a problem added.
pub(super) fn resolve_agent(
    inputs: &TaskInputs<'_>,
    task: &TaskFile,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
    problems: &mut Vec<String>,
) -> Option<AgentConfig> {
    let id = &task.id;
    match task.agent.as_ref().or(inputs.plan.defaults.agent.as_ref()) {
        None => {
            problems.push(format!(
                "task `{id}` has no agent: set `agent` on the task or under [defaults], \
                 e.g. agent = \"anthropic\" or agent = {{ exec = \"CMD\" }}"
            ));
            None
        }
        Some(AgentSpec::Exec(cmd)) if cmd.command.trim().is_empty() => {
            problems.push(format!("task `{id}`: the {} command is empty", cmd.key()));
            None
        }
        Some(AgentSpec::Exec(cmd)) => {
            if let Err(e) = plait_core::globs::Globs::new(&cmd.files) {
                problems.push(format!("task `{id}`: exec_each `files`: {e}"));
                return None;
            }
            Some(AgentConfig::Exec(cmd.clone()))
        }
        Some(AgentSpec::Named(name)) => resolve_named_agent(inputs, id, name, providers, problems),
        Some(AgentSpec::Cli(spec)) => resolve_cli_agent(inputs, id, spec, providers, problems),
    }
}

/// The agent a name gives task `id`: an agent CLI plait drives, or a model provider.
fn resolve_named_agent(
    inputs: &TaskInputs<'_>,
    id: &str,
    name: &str,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
    problems: &mut Vec<String>,
) -> Option<AgentConfig> {
    let resolved = if TOOLS.iter().any(|t| t.0 == name) {
        resolve_tool(inputs.plan, inputs.env, name, providers)
    } else {
        let Some(settings) = provider_named(inputs.plan, name, inputs.env, providers) else {
            problems.push(format!(
                "task `{id}`: agent `{name}` is neither a built-in agent (anthropic, openai, \
                 claude-code, aider) nor a [providers.{name}] table"
            ));
            return None;
        };
        settings.map(|provider| AgentConfig::Model {
            provider,
            run: inputs.run.clone(),
        })
    };
    match resolved {
        Ok(agent) => Some(agent),
        Err(e) => {
            push_once(problems, e);
            None
        }
    }
}

/// A `cli` agent of task `id`: its program must be on `PATH`, and the provider it reaches
/// through the gateway must resolve.
fn resolve_cli_agent(
    inputs: &TaskInputs<'_>,
    id: &str,
    spec: &super::CliSpec,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
    problems: &mut Vec<String>,
) -> Option<AgentConfig> {
    let argv = &spec.argv;
    let gateway = match spec.gateway.as_deref() {
        None => None,
        Some(name) => match provider_named(inputs.plan, name, inputs.env, providers) {
            Some(Ok(provider)) => Some(provider),
            Some(Err(e)) => {
                push_once(problems, e);
                return None;
            }
            None => {
                problems.push(format!(
                    "task `{id}`: cli `gateway = \"{name}\"` is neither a built-in model (anthropic, openai) nor a [providers.{name}] table"
                ));
                return None;
            }
        },
    };
    match argv.first() {
        None => {
            problems.push(format!("task `{id}`: the `cli` list is empty"));
            None
        }
        Some(program)
            if !plait_sandbox::shell::findable(program, (inputs.env)("PATH").as_deref()) =>
        {
            problems.push(format!(
                "task `{id}`: the agent program `{program}` is not on PATH; install it or give its full path"
            ));
            None
        }
        Some(_) => Some(AgentConfig::Cli(Arc::new(CliSettings {
            argv: argv.to_vec(),
            gateway,
            answers_json: spec.answer.is_some(),
        }))),
    }
}

/// A `{ cli = [...], answer = "json" }` in a role that answers (`place`): its program must
/// be on `PATH`, its gateway's provider must resolve, and it must say how it answers.
pub(super) fn resolve_cli_role(
    place: &str,
    spec: &super::CliSpec,
    plan: &PlanFile,
    env: &dyn Fn(&str) -> Option<String>,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
) -> Result<Arc<CliSettings>, String> {
    let Some(program) = spec.argv.first() else {
        return Err(format!("{place}: the `cli` list is empty"));
    };
    if spec.answer.as_deref() != Some("json") {
        return Err(format!(
            "{place}: a `cli` reviewer needs answer = \"json\": its last JSON object on stdout \
             (or the file {{answer}}) is its verdict, {{ \"verdict\": \"approve\" | \"request_changes\" | \"reject\", \"summary\": \"...\" }}"
        ));
    }
    if !plait_sandbox::shell::findable(program, env("PATH").as_deref()) {
        return Err(format!(
            "{place}: the program `{program}` is not on PATH; install it or give its full path"
        ));
    }
    let gateway = match spec.gateway.as_deref() {
        None => None,
        Some(name) => Some(provider_named(plan, name, env, providers).ok_or_else(|| {
            format!("{place}: cli `gateway = \"{name}\"` is neither a built-in model (anthropic, openai) nor a [providers.{name}] table")
        })??),
    };
    Ok(Arc::new(CliSettings {
        argv: spec.argv.clone(),
        gateway,
        answers_json: true,
    }))
}

/// Resolves the agent CLI `name` (one of [`TOOLS`]) from its `[agents.NAME]` table: its
/// program must be findable and its provider resolvable, of the kind the CLI speaks.
pub(super) fn resolve_tool(
    plan: &PlanFile,
    env: &dyn Fn(&str) -> Option<String>,
    name: &str,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
) -> Result<AgentConfig, String> {
    let &(_, default_bin, default_provider) = TOOLS
        .iter()
        .find(|t| t.0 == name)
        .expect("a known agent CLI");
    let file = match name {
        "claude-code" => plan.agents.claude_code.clone(),
        _ => plan.agents.aider.clone(),
    }
    .unwrap_or_default();
    let program = file.bin.clone().unwrap_or_else(|| default_bin.to_string());
    if program.trim().is_empty() {
        return Err(format!("[agents.{name}]: `bin` is empty"));
    }
    if !plait_sandbox::shell::findable(&program, env("PATH").as_deref()) {
        return Err(format!(
            "agent `{name}` needs the program `{program}`, which is not on PATH: install it, or set `bin` under [agents.{name}] to its full path"
        ));
    }
    let provider = match file.provider.as_deref().or(default_provider) {
        None => None,
        Some(p) => {
            let resolved = provider_named(plan, p, env, providers).ok_or_else(|| {
                format!(
                    "[agents.{name}]: provider `{p}` is neither a built-in model (anthropic, openai) nor a [providers.{p}] table"
                )
            })??;
            if name == "claude-code"
                && resolved.kind != plait_llm::provider::ProviderKind::Anthropic
            {
                return Err(format!(
                    "[agents.claude-code]: provider `{p}` is not of kind \"anthropic\"; Claude Code speaks only the Anthropic API"
                ));
            }
            Some(resolved)
        }
    };
    let inherited = InheritedEnv::read(env);
    if name == "claude-code" {
        if let Some(missing) = inherited.claude_login_missing(provider.as_deref()) {
            return Err(missing);
        }
    }
    let cloud = ["CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"]
        .iter()
        .any(|k| env(k).is_some_and(|v| !v.is_empty() && v != "0"));
    let gateway = match (&provider, name) {
        (Some(p), _) => Some(p.clone()),
        (None, "claude-code") if !cloud => Some(Arc::new(plait_llm::provider::from_env(
            plait_llm::provider::ProviderKind::Anthropic,
            env,
        ))),
        (None, _) => None,
    };
    let settings = Arc::new(ToolSettings {
        program,
        model: file.model.clone(),
        provider,
        args: file.args.clone(),
        inherited,
        gateway,
    });
    Ok(match name {
        "claude-code" => AgentConfig::ClaudeCode(settings),
        _ => AgentConfig::Aider(settings),
    })
}

/// Claude Code as plan `plan`'s `[agents.claude-code]` (or the defaults) and the
/// environment give it, for a role outside a run (the manager); `model` overrides its
/// model.
pub fn claude_code_settings(
    plan: &PlanFile,
    env: &dyn Fn(&str) -> Option<String>,
    model: Option<String>,
) -> Result<Arc<ToolSettings>, String> {
    match resolve_tool(plan, env, "claude-code", &mut HashMap::new())? {
        AgentConfig::ClaudeCode(settings) => Ok(match model {
            None => settings,
            Some(model) => Arc::new(ToolSettings {
                model: Some(model),
                ..(*settings).clone()
            }),
        }),
        _ => Err("claude-code did not resolve to Claude Code".to_string()),
    }
}

/// The task's turn limit (its own, the plan's default, or plait's); zero is a problem.
pub(super) fn resolve_max_turns(
    plan: &PlanFile,
    task: &TaskFile,
    problems: &mut Vec<String>,
) -> u32 {
    let max_turns = task
        .max_turns
        .or(plan.defaults.max_turns)
        .unwrap_or(DEFAULT_MAX_TURNS);
    if max_turns == 0 {
        problems.push(format!("task `{}`: max_turns must be at least 1", task.id));
    }
    max_turns
}

/// The task's timeout (its own, the plan's default, or plait's); one that is not a
/// positive duration is a problem.
pub(super) fn resolve_timeout(
    plan: &PlanFile,
    task: &TaskFile,
    problems: &mut Vec<String>,
) -> Duration {
    match task.timeout.as_ref().or(plan.defaults.timeout.as_ref()) {
        None => DEFAULT_TIMEOUT,
        Some(text) => match humantime::parse_duration(text) {
            Ok(d) if !d.is_zero() => d,
            _ => {
                problems.push(format!(
                    "task `{}`: timeout `{text}` is not a duration such as \"90s\" or \"10m\"",
                    task.id
                ));
                DEFAULT_TIMEOUT
            }
        },
    }
}
