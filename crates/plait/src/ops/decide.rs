//! A person's decision on a task or a group of a finished run: accept or reject.

use plait_core::state::{now_ms, split_attempt_id, Decision, Pick, RunState, TaskState, Verdict};
use plait_stages::context::Context;

use super::OpsError;

/// What was decided.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decided {
    pub(crate) run: String,
    /// The task's (or group's) id.
    pub id: String,
    /// `"task"`, `"group"` or `"attempt"`.
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
    } else if let Some((task, n)) = split_attempt_id(id).filter(|_| state.attempt(id).is_some()) {
        take_attempt(ctx, &mut state, task, n, verdict)?;
        "attempt"
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

/// A person's decision on attempt `n` of `task`. Accepted, it becomes the task in place of
/// the one picked: the task's branch moves to its commit (its start, when it changed
/// nothing), a worktree the task had of its own is removed (a later round lays it out from
/// the new work), and the run merges again before it lands. Rejected, the decision is kept
/// on the attempt; rejecting the chosen attempt rejects the task.
fn take_attempt(
    ctx: &Context,
    state: &mut RunState,
    task: &str,
    n: u32,
    verdict: Verdict,
) -> Result<(), OpsError> {
    let run = state.id.clone();
    let base = state.base.clone();
    let decision = Decision {
        verdict,
        at: now_ms(),
    };
    let record = state.task_mut(task).ok_or_else(|| OpsError::NoTask {
        run: run.clone(),
        id: task.to_string(),
        groups: false,
    })?;
    let attempt = record
        .attempt_no(n)
        .cloned()
        .ok_or_else(|| OpsError::NoTask {
            run: run.clone(),
            id: plait_core::state::attempt_id(task, n),
            groups: false,
        })?;
    if verdict != Verdict::Approve {
        let chosen = record.pick.as_ref().is_some_and(|p| p.attempt == n);
        if let Some(a) = record.attempts.get_mut(n as usize - 1) {
            a.decision = Some(decision.clone());
        }
        if chosen {
            record.decision = Some(decision);
        }
        return Ok(());
    }
    if !attempt.state.is_final() || attempt.state == TaskState::Blocked {
        return Err(OpsError::AttemptNotEnded {
            run,
            id: attempt.id,
            state: attempt.state.as_str(),
        });
    }
    let tip = attempt
        .commit
        .clone()
        .unwrap_or_else(|| record.start_or(&base).to_string());
    let repo = ctx.repo()?;
    let git = |e: git2::Error| OpsError::Repo(e.into());
    let oid = git2::Oid::from_str(&tip).map_err(git)?;
    repo.reference(
        &plait_core::refs::branch_ref(&record.branch),
        oid,
        true,
        &format!("plait: a person takes attempt {n}"),
    )
    .map_err(git)?;
    if record.worktree.join(".git").exists() {
        let name = plait_trees::workspace::admin_name(&run, &record.id);
        let _ = plait_trees::workspace::remove(&repo, &name, &record.worktree);
    }
    let candidates = record
        .pick
        .as_ref()
        .map(|p| p.candidates.clone())
        .unwrap_or_default();
    let was = record.pick.as_ref().map(|p| p.attempt);
    record.take_attempt(Pick {
        attempt: n,
        by: "person".to_string(),
        why: match was {
            Some(was) if was != n => format!("plait accept, in place of attempt {was}"),
            _ => "plait accept".to_string(),
        },
        candidates,
        note: None,
        at: decision.at,
        usage: None,
    });
    record.decision = Some(decision.clone());
    if let Some(a) = record.attempts.get_mut(n as usize - 1) {
        a.decision = Some(decision);
    }
    Ok(())
}
