//! Check commands run against a full checkout of a commit: the owned-files worktree alone
//! cannot build. Checks are CPU-bound; the pool's permits are their concurrency limit.
//!
//! Every checkout has a lineage, and code a task wrote runs only where nothing but the
//! commit being judged, that same task's earlier checks, or plait's own build of the base
//! left files (ignored build output included: `target/`, `__pycache__/`, `node_modules/`
//! are read by the next build as they are, so whoever wrote them decides what it runs).
//! - The *seed* is a checkout of the run's base where plait runs the task checks and the
//!   merged checks once, before any task's code ran there: a trusted, warm build. It is
//!   kept under the repository's plait directory between runs and moved to the next run's
//!   base when the old base is in the new one's history (trusted commits only), else made
//!   again.
//! - A task's checks run in a checkout of its own, a copy of the seed (by copy-on-write
//!   where the file system has it) moved to the task's commit, kept for its later rounds
//!   so they stay incremental, and used by no one else.
//! - The gate (merged checks, the culprit search's subsets, `plait check`, the hooks) gets
//!   a new copy of the seed, or a new checkout where there is no seed, each time, and it is
//!   removed after: no task's code and no other subset ever ran there. Checks of the base
//!   itself run in the seed, which they warm.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use git2::Oid;
use tokio::sync::Semaphore;

use super::checkout::{self, Checkout};
use plait_core::cancel::Cancel;
use plait_core::state::CheckResult;
use plait_core::sync::Locked as _;
use plait_sandbox::sandbox::{Sandbox, SandboxSettings};
use plait_sandbox::shell::{self, Launch, ShellOutcome};

/// Whose checks a job runs, which decides the checkout it may run in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lineage {
    /// A task's own checks: its checkout is kept for its later rounds, for it alone.
    Task(String),
    /// A judgement of merged work: a checkout no task's code has touched, thrown away after.
    Gate,
}

/// Why a checkout for checks could not be made, copied, moved or removed: what plait was
/// doing and what git, `cp` or the file system said.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CheckoutError(pub String);

/// Full checkouts for checks, each with its lineage (see the module's doc).
pub struct CheckPool {
    root: PathBuf,
    workdir: PathBuf,
    permits: Semaphore,
    seed: Option<tokio::sync::Mutex<Seed>>,
    /// The tasks' checkouts not in use, the least recently used first.
    idle: Mutex<Vec<(String, Checkout)>>,
    /// How many idle task checkouts are kept; older ones are removed.
    keep: usize,
    /// Every checkout made, for [`CheckPool::remove_all`].
    made: Mutex<Vec<PathBuf>>,
    /// The running places free now, one per check at once.
    slots: Mutex<Vec<usize>>,
    /// Where the running places are.
    slot_root: Mutex<PathBuf>,
    next: AtomicUsize,
    /// Held while `git worktree add` runs: concurrent adds race on `.git/worktrees`.
    adding: Arc<Mutex<()>>,
    /// The run's base layer, when it has one: then every check runs in a layer over it
    /// (see [`super::layers`]) instead of a checkout.
    pub(super) env: std::sync::OnceLock<Arc<plait_trees::environment::Environment>>,
    /// One judgement at the base at a time (see [`CheckPool::judge_at_base`]).
    judging: tokio::sync::Mutex<()>,
    /// Each task's layer of its own and the commit it holds.
    pub(super) layers:
        Mutex<std::collections::HashMap<String, (plait_trees::environment::LayerDir, Oid)>>,
}

/// The trusted checkout of the base, made (or taken over from an earlier run) on first use.
struct Seed {
    base: Oid,
    /// Where it lives, kept between runs.
    dir: PathBuf,
    checkout: Option<Checkout>,
    /// The command lists run in it so far, at the base, with the place each ran in.
    warmed: Vec<(String, Vec<String>)>,
    /// Held while this pool uses the kept seed (an exclusive `flock` of `<seed>.lock`);
    /// another pool at the same time (a worker serving two runs) makes one of its own.
    _held: Option<std::fs::File>,
}

