//! Waves: a task with `after` waits, without a slot, until every task it comes after
//! (directly or through others) has ended. Then it is blocked, naming those that keep it
//! from starting, or it starts from their merge: the base with their work merged in, made
//! as the merge stage makes the run's (`plait/<run>/start-<task>`).
//!
//! Above [`super::shared`] and [`super::starts`] (the types of what it makes); the task's
//! entry points (`task`, which carry a task's work onto its new start with [`carry`]) and
//! the dispatch (`dispatch`, which runs stale tasks again) are above it, and it names
//! neither: a task it cannot start is failed through [`super::shared::fail_task`].

use std::collections::BTreeMap;
use std::sync::Arc;

use git2::Oid;

use super::shared::fail_task;
use super::starts::{Stale, StartKey, Unmade};
use super::Shared;
use plait_core::git;
use plait_core::state::{now_ms, TaskRecord, TaskState, Verdict};
use plait_core::sync::Locked as _;
use plait_stages::merge::{self, BranchInput, MergeSettings};

/// Waits until task `index` may start; false when it is not to run (blocked, ended, or the
/// run was interrupted). A task without `after` may start at once; one that started
/// before (a resumed run) goes on from where it is.
pub(super) async fn await_start(shared: &Arc<Shared>, index: usize) -> bool {
    let waits = &shared.waits[index];
    if waits.is_empty() {
        return true;
    }
    let record = shared.record(index);
    match record.state {
        s if s.is_final() => return false,
        TaskState::Pending => {}
        TaskState::Preparing if record.start.is_none() => {}
        _ => return true,
    }
    loop {
        let ended = shared.ended.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        if shared.cancel.is_cancelled() {
            return false;
        }
        if inputs_ended(shared, index) {
            break;
        }
        tokio::select! {
            _ = ended => {}
            _ = shared.cancel.cancelled() => return false,
        }
    }
    settle_start(shared, index).await
}

/// Whether every task that task `index` comes after has ended.
pub(super) fn inputs_ended(shared: &Shared, index: usize) -> bool {
    // Read under one lock, without copying records: every waiting task asks at each end.
    let state = shared.state.locked();
    shared.waits[index]
        .iter()
        .all(|&k| state.tasks[k].state.is_final())
}

/// Once every task that task `index` comes after has ended: it is blocked, naming those
/// that did not end well (false), or its start is made and recorded (true).
pub(super) async fn settle_start(shared: &Arc<Shared>, index: usize) -> bool {
    let waits = &shared.waits[index];
    let mut held: Vec<(String, String, bool)> = waits
        .iter()
        .filter_map(|&k| {
            let t = shared.record(k);
            let blocked = t.state == TaskState::Blocked;
            unready(&t).map(|why| (t.id.clone(), why, blocked))
        })
        .collect();
    // The cause, not what it blocked on the way: a blocked task is named only when
    // nothing else is.
    if held.iter().any(|(_, _, blocked)| !blocked) {
        held.retain(|(_, _, blocked)| !blocked);
    }
    if !held.is_empty() {
        let cause = held
            .iter()
            .map(|(id, why, _)| format!("{id} {why}"))
            .collect::<Vec<_>>()
            .join("; ");
        block(
            shared,
            index,
            held.into_iter().map(|(id, _, _)| id).collect(),
            format!("blocked, for a task it comes after did not end well: {cause}"),
        );
        return false;
    }
    shared.released.locked().insert(index, now_ms());
    let made = {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || make_start(&shared, index)).await
    };
    match made {
        Ok(Ok(())) => true,
        Ok(Err(Unmade::Conflicts { tasks, why })) => {
            block(shared, index, tasks, format!("blocked: {why}"));
            false
        }
        Ok(Err(Unmade::Failed(why))) => {
            fail_task(
                shared,
                index,
                format!("could not make its start: {why}"),
                None,
            );
            false
        }
        Err(e) => {
            fail_task(
                shared,
                index,
                format!("making its start panicked: {e}"),
                None,
            );
            false
        }
    }
}

