//! Best of N: a task run as several attempts (`attempts`), each a slot of its own to the
//! scheduler (its worktree, branch, view, checks and log), then the pick that makes one of
//! them the task. By checks the first attempt that passes is taken at once and the others
//! are stopped; by review or command the attempts all end first and the judge compares
//! those that passed (`picking`). No attempt passing fails the task, naming each one's end.
//!
//! Above the task's entry points (`task`), which run each attempt's rounds; below
//! `dispatch`, which starts a task's attempts in its place.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::picking::{choose, first_passed, judge, Choice};
use super::shared::Slot;
use super::{task, RunError, Shared};
use plait_core::state::{self, now_ms, TaskDir, TaskRecord, TaskState};

/// Runs task `index` as its attempts, each holding one of `permits` while it runs
/// (`taken`: those taken already, in the plan's order, see [`slots`]), then makes the
/// pick. A task picked already (a resumed run) goes on as the task itself.
pub(super) async fn run(
    shared: &Arc<Shared>,
    index: usize,
    permits: Arc<Semaphore>,
    taken: Vec<OwnedSemaphorePermit>,
) -> Result<(), RunError> {
    let mut taken = taken.into_iter();
    let Some(attempts) = shared.plan.tasks[index].attempts.clone() else {
        let _permit = taken.next();
        task::run_task(shared, index).await;
        return Ok(());
    };
    let record = shared.record(index);
    if record.state.is_final() || shared.cancel.is_cancelled() {
        return Ok(());
    }
    if record.pick.is_some() {
        // Picked before the run stopped: the task goes on from its chosen attempt.
        let _permit = match taken.next() {
            Some(p) => p,
            None => permits.acquire_owned().await.map_err(closed)?,
        };
        task::run_task(shared, index).await;
        return Ok(());
    }
    open_attempts(shared, index, attempts.count);
    let mut set = JoinSet::new();
    for n in 1..=attempts.count {
        let slot = Slot::attempt(index, n);
        if shared.record(slot).state.is_final() {
            continue;
        }
        let (shared, permits, taken) = (shared.clone(), permits.clone(), taken.next());
        set.spawn(async move {
            let _permit = match taken {
                Some(p) => p,
                None => match permits.acquire_owned().await {
                    Ok(p) => p,
                    Err(_) => return,
                },
            };
            if let Some(why) = not_to_start(&shared, slot) {
                shared.update(slot, |t| {
                    t.state = TaskState::Stopped;
                    t.error = Some(why);
                    t.finished_at = Some(now_ms());
                });
                return;
            }
            task::run_slot(&shared, slot).await;
        });
    }
    let by_checks = matches!(attempts.pick, plait_plan::PickSpec::Checks);
    loop {
        if by_checks && shared.record(index).pick.is_none() {
            if let Some(n) = first_passed(&shared.record(index)) {
                let choice = Choice::by_checks(n, &shared.record(index));
                choose(shared, index, choice).await;
                stop_others(shared, index, n);
            }
        }
        match set.join_next().await {
            Some(joined) => joined.map_err(RunError::panicked("an attempt"))?,
            None => break,
        }
    }
    if shared.cancel.is_cancelled() {
        // Resumed later: the attempts that ran go on, the pick is made then.
        let state = shared.record(index).state;
        if !state.is_final() {
            shared.update(index, |t| {
                t.state = TaskState::Interrupted;
                t.error = Some("interrupted during its attempts".to_string());
            });
        }
        return Ok(());
    }
    if let (Some(reason), false) = (
        shared.stops.stopped(Slot::from(index)),
        shared.stops.kept(Slot::from(index)),
    ) {
        // A person stopped the task: its attempts went with it.
        shared.update(index, |t| {
            t.state = TaskState::Stopped;
            t.error = Some(reason);
            t.finished_at = Some(now_ms());
            t.decision = Some(plait_core::state::Decision {
                verdict: plait_core::state::Verdict::Reject,
                at: now_ms(),
            });
            t.usage = t.attempts_usage(None);
        });
        shared.stops.clear(Slot::from(index));
        return Ok(());
    }
    let started = std::time::Instant::now();
    let picked = shared.record(index).pick.is_some();
    match shared.record(index).pick {
        None => match judge(shared, index, &attempts.pick).await {
            // Interrupted while the judge was asked: the pick is made on resume.
            Some(_) if shared.cancel.is_cancelled() => shared.update(index, |t| {
                t.state = TaskState::Interrupted;
                t.error = Some("interrupted while its attempt was picked".to_string());
            }),
            Some(choice) => choose(shared, index, choice).await,
            None => match least_red(&shared.record(index), attempts.fallback) {
                Some(choice) => choose(shared, index, choice).await,
                None => fail_all(shared, index),
            },
        },
        Some(pick) => {
            // What the attempts stopped after the pick used on their way out counts too.
            let usage = shared.record(index).attempts_usage(pick.usage.as_ref());
            shared.update(index, |t| t.usage = usage);
        }
    }
    if !picked {
        shared.clock.task_step("pick", started);
    }
    Ok(())
}

/// How many `-j` slots task `index` takes to start: one, or one for each of its attempts
/// that has not ended. The scheduler takes them in the plan's order, so a task's attempts
/// start side by side, as tasks of their own placed where their task is.
pub(super) fn slots(shared: &Shared, index: usize) -> usize {
    let record = shared.record(index);
    match &shared.plan.tasks[index].attempts {
        Some(attempts) if record.pick.is_none() => {
            let ended = record
                .attempts
                .iter()
                .filter(|a| a.state.is_final())
                .count();
            (attempts.count as usize).saturating_sub(ended).max(1)
        }
        _ => 1,
    }
}