/// What a kept seed was last warmed with, in `<seed>.json`.
#[derive(serde::Serialize, serde::Deserialize)]
struct SeedRecord {
    base: String,
    warmed: Vec<(String, Vec<String>)>,
}

impl Seed {
    fn warmed_at(&self, place: &Path, commands: &[String]) -> bool {
        let place = place.display().to_string();
        self.warmed
            .iter()
            .any(|(p, c)| *p == place && c == commands)
    }

    /// Records that `commands` ran in the seed at `place`, and saves the record.
    fn mark(&mut self, place: &Path, commands: &[String]) {
        if !self.warmed_at(place, commands) {
            self.warmed
                .push((place.display().to_string(), commands.to_vec()));
            self.save();
        }
    }

    fn record_path(&self) -> PathBuf {
        self.dir.with_extension("json")
    }

    fn save(&self) {
        let record = SeedRecord {
            base: self.base.to_string(),
            warmed: self.warmed.clone(),
        };
        if let Ok(text) = serde_json::to_vec_pretty(&record) {
            let _ = plait_core::state::write_atomic(&self.record_path(), &text);
        }
    }
}

/// What to run and where its output goes.
pub struct CheckJob<'a> {
    /// The commit the commands are run on.
    pub commit: Oid,
    /// The check commands, in order.
    pub commands: &'a [String],
    /// Those of `commands` that are the job's own work (a task's `checks`): their failure
    /// is its own whatever the base does.
    pub own: &'a [String],
    /// Extra environment for the commands.
    pub env: Vec<(&'a str, String)>,
    /// Directory for one log per command.
    pub logs: &'a Path,
    /// How long one command may run.
    pub timeout: Duration,
    /// The walls the commands run in, besides their own checkout.
    pub sandbox: &'a SandboxSettings,
    /// Whose checks these are, which decides the checkout they run in.
    pub lineage: Lineage,
}

impl CheckPool {
    /// A pool of at most `jobs` checks at once under `root`, for the repository at
    /// `workdir`, with no seed: every checkout starts as a new one at its commit.
    pub fn new(root: PathBuf, workdir: PathBuf, jobs: usize) -> CheckPool {
        CheckPool {
            slots: Mutex::new((0..jobs.max(1)).rev().collect()),
            slot_root: Mutex::new(root.clone()),
            root,
            workdir,
            permits: Semaphore::new(jobs.max(1)),
            seed: None,
            idle: Mutex::new(Vec::new()),
            keep: jobs.max(1),
            made: Mutex::new(Vec::new()),
            next: AtomicUsize::new(0),
            adding: Arc::new(Mutex::new(())),
            env: std::sync::OnceLock::new(),
            judging: Default::default(),
            layers: Mutex::default(),
        }
    }

    /// [`CheckPool::new`] with a seed at `base` kept in `seed` (see the module's doc),
    /// keeping up to `keep` idle task checkouts.
    pub fn seeded(
        root: PathBuf,
        workdir: PathBuf,
        jobs: usize,
        seed: PathBuf,
        base: Oid,
        keep: usize,
    ) -> CheckPool {
        CheckPool {
            seed: Some(tokio::sync::Mutex::new(Seed {
                base,
                dir: seed,
                checkout: None,
                warmed: Vec::new(),
                _held: None,
            })),
            keep: keep.max(1),
            ..CheckPool::new(root, workdir, jobs)
        }
    }

    /// Runs every command of `job` in a checkout at its commit that its lineage may use.
    pub async fn run(
        &self,
        job: &CheckJob<'_>,
        cancel: &Cancel,
    ) -> Result<Vec<CheckResult>, CheckoutError> {
        // A job stopped while it waits for a place gives its turn up.
        let _permit = tokio::select! {
            permit = self.permits.acquire() => permit.map_err(|e| CheckoutError(e.to_string()))?,
            _ = cancel.cancelled() => {
                return Err(CheckoutError("stopped before a place for its checks was free".into()))
            }
        };
        let slot = {
            let mut free = self.slots.locked();
            free.pop().unwrap_or(0)
        };
        let mut result = self.run_in(job, slot, cancel).await.map_err(CheckoutError);
        self.slots.locked().push(slot);
        drop(_permit);
        if let (Ok(results), Some(env)) = (&mut result, self.env.get()) {
            if results.iter().any(|c| !c.passed) {
                self.judge_at_base(env, job, cancel).await;
            }
            // A check that fails exactly as it did on the base before any task is no one's
            // fault here; one that fails otherwise is the work's, the base's failure beside it.
            for check in results.iter_mut().filter(|c| !c.passed) {
                let Some(base) = env.failure_at_base(&check.command) else {
                    continue;
                };
                check.at_base = true;
                if job.own.contains(&check.command) {
                    continue;
                }
                let here = plait_trees::failures::Failure::of_log(&check.log);
                check.as_on_base = here.no_worse_than(&base);
                check.beyond_base = here.beyond(&base).into_iter().map(String::from).collect();
            }
        }
        result
    }

