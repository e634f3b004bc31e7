//! The command line: the only part of plait that prints, reads the environment and picks
//! exit codes. Each command has its own file with an `*Args` struct (its doc comment is the
//! help) and a `cmd_*` handler. Exit codes: 0 all good; 1 finished but something needs
//! attention; 2 bad usage, configuration or plan; 3 plait itself failed; 130 interrupted.

mod check;
mod clean;
mod diff;
mod guard;
mod hook;
mod land;
mod manage;
mod plan;
mod progress;
mod resume;
mod review;
mod run;
mod runs;
mod status;
mod ui;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::git::{self, RepoError};
use crate::plan::PlanError;
use crate::state::{StateError, Store};
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
    Review(review::ReviewArgs),
    Accept(review::AcceptArgs),
    Reject(review::RejectArgs),
    Land(land::LandArgs),
    Check(check::CheckArgs),
    Hook(hook::HookArgs),
    Guard(guard::GuardArgs),
    Clean(clean::CleanArgs),
    Runs(runs::RunsArgs),
}

/// How a command failed, which decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Finished, but something needs attention (exit 1).
    Attention,
    /// Bad usage, configuration or plan (exit 2).
    Usage,
    /// plait itself could not proceed (exit 3).
    Internal,
    /// The run was stopped by Ctrl-C or SIGTERM (exit 130).
    Interrupted,
    /// stdout was closed under plait (`| head`): a normal end, quiet, exit 0.
    BrokenPipe,
}

/// A failed command: one line, an optional hint, and its kind.
#[derive(Debug)]
pub struct CommandError {
    pub kind: Kind,
    pub message: String,
    pub hint: Option<String>,
}

impl CommandError {
    pub fn usage(message: impl Into<String>) -> CommandError {
        CommandError {
            kind: Kind::Usage,
            message: message.into(),
            hint: None,
        }
    }

    pub fn internal(message: impl Into<String>) -> CommandError {
        CommandError {
            kind: Kind::Internal,
            message: message.into(),
            hint: None,
        }
    }

    pub fn interrupted(message: impl Into<String>) -> CommandError {
        CommandError {
            kind: Kind::Interrupted,
            message: message.into(),
            hint: None,
        }
    }

    /// The run finished but needs a person; the details were printed already.
    pub fn attention(message: impl Into<String>) -> CommandError {
        CommandError {
            kind: Kind::Attention,
            message: message.into(),
            hint: None,
        }
    }

    /// A failed write to stdout: a closed pipe ends the command quietly, anything else is
    /// plait's failure.
    pub fn from_write(e: std::io::Error) -> CommandError {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CommandError {
                kind: Kind::BrokenPipe,
                message: String::new(),
                hint: None,
            }
        } else {
            CommandError::internal(format!("cannot write to stdout: {e}"))
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> CommandError {
        self.hint = Some(hint.into());
        self
    }
}

impl From<RepoError> for CommandError {
    fn from(e: RepoError) -> Self {
        match e {
            RepoError::Git(_) => CommandError::internal(e.to_string()),
            RepoError::NotARepo { .. } => CommandError::usage(e.to_string())
                .hint("run plait inside a git repository, or pass -C DIR"),
            _ => CommandError::usage(e.to_string()),
        }
    }
}

impl From<PlanError> for CommandError {
    fn from(e: PlanError) -> Self {
        let hint = match &e {
            PlanError::Parse { .. } => {
                Some("see README.md, \"Plan format\", for the keys a plan may hold")
            }
            PlanError::BaseNotFound { .. } => {
                Some("set `base` to an existing branch or commit, or leave it out for HEAD")
            }
            _ => None,
        };
        let err = CommandError::usage(e.to_string());
        match hint {
            Some(h) => err.hint(h),
            None => err,
        }
    }
}

impl From<StateError> for CommandError {
    fn from(e: StateError) -> Self {
        match e {
            StateError::Io { .. } => CommandError::internal(e.to_string()),
            StateError::Corrupt { .. } => CommandError::internal(e.to_string()).hint(
                "the run's record is plait's own file; restore it, or move its run directory aside to forget the run (its branches stay)",
            ),
            StateError::Locked { .. } => CommandError::usage(e.to_string())
                .hint("only one plait run may work on a repository at a time; `plait status` shows the live one"),
            _ => CommandError::usage(e.to_string()),
        }
    }
}

/// Parses the command line, runs the command and maps the result to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let dir = cli.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let result = match cli.command {
        Command::Plan(args) => plan::cmd_plan(&dir, args),
        Command::Run(args) => run::cmd_run(&dir, args),
        Command::Resume(args) => resume::cmd_resume(&dir, args),
        Command::Status(args) => status::cmd_status(&dir, args),
        Command::Diff(args) => diff::cmd_diff(&dir, args),
        Command::Review(args) => review::cmd_review(&dir, args),
        Command::Accept(args) => review::cmd_accept(&dir, args),
        Command::Reject(args) => review::cmd_reject(&dir, args),
        Command::Land(args) => land::cmd_land(&dir, args),
        Command::Check(args) => check::cmd_check(&dir, args),
        Command::Hook(args) => hook::cmd_hook(&dir, args),
        Command::Guard(args) => return guard::cmd_guard(args),
        Command::Clean(args) => clean::cmd_clean(&dir, args),
        Command::Runs(args) => runs::cmd_runs(&dir, args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind == Kind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            match e.kind {
                Kind::Attention | Kind::Interrupted => errln!("{}", e.message),
                _ => errln!("error: {}", e.message),
            }
            if let Some(hint) = e.hint {
                errln!("hint: {hint}");
            }
            ExitCode::from(match e.kind {
                Kind::Attention => 1,
                Kind::Usage => 2,
                Kind::Internal => 3,
                Kind::Interrupted => 130,
                Kind::BrokenPipe => 0,
            })
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PLAIT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// This plait binary, which agents' hooks run (`plait guard`).
fn plait_program() -> Result<PathBuf, CommandError> {
    std::env::current_exe()
        .map_err(|e| CommandError::internal(format!("cannot find plait's own binary: {e}")))
}

/// Opens the repository at `dir` and its plait store.
fn open_store(dir: &Path) -> Result<(git2::Repository, Store), CommandError> {
    let repo = git::open(dir)?;
    let store = Store::new(git::plait_dir(&repo));
    Ok((repo, store))
}

/// The tracked files of `--base` (default HEAD).
fn base_files(
    repo: &git2::Repository,
    base: Option<&str>,
) -> Result<Vec<crate::git::TreeFile>, CommandError> {
    let base_name = base.unwrap_or("HEAD");
    let base = repo
        .revparse_single(base_name)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| {
            CommandError::usage(format!(
                "--base `{base_name}` is not a branch or commit in this repository"
            ))
        })?;
    base.tree()
        .and_then(|t| git::flatten_tree(&t))
        .map_err(|e| CommandError::internal(e.to_string()))
}
