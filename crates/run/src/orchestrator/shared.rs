//! What the tasks of a run share: the record behind a lock, the event log, the HTTP
//! client, the checks pool, the limiters and the budget; where the tasks run (the
//! [`Dispatch`] trait and [`Local`], which `super::dispatch` runs), and who is told of the
//! rounds' commits; the state writer that coalesces saves, and the mirror of the record in
//! a PostgreSQL store.
//!
//! Near the bottom of the orchestrator's task files: it names only `starts` among them;
//! `entered`, `waves`, `collecting`, `worktrees`, `rounds`, `task` and `dispatch` are
//! above it, in that order.

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use git2::Oid;
use tokio::sync::{mpsc, Notify};

pub(super) use super::slot::Slot;
use super::starts::{Stale, StartKey, StartMerge};
use super::{Event, GroupEvent, RunError, RunSettings, Update};
use plait_core::cancel::Cancel;
use plait_core::git::TreeFile;
use plait_core::state::{now_ms, RunState, Store, TaskRecord, TaskState};
use plait_core::sync::Locked as _;
use plait_plan::layout::Layout;
use plait_plan::{ResolvedPlan, ResolvedTask};
use plait_stages::context::Context;
use plait_stages::review::checks::CheckPool;
use plait_trees::environment::{EnvRequest, Environment};

/// State shared by the tasks of a run.
pub(super) struct Shared {
    pub(super) run: String,
    pub(super) store: Store,
    pub(super) state: Mutex<RunState>,
    pub(super) dirty: Notify,
    pub(super) events: Option<mpsc::UnboundedSender<Update>>,
    /// The run's `events.jsonl`, appended to as the updates are sent.
    pub(super) event_log: Mutex<Option<fs::File>>,
    /// The repository, its store and environment, opened once for the run.
    pub(super) context: Context,
    pub(super) plan: Arc<ResolvedPlan>,
    pub(super) cancel: Cancel,
    /// One HTTP client, so model agents share connections.
    pub(super) client: reqwest::Client,
    /// Full checkouts for checks.
    pub(super) checks: CheckPool,
    /// One limiter per model provider and key.
    pub(super) limiters: plait_llm::limiter::Limiters,
    pub(super) budget: Arc<plait_agents::agent::Budget>,
    /// Tasks at once (`-j`).
    pub(super) jobs: usize,
    /// The PostgreSQL store the run's record is written to as well, if any.
    pub(super) pg: Option<Arc<plait_store::pg::PgStore>>,
    /// Where the run's tasks run and are sent back to: here, unless [`Shared::dispatching`]
    /// says otherwise.
    pub(super) dispatch: Box<dyn Dispatch>,
    /// Told of each round's commit a task goes on past (nobody, unless
    /// [`Shared::on_commit`] says who).
    pub(super) on_commit: OnCommit,
    /// The checkouts the tasks' overlay views lie over (the base, and each start of tasks
    /// that come after others), each made at the first need, with the shared lock that
    /// keeps it from being pruned while the run uses it.
    pub(super) view_trees: Mutex<HashMap<Oid, Arc<ViewTree>>>,
    /// Each task's starting point, once known.
    pub(super) starts: Mutex<HashMap<usize, Arc<Start>>>,
    /// The files of each start commit, listed once: the tasks of a wave after the same
    /// tasks share one start.
    pub(super) start_files: Mutex<HashMap<Oid, Arc<StartFiles>>>,
    /// When each released task (its inputs ended) began making its start: its
    /// `started_at`, so that its time counts from then, as a task without `after` counts
    /// from its launch, its preparation included.
    pub(super) released: Mutex<HashMap<usize, u64>>,
    /// Each start merged once, by the tasks and commits it holds.
    pub(super) start_merges: Mutex<HashMap<StartKey, Arc<StartMerge>>>,
    /// Every task it comes after, by index, directly or through others (`after`).
    pub(super) waits: Vec<Vec<usize>>,
    /// Woken each time a task ends, for the tasks that wait for it.
    pub(super) ended: Notify,
    /// The run's gateway, through which its agent CLIs reach their models, started for the
    /// first task that needs it.
    pub(super) gateway: tokio::sync::OnceCell<Result<Arc<plait_gateway::Gateway>, String>>,
    /// The run's base layer, made before any task starts; `Err` says why there is none
    /// (no user and mount namespaces here: views are filled in and checks copy a seed).
    pub(super) environment: std::sync::OnceLock<Result<Arc<Environment>, String>>,
    /// Where the run's time goes.
    pub(super) clock: super::clock::Clock,
    /// Slots stopped while the run goes on (attempts a pick went without, tasks a person
    /// stopped).
    pub(super) stops: super::slot::Stops,
    /// What people told each slot while it runs (`plait tell`).
    pub(super) inboxes: Mutex<HashMap<Slot, plait_agents::agent::Inbox>>,
}

