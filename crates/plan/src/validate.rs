//! Checking a plan against the repository: ids that can be branch names, agents that exist,
//! globs that match tracked files, and ownership that no two tasks share. The types it
//! resolves into live in `plan::resolved`.
//!
//! Here the plan as a whole (`resolve_with_env`: its base, ids, setup, checks, review,
//! groups, every task, then ownership); below it, each naming only those after it,
//! `validate_tasks` (one task), `validate_settings` (the run's checks, sandbox, review and
//! groups) and `validate_agents` (agents, agent CLIs and their providers).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use git2::Repository;

use super::layout::Layout;
use super::setup::resolve_setup;
use super::tools::RunCommands;
use super::{Checkout, PickSpec, PlanError, PlanFile, TaskFile};
use plait_core::git::{flatten_tree, TreeFile};
use plait_core::globs::within;
use plait_llm::provider::ProviderSettings;
use plait_sandbox::sandbox::Network;

use super::resolved::*;
use super::validate_agents::TaskInputs;
use super::validate_settings::{resolve_checks, resolve_groups, resolve_review};
use super::validate_tasks::resolve_task;

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
    if let Some(workdir) = repo.workdir() {
        super::setup::check_include_links(workdir, &setup.include, &mut problems);
    }
    settle_picks(&plan, &review, &mut tasks, &mut problems);
    withhold_keys(&providers, &mut tasks, &mut checks);
    read_git_dir(repo, &mut tasks, &mut checks);
    super::programs::read_tools(repo, env, &mut tasks, &mut checks, &review, &groups, &setup);
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
        .chain(
            tasks
                .iter()
                .flat_map(ResolvedTask::agents)
                .filter_map(AgentConfig::gateway),
        )
        .filter(|p| p.api_key.is_some() && !p.key_env.is_empty())
        .map(|p| p.key_env.clone())
        .collect();
    names.sort();
    names.dedup();
    for sandbox in tasks
        .iter_mut()
        .flat_map(ResolvedTask::walls_mut)
        .chain([&mut checks.sandbox])
    {
        for name in &names {
            if !sandbox.keep_env.contains(name) && !sandbox.withhold.contains(name) {
                sandbox.withhold.push(name.clone());
            }
        }
    }
}

/// Every process of a task reads the repository's git directory as its checkouts' git does
/// (objects, refs, the worktrees' own directories, the config without its credentials),
/// never plait's store in it (other runs' logs and transcripts), whether it exists yet or
/// not: the walls take git's own entries by name (`plait_sandbox::sandbox` decides them).
/// Inside a view the checkout's path shows the view (`SandboxSettings::checkout`).
fn read_git_dir(repo: &Repository, tasks: &mut [ResolvedTask], checks: &mut CheckSettings) {
    let git_dir = repo.commondir().to_path_buf();
    let checkout = repo.workdir().map(|w| w.components().collect::<PathBuf>());
    for sandbox in tasks
        .iter_mut()
        .flat_map(ResolvedTask::walls_mut)
        .chain([&mut checks.sandbox])
    {
        sandbox.git_dir = Some(git_dir.clone());
        sandbox.checkout = checkout.clone();
    }
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

/// How each task with attempts is picked: its own `pick`, else `[pick] by`, else by its
/// reviewer when it has one and by its checks when not. A pick by review needs a reviewer.
fn settle_picks(
    plan: &PlanFile,
    review: &ReviewSettings,
    tasks: &mut [ResolvedTask],
    problems: &mut Vec<String>,
) {
    for task in tasks.iter_mut() {
        let Some(attempts) = &task.attempts else {
            continue;
        };
        let Some(file) = plan.tasks.iter().find(|f| f.id == task.id) else {
            continue;
        };
        let reviewed = !matches!(review.reviewer_for(task), Reviewer::Off);
        let asked = file
            .pick
            .clone()
            .or_else(|| plan.pick.as_ref().and_then(|p| p.by.clone()));
        let pick = match asked {
            Some(PickSpec::Review) if !reviewed => {
                problems.push(format!(
                    "task `{}` picks its attempt by review, and it has no reviewer: set [review] \
                     agent, or pick = \"checks\" (the first attempt that passes) or \
                     pick = {{ command = \"CMD\" }}",
                    task.id
                ));
                continue;
            }
            Some(pick) => pick,
            None if reviewed => PickSpec::Review,
            None => PickSpec::Checks,
        };
        let mut settled = (**attempts).clone();
        settled.pick = pick;
        task.attempts = Some(Arc::new(settled));
    }
}

/// Why `id` cannot name a task, if it cannot.
pub(crate) fn id_problem(id: &str) -> Option<String> {
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