    /// Runs `job`'s commands at the base, in a layer of their own over it, unless the base
    /// layer already knows how they fare there: whether a check that failed on `job`'s
    /// commit fails on the base too. The task checks are run at the base before any task
    /// (they build the base layer every task check starts from); the merged checks only
    /// here, at their first failure, so that a run whose gate passes never runs them twice.
    async fn judge_at_base(
        &self,
        env: &Arc<plait_trees::environment::Environment>,
        job: &CheckJob<'_>,
        cancel: &Cancel,
    ) {
        if job.commit == env.base || cancel.is_cancelled() {
            return;
        }
        // Its base's failures never excuse a command that names plait's variables.
        if job.commands.iter().all(|c| c.contains("PLAIT_")) {
            return;
        }
        let _one = self.judging.lock().await;
        if env.judged_at_base(job.commands) {
            return;
        }
        let logs = job.logs.join("at-base");
        let _ = std::fs::create_dir_all(&logs);
        let env_vars = job
            .env
            .iter()
            .map(|(k, v)| match *k {
                "PLAIT_COMMIT" => (*k, env.base.to_string()),
                "PLAIT_TASK" => (*k, "base".to_string()),
                _ => (*k, v.clone()),
            })
            .collect();
        let at_base = CheckJob {
            commit: env.base,
            commands: job.commands,
            own: &[],
            env: env_vars,
            logs: &logs,
            timeout: job.timeout,
            sandbox: job.sandbox,
            lineage: Lineage::Gate,
        };
        let Ok(_permit) = self.permits.acquire().await else {
            return;
        };
        if let Ok(results) = self.run_layered(env, &at_base, cancel).await {
            if !cancel.is_cancelled() {
                let judged: Vec<plait_trees::environment::AtBase<'_>> = results
                    .iter()
                    .map(|c| plait_trees::environment::AtBase {
                        command: &c.command,
                        passed: c.passed,
                        refused: &c.refused,
                        log: &c.log,
                    })
                    .collect();
                env.note_at_base(plait_trees::environment::Warmed::judged(
                    job.commands,
                    &judged,
                ));
            }
        }
    }

    /// [`CheckPool::new`] for checks of run `state` made after it ran: in layers over its
    /// kept base layer when there is one (see [`plait_trees::environment::Environment::open_kept`]).
    pub fn for_run(
        root: PathBuf,
        context: &crate::context::Context,
        jobs: usize,
        state: &plait_core::state::RunState,
    ) -> CheckPool {
        let pool = CheckPool::new(root, context.workdir().to_path_buf(), jobs);
        if let Ok(base) = Oid::from_str(&state.base) {
            let envs = context.store().envs_dir();
            let stable = plait_trees::environment::stable_path(&state.worktree_root);
            if let Some(env) = plait_trees::environment::Environment::open_kept(&envs, base, stable)
            {
                pool.use_environment(Arc::new(env));
            }
        }
        pool
    }

    /// Runs every check in layers over `env` from now on.
    pub fn use_environment(&self, env: Arc<plait_trees::environment::Environment>) {
        let _ = self.env.set(env);
    }

