//! A worker of runs spread over many machines (`plait worker`): it claims tasks from the
//! store under a lease it renews, and runs each through the same pipeline as a local run
//! (worktree, agent in its sandbox, collect, task checks, review) in a clone it keeps per
//! repository, fed from the run's git remote.
//!
//! What it pushes, and when: a round's commit, when the task goes on past it (to review or
//! another round, as the pipeline tells through `Shared::on_commit`; progress events only
//! pass to the caller), to the claim's own ref ([`plait_core::refs::attempt_ref`]) with the
//! store told (the checkpoint a worker taking the task over goes on from); at the end, the
//! tip to that ref, then the outcome recorded in the store fenced by the claim's
//! generation. A claim whose lease was taken over records nothing. The task branch
//! `plait/<run>/<task>` on the remote is set by the coordinator from the recorded tip, so
//! it never holds a loser's. Ctrl-C lets the running tasks end at a boundary (their work
//! committed and pushed) and gives them back to the queue.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use git2::Oid;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use super::{attempts, lay_down, steering, task, RunError, RunSettings, Shared, Update};
use plait_core::cancel::Cancel;
use plait_core::state::Store;
use plait_core::sync::Locked as _;
use plait_plan::{self as plan, ResolvedPlan};
use plait_stages::context::{Context, Env};
use plait_store::pg::{Checkpoint, Claim, PgListener, PgStore};
use plait_store::remote;

/// How long a claim lasts unless renewed (it is renewed at a third of that).
pub(crate) const LEASE: Duration = Duration::from_secs(30);

/// How a worker runs.
pub struct WorkerSettings {
    /// The PostgreSQL store the runs and their tasks are claimed from.
    pub store: tokio_postgres::Config,
    /// The git remote as this machine reaches it; default: the one each run records.
    pub remote: Option<String>,
    /// Where the worker keeps its clones (one per remote) and takes its lock.
    pub dir: PathBuf,
    /// Tasks at once.
    pub jobs: usize,
    /// How long a claim holds without being renewed.
    pub lease: Duration,
    /// Who claims, as the store records it.
    pub name: String,
    /// Take only this run's tasks (a coordinator's own worker).
    pub only: Option<String>,
    /// A run's plan resolved already (the coordinator's own).
    pub known: Option<(String, Arc<ResolvedPlan>)>,
    /// The environment the runs' plans read their variables from.
    pub env: Env,
    /// plait's own program, which the agents' hooks call back.
    pub plait_program: PathBuf,
    /// Stop once nothing was there to claim for this long.
    pub idle_exit: Option<Duration>,
}

/// What a worker did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WorkerReport {
    /// Tasks whose outcome this worker recorded.
    pub recorded: usize,
    /// Tasks given back to the queue (interrupted).
    pub released: usize,
    /// Tasks whose lease another worker took over before this one could record them.
    pub lost: usize,
}

#[derive(Default)]
struct Counts {
    recorded: AtomicUsize,
    released: AtomicUsize,
    lost: AtomicUsize,
}

/// A run as this worker holds it: its clone, its plan and shared state.
struct RunCtx {
    shared: Arc<Shared>,
    remote: String,
    /// Each task's claim while this worker has it, and the commit last pushed for it.
    claims: Mutex<HashMap<String, (Claim, Option<String>)>>,
    /// The run's pushes, batched.
    pusher: Pusher,
    /// Held while requests made of its tasks are taken (`steering::take_stored`).
    steering: tokio::sync::Mutex<()>,
}

