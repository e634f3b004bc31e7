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

--seed removes the checks' seed instead: the checkout of a base where plait built and ran
the checks before any task's code ran there, kept between runs so that builds start warm
(`<git-common-dir>/plait/seed`). The next run with checks makes it again.

Examples:
  plait clean 0abc12
  plait clean 0abc12 --force
  plait clean --seed")]
pub struct CleanArgs {
    /// The run
    #[arg(required_unless_present = "seed", conflicts_with = "seed")]
    pub run: Option<String>,
    /// Remove the checks' seed kept between runs
    #[arg(long)]
    pub seed: bool,
    /// Remove even worktrees and branches holding work that would be lost
    #[arg(long)]
    pub force: bool,
}

pub fn cmd_clean(dir: &Path, args: CleanArgs) -> Result<(), CommandError> {
    let (repo, store) = open_store(dir)?;
    let Some(run) = args.run else {
        return clean_seed(&repo, &store);
    };
    let run = store.find(Some(&run))?;
    let mut state = store.load(&run)?;
    let live = store.is_running(&run);
    let outcome = clean::clean(&repo, &mut state, &store.run(&run), live, args.force)?;
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

/// `plait clean --seed`, refused while a run may be using the seed.
fn clean_seed(repo: &git2::Repository, store: &crate::state::Store) -> Result<(), CommandError> {
    if let Some((pid, run)) = store.lock_holder() {
        return Err(CommandError::attention(format!(
            "run {run} is running (process {pid}) and may be using the seed"
        ))
        .hint("wait for it to end, or stop it with Ctrl-C, then clean again"));
    }
    let seed = store.seed_dir();
    if !seed.exists() {
        outln!("no seed to remove")?;
        return Ok(());
    }
    crate::review::checkout::remove(&crate::git::workdir(repo), &seed);
    let _ = std::fs::remove_file(seed.with_extension("json"));
    outln!("removed the checks' seed {}", seed.display())?;
    Ok(())
}