/// Why task `t`'s work cannot be started from, in words that follow its id; `None` when
/// it can (it ended done and may go into a merge).
pub(super) fn unready(t: &TaskRecord) -> Option<String> {
    if plait_stages::merge::run::mergeable(t) {
        return None;
    }
    let detail = |what: &str| match &t.error {
        Some(e) => format!("{what} ({e})"),
        None => what.to_string(),
    };
    Some(match t.state {
        TaskState::Failed => detail("failed"),
        TaskState::Stopped => detail("was stopped"),
        TaskState::Blocked => "is blocked".to_string(),
        TaskState::Rejected => "was rejected".to_string(),
        _ if !t.no_failure_of_its_own() => "ended with its checks failing".to_string(),
        _ if t.verdict() == Some(Verdict::RequestChanges) => {
            "was not approved (its reviewer still asks for changes; `plait accept` takes it)"
                .to_string()
        }
        _ if !t.violations.is_empty() => {
            "changed files it does not own (`plait accept` takes it as it is)".to_string()
        }
        s => format!("ended {}", s.as_str()),
    })
}

/// Records task `index` as blocked by `tasks`, for `reason`.
fn block(shared: &Shared, index: usize, tasks: Vec<String>, reason: String) {
    shared.update(index, |t| {
        t.state = TaskState::Blocked;
        t.blocked_by = tasks;
        t.error = Some(reason);
        t.finished_at = Some(now_ms());
    });
}

/// Merges the work of every task that task `index` comes after onto the base (blocking)
/// and records it as the task's start on `plait/<run>/start-<task>`. Tasks that come after
/// the same tasks at the same commits (a wave after one task) share one merge: the first
/// makes it, the others wait for it and point their branch there.
fn make_start(shared: &Shared, index: usize) -> Result<(), Unmade> {
    let task = &shared.plan.tasks[index];
    let inputs: Vec<BranchInput> = shared.waits[index]
        .iter()
        .filter_map(|&k| BranchInput::of(&shared.record(k)))
        .collect();
    let from: BTreeMap<String, String> = inputs
        .iter()
        .map(|i| (i.task.clone(), i.commit.to_string()))
        .collect();
    let mut commit = shared.plan.base;
    if !inputs.is_empty() {
        let key: StartKey = inputs.iter().map(|i| (i.task.clone(), i.commit)).collect();
        let cell = shared.start_merges.locked().entry(key).or_default().clone();
        commit = cell
            .get_or_init(|| merge_start(shared, &task.id, &inputs))
            .clone()?;
        let repo = shared.context.repo()?;
        let branch =
            plait_core::refs::branch_ref(&plait_core::refs::start_branch(&shared.run, &task.id));
        repo.reference(&branch, commit, true, "plait: the start of a task")?;
    }
    shared.forget_start(index);
    shared.update(index, |t| {
        t.start = (commit != shared.plan.base).then(|| commit.to_string());
        t.start_from = from;
        t.blocked_by.clear();
    });
    Ok(())
}

/// The merge of `inputs` onto the base, made on task `first`'s start branch (blocking);
/// conflicts are an [`Unmade`] naming the tasks and paths.
fn merge_start(shared: &Shared, first: &str, inputs: &[BranchInput]) -> Result<Oid, Unmade> {
    let repo = shared.context.repo()?;
    let workdir = git::workdir(&repo);
    let names: Vec<&str> = inputs.iter().map(|i| i.task.as_str()).collect();
    let settings = MergeSettings {
        workdir: &workdir,
        branch: &plait_core::refs::start_branch(&shared.run, first),
        base: shared.plan.base,
        branches: inputs,
        message: format!(
            "plait: the start of the tasks after {}\n\nTasks: {}\nPlait-Run: {}\n",
            names.join(", "),
            names.join(", "),
            shared.run
        ),
    };
    let outcome = merge::merge(&repo, &settings)?;
    if !outcome.conflicts.is_empty() || !outcome.waiting.is_empty() {
        let mut tasks: Vec<String> = outcome
            .conflicts
            .iter()
            .flat_map(|c| c.tasks.iter().cloned())
            .chain(outcome.waiting.iter().cloned())
            .collect();
        tasks.sort();
        tasks.dedup();
        let at: Vec<String> = outcome
            .conflicts
            .iter()
            .map(|c| format!("{} ({})", c.path, c.kind))
            .collect();
        let why = if at.is_empty() {
            format!("the work of {} cannot be merged", tasks.join(", "))
        } else {
            format!(
                "the work of the tasks it comes after conflicts at {}",
                at.join(", ")
            )
        };
        return Err(Unmade::Conflicts { tasks, why });
    }
    Ok(Oid::from_str(&outcome.commit)?)
}

