//! `plait land`: move a branch to the run's merged result.

use std::path::Path;

use clap::Args;

use super::ui::{errln, outln};
use super::CommandError;
use plait::ops;
use plait_stages::context::Context;
use plait_stages::land::{LandOutcome, Refusal};

/// Advance a branch to the run's merged result, only when the merge is clean
#[derive(Debug, Args)]
#[command(after_help = "\
A fast-forward when BRANCH has not moved since the run's base; otherwise a merge commit,
made only when merging BRANCH with the run's result is clean. If BRANCH is checked out, its
worktree is updated too, unless it has uncommitted changes in paths the landing changes.
Never forced; history is never rewritten.

Examples:
  plait land 0abc12 --into main
  plait land 0abc12 --into main --partial   # land the tasks that merged cleanly")]
pub struct LandArgs {
    /// The run
    pub run: String,
    /// The branch to advance
    #[arg(long, value_name = "BRANCH")]
    pub into: String,
    /// Land the merged result even though some tasks failed, changed files they do not
    /// own, or conflicted (they are not in it)
    #[arg(long)]
    pub partial: bool,
    #[command(flatten)]
    pub store: super::shared::StoreArg,
}

pub fn cmd_land(dir: &Path, args: LandArgs) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    let synced = args.store.sync_in(&ctx, &args.run)?;
    let landed = land(&ctx, &args);
    // What landing recorded (or a merge made again) goes back to the store either way.
    if let Some(synced) = synced {
        synced.sync_out(&ctx)?;
    }
    landed
}

fn land(ctx: &Context, args: &LandArgs) -> Result<(), CommandError> {
    let request = ops::land::LandRequest {
        run: Some(&args.run),
        into: &args.into,
        partial: args.partial,
    };
    let landing = super::runtime()?.block_on(ops::land::land(ctx, request))?;
    for note in plait::words::landing_notes(&landing) {
        errln!("{note}");
    }
    if let LandOutcome::Refused(refusal) = landing.outcome {
        return Err(refused(&landing.run, &args.into, &landing.state, refusal));
    }
    match plait::words::landing_line(&landing) {
        Some(line) => outln!("{line}"),
        None => Ok(()),
    }
}

/// Why the landing was refused, and what to do about it.
fn refused(
    run: &str,
    into: &str,
    state: &plait_core::state::RunState,
    refusal: Refusal,
) -> CommandError {
    let (msg, hint) = plait::words::land_refusal(run, into, state, &refusal);
    CommandError::attention(msg).hint(hint)
}
