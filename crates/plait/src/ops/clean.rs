//! Cleaning up: a run's worktrees and branches (refused while work would be lost, unless
//! forced), or the checks' seed kept between runs.

use std::path::{Path, PathBuf};

use crate::clean::{AtRisk, CleanOutcome};
use plait_core::git;
use plait_core::state::Store;

use super::OpsError;

/// What cleaning a run did: nothing when `refused` (what would be lost is in the outcome's
/// `at_risk`).
#[derive(Debug)]
pub struct Cleaned {
    pub run: String,
    pub outcome: CleanOutcome,
    /// Work would be lost and the clean was not forced: nothing was removed.
    pub refused: bool,
}

/// Removes run `run`'s worktrees and branches (see [`crate::clean::clean`]); `force`
/// accepts losing work. The record is saved either way.
pub fn clean(dir: &Path, run: Option<&str>, force: bool) -> Result<Cleaned, OpsError> {
    let repo = git::open(dir)?;
    let store = Store::new(git::plait_dir(&repo));
    let run = store.find(run)?;
    let mut state = store.load(&run)?;
    let live = store.is_running(&run);
    let outcome = crate::clean::clean(&repo, &mut state, &store.run(&run), live, force).map_err(
        |e| match e {
            crate::clean::CleanError::InProgress { .. } => OpsError::refused(e.to_string(), None),
            other => OpsError::Clean(other),
        },
    )?;
    let refused = !force && !outcome.at_risk.is_empty();
    if !refused {
        store.save(&state)?;
    }
    Ok(Cleaned {
        run,
        outcome,
        refused,
    })
}

/// What `clean_seed` removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedCleaned {
    /// The checks' seed, if there was one.
    pub seed: Option<PathBuf>,
    /// The checkouts of bases that tasks' views lay over (`views/`), how many.
    pub views: usize,
    /// The base layers (`envs/`: tracked files, `[setup]`, plait's build), how many.
    pub layers: usize,
}

/// Removes what plait keeps between runs to start warm: the base layers (with what
/// `[setup]` installed and plait's build of each base), the checks' seed and the checkouts
/// of bases under the tasks' views; refused while a run may be using them.
pub fn clean_seed(dir: &Path) -> Result<SeedCleaned, OpsError> {
    let repo = git::open(dir)?;
    let store = Store::new(git::plait_dir(&repo));
    if let Some((pid, run)) = store.lock_holder() {
        return Err(OpsError::Busy {
            message: format!(
                "run {run} is running (process {pid}) and may be using the seed and the views"
            ),
            hint: Some("wait for it to end, or stop it with Ctrl-C, then clean again".to_string()),
        });
    }
    let views = crate::workspace::view::remove_trees(&store.views_dir());
    let layers = crate::environment::remove_all(&store.envs_dir());
    let seed = store.seed_dir();
    if !seed.exists() {
        return Ok(SeedCleaned {
            seed: None,
            views,
            layers,
        });
    }
    crate::review::checkout::remove(&git::workdir(&repo), &seed);
    let _ = std::fs::remove_file(seed.with_extension("json"));
    Ok(SeedCleaned {
        seed: Some(seed),
        views,
        layers,
    })
}

/// The lines saying what would be lost, for a refusal.
pub fn at_risk_lines(at_risk: &[AtRisk]) -> impl Iterator<Item = String> + '_ {
    at_risk.iter().map(|r| format!("{}: {}", r.what, r.reason))
}
