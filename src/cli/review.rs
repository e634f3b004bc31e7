//! `plait review`, `plait accept`, `plait reject`: a person reads each task's verdict,
//! comments, checks and diff, and may overrule the reviewer.

use std::io::IsTerminal;
use std::path::Path;

use clap::Args;

use super::{open_store, CommandError};
use crate::report::{self, DiffStyle};
use crate::state::{now_ms, Decision, Verdict};

/// Show each task's verdict, review comments, checks and diff
#[derive(Debug, Args)]
#[command(after_help = "\
Then overrule the reviewer where you disagree:
  plait accept RUN TASK     # the task counts as approved
  plait reject RUN TASK     # the task is left out of the merge
`plait land` merges again when decisions changed which tasks belong in the result.")]
pub struct ReviewArgs {
    /// The run
    pub run: String,
}

/// Record that you approve a task, whatever the reviewer said
#[derive(Debug, Args)]
pub struct AcceptArgs {
    /// The run
    pub run: String,
    /// The task
    pub task: String,
}

/// Record that you reject a task: it stays out of the merge
#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The run
    pub run: String,
    /// The task
    pub task: String,
}

pub fn cmd_review(dir: &Path, args: ReviewArgs) -> Result<(), CommandError> {
    let (repo, store) = open_store(dir)?;
    let run = store.find(Some(&args.run))?;
    let state = store.load(&run)?;
    let style = DiffStyle {
        color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        stat: false,
    };
    let text = report::review_text(&repo, &state, style)
        .map_err(|e| CommandError::internal(format!("cannot show the review: {e}")))?;
    print!("{text}");
    Ok(())
}

pub fn cmd_accept(dir: &Path, args: AcceptArgs) -> Result<(), CommandError> {
    decide(dir, &args.run, &args.task, Verdict::Approve)
}

pub fn cmd_reject(dir: &Path, args: RejectArgs) -> Result<(), CommandError> {
    decide(dir, &args.run, &args.task, Verdict::Reject)
}

fn decide(dir: &Path, run: &str, task: &str, verdict: Verdict) -> Result<(), CommandError> {
    let (_repo, store) = open_store(dir)?;
    let run = store.find(Some(run))?;
    if store.lock_holder().is_some_and(|(_, holder)| holder == run) {
        return Err(CommandError::usage(format!(
            "run {run} is still in progress; decide when it has finished"
        )));
    }
    let mut state = store.load(&run)?;
    let Some(record) = state.task_mut(task) else {
        return Err(CommandError::usage(format!(
            "run {run} has no task `{task}`"
        )));
    };
    record.decision = Some(Decision {
        verdict,
        at: now_ms(),
    });
    store.save(&state)?;
    let word = if verdict == Verdict::Approve {
        "accepted"
    } else {
        "rejected"
    };
    println!("task {task} of run {run} {word}; `plait land {run} --into BRANCH` merges again with this decision");
    Ok(())
}
