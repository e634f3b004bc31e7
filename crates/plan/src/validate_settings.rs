//! Resolving the run's settings: its checks (and the sandbox they and the tasks run in),
//! its review and the reviewer of each task, its groups and their supervisors. Above
//! `validate_agents` (a reviewer is an agent CLI or a model), below `validate_tasks` and
//! `validate`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::{AgentSpec, PlanFile, SandboxFile, DEFAULT_TIMEOUT};
use plait_llm::provider::ProviderSettings;
use plait_sandbox::sandbox::{parse_bytes, Limits, Network, SandboxMode, SandboxSettings, Support};

use super::resolved::*;
use super::validate_agents::{provider_named, push_once, resolve_cli_role, resolve_tool};

/// The `[checks]` of a plan, resolved (`env` gives `HOME` and `TMPDIR` for the sandbox),
/// their programs readable as in a run (see `plan::programs`; `checkout`: the
/// repository's working directory); problems fall back to defaults.
pub fn checks_of(
    plan: &PlanFile,
    env: &dyn Fn(&str) -> Option<String>,
    checkout: &std::path::Path,
) -> CheckSettings {
    let mut checks = resolve_checks(plan, env, &mut Vec::new());
    let lines = checks
        .task
        .iter()
        .chain(&checks.merged)
        .chain(&plan.setup.run);
    checks.sandbox.tools = plait_sandbox::sandbox::tools_needed_by(
        lines.map(String::as_str),
        [],
        Some(checkout),
        None,
        &plait_sandbox::sandbox::ToolEnv::from(env),
    );
    checks
}

pub(super) fn resolve_checks(
    plan: &PlanFile,
    env: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) -> CheckSettings {
    let file = &plan.checks;
    let path = env("PATH");
    for (key, cmd) in file
        .task
        .iter()
        .map(|c| ("task", c))
        .chain(file.merged.iter().map(|c| ("merged", c)))
    {
        if cmd.trim().is_empty() {
            problems.push("[checks]: a check command is empty".to_string());
        }
        for program in super::commands::named_programs(cmd) {
            if !plait_sandbox::shell::findable(program, path.as_deref()) {
                problems.push(format!(
                    "[checks] {key}: `{cmd}` runs `{program}`, which is not on PATH (a typo, or install it first)"
                ));
            }
        }
    }
    let timeout = match &file.timeout {
        None => DEFAULT_TIMEOUT,
        Some(text) => match humantime::parse_duration(text) {
            Ok(d) if !d.is_zero() => d,
            _ => {
                problems.push(format!(
                    "[checks]: timeout `{text}` is not a duration such as \"10m\""
                ));
                DEFAULT_TIMEOUT
            }
        },
    };
    if file.jobs == Some(0) {
        problems.push("[checks]: jobs must be at least 1".to_string());
    }
    let network = match file.network.unwrap_or(Network::Off) {
        Network::Gateway => {
            problems.push(
                "[checks]: network = \"gateway\" is for agent CLIs reaching their model; checks and reviewers take \"off\" or \"on\""
                    .to_string(),
            );
            Network::Off
        }
        network => network,
    };
    CheckSettings {
        task: file.task.clone(),
        merged: file.merged.clone(),
        jobs: file
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
            .max(1),
        timeout,
        sandbox: resolve_sandbox(
            "[defaults] sandbox",
            plan.defaults.sandbox.as_ref(),
            None,
            env,
            problems,
        )
        .for_checks(network),
        network,
        bisect: file.bisect.unwrap_or(true),
        rework: file.rework.unwrap_or(0),
        base_ignored: file.base == Some(super::BaseChecks::Ignore),
    }
}

