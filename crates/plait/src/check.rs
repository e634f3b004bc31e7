//! `plait check`: ownership (stage 4), the merge (7) and the gate (8) on a run's existing
//! branches, for git hooks and CI.
//! Each task branch must change only what its task owns; the branches that belong in the
//! result are merged with each other (again, if decisions or branches changed) and with the
//! target branch; the merged checks run on that result; and the run's own gate must be
//! green. Nothing is landed and no branch but the run's merged branch is written.
//! A merge in progress (a hook's) is judged on its own: only the tasks it brings in, by
//! history or, through [`work`], by content.
//! These are the steps; `ops::check` is the use case that strings them together with the
//! orchestrator's (collecting branches moved by hand, merging again) and with the run's
//! record.

pub mod work;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};
use serde::Serialize;

use plait_core::cancel::Cancel;
use plait_core::git::signatures;
use plait_core::globs::Globs;
use plait_core::refs::branch_ref;
use plait_core::state::Conflict;
use plait_core::state::RunDir;
use plait_core::state::{CheckResult, RunState};
use plait_plan::{CheckSettings, PlanFile};
use plait_run::orchestrator::RunError;
use plait_stages::collect::outside_ownership;
use plait_stages::context::Context;
use plait_stages::land::{gate, Blocker};
use plait_stages::merge;
use plait_stages::review::checks::{CheckJob, CheckPool};

/// What `plait check` found.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// The run checked, or `N branch(es)` for branches checked outside a run.
    pub run: String,
    /// The branch it was checked against.
    pub target: String,
    /// Whether nothing below keeps the merge from going ahead.
    pub pass: bool,
    /// Paths a task branch changes outside its task's ownership, as `task: path`.
    pub ownership: Vec<String>,
    /// Conflicts between the run's result and the target.
    pub conflicts: Vec<Conflict>,
    /// The merged checks, on the result merged with the target.
    pub checks: Vec<CheckResult>,
    /// Whatever else keeps the run from landing (as sentences in the JSON).
    #[serde(serialize_with = "gate_lines")]
    pub gate: Vec<Blocker>,
    /// For a merge in progress: the run's tasks whose commits the merge brings in (or the
    /// target already has), and those with commits it leaves out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeScope>,
}

impl CheckReport {
    /// Whether nothing in the report keeps the merge from going ahead.
    fn passes(&self) -> bool {
        self.ownership.is_empty()
            && self.conflicts.is_empty()
            && self.checks.iter().all(|c| c.passed)
            && self.gate.is_empty()
    }
}

/// The run's merged checks on `commit`, in a checks pool of their own under `run_dir`
/// that is removed again, logging under `logs`.
async fn merged_checks_once(
    context: &Context,
    run_dir: &RunDir,
    state: &RunState,
    commit: Oid,
    checks: &CheckSettings,
    logs: &Path,
) -> Vec<CheckResult> {
    let pool = CheckPool::for_run(run_dir.checks(), context, checks.jobs, state);
    let (_interrupt, cancel) = Cancel::new();
    let results =
        plait_stages::review::checks::checks_at(&pool, state, commit, checks, logs, &cancel).await;
    pool.remove_all();
    results
}

/// Which of a run's tasks a merge includes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MergeScope {
    /// The tasks in the merge.
    pub included: Vec<String>,
    /// The tasks left out of it.
    pub left_out: Vec<String>,
}

/// A merge git is about to commit (at its `pre-merge-commit` hook), or any other move of a
/// branch that brings a run's work in: the tree being committed, the target's commit, the
/// commits merged into it, and the run's tasks it brings in by content.
#[derive(Debug, Clone)]
pub struct MergeInProgress {
    pub(crate) tree: Oid,
    pub(crate) target: Oid,
    pub(crate) heads: Vec<Oid>,
    /// Tasks whose changes the tree holds though no tip reaches their commits (a squash
    /// merge, a cherry-pick, a rebase, part of a task's files): included all the same.
    pub brings: Vec<String>,
}

