//! The merge of a grouped run: each group's tasks into its branch, the supervisors'
//! reviews of those merges, then the approved groups at the top.

use std::path::Path;
use std::sync::Arc;

use super::{branch_inputs, merge_message, RunError, Shared};
use crate::git;
use crate::merge::{self, BranchInput, MergeOutcome, MergeSettings};
use crate::plan::{ResolvedPlan, Reviewer};
use crate::report::{self, DiffStyle};
use crate::review::reviewer::{self, ReviewInput};
use crate::state::{RunState, Verdict};

/// Merges each group's mergeable tasks into its branch (blocking), the groups spread over
/// the CPUs: they write different branches from disjoint sets of commits. A group whose
/// merged tasks changed since its last merge loses its review: what was reviewed is gone.
pub fn merge_groups(repo_path: &Path, state: &mut RunState) -> Result<(), RunError> {
    let base = git2::Oid::from_str(&state.base).map_err(|e| RunError::Internal(e.to_string()))?;
    let inputs = group_inputs(state);
    let outcomes = merge_parallel(repo_path, base, &inputs);
    for (group, outcome) in state.groups.iter_mut().zip(outcomes) {
        let outcome = outcome
            .unwrap_or_else(|| Err(RunError::Internal(format!("{} was not merged", group.id))))?;
        let same = group
            .merge
            .as_ref()
            .is_some_and(|m| m.included == outcome.included);
        if !same {
            group.review = None;
        }
        group.merge = Some(outcome);
    }
    Ok(())
}

/// One group's merge: its branch, its tasks' branches that may be merged, the message.
type GroupInput = (String, Vec<BranchInput>, String);

fn group_inputs(state: &RunState) -> Vec<GroupInput> {
    state
        .groups
        .iter()
        .map(|group| {
            let branches = branch_inputs(group.tasks.iter().filter_map(|id| state.task(id)));
            let what = format!("{} of run {}", group.id, state.id);
            let message = merge_message(state, &what, "Tasks", &branches);
            (group.branch.clone(), branches, message)
        })
        .collect()
}

