//! Starting a run: the use case behind `plait run` (and `--dry-run`). [`run`] reads the
//! plan against the repository, makes the run (its directory, branches, worktrees and
//! lock; for a run spread over workers, the base commit on their remote) and carries it to
//! its end; [`dry_run`] says what a run of it would do and creates nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use plait_core::state::RunState;
use plait_plan::ResolvedPlan;
use plait_run::orchestrator::{self, RunSettings};
use plait_stages::context::Context;

use super::running::{go, Watch};
use super::OpsError;

/// What a run is asked.
pub struct RunRequest<'a> {
    /// The plan file, as the user named it.
    pub plan_path: &'a Path,
    /// Its text, with the repository's configuration in it.
    pub plan_text: String,
    /// Tasks at once on this machine.
    pub jobs: usize,
    /// Where the worktrees go (`<dir>/<run>/`), when the user chose; else under the
    /// context's cache directory, or the git directory when it has none.
    pub worktree_dir: Option<&'a Path>,
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
}

/// A plan read against the repository, and what the user should be warned of.
pub struct Planned {
    /// The plan resolved against the repository.
    pub resolved: ResolvedPlan,
    /// The sandbox's and the plan's warnings, one line each (with the setup's: what the
    /// views would lack of the checkout).
    pub warnings: Vec<String>,
}

/// The plan `text` (read from `path`) parsed and validated against the repository, as a
/// run takes it.
pub fn plan(ctx: &Context, path: &Path, text: &str) -> Result<Planned, OpsError> {
    let repo = ctx.repo()?;
    let parsed = plait_plan::parse(text, path)?;
    let resolved = plait_plan::resolve_with_env(&repo, parsed, path, &|name| ctx.var(name))?;
    let warnings = [
        resolved.sandbox_warning(),
        resolved.single_file_warning(),
        resolved.mixed_files_warning(),
    ]
    .into_iter()
    .flatten()
    .chain(resolved.setup_warnings(ctx.workdir()))
    .collect();
    Ok(Planned { resolved, warnings })
}

/// What a run of a plan would do, nothing of it made.
pub struct DryRun {
    /// The plan, resolved against the repository.
    pub resolved: ResolvedPlan,
    /// What the user should be warned of (as [`Planned::warnings`]).
    pub warnings: Vec<String>,
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

/// What a run of the plan asked as `request` would do; creates nothing (no run directory,
/// branch, worktree, lock or cache directory).
pub fn dry_run(ctx: &Context, request: &RunRequest<'_>) -> Result<DryRun, OpsError> {
    let Planned { resolved, warnings } = plan(ctx, request.plan_path, &request.plan_text)?;
    let groups = request
        .groups
        .unwrap_or_else(|| resolved.groups.groups_for(resolved.tasks.len()));
    let store = ctx.store();
    let worktrees = match worktree_root(ctx, request, false)?.0 {
        Some(root) => root.join("<run>"),
        None => store.run("<run>").worktrees(),
    };
    let stable = plait_trees::environment::stable_path(&worktrees.with_file_name("<run>"));
    let environment =
        plait_trees::environment::preview(ctx.dir(), &store.envs_dir(), &resolved, &stable);
    Ok(DryRun {
        resolved,
        warnings,
        groups,
        worktrees,
        busy: store.lock_holder(),
        environment,
    })
}

/// Runs the plan asked as `request` to its end, followed through `watch`: the plan read
/// against the repository, its worktrees' directory chosen, the base put on the remote of a
/// run spread over workers, the run made (`orchestrator::prepare`: the lock, the record,
/// the branches and worktrees) and carried on until it has merged. The run's record at the
/// end.
pub async fn run(
    ctx: &Context,
    request: RunRequest<'_>,
    watch: Watch,
) -> Result<RunState, OpsError> {
    let Planned {
        resolved,
        mut warnings,
    } = plan(ctx, request.plan_path, &request.plan_text)?;
    let (worktree_root, warning) = worktree_root(ctx, &request, true)?;
    warnings.extend(warning);
    let remote = match (request.remote, &request.store) {
        (Some(remote), Some(_)) => Some(publish_base(
            ctx.dir(),
            remote,
            &request.cwd,
            &resolved.base.to_string(),
        )?),
        (Some(_), None) => return Err(OpsError::RemoteWithoutStore),
        (None, _) => None,
    };
    let plan_path = request.plan_path.to_path_buf();
    let settings = RunSettings {
        context: ctx.clone(),
        plan: Arc::new(resolved),
        plan_path: std::path::absolute(&plan_path).unwrap_or(plan_path),
        plan_text: request.plan_text,
        jobs: request.jobs,
        worktree_root,
        max_cost: request.max_cost,
        groups: request.groups,
        store: request.store,
        remote: remote.clone(),
    };
    let prepared = orchestrator::prepare(settings)?;
    go(prepared, remote, warnings, watch).await
}

/// Where the run's worktrees go: the chosen directory, made absolute; else the repository's
/// directory under the user's cache (`workspace::default_root`), outside the checkout;
/// else (no cache, or one plait cannot write) the run's directory under the git directory
/// (`None`), with a warning. With `make`, the cache's directory is made.
fn worktree_root(
    ctx: &Context,
    request: &RunRequest<'_>,
    make: bool,
) -> Result<(Option<PathBuf>, Option<String>), OpsError> {
    if let Some(d) = request.worktree_dir {
        return std::path::absolute(d)
            .map(|d| (Some(d), None))
            .map_err(|source| OpsError::WorktreeDir {
                dir: d.to_path_buf(),
                source,
            });
    }
    let Some(cache) = ctx.cache_home() else {
        return Ok((None, None));
    };
    let root = plait_trees::workspace::default_root(&cache, &*ctx.repo()?);
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
    plait_store::remote::publish_base(dir, &remote, base).map_err(|source| {
        OpsError::PublishBase {
            remote: remote.clone(),
            source,
        }
    })?;
    Ok(remote)
}