/// Claims and runs tasks until interrupted (or idle for `idle_exit`).
pub async fn serve(
    settings: WorkerSettings,
    events: Option<mpsc::UnboundedSender<Update>>,
    cancel: Cancel,
) -> Result<WorkerReport, RunError> {
    std::fs::create_dir_all(&settings.dir).map_err(|source| RunError::Io {
        path: settings.dir.clone(),
        source,
    })?;
    let _lock = Store::new(settings.dir.clone()).lock()?;
    let pg = Arc::new(PgStore::connect(&settings.store, Duration::from_secs(10)).await?);
    let mut listener = PgListener::connect(&settings.store, Duration::from_secs(10)).await?;
    // Every run's model requests share the limits of their keys with the other machines.
    let exchange: Arc<dyn plait_llm::limiter::Exchange> =
        Arc::new(plait_store::pg::PgExchange::new(pg.clone()));
    let settings = Arc::new(settings);
    let runs: Arc<Runs> = Default::default();
    let hearing = tokio::spawn(hear_requests(
        runs.clone(),
        pg.clone(),
        settings.store.clone(),
        cancel.clone(),
    ));
    let counts = Arc::new(Counts::default());
    let permits = Arc::new(Semaphore::new(settings.jobs.max(1)));
    let mut set: JoinSet<Result<(), RunError>> = JoinSet::new();
    let mut idle_since = tokio::time::Instant::now();
    let mut failure = None;
    let wake = settings.lease.min(Duration::from_secs(5));
    loop {
        while let Some(joined) = set.try_join_next() {
            if let Some(e) = joined_error(joined) {
                failure = Some(e);
            }
        }
        if cancel.is_cancelled() || failure.is_some() {
            break;
        }
        let permit = tokio::select! {
            // An interrupt wins over a slot that frees at the same moment: a stopping
            // worker claims nothing more.
            biased;
            _ = cancel.cancelled() => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                // The slots are never closed; if they were, no task could start.
                Err(_) => break,
            },
        };
        if cancel.is_cancelled() {
            break;
        }
        // As many tasks as there are free slots, in one claim.
        let mut free = vec![permit];
        free.extend(std::iter::from_fn(|| {
            permits.clone().try_acquire_owned().ok()
        }));
        let claims = pg
            .claim_many(
                settings.only.as_deref(),
                &settings.name,
                settings.lease,
                free.len(),
            )
            .await?;
        if claims.is_empty() {
            drop(free);
            let idle = set.is_empty();
            if !idle {
                idle_since = tokio::time::Instant::now();
            }
            if idle
                && settings
                    .idle_exit
                    .is_some_and(|d| idle_since.elapsed() >= d)
            {
                break;
            }
            tokio::select! {
                _ = listener.any(wake) => {}
                _ = cancel.cancelled() => break,
                Some(joined) = set.join_next(), if !set.is_empty() => {
                    if let Some(e) = joined_error(joined) {
                        failure = Some(e);
                    }
                }
            }
            continue;
        }
        idle_since = tokio::time::Instant::now();
        // Each claim runs with a slot of its own; the slots left over are let go.
        for (claim, permit) in claims.into_iter().zip(free) {
            let (settings, pg, runs, counts) =
                (settings.clone(), pg.clone(), runs.clone(), counts.clone());
            let (events, cancel, exchange) = (events.clone(), cancel.clone(), exchange.clone());
            let permits = permits.clone();
            set.spawn(async move {
                let opened = run_of(&runs, &settings, &pg, &claim.run, events, cancel, exchange);
                let ctx = match opened.await {
                    Ok(ctx) => ctx,
                    Err(e) => {
                        let _ = pg.release(&claim.run, &claim).await;
                        return Err(e);
                    }
                };
                work_on(&ctx, &pg, &settings, claim, &counts, (permits, permit)).await
            });
        }
    }
    while let Some(joined) = set.join_next().await {
        if let Some(e) = joined_error(joined) {
            failure.get_or_insert(e);
        }
    }
    hearing.abort();
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(WorkerReport {
        recorded: counts.recorded.load(Ordering::Relaxed),
        released: counts.released.load(Ordering::Relaxed),
        lost: counts.lost.load(Ordering::Relaxed),
    })
}

/// The runs this worker has opened, by id.
type Runs = tokio::sync::Mutex<HashMap<String, Arc<RunCtx>>>;

/// Takes the requests people make of the tasks this worker holds (`plait tell`, `plait
/// stop` on the coordinator's machine) as the store tells of them, and every two seconds
/// in case a notification was lost, until the worker stops.
async fn hear_requests(
    runs: Arc<Runs>,
    pg: Arc<PgStore>,
    config: tokio_postgres::Config,
    cancel: Cancel,
) {
    let mut listener = match PgListener::requests(&config, Duration::from_secs(10)).await {
        Ok(listener) => listener,
        Err(e) => {
            tracing::warn!(
                "requests made of this worker's tasks reach it only as it takes each task: {e}"
            );
            return;
        }
    };
    loop {
        tokio::select! {
            _ = listener.any(Duration::from_secs(2)) => {}
            _ = cancel.cancelled() => return,
        }
        let held: Vec<Arc<RunCtx>> = runs.lock().await.values().cloned().collect();
        for ctx in held {
            let tasks: Vec<String> = ctx.claims.locked().keys().cloned().collect();
            if !tasks.is_empty() {
                steering::take_stored(&ctx.shared, &pg, &tasks, &ctx.steering).await;
            }
        }
    }
}

