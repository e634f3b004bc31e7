//! `plait resume`: carry on a run that was interrupted or killed.

use std::path::Path;

use clap::Args;

use super::run::drive;
use super::ui::errln;
use super::{open_store, CommandError};
use crate::orchestrator::{self, RunSettings};
use crate::state::RunPhase;

/// Carry on an interrupted or killed run: finished tasks are kept, interrupted ones go on
/// from their worktrees, pending ones start
#[derive(Debug, Args)]
#[command(after_help = "\
The run's own copy of its plan is used, against the commit the run started from. An agent
that was interrupted is told that its worktree holds its work so far.

Examples:
  plait resume 0abc12
  plait resume 0abc12 -j 16")]
pub struct ResumeArgs {
    /// The run
    pub run: String,
    /// How many tasks run at once (default: the number of CPUs)
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// Print one JSON event per line on stdout instead of the run id
    #[arg(long)]
    pub json: bool,
    /// The PostgreSQL store of a run spread over workers (or PLAIT_STORE): wait for its
    /// tasks again, through the remote it was started with
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

pub fn cmd_resume(dir: &Path, args: ResumeArgs) -> Result<(), CommandError> {
    if args.jobs == Some(0) && args.store.is_none() {
        return Err(CommandError::usage("-j must be at least 1"));
    }
    let (_repo, store) = open_store(dir)?;
    let run = store.find(Some(&args.run))?;
    let state = store.load(&run)?;
    if state.phase == RunPhase::Finished {
        return Err(CommandError::usage(format!(
            "run {run} has finished; there is nothing to resume"
        ))
        .hint(format!("`plait status {run}` shows it")));
    }
    if let Some((pid, holder)) = store.lock_holder() {
        if holder == run {
            return Err(CommandError::usage(format!(
                "run {run} is still going (plait process {pid})"
            )));
        }
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get()));
    let mut settings = kept_settings(dir, &state, jobs)?;
    let total = settings.plan.tasks.len();
    settings.store = super::store_config(args.store.as_deref())?;
    settings.remote = match &settings.store {
        Some(config) => super::queued_remote(config, &run)?,
        None => None,
    };
    let prepared = orchestrator::prepare_resume(settings, &run)?;
    let left = state.tasks.iter().filter(|t| !t.state.is_final()).count();
    errln!("resuming run {run}: {left} of {total} task(s) to go, {jobs} at a time");
    drive(prepared, total, args.json)
}

/// The settings to carry on run `state` with (see `ops::resume::kept_settings`), its
/// sandbox warning printed.
pub(super) fn kept_settings(
    dir: &Path,
    state: &crate::state::RunState,
    jobs: usize,
) -> Result<RunSettings, CommandError> {
    let env = |name: &str| std::env::var(name).ok();
    let (settings, warning) =
        crate::ops::resume::kept_settings(dir, state, jobs, &env, super::plait_program()?)?;
    if let Some(warning) = warning {
        errln!("warning: {warning}");
    }
    Ok(settings)
}
