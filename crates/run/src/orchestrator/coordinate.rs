//! The coordinator of a run over many machines: its tasks are queued in the store, workers
//! (and, with `-j N`, this process itself through a worker of its own) take them, and the
//! coordinator waits through `LISTEN/NOTIFY`, never polling in a loop. Each change it
//! hears it reads from the store: a task taken shows as running, a task ended has its
//! record copied into the run's (the paths stay this machine's) and its branch fetched
//! from the remote at the tip the winning claim recorded. When every task has ended, the
//! run merges as a local one does.
//!
//! A task sent back after that (a supervisor asked for changes, or it broke the merged
//! checks) goes back through the store too: queued again with what it is told, a worker
//! takes it over from its branch's tip for one more round and its review rounds, and the
//! coordinator waits for it as before, fetching its new tip. Its worktree is on whichever
//! worker ran it, so that is the one place the round can run; and it runs where every
//! round runs, under a lease, with the workers' agents, keys and shared limits.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use git2::Oid;

use super::shared::Dispatch;
use super::starts::Stale;
use super::waves;
use super::{RunError, Shared};
use plait_core::state::TaskState;
use plait_core::sync::Locked as _;
use plait_store::pg::{PgListener, PgStore, TaskRow};
use plait_store::remote;

/// How long the coordinator waits for a notification before it reads every task again: a
/// change numbered before another may commit after it (and a notification may be lost
/// with a dropped connection); neither must stall the run.
const QUIET: Duration = Duration::from_secs(2);

/// How the coordinator of a run over many machines reaches them: the run's tasks go to
/// the workers through it.
pub(super) struct Spread {
    pub config: tokio_postgres::Config,
    pub pg: Arc<PgStore>,
    /// The git remote the workers push to.
    pub remote: String,
    /// Tasks at once this machine takes itself (`-j`; none with 0).
    pub jobs: usize,
    /// Tasks to run again from a new start once released, with the work they had.
    pub restarts: std::sync::Mutex<HashMap<usize, Stale>>,
}

impl Dispatch for Spread {
    fn run_tasks<'a>(&'a self, shared: &'a Arc<Shared>) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(run_tasks(shared, self))
    }

    fn rework<'a>(
        &'a self,
        shared: &'a Arc<Shared>,
        targets: Vec<(usize, String)>,
    ) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(rework(shared, self, targets))
    }

    fn restart<'a>(
        &'a self,
        shared: &'a Arc<Shared>,
        again: Vec<Stale>,
    ) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(restart(shared, self, again))
    }

    fn spread_store(&self) -> Option<&Arc<PgStore>> {
        Some(&self.pg)
    }

    /// Other machines see the merge (`plait diff/land --store`) through the remote.
    fn publish<'a>(&'a self, shared: &'a Shared) -> BoxFuture<'a, ()> {
        Box::pin(publish(shared, &self.remote))
    }
}

/// Waits until every task of the run has ended on some worker, keeping the run's record
/// and branches in step; returns early when the run is interrupted (the tasks stay queued
/// for the workers, and `plait resume` waits again).
async fn run_tasks(shared: &Arc<Shared>, spread: &Spread) -> Result<(), RunError> {
    let (pg, remote) = (&spread.pg, spread.remote.as_str());
    let mut listener = PgListener::connect(&spread.config, Duration::from_secs(10)).await?;
    let own = (spread.jobs > 0).then(|| {
        let worker = super::worker::WorkerSettings {
            store: spread.config.clone(),
            remote: Some(remote.to_string()),
            dir: shared.store.run_dir(&shared.run).join("worker"),
            jobs: spread.jobs,
            lease: super::worker::LEASE,
            name: format!("coordinator-{}", std::process::id()),
            only: Some(shared.run.clone()),
            known: Some((shared.run.clone(), shared.plan.clone())),
            env: Arc::new(|_| None),
            plait_program: shared.context.program().to_path_buf(),
            idle_exit: None,
        };
        let cancel = shared.cancel.clone();
        tokio::spawn(async move { super::worker::serve(worker, None, cancel).await })
    });
    let outcome = wait(shared, spread, &mut listener).await;
    if let Some(own) = own {
        if outcome.is_ok() && !shared.cancel.is_cancelled() {
            // Every task has ended: the worker has nothing left to do.
            own.abort();
        } else if let Ok(Err(e)) = own.await {
            tracing::warn!("this machine's worker stopped: {e}");
        }
    }
    if outcome.is_ok() && !shared.cancel.is_cancelled() {
        pg.close_queue(&shared.run).await?;
    }
    outcome
}

