//! Steering a run while it goes: the requests people make of one task (`crate::steer`:
//! `plait tell`, `plait stop`, the page) taken from the run's directory by the run's own
//! process, every [`LOOK`], in the order they were made, and answered. A tell goes into
//! the task's inbox (`Shared::inbox`): a model agent hears it at its next turn, any other
//! agent as its next round's comment (`rounds`). A stop fires the task's own stop
//! (`Shared::stops`); a task that has not started yet ends stopped at once.
//!
//! A run spread over workers takes them the same way, only further: its coordinator
//! stores each request (`plait_store::pg`'s requests, in order) and waits a while for the
//! answer of the worker that holds the task, which takes the requests of its tasks as the
//! store tells it of them, and when it takes a task ([`take_stored`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::rounds::takes_mid_round;
use super::shared::Slot;
use super::Shared;
use crate::steer::{self, Answer, Ask, Request};
use plait_core::state::{now_ms, split_attempt_id, Decision, TaskState, Told, Verdict};
use plait_store::pg::PgStore;

/// How often the run looks for requests.
const LOOK: Duration = Duration::from_millis(25);

/// How long a spread run's coordinator waits for the answer of the worker holding a task.
const WORKER_WAIT: Duration = Duration::from_secs(3);

/// Takes and answers requests until told to stop (the run's tasks have all ended): then
/// the requests left are answered that the task has ended.
pub(super) async fn take_requests(shared: Arc<Shared>, done: Arc<Notify>) {
    let dir = shared.store.run(&shared.run);
    // Requests sent on to the workers, answered when their answer comes.
    let mut sent: HashSet<PathBuf> = HashSet::new();
    let mut finishing = false;
    loop {
        sent.retain(|p| p.exists());
        for (path, request) in steer::pending(&dir) {
            match shared.dispatch.spread_store() {
                Some(pg) if !finishing => {
                    if sent.insert(path.clone()) {
                        forward(&shared, pg.clone(), path, request).await;
                    }
                }
                _ if sent.contains(&path) => {}
                _ => {
                    let answer = take(&shared, &request);
                    steer::answer(&path, &answer);
                }
            }
        }
        if finishing {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(LOOK) => {}
            _ = done.notified() => finishing = true,
        }
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

/// The refusal of `request` when task (or attempt) `slot` has ended (`state`).
fn ended(shared: &Shared, request: &Request, slot: Slot, state: TaskState) -> Option<Answer> {
    if !state.is_final() && state != TaskState::Interrupted {
        return None;
    }
    let (run, id) = (&shared.run, &request.task);
    let hint = match (&request.ask, slot.attempt) {
        (Ask::Tell { .. }, None) => {
            format!("; `plait send-back {run} {id} -m TEXT` gives it one more round, told that")
        }
        _ => String::new(),
    };
    Some(Answer {
        ok: false,
        message: format!("task {id} has ended ({}){hint}", state.as_str()),
    })
}

/// Does what `request` asks, and says what became of it.
fn take(shared: &Shared, request: &Request) -> Answer {
    let refuse = |message: String| Answer { ok: false, message };
    let id = &request.task;
    let Some(slot) = slot_of(shared, id) else {
        return refuse(format!("run {} has no task `{id}`", shared.run));
    };
    let record = shared.record(slot);
    if let Some(ended) = ended(shared, request, slot, record.state) {
        return ended;
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
                    plait_plan::AgentConfig::Exec(_) => "a shell command",
                    plait_plan::AgentConfig::ClaudeCode(_) => "Claude Code",
                    plait_plan::AgentConfig::Aider(_) => "aider",
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

/// Sends `request` (the file at `path`) on to the worker that holds its task, through the
/// store, once what this coordinator knows allows it (the task is there and has not
/// ended), and answers the file with the worker's answer when it comes (waiting at most
/// [`WORKER_WAIT`], while other requests are taken).
async fn forward(shared: &Arc<Shared>, pg: Arc<PgStore>, path: PathBuf, request: Request) {
    let refuse = |message: String| Answer { ok: false, message };
    let id = request.task.clone();
    let (task, attempt) = match split_attempt_id(&id) {
        Some((task, n)) => (task.to_string(), Some(n)),
        None => (id.clone(), None),
    };
    let index = shared.plan.tasks.iter().position(|t| t.id == task);
    let planned = |index: usize, n: u32| {
        let count = shared.plan.tasks[index]
            .attempts
            .as_ref()
            .map_or(0, |t| t.count);
        n >= 1 && n <= count
    };
    let Some(index) = index.filter(|&i| attempt.is_none_or(|n| planned(i, n))) else {
        let answer = refuse(format!("run {} has no task `{id}`", shared.run));
        return steer::answer(&path, &answer);
    };
    let record = shared.record(index);
    let slot = Slot {
        index,
        attempt: None,
    };
    if let Some(answer) = ended(shared, &request, slot, record.state) {
        return steer::answer(&path, &answer);
    }
    if let Ask::Tell { text } = &request.ask {
        if text.trim().is_empty() {
            let answer = refuse("the message is empty: say what the agent should do".into());
            return steer::answer(&path, &answer);
        }
    }
    let body = serde_json::to_value(&request).unwrap_or_default();
    let number = match pg.ask(&shared.run, &task, &body).await {
        Ok(number) => number,
        Err(e) => {
            let answer = refuse(format!("the store did not take the request: {e}"));
            return steer::answer(&path, &answer);
        }
    };
    if record.state == TaskState::Pending {
        // No worker has taken the task yet: the one that takes it takes this first.
        let message = match &request.ask {
            Ask::Tell { .. } => format!(
                "told {id}: no worker has taken it yet; the worker that takes it tells its \
                 agent before it starts"
            ),
            Ask::Stop { .. } => format!(
                "stopping {id}: no worker has taken it yet; the worker that takes it stops it \
                 before it starts"
            ),
        };
        note_told(shared, index, attempt, &request);
        return steer::answer(&path, &Answer { ok: true, message });
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + WORKER_WAIT;
        let answer = loop {
            match pg.answer_of(number).await {
                Ok(Some(answer)) => {
                    break serde_json::from_value(answer).unwrap_or_else(|_| Answer {
                        ok: false,
                        message: "the worker's answer could not be read".to_string(),
                    })
                }
                Ok(None) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(LOOK).await
                }
                _ => {
                    break Answer {
                        ok: true,
                        message: format!(
                            "sent to the worker that holds {id}, which has not answered yet: it \
                             takes the request when it next looks"
                        ),
                    }
                }
            }
        };
        if answer.ok {
            note_told(&shared, index, attempt, &request);
        }
        steer::answer(&path, &answer);
    });
}

/// Keeps a tell sent on to a worker in this coordinator's record of the task, so its status
/// shows it while the task runs (the worker's record, taken in when the task ends, holds
/// it from then on). An attempt's is kept by its worker alone.
fn note_told(shared: &Shared, index: usize, attempt: Option<u32>, request: &Request) {
    let (Ask::Tell { text }, None) = (&request.ask, attempt) else {
        return;
    };
    let live = takes_mid_round(&shared.task(Slot::from(index)).agent);
    shared.update(index, |t| {
        t.told.push(Told {
            text: text.trim().to_string(),
            by: request.by.clone(),
            at: request.at,
            round: t.rounds,
            way: if live { "next turn" } else { "next round" }.to_string(),
            heard_at: None,
        })
    });
}

/// Takes the requests the store holds for `tasks` (tasks of this run that this worker
/// holds), oldest first, and answers each in the store. One at a time (`one`): the store
/// may tell of a request while the worker takes a task. A request for an attempt not
/// opened yet is left for when it is.
pub(super) async fn take_stored(
    shared: &Shared,
    pg: &PgStore,
    tasks: &[String],
    one: &tokio::sync::Mutex<()>,
) {
    let _one = one.lock().await;
    let asked = match pg.asked(&shared.run, tasks).await {
        Ok(asked) => asked,
        Err(e) => {
            tracing::warn!(
                "the requests made of the tasks of run {} could not be read: {e}",
                shared.run
            );
            return;
        }
    };
    for stored in asked {
        let answer = match serde_json::from_value::<Request>(stored.body) {
            Ok(request) => {
                let later = split_attempt_id(&request.task).is_some()
                    && slot_of(shared, &request.task).is_none()
                    && shared
                        .plan
                        .tasks
                        .iter()
                        .position(|t| t.id == stored.task)
                        .is_some_and(|i| !shared.record(i).state.is_final());
                if later {
                    continue;
                }
                take(shared, &request)
            }
            Err(_) => Answer {
                ok: false,
                message: "the request could not be read".to_string(),
            },
        };
        let answer = serde_json::to_value(&answer).unwrap_or_default();
        if let Err(e) = pg.answer(&shared.run, stored.id, &answer).await {
            tracing::warn!(
                "a request made of task {} was not answered: {e}",
                stored.task
            );
        }
    }
}
