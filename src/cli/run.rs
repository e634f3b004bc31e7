//! `plait run`: run a plan from start to merged branch.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;
use tokio::sync::{mpsc, oneshot};

use super::ui::{err, errln, out, outln};
use super::{progress, CommandError};
use plait::ops;
use plait::ops::running::{Started, Watch};
use plait_core::cancel::Cancel;
use plait_core::state::{RunPhase, RunState};
use plait_stages::context::Context;
use plait_stages::report;

/// Run a plan: a branch and worktree per task, the agents, commits, and the merge
#[derive(Debug, Args)]
#[command(after_help = "\
Prints the run id on stdout (the state as JSON with --json); progress and the summary go
to stderr. Each task gets branch plait/<run>/<task>; the result is plait/<run>/merged.
State lives under <git-common-dir>/plait/runs/<run>/.

With --goal instead of a plan file, a manager model plans first (as `plait plan --goal`
does), shows the tasks and asks before running them (--yes: without asking). The plan is
kept under <git-common-dir>/plait/plans/.

Examples:
  plait run plait.toml -j 8
  RUN=$(plait run plait.toml) && plait land \"$RUN\" --into main
  plait run --goal 'Move every module under src/ from log to tracing' --yes")]
pub struct RunArgs {
    /// The plan file (TOML)
    #[arg(required_unless_present = "goal", conflicts_with = "goal")]
    pub plan: Option<PathBuf>,
    /// Plan with a manager model for this goal, then run
    #[arg(long, value_name = "TEXT")]
    pub goal: Option<String>,
    /// With --goal: run the manager's plan without asking
    #[arg(long, short = 'y', requires = "goal")]
    pub yes: bool,
    #[command(flatten)]
    pub manager: super::manage::ManagerArgs,
    /// How many tasks run at once (default: the number of CPUs)
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// Print one JSON event per line on stdout (a task's change of state, a supervisor
    /// group's step; last, the finished run) instead of the run id
    #[arg(long)]
    pub json: bool,
    /// Put the worktrees under DIR/<run>/ instead of the user's cache
    /// ($XDG_CACHE_HOME/plait/<repository>-<hash>/<run>/)
    #[arg(long, value_name = "DIR")]
    pub worktree_dir: Option<PathBuf>,
    /// Stop starting model requests once the run has cost this many US dollars
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<f64>,
    /// Group the tasks under N supervisors (0: no groups); default: the plan's [groups],
    /// which groups runs of more than 12 tasks
    #[arg(long, value_name = "N")]
    pub groups: Option<usize>,
    /// Write the run's record to this PostgreSQL store as well (or PLAIT_STORE), so
    /// `plait status RUN --store URL` shows it from any machine
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// With --store: spread the tasks over workers (`plait worker`) through this git
    /// remote (a path, ssh or https URL): the base commit is pushed there, the workers push
    /// the task branches back; -j 0 runs no task on this machine
    #[arg(long, value_name = "REMOTE")]
    pub remote: Option<String>,
    /// Validate and resolve the plan and show what the run would do (each task's agent,
    /// files and cone, the checks), creating nothing
    #[arg(long, conflicts_with_all = ["goal", "store", "remote"])]
    pub dry_run: bool,
    /// After the summary, print where the run's time went: each step of the run, and each
    /// step of its tasks summed (also in `plait status RUN --json`, as `timings`)
    #[arg(long)]
    pub timings: bool,
}