/// The walls of a task's processes (or, without `task`, of the merged checks): the mode of
/// the task's table over `[defaults]`', the `writable` paths of both, each absolute (`~/`
/// is `HOME`), and private temporary directories under `TMPDIR`. `required` on a system that
/// cannot confine is a problem.
pub(super) fn resolve_sandbox(
    place: &str,
    defaults: Option<&SandboxFile>,
    task: Option<&SandboxFile>,
    env: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) -> SandboxSettings {
    let mode = task
        .and_then(|t| t.mode)
        .or(defaults.and_then(|d| d.mode))
        .unwrap_or_default();
    let home = env("HOME").filter(|h| h.starts_with('/'));
    let mut paths = |key: &str, of: fn(&SandboxFile) -> &Vec<String>| {
        let mut out: Vec<PathBuf> = Vec::new();
        for path in defaults.into_iter().chain(task).flat_map(of) {
            let expanded = match (path.strip_prefix('~'), &home) {
                (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
                    Some(PathBuf::from(format!("{home}{rest}")))
                }
                (Some(_), None) => {
                    problems.push(format!(
                        "{place}: {key} path `{path}` starts with `~`, but HOME is not set to an absolute path"
                    ));
                    continue;
                }
                _ if path.starts_with('/') => Some(PathBuf::from(path)),
                _ => None,
            };
            match expanded {
                Some(p) if !out.contains(&p) => out.push(p),
                Some(_) => {}
                None => problems.push(format!(
                    "{place}: {key} path `{path}` must be absolute or start with `~/`"
                )),
            }
        }
        out
    };
    let writable = paths("writable", |f| &f.writable);
    let readable = paths("readable", |f| &f.readable);
    let sockets = paths("sockets", |f| &f.sockets);
    if mode == SandboxMode::Required {
        if let Support::Missing(why) = plait_sandbox::sandbox::support() {
            push_once(
                problems,
                format!(
                    "sandbox mode \"required\", but this system cannot confine processes: {why}; \
                     run plait where Landlock is available, or set mode = \"auto\" to run unconfined with a warning"
                ),
            );
        }
    }
    let temp_root = env("TMPDIR")
        .filter(|t| t.starts_with('/'))
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    let mut ports: Vec<u16> = Vec::new();
    for &port in defaults.into_iter().chain(task).flat_map(|f| &f.ports) {
        if port == 0 {
            push_once(
                problems,
                format!("{place}: ports: 0 is no port; name the port the service listens on"),
            );
        } else if !ports.contains(&port) {
            ports.push(port);
        }
    }
    let mut keep_env: Vec<String> = Vec::new();
    for name in defaults.into_iter().chain(task).flat_map(|f| &f.keep_env) {
        if name.is_empty() || name.contains('=') {
            problems.push(format!(
                "{place}: keep_env: `{name}` is not a variable's name"
            ));
        } else if !keep_env.contains(name) {
            keep_env.push(name.clone());
        }
    }
    let limits = resolve_limits(place, defaults, task, problems);
    SandboxSettings {
        mode,
        limits,
        view: task
            .and_then(|t| t.view)
            .or(defaults.and_then(|d| d.view))
            .unwrap_or_default(),
        writable,
        readable,
        temp_root,
        // The network is the caller's: a task's depends on its agent, the checks' on
        // `[checks] network`.
        ports,
        sockets,
        keep_env,
        ..SandboxSettings::default()
    }
}

/// `limits` of the task's table over `[defaults]`', key by key, over the standard ones.
fn resolve_limits(
    place: &str,
    defaults: Option<&SandboxFile>,
    task: Option<&SandboxFile>,
    problems: &mut Vec<String>,
) -> Limits {
    let mut limits = Limits::standard();
    for file in defaults.into_iter().chain(task) {
        let Some(set) = &file.limits else {
            continue;
        };
        if let Some(value) = &set.pids {
            match value {
                toml::Value::Integer(n) if *n >= 1 && *n <= i64::from(u32::MAX) => {
                    limits.pids = Some(*n as u32)
                }
                toml::Value::String(off) if off == "off" => limits.pids = None,
                other => problems.push(format!(
                    "{place}: limits: pids = {other} is not a number of processes (at least 1) or \"off\""
                )),
            }
        }
        if let Some(value) = &set.memory {
            let parsed = match value {
                toml::Value::String(off) if off == "off" => Some(None),
                toml::Value::String(text) => parse_bytes(text).map(Some),
                toml::Value::Integer(n) if *n > 0 => Some(Some(*n as u64)),
                _ => None,
            };
            match parsed {
                Some(Some(bytes)) if bytes < 1 << 20 => problems.push(format!(
                    "{place}: limits: memory = {value} is less than 1M, too little for any program"
                )),
                Some(memory) => limits.memory = memory,
                None => problems.push(format!(
                    "{place}: limits: memory = {value} is not a size (\"4G\", \"512M\", bytes) or \"off\""
                )),
            }
        }
    }
    limits
}