/// Run `run` as this worker holds it, opened the first time one of its tasks is claimed.
async fn run_of(
    runs: &Runs,
    settings: &Arc<WorkerSettings>,
    pg: &Arc<PgStore>,
    run: &str,
    events: Option<mpsc::UnboundedSender<Update>>,
    cancel: Cancel,
    exchange: Arc<dyn plait_llm::limiter::Exchange>,
) -> Result<Arc<RunCtx>, RunError> {
    let mut runs = runs.lock().await;
    if let Some(ctx) = runs.get(run) {
        return Ok(ctx.clone());
    }
    let ctx = open_run(settings, pg, run, events, cancel, exchange).await?;
    runs.insert(run.to_string(), ctx.clone());
    Ok(ctx)
}

fn joined_error(joined: Result<Result<(), RunError>, tokio::task::JoinError>) -> Option<RunError> {
    match joined {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(e) => Some(RunError::panicked("a task")(e)),
    }
}

/// Sets up run `run` on this machine: its clone (made once per remote), its base commit
/// fetched, its plan resolved here, its state laid down in the clone.
async fn open_run(
    settings: &Arc<WorkerSettings>,
    pg: &Arc<PgStore>,
    run: &str,
    events: Option<mpsc::UnboundedSender<Update>>,
    cancel: Cancel,
    exchange: Arc<dyn plait_llm::limiter::Exchange>,
) -> Result<Arc<RunCtx>, RunError> {
    let queue = pg
        .queue(run)
        .await?
        .ok_or_else(|| RunError::Refused(format!("run {run} is not queued for workers")))?;
    let remote = settings.remote.clone().unwrap_or(queue.remote.clone());
    let (settings_for, run_id) = (settings.clone(), run.to_string());
    let remote_for = remote.clone();
    let (run_settings, state) =
        tokio::task::spawn_blocking(move || set_up(&settings_for, &run_id, &queue, &remote_for))
            .await
            .map_err(RunError::panicked("setting up the run"))??;
    let (commits, committed) = mpsc::unbounded_channel();
    let shared = Shared::new(
        &run_settings,
        state,
        events,
        cancel,
        None,
        plait_llm::limiter::Limiters::shared(exchange),
    )?
    .on_commit(Box::new(move |index| {
        let _ = commits.send(index);
    }));
    let ctx = Arc::new(RunCtx {
        shared: Arc::new(shared),
        remote,
        claims: Mutex::new(HashMap::new()),
        pusher: Pusher::default(),
        steering: tokio::sync::Mutex::new(()),
    });
    tokio::spawn(checkpoints(Arc::downgrade(&ctx), pg.clone(), committed));
    Ok(ctx)
}

/// The blocking part of [`open_run`].
fn set_up(
    settings: &WorkerSettings,
    run: &str,
    queue: &plait_store::pg::Queue,
    remote: &str,
) -> Result<(RunSettings, plait_core::state::RunState), RunError> {
    let problem = |e: Box<dyn std::error::Error + Send + Sync>| RunError::TakeRun {
        run: run.to_string(),
        source: e,
    };
    let clone = remote::clone_for(&settings.dir, remote).map_err(|e| problem(e.into()))?;
    let base_ref = plait_core::refs::base_ref(&queue.base);
    remote::fetch(
        &clone,
        remote,
        &[format!("+{base_ref}:{base_ref}")],
        &format!(
            "the run's base commit {}",
            plait_core::git::short(&queue.base)
        ),
    )
    .map_err(|e| problem(e.into()))?;
    // A new clone has no commit checked out; plait opens only repositories that have one.
    let base = Oid::from_str(&queue.base).map_err(|e| problem(e.into()))?;
    let raw = git2::Repository::open(&clone).map_err(|e| problem(e.into()))?;
    if raw.head().is_err() {
        raw.set_head_detached(base).map_err(|e| problem(e.into()))?;
    }
    drop(raw);
    let context = Context::open(&clone, settings.env.clone(), settings.plait_program.clone())?;
    let plan_path = PathBuf::from(&queue.plan_path);
    let plan = match &settings.known {
        Some((known, plan)) if known == run => plan.clone(),
        _ => {
            let env = settings.env.clone();
            let repo = context.repo()?;
            let resolved =
                plan::resolve_kept(&repo, &queue.plan, &plan_path, &queue.base, &|name| {
                    env(name)
                })
                .map_err(|e| problem(e.into()))?;
            Arc::new(resolved)
        }
    };
    let run_settings = RunSettings {
        context,
        plan,
        plan_path,
        plan_text: queue.plan.clone(),
        jobs: settings.jobs,
        // Outside the clone: a tool walking up from a worktree must not reach the
        // clone's own checkout.
        worktree_root: Some(
            settings.dir.join("worktrees").join(
                clone
                    .file_name()
                    .unwrap_or_else(|| std::ffi::OsStr::new("clone")),
            ),
        ),
        max_cost: None,
        groups: None,
        store: None,
        remote: None,
    };
    let state = lay_down(run_settings.context.store(), run, &run_settings)?;
    // Agents a killed worker left running must not write into the worktrees again.
    let worktrees: Vec<PathBuf> = state.tasks.iter().map(|t| t.worktree.clone()).collect();
    plait_sandbox::shell::stop_leftovers(run, &worktrees);
    Ok((run_settings, state))
}

