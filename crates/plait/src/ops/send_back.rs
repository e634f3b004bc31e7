//! Sending a finished task back for one more round with a person's comment: the use case
//! behind `plait send-back` and the review page's "send back". Its refusals come first, the
//! repository lock is taken, then the round and the merge after it run to their end.

use plait_core::state::RunState;
use plait_run::orchestrator;
use plait_stages::context::Context;

use super::running::{go, kept_settings, Watch};
use super::OpsError;

/// What a send-back is asked.
pub struct SendBackRequest<'a> {
    /// The run, as the user named it (a prefix of its id will do).
    pub run: &'a str,
    /// The task that goes back.
    pub task: &'a str,
    /// What the agent should change.
    pub comment: &'a str,
}

/// Sends task `request.task` of a finished run back to its worktree, followed through
/// `watch`: the repository lock taken, the person's earlier decision dropped, the comment
/// kept in the record, then one more round and the merge after it. The run's record at
/// the end.
pub async fn send_back(
    ctx: &Context,
    request: SendBackRequest<'_>,
    watch: Watch,
) -> Result<RunState, OpsError> {
    let store = ctx.store();
    let run = store.find(Some(request.run))?;
    let state = store.load(&run)?;
    if store.is_running(&run) {
        return Err(OpsError::InProgress {
            run,
            doing: "send a task back",
        });
    }
    if state.task(request.task).is_none() && state.groups.iter().any(|g| g.id == request.task) {
        return Err(OpsError::Group {
            run,
            group: request.task.to_string(),
        });
    }
    let (settings, warning) = kept_settings(ctx, &state, 1)?;
    let prepared = orchestrator::prepare_send_back(settings, &run, request.task, request.comment)?;
    go(prepared, None, warning.into_iter().collect(), watch).await
}