/// How a run's tasks are run and sent back.
pub(super) trait Dispatch: Send + Sync {
    /// Runs every task of the run that has not ended, until all have ended or the run is
    /// interrupted.
    fn run_tasks<'a>(&'a self, shared: &'a Arc<Shared>) -> BoxFuture<'a, Result<(), RunError>>;

    /// Sends ended tasks back for one more round each, `(index, feedback)`, and waits for
    /// them to end again.
    fn rework<'a>(
        &'a self,
        shared: &'a Arc<Shared>,
        targets: Vec<(usize, String)>,
    ) -> BoxFuture<'a, Result<(), RunError>>;

    /// Runs tasks whose starts went stale again from new starts (marked pending already),
    /// and waits for them to end.
    fn restart<'a>(
        &'a self,
        shared: &'a Arc<Shared>,
        again: Vec<Stale>,
    ) -> BoxFuture<'a, Result<(), RunError>>;

    /// The store through which the run's tasks run on other machines (a request made
    /// here reaches their agents through it); `None` for a local run.
    fn spread_store(&self) -> Option<&Arc<plait_store::pg::PgStore>> {
        None
    }

    /// Makes the run's merge seen wherever its tasks ran (nothing to do for a local run).
    fn publish<'a>(&'a self, _shared: &'a Shared) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// Runs the tasks in this process, in their worktrees here (how: `super::dispatch`).
pub(super) struct Local;

/// Records that task (or attempt) `slot` failed for `reason`.
pub(super) fn fail_task(
    shared: &Shared,
    slot: impl Into<Slot>,
    reason: String,
    exit_code: Option<i32>,
) {
    shared.update(slot, |t| {
        t.state = TaskState::Failed;
        t.error = Some(reason);
        t.exit_code = exit_code;
        t.finished_at = Some(now_ms());
    })
}

/// The files of a start commit, listed at the first need.
pub(super) type StartFiles = std::sync::OnceLock<Result<Arc<Vec<TreeFile>>, String>>;

/// A checkout views lie over, made once.
pub(super) type ViewTree = tokio::sync::OnceCell<Result<(PathBuf, Arc<fs::File>), String>>;

/// Where a task starts: a commit, its files, and what of them the task's worktree holds
/// and it owns there.
#[derive(Debug)]
pub(super) struct Start {
    pub(super) commit: Oid,
    /// Every entry of the commit's tree, sorted by path.
    pub(super) files: Arc<Vec<TreeFile>>,
    pub(super) layout: Arc<Layout>,
    /// The files of the commit the task owns, sorted.
    pub(super) owned: Arc<Vec<String>>,
}

impl Start {
    /// Every entry of `commit`'s tree, sorted by path (blocking): the base's, `base_files`,
    /// with what `commit` changes against it.
    fn list(
        context: &Context,
        (base, base_files): (Oid, &[TreeFile]),
        commit: Oid,
    ) -> Result<Vec<TreeFile>, RunError> {
        let repo = context.repo()?;
        let tree = repo.find_commit(commit)?.tree()?;
        let changes =
            plait_core::git::tree_changes(&repo, &repo.find_commit(base)?.tree()?, &tree)?;
        Ok(plait_core::git::patched(base_files, &changes))
    }