/// Renews the claim's lease until aborted; warns once when it was lost.
async fn heartbeat(pg: Arc<PgStore>, claim: Claim, lease: Duration) {
    loop {
        tokio::time::sleep(lease / 3).await;
        match pg.renew(&claim.run, &claim, lease).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(
                    "task {} of run {}: another worker took it over; this one's result will not be recorded",
                    claim.task,
                    claim.run
                );
                return;
            }
            Err(e) => tracing::warn!("could not renew the lease of task {}: {e}", claim.task),
        }
    }
}

/// Runs one claimed task to its end here and records it (or gives it back).
async fn work_on(
    ctx: &Arc<RunCtx>,
    pg: &Arc<PgStore>,
    settings: &WorkerSettings,
    claim: Claim,
    counts: &Counts,
    (permits, permit): (Arc<Semaphore>, tokio::sync::OwnedSemaphorePermit),
) -> Result<(), RunError> {
    let shared = &ctx.shared;
    let Some(index) = shared.plan.tasks.iter().position(|t| t.id == claim.task) else {
        let _ = pg.release(&claim.run, &claim).await;
        return Err(RunError::Refused(format!(
            "run {} has no task {} in its plan on this machine",
            claim.run, claim.task
        )));
    };
    let beat = tokio::spawn(heartbeat(pg.clone(), claim.clone(), settings.lease));
    ctx.claims
        .locked()
        .insert(claim.task.clone(), (claim.clone(), None));
    {
        let shared = shared.clone();
        let _ = tokio::task::spawn_blocking(move || task::reset(&shared, index)).await;
    }
    // What people asked of it before it was taken (a stop ends it here).
    steering::take_stored(shared, pg, std::slice::from_ref(&claim.task), &ctx.steering).await;
    // The next task starts while this one's work is pushed and recorded (under its lease):
    // the slot goes when the task has run.
    if shared.record(index).state.is_final() {
        drop(permit);
    } else if let Err(why) = take_start(ctx, &claim, index).await {
        drop(permit);
        task::fail_task(shared, index, why, None);
    } else {
        run_claimed(ctx, &claim, index, (permits, permit)).await;
    }
    let outcome = settle(ctx, pg, &claim, index, counts).await;
    beat.abort();
    ctx.claims.locked().remove(&claim.task);
    outcome
}

/// A claimed task that comes after others starts where the coordinator made its start:
/// the start its stored record names is fetched from the remote and recorded here.
async fn take_start(ctx: &RunCtx, claim: &Claim, index: usize) -> Result<(), String> {
    let Some(stored) = &claim.record else {
        return Ok(());
    };
    let Some(start) = stored.start.clone() else {
        return Ok(());
    };
    let shared = &ctx.shared;
    let branch =
        plait_core::refs::branch_ref(&plait_core::refs::start_branch(&claim.run, &claim.task));
    let (context, remote) = (shared.context.clone(), ctx.remote.clone());
    let wanted = start.clone();
    tokio::task::spawn_blocking(move || {
        remote::fetch(
            context.dir(),
            &remote,
            &[format!("+{branch}:{branch}")],
            "the task's start",
        )
        .map_err(|e| e.to_string())?;
        let repo = context.repo().map_err(|e| e.to_string())?;
        Oid::from_str(&wanted)
            .and_then(|c| repo.find_commit(c))
            .map(drop)
            .map_err(|_| format!("its start {wanted} is not on the remote"))
    })
    .await
    .map_err(|e| e.to_string())??;
    let from = stored.start_from.clone();
    shared.forget_start(index);
    shared.update(index, |t| {
        t.start = Some(start);
        t.start_from = from;
    });
    Ok(())
}