    /// [`CheckPool::run`] with the checkout at running place `slot`.
    async fn run_in(
        &self,
        job: &CheckJob<'_>,
        slot: usize,
        cancel: &Cancel,
    ) -> Result<Vec<CheckResult>, String> {
        if let Some(env) = self.env.get() {
            return self.run_layered(env, job, cancel).await;
        }
        if let Some(seed) = &self.seed {
            let mut seed = seed.lock().await;
            let made = self.seed_checkout(&mut seed).await?;
            if matches!(job.lineage, Lineage::Gate) && seed.base == job.commit {
                // The base is trusted: its checks run in the seed itself, and warm it.
                let running = self.running(slot);
                let moved = self.relocate(made, running.clone()).await?;
                let results = run_commands(&moved, job, cancel).await;
                seed.checkout = Some(self.relocate(moved, seed.dir.clone()).await?);
                seed.mark(&running, job.commands);
                return Ok(results);
            }
        }
        let running = self.running(slot);
        let made = self.checkout_for(job, &running, cancel).await?;
        let results = run_commands(&made, job, cancel).await;
        match &job.lineage {
            Lineage::Task(task) => {
                let parked = self.fresh_path("task");
                let parked = self.relocate(made, parked).await?;
                self.give_back(task, parked).await;
            }
            Lineage::Gate => self.remove(made.path).await,
        }
        Ok(results)
    }

    /// The place checks run in for `slot`: the same path each time (for tools whose build
    /// output names its sources' paths, such as cargo, to find theirs), under the kept
    /// seed's directory while this pool holds it, so that it stays the same across runs.
    fn running(&self, slot: usize) -> PathBuf {
        let root = self.slot_root.locked().clone();
        let path = root.join(format!("slot-{}", slot + 1));
        self.made.locked().push(path.clone());
        path
    }

    fn fresh_path(&self, name: &str) -> PathBuf {
        let path = self.root.join(format!(
            "{name}-{}",
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        ));
        self.made.locked().push(path.clone());
        path
    }

    /// Where a layer named `name` goes: a task's is its own (`task-<id>`), a gate's new.
    pub(super) fn layer_path(&self, name: &str) -> PathBuf {
        let layers = self.root.join("layers");
        if name.starts_with("task-") {
            return layers.join(name);
        }
        layers.join(format!(
            "{name}-{}",
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        ))
    }

    /// The repository the pool checks.
    pub(super) fn repo_dir(&self) -> PathBuf {
        self.workdir.clone()
    }

    async fn relocate(&self, made: Checkout, to: PathBuf) -> Result<Checkout, String> {
        let workdir = self.workdir.clone();
        blocking(move || made.relocate(&workdir, &to)).await
    }

    /// The checkout `job` runs in, at its commit, in `running`: the task's own, or a new
    /// copy of the seed (warmed there first), or a new checkout.
    async fn checkout_for(
        &self,
        job: &CheckJob<'_>,
        running: &Path,
        cancel: &Cancel,
    ) -> Result<Checkout, String> {
        let commit = job.commit;
        if let Lineage::Task(task) = &job.lineage {
            let kept = {
                let mut idle = self.idle.locked();
                let at = idle.iter().position(|(t, _)| t == task);
                at.map(|i| idle.remove(i).1)
            };
            if let Some(kept) = kept {
                let moved = self.relocate(kept, running.to_path_buf()).await?;
                let at = moved.clone();
                blocking(move || at.move_to(commit)).await?;
                return Ok(moved);
            }
        }
        let (workdir, adding, path) = (
            self.workdir.clone(),
            self.adding.clone(),
            running.to_path_buf(),
        );
        let Some(seed) = &self.seed else {
            checkout::remove(&workdir, &path);
            return blocking(move || checkout::add(&workdir, &path, commit, true, &adding)).await;
        };
        let copied = {
            let mut seed = seed.lock().await;
            let mut from = self.seed_checkout(&mut seed).await?;
            if !seed.warmed_at(running, job.commands) && !cancel.is_cancelled() {
                let moved = self.relocate(from, running.to_path_buf()).await?;
                self.warm(&moved, &seed, job, cancel).await;
                from = self.relocate(moved, seed.dir.clone()).await?;
                seed.checkout = Some(from.clone());
                // An interrupted warm-up leaves a trusted seed, not a warm one.
                if !cancel.is_cancelled() {
                    seed.mark(running, job.commands);
                }
            }
            let base = seed.base;
            blocking(move || {
                checkout::remove(&workdir, &path);
                checkout::copy(&workdir, &from, base, &path, &adding)
            })
            .await?
        };
        let moved = copied.clone();
        blocking(move || moved.move_to(commit)).await?;
        Ok(copied)
    }