    /// Task `task`'s start at `commit` whose files are `files`, its layout found as the
    /// plan finds the base's.
    pub(super) fn at(commit: Oid, files: Arc<Vec<TreeFile>>, task: &ResolvedTask) -> Start {
        let full = task.checkout == plait_plan::Checkout::Full;
        let layout = Layout::new(&files, &task.owns, &task.context, full);
        let owned = plait_core::globs::within(&files, &task.owns.scopes())
            .map(|i| &files[i])
            .filter(|f| f.is_blob() && task.owns.matches(&f.path))
            .map(|f| f.path.clone())
            .collect();
        Start {
            commit,
            files,
            layout: Arc::new(layout),
            owned: Arc::new(owned),
        }
    }
}

/// Told, by the task's index, each time a task goes on past a round's commit (to its
/// review, or to another round): a worker pushes the commit as its claim's checkpoint. The
/// work a task ends with is not told of: it is recorded with the task's end.
pub(super) type OnCommit = Box<dyn Fn(usize) + Send + Sync>;

impl Shared {
    /// The shared state of a run whose record is `state`, kept in `store`.
    pub(super) fn new(
        settings: &RunSettings,
        state: RunState,
        events: Option<mpsc::UnboundedSender<Update>>,
        cancel: Cancel,
        pg: Option<Arc<plait_store::pg::PgStore>>,
        limiters: plait_llm::limiter::Limiters,
    ) -> Result<Shared, RunError> {
        let store = settings.context.store().clone();
        let checks_dir = store.run(&state.id).checks();
        let seed_dir = store.seed_dir();
        // Its tasks run plait itself (`$PLAIT_RUN_IN`, Claude Code's guard).
        plait_sandbox::sandbox::readable_program(settings.context.program());
        let event_log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(store.run(&state.id).events())
            .ok();
        Ok(Shared {
            run: state.id.clone(),
            store,
            state: Mutex::new(state),
            dirty: Notify::new(),
            events,
            event_log: Mutex::new(event_log),
            context: settings.context.clone(),
            plan: settings.plan.clone(),
            cancel,
            client: plait_llm::client()?,
            checks: CheckPool::seeded(
                checks_dir,
                settings.context.dir().to_path_buf(),
                settings.plan.checks.jobs,
                seed_dir,
                settings.plan.base,
                settings.plan.checks.jobs + settings.jobs.max(1),
            ),
            limiters,
            budget: Arc::new(plait_agents::agent::Budget::new(settings.max_cost)),
            jobs: settings.jobs.max(1),
            pg,
            dispatch: Box::new(Local),
            on_commit: Box::new(|_| {}),
            view_trees: Mutex::new(HashMap::new()),
            starts: Mutex::new(HashMap::new()),
            start_files: Mutex::new(HashMap::new()),
            start_merges: Mutex::new(HashMap::new()),
            released: Mutex::new(HashMap::new()),
            waits: plait_plan::waits_for(&settings.plan.tasks)
                .into_iter()
                .map(|set| set.into_iter().collect())
                .collect(),
            ended: Notify::new(),
            gateway: tokio::sync::OnceCell::new(),
            environment: std::sync::OnceLock::new(),
            clock: Default::default(),
            stops: Default::default(),
            inboxes: Default::default(),
        })
    }