/// Runs claimed task `index` here, as the claim says: from the start, from the work an
/// earlier claim pushed (taken over), or, sent back after it ended, one more round from
/// its branch's tip with what it is told.
async fn run_claimed(
    ctx: &RunCtx,
    claim: &Claim,
    index: usize,
    (permits, permit): (Arc<Semaphore>, tokio::sync::OwnedSemaphorePermit),
) {
    let shared = &ctx.shared;
    let Some(checkpoint) = claim.checkpoint else {
        // A task of attempts runs them here, each with a slot of this worker's.
        if let Err(e) = attempts::run(shared, index, permits, vec![permit]).await {
            task::fail_task(shared, index, e.to_string(), None);
        }
        return;
    };
    let _permit = permit;
    let commit = checkpoint.commit;
    let fetched = fetch_checkpoint(ctx, claim, checkpoint).await;
    match (fetched, &claim.feedback) {
        (Ok(()), None) => task::take_over(shared, index, commit).await,
        (Ok(()), Some(feedback)) => {
            // Its record here becomes the one its last claim recorded (its rounds, usage
            // and judgements), with this machine's paths.
            if let Some(stored) = claim.record.clone() {
                shared.update(index, |t| t.adopt(stored));
            }
            task::rework_from(shared, index, commit, feedback.clone()).await
        }
        (Err(e), None) => {
            tracing::warn!(
                "task {}: the work pushed for it before cannot be fetched ({e}); it starts again",
                claim.task
            );
            task::run_task(shared, index).await
        }
        // Starting again would throw away the work it was sent back to change.
        (Err(e), Some(_)) => task::fail_task(
            shared,
            index,
            format!("it was sent back for another round, but its branch cannot be fetched: {e}"),
            None,
        ),
    }
}

