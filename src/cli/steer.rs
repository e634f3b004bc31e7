//! `plait tell` and `plait stop`: steering one task of a running run.

use std::path::Path;

use clap::Args;

use super::ui::{errln, outln};
use super::CommandError;
use plait::ops;
use plait_run::steer::Ask;

/// Tell one running task's agent something now, the other tasks going on
#[derive(Debug, Args)]
#[command(after_help = "\
A model agent hears it at its next turn, as a message from you after its tool results; an
agent that takes nothing while its round runs (aider, Claude Code, { cli }, exec) hears it
as its next round's comment, and the task gets that round. Messages keep their order, and
plait status shows them with when each was heard. A task that has ended is refused: plait
send-back gives a finished task one more round.

Examples:
  plait tell 0abc12 billing -m 'Use the Money type, not f64'
  plait tell 0abc12 parser~2 -m 'Stop: keep the old tokenizer'   # one attempt")]
pub struct TellArgs {
    /// The run (going)
    pub run: String,
    /// The task (or an attempt of one, TASK~N)
    pub task: String,
    /// What to tell its agent
    #[arg(long, short = 'm', value_name = "TEXT")]
    pub message: String,
}

/// Stop one running task now, its agent and every command it runs, the others going on
#[derive(Debug, Args)]
#[command(after_help = "\
Without --keep the task ends stopped and stays out of the merge (your stop is its
rejection: the rest lands without it). With --keep its work so far is collected as usual
(owned files only) and judged by its checks and reviewer like a finished round.

Examples:
  plait stop 0abc12 billing
  plait stop 0abc12 billing --keep")]
pub struct StopArgs {
    /// The run (going)
    pub run: String,
    /// The task (or an attempt of one, TASK~N)
    pub task: String,
    /// Collect and judge its work so far instead of leaving it out
    #[arg(long)]
    pub keep: bool,
}

pub fn cmd_tell(dir: &Path, args: TellArgs) -> Result<(), CommandError> {
    let ask = Ask::Tell { text: args.message };
    steer(dir, &args.run, &args.task, ask)
}

pub fn cmd_stop(dir: &Path, args: StopArgs) -> Result<(), CommandError> {
    let ask = Ask::Stop { keep: args.keep };
    steer(dir, &args.run, &args.task, ask)
}

fn steer(dir: &Path, run: &str, task: &str, ask: Ask) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    let request = ops::steer::SteerRequest {
        run,
        task,
        ask,
        by: "command line",
    };
    let steered = super::runtime()?.block_on(ops::steer::steer(&ctx, request))?;
    match steered.answer {
        Some(answer) => outln!("{answer}")?,
        None => errln!(
            "{} (plait status {} shows it)",
            plait::words::not_answered(&steered.run),
            steered.run
        ),
    }
    Ok(())
}
