//! `plait clean`: remove a run's worktrees and branches.

use std::path::Path;

use clap::Args;

use super::ui::{errln, outln};
use super::{open_store, CommandError};
use crate::clean;

/// Remove a run's worktrees and branches, refusing to lose unsaved work
#[derive(Debug, Args)]
#[command(after_help = "\
Refuses, and removes nothing, when a worktree holds uncommitted or uncollected changes or a
branch holds commits that are on no other branch (the run was not landed); --force removes
them anyway. Every deleted branch is printed with its tip, so `git branch NAME TIP` restores
it. The run's record (state, logs) is kept.

Examples:
  plait clean 0abc12
  plait clean 0abc12 --force")]
pub struct CleanArgs {
    /// The run
    pub run: String,
    /// Remove even worktrees and branches holding work that would be lost
    #[arg(long)]
    pub force: bool,
}

pub fn cmd_clean(dir: &Path, args: CleanArgs) -> Result<(), CommandError> {
    let (repo, store) = open_store(dir)?;
    let run = store.find(Some(&args.run))?;
    let mut state = store.load(&run)?;
    let live = store.is_running(&run);
    let outcome = clean::clean(&repo, &mut state, &store.run_dir(&run), live, args.force)?;
    if !args.force && !outcome.at_risk.is_empty() {
        let mut msg = format!("not cleaning run {run}; this would be lost:");
        for risk in &outcome.at_risk {
            msg.push_str(&format!("\n  - {}: {}", risk.what, risk.reason));
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
            crate::git::short(&branch.tip),
            branch.name,
            branch.tip
        )?;
    }
    store.save(&state)?;
    Ok(())
}