/// Fetches the work `checkpoint` names from the remote, to go on from.
async fn fetch_checkpoint(
    ctx: &RunCtx,
    claim: &Claim,
    checkpoint: Checkpoint,
) -> Result<(), String> {
    let Checkpoint { generation, commit } = checkpoint;
    let refname = plait_core::refs::attempt_ref(&claim.run, &claim.task, generation);
    let (context, remote) = (ctx.shared.context.clone(), ctx.remote.clone());
    tokio::task::spawn_blocking(move || {
        remote::fetch(
            context.dir(),
            &remote,
            &[format!("+{refname}:{refname}")],
            "the task's work so far",
        )
        .map_err(|e| e.to_string())?;
        let repo = context.repo().map_err(|e| e.to_string())?;
        repo.find_commit(commit)
            .map(drop)
            .map_err(|_| format!("commit {commit} is not on the remote"))
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The pushes of a run's claims, batched: each waits for one `git push` at a time, and
/// that push takes every ref waiting then (a worker whose tasks end faster than one push
/// each pushes many in one). A claim's last push is final: a checkpoint that comes after
/// it is dropped, so the claim's ref never goes back to an older commit.
#[derive(Default)]
struct Pusher {
    waiting: Mutex<Waiting>,
    gate: tokio::sync::Mutex<()>,
}

type Outcome = tokio::sync::oneshot::Sender<Result<(), String>>;

#[derive(Default)]
struct Waiting {
    /// By destination ref: the commit to push there and who waits for it.
    refs: Vec<(String, String, Vec<Outcome>)>,
    /// Refs whose last push was asked for.
    finished: std::collections::HashSet<String>,
}

/// Pushes `commit` to the claim's own ref; `last`: the claim's final push. `Ok(false)`
/// when a checkpoint came after the final push and was dropped.
async fn push_attempt(
    ctx: &RunCtx,
    claim: &Claim,
    commit: &str,
    last: bool,
) -> Result<bool, String> {
    let refname = plait_core::refs::attempt_ref(&claim.run, &claim.task, claim.generation);
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    {
        let mut waiting = ctx.pusher.waiting.locked();
        if waiting.finished.contains(&refname) && !last {
            return Ok(false);
        }
        if last {
            waiting.finished.insert(refname.clone());
        }
        match waiting.refs.iter_mut().find(|(r, _, _)| *r == refname) {
            Some(entry) => {
                entry.1 = commit.to_string();
                entry.2.push(tx);
            }
            None => waiting.refs.push((refname, commit.to_string(), vec![tx])),
        }
    }
    let _gate = ctx.pusher.gate.lock().await;
    if let Ok(done) = rx.try_recv() {
        return done.map(|()| true);
    }
    let batch = std::mem::take(&mut ctx.pusher.waiting.locked().refs);
    let refspecs: Vec<String> = batch
        .iter()
        .map(|(refname, commit, _)| format!("+{commit}:{refname}"))
        .collect();
    let what = format!("the work of {} task(s) of run {}", batch.len(), claim.run);
    let pushed = push(ctx, refspecs, what).await;
    for (_, _, outcomes) in batch {
        for outcome in outcomes {
            let _ = outcome.send(pushed.clone());
        }
    }
    rx.await
        .unwrap_or_else(|_| Err("the push was dropped".to_string()))
        .map(|()| true)
}

async fn push(ctx: &RunCtx, refspecs: Vec<String>, what: String) -> Result<(), String> {
    let (repo, remote) = (ctx.shared.context.dir().to_path_buf(), ctx.remote.clone());
    tokio::task::spawn_blocking(move || remote::push(&repo, &remote, &refspecs, &what))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// Records the task's end in the store (fenced by the claim's generation) and pushes its
/// branch; a task that did not end (interrupted) is pushed as it is and given back.
async fn settle(
    ctx: &RunCtx,
    pg: &PgStore,
    claim: &Claim,
    index: usize,
    counts: &Counts,
) -> Result<(), RunError> {
    let record = ctx.shared.record(index);
    if !record.state.is_final() {
        if let Some(commit) = &record.commit {
            match push_attempt(ctx, claim, commit, true).await {
                // A commit that could be pushed is a commit id.
                Ok(_) => {
                    if let Ok(at) = Oid::from_str(commit) {
                        pg.checkpoint(claim, at).await?;
                    }
                }
                Err(e) => {
                    tracing::warn!("task {}: its work so far was not pushed: {e}", claim.task)
                }
            }
        }
        pg.release(&claim.run, claim).await?;
        counts.released.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    let pushed = ctx
        .claims
        .locked()
        .get(&claim.task)
        .and_then(|(_, pushed)| pushed.clone());
    if let Some(commit) = record
        .commit
        .as_ref()
        .filter(|c| pushed.as_ref() != Some(*c))
    {
        if let Err(e) = push_attempt(ctx, claim, commit, true).await {
            // Not recorded: the task goes back to the queue for a worker that can push.
            tracing::warn!("task {}: its branch could not be pushed: {e}", claim.task);
            pg.release(&claim.run, claim).await?;
            counts.released.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
    }
    let won = pg
        .finish_at(&claim.run, claim, &record, record.commit.as_deref())
        .await?;
    if !won {
        counts.lost.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    counts.recorded.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Pushes the commit of each claimed task the pipeline goes on past (its index, as
/// [`Shared::on_commit`] tells it) as the claim's checkpoint, one at a time, while the run
/// is held here.
async fn checkpoints(
    ctx: std::sync::Weak<RunCtx>,
    pg: Arc<PgStore>,
    mut committed: mpsc::UnboundedReceiver<usize>,
) {
    while let Some(index) = committed.recv().await {
        let Some(ctx) = ctx.upgrade() else {
            return;
        };
        checkpoint(&ctx, &pg, index).await;
    }
}

/// Pushes the newest commit of claimed task `index`, if it has one not pushed yet.
async fn checkpoint(ctx: &RunCtx, pg: &PgStore, index: usize) {
    let record = ctx.shared.record(index);
    let (task, Some(commit)) = (record.id.as_str(), record.commit) else {
        return;
    };
    // plait records each commit by its id.
    let Ok(at) = Oid::from_str(&commit) else {
        return;
    };
    let claim = {
        let claims = ctx.claims.locked();
        match claims.get(task) {
            Some((claim, pushed)) if pushed.as_deref() != Some(commit.as_str()) => claim.clone(),
            _ => return,
        }
    };
    match push_attempt(ctx, &claim, &commit, false).await {
        Ok(false) => {}
        Ok(true) => {
            if let Err(e) = pg.checkpoint(&claim, at).await {
                tracing::warn!("task {task}: its checkpoint was not recorded: {e}");
            }
            if let Some((_, pushed)) = ctx.claims.locked().get_mut(task) {
                *pushed = Some(commit);
            }
        }
        Err(e) => tracing::warn!("task {task}: its checkpoint was not pushed: {e}"),
    }
}
