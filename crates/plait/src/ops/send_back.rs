//! Sending a finished task back for one more round with a person's comment: the use case
//! behind `plait send-back` and the review page's "send back". [`prepare`] makes the
//! refusals and takes the repository lock; the caller then runs the round and the merge
//! after it with [`orchestrator::execute`](crate::orchestrator::execute), showing its
//! progress its own way (the command prints it, the page follows the run's events).

use std::path::{Path, PathBuf};

use crate::orchestrator::{self, Prepared};
use plait_core::state::Store;

use super::OpsError;

/// What a send-back is asked.
pub struct SendBackRequest<'a> {
    /// The repository.
    pub dir: &'a Path,
    /// The run, as the user named it (a prefix of its id will do).
    pub run: &'a str,
    /// The task that goes back.
    pub task: &'a str,
    /// What the agent should change.
    pub comment: &'a str,
    /// The environment the kept plan resolves its variables from.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The program the agents' hooks call back (this plait).
    pub plait: PathBuf,
}

/// A send-back ready to run.
pub struct SendBack {
    /// The run's full id.
    pub run: String,
    /// The run, locked, its task's decision dropped and its comment recorded.
    pub prepared: Prepared,
    /// The sandbox's warning when the round's processes cannot be confined here.
    pub warning: Option<String>,
}

/// Checks that task `request.task` of a finished run can go back to its worktree, and
/// prepares the round: the repository lock taken, the person's earlier decision dropped and
/// the comment kept in the record.
pub fn prepare(request: &SendBackRequest<'_>) -> Result<SendBack, OpsError> {
    let repo = plait_core::git::open(request.dir)?;
    let store = Store::new(plait_core::git::plait_dir(&repo));
    let run = store.find(Some(request.run))?;
    let state = store.load(&run)?;
    if store.is_running(&run) {
        return Err(OpsError::Busy {
            message: format!(
                "run {run} is still in progress; send a task back when it has finished"
            ),
            hint: None,
        });
    }
    if state.task(request.task).is_none() && state.groups.iter().any(|g| g.id == request.task) {
        return Err(OpsError::refused(
            format!(
                "`{}` is a group of run {run}: send back one of its tasks",
                request.task
            ),
            Some(format!("`plait status {run}` lists them")),
        ));
    }
    let (settings, warning) =
        super::resume::kept_settings(request.dir, &state, 1, request.env, request.plait.clone())?;
    let prepared = orchestrator::prepare_send_back(settings, &run, request.task, request.comment)?;
    Ok(SendBack {
        run,
        prepared,
        warning,
    })
}
