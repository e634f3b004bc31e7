//! A run going in this process, as `run`, `resume` and `send_back` make it go: what the
//! caller is told when it starts ([`Started`]) and as it goes ([`Watch`]), and the run
//! carried to its end.

use tokio::sync::{mpsc, oneshot};

use crate::orchestrator::{self, Prepared, Update};
use plait_core::cancel::Cancel;
use plait_core::state::RunState;

use super::OpsError;

/// How the caller follows a run and stops it.
pub struct Watch {
    /// Told once, when the run has been made (or made ready to go on) and before its
    /// first task starts.
    pub started: Option<oneshot::Sender<Started>>,
    /// Every change of a task's state and every step of a group or culprit search.
    pub updates: Option<mpsc::UnboundedSender<Update>>,
    /// The run stops at its next boundary when this fires.
    pub cancel: Cancel,
}

impl Watch {
    /// Followed by no one, stopped by `cancel`.
    pub fn quiet(cancel: Cancel) -> Watch {
        Watch {
            started: None,
            updates: None,
            cancel,
        }
    }
}

/// A run made, or made ready to go on, just before it goes.
#[derive(Debug)]
pub struct Started {
    /// The run's record as it goes (its id, its tasks and how far each got).
    pub state: RunState,
    /// The remote its tasks are queued through, for a run spread over workers.
    pub remote: Option<String>,
    /// What the user should be warned of before it goes: the plan's, the sandbox's, the
    /// worktrees' place.
    pub warnings: Vec<String>,
}

/// Carries `prepared` to its end, telling `watch` it started: the run's record at the
/// end.
pub(super) async fn go(
    prepared: Prepared,
    remote: Option<String>,
    warnings: Vec<String>,
    watch: Watch,
) -> Result<RunState, OpsError> {
    if let Some(started) = watch.started {
        let _ = started.send(Started {
            state: prepared.state().clone(),
            remote,
            warnings,
        });
    }
    Ok(orchestrator::execute(prepared, watch.updates, watch.cancel).await?)
}
