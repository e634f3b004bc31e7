//! The command line: the only part of plait that prints, reads the environment and picks
//! exit codes. Each command has its own file with an `*Args` struct (its doc comment is the
//! help) and a `cmd_*` handler. Exit codes: 0 all good; 1 finished but something needs
//! attention; 2 bad usage, configuration or plan; 3 plait itself failed; 130 interrupted.

mod check;
mod clean;
mod completions;
mod config;
mod diff;
mod doctor;
mod error;
mod guard;
mod hook;
mod land;
mod log;
mod manage;
mod plan;
mod progress;
mod resume;
mod review;
mod run;
mod run_in_view;
mod runs;
mod serve;
mod shared;
#[cfg(test)]
mod snippets;
mod status;
mod steer;
mod ui;
mod worker;

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use plait_stages::context::{process_env, Context};
use ui::errln;

/// Run many coding agents in parallel in one git repository, each on its own branch and
/// worktree holding only the files it owns; merge their work and land it when it is clean.
#[derive(Debug, Parser)]
#[command(name = "plait", version, propagate_version = true)]
#[command(after_help = "\
Examples:
  plait plan --split 'file:lib/*.py' --prompt 'Format {path}' --exec 'ruff format \"$PLAIT_FILE\"' -o plait.toml
  plait run plait.toml -j 8
  plait status
  plait diff RUN TASK --stat
  plait land RUN --into main
  plait clean RUN

Exit codes: 0 all good; 1 finished but needs attention (failed tasks, violations,
conflicts, a refused landing); 2 bad usage, configuration or plan; 3 plait itself failed;
130 the run was interrupted (Ctrl-C or SIGTERM).
Set PLAIT_LOG (e.g. PLAIT_LOG=debug) for diagnostics on stderr.")]
pub struct Cli {
    /// Run as if started in DIR (like git -C)
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Plan(plan::PlanArgs),
    Run(run::RunArgs),
    Resume(resume::ResumeArgs),
    Status(status::StatusArgs),
    Diff(diff::DiffArgs),
    Log(log::LogArgs),
    Review(review::ReviewArgs),
    Accept(review::AcceptArgs),
    Reject(review::RejectArgs),
    SendBack(review::SendBackArgs),
    Tell(steer::TellArgs),
    Stop(steer::StopArgs),
    Land(land::LandArgs),
    Check(check::CheckArgs),
    Hook(hook::HookArgs),
    Guard(guard::GuardArgs),
    RunInView(run_in_view::RunInViewArgs),
    Clean(clean::CleanArgs),
    Runs(runs::RunsArgs),
    Serve(serve::ServeArgs),
    Worker(worker::WorkerArgs),
    Completions(completions::CompletionsArgs),
    Config(config::ConfigArgs),
    Doctor(doctor::DoctorArgs),
}

pub use error::{CommandError, Kind};

