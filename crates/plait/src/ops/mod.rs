//! The use cases, one function each, called alike by the command line and the review
//! page: decide on a task (accept, reject), land a run, check a run or judge a hook's
//! move, sync a run with its store, clean a run or the seed, test the walls (`doctor`). Each opens what it needs,
//! takes the same locks and refusals whoever calls it, and returns a typed report; it
//! prints nothing and reads no environment (what it needs of the environment is passed
//! in).
//! `cli/` parses arguments, calls these and renders their reports; `serve` calls them in
//! its own process.

pub mod check;
pub mod clean;
pub mod decide;
pub mod doctor;
pub mod land;
pub mod resume;
pub mod run;
pub mod send_back;
pub mod sync;

use crate::land::LandError;
use crate::orchestrator::RunError;
use crate::plan::PlanError;
use plait_core::git::RepoError;
use plait_core::state::StateError;

/// Why a use case could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The request cannot be done as things stand; the message says what to do.
    #[error("{message}")]
    Refused {
        message: String,
        hint: Option<String>,
    },
    /// Something else is using what the request needs (a run in progress); try again
    /// when it has ended.
    #[error("{message}")]
    Busy {
        message: String,
        hint: Option<String>,
    },
    /// Task branches moved by hand in ways plait cannot take: no landing.
    #[error("not landing run {run}: task branches moved by hand:{}", list(refused))]
    MovedByHand {
        run: String,
        /// Each branch and why it cannot be taken.
        refused: Vec<(String, String)>,
    },
    #[error(transparent)]
    Repo(#[from] RepoError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Land(#[from] LandError),
    #[error(transparent)]
    Clean(crate::clean::CleanError),
    /// The run's PostgreSQL store could not be reached, or did not do what was asked.
    #[error(transparent)]
    Store(#[from] plait_store::pg::PgError),
    /// The branches of a run spread over workers could not be fetched from its remote.
    #[error(transparent)]
    FetchBranches(plait_store::remote::RemoteError),
    /// The branches of a run spread over workers could not be pushed to its remote.
    #[error(transparent)]
    PushBranches(plait_store::remote::RemoteError),
    /// A run could not be made, or made ready to go on (its lock, record, branches or
    /// worktrees), or the orchestrator refused it.
    #[error(transparent)]
    Prepare(#[from] RunError),
    /// Part of the run's pipeline (a merge again, checks, collecting moved branches).
    #[error("{what}: {source}")]
    Run {
        what: &'static str,
        source: RunError,
    },
    /// Checking a run, a merge in progress or branches against a plan; `what` names which
    /// (`cannot check run 0abc12`).
    #[error("{what}: {source}")]
    Check { what: String, source: RunError },
    /// The runs' task work, by which a hook finds the runs a move concerns, cannot be read.
    #[error(transparent)]
    Work(#[from] crate::check::work::WorkError),
}

/// Whose the failure is, which decides a command's exit code and a request's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// What was asked cannot be done: a bad name, a run in progress, a branch that does
    /// not exist (exit 2; 400).
    Request,
    /// It can be done later, or after a person acts (exit 1; 409).
    Waiting,
    /// plait, git or the file system failed (exit 3; 500).
    Plait,
}

impl OpsError {
    /// Whose the failure is.
    pub fn fault(&self) -> Fault {
        match self {
            OpsError::Refused { .. } | OpsError::Plan(_) => Fault::Request,
            OpsError::Busy { .. } | OpsError::MovedByHand { .. } => Fault::Waiting,
            OpsError::Repo(e) => OpsError::fault_of_repo(e),
            OpsError::State(e) => OpsError::fault_of_state(e),
            OpsError::Land(LandError::NoBranch { .. }) => Fault::Request,
            OpsError::Clean(crate::clean::CleanError::InProgress { .. }) => Fault::Request,
            OpsError::Store(e) if e.is_request() => Fault::Request,
            OpsError::FetchBranches(_) => Fault::Request,
            OpsError::Check {
                source: RunError::Refused(_),
                ..
            }
            | OpsError::Prepare(RunError::Refused(_)) => Fault::Request,
            OpsError::Prepare(RunError::Repo(e)) => OpsError::fault_of_repo(e),
            OpsError::Prepare(RunError::State(e)) => OpsError::fault_of_state(e),
            OpsError::Land(_)
            | OpsError::Clean(_)
            | OpsError::Run { .. }
            | OpsError::Prepare(_)
            | OpsError::Check { .. }
            | OpsError::Work(_)
            | OpsError::Store(_)
            | OpsError::PushBranches(_) => Fault::Plait,
        }
    }

    fn fault_of_repo(e: &RepoError) -> Fault {
        match e {
            RepoError::Git(_) => Fault::Plait,
            _ => Fault::Request,
        }
    }

    fn fault_of_state(e: &StateError) -> Fault {
        match e {
            StateError::Io { .. } | StateError::Corrupt { .. } => Fault::Plait,
            _ => Fault::Request,
        }
    }

    pub(crate) fn refused(message: impl Into<String>, hint: Option<String>) -> OpsError {
        OpsError::Refused {
            message: message.into(),
            hint,
        }
    }
}

fn list(items: &[(String, String)]) -> String {
    items
        .iter()
        .map(|(branch, why)| format!("\n  - {branch} {why}"))
        .collect()
}
