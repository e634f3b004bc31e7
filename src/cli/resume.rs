//! `plait resume`: carry on a run that was interrupted or killed.

use std::path::Path;

use clap::Args;

use super::run::drive;
use super::ui::errln;
use super::CommandError;

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
    let state = crate::ops::resume::find(dir, &args.run)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get()));
    let store = match super::store_config(args.store.as_deref())? {
        Some(config) => {
            let remote = super::queued_remote(&config, &state.id)?;
            Some((config, remote))
        }
        None => None,
    };
    let env = |name: &str| std::env::var(name).ok();
    let request = crate::ops::resume::ResumeRequest {
        dir,
        jobs,
        store,
        env: &env,
        plait: super::plait_program()?,
    };
    let resumed = crate::ops::resume::prepare(request, &state)?;
    if let Some(warning) = &resumed.warning {
        errln!("warning: {warning}");
    }
    errln!(
        "resuming run {}: {} of {} task(s) to go, {jobs} at a time",
        state.id,
        resumed.left,
        resumed.total
    );
    drive(dir, resumed.prepared, resumed.total, args.json)
}