/// Judges exactly the merge in progress against run `state`: ownership of every task
/// branch it brings in, the gate's troubles of those tasks (not of the ones it leaves
/// out), and the plan's merged checks on the very tree git is about to commit.
pub(crate) async fn check_merge(
    context: Context,
    run_dir: RunDir,
    state: &RunState,
    into: &str,
    merging: &MergeInProgress,
    checks: &CheckSettings,
    owns: &HashMap<String, Globs>,
) -> Result<CheckReport, RunError> {
    let (scope, ownership, commit) = {
        let (context, snapshot, merging, owns) = (
            context.clone(),
            state.clone(),
            merging.clone(),
            owns.clone(),
        );
        tokio::task::spawn_blocking(move || scope_of(&context, &snapshot, &merging, &owns))
            .await
            .map_err(RunError::panicked("weighing what the merge brings in"))??
    };
    let gate: Vec<Blocker> = plait_stages::land::blockers(state)
        .into_iter()
        .filter_map(|b| match b {
            Blocker::Tasks { trouble, tasks } => {
                let tasks: Vec<String> = tasks
                    .into_iter()
                    .filter(|t| scope.included.contains(t))
                    .collect();
                (!tasks.is_empty()).then_some(Blocker::Tasks { trouble, tasks })
            }
            _ => None,
        })
        .collect();
    let mut report = CheckReport {
        run: state.id.clone(),
        target: into.to_string(),
        pass: false,
        ownership,
        conflicts: Vec::new(),
        checks: Vec::new(),
        gate,
        merge: Some(scope),
    };
    if !checks.merged.is_empty() {
        let logs = run_dir.check_in_progress();
        report.checks = merged_checks_once(&context, &run_dir, state, commit, checks, &logs).await;
    }
    report.pass = report.passes();
    Ok(report)
}

/// The tasks a merge in progress includes (their commits reached from a tip, or brought in
/// by content) and leaves out, the paths the included ones change outside their
/// ownership, and a commit (on no branch) of the tree being merged.
fn scope_of(
    context: &Context,
    state: &RunState,
    merging: &MergeInProgress,
    owns: &HashMap<String, Globs>,
) -> Result<(MergeScope, Vec<String>, Oid), RunError> {
    let repo = context.repo()?;
    let base = Oid::from_str(&state.base)?;
    let base_tree = repo.find_commit(base).and_then(|c| c.tree())?;
    let tips: Vec<Oid> = std::iter::once(merging.target)
        .chain(merging.heads.iter().copied())
        .collect();
    let mut scope = MergeScope::default();
    let mut outside = Vec::new();
    for task in &state.tasks {
        let Some(commit) = task.commit.as_deref().and_then(|c| Oid::from_str(c).ok()) else {
            continue;
        };
        let reached = merging.brings.contains(&task.id) || reaches(&repo, &tips, commit)?;
        if !reached {
            scope.left_out.push(task.id.clone());
            continue;
        }
        scope.included.push(task.id.clone());
        let from = plait_stages::collect::start_tree(&repo, &base_tree, task)?;
        outside.extend(outside_ownership(&repo, &from, commit, &task.id, owns)?);
    }
    let who = signatures(&repo)?;
    let parents: Vec<git2::Commit<'_>> = tips
        .iter()
        .map(|&t| repo.find_commit(t))
        .collect::<Result<_, _>>()?;
    let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
    let tree = repo.find_tree(merging.tree)?;
    let commit = repo.commit(
        None,
        &who.author,
        &who.committer,
        "plait check: the merge in progress",
        &tree,
        &parents,
    )?;
    Ok((scope, outside, commit))
}

