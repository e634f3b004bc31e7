//! Going on with a run that was started before: the use case behind `plait resume`
//! ([`prepare`]: its refusals, then the run made ready to go on), and its own copy of its
//! plan resolved again against the commit it started from, for `resume` and `send-back`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::orchestrator::{Prepared, RunSettings};
use plait_core::state::{RunPhase, RunState, Store};

use super::OpsError;

/// The settings to carry on run `state` with, `jobs` tasks at once (the repository at
/// `dir`; `plait` is the program the agents' hooks call back), and the sandbox's warning
/// when the run's processes cannot be confined here.
pub fn kept_settings(
    dir: &Path,
    state: &RunState,
    jobs: usize,
    env: &dyn Fn(&str) -> Option<String>,
    plait: PathBuf,
) -> Result<(RunSettings, Option<String>), OpsError> {
    let repo = plait_core::git::open(dir)?;
    let store = Store::new(plait_core::git::plait_dir(&repo));
    let copy = store.run(&state.id).plan();
    let plan_text =
        std::fs::read_to_string(&copy).map_err(|source| plait_core::state::StateError::Io {
            path: copy.clone(),
            source,
        })?;
    let resolved = crate::plan::resolve_kept(&repo, &plan_text, &copy, &state.base, env)?;
    let warning = resolved.sandbox_warning();
    let settings = RunSettings {
        store: None,
        remote: None,
        repo: std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()),
        plan: Arc::new(resolved),
        plan_path: state.plan.clone(),
        plan_text,
        jobs,
        // The tasks' worktrees are recorded in the state already.
        worktree_root: None,
        max_cost: state.max_cost,
        groups: None,
        plait_program: plait,
    };
    Ok((settings, warning))
}

/// What a resume is asked.
pub struct ResumeRequest<'a> {
    /// The repository.
    pub dir: &'a Path,
    /// Tasks at once on this machine.
    pub jobs: usize,
    /// The PostgreSQL store of a run spread over workers, and the remote its tasks are
    /// queued through there.
    pub store: Option<(tokio_postgres::Config, Option<String>)>,
    /// The environment the kept plan resolves its variables from.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The program the agents' hooks call back (this plait).
    pub plait: PathBuf,
}

/// A run ready to go on.
pub struct Resumed {
    pub prepared: Prepared,
    /// Its tasks, and those that have not ended.
    pub total: usize,
    pub left: usize,
    /// The sandbox's warning when the run's processes cannot be confined here.
    pub warning: Option<String>,
}

/// The run `run` names (a prefix of its id will do), found and loaded: refused when it has finished (nothing
/// to resume) or its plait process is still going.
pub fn find(dir: &Path, run: &str) -> Result<RunState, OpsError> {
    let repo = plait_core::git::open(dir)?;
    let store = Store::new(plait_core::git::plait_dir(&repo));
    let run = store.find(Some(run))?;
    let state = store.load(&run)?;
    if state.phase == RunPhase::Finished {
        return Err(OpsError::refused(
            format!("run {run} has finished; there is nothing to resume"),
            Some(format!("`plait status {run}` shows it")),
        ));
    }
    if let Some((pid, holder)) = store.lock_holder() {
        if holder == run {
            return Err(OpsError::refused(
                format!("run {run} is still going (plait process {pid})"),
                None,
            ));
        }
    }
    Ok(state)
}

/// Makes run `state` (as [`find`] gave it) ready to go on: its kept plan resolved again, the
/// lock taken, the tasks that had not ended set to run again from their worktrees.
pub fn prepare(request: ResumeRequest<'_>, state: &RunState) -> Result<Resumed, OpsError> {
    let (mut settings, warning) =
        kept_settings(request.dir, state, request.jobs, request.env, request.plait)?;
    let total = settings.plan.tasks.len();
    if let Some((config, remote)) = request.store {
        settings.store = Some(config);
        settings.remote = remote;
    }
    let prepared = crate::orchestrator::prepare_resume(settings, &state.id)?;
    let left = state.tasks.iter().filter(|t| !t.state.is_final()).count();
    Ok(Resumed {
        prepared,
        total,
        left,
        warning,
    })
}
