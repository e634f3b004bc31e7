//! `plait resume`: carry on a run that was interrupted or killed.

use std::fmt::Write as _;
use std::path::Path;

use clap::Args;

use super::run::{drive, Progress, Shown};
use super::ui::errln;
use super::CommandError;
use plait::ops::resume::ResumeRequest;
use plait::ops::running::Started;
use plait_core::state::{RunState, TaskState};

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
    let ctx = super::context(dir)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get()));
    let request = ResumeRequest {
        run: &args.run,
        jobs,
        store: super::store_config(args.store.as_deref())?,
    };
    let said = move |started: &Started| errln!("{}", resuming(&started.state, jobs));
    let shown = Shown {
        json: args.json,
        timings: None,
        progress_of: Progress::All,
    };
    drive(&ctx, shown, said, |watch| {
        plait::ops::resume::resume(&ctx, request, watch)
    })
}

/// The one line that says what a resume of `state` takes up: the tasks that go on from
/// their worktrees, those that start, and how many ended tasks are kept.
fn resuming(state: &RunState, jobs: usize) -> String {
    let (mut go_on, mut start, mut kept) = (Vec::new(), Vec::new(), 0);
    for task in &state.tasks {
        match task.state {
            s if s.is_final() => kept += 1,
            TaskState::Pending | TaskState::Preparing => start.push(task.id.as_str()),
            _ => go_on.push(task.id.as_str()),
        }
    }
    let mut parts = Vec::new();
    match go_on.len() {
        0 => {}
        1 => parts.push(format!("{} goes on from its worktree", go_on[0])),
        _ => parts.push(format!("{} go on from their worktrees", listed(&go_on))),
    }
    match start.len() {
        0 => {}
        1 => parts.push(format!("{} starts", start[0])),
        _ => parts.push(format!("{} start", listed(&start))),
    }
    if parts.is_empty() {
        parts.push("no task is left; the merge goes on".to_string());
    }
    let mut line = format!(
        "resuming run {}, {jobs} at a time: {}",
        state.id,
        parts.join("; ")
    );
    if kept > 0 {
        let _ = write!(line, "; {kept} ended task(s) kept");
    }
    line
}

/// Task ids for a line: all of a few, or the first ones and how many more.
fn listed(ids: &[&str]) -> String {
    const SHOWN: usize = 8;
    if ids.len() <= SHOWN {
        return ids.join(", ");
    }
    format!("{} and {} more", ids[..SHOWN].join(", "), ids.len() - SHOWN)
}