/// Runs the merges of `inputs` on as many threads as there are CPUs, each with its own
/// handle on the repository; `None` for a merge no thread got to.
fn merge_parallel(
    repo_path: &Path,
    base: git2::Oid,
    inputs: &[GroupInput],
) -> Vec<Option<Result<MergeOutcome, RunError>>> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(inputs.len())
        .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let claim = || next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let results = std::sync::Mutex::new((0..inputs.len()).map(|_| None).collect::<Vec<_>>());
    let put = |k: usize, outcome| {
        if k < inputs.len() {
            results.lock().unwrap_or_else(|e| e.into_inner())[k] = Some(outcome);
        }
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let repo = match git::open(repo_path) {
                    Ok(r) => r,
                    Err(e) => return put(claim(), Err(e.into())),
                };
                let workdir = git::workdir(&repo);
                loop {
                    let k = claim();
                    let Some((branch, branches, message)) = inputs.get(k) else {
                        return;
                    };
                    let settings = MergeSettings {
                        workdir: &workdir,
                        branch,
                        base,
                        branches,
                        message: message.clone(),
                    };
                    put(k, merge::merge(&repo, &settings).map_err(RunError::from));
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// Merges the groups that may go up into the run's merged branch (blocking) and folds the
/// two levels into the run's merge outcome.
pub fn merge_top(repo_path: &Path, state: &mut RunState) -> Result<MergeOutcome, RunError> {
    let base = git2::Oid::from_str(&state.base).map_err(|e| RunError::Internal(e.to_string()))?;
    let repo = git::open(repo_path)?;
    let workdir = git::workdir(&repo);
    let branches: Vec<BranchInput> = state
        .groups
        .iter()
        .filter(|g| g.goes_up())
        .filter_map(|g| {
            Some(BranchInput {
                task: g.id.clone(),
                branch: g.branch.clone(),
                commit: git2::Oid::from_str(&g.merge.as_ref()?.commit).ok()?,
            })
        })
        .collect();
    let message = merge_message(state, &format!("run {}", state.id), "Groups", &branches);
    let settings = MergeSettings {
        workdir: &workdir,
        branch: &state.merged_branch(),
        base,
        branches: &branches,
        message,
    };
    let top = merge::merge(&repo, &settings)?;
    for group in &mut state.groups {
        group.merged_up = top.included.contains(&group.id);
    }
    Ok(crate::groups::combine(state, top))
}

/// The supervisor of `group` (an index into the state's groups): the plan's `[groups]
/// review`, or the reviewer its first task would get.
fn supervisor(plan: &ResolvedPlan, state: &RunState, group: usize) -> Reviewer {
    match &plan.groups.reviewer {
        Reviewer::Worker => state.groups[group]
            .tasks
            .first()
            .and_then(|id| plan.tasks.iter().find(|t| &t.id == id))
            .map_or(Reviewer::Off, |t| plan.review.reviewer_for(t)),
        other => other.clone(),
    }
}

/// Whether anyone supervises the groups of `plan`.
pub fn supervised(plan: &ResolvedPlan) -> bool {
    match &plan.groups.reviewer {
        Reviewer::Off => false,
        Reviewer::Worker => plan
            .tasks
            .first()
            .is_some_and(|t| !matches!(plan.review.reviewer_for(t), Reviewer::Off)),
        _ => true,
    }
}

/// Runs the supervisors' reviews of the groups that have a merge with changes and no review
/// yet, all at once; their reviews go into `state`.
pub async fn review_groups(shared: &Arc<Shared>, state: &mut RunState) {
    let run_dir = shared.store.run_dir(&shared.run);
    let mut jobs = Vec::new();
    for k in 0..state.groups.len() {
        let group = &state.groups[k];
        let Some(merge) = &group.merge else {
            continue;
        };
        if !group.supervised || group.review.is_some() || merge.included.is_empty() {
            continue;
        }
        let reviewer = supervisor(&shared.plan, state, k);
        let dir = run_dir.join("groups").join(&group.id);
        let _ = std::fs::create_dir_all(&dir);
        let prompt = brief(state, k);
        let owns: Vec<String> = group
            .tasks
            .iter()
            .filter_map(|id| shared.plan.tasks.iter().find(|t| &t.id == id))
            .flat_map(|t| t.owns.patterns().iter().cloned())
            .collect();
        let commit = merge.commit.clone();
        let id = group.id.clone();
        let diff = group_diff(shared, &commit).await;
        jobs.push(async move {
            let input = ReviewInput {
                run: &shared.run,
                goal: &shared.plan.goal,
                task: &id,
                prompt: &prompt,
                owns: &owns,
                diff: &diff,
                checks: &[],
                round: 0,
                base: shared.plan.base.to_string(),
                commit,
                worktree: dir.clone(),
                dir,
                timeout: shared.plan.checks.timeout,
                budget: &shared.budget,
                sandbox: &shared.plan.checks.sandbox,
            };
            let review = reviewer::review(
                &reviewer,
                &input,
                &shared.client,
                &shared.limiters,
                &shared.cancel,
            )
            .await;
            (k, review)
        });
    }
    let reviews = futures_util::future::join_all(jobs).await;
    for (k, review) in reviews {
        if let Some(r) = &review {
            let detail = format!("supervisor: {} — {}", r.verdict.as_str(), r.summary);
            shared.group_event(&state.groups[k].id, "reviewed", detail);
        }
        state.groups[k].review = review;
    }
}

/// Reports each group's merge (after [`merge_groups`]) or whether it went up (after
/// [`merge_top`]).
pub fn report(shared: &Shared, state: &RunState, top: bool) {
    for group in &state.groups {
        let Some(merge) = &group.merge else {
            continue;
        };
        if top {
            if merge.included.is_empty() {
                continue;
            }
            let (stage, detail) = if group.merged_up {
                ("up", format!("in {}", state.merged_branch()))
            } else {
                let why = group.verdict().map_or("not reviewed", |v| v.as_str());
                ("held", format!("left out of the merge ({why})"))
            };
            shared.group_event(&group.id, stage, detail);
        } else {
            let mut detail = format!(
                "{} of {} task(s) into {}",
                merge.included.len(),
                group.tasks.len(),
                group.branch
            );
            if !merge.conflicts.is_empty() {
                detail.push_str(&format!(
                    "; {} conflict(s), left out: {}",
                    merge.conflicts.len(),
                    merge.excluded.join(", ")
                ));
            }
            shared.group_event(&group.id, "merged", detail);
        }
    }
}

/// Sends the groups whose supervisor asked for changes back to their tasks: the tasks
/// owning a path the supervisor's comments name, or every merged task of the group when
/// no comment names one of theirs. Each gets one more round with the supervisor's words
/// (and its own review rounds after it); the group's review is cleared so the new merge is
/// reviewed again. Returns whether any task was sent back.
pub async fn send_back(shared: &Arc<Shared>, state: &mut RunState) -> bool {
    let mut targets: Vec<(usize, String)> = Vec::new();
    for group in &mut state.groups {
        let asked = group.decision.is_none()
            && group
                .review
                .as_ref()
                .is_some_and(|r| r.verdict == Verdict::RequestChanges);
        let Some(merge) = group.merge.as_ref().filter(|_| asked) else {
            continue;
        };
        let review = group.review.take().expect("a review asking for changes");
        let merged: Vec<usize> = merge
            .included
            .iter()
            .filter_map(|id| shared.plan.tasks.iter().position(|t| &t.id == id))
            .collect();
        let named: Vec<usize> = merged
            .iter()
            .copied()
            .filter(|&i| {
                let owns = &shared.plan.tasks[i].owns;
                review
                    .comments
                    .iter()
                    .any(|c| !c.path.is_empty() && owns.matches(&c.path))
            })
            .collect();
        let mut text = format!(
            "The supervisor of {} (the group of {} tasks your task belongs to) reviewed the group's \
             merged work and asked for changes: {}",
            group.id,
            group.tasks.len(),
            review.summary
        );
        for c in &review.comments {
            text.push_str(&format!("\n- {}{}", c.place(), c.body));
        }
        text.push_str("\n\nChange what concerns the files your task owns.");
        let chosen = if named.is_empty() { merged } else { named };
        let ids: Vec<&str> = chosen
            .iter()
            .map(|&i| shared.plan.tasks[i].id.as_str())
            .collect();
        shared.group_event(&group.id, "sent_back", format!("to {}", ids.join(", ")));
        targets.extend(chosen.into_iter().map(|i| (i, text.clone())));
    }
    if targets.is_empty() {
        return false;
    }
    let permits = Arc::new(tokio::sync::Semaphore::new(shared.jobs));
    let jobs = targets.into_iter().map(|(index, feedback)| {
        let permits = permits.clone();
        async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            super::task::rework(shared, index, feedback).await;
        }
    });
    futures_util::future::join_all(jobs).await;
    true
}

/// What a supervisor is told about its group: each task's prompt and its worker's summary.
fn brief(state: &RunState, group: usize) -> String {
    let group = &state.groups[group];
    let mut text = format!(
        "Supervisor review of {}: the merged work of {} task(s). Judge the group's diff as a whole: \
         do the tasks together do what they were asked, consistently with each other and the goal?\n",
        group.id,
        group.tasks.len()
    );
    let merge = group.merge.as_ref();
    for id in &group.tasks {
        let Some(task) = state.task(id) else {
            continue;
        };
        let status = if merge.is_some_and(|m| m.included.contains(id)) {
            "merged"
        } else if merge.is_some_and(|m| m.excluded.contains(id)) {
            "left out: conflict"
        } else {
            "not merged"
        };
        text.push_str(&format!(
            "\n- task {id} ({status}), files changed: {}\n  worker's summary: {}",
            task.changes.len(),
            task.summary.as_deref().unwrap_or("(none)").trim()
        ));
    }
    text
}

async fn group_diff(shared: &Arc<Shared>, commit: &str) -> String {
    let (repo_path, base) = (shared.repo.clone(), shared.plan.base);
    let commit = commit.to_string();
    tokio::task::spawn_blocking(move || {
        let repo = git::open(&repo_path).map_err(|e| e.to_string())?;
        let tip = git2::Oid::from_str(&commit).map_err(|e| e.to_string())?;
        report::diff_text(&repo, base, tip, DiffStyle::default()).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|d| d)
    .unwrap_or_else(|e| format!("(the diff could not be made: {e})"))
}