    /// The seed's checkout: the one kept from an earlier run (moved to the base when that
    /// run's base is in its history), else a new one.
    async fn seed_checkout(&self, seed: &mut Seed) -> Result<Checkout, String> {
        if let Some(made) = &seed.checkout {
            return Ok(made.clone());
        }
        match hold(&seed.dir) {
            Some(file) => {
                seed._held = Some(file);
                if let Some(parent) = seed.dir.parent() {
                    *self.slot_root.locked() = parent.join("checks");
                }
            }
            None => {
                seed.dir = self.root.join("seed");
                self.made.locked().push(seed.dir.clone());
            }
        }
        let kept: Option<SeedRecord> = std::fs::read(seed.record_path())
            .ok()
            .and_then(|text| serde_json::from_slice(&text).ok());
        let (workdir, adding, base, dir) = (
            self.workdir.clone(),
            self.adding.clone(),
            seed.base,
            seed.dir.clone(),
        );
        let (made, warmed) = blocking(move || {
            let kept = kept.and_then(|record| {
                let old = Oid::from_str(&record.base).ok()?;
                let same = old == base;
                if !same && !checkout::is_ancestor(&workdir, old, base) {
                    return None;
                }
                let made = checkout::open(&workdir, &dir)?;
                if !same {
                    made.move_to(base).ok()?;
                }
                Some((made, if same { record.warmed } else { Vec::new() }))
            });
            if let Some(kept) = kept {
                return Ok(kept);
            }
            checkout::remove(&workdir, &dir);
            checkout::add(&workdir, &dir, base, true, &adding).map(|made| (made, Vec::new()))
        })
        .await?;
        seed.warmed = warmed;
        seed.checkout = Some(made.clone());
        seed.save();
        Ok(made)
    }

    /// Runs `job`'s commands in the seed at the base, before any task's code runs there,
    /// logging under `seed-checks/<n>/` beside the pool.
    async fn warm(&self, checkout: &Checkout, seed: &Seed, job: &CheckJob<'_>, cancel: &Cancel) {
        let base = seed.base;
        let logs = self
            .root
            .with_file_name("seed-checks")
            .join((seed.warmed.len() + 1).to_string());
        let mut env = job.env.clone();
        for (name, value) in env.iter_mut() {
            match *name {
                "PLAIT_COMMIT" => *value = base.to_string(),
                "PLAIT_TASK" => *value = "base".to_string(),
                _ => {}
            }
        }
        let warm = CheckJob {
            commit: base,
            commands: job.commands,
            own: &[],
            env,
            logs: &logs,
            timeout: job.timeout,
            sandbox: job.sandbox,
            lineage: Lineage::Gate,
        };
        run_commands(checkout, &warm, cancel).await;
    }

    /// Keeps `task`'s checkout for its next round, removing the least recently used one
    /// past the pool's limit.
    async fn give_back(&self, task: &str, made: Checkout) {
        let evicted = {
            let mut idle = self.idle.locked();
            idle.push((task.to_string(), made));
            (idle.len() > self.keep).then(|| idle.remove(0).1)
        };
        if let Some(evicted) = evicted {
            self.remove(evicted.path).await;
        }
    }

    async fn remove(&self, path: PathBuf) {
        let workdir = self.workdir.clone();
        let _ = tokio::task::spawn_blocking(move || checkout::remove(&workdir, &path)).await;
    }

    /// Removes every checkout the pool made.
    pub fn remove_all(&self) {
        let made = std::mem::take(&mut *self.made.locked());
        for path in made {
            checkout::remove(&self.workdir, &path);
        }
        plait_trees::environment::remove_tree(&self.root.join("layers"));
        // A seed of the pool's own (another pool held the kept one) leaves its record.
        let _ = std::fs::remove_file(self.root.join("seed.json"));
        let _ = std::fs::remove_dir(&self.root);
    }
}

