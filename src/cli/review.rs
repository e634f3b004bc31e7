//! `plait review`, `plait accept`, `plait reject`: a person reads each task's verdict,
//! comments, checks and diff, and may overrule the reviewer.

use std::io::IsTerminal;
use std::path::Path;

use clap::Args;

use super::error::Context as _;
use super::run::{drive, Progress, Shown};
use super::ui::{self, errln, outln};
use super::CommandError;
use plait::ops;
use plait::ops::decide::DecideRequest;
use plait::ops::running::Started;
use plait::ops::send_back::SendBackRequest;
use plait_core::state::{RunState, Verdict};
use plait_stages::report;
use plait_stages::report::diff::DiffStyle;

/// Show each task's verdict, review comments, checks and diff
#[derive(Debug, Args)]
#[command(after_help = "\
A table comes first: per task its state, verdict, checks passed (or \"not reached\" when the
task ended before them), files and lines changed. On a terminal the whole goes through your
pager, as git's output does (GIT_PAGER, core.pager, PAGER, else less; --no-pager: none).

Then overrule the reviewer where you disagree:
  plait accept RUN TASK     # the task counts as approved, violations and all (they
                            # were never committed: its committed work goes in)
  plait reject RUN TASK     # the task is left out of the merge, and the rest lands
                            # without --partial
In a grouped run, TASK may be a supervisor group (group-<k>): accepting it sends its branch
up to the top merge whatever its supervisor said.
`plait land` merges again when decisions changed which tasks belong in the result.

A failed task shows the last lines of its agent log (all of it: plait log RUN TASK).
A task run as several attempts lists them under it (TASK~N): each one's state, checks, cost
and how it ended, the chosen one marked `*` with who chose it and why; `plait accept RUN
TASK~N` takes another in its place.
--attention and --task together show the tasks either selects.

Examples:
  plait review 0abc12 --stat
  plait review 0abc12 --attention
  plait review 0abc12 --task parser --task lexer")]
pub struct ReviewArgs {
    /// The run
    pub run: String,
    /// Show only the tasks and groups that need a person: failed, rejected, not approved,
    /// with violations, in a conflict, culprits, groups held back
    #[arg(long)]
    pub attention: bool,
    /// Show only this task or group (repeatable)
    #[arg(long = "task", value_name = "ID")]
    pub tasks: Vec<String>,
    /// Show only the summary table: per task its state, verdict, checks, files and lines
    #[arg(long)]
    pub stat: bool,
    /// Print straight to stdout, not through the pager
    #[arg(long)]
    pub no_pager: bool,
    #[command(flatten)]
    pub store: super::shared::StoreArg,
}

/// Record that you approve a task (or supervisor group), whatever the reviewer said
#[derive(Debug, Args)]
pub struct AcceptArgs {
    /// The run
    pub run: String,
    /// The task, or a group (group-<k>)
    pub task: String,
    #[command(flatten)]
    pub store: super::shared::StoreArg,
}

/// Record that you reject a task (or supervisor group): it stays out of the merge
#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The run
    pub run: String,
    /// The task, or a group (group-<k>)
    pub task: String,
    #[command(flatten)]
    pub store: super::shared::StoreArg,
}

/// Send a finished task back to its agent with a comment, for one more round
#[derive(Debug, Args)]
#[command(after_help = "\
The comment becomes the task's feedback, as a reviewer's request for changes does: its agent
works one more round in the task's worktree (then the review rounds the plan allows), and
the run merges and runs its merged checks again. A decision you made on the task is
dropped; the new round's review judges it.

Examples:
  plait send-back 0abc12 billing --comment 'Keep the old function as a deprecated alias'")]
pub struct SendBackArgs {
    /// The run (finished, not cleaned)
    pub run: String,
    /// The task
    pub task: String,
    /// What the agent should change
    #[arg(long, short = 'm', value_name = "TEXT")]
    pub comment: String,
    /// Print one JSON event per line on stdout instead of the run id
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_review(dir: &Path, args: ReviewArgs) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    args.store.sync_in(&ctx, &args.run)?;
    let (repo, store) = (ctx.repo()?, ctx.store());
    let run = store.find(Some(&args.run))?;
    let state = store.load(&run)?;
    let style = DiffStyle {
        color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        stat: false,
    };
    let only = selection(&state, &args)?;
    if only.as_ref().is_some_and(Vec::is_empty) {
        errln!("nothing in run {run} needs a person");
        return Ok(());
    }
    let mut text =
        report::review_summary(&repo, &state, only.as_deref()).context("cannot show the review")?;
    if !args.stat {
        text.push('\n');
        text.push_str(
            &report::review_text(&repo, &state, style, only.as_deref())
                .context("cannot show the review")?,
        );
    }
    // On a terminal the text goes through the user's pager, as git's does.
    let pager = (std::io::stdout().is_terminal() && !args.no_pager)
        .then(|| ui::pager(dir, &|name| std::env::var(name).ok()))
        .flatten();
    ui::page(&text, pager.as_deref())
}

/// The tasks and groups `--attention` and `--task` select; `None`: all of them.
fn selection(state: &RunState, args: &ReviewArgs) -> Result<Option<Vec<String>>, CommandError> {
    if !args.attention && args.tasks.is_empty() {
        return Ok(None);
    }
    for id in &args.tasks {
        if state.task(id).is_none() && !state.groups.iter().any(|g| &g.id == id) {
            return Err(
                CommandError::usage(format!("run {} has no task `{id}`", state.id))
                    .hint(format!("its tasks: {}", super::task_list(state))),
            );
        }
    }
    let mut only = if args.attention {
        report::needing_attention(state)
    } else {
        Vec::new()
    };
    for id in &args.tasks {
        if !only.contains(id) {
            only.push(id.clone());
        }
    }
    Ok(Some(only))
}

pub fn cmd_accept(dir: &Path, args: AcceptArgs) -> Result<(), CommandError> {
    decide(dir, &args.run, &args.task, &args.store, Verdict::Approve)
}

pub fn cmd_reject(dir: &Path, args: RejectArgs) -> Result<(), CommandError> {
    decide(dir, &args.run, &args.task, &args.store, Verdict::Reject)
}

pub fn cmd_send_back(dir: &Path, args: SendBackArgs) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    let request = SendBackRequest {
        run: &args.run,
        task: &args.task,
        comment: &args.comment,
    };
    let task = args.task.clone();
    let said = move |started: &Started| {
        errln!(
            "sending task {task} of run {} back for one more round",
            started.state.id
        );
    };
    let shown = Shown {
        json: args.json,
        timings: None,
        progress_of: Progress::One,
    };
    drive(&ctx, shown, said, |watch| {
        ops::send_back::send_back(&ctx, request, watch)
    })
}

/// Records a person's decision on a task, in the run's store too when there is one.
fn decide(
    dir: &Path,
    run: &str,
    id: &str,
    store: &super::shared::StoreArg,
    verdict: Verdict,
) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    let synced = store.sync_in(&ctx, run)?;
    let request = DecideRequest {
        run: Some(run),
        id,
        verdict,
    };
    let decided = ops::decide::decide(&ctx, request)?;
    outln!("{}", plait::words::decided(&decided))?;
    synced.map_or(Ok(()), |s| s.sync_out(&ctx))
}
