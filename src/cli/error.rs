//! How a command fails: `CommandError` (kind, message, cause, hint), how it is printed
//! (the cause chain as "caused by" lines, as jj does), and the one place that maps each
//! library error to a kind and a hint.

use plait::clean::CleanError;
use plait::land::LandError;
use plait::merge::MergeError;
use plait::orchestrator::RunError;
use plait::plan::manager::ManagerError;
use plait::plan::PlanError;
use plait_core::git::RepoError;
use plait_core::state::StateError;
use std::fmt::Write as _;

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

/// A failed command: one line, the error it came from (printed as "caused by" lines), an
/// optional hint, and its kind.
#[derive(Debug)]
pub struct CommandError {
    pub kind: Kind,
    pub message: String,
    pub hint: Option<String>,
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl CommandError {
    pub fn usage(message: impl Into<String>) -> CommandError {
        CommandError {
            kind: Kind::Usage,
            message: message.into(),
            hint: None,
            source: None,
        }
    }

    pub fn internal(message: impl Into<String>) -> CommandError {
        CommandError {
            kind: Kind::Internal,
            message: message.into(),
            hint: None,
            source: None,
        }
    }

    pub fn interrupted(message: impl Into<String>) -> CommandError {
        CommandError {
            kind: Kind::Interrupted,
            message: message.into(),
            hint: None,
            source: None,
        }
    }

    /// The run finished but needs a person; the details were printed already.
    pub fn attention(message: impl Into<String>) -> CommandError {
        CommandError {
            kind: Kind::Attention,
            message: message.into(),
            hint: None,
            source: None,
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
                source: None,
            }
        } else {
            CommandError::internal("cannot write to stdout").because(e)
        }
    }

    /// Keeps `source` as the cause, printed under the message.
    pub fn because(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> CommandError {
        self.source = Some(Box::new(source));
        self
    }

    /// What the user sees on stderr: the message, each cause the message does not already
    /// say, and the hint.
    pub fn render(&self) -> String {
        let mut out = match self.kind {
            Kind::Attention | Kind::Interrupted => self.message.clone(),
            _ => format!("error: {}", self.message),
        };
        let mut cause: Option<&(dyn std::error::Error + 'static)> = match &self.source {
            Some(source) => Some(source.as_ref()),
            None => None,
        };
        while let Some(e) = cause {
            let text = e.to_string();
            if !text.is_empty() && !out.contains(&text) {
                let _ = write!(out, "\ncaused by: {text}");
            }
            cause = e.source();
        }
        if let Some(hint) = &self.hint {
            let _ = write!(out, "\nhint: {hint}");
        }
        out
    }

    /// The exit code of this failure.
    pub fn exit_code(&self) -> u8 {
        match self.kind {
            Kind::Attention => 1,
            Kind::Usage => 2,
            Kind::Internal => 3,
            Kind::Interrupted => 130,
            Kind::BrokenPipe => 0,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> CommandError {
        self.hint = Some(hint.into());
        self
    }
}

// ---- The one place that maps each library error to a kind and a hint. -----------------

impl From<RepoError> for CommandError {
    fn from(e: RepoError) -> Self {
        match &e {
            RepoError::Git(_) => CommandError::internal(e.to_string()).because(e),
            RepoError::NotARepo { .. } => CommandError::usage(e.to_string())
                .hint("run plait inside a git repository, or pass -C DIR")
                .because(e),
            _ => CommandError::usage(e.to_string()).because(e),
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
            PlanError::Config { .. } => {
                Some("`plait config --help` says what a config file may hold")
            }
            _ => None,
        };
        let err = CommandError::usage(e.to_string()).because(e);
        match hint {
            Some(h) => err.hint(h),
            None => err,
        }
    }
}

impl From<StateError> for CommandError {
    fn from(e: StateError) -> Self {
        match &e {
            StateError::Io { .. } => CommandError::internal(e.to_string()).because(e),
            StateError::Corrupt { .. } => CommandError::internal(e.to_string()).because(e).hint(
                "the run's record is plait's own file; restore it, or move its run directory aside to forget the run (its branches stay)",
            ),
            StateError::Locked { .. } => CommandError::usage(e.to_string()).because(e)
                .hint("only one plait run may work on a repository at a time; `plait status` shows the live one"),
            _ => CommandError::usage(e.to_string()).because(e),
        }
    }
}

impl From<RunError> for CommandError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Repo(e) => e.into(),
            RunError::State(e) => e.into(),
            RunError::Store(e) => e.into(),
            RunError::Remote(e) => e.into(),
            RunError::Merge(e) => e.into(),
            RunError::Git(e) => e.into(),
            RunError::Refused(why) => CommandError::usage(why),
            RunError::Panicked { .. } => CommandError::internal(e.to_string()).because(e).hint(
                "this is a bug in plait: the run's record and events.jsonl under its run directory say how far it got; `plait resume` carries it on",
            ),
            RunError::Setup(plait::environment::EnvError::Layer { .. }) => {
                CommandError::internal(e.to_string()).because(e)
            }
            RunError::Setup(setup) => CommandError::attention(setup.to_string()).hint(
                "no task started; `plait log --setup` prints the setup's output; fix the command \
                 or what it needs, then `plait resume` tries it again (or change [setup] and \
                 run the plan anew)",
            ),
            RunError::TakeRun { .. } => CommandError::internal(e.to_string())
                .because(e)
                .hint("the run stays queued; another worker, or this one after the cause is fixed, takes its tasks"),
            other => CommandError::internal(other.to_string()).because(other),
        }
    }
}