    /// Makes the run's environment (see [`plait_trees::environment`]) where this system allows
    /// views over layers, before any task starts, and records what it is; a `[setup]`
    /// command that fails stops the run here.
    pub(super) async fn prepare_environment(&self) -> Result<(), RunError> {
        if self.environment.get().is_some() {
            return Ok(());
        }
        if !self.needs_environment() {
            // Nothing would lie over it: no setup, no check, and agents that are shell
            // commands naming no way into the view (one that has one anyway, from a script
            // of its own, has its worktree filled in).
            let _ = self
                .environment
                .set(Err("nothing in the plan runs over it".into()));
            return Ok(());
        }
        let made = match plait_sandbox::sandbox::view_support() {
            Err(why) => Err(why.clone()),
            Ok(()) => {
                let (run_dir, worktree_root) = {
                    let state = self.state.locked();
                    (self.store.run(&state.id), state.worktree_root.clone())
                };
                let checks = &self.plan.checks;
                let base = self.plan.base.to_string();
                let req = EnvRequest {
                    repo: self.context.dir(),
                    envs: self.store.envs_dir(),
                    base: self.plan.base,
                    files: self.plan.files.clone(),
                    setup: &self.plan.setup,
                    stable: plait_trees::environment::stable_path(&worktree_root),
                    sandbox: &checks.sandbox,
                    // The merged checks run at the base only when they fail on the merged
                    // work (`CheckPool::judge_at_base`): a run whose gate passes runs them once.
                    warm: vec![checks.task.clone()],
                    env: vec![
                        ("PLAIT_RUN", self.run.clone()),
                        ("PLAIT_TASK", "base".to_string()),
                        ("PLAIT_BASE", base.clone()),
                        ("PLAIT_COMMIT", base),
                    ],
                    warm_logs: run_dir.checks().with_file_name("seed-checks"),
                    setup_logs: run_dir.0.join("setup"),
                    timeout: checks.timeout,
                    cancel: &self.cancel,
                };
                let (env, outcome) = match Environment::prepare(req).await {
                    Ok(made) => made,
                    Err(plait_trees::environment::EnvError::Interrupted) => {
                        // The tasks see the interrupt and stop before they start.
                        let _ = self.environment.set(Err("interrupted".to_string()));
                        return Ok(());
                    }
                    Err(e) => {
                        {
                            let mut state = self.state.locked();
                            state.phase = plait_core::state::RunPhase::Interrupted;
                            state.environment = Some(plait_core::state::EnvironmentRecord {
                                layer: format!("not made: {e}"),
                                ..Default::default()
                            });
                        }
                        self.dirty.notify_one();
                        return Err(e.into());
                    }
                };
                for (step, ms) in &outcome.steps {
                    self.clock.run_ms(step, *ms);
                }
                let described = env.describe();
                {
                    let mut state = self.state.locked();
                    state.environment = Some(plait_core::state::EnvironmentRecord {
                        layer: described,
                        setup: outcome.ran.iter().map(|(c, _)| c.clone()).collect(),
                        made: outcome.made,
                        ms: outcome.ms,
                        failed_at_base: env.failed_at_base(),
                        walled_at_base: env.walled_at_base(),
                    });
                }
                self.dirty.notify_one();
                Ok(Arc::new(env))
            }
        };
        if let Err(why) = &made {
            let mut state = self.state.locked();
            state.environment = Some(plait_core::state::EnvironmentRecord {
                layer: format!(
                    "none: copies ({why}); paths naming your checkout reach your working copy"
                ),
                ..Default::default()
            });
        }
        if let Ok(env) = &made {
            self.checks.use_environment(env.clone());
        }
        let _ = self.environment.set(made);
        Ok(())
    }

    /// Whether anything of the plan runs over a base layer: a setup, a check, an agent
    /// other than a shell command that may run commands, or a shell command that names the
    /// way into its view (`$PLAIT_RUN_IN`, `plait run-in-view`).
    fn needs_environment(&self) -> bool {
        let plan = &self.plan;
        !plan.setup.is_empty()
            || !plan.checks.task.is_empty()
            || !plan.checks.merged.is_empty()
            || plan
                .tasks
                .iter()
                .flat_map(|t| t.agents())
                .any(|agent| match agent {
                    plait_plan::AgentConfig::Exec(exec) => {
                        exec.command.contains("PLAIT_RUN_IN")
                            || exec.command.contains("run-in-view")
                    }
                    plait_plan::AgentConfig::Model { run, .. } => run.offered(),
                    _ => true,
                })
    }

