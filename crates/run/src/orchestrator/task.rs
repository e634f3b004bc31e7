//! One task's way through the pipeline, from each of the ways in: a run's first start
//! (`run_task`), a take-over from a worker that stopped (`take_over`), a send-back here or
//! from another machine (`rework`, `rework_from`), a restart from a new start
//! (`restart`), and a claim started afresh (`reset`). Each lays out the worktree
//! (`worktrees`) and hands it to the round loop (`rounds::work`). Each step changes the
//! task's state through `Shared::update`; a failure ends the task, never the run.
//!
//! The task's files are layered, each naming only those below it: [`super::shared`] (and
//! its `starts`), [`super::entered`], [`super::waves`], `collecting`, `worktrees`, `rounds`,
//! this file; [`super::dispatch`] runs the tasks through it.

use std::sync::Arc;

use git2::Oid;

use super::rounds::work;
use super::shared::Slot;
use super::starts::Stale;
use super::waves::carry;
use super::worktrees::{discard_partial, lay_out_from, prepare};
use super::Shared;
use plait_agents::prompts;
use plait_core::state::{TaskRecord, TaskState};
use plait_trees::workspace;

pub(super) use super::shared::fail_task;

/// Runs task `index` from its worktree's creation (or, in a resumed run, from where it
/// stopped) to its end.
pub(super) async fn run_task(shared: &Arc<Shared>, index: usize) {
    run_task_told(shared, index, None).await;
}

/// Runs task (or attempt) `slot` as [`run_task`] does a task.
pub(super) async fn run_slot(shared: &Arc<Shared>, slot: Slot) {
    run_slot_told(shared, slot, None).await;
}

/// [`run_task`], its first round told `told` (a person's comment to a task that never
/// ran, sent back once what it comes after allowed it to start).
async fn run_task_told(shared: &Arc<Shared>, index: usize, told: Option<String>) {
    run_slot_told(shared, index.into(), told).await;
}

/// [`run_slot`], its first round told `told`.
async fn run_slot_told(shared: &Arc<Shared>, slot: Slot, told: Option<String>) {
    if shared.cancel.is_cancelled() {
        return;
    }
    let record = shared.record(slot);
    // A resumed run: finished tasks stay as they are; interrupted ones go on from their
    // worktrees; one caught while preparing starts again.
    let resumed = match record.state {
        s if s.is_final() => return,
        TaskState::Pending => false,
        TaskState::Preparing => {
            discard_partial(shared, &record);
            false
        }
        _ => record.worktree.join(".git").exists(),
    };
    if !resumed && !prepare(shared, slot, &record).await {
        return;
    }
    if resumed {
        // It goes on: the interruption is no longer what its record says of it.
        shared.update(slot, |t| t.error = None);
    }
    let feedback = resumed
        .then(|| prompts::feedback::INTERRUPTED.to_string())
        .or(told);
    let limit = shared.plan.review.rounds_for(&shared.task(slot));
    work(shared, slot, &record, (record.rounds, limit), feedback).await;
}

/// Takes task `index` over from a worker that stopped (its lease ran out, or it let the
/// task go): its worktree at the base, then the work that worker last pushed (`commit`,
/// fetched already) on the branch and in the worktree, and the agent told to carry on.
pub(super) async fn take_over(shared: &Arc<Shared>, index: usize, commit: Oid) {
    if shared.cancel.is_cancelled() {
        return;
    }
    let Some(record) = lay_out_from(shared, index, commit).await else {
        return;
    };
    let feedback = prompts::feedback::TAKEN_OVER.to_string();
    let limit = shared.plan.review.rounds_for(&shared.plan.tasks[index]);
    work(
        shared,
        index.into(),
        &record,
        (record.rounds, limit),
        Some(feedback),
    )
    .await;
}

/// Sends task `index`, which ended on another machine, back for one more round with
/// `feedback` and the review rounds after it, as [`rework`] does in a worktree that is
/// here: its worktree is laid out from `commit` (the branch's tip, fetched already) first.
/// The task's record is the one its last claim recorded.
pub(super) async fn rework_from(shared: &Arc<Shared>, index: usize, commit: Oid, feedback: String) {
    if shared.cancel.is_cancelled() {
        return;
    }
    shared.update(index, |t| t.finished_at = None);
    let Some(record) = lay_out_from(shared, index, commit).await else {
        return;
    };
    one_more_round(shared, index, &record, feedback).await;
}

