//! Whose a failure is: the one classification of every error a use case can meet, from
//! which the command line takes its exit code and the page its HTTP status.

use plait_core::git::{GitCliError, RepoError};
use plait_core::state::StateError;
use plait_store::pg::PgError;
use plait_store::remote::RemoteError;

use super::OpsError;
use crate::clean::CleanError;
use plait_agents::manager::ManagerError;
use plait_plan::PlanError;
use plait_run::orchestrator::RunError;
use plait_stages::land::LandError;
use plait_stages::merge::MergeError;
use plait_trees::environment::EnvError;

/// Whose a failure is, which decides a command's exit code and a request's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// What was asked cannot be done: a bad name, plan, flag or configuration (exit 2;
    /// 400).
    Request,
    /// It can be done later, or after a person acts: a run in progress, a refusal to
    /// read, a setup that failed (exit 1; 409).
    Waiting,
    /// plait, git or the file system failed (exit 3; 500).
    Plait,
}

/// An error that knows whose failure it is.
pub trait Faulty {
    /// Whose the failure is.
    fn fault(&self) -> Fault;
}

impl Faulty for RepoError {
    fn fault(&self) -> Fault {
        match self {
            RepoError::Git(_) => Fault::Plait,
            _ => Fault::Request,
        }
    }
}

impl Faulty for StateError {
    fn fault(&self) -> Fault {
        match self {
            StateError::Io { .. } | StateError::Corrupt { .. } => Fault::Plait,
            _ => Fault::Request,
        }
    }
}

impl Faulty for PlanError {
    fn fault(&self) -> Fault {
        Fault::Request
    }
}

impl Faulty for PgError {
    fn fault(&self) -> Fault {
        if self.is_request() {
            Fault::Request
        } else {
            Fault::Plait
        }
    }
}

impl Faulty for RemoteError {
    fn fault(&self) -> Fault {
        Fault::Plait
    }
}

impl Faulty for LandError {
    fn fault(&self) -> Fault {
        match self {
            LandError::NoBranch { .. } => Fault::Request,
            _ => Fault::Plait,
        }
    }
}

impl Faulty for CleanError {
    fn fault(&self) -> Fault {
        match self {
            CleanError::InProgress { .. } => Fault::Request,
            _ => Fault::Plait,
        }
    }
}

impl Faulty for ManagerError {
    fn fault(&self) -> Fault {
        match self {
            ManagerError::Plan(e) => e.fault(),
            ManagerError::NeverValid { .. } => Fault::Waiting,
            ManagerError::Call(_) => Fault::Plait,
        }
    }
}

impl Faulty for MergeError {
    fn fault(&self) -> Fault {
        Fault::Plait
    }
}

impl Faulty for git2::Error {
    fn fault(&self) -> Fault {
        Fault::Plait
    }
}

impl Faulty for std::io::Error {
    fn fault(&self) -> Fault {
        Fault::Plait
    }
}

impl Faulty for GitCliError {
    fn fault(&self) -> Fault {
        Fault::Plait
    }
}

impl Faulty for RunError {
    fn fault(&self) -> Fault {
        match self {
            RunError::Repo(e) => e.fault(),
            RunError::State(e) => e.fault(),
            RunError::Store(e) => e.fault(),
            RunError::Remote(e) => e.fault(),
            RunError::Refused(_) => Fault::Request,
            // A `[setup]` command that failed is the project's to fix; a base layer that
            // could not be written is plait's.
            RunError::Setup(EnvError::Layer { .. }) => Fault::Plait,
            RunError::Setup(_) => Fault::Waiting,
            _ => Fault::Plait,
        }
    }
}

impl Faulty for OpsError {
    fn fault(&self) -> Fault {
        match self {
            OpsError::Finished { .. }
            | OpsError::Going { .. }
            | OpsError::NoTask { .. }
            | OpsError::AttemptNotEnded { .. }
            | OpsError::NotGoing { .. }
            | OpsError::Steer(_)
            | OpsError::Group { .. }
            | OpsError::NotInStore { .. }
            | OpsError::RemoteWithoutStore
            | OpsError::WorktreeDir { .. }
            | OpsError::PublishBase { .. }
            | OpsError::FetchBranches(_)
            | OpsError::Detached
            | OpsError::NoBranches
            | OpsError::UnknownTask { .. }
            | OpsError::NoBranch { .. }
            | OpsError::BadBase { .. }
            | OpsError::NoTarget { .. }
            | OpsError::NoSharedHistory
            | OpsError::HookInTheWay { .. }
            | OpsError::UnknownHook { .. }
            | OpsError::Manage { .. }
            | OpsError::UnknownManager { .. }
            | OpsError::ConfigUnreadable { .. }
            | OpsError::NoWorkerDir
            | OpsError::NotMerged { .. } => Fault::Request,
            OpsError::InProgress { .. }
            | OpsError::NotFinished { .. }
            | OpsError::InUse { .. }
            | OpsError::MovedByHand { .. } => Fault::Waiting,
            OpsError::Repo(e) => e.fault(),
            OpsError::State(e) => e.fault(),
            OpsError::Plan(e) => e.fault(),
            OpsError::Land(e) => e.fault(),
            OpsError::Clean(e) => e.fault(),
            OpsError::Store(e) => e.fault(),
            OpsError::Manager(e) => e.fault(),
            OpsError::PushBranches(e) => e.fault(),
            OpsError::Prepare(e) => e.fault(),
            OpsError::Run { source, .. } | OpsError::Check { source, .. } => source.fault(),
            OpsError::Work(_)
            | OpsError::Io { .. }
            | OpsError::Git { .. }
            | OpsError::Doctor(_) => Fault::Plait,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_failure_is_whoever_s_the_inner_one_is() {
        let not_a_repo = || RepoError::NotARepo {
            path: "/nowhere".into(),
        };
        assert_eq!(OpsError::Repo(not_a_repo()).fault(), Fault::Request);
        assert_eq!(
            OpsError::Prepare(RunError::Repo(not_a_repo())).fault(),
            Fault::Request
        );
        assert_eq!(
            OpsError::Check {
                what: "cannot check run 0abc12".into(),
                source: RunError::Refused("no".into()),
            }
            .fault(),
            Fault::Request
        );
        let git = || git2::Error::from_str("broken");
        assert_eq!(OpsError::Repo(RepoError::Git(git())).fault(), Fault::Plait);
        assert_eq!(
            OpsError::Prepare(RunError::Git(git())).fault(),
            Fault::Plait
        );
    }

    #[test]
    fn a_run_in_progress_waits_and_a_finished_one_has_nothing_to_resume() {
        let run = || "0abc12".to_string();
        assert_eq!(
            OpsError::InProgress {
                run: run(),
                doing: "decide"
            }
            .fault(),
            Fault::Waiting
        );
        assert_eq!(OpsError::Finished { run: run() }.fault(), Fault::Request);
        assert_eq!(OpsError::NotFinished { run: run() }.fault(), Fault::Waiting);
    }

    #[test]
    fn a_setup_that_failed_waits_for_the_project_and_a_layer_not_written_is_plait_s() {
        let setup = plait_trees::environment::EnvError::Setup {
            command: "npm ci".into(),
            outcome: "exit 1".into(),
            log: "/tmp/setup.log".into(),
        };
        assert_eq!(RunError::Setup(setup).fault(), Fault::Waiting);
        let layer = plait_trees::environment::EnvError::Layer {
            base: "0abc12".into(),
            why: "disk full".into(),
        };
        assert_eq!(RunError::Setup(layer).fault(), Fault::Plait);
    }
}
