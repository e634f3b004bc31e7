//! Going on with a run that was started before: its own copy of its plan resolved again
//! against the commit it started from, for `resume` and `send-back`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::orchestrator::RunSettings;
use crate::state::{RunState, Store};

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
    let repo = crate::git::open(dir)?;
    let store = Store::new(crate::git::plait_dir(&repo));
    let copy = store.run(&state.id).plan();
    let plan_text =
        std::fs::read_to_string(&copy).map_err(|source| crate::state::StateError::Io {
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