/// Runs task `index` again from its new start (made already): its old worktree and branch
/// removed, its work (`work`: its old start and tip) carried onto the start where git's
/// merge can, then a round that is told which of the tasks it comes after (`changed`)
/// moved (and what a person said, if they sent it back), and the review rounds after it. A
/// task that never ran starts as in the run.
pub(super) async fn restart(shared: &Arc<Shared>, stale: Stale) {
    if shared.cancel.is_cancelled() {
        return;
    }
    let Stale {
        index,
        work: work_so_far,
        changed,
        told,
    } = stale;
    let record = shared.record(index);
    if record.started_at.is_none() {
        return run_task_told(shared, index, told).await;
    }
    let start = match shared.start(index) {
        Ok(start) => start.commit,
        Err(why) => return fail_task(shared, index, why, None),
    };
    let carried = {
        let (shared, record) = (shared.clone(), record.clone());
        tokio::task::spawn_blocking(move || {
            if let Ok(repo) = shared.context.repo() {
                let name = workspace::admin_name(&shared.run, &record.id);
                let _ = workspace::remove(&repo, &name, &record.worktree);
                let refname = plait_core::refs::branch_ref(&record.branch);
                if let Ok(mut branch) = repo.find_reference(&refname) {
                    let _ = branch.delete();
                }
            }
            work_so_far
                .map(|w| carry(&shared, w, start, &record.id))
                .transpose()
        })
        .await
    };
    shared.update(index, |t| {
        t.commit = None;
        t.changes.clear();
        t.violations.clear();
        t.checks.clear();
        t.review = None;
        t.decision = None;
    });
    let (laid_out, note) = match carried {
        Ok(Ok(Some(Ok(commit)))) => (lay_out_from(shared, index, commit).await, Ok(())),
        Ok(Ok(Some(Err(paths)))) => {
            let why = format!("git's merge conflicts at {}", paths.join(", "));
            let laid = prepare(shared, index.into(), &record)
                .await
                .then(|| shared.record(index));
            (laid, Err(why))
        }
        Ok(Ok(None)) => {
            let laid = prepare(shared, index.into(), &record)
                .await
                .then(|| shared.record(index));
            (laid, Ok(()))
        }
        Ok(Err(e)) => {
            let why = format!("could not carry its work onto its new start: {e}");
            return fail_task(shared, index, why, None);
        }
        Err(e) => {
            let why = format!("carrying its work onto its new start panicked: {e}");
            return fail_task(shared, index, why, None);
        }
    };
    let Some(record) = laid_out else {
        return;
    };
    let mut feedback =
        prompts::feedback::start_moved(&changed, note.as_ref().map(|_| ()).map_err(String::as_str));
    if let Some(told) = told {
        feedback = format!("{feedback}\n\n{told}");
    }
    one_more_round(shared, index, &record, feedback).await;
}

/// Throws away what an earlier claim of task `index` left on this machine (its worktree
/// and branch) and makes it pending again, for a claim that starts it afresh.
pub(super) fn reset(shared: &Shared, index: usize) {
    let record = shared.record(index);
    if let Ok(repo) = shared.context.repo() {
        let name = workspace::admin_name(&shared.run, &record.id);
        let _ = workspace::remove(&repo, &name, &record.worktree);
        if let Ok(mut branch) = repo.find_reference(&plait_core::refs::branch_ref(&record.branch)) {
            let _ = branch.delete();
        }
    }
    let mut fresh = TaskRecord::pending(
        &shared.run,
        &record.id,
        record.worktree.clone(),
        record.owned,
        record.log.clone(),
    );
    fresh.after = record.after.clone();
    fresh.expects_change = record.expects_change;
    shared.update(index, |t| *t = fresh);
}

/// Sends a finished task back to its worktree with `feedback` (a supervisor's request for
/// changes) for one more round and the review rounds that follow it.
pub(super) async fn rework(shared: &Arc<Shared>, index: usize, feedback: String) {
    if shared.cancel.is_cancelled() {
        return;
    }
    let record = shared.record(index);
    if !record.worktree.join(".git").exists() {
        // A task picked from its attempts has no worktree of its own until a round needs
        // one: it is laid out from the chosen attempt's work.
        if record.pick.is_none() {
            return;
        }
        let at = match record.commit.as_deref().map(Oid::from_str) {
            Some(Ok(commit)) => Ok(commit),
            _ => shared.start(index).map(|s| s.commit),
        };
        let commit = match at {
            Ok(commit) => commit,
            Err(why) => return fail_task(shared, index, why, None),
        };
        // Its branch is made again with the worktree, and set to that work.
        if let Ok(repo) = shared.context.repo() {
            let refname = plait_core::refs::branch_ref(&record.branch);
            if let Ok(mut branch) = repo.find_reference(&refname) {
                if branch.target() == Some(commit) {
                    let _ = branch.delete();
                }
            }
        }
        return rework_from(shared, index, commit, feedback).await;
    }
    shared.update(index, |t| {
        t.state = TaskState::Running;
        t.finished_at = None;
        t.error = None;
    });
    one_more_round(shared, index, &record, feedback).await;
}

/// One more round of task `index` after those it had (`record`'s), told `feedback`, and the
/// review rounds that follow it.
async fn one_more_round(shared: &Arc<Shared>, index: usize, record: &TaskRecord, feedback: String) {
    let round = record.rounds + 1;
    let limit = round + shared.plan.review.rounds_for(&shared.plan.tasks[index]);
    work(shared, index.into(), record, (round, limit), Some(feedback)).await;
}