    /// The run's base layer, if it has one.
    pub(super) fn environment(&self) -> Option<&Arc<Environment>> {
        self.environment.get().and_then(|e| e.as_ref().ok())
    }

    /// The checkout of the commit `start` (the run's base or a task's start) that overlay
    /// views lie over, made once (and kept between runs under the store's `views`).
    pub(super) async fn view_tree(&self, start: &Start) -> Result<PathBuf, String> {
        let cell = {
            let mut trees = self.view_trees.locked();
            trees.entry(start.commit).or_default().clone()
        };
        let made = cell
            .get_or_init(|| async {
                let (repo, dir) = (self.context.dir().to_path_buf(), self.store.views_dir());
                let (commit, files) = (start.commit, start.files.clone());
                tokio::task::spawn_blocking(move || {
                    let repo = git2::Repository::discover(&repo).map_err(|e| e.to_string())?;
                    plait_trees::workspace::view::base_tree(&repo, &dir, commit, &files)
                        .map(|(tree, lock)| (tree, Arc::new(lock)))
                })
                .await
                .map_err(|e| e.to_string())?
            })
            .await;
        match made {
            Ok((tree, _)) => Ok(tree.clone()),
            Err(why) => Err(format!(
                "cannot make the checkout of {} the task's view lies over: {why}",
                if start.commit == self.plan.base {
                    "the base".to_string()
                } else {
                    format!(
                        "its start {}",
                        plait_core::git::short(&start.commit.to_string())
                    )
                }
            )),
        }
    }

    /// Where task `index` starts: the start its record names (the base with the work of
    /// the tasks it comes after merged in), else the run's base.
    pub(super) fn start(&self, index: usize) -> Result<Arc<Start>, String> {
        if let Some(start) = self.starts.locked().get(&index) {
            return Ok(start.clone());
        }
        let task = &self.plan.tasks[index];
        let recorded = self.record(index).start;
        let start = match recorded.as_deref().map(Oid::from_str) {
            None => Start {
                commit: self.plan.base,
                files: self.plan.files.clone(),
                layout: Arc::new(task.layout.clone()),
                owned: Arc::new(task.owned.clone()),
            },
            Some(Err(e)) => return Err(format!("its start {recorded:?} is no commit: {e}")),
            Some(Ok(commit)) => {
                let cell = self.start_files.locked().entry(commit).or_default().clone();
                let files = cell
                    .get_or_init(|| {
                        Start::list(&self.context, (self.plan.base, &self.plan.files), commit)
                            .map(Arc::new)
                            .map_err(|e| e.to_string())
                    })
                    .clone()
                    .map_err(|e| format!("its start: {e}"))?;
                Start::at(commit, files, task)
            }
        };
        let start = Arc::new(start);
        self.starts.locked().insert(index, start.clone());
        Ok(start)
    }

    /// Forgets task `index`'s start, for one made again.
    pub(super) fn forget_start(&self, index: usize) {
        self.starts.locked().remove(&index);
    }

    /// The run's gateway, started on first use.
    pub(super) async fn gateway(&self) -> Result<Arc<plait_gateway::Gateway>, String> {
        self.gateway
            .get_or_init(|| async {
                plait_gateway::Gateway::start(self.client.clone())
                    .await
                    .map(Arc::new)
                    .map_err(|e| format!("cannot start plait's gateway on 127.0.0.1: {e}"))
            })
            .await
            .clone()
    }

    /// Opens task (or attempt) `slot`'s way through the gateway to `provider`: its
    /// requests paced by the run's limiter of that provider and key, its usage added to its
    /// record and to the run's budget as each answer ends, its transcript beside its log.
    pub(super) async fn gateway_lease(
        self: &Arc<Self>,
        slot: Slot,
        provider: &Arc<plait_llm::provider::ProviderSettings>,
        transcript: PathBuf,
    ) -> Result<plait_gateway::Lease, String> {
        let meter = Arc::new(TaskMeter {
            shared: Arc::downgrade(self),
            slot,
        });
        let task = self.record(slot).id;
        self.open_route(task, provider, transcript, meter).await
    }