/// Sends ended tasks back for one more round each, `(index, feedback)`: queued again in
/// the store with what each is told, then waited for (as [`run_tasks`] waits) until they
/// have ended again, their new tips fetched. A task the store cannot send back (it ended
/// with no work) keeps its result. Interrupted, the run goes on without them (they are
/// not merged), as a local run does with tasks interrupted in their rework.
async fn rework(
    shared: &Arc<Shared>,
    spread: &Spread,
    targets: Vec<(usize, String)>,
) -> Result<(), RunError> {
    let tasks: Vec<(String, String)> = targets
        .into_iter()
        .map(|(index, feedback)| (shared.plan.tasks[index].id.clone(), feedback))
        .collect();
    let back = spread.pg.send_back(&shared.run, &tasks).await?;
    if back.is_empty() {
        return Ok(());
    }
    for (index, task) in shared.plan.tasks.iter().enumerate() {
        if back.contains(&task.id) {
            shared.update(index, |t| {
                t.state = TaskState::Pending;
                t.finished_at = None;
                t.error = None;
            });
        }
    }
    run_tasks(shared, spread).await?;
    if shared.cancel.is_cancelled() {
        // The run ends now: nobody would take in what workers did after.
        spread.pg.close_queue(&shared.run).await?;
        return Ok(());
    }
    // The tasks that come after them start again from their new work.
    waves::refresh(shared, None).await
}

/// Runs stale tasks again from new starts through the store: back to waiting, released
/// (with their work carried onto the new start) as their inputs end, taken by workers.
async fn restart(shared: &Arc<Shared>, spread: &Spread, again: Vec<Stale>) -> Result<(), RunError> {
    let ids: Vec<String> = again
        .iter()
        .map(|s| shared.plan.tasks[s.index].id.clone())
        .collect();
    spread.pg.rewait(&shared.run, &ids).await?;
    spread
        .restarts
        .locked()
        .extend(again.into_iter().map(|s| (s.index, s)));
    run_tasks(shared, spread).await?;
    if shared.cancel.is_cancelled() {
        spread.pg.close_queue(&shared.run).await?;
    }
    Ok(())
}

/// Releases to the workers each waiting task whose inputs have all ended (`released`: those
/// released by this wait already): blocked, or with its start made here, pushed to the
/// remote, and recorded in the store; a task run again has its old work carried onto the
/// new start and pushed as the work to go on from.
async fn release_ready(
    shared: &Arc<Shared>,
    spread: &Spread,
    released: &mut HashSet<usize>,
) -> Result<(), RunError> {
    // Until a pass releases nothing: a task blocked in one may block another.
    loop {
        let before = released.len();
        release_pass(shared, spread, released).await?;
        if released.len() == before {
            return Ok(());
        }
    }
}

/// One pass of [`release_ready`] over the plan's tasks.
async fn release_pass(
    shared: &Arc<Shared>,
    spread: &Spread,
    released: &mut HashSet<usize>,
) -> Result<(), RunError> {
    let (pg, remote) = (&spread.pg, spread.remote.as_str());
    for index in 0..shared.plan.tasks.len() {
        if shared.waits[index].is_empty() || released.contains(&index) {
            continue;
        }
        if shared.record(index).state != TaskState::Pending || !waves::inputs_ended(shared, index) {
            continue;
        }
        released.insert(index);
        let restart = spread.restarts.locked().remove(&index);
        if !waves::settle_start(shared, index).await {
            let record = shared.record(index);
            pg.release_waiting(&shared.run, &record, record.state.as_str(), None)
                .await?;
            continue;
        }
        let record = shared.record(index);
        let mut refs = Vec::new();
        if record.start.is_some() {
            let start = plait_core::refs::branch_ref(&plait_core::refs::start_branch(
                &shared.run,
                &record.id,
            ));
            refs.push(format!("+{start}:{start}"));
        }
        let mut resume = None;
        if let Some(stale) = restart.filter(|_| record.started_at.is_some()) {
            let start = record
                .start
                .as_deref()
                .map_or(Ok(shared.plan.base), Oid::from_str)
                .map_err(|e| RunError::Refused(e.to_string()))?;
            let carried = match stale.work {
                None => Err("it had no work".to_string()),
                Some(work) => {
                    let (shared, id) = (shared.clone(), record.id.clone());
                    tokio::task::spawn_blocking(move || waves::carry(&shared, work, start, &id))
                        .await
                        .map_err(RunError::panicked("carrying a task's work"))??
                        .map_err(|paths| format!("git's merge conflicts at {}", paths.join(", ")))
                }
            };
            if let Ok(commit) = &carried {
                let generation = pg.generation(&shared.run, &record.id).await?;
                let at = plait_core::refs::attempt_ref(&shared.run, &record.id, generation);
                refs.push(format!("+{commit}:{at}"));
            }
            let note = carried.as_ref().map(|_| ()).map_err(String::as_str);
            let mut feedback = plait_agents::prompts::feedback::start_moved(&stale.changed, note);
            if let Some(told) = &stale.told {
                feedback = format!("{feedback}\n\n{told}");
            }
            resume = carried.ok().map(|commit| (commit, feedback));
        }
        if !refs.is_empty() {
            let (repo, remote, id) = (
                shared.context.dir().to_path_buf(),
                remote.to_string(),
                record.id.clone(),
            );
            tokio::task::spawn_blocking(move || {
                remote::push(&repo, &remote, &refs, &format!("the start of task {id}"))
            })
            .await
            .map_err(RunError::panicked("pushing a task's start"))??;
        }
        pg.release_waiting(&shared.run, &record, "pending", resume)
            .await?;
    }
    Ok(())
}

