//! How a command fails: `CommandError` (kind, message, cause, hint), how it is printed
//! (the cause chain as "caused by" lines, as jj does), and each library error as a
//! command's failure: its kind from the engine's one classification (`Faulty`), its hint
//! from here.

use plait::clean::CleanError;
use plait::ops::{Fault, Faulty, OpsError};
use plait_agents::manager::ManagerError;
use plait_core::git::{GitCliError, RepoError};
use plait_core::state::StateError;
use plait_plan::PlanError;
use plait_run::orchestrator::RunError;
use plait_stages::land::LandError;
use plait_stages::merge::MergeError;
use plait_store::pg::PgError;
use plait_store::remote::RemoteError;
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

// ---- Each library error: its kind from the engine's one classification of whose the
// failure is (`plait::ops::Faulty`, which the page's HTTP status comes from too), and the
// command line's own words and hints. --------------------------------------------------

impl CommandError {
    /// `e` as a failed command: its kind from whose fault it is, its message, and `e`
    /// kept as the cause.
    fn of<E: Faulty + std::error::Error + Send + Sync + 'static>(e: E) -> CommandError {
        let kind = match e.fault() {
            Fault::Request => Kind::Usage,
            Fault::Waiting => Kind::Attention,
            Fault::Plait => Kind::Internal,
        };
        CommandError {
            kind,
            message: e.to_string(),
            hint: None,
            source: Some(Box::new(e)),
        }
    }

    /// The same failure, said in the command line's words.
    fn saying(mut self, message: impl Into<String>) -> CommandError {
        self.message = message.into();
        self
    }

    fn hint_if(self, hint: Option<impl Into<String>>) -> CommandError {
        match hint {
            Some(h) => self.hint(h),
            None => self,
        }
    }
}

impl From<RepoError> for CommandError {
    fn from(e: RepoError) -> Self {
        let hint = matches!(e, RepoError::NotARepo { .. })
            .then_some("run plait inside a git repository, or pass -C DIR");
        CommandError::of(e).hint_if(hint)
    }
}

impl From<PlanError> for CommandError {
    fn from(e: PlanError) -> Self {
        let hint = match &e {
            PlanError::Parse { .. } => {
                Some("see docs/src/plan-format.md for the keys a plan may hold")
            }
            PlanError::BaseNotFound { .. } => {
                Some("set `base` to an existing branch or commit, or leave it out for HEAD")
            }
            PlanError::Config { .. } => {
                Some("`plait config --help` says what a config file may hold")
            }
            _ => None,
        };
        CommandError::of(e).hint_if(hint)
    }
}

impl From<StateError> for CommandError {
    fn from(e: StateError) -> Self {
        let hint = match &e {
            StateError::Corrupt { .. } => Some("the run's record is plait's own file; restore it, or move its run directory aside to forget the run (its branches stay)"),
            StateError::Locked { .. } => Some("only one plait run may work on a repository at a time; `plait status` shows the live one"),
            _ => None,
        };
        CommandError::of(e).hint_if(hint)
    }
}

impl From<RunError> for CommandError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Repo(e) => e.into(),
            RunError::State(e) => e.into(),
            RunError::Store(e) => e.into(),
            RunError::Remote(e) => e.into(),
            RunError::Panicked { .. } => CommandError::of(e).hint(
                "this is a bug in plait: the run's record and events.jsonl under its run directory say how far it got; `plait resume` carries it on",
            ),
            RunError::Setup(plait_trees::environment::EnvError::Layer { .. }) => CommandError::of(e),
            RunError::Setup(_) => CommandError::of(e).hint(
                "no task started; `plait log --setup` prints the setup's output; fix the command \
                 or what it needs, then `plait resume` tries it again (or change [setup] and \
                 run the plan anew)",
            ),
            RunError::TakeRun { .. } => CommandError::of(e)
                .hint("the run stays queued; another worker, or this one after the cause is fixed, takes its tasks"),
            other => CommandError::of(other),
        }
    }
}

impl From<OpsError> for CommandError {
    fn from(e: OpsError) -> Self {
        match e {
            OpsError::Repo(e) => e.into(),
            OpsError::State(e) => e.into(),
            OpsError::Plan(e) => e.into(),
            OpsError::Land(e) => e.into(),
            OpsError::Clean(e) => e.into(),
            OpsError::Store(e) => e.into(),
            OpsError::Manager(e) => e.into(),
            OpsError::Prepare(e) => e.into(),
            OpsError::PushBranches(e) => e.into(),
            OpsError::Run { what, source } => doing(what, source),
            OpsError::Check { what, source } => doing(&what, source),
            e => ops_words(e),
        }
    }
}