/// Parses the command line, runs the command and maps the result to an exit code.
pub fn main() -> ExitCode {
    // A shell asking for completions is answered before anything else runs.
    completions::complete_if_asked();
    let cli = Cli::parse();
    init_logging();
    let dir = match start_dir(cli.dir.as_deref()) {
        Ok(dir) => dir,
        Err(e) => return failed(e),
    };
    let result = match cli.command {
        Command::Plan(args) => plan::cmd_plan(&dir, args),
        Command::Run(args) => run::cmd_run(&dir, args),
        Command::Resume(args) => resume::cmd_resume(&dir, args),
        Command::Status(args) => status::cmd_status(&dir, args),
        Command::Diff(args) => diff::cmd_diff(&dir, args),
        Command::Log(args) => log::cmd_log(&dir, args),
        Command::Review(args) => review::cmd_review(&dir, args),
        Command::Accept(args) => review::cmd_accept(&dir, args),
        Command::Reject(args) => review::cmd_reject(&dir, args),
        Command::SendBack(args) => review::cmd_send_back(&dir, args),
        Command::Tell(args) => steer::cmd_tell(&dir, args),
        Command::Stop(args) => steer::cmd_stop(&dir, args),
        Command::Land(args) => land::cmd_land(&dir, args),
        Command::Check(args) => check::cmd_check(&dir, args),
        Command::Hook(args) => hook::cmd_hook(&dir, args),
        Command::Guard(args) => return guard::cmd_guard(args),
        Command::RunInView(args) => return run_in_view::cmd_run_in_view(args),
        Command::Clean(args) => clean::cmd_clean(&dir, args),
        Command::Runs(args) => runs::cmd_runs(&dir, args),
        Command::Serve(args) => serve::cmd_serve(&dir, args),
        Command::Worker(args) => worker::cmd_worker(args),
        Command::Completions(args) => completions::cmd_completions(args),
        Command::Config(args) => config::cmd_config(&dir, args),
        Command::Doctor(args) => doctor::cmd_doctor(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failed(e),
    }
}

/// Says why a command failed (a closed stdout is no failure) and gives its exit code.
fn failed(e: CommandError) -> ExitCode {
    if e.kind == Kind::BrokenPipe {
        return ExitCode::SUCCESS;
    }
    errln!("{}", e.render());
    ExitCode::from(e.exit_code())
}

/// The directory a command starts in: `-C DIR`, which must be a directory, or `.`.
fn start_dir(dir: Option<&Path>) -> Result<PathBuf, CommandError> {
    let Some(dir) = dir else {
        return Ok(PathBuf::from("."));
    };
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(dir.to_path_buf()),
        Ok(_) => Err(CommandError::usage(format!(
            "-C {}: not a directory",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CommandError::usage(format!(
            "-C {}: the directory does not exist",
            dir.display()
        ))),
        Err(e) => Err(CommandError::usage(format!("-C {}: {e}", dir.display()))),
    }
}

/// Diagnostics on stderr, as `PLAIT_LOG` asks (default: warnings).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PLAIT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colours only for a person at a terminal who has not asked for none.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}

/// This plait binary, which its tasks run (`plait guard`, `plait run-in-view`, the probe of
/// `plait doctor`).
fn plait_program() -> Result<PathBuf, CommandError> {
    std::env::current_exe()
        .map_err(|e| CommandError::internal("cannot find plait's own binary").because(e))
}

/// The async runtime a command runs its work on.
fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError::internal("cannot start the async runtime").because(e))
}

/// The repository `dir` is in, opened once for the command, with this process's
/// environment and this plait binary for the agents' hooks.
pub(super) fn context(dir: &Path) -> Result<Context, CommandError> {
    Ok(Context::open(dir, process_env(), plait_program()?)?)
}

/// The PostgreSQL store `--store URL` (or `PLAIT_STORE`) names, with libpq's variables for
/// what the URL leaves out; checked by connecting once (and migrating), so a wrong URL
/// stops a command before it creates anything. `None` without either.
pub fn store_config(url: Option<&str>) -> Result<Option<tokio_postgres::Config>, CommandError> {
    let from_env = std::env::var("PLAIT_STORE")
        .ok()
        .filter(|u| !u.trim().is_empty());
    let Some(url) = url.map(str::to_string).or(from_env) else {
        return Ok(None);
    };
    let config = plait_store::pg::config(&url, &|name| std::env::var(name).ok())?;
    runtime()?
        .block_on(plait_store::pg::PgStore::connect(
            &config,
            std::time::Duration::from_secs(10),
        ))
        .map_err(|e| {
            CommandError::usage(e.to_string())
                .hint("the store is --store URL or PLAIT_STORE, e.g. postgres://user@host/db")
                .because(e)
        })?;
    Ok(Some(config))
}

/// The ids of `state`'s tasks, at most 20 of them.
pub(super) fn task_list(state: &plait_core::state::RunState) -> String {
    const SHOWN: usize = 20;
    let ids: Vec<&str> = state.tasks.iter().map(|t| t.id.as_str()).collect();
    let mut list = ids[..ids.len().min(SHOWN)].join(", ");
    if ids.len() > SHOWN {
        let _ = write!(
            list,
            " and {} more (`plait status` lists them)",
            ids.len() - SHOWN
        );
    }
    list
}