pub fn cmd_run(dir: &Path, args: RunArgs) -> Result<(), CommandError> {
    let began = plait_core::state::now_ms();
    if args.jobs == Some(0) && args.remote.is_none() {
        return Err(CommandError::usage("-j must be at least 1")
            .hint("-j 0 (no task on this machine) is for a run spread over workers: --store URL --remote REMOTE"));
    }
    if args.max_cost.is_some_and(|c| c.is_nan() || c <= 0.0) {
        return Err(CommandError::usage(
            "--max-cost must be a positive amount of US dollars",
        ));
    }
    let plan = match &args.plan {
        Some(path) => Some((path.clone(), read_plan(path)?)),
        None => None,
    };
    let ctx = super::context(dir)?;
    let (plan_path, plan_text) = match (plan, &args.goal) {
        (Some(plan), _) => plan,
        (None, Some(goal)) => plan_for_goal(&ctx, goal, &args)?,
        (None, None) => {
            return Err(CommandError::usage(
                "`plait run` needs a plan file or --goal",
            ))
        }
    };
    let plan_text = ops::config::with_config(&ctx, &plan_path, &plan_text)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get()));
    let request = ops::run::RunRequest {
        plan_path: &plan_path,
        plan_text,
        jobs,
        worktree_dir: args.worktree_dir.as_deref(),
        max_cost: args.max_cost,
        groups: args.groups,
        store: None,
        remote: args.remote.as_deref(),
        cwd: std::env::current_dir().unwrap_or_else(|_| dir.to_path_buf()),
    };
    if args.dry_run {
        let dry = ops::run::dry_run(&ctx, &request)?;
        for warning in &dry.warnings {
            errln!("warning: {warning}");
        }
        out!("{}", report::plan_text(&dry.resolved, dry.groups))?;
        outln!(
            "run: {jobs} task(s) at a time; each on branch plait/<run>/<task>, in a worktree under {}",
            dry.worktrees.display()
        )?;
        outln!("environment: {}", dry.environment)?;
        if let Some((pid, run)) = dry.busy {
            errln!("note: run {run} is in progress (plait process {pid}); `plait run` refuses to start until it ends");
        }
        errln!("dry run: the plan is valid; nothing was created");
        return Ok(());
    }
    let request = ops::run::RunRequest {
        store: super::store_config(args.store.as_deref())?,
        ..request
    };
    let said = move |started: &Started| {
        let (id, total) = (&started.state.id, started.state.tasks.len());
        match &started.remote {
            Some(remote) => errln!(
                "run {id}: {total} task(s) queued for workers through {remote}, {jobs} at a time on this machine"
            ),
            None => errln!("run {id}: {total} task(s), {jobs} at a time"),
        }
    };
    let shown = Shown {
        json: args.json,
        timings: args.timings.then_some(began),
        progress_of: Progress::All,
    };
    drive(&ctx, shown, said, |watch| {
        ops::run::run(&ctx, request, watch)
    })
}

/// The text of the plan file at `path`.
pub(super) fn read_plan(path: &Path) -> Result<String, CommandError> {
    std::fs::read_to_string(path)
        .map_err(|e| CommandError::usage(format!("cannot read plan {}: {e}", path.display())))
}

/// Asks the manager for a plan for `goal` and, unless `--yes`, the user whether to run it.
fn plan_for_goal(
    ctx: &Context,
    goal: &str,
    args: &RunArgs,
) -> Result<(PathBuf, String), CommandError> {
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !args.yes && !interactive {
        return Err(CommandError::usage(
            "`plait run --goal` asks before running the manager's plan, and there is no terminal to ask on",
        )
        .hint("pass --yes to run it without asking, or `plait plan --goal ... -o plait.toml` to read it first"));
    }
    let request = args.manager.request(goal, None, None);
    let managed = super::manage::manage(ctx, request)?;
    let (toml, planned, path) = (managed.toml, managed.planned, managed.path);
    err!("{}", super::manage::summary(&planned));
    errln!("the plan: {}", path.display());
    if !args.yes {
        err!("run these {} task(s)? [y/N] ", planned.plan.tasks.len());
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err(CommandError::attention("not run; nothing was created")
                .hint(format!("the plan is kept: plait run {}", path.display())));
        }
    }
    Ok((path, toml))
}

/// How a run going in this command is shown.
pub(super) struct Shown {
    /// One JSON event per line on stdout, instead of the run id.
    pub json: bool,
    /// When the command began, to say where its time went after the summary.
    pub timings: Option<u64>,
    /// Which tasks the progress counts.
    pub progress_of: Progress,
}

