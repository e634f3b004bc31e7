//! `plait worker`: take tasks of runs spread over many machines.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use tokio::sync::mpsc;

use super::ui::{errln, outln};
use super::CommandError;
use plait::ops::worker::{work, WorkRequest, WorkerWatch};
use plait_core::cancel::Cancel;
use plait_core::state::TaskState;
use plait_run::orchestrator::Update;

/// Take tasks of runs spread over many machines (`plait run --store URL --remote REMOTE`)
/// from the store, run them here and push their branches back
#[derive(Debug, Args)]
#[command(after_help = "\
Each task runs as in a local run: its worktree, its agent in the sandbox, collect, its
checks and review. The worker keeps one clone per remote under --dir and fetches what each
run needs. API keys come from this machine's environment; they never reach the store.
Ctrl-C lets the running tasks end at a boundary, pushes their work and gives them back to
the queue; a worker killed outright loses its tasks when their leases run out, and another
worker goes on from the work it last pushed.

Examples:
  plait worker --store postgres://plait@db/plait -j 8
  PLAIT_STORE=postgres://plait@db/plait plait worker --remote ssh://git@host/repo.git")]
pub struct WorkerArgs {
    /// The PostgreSQL store (or PLAIT_STORE)
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// The git remote as this machine reaches it (default: the one each run was started
    /// with)
    #[arg(long, value_name = "REMOTE")]
    pub remote: Option<String>,
    /// How many tasks run at once (default: the number of CPUs)
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// Where the clones are kept (default: ~/.cache/plait/worker); one worker per
    /// directory
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Seconds a claim holds without a heartbeat before another worker may take the task
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub lease: f64,
    /// Exit once there has been nothing to take for this many seconds
    #[arg(long, value_name = "SECONDS")]
    pub idle_exit: Option<f64>,
    /// Print one JSON event per line on stdout (a task's change of state)
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_worker(args: WorkerArgs) -> Result<(), CommandError> {
    if args.jobs == Some(0) {
        return Err(CommandError::usage("-j must be at least 1"));
    }
    if !(args.lease.is_finite() && args.lease >= 1.0) {
        return Err(CommandError::usage("--lease must be at least 1 second"));
    }
    let idle_exit = match args.idle_exit {
        Some(s) if !(s.is_finite() && s >= 0.0) => {
            return Err(CommandError::usage(
                "--idle-exit must be a number of seconds",
            ))
        }
        s => s.map(Duration::from_secs_f64),
    };
    let Some(store) = super::store_config(args.store.as_deref())? else {
        return Err(CommandError::usage("`plait worker` needs a store")
            .hint("pass --store postgres://user@host/db, or set PLAIT_STORE"));
    };
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get()));
    let request = WorkRequest {
        store,
        remote: args.remote,
        dir: args.dir,
        jobs,
        lease: Duration::from_secs_f64(args.lease),
        idle_exit,
        cwd: std::env::current_dir().unwrap_or_default(),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "worker".to_string()),
        env: plait_stages::context::process_env(),
        program: super::plait_program()?,
    };
    let json = args.json;
    let report = super::runtime()?.block_on(async move {
        let (tx, rx) = mpsc::unbounded_channel();
        let printer = tokio::spawn(show(rx, json));
        let (interrupt, cancel) = Cancel::new();
        let signals = tokio::spawn(super::run::watch_signals(interrupt));
        let watch = WorkerWatch {
            started: Some(Box::new(move |name: &str, dir: &std::path::Path| {
                errln!(
                    "worker {name}: {jobs} task(s) at a time, clones under {}",
                    dir.display()
                );
            })),
            updates: Some(tx),
            cancel,
        };
        let report = work(request, watch).await;
        signals.abort();
        let _ = printer.await;
        report
    })?;
    errln!(
        "worker: {} task(s) recorded, {} given back, {} lost to another worker",
        report.recorded,
        report.released,
        report.lost
    );
    Ok(())
}

/// Prints each task's end (a line on stderr, or every change as JSON on stdout).
async fn show(mut rx: mpsc::UnboundedReceiver<Update>, json: bool) {
    while let Some(update) = rx.recv().await {
        let Update::Task(event) = update else {
            continue;
        };
        if json {
            let line = serde_json::json!({"event": "task", "task": event});
            let _ = outln!("{line}");
            continue;
        }
        if event.state.is_final() || event.state == TaskState::Interrupted {
            let detail = event.detail.map(|d| format!(": {d}")).unwrap_or_default();
            errln!(
                "run {} task {}: {}{detail}",
                event.run,
                event.task,
                event.state.as_str()
            );
        }
    }
}