/// An exclusive lock of the kept seed at `dir`, if no other pool holds it.
fn hold(dir: &Path) -> Option<std::fs::File> {
    use std::os::fd::AsRawFd;
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).ok()?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.with_extension("lock"))
        .ok()?;
    // SAFETY: flock on a descriptor this function owns; it is released when `file` closes.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    locked.then_some(file)
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(format!("preparing a check checkout panicked: {e}")))
}

/// Runs `job`'s commands one after another in `checkout`, each under the job's walls with
/// the checkout its only place to write.
async fn run_commands(
    checkout: &Checkout,
    job: &CheckJob<'_>,
    cancel: &Cancel,
) -> Vec<CheckResult> {
    let slot = checkout.path.as_path();
    run_at(slot, &[slot.to_path_buf()], None, job, cancel).await
}

/// Runs `job`'s commands one after another in `dir`, each under the job's walls with `own`
/// its only places to write, inside `view` when there is one.
pub(super) async fn run_at(
    slot: &Path,
    own: &[PathBuf],
    view: Option<&plait_sandbox::sandbox::OverlayView>,
    job: &CheckJob<'_>,
    cancel: &Cancel,
) -> Vec<CheckResult> {
    let _ = std::fs::create_dir_all(job.logs);
    let mut results = Vec::new();
    for (i, command) in job.commands.iter().enumerate() {
        let log = job.logs.join(format!("check-{}.log", i + 1));
        let _ = std::fs::write(&log, format!("$ {command}\n"));
        let started = Instant::now();
        let sandbox = Sandbox::new(job.sandbox, own.to_vec()).with_view(view.cloned());
        let launch = Launch {
            dir: slot,
            env: &job.env,
            log: &log,
            timeout: job.timeout,
            cancel,
            sandbox: &sandbox,
        };
        let outcome = shell::run(command, &launch).await;
        let passed = outcome == ShellOutcome::Exited(0);
        if !passed && !matches!(outcome, ShellOutcome::Exited(_)) {
            let _ = append(
                &log,
                &format!("\nplait: {}\n", outcome.describe(job.timeout)),
            );
        }
        results.push(CheckResult {
            command: command.clone(),
            passed,
            exit_code: match outcome {
                ShellOutcome::Exited(code) => Some(code),
                _ => None,
            },
            tail: shell::tail(&log, 40, 4000),
            log,
            ms: started.elapsed().as_millis() as u64,
            // A name lookup a passing check made on its own is no news.
            refused: sandbox
                .denials()
                .into_iter()
                .filter(|d| !passed || !plait_sandbox::sandbox::refused_lookup(d))
                .collect(),
            at_base: false,
            as_on_base: false,
            beyond_base: Vec::new(),
        });
        if outcome == ShellOutcome::Interrupted {
            break;
        }
    }
    results
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// Runs the merged checks of `state`'s run on `commit`, logging under `logs`; a checkout
/// that cannot be made is a failed check.
pub async fn checks_at(
    pool: &CheckPool,
    state: &plait_core::state::RunState,
    commit: Oid,
    checks: &plait_plan::CheckSettings,
    logs: &Path,
    cancel: &Cancel,
) -> Vec<CheckResult> {
    let job = CheckJob {
        commit,
        commands: &checks.merged,
        own: &[],
        env: vec![
            ("PLAIT_RUN", state.id.clone()),
            ("PLAIT_TASK", "merged".to_string()),
            ("PLAIT_BASE", state.base.clone()),
            ("PLAIT_COMMIT", commit.to_string()),
        ],
        logs,
        timeout: checks.timeout,
        sandbox: &checks.sandbox,
        lineage: Lineage::Gate,
    };
    match pool.run(&job, cancel).await {
        Ok(results) => results,
        Err(e) => vec![CheckResult {
            command: "(prepare a checkout to check)".to_string(),
            passed: false,
            exit_code: None,
            tail: e.to_string(),
            log: logs.to_path_buf(),
            ms: 0,
            refused: Vec::new(),
            at_base: false,
            as_on_base: false,
            beyond_base: Vec::new(),
        }],
    }
}
