//! Steering a run while it goes: the requests people make of one task (`crate::steer`:
//! `plait tell`, `plait stop`, the page) taken from the run's directory by the run's own
//! process, every [`LOOK`], in the order they were made, and answered. A tell goes into
//! the task's inbox (`Shared::inbox`): a model agent hears it at its next turn, any other
//! agent as its next round's comment (`rounds`). A stop fires the task's own stop
//! (`Shared::stops`); a task that has not started yet ends stopped at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::rounds::takes_mid_round;
use super::shared::Slot;
use super::Shared;
use crate::steer::{self, Answer, Ask, Request};
use plait_core::state::{now_ms, split_attempt_id, Decision, TaskState, Told, Verdict};

/// How often the run looks for requests.
const LOOK: Duration = Duration::from_millis(25);

/// Takes and answers requests until told to stop (the run's tasks have all ended): then
/// the requests left are answered that the task has ended.
pub(super) async fn take_requests(shared: Arc<Shared>, done: Arc<Notify>) {
    let dir = shared.store.run(&shared.run);
    loop {
        for (path, request) in steer::pending(&dir) {
            let answer = take(&shared, &request);
            steer::answer(&path, &answer);
        }
        tokio::select! {
            _ = tokio::time::sleep(LOOK) => {}
            _ = done.notified() => break,
        }
    }
    for (path, request) in steer::pending(&dir) {
        let answer = take(&shared, &request);
        steer::answer(&path, &answer);
    }
}

/// The slot a request's task id names: a task, or an attempt of one (`<task>~<n>`).
fn slot_of(shared: &Shared, id: &str) -> Option<Slot> {
    if let Some(index) = shared.plan.tasks.iter().position(|t| t.id == id) {
        return Some(Slot::from(index));
    }
    let (task, n) = split_attempt_id(id)?;
    let index = shared.plan.tasks.iter().position(|t| t.id == task)?;
    let attempts = shared.record(index).attempts.len() as u32;
    (n <= attempts).then(|| Slot::attempt(index, n))
}

/// Does what `request` asks, and says what became of it.
fn take(shared: &Shared, request: &Request) -> Answer {
    let refuse = |message: String| Answer { ok: false, message };
    let id = &request.task;
    if shared.dispatch.is_spread() {
        return refuse(format!(
            "run {} runs its tasks on workers, which a request made here does not reach yet: \
             wait for the task's round, then `plait send-back`",
            shared.run
        ));
    }
    let Some(slot) = slot_of(shared, id) else {
        return refuse(format!("run {} has no task `{id}`", shared.run));
    };
    let record = shared.record(slot);
    let run = &shared.run;
    if record.state.is_final() || record.state == TaskState::Interrupted {
        let state = record.state.as_str();
        let hint = match (&request.ask, slot.attempt) {
            (_, Some(_)) => String::new(),
            (Ask::Tell { .. }, None) => {
                format!("; `plait send-back {run} {id} -m TEXT` gives it one more round, told that")
            }
            (Ask::Stop { .. }, None) => String::new(),
        };
        return refuse(format!("task {id} has ended ({state}){hint}"));
    }
    // A task run as attempts runs nothing itself until its pick: it is steered through them.
    let attempts: Vec<Slot> = match slot.attempt {
        None if !record.attempts.is_empty() && record.pick.is_none() => (1..=record.attempts.len()
            as u32)
            .map(|n| Slot::attempt(slot.index, n))
            .filter(|a| !shared.record(*a).state.is_final())
            .collect(),
        _ => vec![slot],
    };
    match &request.ask {
        Ask::Tell { text } if text.trim().is_empty() => {
            refuse("the message is empty: say what the agent should do".to_string())
        }
        Ask::Tell { text } => {
            let live = takes_mid_round(&shared.task(attempts[0]).agent);
            let way = if live { "next turn" } else { "next round" };
            for &slot in &attempts {
                let at = now_ms();
                shared.inbox(slot).tell(at, text.trim().to_string());
                let round = shared.record(slot).rounds;
                shared.update(slot, |t| {
                    t.told.push(Told {
                        text: text.trim().to_string(),
                        by: request.by.clone(),
                        at,
                        round,
                        way: way.to_string(),
                        heard_at: None,
                    })
                });
            }
            let message = if live {
                format!("told {id}: its agent hears it at its next turn")
            } else {
                let agent = match &shared.task(attempts[0]).agent {
                    crate::plan::AgentConfig::Exec(_) => "a shell command",
                    crate::plan::AgentConfig::ClaudeCode(_) => "Claude Code",
                    crate::plan::AgentConfig::Aider(_) => "aider",
                    _ => "an agent program",
                };
                format!(
                    "told {id}: its agent ({agent}) takes nothing while its round runs, so it \
                     hears this as its next round's comment"
                )
            };
            Answer { ok: true, message }
        }
        Ask::Stop { keep } => {
            let reason = format!("stopped by a person ({})", request.by);
            for &slot in &attempts {
                stop(shared, slot, &reason, *keep);
            }
            if attempts != [slot] {
                stop(shared, slot, &reason, *keep);
            }
            let what = if *keep {
                "its work so far is collected and judged"
            } else {
                "it stays out of the merge"
            };
            Answer {
                ok: true,
                message: format!("stopping {id}: {what}"),
            }
        }
    }
}

/// Stops `slot` for `reason`: one not started yet ends stopped now (with nothing to keep),
/// one running when it next looks.
fn stop(shared: &Shared, slot: Slot, reason: &str, keep: bool) {
    let record = shared.record(slot);
    if record.state == TaskState::Pending && record.started_at.is_none() {
        shared.update(slot, |t| {
            t.state = TaskState::Stopped;
            t.error = Some(format!("{reason} before it started"));
            t.finished_at = Some(now_ms());
            if slot.attempt.is_none() {
                t.decision = Some(Decision {
                    verdict: Verdict::Reject,
                    at: now_ms(),
                });
            }
        });
    }
    shared.stops.stop(slot, reason.to_string(), keep);
}