/// Whether one of `tips` is `commit` or descends from it.
fn reaches(repo: &Repository, tips: &[Oid], commit: Oid) -> Result<bool, git2::Error> {
    for &tip in tips {
        if tip == commit || repo.graph_descendant_of(tip, commit)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn gate_lines<S: serde::Serializer>(gate: &[Blocker], serializer: S) -> Result<S::Ok, S::Error> {
    // The run's id is not needed by any blocker the check report holds in words.
    plait_stages::report::serialize_blockers(gate, "", serializer)
}

/// A branch to check, and the task whose ownership it must keep to.
#[derive(Debug, Clone)]
pub struct TaskBranch {
    pub(crate) task: String,
    pub(crate) branch: String,
}

/// Checks branches made outside a run against a plan: ownership, their merge with each
/// other onto `base` and with `into`, and the merged checks on the result.
pub(crate) async fn check_branches(
    context: Context,
    scratch: PathBuf,
    base: Oid,
    branches: &[TaskBranch],
    into: &str,
    checks: &CheckSettings,
    owns: &HashMap<String, Globs>,
) -> Result<CheckReport, RunError> {
    let label = format!("{} branch(es)", branches.len());
    let merged = {
        let (context, branches, owns) = (context.clone(), branches.to_vec(), owns.clone());
        tokio::task::spawn_blocking(move || merge_branches(&context, base, &branches, &owns))
            .await
            .map_err(RunError::panicked("merging the branches"))??
    };
    let (ownership, outcome) = merged;
    let mut report = CheckReport {
        run: label,
        target: into.to_string(),
        pass: false,
        ownership,
        conflicts: outcome.conflicts.clone(),
        checks: Vec::new(),
        gate: Vec::new(),
        merge: None,
    };
    if !report.conflicts.is_empty() {
        report
            .gate
            .push(Blocker::LeftOutByConflicts(outcome.excluded.clone()));
    }
    let target = {
        let (context, into, merged) = (context.clone(), into.to_string(), outcome.commit.clone());
        tokio::task::spawn_blocking(move || with_target(&context, &into, &merged))
            .await
            .map_err(RunError::panicked("merging with the target"))??
    };
    let commit = match target {
        Target::Conflicts(conflicts) => {
            report.conflicts.extend(conflicts);
            None
        }
        Target::Contains => None,
        Target::FastForward => Oid::from_str(&outcome.commit).ok(),
        Target::Merged(commit) => Some(commit),
    };
    if let (Some(commit), false) = (commit, checks.merged.is_empty()) {
        let pool = CheckPool::new(
            scratch.join("checks"),
            context.workdir().to_path_buf(),
            checks.jobs,
        );
        let job = CheckJob {
            commit,
            commands: &checks.merged,
            own: &[],
            env: vec![
                ("PLAIT_TASK", "merged".to_string()),
                ("PLAIT_BASE", base.to_string()),
                ("PLAIT_COMMIT", commit.to_string()),
            ],
            logs: &scratch.join("logs"),
            timeout: checks.timeout,
            sandbox: &checks.sandbox,
            lineage: plait_stages::review::checks::Lineage::Gate,
        };
        let (_interrupt, cancel) = Cancel::new();
        let results = pool.run(&job, &cancel).await;
        pool.remove_all();
        report.checks = results?;
    }
    report.pass = report.passes();
    Ok(report)
}

/// Ownership of each branch, then their merge onto `base` (on a scratch branch that is
/// deleted again).
fn merge_branches(
    context: &Context,
    base: Oid,
    branches: &[TaskBranch],
    owns: &HashMap<String, Globs>,
) -> Result<(Vec<String>, plait_core::state::MergeOutcome), RunError> {
    let repo = context.repo()?;
    let base_tree = repo.find_commit(base).and_then(|c| c.tree())?;
    let mut outside = Vec::new();
    let mut inputs = Vec::new();
    for tb in branches {
        let tip = repo
            .refname_to_id(&branch_ref(&tb.branch))
            .map_err(|_| RunError::Refused(format!("branch `{}` does not exist", tb.branch)))?;
        outside.extend(outside_ownership(&repo, &base_tree, tip, &tb.task, owns)?);
        inputs.push(merge::BranchInput {
            task: tb.task.clone(),
            branch: tb.branch.clone(),
            commit: tip,
            start: None,
        });
    }
    let scratch = plait_core::refs::check_branch(std::process::id());
    let settings = merge::MergeSettings {
        workdir: context.workdir(),
        branch: &scratch,
        base,
        branches: &inputs,
        message: "plait check: the branches merged".to_string(),
    };
    let outcome = merge::merge(&repo, &settings);
    if let Ok(mut r) = repo.find_reference(&branch_ref(&scratch)) {
        let _ = r.delete();
    }
    Ok((outside, outcome?))
}

/// The owned globs of each task of a plan.
pub(crate) fn owns_of(plan: &PlanFile) -> HashMap<String, Globs> {
    plan.tasks
        .iter()
        .filter_map(|t| Some((t.id.clone(), Globs::new(&t.owns).ok()?)))
        .collect()
}

/// What a run's task branches hold that the gate must hear of: the paths they change
/// outside their tasks' ownership (as `task: path`), and the branches that moved since the
/// run recorded them.
#[derive(Debug, Clone, Default)]
pub(crate) struct BranchFindings {
    pub(crate) ownership: Vec<String>,
    pub(crate) moved: Vec<Blocker>,
}

/// Weighs the task branches of run `state` as they are now (see [`BranchFindings`]).
pub(crate) async fn weigh_branches(
    context: &Context,
    state: &RunState,
    owns: &HashMap<String, Globs>,
) -> Result<BranchFindings, RunError> {
    let (context, snapshot, owns) = (context.clone(), state.clone(), owns.clone());
    tokio::task::spawn_blocking(move || ownership(&context, &snapshot, &owns))
        .await
        .map_err(RunError::panicked("checking ownership"))?
}

/// Checks run `state`, as it is merged now, against branch `into`: `branches` (from
/// [`weigh_branches`]), the run's gate, conflicts of its merged result with `into`, and
/// the merged checks on the two merged (those the run recorded when `into` already holds
/// the result or is behind it). Collecting moved branches and merging again first is
/// `ops::check`'s part.
pub(crate) async fn check_run(
    context: Context,
    run_dir: RunDir,
    state: &RunState,
    into: &str,
    checks: &CheckSettings,
    branches: BranchFindings,
) -> Result<CheckReport, RunError> {
    let mut report = CheckReport {
        run: state.id.clone(),
        target: into.to_string(),
        pass: false,
        ownership: branches.ownership,
        conflicts: Vec::new(),
        checks: state.merged_checks.clone(),
        gate: gate(state, false),
        merge: None,
    };
    report.gate.extend(branches.moved);
    let Some(merged) = state.merge.as_ref().map(|m| m.commit.clone()) else {
        return Ok(report);
    };
    let target = {
        let (context, into, merged) = (context.clone(), into.to_string(), merged.clone());
        tokio::task::spawn_blocking(move || with_target(&context, &into, &merged))
            .await
            .map_err(RunError::panicked("merging with the target"))??
    };
    match target {
        Target::Contains | Target::FastForward => {}
        Target::Conflicts(conflicts) => report.conflicts = conflicts,
        Target::Merged(commit) if !checks.merged.is_empty() => {
            let logs = run_dir.check_with_target();
            report.checks =
                merged_checks_once(&context, &run_dir, state, commit, checks, &logs).await;
        }
        Target::Merged(_) => report.checks = Vec::new(),
    }
    report.pass = report.passes();
    Ok(report)
}

/// Paths each task branch changes outside its ownership, and branches that moved since
/// the run recorded them.
fn ownership(
    context: &Context,
    state: &RunState,
    owns: &HashMap<String, Globs>,
) -> Result<BranchFindings, RunError> {
    let repo = context.repo()?;
    let base = Oid::from_str(&state.base)?;
    let base_tree = repo.find_commit(base).and_then(|c| c.tree())?;
    let mut outside = Vec::new();
    let mut moved = Vec::new();
    for task in &state.tasks {
        let Ok(tip) = repo.refname_to_id(&branch_ref(&task.branch)) else {
            continue;
        };
        if task.commit.as_deref().is_some_and(|c| c != tip.to_string()) {
            moved.push(Blocker::Moved {
                branch: task.branch.clone(),
            });
        }
        if owns.contains_key(&task.id) {
            let from = plait_stages::collect::start_tree(&repo, &base_tree, task)?;
            outside.extend(outside_ownership(&repo, &from, tip, &task.id, owns)?);
        }
    }
    Ok(BranchFindings {
        ownership: outside,
        moved,
    })
}

enum Target {
    /// The target already holds the result.
    Contains,
    /// The result is a fast-forward of the target.
    FastForward,
    /// Merging them conflicts.
    Conflicts(Vec<Conflict>),
    /// A commit (on no branch) of the target merged with the result.
    Merged(Oid),
}

fn with_target(context: &Context, into: &str, merged: &str) -> Result<Target, RunError> {
    let repo = context.repo()?;
    let merged = Oid::from_str(merged)?;
    let target = repo
        .refname_to_id(&branch_ref(into))
        .map_err(|_| RunError::Refused(format!("branch `{into}` does not exist")))?;
    if target == merged || repo.graph_descendant_of(target, merged)? {
        return Ok(Target::Contains);
    }
    if repo.graph_descendant_of(merged, target)? {
        return Ok(Target::FastForward);
    }
    let result = merge::merge_tree(
        context.workdir(),
        None,
        &branch_ref(into),
        &merged.to_string(),
    )?;
    if !result.conflicts.is_empty() {
        return Ok(Target::Conflicts(
            result
                .conflicts
                .into_iter()
                .map(|c| c.into_conflict())
                .collect(),
        ));
    }
    Ok(Target::Merged(commit_of(
        &repo,
        result.tree,
        target,
        merged,
    )?))
}

fn commit_of(repo: &Repository, tree: Oid, target: Oid, merged: Oid) -> Result<Oid, git2::Error> {
    let who = signatures(repo)?;
    let parents = [&repo.find_commit(target)?, &repo.find_commit(merged)?];
    repo.commit(
        None,
        &who.author,
        &who.committer,
        "plait check: the run merged with its target",
        &repo.find_tree(tree)?,
        &parents,
    )
}

/// `plait check RUN --bisect`: the culprit search over the run's merged tasks for the
/// `failing` checks, in a checks pool of its own, without changing the run. `report`
/// hears each step.
pub(crate) async fn bisect_run(
    context: Context,
    run_dir: RunDir,
    state: &RunState,
    checks: &CheckSettings,
    failing: &[String],
    report: &(dyn Fn(plait_stages::bisect::Step) + Send + Sync),
) -> Result<plait_core::state::Culprits, RunError> {
    let included = state
        .merge
        .as_ref()
        .map(|m| m.included.clone())
        .unwrap_or_default();
    let inputs = merge::run::branch_inputs(included.iter().filter_map(|id| state.task(id)), None);
    let pool = CheckPool::for_run(run_dir.check_bisect(), &context, checks.jobs, state);
    let (_interrupt, cancel) = Cancel::new();
    let search = plait_stages::bisect::Search {
        context: &context,
        state,
        pool: &pool,
        checks: plait_stages::bisect::failing_only(checks, failing),
        logs: run_dir.bisect_logs(),
        cancel: &cancel,
        report,
    };
    let found = plait_stages::bisect::find(&search, &inputs).await;
    pool.remove_all();
    found.map_err(RunError::from)
}
