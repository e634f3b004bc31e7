//! `plait clean`: remove a run's worktrees and branches.

use std::fmt::Write as _;
use std::path::Path;

use clap::Args;

use super::ui::{errln, outln};
use super::CommandError;
use plait::ops;
use plait::ops::clean::SeedCleaned;

/// Remove a run's worktrees and branches, refusing to lose unsaved work
#[derive(Debug, Args)]
#[command(after_help = "\
Refuses, and removes nothing, when a worktree holds uncommitted or uncollected changes or a
branch holds commits that are on no other branch (the run was not landed); --force removes
them anyway. Every deleted branch is printed with its tip, so `git branch NAME TIP` restores
it. The run's record (state, logs) is kept.

--seed removes the checks' seed instead: the checkout of a base where plait built and ran
the checks before any task's code ran there, kept between runs so that builds start warm
(`<git-common-dir>/plait/seed`), and the checkouts of bases that the tasks' whole-tree views
lie over (`<git-common-dir>/plait/views`). The next run makes them again.

Examples:
  plait clean 0abc12
  plait clean 0abc12 --force
  plait clean --seed")]
pub struct CleanArgs {
    /// The run
    #[arg(required_unless_present = "seed", conflicts_with = "seed")]
    pub run: Option<String>,
    /// Remove the checks' seed and the views' base checkouts kept between runs
    #[arg(long)]
    pub seed: bool,
    /// Remove even worktrees and branches holding work that would be lost
    #[arg(long)]
    pub force: bool,
}

pub fn cmd_clean(dir: &Path, args: CleanArgs) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    let Some(run) = args.run else {
        let SeedCleaned {
            seed,
            views,
            layers,
        } = ops::clean::clean_seed(&ctx)?;
        match seed {
            None if layers == 0 => outln!("no seed to remove")?,
            None => {}
            Some(seed) => outln!("removed the checks' seed {}", seed.display())?,
        }
        if layers > 0 {
            outln!("removed {layers} base layer(s) (tracked files, [setup], plait's build)")?;
        }
        if views > 0 {
            outln!("removed {views} checkout(s) of a base under the tasks' views")?;
        }
        return Ok(());
    };
    let request = ops::clean::CleanRequest {
        run: Some(&run),
        force: args.force,
    };
    let cleaned = ops::clean::clean(&ctx, request)?;
    let (run, outcome) = (&cleaned.run, &cleaned.outcome);
    if cleaned.refused {
        let mut msg = format!("not cleaning run {run}; this would be lost:");
        for risk in &outcome.at_risk {
            let _ = write!(msg, "\n  - {}: {}", risk.what, risk.reason);
        }
        return Err(CommandError::attention(msg).hint(format!(
            "land the run, commit or copy the work, or run `plait clean {run} --force`"
        )));
    }
    for risk in &outcome.at_risk {
        errln!("discarding {}: {}", risk.what, risk.reason);
    }
    for task in &outcome.removed_worktrees {
        errln!("removed worktree of {task}");
    }
    for kept in &outcome.kept_branches {
        errln!("kept {}: {}", kept.what, kept.reason);
    }
    for branch in &outcome.deleted_branches {
        let note = if branch.landed { "" } else { ", not landed" };
        outln!(
            "deleted branch {} (was {}{note}; restore with: git branch {} {})",
            branch.name,
            plait_core::git::short(&branch.tip),
            branch.name,
            branch.tip
        )?;
    }
    Ok(())
}
