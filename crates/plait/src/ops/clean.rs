//! Cleaning up: a run's worktrees and branches (refused while work would be lost, unless
//! forced), or the checks' seed kept between runs.

use std::path::PathBuf;

use crate::clean::CleanOutcome;
use plait_stages::context::Context;

use super::OpsError;

/// What cleaning a run did: nothing when `refused` (what would be lost is in the outcome's
/// `at_risk`).
#[derive(Debug)]
pub struct Cleaned {
    /// The run.
    pub run: String,
    /// What was removed, or what would be lost.
    pub outcome: CleanOutcome,
    /// Work would be lost and the clean was not forced: nothing was removed.
    pub refused: bool,
}

/// A run to clean.
pub struct CleanRequest<'a> {
    /// The run, as the user named it (a prefix of its id will do); the latest when none.
    pub run: Option<&'a str>,
    /// Remove it even when work would be lost.
    pub force: bool,
}

/// Removes the run's worktrees and branches (see [`crate::clean::clean`]); `force` accepts
/// losing work. The record is saved either way.
pub fn clean(ctx: &Context, request: CleanRequest<'_>) -> Result<Cleaned, OpsError> {
    let CleanRequest { run, force } = request;
    let store = ctx.store();
    let run = store.find(run)?;
    let mut state = store.load(&run)?;
    let live = store.is_running(&run);
    let outcome = crate::clean::clean(&*ctx.repo()?, &mut state, &store.run(&run), live, force)
        .map_err(OpsError::Clean)?;
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
pub fn clean_seed(ctx: &Context) -> Result<SeedCleaned, OpsError> {
    let store = ctx.store();
    if let Some((pid, run)) = store.lock_holder() {
        return Err(OpsError::InUse {
            run,
            pid,
            what: "the seed and the views",
        });
    }
    let views = plait_trees::workspace::view::remove_trees(&store.views_dir());
    let layers = plait_trees::environment::remove_all(&store.envs_dir());
    let seed = store.seed_dir();
    if !seed.exists() {
        return Ok(SeedCleaned {
            seed: None,
            views,
            layers,
        });
    }
    plait_stages::review::checkout::remove(ctx.workdir(), &seed);
    let _ = std::fs::remove_file(seed.with_extension("json"));
    Ok(SeedCleaned {
        seed: Some(seed),
        views,
        layers,
    })
}