/// The tasks task `index` (ended) comes after whose work is no longer what its start took
/// in: sent back since, or moved by hand (`plait land` collects such commits).
pub(super) fn moved_inputs(shared: &Shared, index: usize) -> Vec<String> {
    let record = shared.record(index);
    let state = shared.state.locked();
    shared.waits[index]
        .iter()
        .map(|&k| &state.tasks[k])
        .filter(|up| record.start_from.get(&up.id) != up.commit.as_ref())
        .map(|up| up.id.clone())
        .collect()
}

/// After tasks were sent back for another round: every task whose start no longer holds
/// the work of the tasks it comes after as they are now runs again from a new start, its
/// own work carried onto it (a 3-way merge from its old start); a task blocked by tasks
/// that may now be started from starts. Where they run is the run's dispatch's
/// (`Dispatch::restart`); they are marked pending here. `told` is a person's comment for
/// one of them (`plait send-back` of a task whose start went stale, or that is blocked).
pub(super) async fn refresh(
    shared: &Arc<Shared>,
    told: Option<(usize, String)>,
) -> Result<(), super::RunError> {
    let mut again = stale(shared);
    if let Some((index, text)) = told {
        if let Some(stale) = again.iter_mut().find(|s| s.index == index) {
            stale.told = Some(text);
        }
    }
    if again.is_empty() {
        return Ok(());
    }
    for stale in &again {
        shared.forget_start(stale.index);
        shared.update(stale.index, |t| {
            t.state = TaskState::Pending;
            t.finished_at = None;
            t.error = None;
            t.blocked_by.clear();
        });
    }
    shared.dispatch.restart(shared, again).await
}

/// The tasks [`refresh`] runs again, each after those it comes after.
fn stale(shared: &Shared) -> Vec<Stale> {
    let mut order: Vec<usize> = (0..shared.plan.tasks.len())
        .filter(|&i| !shared.waits[i].is_empty())
        .collect();
    // A task comes after fewer tasks than any task that comes after it.
    order.sort_by_key(|&i| shared.waits[i].len());
    let mut again: Vec<Stale> = Vec::new();
    for &index in &order {
        let record = shared.record(index);
        if !record.state.is_final() {
            continue;
        }
        let changed: Vec<String> = shared.waits[index]
            .iter()
            .filter(|&&k| {
                let up = shared.record(k);
                again.iter().any(|s| s.index == k)
                    || record.start_from.get(&up.id) != up.commit.as_ref()
            })
            .map(|&k| shared.plan.tasks[k].id.clone())
            .collect();
        let blocked = record.state == TaskState::Blocked && record.started_at.is_none();
        if changed.is_empty() && !blocked {
            continue;
        }
        let start = record
            .start
            .as_deref()
            .map_or(Ok(shared.plan.base), Oid::from_str);
        let tip = record.commit.as_deref().map(Oid::from_str);
        let work = match (start, tip) {
            (Ok(start), Some(Ok(tip))) => Some((start, tip)),
            _ => None,
        };
        again.push(Stale {
            index,
            work,
            changed,
            told: None,
        });
    }
    again
}

/// The commit that carries a task's own work (`old_start`..`old_tip`) onto its new start
/// `new_start`, made by git's merge with the old start as the merge base (blocking); the
/// paths that conflict when it cannot be made.
pub(super) fn carry(
    shared: &Shared,
    (old_start, old_tip): (Oid, Oid),
    new_start: Oid,
    task: &str,
) -> Result<Result<Oid, Vec<String>>, plait_stages::merge::MergeError> {
    let repo = shared.context.repo()?;
    let workdir = git::workdir(&repo);
    let merged = plait_stages::merge::merge_tree(
        &workdir,
        Some(old_start),
        &new_start.to_string(),
        &old_tip.to_string(),
    )?;
    if !merged.conflicts.is_empty() {
        return Ok(Err(merged.conflicts.into_iter().map(|c| c.path).collect()));
    }
    let who = git::signatures(&repo)?;
    let parent = repo.find_commit(new_start)?;
    let commit = repo.commit(
        None,
        &who.author,
        &who.committer,
        &format!(
            "plait({task}): its work carried onto a new start\n\nPlait-Run: {}\n",
            shared.run
        ),
        &repo.find_tree(merged.tree)?,
        &[&parent],
    )?;
    Ok(Ok(commit))
}
