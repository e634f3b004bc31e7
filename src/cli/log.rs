//! `plait log`: what a task's agent wrote, its checks' logs, or its model transcript; and
//! `--follow`, which prints a running task's log as it grows until the task ends.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use clap::{ArgGroup, Args};

use super::ui::{errln, out};
use super::CommandError;
use plait_core::state::{RunState, StateError, Store, TaskRecord};
use plait_stages::context::Context;
use plait_stages::report::logs;

/// Print a task's agent log, its checks' logs or its model transcript, or follow its log
#[derive(Debug, Args)]
#[command(
    override_usage = "plait log [RUN] TASK [--checks | --transcript | --follow]\n       plait log [RUN] --setup"
)]
#[command(group(ArgGroup::new("what").args(["checks", "transcript", "follow", "setup"])))]
#[command(after_help = "\
RUN may be a unique prefix of a run id; with TASK alone, the newest run's task is shown.
The agent log is <git-common-dir>/plait/runs/<run>/tasks/<task>/agent.log: everything the
agent's processes wrote, round after round. A task run as several attempts (`attempts`)
keeps each attempt's logs apart: TASK~N names attempt N.

Examples:
  plait log parser
  plait log 0abc12 parser --checks
  plait log 0abc12 parser --transcript | less
  plait log parser --follow
  plait log 0abc12 parser~2 --checks
  plait log --setup")]
pub struct LogArgs {
    /// The run (default: the newest), or the task when it is the only name given
    #[arg(value_name = "RUN")]
    pub run: Option<String>,
    /// The task
    #[arg(value_name = "TASK")]
    pub task: Option<String>,
    /// Print the task checks' logs instead: each round's, under its command
    #[arg(long)]
    pub checks: bool,
    /// Print the model's transcript instead, as a conversation (model agents)
    #[arg(long)]
    pub transcript: bool,
    /// Print the log, then what is added to it, until the task ends
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Print the run's environment instead: its `[setup] run` commands' logs and the
    /// base's checks plait ran in its base layer
    #[arg(long)]
    pub setup: bool,
}

/// How often `--follow` looks at the log and the run's record.
const POLL: Duration = Duration::from_millis(200);

pub fn cmd_log(dir: &Path, args: LogArgs) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    let store = ctx.store();
    if args.setup {
        if args.task.is_some() {
            return Err(
                CommandError::usage("`plait log --setup` takes a RUN, not a TASK")
                    .hint("plait log [RUN] --setup"),
            );
        }
        return setup(&ctx, args.run.as_deref());
    }
    let (state, task) = target(store, args.run.as_deref(), args.task.as_deref())?;
    if args.follow {
        return follow(store, &state.id, &task);
    }
    let (text, missing) = if args.checks {
        (logs::checks_text(&task), "ran no task checks")
    } else if args.transcript {
        let path = store.run(&state.id).task(&task.id).transcript();
        let entries = plait_llm::readable::read(&path);
        (logs::transcript_text(&entries), "has no model transcript")
    } else {
        (logs::read_from(&task.log, 0).0, "has an empty agent log")
    };
    if text.is_empty() {
        errln!("task {} of run {} {missing}", task.id, state.id);
        return Ok(());
    }
    out!("{text}")
}

/// Prints run `run`'s (default: the newest) setup logs and its base checks' logs, each under
/// its name; says where the base layer came from when this run ran none.
fn setup(ctx: &Context, run: Option<&str>) -> Result<(), CommandError> {
    let found = plait::ops::log::setup_logs(ctx, run)?;
    let mut text = String::new();
    if let Some(layer) = &found.layer {
        let _ = writeln!(text, "environment: {layer}");
    }
    for (label, log, said) in &found.logs {
        let _ = writeln!(text, "--- {label}: {} ---", log.display());
        text.push_str(said);
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if found.logs.is_empty() {
        let _ = writeln!(
            text,
            "run {} ran no [setup] command and no check at its base (its base layer was kept from an earlier run, or it has none)",
            found.run
        );
    }
    out!("{text}")
}

/// The run and task the names given point at: `RUN TASK`, or `TASK` of the newest run.
fn target(
    store: &Store,
    first: Option<&str>,
    second: Option<&str>,
) -> Result<(RunState, TaskRecord), CommandError> {
    let (run, task) = match (first, second) {
        (Some(run), Some(task)) => (Some(run), task),
        (Some(task), None) => (None, task),
        (None, _) => {
            let state = store.load(&store.find(None)?)?;
            return Err(
                CommandError::usage("`plait log` needs a TASK").hint(format!(
                    "run {}'s tasks: {}",
                    state.id,
                    super::task_list(&state)
                )),
            );
        }
    };
    let id = store.find(run).map_err(|e| match e {
        StateError::UnknownRun { .. } => CommandError::from(e).hint("`plait runs` lists them"),
        other => other.into(),
    })?;
    let state = store.load(&id)?;
    let Some(record) = state.record(task).cloned() else {
        let mut hint = format!("its tasks: {}", super::task_list(&state));
        if run.is_none() && store.find(Some(task)).is_ok() {
            let _ = write!(
                hint,
                "; `{task}` is a run: plait log {task} TASK reads one of its tasks"
            );
        }
        return Err(CommandError::usage(format!("run {id} has no task `{task}`")).hint(hint));
    };
    Ok((state, record))
}

/// Prints `task`'s log and what is added to it, until the task has ended or the run is no
/// longer going on.
fn follow(store: &Store, run: &str, task: &TaskRecord) -> Result<(), CommandError> {
    let mut offset = 0;
    loop {
        // Whether it has ended is asked before the last read, so nothing written before
        // the end is missed.
        let ended = ended(store, run, &task.id);
        let (text, next) = logs::read_from(&task.log, offset);
        offset = next;
        if !text.is_empty() {
            out!("{text}")?;
        }
        if ended {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}

/// Whether task `task` of run `run` has ended: its state is final, or its run's plait
/// process is gone (an interrupted or killed run).
fn ended(store: &Store, run: &str, task: &str) -> bool {
    if !store.is_running(run) {
        return true;
    }
    match store.load(run) {
        Ok(state) => state.record(task).is_none_or(|t| t.state.is_final()),
        // A record being replaced is read again at the next poll.
        Err(_) => false,
    }
}