/// A use case's own refusal, in the command line's words.
fn ops_words(e: OpsError) -> CommandError {
    let (message, hint): (Option<String>, Option<String>) = match &e {
        OpsError::Finished { run } => (None, Some(format!("`plait status {run}` shows it"))),
        OpsError::NoTask { run, .. } | OpsError::Group { run, .. } => {
            (None, Some(format!("`plait status {run}` lists them")))
        }
        OpsError::NotGoing { run, doing, .. } => (
            None,
            Some(if *doing == "tell a task" {
                format!("`plait send-back {run} TASK -m TEXT` gives a finished task one more round, told that")
            } else {
                format!("`plait status {run}` shows where it is")
            }),
        ),
        OpsError::AttemptNotEnded { run, .. } => (
            None,
            Some(format!("`plait status {run}` shows where its attempts are")),
        ),
        OpsError::InUse { .. } => (
            None,
            Some("wait for it to end, or stop it with Ctrl-C, then clean again".into()),
        ),
        OpsError::NotInStore { .. } => (
            None,
            Some("`plait status RUN --store URL` shows a run the store has".into()),
        ),
        OpsError::RemoteWithoutStore => (
            Some("--remote spreads a run over workers through a store".into()),
            Some("pass --store postgres://user@host/db as well, or set PLAIT_STORE".into()),
        ),
        OpsError::WorktreeDir { dir, source } => (
            Some(format!("--worktree-dir {}: {source}", dir.display())),
            None,
        ),
        OpsError::PublishBase { remote, source } => (
            Some(format!("--remote {remote}: {source}")),
            Some("the remote is any URL git can push to (a bare repository's path, ssh or https); nothing was created".into()),
        ),
        OpsError::Detached => (
            Some("HEAD is not on a branch; name the target with --into BRANCH".into()),
            None,
        ),
        OpsError::NoBranches => (
            Some("--plan needs at least one --branch [TASK=]BRANCH".into()),
            None,
        ),
        OpsError::UnknownTask { spec, plan, task } => (
            Some(format!(
                "--branch {spec}: plan {} has no task `{task}`; write it as TASK=BRANCH",
                plan.display()
            )),
            None,
        ),
        OpsError::NoBranch { spec, branch } => {
            (Some(format!("--branch {spec}: no branch `{branch}`")), None)
        }
        OpsError::NoSharedHistory => (
            Some("the branches share no history with the target; pass --base REV".into()),
            None,
        ),
        OpsError::Manage { what, message } => (
            Some(match *what {
                "goal" => "--goal is empty".to_string(),
                "max-tasks" => "--max-tasks must be at least 1".to_string(),
                "include" => format!("--include: {message}"),
                _ => format!("the manager: {message}"),
            }),
            None,
        ),
        OpsError::UnknownManager { name } => (
            Some(format!(
                "--manager `{name}` is neither a built-in model provider nor claude-code"
            )),
            Some("use --manager anthropic, --manager openai (ANTHROPIC_BASE_URL / OPENAI_BASE_URL point them elsewhere) or --manager claude-code".into()),
        ),
        OpsError::HookInTheWay { .. } => (Some(format!("{e}; move one of them away first")), None),
        OpsError::MovedByHand { .. } => (
            None,
            Some("move each back to the run's commit (`git branch -f BRANCH COMMIT`, `plait status` names it), or keep its changes to the task's own files".into()),
        ),
        OpsError::FetchBranches(_) => (
            None,
            Some("the run's branches are on the remote it was started with".into()),
        ),
        OpsError::NoWorkerDir => (None, Some("pass --dir DIR".into())),
        OpsError::Work(_) => (
            Some("cannot look up the runs' task work for the hook".into()),
            None,
        ),
        _ => (None, None),
    };
    let err = CommandError::of(e);
    let err = match message {
        Some(message) => err.saying(message),
        None => err,
    };
    err.hint_if(hint)
}

/// A failure of the run's pipeline while doing `what`: its own kind and hint, with `what`
/// before its message.
fn doing(what: &str, source: RunError) -> CommandError {
    let mut err = CommandError::from(source);
    err.message = format!("{what}: {}", err.message);
    err
}

impl From<PgError> for CommandError {
    fn from(e: PgError) -> Self {
        let hint = match &e {
            PgError::BadUrl { .. } => {
                Some("a store is a URL such as postgres://user@host/db (--store, or PLAIT_STORE)")
            }
            PgError::NewerSchema { .. } | PgError::Connect { .. } | PgError::Decode { .. } => None,
            _ => Some("the store's server said this; its own log has more, and the run's local record is kept"),
        };
        CommandError::of(e).hint_if(hint)
    }
}

impl From<RemoteError> for CommandError {
    fn from(e: RemoteError) -> Self {
        CommandError::of(e).hint("check that the remote's URL is right and that this machine may fetch from and push to it (git ls-remote URL)")
    }
}

impl From<LandError> for CommandError {
    fn from(e: LandError) -> Self {
        CommandError::of(e)
    }
}

impl From<CleanError> for CommandError {
    fn from(e: CleanError) -> Self {
        CommandError::of(e)
    }
}

impl From<ManagerError> for CommandError {
    fn from(e: ManagerError) -> Self {
        match e {
            ManagerError::Plan(p) => CommandError::from(p),
            ManagerError::NeverValid { .. } => CommandError::of(e).hint(
                "try again, give a more precise --goal, or write the plan by hand (docs/src/plan-format.md)",
            ),
            ManagerError::Call(_) => CommandError::of(e),
        }
    }
}

impl From<MergeError> for CommandError {
    fn from(e: MergeError) -> Self {
        CommandError::of(e)
    }
}

impl From<git2::Error> for CommandError {
    fn from(e: git2::Error) -> Self {
        let message = format!("git: {}", e.message());
        CommandError::of(e).saying(message)
    }
}

impl From<std::io::Error> for CommandError {
    fn from(e: std::io::Error) -> Self {
        CommandError::of(e)
    }
}

impl From<GitCliError> for CommandError {
    fn from(e: GitCliError) -> Self {
        CommandError::of(e)
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