    /// Opens a way through the run's gateway (started on first use) for `who`'s requests to
    /// `provider`, paced by the run's limiter of that provider and key.
    async fn open_route(
        &self,
        who: String,
        provider: &Arc<plait_llm::provider::ProviderSettings>,
        transcript: PathBuf,
        meter: Arc<dyn plait_gateway::Meter>,
    ) -> Result<plait_gateway::Lease, String> {
        let gateway = self.gateway().await?;
        gateway
            .open(plait_gateway::Route {
                task: who,
                provider: provider.clone(),
                limiter: self.limiters.get(provider),
                transcript,
                meter,
            })
            .map_err(|e| format!("cannot open a port of plait's gateway on 127.0.0.1: {e}"))
    }

    /// A way through the gateway to `provider` for a role (a reviewer, a supervisor) whose
    /// transcript is `transcript`: its usage is tallied for the role's record, and the run's
    /// budget pays for it.
    pub(super) async fn role_gateway(
        &self,
        who: &str,
        provider: &Arc<plait_llm::provider::ProviderSettings>,
        transcript: PathBuf,
    ) -> Result<plait_agents::agent::RoleGateway, String> {
        let tally = Arc::new(plait_agents::agent::Tally::new(self.budget.clone()));
        let lease = self
            .open_route(who.to_string(), provider, transcript, tally.clone())
            .await?;
        Ok(plait_agents::agent::RoleGateway { lease, tally })
    }

    /// The same shared state, its tasks run by `dispatch`.
    pub(super) fn dispatching(self, dispatch: Box<dyn Dispatch>) -> Shared {
        Shared { dispatch, ..self }
    }

    /// The same shared state, `hook` told of each round's commit a task goes on past.
    pub(super) fn on_commit(self, hook: OnCommit) -> Shared {
        Shared {
            on_commit: hook,
            ..self
        }
    }

    /// What people told `slot` while it runs, waiting for its agent.
    pub(super) fn inbox(&self, slot: Slot) -> plait_agents::agent::Inbox {
        self.inboxes.locked().entry(slot).or_default().clone()
    }

    /// The diff from `base` to `tip`, for a reviewer or a judge (or why it could not be
    /// made).
    pub(super) async fn diff(&self, base: Oid, tip: Oid) -> String {
        let context = self.context.clone();
        tokio::task::spawn_blocking(move || {
            let repo = context.repo().map_err(|e| e.to_string())?;
            plait_stages::report::diff::diff_text(&repo, base, tip, Default::default())
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|d| d)
        .unwrap_or_else(|e| format!("(the diff could not be made: {e})"))
    }

    /// Applies `change` to task (or attempt) `slot`, reports it and schedules a save.
    pub(super) fn update(&self, slot: impl Into<Slot>, change: impl FnOnce(&mut TaskRecord)) {
        {
            let mut state = self.state.locked();
            let run = state.id.clone();
            let task = slot.into().record_mut(&mut state);
            let was_final = task.state.is_final();
            change(task);
            if task.state.is_final() && !was_final {
                self.ended.notify_waiters();
            }
            // Sent under the lock (an unbounded send never waits), so events arrive in
            // the order the changes were made.
            self.emit(Update::Task(Event {
                run,
                task: task.id.clone(),
                state: task.state,
                detail: task.error.clone(),
                usage: task.usage.clone(),
            }));
        }
        self.dirty.notify_one();
    }

    /// Reports a step of a supervisor group.
    pub(super) fn group_event(&self, group: &str, stage: &'static str, detail: String) {
        self.emit(Update::Group(GroupEvent {
            run: self.run.clone(),
            group: group.to_string(),
            stage,
            detail,
        }));
    }

    /// Sends `update` to the caller's channel and appends it to the run's events file.
    pub(super) fn emit(&self, update: Update) {
        {
            let mut log = self.event_log.locked();
            if let Some(file) = log.as_mut() {
                use std::io::Write as _;
                let mut line = update.to_json().to_string();
                line.push('\n');
                // One write per line, so a reader never sees half of one.
                if file.write_all(line.as_bytes()).is_err() {
                    *log = None;
                }
            }
        }
        if let Some(tx) = &self.events {
            let _ = tx.send(update);
        }
    }

    pub(super) fn snapshot(&self) -> RunState {
        self.state.locked().clone()
    }

    pub(super) fn record(&self, slot: impl Into<Slot>) -> TaskRecord {
        let state = self.state.locked();
        slot.into().record(&state).clone()
    }

    /// The task as `slot` runs it: an attempt's id and agent, or the task after its pick
    /// with the chosen attempt's agent.
    pub(super) fn task(&self, slot: Slot) -> std::borrow::Cow<'_, ResolvedTask> {
        let chosen = match slot.attempt {
            Some(_) => None,
            None => self.state.locked().tasks[slot.index]
                .pick
                .as_ref()
                .map(|p| p.attempt),
        };
        slot.task(&self.plan.tasks[slot.index], chosen)
    }
}

