//! Running a run's tasks here, `-j` at a time: [`Local`]'s way of being the run's
//! [`Dispatch`]. The trait and `Local` itself are declared beside [`Shared`], which holds
//! the run's dispatch (`super::shared`); the other way, spread over many machines through
//! the store, is `coordinate::Spread`. `execute` picks one for the run and keeps it on
//! [`Shared`]; the run's tasks, every send-back after them (a supervisor's, the culprits')
//! and the publishing of its merge go through it, so nothing else asks how the run is
//! spread.
//!
//! The top of the task's files: it names the task's entry points (`task`) and the waves
//! (`waves`), and nothing below names it.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::starts::Stale;
use super::{attempts, task, waves, RunError, Shared};

pub(super) use super::shared::{Dispatch, Local};

impl Dispatch for Local {
    fn run_tasks<'a>(&'a self, shared: &'a Arc<Shared>) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(run_tasks(shared))
    }

    fn rework<'a>(
        &'a self,
        shared: &'a Arc<Shared>,
        targets: Vec<(usize, String)>,
    ) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(rework(shared, targets))
    }

    fn restart<'a>(
        &'a self,
        shared: &'a Arc<Shared>,
        again: Vec<Stale>,
    ) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(async move {
            restart_here(shared, again).await;
            Ok(())
        })
    }
}

/// Runs every task, `-j` at a time, until all have ended. Tasks start in the plan's order:
/// a slot is taken before a task is spawned, so a later task never overtakes an earlier
/// one that waits for the same slot. A task that comes after others (`after`) waits for
/// them without a slot, and takes one the moment its start is made.
async fn run_tasks(shared: &Arc<Shared>) -> Result<(), RunError> {
    let permits = Arc::new(Semaphore::new(shared.jobs));
    let mut set = JoinSet::new();
    let count = shared.plan.tasks.len();
    for index in (0..count).filter(|&i| !shared.waits[i].is_empty()) {
        let (shared, permits) = (shared.clone(), permits.clone());
        set.spawn(async move {
            if !waves::await_start(&shared, index).await {
                return Ok(());
            }
            let Some(taken) =
                attempts::take(&permits, attempts::slots(&shared, index), shared.jobs).await
            else {
                return Ok(());
            };
            attempts::run(&shared, index, permits, taken).await
        });
    }
    for index in (0..count).filter(|&i| shared.waits[i].is_empty()) {
        let Some(taken) =
            attempts::take(&permits, attempts::slots(shared, index), shared.jobs).await
        else {
            break;
        };
        // A task that panicked is told at once, not after every later task has started.
        while let Some(joined) = set.try_join_next() {
            joined.map_err(RunError::panicked("a task"))??;
        }
        let (shared, permits) = (shared.clone(), permits.clone());
        set.spawn(async move { attempts::run(&shared, index, permits, taken).await });
    }
    while let Some(joined) = set.join_next().await {
        joined.map_err(RunError::panicked("a task"))??;
    }
    Ok(())
}

/// Sends ended tasks back to their worktrees here for one more round each, `-j` at a time,
/// and waits for them to end again.
async fn rework(shared: &Arc<Shared>, targets: Vec<(usize, String)>) -> Result<(), RunError> {
    let permits = Arc::new(Semaphore::new(shared.jobs));
    let jobs = targets.into_iter().map(|(index, feedback)| {
        let permits = permits.clone();
        async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            task::rework(shared, index, feedback).await;
        }
    });
    futures_util::future::join_all(jobs).await;
    // The tasks that come after them start again from their new work.
    waves::refresh(shared, None).await
}

/// Runs the stale tasks `again` here (a local run's `Dispatch::restart`): they wait for
/// each other as in the run, without a slot until their start is made, `-j` at a time.
async fn restart_here(shared: &Arc<Shared>, again: Vec<Stale>) {
    let permits = Arc::new(tokio::sync::Semaphore::new(shared.jobs));
    let jobs = again.into_iter().map(|stale| {
        let permits = permits.clone();
        async move {
            if !waves::await_start(shared, stale.index).await {
                return;
            }
            // A task of attempts that never ran runs them now.
            let record = shared.record(stale.index);
            if record.started_at.is_none() && shared.plan.tasks[stale.index].attempts.is_some() {
                let slots = attempts::slots(shared, stale.index);
                if let Some(taken) = attempts::take(&permits, slots, shared.jobs).await {
                    let _ = attempts::run(shared, stale.index, permits, taken).await;
                }
                return;
            }
            let Ok(_permit) = permits.clone().acquire_owned().await else {
                return;
            };
            task::restart(shared, stale).await;
        }
    });
    futures_util::future::join_all(jobs).await;
}
