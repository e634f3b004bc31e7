//! Starting a run: the use case behind `plait run` (and `--dry-run`). [`plan`] reads the
//! plan against the repository, with the warnings it gives; [`dry_run`] says what a run of
//! it would do and creates nothing; [`start`] makes the run (its directory, branches,
//! worktrees and lock) and, for a run spread over workers, puts the base commit on their
//! remote. The caller then runs it with [`orchestrator::execute`], showing the progress its
//! own way.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::orchestrator::{self, Prepared, RunSettings};
use crate::plan::ResolvedPlan;
use plait_core::state::Store;

use super::OpsError;

/// What a run is asked.
pub struct RunRequest<'a> {
    /// The repository.
    pub dir: &'a Path,
    /// The plan file, as the user named it.
    pub plan_path: &'a Path,
    /// Its text, with the repository's configuration in it.
    pub plan_text: String,
    /// Tasks at once on this machine.
    pub jobs: usize,
    /// Where the worktrees go (`<dir>/<run>/`), when the user chose.
    pub worktree_dir: Option<&'a Path>,
    /// The user's cache directory (`XDG_CACHE_HOME` or `~/.cache`), where the worktrees go
    /// otherwise; with none, they go under the git directory.
    pub cache: Option<PathBuf>,
    /// Stop starting model requests once the run has cost this much (US dollars).
    pub max_cost: Option<f64>,
    /// Supervisor groups, when the user chose.
    pub groups: Option<usize>,
    /// The PostgreSQL store the record is written to as well, connected to already.
    pub store: Option<tokio_postgres::Config>,
    /// The git remote the run is spread over through the store, as the user named it.
    pub remote: Option<&'a str>,
    /// The directory a relative remote path is read against.
    pub cwd: PathBuf,
    /// The environment the plan resolves its variables from.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The program the agents' hooks call back (this plait).
    pub plait: PathBuf,
}

/// A plan read against the repository, and what the user should be warned of.
pub struct Planned {
    pub resolved: ResolvedPlan,
    /// The sandbox's and the plan's warnings, one line each (with the setup's: what the
    /// views would lack of the checkout).
    pub warnings: Vec<String>,
}

