//! Checking a plan against the repository: ids that can be branch names, agents that exist,
//! globs that match tracked files, and ownership that no two tasks share.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use git2::Repository;

use super::layout::Layout;
use super::setup::resolve_setup;
use super::tools::RunCommands;
use super::{
    AgentSpec, Checkout, PlanError, PlanFile, SandboxFile, TaskFile, DEFAULT_MAX_TURNS,
    DEFAULT_TIMEOUT,
};
use plait_core::git::{flatten_tree, TreeFile};
use plait_core::globs::{within, Globs};
use plait_llm::provider::{resolve_provider, ProviderSettings};
use plait_sandbox::sandbox::{Network, SandboxMode, SandboxSettings, Support};

use super::resolved::*;

/// Task ids that would collide with branches plait makes itself.
const RESERVED_IDS: &[&str] = &["merged"];

/// Validates `plan` (read from `source`) against `repo`, collecting every problem; no
/// environment variable is visible, so model providers without keys are refused.
pub fn resolve(
    repo: &Repository,
    plan: PlanFile,
    source: &Path,
) -> Result<ResolvedPlan, PlanError> {
    resolve_with_env(repo, plan, source, &|_| None)
}

/// A run's kept plan (its text `text`, read from `source`) resolved again against the
/// commit `base` the run started from, wherever its base branch is now: for resuming a
/// run, sending a task back, or a worker taking a queued run's tasks.
pub fn resolve_kept(
    repo: &Repository,
    text: &str,
    source: &Path,
    base: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ResolvedPlan, PlanError> {
    let mut parsed = super::parse(text, source)?;
    parsed.base = Some(base.to_string());
    resolve_with_env(repo, parsed, source, env)
}

/// Validates `plan` against `repo`; `env` looks up environment variables (API keys and
/// base URLs of model providers).
pub fn resolve_with_env(
    repo: &Repository,
    plan: PlanFile,
    source: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ResolvedPlan, PlanError> {
    let base_name = match &plan.base {
        Some(base) => base.clone(),
        None => current_branch(repo).unwrap_or_else(|| "HEAD".to_string()),
    };
    let base = repo
        .revparse_single(&base_name)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| PlanError::BaseNotFound {
            path: source.to_path_buf(),
            base: base_name.clone(),
        })?;
    let files = flatten_tree(&base.tree()?)?;

    let mut problems = Vec::new();
    if plan.tasks.is_empty() {
        problems.push("it has no [[task]] entries".to_string());
    }
    check_ids(&plan.tasks, &mut problems);

    let mut providers: HashMap<String, Result<Arc<ProviderSettings>, String>> = HashMap::new();
    let run = Arc::new(RunCommands::resolve(&plan.tools, &mut problems));
    let mut tasks = Vec::with_capacity(plan.tasks.len());
    for task in &plan.tasks {
        let context = TaskInputs {
            plan: &plan,
            files: &files,
            env,
            run: &run,
            check_network: plan.checks.network.unwrap_or(Network::Off),
        };
        if let Some(resolved) = resolve_task(&context, task, &mut providers, &mut problems) {
            tasks.push(resolved);
        }
    }
    let mut checks = resolve_checks(&plan, env, &mut problems);
    let review = resolve_review(&plan, env, &mut providers, &mut problems);
    let groups = resolve_groups(&plan, &review, env, &mut providers, &mut problems);
    let path = env("PATH");
    let setup = resolve_setup(
        &plan.setup,
        &files,
        checks.timeout,
        path.as_deref(),
        &mut problems,
    );
    withhold_keys(&providers, &mut tasks, &mut checks);
    read_git_dir(repo, &mut tasks, &mut checks);
    if problems.is_empty() {
        super::after::resolve_after(&plan, &mut tasks, &mut problems);
    }
    if problems.is_empty() {
        assign_owners(&mut tasks, &files, &mut problems);
        for task in &mut tasks {
            let full = task.checkout == Checkout::Full;
            task.layout = Layout::new(&files, &task.owns, &task.context, full);
        }
    }
    if !problems.is_empty() {
        return Err(PlanError::Invalid {
            path: source.to_path_buf(),
            problems,
        });
    }
    Ok(ResolvedPlan {
        goal: plan.goal.clone(),
        base: base.id(),
        base_name,
        tasks,
        files: Arc::new(files),
        checks,
        review,
        groups,
        setup,
    })
}

/// The keys of the plan's providers are plait's: its own requests and its gateway use
/// them in the agents' place, so no process of a task gets their variables (an agent that
/// talks to its model without the gateway is handed its key by plait, named).
fn withhold_keys(
    providers: &HashMap<String, Result<Arc<ProviderSettings>, String>>,
    tasks: &mut [ResolvedTask],
    checks: &mut CheckSettings,
) {
    // The plan's providers, and Claude Code's own key, which the gateway holds for it.
    let mut names: Vec<String> = providers
        .values()
        .filter_map(|p| p.as_ref().ok())
        .chain(tasks.iter().filter_map(|t| t.agent.gateway()))
        .filter(|p| p.api_key.is_some() && !p.key_env.is_empty())
        .map(|p| p.key_env.clone())
        .collect();
    names.sort();
    names.dedup();
    for sandbox in tasks
        .iter_mut()
        .flat_map(|t| [&mut t.sandbox, &mut t.check_sandbox])
        .chain([&mut checks.sandbox])
    {
        for name in &names {
            if !sandbox.keep_env.contains(name) && !sandbox.withhold.contains(name) {
                sandbox.withhold.push(name.clone());
            }
        }
    }
}

/// Every process of a task reads the repository's git directory (its checkouts' objects,
/// refs and config), but not plait's store in it (other runs' logs and transcripts).
fn read_git_dir(repo: &Repository, tasks: &mut [ResolvedTask], checks: &mut CheckSettings) {
    let entries = plait_sandbox::sandbox::readable_git_dir(repo.commondir());
    for sandbox in tasks
        .iter_mut()
        .flat_map(|t| [&mut t.sandbox, &mut t.check_sandbox])
        .chain([&mut checks.sandbox])
    {
        for entry in &entries {
            if !sandbox.readable.contains(entry) {
                sandbox.readable.push(entry.clone());
            }
        }
    }
}

/// The `[checks]` of a plan, resolved (`env` gives `HOME` and `TMPDIR` for the sandbox);
/// problems fall back to defaults.
pub fn checks_of(plan: &PlanFile, env: &dyn Fn(&str) -> Option<String>) -> CheckSettings {
    resolve_checks(plan, env, &mut Vec::new())
}

fn resolve_checks(
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
fn resolve_sandbox(
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
    SandboxSettings {
        mode,
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

fn resolve_review(
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

fn resolve_groups(
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

/// A `{ cli = [...], answer = "json" }` in a role that answers (`place`): its program must
/// be on `PATH`, its gateway's provider must resolve, and it must say how it answers.
fn resolve_cli_role(
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

/// The branch HEAD points at, if it points at one.
fn current_branch(repo: &Repository) -> Option<String> {
    let head = repo.head().ok()?;
    if head.is_branch() {
        head.shorthand().ok().map(str::to_string)
    } else {
        None
    }
}

/// Why `id` cannot name a task, if it cannot.
pub fn id_problem(id: &str) -> Option<String> {
    let why = if id.is_empty() {
        "is empty"
    } else if id.len() > 64 {
        "is longer than 64 characters"
    } else if !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        "must start with a letter or digit"
    } else if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        "may only hold letters, digits, `-`, `_` and `.`"
    } else if id.contains("..") || id.ends_with('.') || id.ends_with(".lock") {
        "cannot contain `..` or end in `.` or `.lock` (it becomes a branch name)"
    } else if RESERVED_IDS.contains(&id) || id.starts_with("group-") || id.starts_with("start-") {
        "is reserved for plait's own branches"
    } else {
        return None;
    };
    Some(format!("task id `{id}` {why}"))
}

fn check_ids(tasks: &[TaskFile], problems: &mut Vec<String>) {
    let mut seen: HashMap<String, &str> = HashMap::new();
    for task in tasks {
        if let Some(p) = id_problem(&task.id) {
            problems.push(p);
            continue;
        }
        let folded = task.id.to_ascii_lowercase();
        if let Some(first) = seen.insert(folded, &task.id) {
            if first == task.id {
                problems.push(format!("task id `{}` is used twice", task.id));
            } else {
                problems.push(format!(
                    "task ids `{first}` and `{}` differ only in case (they become branch names)",
                    task.id
                ));
            }
        }
    }
}

/// What resolving any one task needs of the plan and the repository.
struct TaskInputs<'a> {
    plan: &'a PlanFile,
    files: &'a [TreeFile],
    env: &'a dyn Fn(&str) -> Option<String>,
    /// The plan's `[tools] run`, shared by its model agents.
    run: &'a Arc<RunCommands>,
    /// What checks and command reviewers reach over the network.
    check_network: Network,
}

/// Resolves one task's settings, adding what is wrong with them to `problems`; `None` when
/// anything is.
fn resolve_task(
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
    let agent = resolve_agent(inputs, task, providers, problems);
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
            (Some(Network::Off), Some(_), _) => problems.push(format!(
                "task `{id}`: its agent reaches its model through plait's gateway, and sandbox network = \"off\" leaves it none; \
                 set network = \"gateway\" (the default for agent CLIs: the gateway's port and nothing else) or \"on\""
            )),
            (Some(Network::Off), None, Some(name)) => problems.push(format!(
                "task `{id}`: {name} talks to its model over the network, and sandbox network = \"off\" leaves it none; \
                 set network = \"on\" for this task"
            )),
            (Some(Network::Gateway), None, _) => problems.push(format!(
                "task `{id}`: sandbox network = \"gateway\" opens the port of plait's gateway, which only an agent CLI with a model uses \
                 (claude-code, aider, {{ cli = [...], gateway = \"PROVIDER\" }}); set network = \"off\" or \"on\""
            )),
            _ => {}
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
    Some(ResolvedTask {
        id: id.clone(),
        prompt: task.prompt.clone(),
        agent,
        expect_changes,
        max_turns,
        token_budget: task.token_budget.or(plan.defaults.token_budget),
        checkout: task.checkout.or(plan.defaults.checkout).unwrap_or_default(),
        timeout,
        owns: owns?,
        context: context?,
        owned: Vec::new(),
        sandbox,
        check_sandbox,
        after: Vec::new(),
        layout: Layout::default(),
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

/// The name of an agent CLI that cannot work without reaching its model.
fn model_cli(agent: &AgentConfig) -> Option<&'static str> {
    match agent {
        AgentConfig::ClaudeCode(_) => Some("Claude Code"),
        AgentConfig::Aider(_) => Some("aider"),
        _ => None,
    }
}

/// The task's agent (its own, else the plan's default), or `None` with a problem added.
fn resolve_agent(
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

/// The task's turn limit (its own, the plan's default, or plait's); zero is a problem.
fn resolve_max_turns(plan: &PlanFile, task: &TaskFile, problems: &mut Vec<String>) -> u32 {
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
fn resolve_timeout(plan: &PlanFile, task: &TaskFile, problems: &mut Vec<String>) -> Duration {
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

/// Provider `name`, resolved once per plan (its error says what to set); `None` when it is
/// neither built in nor a `[providers.NAME]` table.
fn provider_named(
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
fn push_once(problems: &mut Vec<String>, problem: String) {
    if !problems.contains(&problem) {
        problems.push(problem);
    }
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

/// Resolves the agent CLI `name` (one of [`TOOLS`]) from its `[agents.NAME]` table: its
/// program must be findable and its provider resolvable, of the kind the CLI speaks.
fn resolve_tool(
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

/// Lists each task's owned files, and names every file that two tasks both own. Each task
/// looks only under the directories its globs can reach, so the cost follows what the
/// tasks own, not the size of the repository.
fn assign_owners(tasks: &mut [ResolvedTask], files: &[TreeFile], problems: &mut Vec<String>) {
    let waits = super::after::waits_for(tasks);
    // Two tasks may own one file only when one comes after the other: the later starts
    // from the earlier's result.
    let ordered = |a: usize, b: usize| waits[a].contains(&b) || waits[b].contains(&a);
    let mut shared: BTreeMap<(usize, usize), Vec<&str>> = BTreeMap::new();
    // The owners of each file met so far, by index into `files`.
    let mut owners: HashMap<usize, Vec<usize>> = HashMap::new();
    for (t, task) in tasks.iter_mut().enumerate() {
        let scopes = task.owns.scopes();
        for i in within(files, &scopes) {
            let file = &files[i];
            if !file.is_blob() || !task.owns.matches(&file.path) {
                continue;
            }
            task.owned.push(file.path.clone());
            let before = owners.entry(i).or_default();
            for &o in before.iter() {
                if !ordered(o, t) {
                    shared.entry((o, t)).or_default().push(&file.path);
                }
            }
            before.push(t);
        }
    }
    for paths in shared.values_mut() {
        paths.sort_unstable();
    }
    for ((a, b), paths) in shared {
        let shown: Vec<&str> = paths.iter().take(5).copied().collect();
        let more = if paths.len() > 5 {
            format!(" and {} more", paths.len() - 5)
        } else {
            String::new()
        };
        problems.push(format!(
            "tasks `{}` and `{}` both own {} file{}: {}{more}; make their `owns` globs disjoint",
            tasks[a].id,
            tasks[b].id,
            paths.len(),
            if paths.len() == 1 { "" } else { "s" },
            shown.join(", "),
        ));
    }
}