async fn wait(
    shared: &Arc<Shared>,
    spread: &Spread,
    listener: &mut PgListener,
) -> Result<(), RunError> {
    let (pg, remote) = (&spread.pg, spread.remote.as_str());
    let mut released = HashSet::new();
    // What the last read saw, and the one before: each read starts from the one before,
    // so a change that committed just after a later-numbered one is read the next time.
    let (mut seen, mut before) = (0, 0);
    let mut all = false;
    loop {
        let after = if all { 0 } else { before };
        let (rows, newest) = pg.changed_tasks(&shared.run, after).await?;
        take_in(shared, &rows, remote).await?;
        release_ready(shared, spread, &mut released).await?;
        before = seen;
        seen = seen.max(newest);
        let ended = shared
            .state
            .locked()
            .tasks
            .iter()
            .all(|t| t.state.is_final());
        if ended || shared.cancel.is_cancelled() {
            return Ok(());
        }
        tokio::select! {
            heard = listener.changed(&shared.run, QUIET) => all = !heard,
            _ = shared.cancel.cancelled() => return Ok(()),
        }
    }
}

/// Brings the run's record in step with the store's rows that changed (each with its place
/// in the plan): branches of newly ended tasks fetched (all in one fetch), their records
/// copied, taken tasks shown running.
async fn take_in(
    shared: &Arc<Shared>,
    rows: &[(usize, TaskRow)],
    remote: &str,
) -> Result<(), RunError> {
    if rows.is_empty() {
        return Ok(());
    }
    let tasks = shared.plan.tasks.len();
    let mut ended = Vec::new();
    for (index, row) in rows.iter().map(|(i, r)| (*i, r)) {
        let local = (index < tasks).then(|| shared.record(index));
        let Some(local) = local.filter(|t| t.id == row.id) else {
            return Err(RunError::Refused(format!(
                "the store's tasks of run {} do not match its plan (task {})",
                shared.run, row.id
            )));
        };
        let stored = TaskState::from_name(&row.state);
        match stored {
            Some(s) if s.is_final() && (!local.state.is_final() || local.commit != row.tip) => {
                ended.push((index, row));
            }
            Some(s) if s.is_final() => {}
            Some(TaskState::Running) if local.state == TaskState::Pending => {
                shared.update(index, |t| t.state = TaskState::Running);
            }
            _ => {}
        }
    }
    if ended.is_empty() {
        return Ok(());
    }
    let refspecs: Vec<String> = ended
        .iter()
        .filter(|(_, row)| row.tip.is_some())
        .map(|(_, row)| {
            format!(
                "+{}:{}",
                plait_core::refs::attempt_ref(&shared.run, &row.id, row.generation),
                plait_core::refs::branch_ref(&plait_core::refs::task_branch(&shared.run, &row.id))
            )
        })
        .collect();
    {
        let (repo, remote, count) = (
            shared.context.dir().to_path_buf(),
            remote.to_string(),
            refspecs.len(),
        );
        tokio::task::spawn_blocking(move || {
            remote::fetch(
                &repo,
                &remote,
                &refspecs,
                &format!("{count} task branch(es)"),
            )
        })
        .await
        .map_err(RunError::panicked("fetching the task branches"))??;
    }
    let repo = shared.context.repo()?;
    for (index, row) in ended {
        let record = row.record.clone();
        let problem = match &row.tip {
            Some(tip) => {
                let branch = plait_core::refs::branch_ref(&plait_core::refs::task_branch(
                    &shared.run,
                    &row.id,
                ));
                let at = repo.refname_to_id(&branch).ok();
                (at != Oid::from_str(tip).ok()).then(|| {
                    format!("the remote's branch is not at the commit its worker recorded ({tip})")
                })
            }
            None => None,
        };
        shared.update(index, |t| {
            let Some(from) = record else {
                t.state = TaskState::Failed;
                t.error = Some("the store's record of the task cannot be read".to_string());
                return;
            };
            // A person's decision is made here, on the run's record; but a task a person
            // stopped (`plait stop`, taken by its worker) was rejected there.
            let decision = t.decision.take();
            let stopped = (from.state == TaskState::Stopped)
                .then(|| from.decision.clone())
                .flatten();
            t.adopt(from);
            t.decision = decision.or(stopped);
            t.commit = row.tip.clone();
            if let Some(problem) = problem {
                t.state = TaskState::Failed;
                t.error = Some(problem);
            }
        });
    }
    Ok(())
}

/// Pushes the run's branches made here (its merge, its groups') to the remote.
async fn publish(shared: &Shared, remote: &str) {
    let run = shared.run.clone();
    let (repo, remote) = (shared.context.dir().to_path_buf(), remote.to_string());
    let pushed = tokio::task::spawn_blocking(move || {
        remote::push(
            &repo,
            &remote,
            &[plait_core::refs::run_branches(&run)],
            &format!("the branches of run {run}"),
        )
    })
    .await;
    if let Ok(Err(e)) = pushed {
        tracing::warn!("{e}");
    }
}
