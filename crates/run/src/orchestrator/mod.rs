//! The orchestrator: drives a run's tasks through workspace → agent → collect with at most
//! `jobs` tasks at once, then merges. One tokio runtime; all git2 work runs on blocking
//! threads, each opening its own `Repository` (git2 handles are not `Sync`).
//!
//! Message flow: each task is a future in a `JoinSet`, gated by a semaphore of `jobs`
//! permits held for the task's whole way, from `preparing` to its end (a task that comes
//! after others waits for its start without one). A task changes state only
//! through [`Shared::update`], which edits the in-memory `RunState` under a mutex, sends
//! an [`Event`] (as an [`Update`]) on the unbounded channel the caller may listen on (under the mutex, so
//! events keep the order of the changes; an unbounded send never blocks), and wakes the
//! state writer. The writer saves the newest snapshot atomically; transitions that arrive while
//! it writes are folded into its next write, so a slow disk never blocks a task, and the
//! final state is written synchronously before the run returns. No lock is held across an
//! `.await`. A task's failure is recorded on the task; only failures of plait itself
//! (state, merge) end the run with an error.
//!
//! A grouped run merges in two levels after its tasks (`grouped`): the groups' merges, the
//! supervisors' reviews (all at once), at most `[groups] rounds` passes of sending tasks
//! back through `task::rework` (gated by a fresh semaphore of `jobs` permits) and merging
//! again, then the top merge; each step is a [`GroupEvent`] on the same channel.
//!
//! Where the tasks run is the run's [`shared::Dispatch`], picked once by [`execute`]:
//! here, as above (`dispatch`), or spread over many machines, whose coordinator queues the
//! tasks (and those sent back, for its supervisors or `[checks] rework`) in the store and
//! waits for the workers (`coordinate`). A run with a store mirrors its record there
//! either way.
//!
//! The files of a task's way are layered, each naming only those before it: `starts` (what
//! the waves' starts are made of), `shared` (with the `Dispatch` trait), `run_in_view` (an
//! exec agent's way into its view), `waves` (tasks that come after others), `collecting`
//! (a round's commit, and `TaskError`), `worktrees` (a task's worktree made ready),
//! `rounds` (the round loop), `task` (the task's entry points), `dispatch` (running them
//! here); `coordinate` and `worker` spread them over machines.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, Notify};

pub mod adopt;
mod attempts;
mod clock;
mod collecting;
mod coordinate;
mod culprits;
mod dispatch;
mod grouped;
mod merging;
mod picking;
mod rounds;
mod run_in_view;
mod shared;
mod slot;
mod starts;
mod steering;
mod task;
mod waves;
pub mod worker;
mod worktrees;

use culprits::search_culprits;
pub use merging::remerge;
use merging::{merge_run, run_merged_checks};
use shared::Dispatch;
use shared::{mirror, open_store, write_states, Shared};

use plait_core::cancel::Cancel;
use plait_core::git::RepoError;
use plait_core::state::{
    self, now_ms, RunLock, RunPhase, RunState, StateError, Store, TaskRecord, TaskState,
};
use plait_core::sync::Locked as _;
use plait_plan::ResolvedPlan;
use plait_stages::context::Context;
use plait_stages::groups;
use plait_stages::merge::MergeError;