pub(super) fn resolve_review(
    plan: &PlanFile,
    env: &dyn Fn(&str) -> Option<String>,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
    problems: &mut Vec<String>,
) -> ReviewSettings {
    let file = plan.review.clone().unwrap_or_default();
    let reviewer = match &file.agent {
        None => Reviewer::Worker,
        Some(spec) => resolve_reviewer("[review]", spec, plan, env, providers, problems),
    };
    ReviewSettings {
        reviewer,
        rounds: file.rounds.unwrap_or(2),
        rounds_set: file.rounds.is_some(),
    }
}

pub(super) fn resolve_groups(
    plan: &PlanFile,
    review: &ReviewSettings,
    env: &dyn Fn(&str) -> Option<String>,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
    problems: &mut Vec<String>,
) -> GroupSettings {
    let file = plan.groups.clone().unwrap_or_default();
    if file.threshold == Some(0) {
        problems.push("[groups]: threshold must be at least 1".to_string());
    }
    if file.count == Some(0) {
        problems.push("[groups]: count must be at least 1".to_string());
    }
    let reviewer = match &file.review {
        None => review.reviewer.clone(),
        Some(spec) => resolve_reviewer("[groups] review", spec, plan, env, providers, problems),
    };
    GroupSettings {
        threshold: file.threshold.unwrap_or(DEFAULT_GROUP_THRESHOLD).max(1),
        count: file.count.filter(|&n| n > 0),
        reviewer,
        rounds: file.rounds.unwrap_or(1),
    }
}

/// A reviewer named in the plan (`where` says which table, for messages).
fn resolve_reviewer(
    place: &str,
    spec: &AgentSpec,
    plan: &PlanFile,
    env: &dyn Fn(&str) -> Option<String>,
    providers: &mut HashMap<String, Result<Arc<ProviderSettings>, String>>,
    problems: &mut Vec<String>,
) -> Reviewer {
    match spec {
        AgentSpec::Named(name) if name == "off" => Reviewer::Off,
        AgentSpec::Named(name) if name == "claude-code" => {
            match resolve_tool(plan, env, name, providers) {
                Ok(AgentConfig::ClaudeCode(settings)) => Reviewer::ClaudeCode(settings),
                Ok(_) => Reviewer::Off,
                Err(e) => {
                    push_once(problems, format!("{place}: {e}"));
                    Reviewer::Off
                }
            }
        }
        AgentSpec::Exec(cmd) if cmd.command.trim().is_empty() => {
            problems.push(format!("{place}: the exec command is empty"));
            Reviewer::Off
        }
        AgentSpec::Exec(cmd) if cmd.each_file => {
            problems.push(format!(
                "{place}: a reviewer runs once on the whole diff, not per file; use {{ exec = \"CMD\" }}"
            ));
            Reviewer::Off
        }
        AgentSpec::Exec(cmd) => Reviewer::Command(cmd.command.clone()),
        AgentSpec::Named(name) => match provider_named(plan, name, env, providers) {
            None => {
                problems.push(format!(
                    "{place}: agent `{name}` is neither \"off\", a built-in model (anthropic, openai) nor a [providers.{name}] table"
                ));
                Reviewer::Off
            }
            Some(Ok(p)) => Reviewer::Model(p),
            Some(Err(e)) => {
                push_once(problems, e);
                Reviewer::Off
            }
        },
        AgentSpec::Cli(spec) => match resolve_cli_role(place, spec, plan, env, providers) {
            Ok(settings) => Reviewer::Cli(settings),
            Err(e) => {
                push_once(problems, e);
                Reviewer::Off
            }
        },
    }
}