/// Connects to the run's PostgreSQL store and records the run there, unless it is there
/// already (a resumed run); with a remote, its tasks are queued for workers.
pub(super) async fn open_store(
    config: &tokio_postgres::Config,
    settings: &RunSettings,
    state: &RunState,
) -> Result<plait_store::pg::PgStore, RunError> {
    let pg = plait_store::pg::PgStore::connect(config, std::time::Duration::from_secs(10)).await?;
    if pg.has_run(&state.id).await? {
        return Ok(pg);
    }
    pg.create_run(&settings.context.dir().display().to_string(), state)
        .await?;
    if let Some(remote) = &settings.remote {
        let queue = plait_store::pg::Queue {
            plan: settings.plan_text.clone(),
            plan_path: settings.plan_path.display().to_string(),
            base: state.base.clone(),
            remote: remote.clone(),
        };
        pg.open_queue(&state.id, &queue).await?;
    }
    Ok(pg)
}

/// Writes `state` to the run's PostgreSQL store, if it has one.
pub(super) async fn mirror(shared: &Shared, state: &RunState) {
    let Some(pg) = &shared.pg else {
        return;
    };
    if let Err(e) = pg.save_run(state).await {
        tracing::warn!("could not save run state to the store: {e}");
    }
}

/// Saves the newest state each time a task changes, until told to stop.
pub(super) async fn write_states(shared: Arc<Shared>, stop: Arc<Notify>) {
    // The store's copy is written at most once a second (and at the end): a record of
    // ten thousand tasks is megabytes.
    let mut mirrored: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            biased;
            _ = stop.notified() => return,
            _ = shared.dirty.notified() => {}
        }
        let snapshot = shared.snapshot();
        if mirrored.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(1)) {
            mirror(&shared, &snapshot).await;
            mirrored = Some(std::time::Instant::now());
        }
        let store = shared.store.clone();
        let saved = tokio::task::spawn_blocking(move || store.save(&snapshot)).await;
        if let Ok(Err(e)) = saved {
            tracing::warn!("could not save run state: {e}");
        }
    }
}

/// What a task's requests through the gateway count against: the task's usage, live, and
/// the run's budget.
struct TaskMeter {
    shared: std::sync::Weak<Shared>,
    slot: Slot,
}

impl plait_gateway::Meter for TaskMeter {
    fn admit(&self, worst: f64) -> plait_gateway::Admission<'_> {
        let shared = self.shared.upgrade();
        Box::pin(async move {
            match shared {
                Some(shared) => shared.budget.reserve(worst).await,
                None => Ok(()),
            }
        })
    }

    fn settle(&self, worst: f64, usage: Option<&plait_core::state::Usage>) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let cost = usage.and_then(|u| u.cost_usd).unwrap_or(0.0);
        shared.budget.settle(worst, cost);
        let Some(usage) = usage else { return };
        shared.update(self.slot, |t| match &mut t.usage {
            Some(total) => total.add(usage),
            None => t.usage = Some(usage.clone()),
        });
    }
}
