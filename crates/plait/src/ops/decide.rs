//! A person's decision on a task or a group of a finished run: accept or reject.

use crate::context::Context;
use plait_core::state::{now_ms, Decision, Verdict};

use super::OpsError;

/// What was decided.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decided {
    pub(crate) run: String,
    /// The task's (or group's) id.
    pub id: String,
    /// `"task"` or `"group"`.
    pub what: &'static str,
    pub(crate) verdict: Verdict,
}

/// A decision asked of a person: accept or reject a task (or a group) of a run.
pub struct DecideRequest<'a> {
    /// The run, as the user named it (a prefix of its id will do); the latest when none.
    pub run: Option<&'a str>,
    /// The task's (or group's) id.
    pub id: &'a str,
    /// The decision.
    pub verdict: Verdict,
}

/// Records the request's verdict on its task (or group). A person's acceptance overrules
/// the culprit search: an accepted task held out as a culprit goes back into the merge.
/// Refused while the run is in progress, and for an id the run does not have.
pub fn decide(ctx: &Context, request: DecideRequest<'_>) -> Result<Decided, OpsError> {
    let DecideRequest { run, id, verdict } = request;
    let store = ctx.store();
    let run = store.find(run)?;
    if store.is_running(&run) {
        return Err(OpsError::InProgress {
            run,
            doing: "decide",
        });
    }
    let mut state = store.load(&run)?;
    let decision = Some(Decision {
        verdict,
        at: now_ms(),
    });
    let what = if let Some(group) = state.groups.iter_mut().find(|g| g.id == id) {
        group.decision = decision;
        "group"
    } else if let Some(record) = state.task_mut(id) {
        record.decision = decision;
        if verdict == Verdict::Approve {
            if let Some(culprits) = &mut state.culprits {
                culprits.sets.retain(|s| !s.tasks.iter().any(|t| t == id));
            }
        }
        "task"
    } else {
        return Err(OpsError::NoTask {
            groups: !state.groups.is_empty(),
            run,
            id: id.to_string(),
        });
    };
    store.save(&state)?;
    Ok(Decided {
        run,
        id: id.to_string(),
        what,
        verdict,
    })
}