/// Which tasks a run's progress counts.
pub(super) enum Progress {
    /// Every task of the run.
    All,
    /// One task, sent back.
    One,
}

/// Runs a use case that makes a run go (`going`, given the watch to follow it by) to its
/// end, printing, once it has started, its warnings and `said`, then its progress and the
/// summary; the exit code says how it went.
pub(super) fn drive<'c, F>(
    ctx: &'c Context,
    shown: Shown,
    said: impl FnOnce(&Started) + Send + 'static,
    going: impl FnOnce(Watch) -> F,
) -> Result<(), CommandError>
where
    F: std::future::Future<Output = Result<RunState, ops::OpsError>> + 'c,
{
    let runtime = super::runtime()?;
    let json = shown.json;
    let state = runtime.block_on(async {
        let (tx, rx) = mpsc::unbounded_channel();
        let (started_tx, started_rx) = oneshot::channel::<Started>();
        let mode = if json {
            progress::Mode::Json
        } else if std::io::stderr().is_terminal() {
            progress::Mode::Live
        } else {
            progress::Mode::Lines
        };
        let one = matches!(shown.progress_of, Progress::One);
        let printer = tokio::spawn(async move {
            // A run that never started says why as the command's error.
            let Ok(started) = started_rx.await else {
                return;
            };
            for warning in &started.warnings {
                errln!("warning: {warning}");
            }
            said(&started);
            let total = if one { 1 } else { started.state.tasks.len() };
            progress::show(rx, total, mode).await;
        });
        let (interrupt, cancel) = Cancel::new();
        let signals = tokio::spawn(watch_signals(interrupt));
        let watch = Watch {
            started: Some(started_tx),
            updates: Some(tx),
            cancel,
        };
        let result = going(watch).await;
        signals.abort();
        let _ = printer.await;
        result
    });
    let state = state?;
    let run_id = state.id.clone();
    errln!();
    err!("{}", report::status_text(&state, false));
    if let Some(hint) = super::status::setup_hint(ctx, &state) {
        errln!("\nhint: {hint}");
    }
    if shown.timings.is_some() {
        errln!();
        err!("{}", report::timings_text(&state, shown.timings));
    }
    let attention = report::attention(&state);
    if json {
        let json = serde_json::json!({
            "event": "finished",
            "run": run_id,
            "phase": state.phase,
            "merge": state.merge,
            "attention": attention,
        });
        outln!("{json}")?;
    } else {
        outln!("{run_id}")?;
    }
    if state.phase == RunPhase::Interrupted {
        return Err(
            CommandError::interrupted(format!("run {run_id} was interrupted")).hint(format!(
                "`plait resume {run_id}` carries on; `plait clean {run_id} --force` throws it away"
            )),
        );
    }
    if plait_stages::land::blockers(&state).is_empty() {
        errln!(
            "\nnext: plait diff {run_id} merged --stat; plait land {run_id} --into {}",
            land_target(&state.base_name)
        );
        Ok(())
    } else {
        Err(CommandError::attention(format!("run {run_id} needs attention (see above)"))
            .hint(format!("plait status {run_id} shows it again; plait diff {run_id} TASK shows a task's work")))
    }
}

fn land_target(base_name: &str) -> &str {
    if base_name == "HEAD" {
        "BRANCH"
    } else {
        base_name
    }
}

/// Fires `interrupt` on the first Ctrl-C or SIGTERM, which stops the run at its next
/// boundary, and exits on the second: the state on disk is whole at every moment.
pub(super) async fn watch_signals(interrupt: tokio::sync::watch::Sender<bool>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    for round in 0..2 {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        if round == 0 {
            // Said to the person, not logged: no timestamp, no colours in a pipe.
            errln!("warning: interrupted: stopping the agents; press Ctrl-C again to exit at once");
            let _ = interrupt.send(true);
        } else {
            std::process::exit(130);
        }
    }
}
