//! What runs an agent in a run: a task, or one of its attempts (`attempts`), named by a
//! [`Slot`]. An attempt is a task of its own to the scheduler and the round loop; its
//! record lives in its task's (`TaskRecord::attempts`). The bottom of the orchestrator's
//! task files: it names none of them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use plait_core::cancel::Cancel;

use plait_core::state::{RunState, TaskRecord};
use plait_core::sync::Locked as _;
use plait_plan::ResolvedTask;

/// A task (by index into the plan's tasks), or its attempt `attempt` (1..).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Slot {
    pub(super) index: usize,
    pub(super) attempt: Option<u32>,
}

impl From<usize> for Slot {
    fn from(index: usize) -> Slot {
        Slot {
            index,
            attempt: None,
        }
    }
}

impl Slot {
    /// Attempt `n` of task `index`.
    pub(super) fn attempt(index: usize, n: u32) -> Slot {
        Slot {
            index,
            attempt: Some(n),
        }
    }

    /// Its record in `state`, to change. An attempt's record is made by the time any part
    /// of the run names it (`Shared::open_attempts`).
    pub(super) fn record_mut(self, state: &mut RunState) -> &mut TaskRecord {
        let task = &mut state.tasks[self.index];
        match self.attempt {
            None => task,
            Some(n) => &mut task.attempts[n as usize - 1],
        }
    }

    /// Its record in `state`.
    pub(super) fn record(self, state: &RunState) -> &TaskRecord {
        let task = &state.tasks[self.index];
        match self.attempt {
            None => task,
            Some(n) => &task.attempts[n as usize - 1],
        }
    }

    /// The task as this slot runs it: an attempt with its own id and its agent, the task
    /// itself after its pick with the chosen attempt's agent (`chosen`), else as planned.
    pub(super) fn task(self, planned: &ResolvedTask, chosen: Option<u32>) -> Cow<'_, ResolvedTask> {
        match (self.attempt, chosen) {
            (Some(n), _) => Cow::Owned(planned.as_attempt(n, true)),
            (None, Some(n)) if planned.attempts.is_some() => {
                Cow::Owned(planned.as_attempt(n, false))
            }
            _ => Cow::Borrowed(planned),
        }
    }
}

/// Ways to stop one slot while the run goes on: the attempts a pick leaves behind, a task
/// a person stops (`plait stop`).
#[derive(Default)]
pub(super) struct Stops(Mutex<HashMap<Slot, Stop>>);

/// One slot's stop: the signal its work watches, why it was fired, and whether the work
/// so far is to be kept (collected and judged).
struct Stop {
    signal: watch::Sender<bool>,
    reason: Option<String>,
    keep: bool,
}

impl Stop {
    fn new() -> Stop {
        Stop {
            signal: watch::channel(false).0,
            reason: None,
            keep: false,
        }
    }
}

impl Stops {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Slot, Stop>> {
        self.0.locked()
    }

    /// The signal `slot`'s work watches: fired by the run's interrupt `run`, or by
    /// [`stop`](Self::stop) of this slot alone.
    pub(super) fn watch(&self, slot: Slot, run: &Cancel) -> Cancel {
        let mut own = self
            .lock()
            .entry(slot)
            .or_insert_with(Stop::new)
            .signal
            .subscribe();
        let (fire, cancel) = Cancel::new();
        let run = run.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = run.cancelled() => {}
                stopped = own.wait_for(|s| *s) => {
                    if stopped.map(drop).is_err() {
                        return;
                    }
                }
                _ = fire.closed() => return,
            }
            let _ = fire.send(true);
        });
        cancel
    }

    /// Stops `slot` for `reason` (`keep`: its work so far is collected and judged); its
    /// work ends as soon as it looks (its agent's processes are killed, its checks cut
    /// short). The first stop's reason stands.
    pub(super) fn stop(&self, slot: Slot, reason: String, keep: bool) {
        let mut stops = self.lock();
        let stop = stops.entry(slot).or_insert_with(Stop::new);
        if stop.reason.is_none() {
            stop.reason = Some(reason);
            stop.keep = keep;
        }
        stop.signal.send_replace(true);
    }

    /// Why `slot` was stopped, if it was.
    pub(super) fn stopped(&self, slot: Slot) -> Option<String> {
        self.lock().get(&slot).and_then(|s| s.reason.clone())
    }

    /// Whether `slot` was stopped to keep its work so far.
    pub(super) fn kept(&self, slot: Slot) -> bool {
        self.lock()
            .get(&slot)
            .is_some_and(|s| s.reason.is_some() && s.keep)
    }

    /// Forgets `slot`'s stop once its work has ended, so that a later round of it (a
    /// send-back) runs.
    pub(super) fn clear(&self, slot: Slot) {
        self.lock().remove(&slot);
    }
}