/// The plan `text` (read from `path`) parsed and validated against the repository at
/// `dir`, as a run takes it.
pub fn plan(
    dir: &Path,
    path: &Path,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Planned, OpsError> {
    let repo = plait_core::git::open(dir)?;
    let parsed = crate::plan::parse(text, path)?;
    let resolved = crate::plan::resolve_with_env(&repo, parsed, path, env)?;
    let warnings = [
        resolved.sandbox_warning(),
        resolved.single_file_warning(),
        resolved.mixed_files_warning(),
    ]
    .into_iter()
    .flatten()
    .chain(resolved.setup_warnings(&plait_core::git::workdir(&repo)))
    .collect();
    Ok(Planned { resolved, warnings })
}

/// What a run of a plan would do, nothing of it made.
pub struct DryRun {
    /// The plan as `report::plan_text` shows it, with `groups` supervisor groups.
    pub groups: usize,
    /// Where the run's worktrees would go (`<run>` for its id).
    pub worktrees: PathBuf,
    /// The run in progress, if one is (its plait process and id): a run now would be
    /// refused until it ends.
    pub busy: Option<(u32, String)>,
    /// What its views and checks would lie over (`environment::preview`).
    pub environment: String,
}

/// What a run of `plan` asked as `request` would do; creates nothing (no run directory,
/// branch, worktree, lock or cache directory).
pub fn dry_run(request: &RunRequest<'_>, plan: &ResolvedPlan) -> Result<DryRun, OpsError> {
    let groups = request
        .groups
        .unwrap_or_else(|| plan.groups.groups_for(plan.tasks.len()));
    let repo = plait_core::git::open(request.dir)?;
    let store = Store::new(plait_core::git::plait_dir(&repo));
    let worktrees = match worktree_root(request, false)?.0 {
        Some(root) => root.join("<run>"),
        None => store.run("<run>").worktrees(),
    };
    let stable = crate::environment::stable_path(&worktrees.with_file_name("<run>"));
    let environment = crate::environment::preview(request.dir, &store.envs_dir(), plan, &stable);
    Ok(DryRun {
        groups,
        worktrees,
        busy: store.lock_holder(),
        environment,
    })
}

/// A run made and ready to go.
pub struct Started {
    pub prepared: Prepared,
    /// Its tasks.
    pub total: usize,
    /// The remote its tasks are queued through, as the run records it.
    pub remote: Option<String>,
    /// What the user should be told before it goes (worktrees that could not go where
    /// they should).
    pub warnings: Vec<String>,
}

/// Makes the run of `planned` asked as `request`: its worktrees' directory, the base on
/// the remote for a run spread over workers, then the run itself (`orchestrator::prepare`:
/// the lock, the record, the branches and worktrees).
pub fn start(request: RunRequest<'_>, planned: Planned) -> Result<Started, OpsError> {
    let (worktree_root, warning) = worktree_root(&request, true)?;
    let total = planned.resolved.tasks.len();
    let remote = match (request.remote, &request.store) {
        (Some(remote), Some(_)) => Some(publish_base(
            request.dir,
            remote,
            &request.cwd,
            &planned.resolved.base.to_string(),
        )?),
        (Some(_), None) => {
            return Err(OpsError::refused(
                "--remote spreads a run over workers through a store",
                Some("pass --store postgres://user@host/db as well, or set PLAIT_STORE".into()),
            ))
        }
        (None, _) => None,
    };
    let plan_path = request.plan_path.to_path_buf();
    let settings = RunSettings {
        repo: std::path::absolute(request.dir).unwrap_or_else(|_| request.dir.to_path_buf()),
        plan: Arc::new(planned.resolved),
        plan_path: std::path::absolute(&plan_path).unwrap_or(plan_path),
        plan_text: request.plan_text,
        jobs: request.jobs,
        worktree_root,
        max_cost: request.max_cost,
        groups: request.groups,
        plait_program: request.plait,
        store: request.store,
        remote: remote.clone(),
    };
    let prepared = orchestrator::prepare(settings)?;
    Ok(Started {
        prepared,
        total,
        remote,
        warnings: warning.into_iter().collect(),
    })
}

/// Where the run's worktrees go: the chosen directory, made absolute; else the repository's
/// directory under the user's cache (`workspace::default_root`), outside the checkout;
/// else (no cache, or one plait cannot write) the run's directory under the git directory
/// (`None`), with a warning. With `make`, the cache's directory is made.
fn worktree_root(
    request: &RunRequest<'_>,
    make: bool,
) -> Result<(Option<PathBuf>, Option<String>), OpsError> {
    if let Some(d) = request.worktree_dir {
        return std::path::absolute(d)
            .map(|d| (Some(d), None))
            .map_err(|e| OpsError::refused(format!("--worktree-dir {}: {e}", d.display()), None));
    }
    let Some(cache) = &request.cache else {
        return Ok((None, None));
    };
    let repo = plait_core::git::open(request.dir)?;
    let root = crate::workspace::default_root(cache, &repo);
    if !make {
        return Ok((Some(root), None));
    }
    if let Err(e) = std::fs::create_dir_all(&root) {
        return Ok((
            None,
            Some(format!(
                "cannot make {} ({e}); the worktrees go under the git directory instead (--worktree-dir DIR chooses)",
                root.display()
            )),
        ));
    }
    Ok((Some(root), None))
}

/// Puts the base commit on `remote` (a local path made absolute against `cwd`, for workers
/// elsewhere); the remote as the run records it.
fn publish_base(dir: &Path, remote: &str, cwd: &Path, base: &str) -> Result<String, OpsError> {
    let remote = plait_store::remote::normalize(remote, cwd);
    plait_store::remote::publish_base(dir, &remote, base).map_err(|e| {
        OpsError::refused(
            format!("--remote {remote}: {e}"),
            Some("the remote is any URL git can push to (a bare repository's path, ssh or https); nothing was created".into()),
        )
    })?;
    Ok(remote)
}