/// Why a run could not proceed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The repository cannot be used.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// The run's record could not be read or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// Merging the tasks' branches failed.
    #[error("merge failed: {0}")]
    Merge(#[from] MergeError),
    /// The culprit search could not go on.
    #[error(transparent)]
    Bisect(#[from] plait_stages::bisect::BisectError),
    /// The run cannot do what was asked of it, as it stands (the user can fix that).
    #[error("{0}")]
    Refused(String),
    /// The run's PostgreSQL store.
    #[error(transparent)]
    Store(#[from] plait_store::pg::PgError),
    /// The git remote of a run over many machines.
    #[error(transparent)]
    Remote(#[from] plait_store::remote::RemoteError),
    /// A git operation failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    /// A file of the run could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why it could not be read or written.
        source: std::io::Error,
    },
    /// A part of the run on a thread or task of its own panicked or was dropped.
    #[error("{what} panicked: {source}")]
    Panicked {
        /// The part.
        what: &'static str,
        /// The panic, or the drop.
        source: tokio::task::JoinError,
    },
    /// The HTTP client for the models could not be built.
    #[error("cannot set up HTTP: {0}")]
    Http(#[from] reqwest::Error),
    /// The run's record could not be encoded.
    #[error("cannot encode the run's record: {0}")]
    Encode(#[from] serde_json::Error),
    /// A task's branch or worktree could not be made.
    #[error(transparent)]
    Worktree(#[from] plait_trees::workspace::WorkspaceError),
    /// The checks' checkout could not be made.
    #[error("the checks could not run: {0}")]
    Checks(#[from] plait_stages::review::checks::CheckoutError),
    /// The run's environment could not be made: a `[setup]` command failed, or its base
    /// layer could not be written. No task started.
    #[error(transparent)]
    Setup(#[from] plait_trees::environment::EnvError),
    /// A worker could not set up a queued run on its machine.
    #[error("cannot take run {run}'s tasks: {source}")]
    TakeRun {
        /// The run.
        run: String,
        /// Why not.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl RunError {
    /// A panicked (or cancelled) blocking part of the run, naming what it was doing.
    pub fn panicked(what: &'static str) -> impl FnOnce(tokio::task::JoinError) -> RunError {
        move |source| RunError::Panicked { what, source }
    }
}

/// How to run a plan.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The repository, its store and environment, and the plait program the agents'
    /// hooks call back.
    pub context: Context,
    /// The plan resolved.
    pub plan: Arc<ResolvedPlan>,
    /// Where the plan came from, and its text, kept with the run.
    pub plan_path: PathBuf,
    /// The plan's text.
    pub plan_text: String,
    /// Tasks at once.
    pub jobs: usize,
    /// Where worktrees go (default: the run's directory under the git directory).
    pub worktree_root: Option<PathBuf>,
    /// The run's budget in USD: once spent, no new model request starts.
    pub max_cost: Option<f64>,
    /// How many supervisor groups (`--groups N`; 0 or 1: none); default: the plan's.
    pub groups: Option<usize>,
    /// A PostgreSQL store the run's record is written to as well (`--store`), so any
    /// machine that reaches it sees the run.
    pub store: Option<tokio_postgres::Config>,
    /// With a store: the git remote through which workers take the run's tasks
    /// (`--remote`; its base commit is there already). The run then waits for them, and
    /// takes `jobs` of them itself (none with `jobs` 0).
    pub remote: Option<String>,
}

/// A change of a task's state, for progress displays.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Event {
    /// The run.
    pub run: String,
    /// The task.
    pub task: String,
    /// Its new state.
    pub state: TaskState,
    /// One line of detail: the failure reason, or what was collected.
    pub detail: Option<String>,
    /// The task's model usage so far.
    pub usage: Option<plait_core::state::Usage>,
}

/// A step of a supervisor group, for progress displays: `merged`, `reviewed`, `sent_back`,
/// `up` (in the top merge) or `held` (left out of it).
#[derive(Debug, Clone, serde::Serialize)]
pub struct GroupEvent {
    pub(crate) run: String,
    /// The group's id.
    pub group: String,
    /// The step (`merged`, `reviewed`, `sent_back`, `up` or `held`).
    pub stage: &'static str,
    /// One line: what was merged, the verdict, the tasks sent back.
    pub detail: String,
}

/// What a run reports as it goes.
#[derive(Debug, Clone)]
pub enum Update {
    /// A task changed.
    Task(Event),
    /// A group changed.
    Group(GroupEvent),
    /// A step of the culprit search.
    Bisect(plait_stages::bisect::Step),
}

impl Update {
    /// The update as one JSON event: what `plait run --json` prints, the run's
    /// `events.jsonl` keeps and `plait serve` streams. Its `at` is now, in RFC 3339 UTC:
    /// an update is made into JSON as it is sent.
    pub fn to_json(&self) -> serde_json::Value {
        let at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        match self {
            Update::Task(event) => serde_json::json!({"event": "task", "at": at, "task": event}),
            Update::Group(group) => {
                serde_json::json!({"event": "group", "at": at, "group": group})
            }
            Update::Bisect(step) => serde_json::json!({"event": "bisect", "at": at, "step": step}),
        }
    }
}

/// The file in a run's directory that keeps its events, one JSON line each, for other
/// processes to follow (`plait serve`).
pub const EVENTS_FILE: &str = "events.jsonl";

/// A run that has started: its id is known and its state is on disk.
pub struct Prepared {
    settings: RunSettings,
    lock: RunLock,
    state: RunState,
    work: Work,
}

/// What a prepared run does before it merges.
enum Work {
    /// Runs every task that has not ended (all of a new run's).
    Tasks,
    /// Sends one finished task back for another round with a person's comment.
    SendBack { index: usize, feedback: String },
}

impl Prepared {
    /// The run's id.
    pub fn id(&self) -> &str {
        &self.state.id
    }

    /// The run's record as it is about to go.
    pub fn state(&self) -> &RunState {
        &self.state
    }
}

/// Takes the repository lock, makes the run's id and directory and writes its first state.
pub fn prepare(settings: RunSettings) -> Result<Prepared, RunError> {
    let store = settings.context.store().clone();
    let lock = store.lock()?;
    let run = store.create_run()?;
    lock.set_run(&run)?;
    let state = lay_down(&store, &run, &settings)?;
    store.save(&state)?;
    Ok(Prepared {
        settings,
        lock,
        state,
        work: Work::Tasks,
    })
}

/// The first state of run `run` in `store`: its directory with the plan's copy, each
/// task's directory and owned-file list, and every task pending.
fn lay_down(store: &Store, run: &str, settings: &RunSettings) -> Result<RunState, RunError> {
    let run_dir = store.run_dir(run);
    let worktree_root = match &settings.worktree_root {
        Some(root) => root.join(run),
        None => store.run(run).worktrees(),
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StateError::Io { path, source }
    };
    fs::create_dir_all(&run_dir).map_err(io(&run_dir))?;
    let plan_copy = store.run(run).plan();
    fs::write(&plan_copy, &settings.plan_text).map_err(io(&plan_copy))?;
    let plan = &settings.plan;
    let mut tasks = Vec::with_capacity(plan.tasks.len());
    for task in &plan.tasks {
        let dir = store.task_dir(run, &task.id);
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        let owned_list = store.run(run).task(&task.id).owned_list();
        let mut list = task.owned.join("\n");
        list.push('\n');
        fs::write(&owned_list, list).map_err(io(&owned_list))?;
        let mut record = TaskRecord::pending(
            run,
            &task.id,
            worktree_root.join(&task.id),
            task.owned.len(),
            store.run(run).task(&task.id).agent_log(),
        );
        record.after = task
            .after
            .iter()
            .map(|&i| plan.tasks[i].id.clone())
            .collect();
        record.expects_change = task.expect_changes;
        tasks.push(record);
    }
    Ok(RunState {
        version: state::STATE_VERSION,
        id: run.to_string(),
        goal: plan.goal.clone(),
        plan: settings.plan_path.clone(),
        base: plan.base.to_string(),
        base_name: plan.base_name.clone(),
        worktree_root,
        phase: RunPhase::Running,
        pid: std::process::id(),
        created_at: now_ms(),
        finished_at: None,
        tasks,
        merge: None,
        landed: Vec::new(),
        cleaned: false,
        merged_checks: Vec::new(),
        environment: None,
        base_checks_ignored: settings.plan.checks.base_ignored,
        max_cost: settings.max_cost,
        groups: plait_stages::groups::records(
            run,
            &plan.tasks,
            settings
                .groups
                .unwrap_or_else(|| plan.groups.groups_for(plan.tasks.len())),
            groups::supervised(plan),
        ),
        culprits: None,
        timings: Vec::new(),
    })
}

/// Takes the repository lock for run `state`, loaded and found unfinished, to carry it
/// on: finished tasks are kept, interrupted ones go on from their worktrees, pending ones
/// start.
pub fn prepare_resume(settings: RunSettings, mut state: RunState) -> Result<Prepared, RunError> {
    let store = settings.context.store().clone();
    let run = state.id.clone();
    let run = run.as_str();
    // A task's time is the time it ran: the pause since the run stopped is not its. (A
    // process killed outright noted no end; its pause counts.)
    if let Some(stopped) = state.finished_at {
        let paused = now_ms().saturating_sub(stopped);
        for task in state.tasks.iter_mut().filter(|t| !t.state.is_final()) {
            if let Some(started) = task.started_at.as_mut() {
                *started = started.saturating_add(paused);
            }
        }
    }
    let lock = store.lock()?;
    lock.set_run(run)?;
    // Agents of a plait process killed outright are still running; they must not write
    // into the worktrees the resumed run works in.
    let worktrees: Vec<PathBuf> = state.tasks.iter().map(|t| t.worktree.clone()).collect();
    let stopped = plait_sandbox::shell::stop_leftovers(run, &worktrees);
    if stopped > 0 {
        tracing::info!("stopped {stopped} process group(s) left running by run {run}");
    }
    let ids: Vec<&str> = settings.plan.tasks.iter().map(|t| t.id.as_str()).collect();
    let recorded: Vec<&str> = state.tasks.iter().map(|t| t.id.as_str()).collect();
    if ids != recorded {
        return Err(RunError::Refused(format!(
            "the plan kept with run {run} no longer matches its tasks"
        )));
    }
    going_again(settings, lock, state, Work::Tasks)
}

/// Run `state` going again in this process, under `lock`, to do `work`: recorded as
/// running, then saved.
fn going_again(
    settings: RunSettings,
    lock: RunLock,
    mut state: RunState,
    work: Work,
) -> Result<Prepared, RunError> {
    state.phase = RunPhase::Running;
    state.pid = std::process::id();
    state.finished_at = None;
    settings.context.store().save(&state)?;
    Ok(Prepared {
        settings,
        lock,
        state,
        work,
    })
}

/// Takes the repository lock for finished run `run` to send task `task` back to its
/// worktree with a person's `comment`, as a reviewer's request for changes does: one more
/// round of its agent told the comment (and the review rounds after it), then the run
/// merges and runs its merged checks again. The person's earlier decision on the task is
/// dropped: the new round's review judges it.
pub fn prepare_send_back(
    settings: RunSettings,
    run: &str,
    task: &str,
    comment: &str,
) -> Result<Prepared, RunError> {
    let refused = |why: String| Err(RunError::Refused(why));
    let store = settings.context.store().clone();
    let mut state = store.load(run)?;
    if state.phase != RunPhase::Finished {
        return refused(format!(
            "run {run} has not finished; send a task back once it has (`plait resume {run}` carries it on)"
        ));
    }
    if state.cleaned {
        return refused(format!(
            "run {run} was cleaned: its worktrees are gone, so no task can go back to one"
        ));
    }
    if comment.trim().is_empty() {
        return refused("the comment is empty: say what the agent should change".to_string());
    }
    let Some(index) = state.tasks.iter().position(|t| t.id == task) else {
        if let Some((of, n)) =
            plait_core::state::split_attempt_id(task).filter(|_| state.attempt(task).is_some())
        {
            return refused(format!(
                "`{task}` is attempt {n} of task {of}: a send-back goes to the task, from the \
                 attempt that became it (`plait send-back {run} {of}`; `plait accept {run} {task}` \
                 first makes it this one)"
            ));
        }
        return refused(format!(
            "run {run} has no task `{task}` (`plait status {run}` lists them)"
        ));
    };
    let record = &state.tasks[index];
    // A blocked task never ran: sent back, it starts if what it comes after now allows.
    let blocked = record.state == TaskState::Blocked && record.started_at.is_none();
    // A task picked from its attempts gets a worktree of its own laid out from the chosen
    // one's work when a round needs it.
    let picked = record.pick.is_some();
    if !blocked && !picked && !record.worktree.join(".git").exists() {
        return refused(format!(
            "task {task} of run {run} has no worktree at {} to go back to",
            record.worktree.display()
        ));
    }
    let lock = store.lock()?;
    lock.set_run(run)?;
    let feedback = plait_agents::prompts::feedback::person(comment);
    let round = state.tasks[index].rounds + 1;
    state.tasks[index].decision = None;
    state.tasks[index]
        .sent_back
        .push(plait_core::state::SentBack {
            comment: comment.trim().to_string(),
            at: now_ms(),
            round,
        });
    going_again(settings, lock, state, Work::SendBack { index, feedback })
}

/// Runs every task, merges the results and returns the final state.
///
/// When `cancel` fires (the command line fires it on Ctrl-C or SIGTERM), no more tasks are
/// launched and the running agents are stopped (their process groups killed); the run is
/// saved as interrupted, without a merge. The state on disk is whole at every moment,
/// since every write is atomic.
pub async fn execute(
    prepared: Prepared,
    events: Option<mpsc::UnboundedSender<Update>>,
    cancel: Cancel,
) -> Result<RunState, RunError> {
    let Prepared {
        settings,
        lock,
        state,
        work,
    } = prepared;
    let shared = Arc::new(shared_for(&settings, state, events, cancel).await?);
    let stop_writer = Arc::new(Notify::new());
    let writer = tokio::spawn(write_states(shared.clone(), stop_writer.clone()));
    let created = shared.snapshot().created_at;
    shared
        .clock
        .run_ms("start", now_ms().saturating_sub(created));
    if let Err(e) = shared.prepare_environment().await {
        stop_writer.notify_one();
        let _ = writer.await;
        // The record says why no task started.
        let _ = shared.store.save(&shared.snapshot());
        return Err(e);
    }
    let stop_steering = Arc::new(Notify::new());
    let steering = tokio::spawn(steering::take_requests(
        shared.clone(),
        stop_steering.clone(),
    ));
    let worked = do_work(&shared, work).await;
    let ended = match worked {
        Ok(()) => merge_and_check(&shared).await,
        Err(e) => Err(e),
    };
    stop_steering.notify_one();
    let _ = steering.await;
    let ended = ended?;
    {
        let started = Instant::now();
        let cleaning = shared.clone();
        let _ = tokio::task::spawn_blocking(move || cleaning.checks.remove_all()).await;
        shared.clock.run_step("clean up", started);
    }
    stop_writer.notify_one();
    let _ = writer.await;
    let state = finish(&shared, ended)?;
    mirror(&shared, &state).await;
    if state.merge.is_some() {
        shared.dispatch.publish(&shared).await;
    }
    drop(lock);
    Ok(state)
}

/// What the run's tasks share, with the store it is mirrored to (opened) and the dispatch
/// its settings pick: through the store to workers, or here.
async fn shared_for(
    settings: &RunSettings,
    state: RunState,
    events: Option<mpsc::UnboundedSender<Update>>,
    cancel: Cancel,
) -> Result<Shared, RunError> {
    let pg = match &settings.store {
        Some(config) => Some(Arc::new(open_store(config, settings, &state).await?)),
        None => None,
    };
    let dispatch: Box<dyn Dispatch> = match (&settings.store, &settings.remote, &pg) {
        (Some(config), Some(remote), Some(pg)) => Box::new(coordinate::Spread {
            config: config.clone(),
            pg: pg.clone(),
            remote: remote.clone(),
            jobs: settings.jobs,
            restarts: Default::default(),
        }),
        _ => Box::new(dispatch::Local),
    };
    Ok(Shared::new(settings, state, events, cancel, pg, Default::default())?.dispatching(dispatch))
}

/// Runs what the run was prepared for: every task that has not ended, or one task sent
/// back with a person's comment.
async fn do_work(shared: &Arc<Shared>, work: Work) -> Result<(), RunError> {
    match work {
        Work::SendBack { index, feedback } => {
            // A task that never started (blocked), or whose start no longer holds what it
            // comes after (moved by hand since), goes again from a new start, told the
            // comment there; any other has its round where it is.
            let blocked = shared.record(index).state == TaskState::Blocked;
            if blocked || !waves::moved_inputs(shared, index).is_empty() {
                waves::refresh(shared, Some((index, feedback))).await?;
            } else {
                task::rework(shared, index, feedback).await;
                waves::refresh(shared, None).await?;
            }
        }
        Work::Tasks => {
            let started = Instant::now();
            shared.dispatch.run_tasks(shared).await?;
            shared.clock.run_step("tasks", started);
        }
    }
    Ok(())
}

/// How the run's merge ended: its outcome (none when the run was interrupted first), the
/// merged checks on it and the culprits they found.
struct Ended {
    merge: Option<plait_core::state::MergeOutcome>,
    merged_checks: Vec<plait_core::state::CheckResult>,
    culprits: Option<plait_core::state::Culprits>,
}

/// Merges the tasks (unless the run was interrupted), runs the merged checks on the merge
/// and, when they fail, searches for the culprits and holds them out.
async fn merge_and_check(shared: &Arc<Shared>) -> Result<Ended, RunError> {
    if shared.cancel.is_cancelled() {
        return Ok(Ended {
            merge: None,
            merged_checks: Vec::new(),
            culprits: None,
        });
    }
    shared.state.locked().phase = RunPhase::Merging;
    shared.dirty.notify_one();
    let started = Instant::now();
    let merge = merge_run(shared.clone()).await?;
    shared.clock.run_step("merge", started);
    // A merge of no task is the base: nothing of the run's to check.
    let merged_checks = if !shared.plan.checks.merged.is_empty() && !merge.included.is_empty() {
        let started = Instant::now();
        let checks = run_merged_checks(shared, &merge).await;
        shared.clock.run_step("merged checks", started);
        checks
    } else {
        Vec::new()
    };
    let started = Instant::now();
    let (merge, merged_checks, culprits) = search_culprits(shared, merge, merged_checks).await?;
    if culprits.is_some() {
        shared.clock.run_step("culprit search", started);
    }
    Ok(Ended {
        merge: Some(merge),
        merged_checks,
        culprits,
    })
}

/// The run's record at its end, saved: finished with its merge, or interrupted.
fn finish(shared: &Shared, ended: Ended) -> Result<RunState, RunError> {
    let mut state = shared.snapshot();
    state.phase = if ended.merge.is_some() {
        RunPhase::Finished
    } else {
        RunPhase::Interrupted
    };
    state.merge = ended.merge;
    state.merged_checks = ended.merged_checks;
    state.culprits = ended.culprits;
    state.finished_at = Some(now_ms());
    state.timings = shared.clock.timings();
    if let (Some(Ok(env)), Some(record)) = (shared.environment.get(), &mut state.environment) {
        // The merged checks are judged at the base when they fail (see `CheckPool`).
        record.failed_at_base = env.failed_at_base();
        record.walled_at_base = env.walled_at_base();
    }
    shared.store.save(&state)?;
    Ok(state)
}