/// Takes `n` slots of `permits` at once (at most all of them: the rest are taken as
/// attempts end), one permit each. All at once, so that two tasks each holding some never
/// wait for each other.
pub(super) async fn take(
    permits: &Arc<Semaphore>,
    n: usize,
    jobs: usize,
) -> Option<Vec<OwnedSemaphorePermit>> {
    let n = n.clamp(1, jobs.max(1));
    let mut all = permits.clone().acquire_many_owned(n as u32).await.ok()?;
    let mut taken = Vec::with_capacity(n);
    while all.num_permits() > 1 {
        taken.push(all.split(1)?);
    }
    taken.push(all);
    Some(taken)
}

fn closed(e: tokio::sync::AcquireError) -> RunError {
    RunError::Refused(format!("the run's task slots closed: {e}"))
}

/// Makes the records of task `index`'s attempts that it has not yet (each with its own
/// directory, worktree and branch beside the task's), and marks the task running.
fn open_attempts(shared: &Shared, index: usize, count: u32) {
    let parent = shared.record(index);
    let tasks_dir = TaskDir::of_log(&parent.log)
        .path()
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let owned_list = std::fs::read(TaskDir::of_log(&parent.log).owned_list()).ok();
    let mut made = Vec::new();
    for n in (parent.attempts.len() as u32 + 1)..=count {
        let id = state::attempt_id(&parent.id, n);
        let dir = TaskDir(tasks_dir.join(&id));
        let _ = std::fs::create_dir_all(dir.path());
        if let Some(list) = &owned_list {
            let _ = std::fs::write(dir.owned_list(), list);
        }
        let worktree = parent.worktree.with_file_name(&id);
        made.push(parent.attempt(&shared.run, n, worktree, dir.agent_log()));
    }
    shared.update(index, |t| {
        t.attempts.extend(made);
        if !t.state.is_final() {
            t.state = TaskState::Running;
            t.error = None;
            t.started_at.get_or_insert_with(now_ms);
        }
    });
}

/// Why attempt `slot` is not to start now that its slot is free: a pick made without it,
/// or the run's budget spent.
fn not_to_start(shared: &Shared, slot: Slot) -> Option<String> {
    if let Some(pick) = shared.record(slot.index).pick {
        return Some(format!("not started: attempt {} was chosen", pick.attempt));
    }
    let record = shared.record(slot);
    if record.started_at.is_none() {
        if let Some(reason) = shared.budget.exhausted() {
            return Some(format!("not started: {reason}"));
        }
    }
    None
}

/// Stops every attempt of task `index` but `chosen`: those running end at once, those not
/// started never start.
fn stop_others(shared: &Shared, index: usize, chosen: u32) {
    let count = shared.record(index).attempts.len() as u32;
    for n in (1..=count).filter(|&n| n != chosen) {
        let slot = Slot::attempt(index, n);
        if !shared.record(slot).state.is_final() {
            shared
                .stops
                .stop(slot, format!("stopped: attempt {chosen} was chosen"), false);
        }
    }
}

/// With `[pick] fallback = "least-red"`, the attempt with the fewest failing checks among
/// those that could otherwise be taken (mergeable, with a change, its checks run), the
/// first to end among equals; `None` otherwise.
fn least_red(task: &TaskRecord, fallback: plait_plan::Fallback) -> Option<Choice> {
    if fallback != plait_plan::Fallback::LeastRed {
        return None;
    }
    let red = |a: &TaskRecord| a.checks.iter().filter(|c| !c.passed).count();
    let (attempt, n) = task
        .attempts
        .iter()
        .zip(1..)
        .filter(|(a, _)| {
            plait_stages::merge::run::mergeable(a) && !a.unchanged() && !a.checks.is_empty()
        })
        .min_by_key(|(a, _)| (red(a), a.finished_at.unwrap_or(u64::MAX)))?;
    Some(Choice {
        attempt: n,
        by: "least-red".to_string(),
        why: format!(
            "no attempt's checks passed; it had the fewest failing ({} of {}), as [pick] \
             fallback = \"least-red\" asks, and its checks are still red",
            red(attempt),
            attempt.checks.len()
        ),
        candidates: vec![n],
        note: None,
        usage: None,
    })
}

/// Task `index` fails, no attempt having passed: each attempt's end named.
fn fail_all(shared: &Shared, index: usize) {
    let record = shared.record(index);
    let ends: Vec<String> = record
        .attempts
        .iter()
        .map(|a| format!("{}: {}", a.id, end_of(a)))
        .collect();
    let usage = record.attempts_usage(None);
    shared.update(index, |t| {
        t.state = TaskState::Failed;
        t.error = Some(format!("no attempt passed ({})", ends.join("; ")));
        t.finished_at = Some(now_ms());
        t.usage = usage;
    });
}

/// How an attempt ended, in a few words.
pub(super) fn end_of(attempt: &TaskRecord) -> String {
    if let Some(error) = &attempt.error {
        return format!("{} ({error})", attempt.state.as_str());
    }
    if let Some(failed) = attempt.checks.iter().find(|c| !c.passed) {
        return format!("its check `{}` {}", failed.command, failed.failure_word());
    }
    if let Some(review) = &attempt.review {
        if review.verdict != plait_core::state::Verdict::Approve {
            return format!("the reviewer said {}", review.verdict.as_str());
        }
    }
    if !attempt.violations.is_empty() {
        return "it wrote outside what it owns".to_string();
    }
    if attempt.unchanged() {
        return "it changed nothing".to_string();
    }
    attempt.state.as_str().to_string()
}