impl From<plait::ops::OpsError> for CommandError {
    fn from(e: plait::ops::OpsError) -> Self {
        use plait::ops::OpsError;
        match e {
            OpsError::Refused { message, hint } => {
                let err = CommandError::usage(message);
                match hint {
                    Some(h) => err.hint(h),
                    None => err,
                }
            }
            OpsError::Busy { message, hint } => {
                let err = CommandError::attention(message);
                match hint {
                    Some(h) => err.hint(h),
                    None => err,
                }
            }
            OpsError::Clean(e) => e.into(),
            OpsError::MovedByHand { .. } => CommandError::attention(e.to_string()).hint(
                "move each back to the run's commit (`git branch -f BRANCH COMMIT`, `plait status` names it), or keep its changes to the task's own files",
            ),
            OpsError::Repo(e) => e.into(),
            OpsError::State(e) => e.into(),
            OpsError::Plan(e) => e.into(),
            OpsError::Land(e) => e.into(),
            OpsError::Prepare(e) => e.into(),
            OpsError::Run { what, source } => doing(what, source),
            OpsError::Check { what, source } => doing(&what, source),
            OpsError::Work(e) => {
                CommandError::internal("cannot look up the runs' task work for the hook").because(e)
            }
            OpsError::Store(e) => e.into(),
            OpsError::FetchBranches(e) => CommandError::usage(e.to_string())
                .hint("the run's branches are on the remote it was started with"),
            OpsError::PushBranches(e) => e.into(),
        }
    }
}

/// A failure of the run's pipeline while doing `what`: its own kind and hint, with `what`
/// before its message.
fn doing(what: &str, source: RunError) -> CommandError {
    let mut err = CommandError::from(source);
    err.message = format!("{what}: {}", err.message);
    err
}

impl From<plait_store::pg::PgError> for CommandError {
    fn from(e: plait_store::pg::PgError) -> Self {
        use plait_store::pg::PgError;
        match &e {
            PgError::BadUrl { .. } => CommandError::usage(e.to_string())
                .because(e)
                .hint("a store is a URL such as postgres://user@host/db (--store, or PLAIT_STORE)"),
            PgError::NewerSchema { .. } => CommandError::usage(e.to_string()).because(e),
            PgError::Connect { .. } => CommandError::usage(e.to_string()).because(e),
            PgError::Decode { .. } => CommandError::internal(e.to_string()),
            _ => CommandError::internal(e.to_string()).because(e).hint(
                "the store's server said this; its own log has more, and the run's local record is kept",
            ),
        }
    }
}

impl From<plait_store::remote::RemoteError> for CommandError {
    fn from(e: plait_store::remote::RemoteError) -> Self {
        CommandError::internal(e.to_string())
            .because(e)
            .hint("check that the remote's URL is right and that this machine may fetch from and push to it (git ls-remote URL)")
    }
}

impl From<LandError> for CommandError {
    fn from(e: LandError) -> Self {
        match &e {
            LandError::NoBranch { .. } => CommandError::usage(e.to_string()).because(e),
            _ => CommandError::internal(e.to_string()).because(e),
        }
    }
}

impl From<CleanError> for CommandError {
    fn from(e: CleanError) -> Self {
        match &e {
            CleanError::InProgress { .. } => CommandError::usage(e.to_string()).because(e),
            _ => CommandError::internal(e.to_string()).because(e),
        }
    }
}

impl From<ManagerError> for CommandError {
    fn from(e: ManagerError) -> Self {
        match e {
            ManagerError::Plan(p) => CommandError::from(p),
            ManagerError::NeverValid { .. } => CommandError::attention(e.to_string()).hint(
                "try again, give a more precise --goal, or write the plan by hand (README, \"Plan format\")",
            ),
            ManagerError::Call(_) => CommandError::internal(e.to_string()).because(e),
        }
    }
}

impl From<MergeError> for CommandError {
    fn from(e: MergeError) -> Self {
        CommandError::internal(e.to_string()).because(e)
    }
}

impl From<git2::Error> for CommandError {
    fn from(e: git2::Error) -> Self {
        CommandError::internal(format!("git: {}", e.message())).because(e)
    }
}

impl From<std::io::Error> for CommandError {
    fn from(e: std::io::Error) -> Self {
        CommandError::internal(e.to_string()).because(e)
    }
}

impl From<plait_core::git::GitCliError> for CommandError {
    fn from(e: plait_core::git::GitCliError) -> Self {
        CommandError::internal(e.to_string()).because(e)
    }
}

/// Says what was being done when a library error happened, keeping the kind and hint its
/// mapping above gives it: `fs::write(&p, text).context(format!("cannot write {p}"))?`.
pub trait Context<T> {
    fn context(self, what: impl std::fmt::Display) -> Result<T, CommandError>;
}

impl<T, E: Into<CommandError>> Context<T> for Result<T, E> {
    fn context(self, what: impl std::fmt::Display) -> Result<T, CommandError> {
        self.map_err(|e| {
            let mut err: CommandError = e.into();
            err.message = if err.message.is_empty() {
                what.to_string()
            } else {
                format!("{what}: {}", err.message)
            };
            err
        })
    }
}
