//! What runs an agent in a run: a task, or one of its attempts (`attempts`), named by a
//! [`Slot`]. An attempt is a task of its own to the scheduler and the round loop; its
//! record lives in its task's (`TaskRecord::attempts`). The bottom of the orchestrator's
//! task files: it names none of them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use plait_core::cancel::Cancel;

use crate::plan::ResolvedTask;
use plait_core::state::{RunState, TaskRecord};

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
            (Some(n), _) => Cow::Owned(planned.with_way(n, true)),
            (None, Some(n)) if planned.tries.is_some() => Cow::Owned(planned.with_way(n, false)),
            _ => Cow::Borrowed(planned),
        }
    }
}

/// Ways to stop one slot while the run goes on: the attempts a pick leaves behind.
#[derive(Default)]
pub(super) struct Stops(Mutex<HashMap<Slot, Stop>>);

/// One slot's stop: the signal its work watches, and why it was fired.
struct Stop {
    signal: watch::Sender<bool>,
    reason: Option<String>,
}

impl Stops {
    /// The signal `slot`'s work watches: fired by the run's interrupt `run`, or by
    /// [`stop`](Self::stop) of this slot alone. A task's own slot needs none of its own
    /// (nothing stops it alone yet): it watches the run's.
    pub(super) fn watch(&self, slot: Slot, run: &Cancel) -> Cancel {
        if slot.attempt.is_none() {
            return run.clone();
        }
        let mut stops = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let stop = stops.entry(slot).or_insert_with(|| {
            let (signal, _) = watch::channel(false);
            Stop {
                signal,
                reason: None,
            }
        });
        let (fire, cancel) = Cancel::new();
        let mut own = stop.signal.subscribe();
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

    /// Stops `slot` for `reason`; its work ends as soon as it looks (its agent's processes
    /// are killed, its checks cut short).
    pub(super) fn stop(&self, slot: Slot, reason: String) {
        let mut stops = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let stop = stops.entry(slot).or_insert_with(|| Stop {
            signal: watch::channel(false).0,
            reason: None,
        });
        stop.reason.get_or_insert(reason);
        stop.signal.send_replace(true);
    }

    /// Why `slot` was stopped, if it was.
    pub(super) fn stopped(&self, slot: Slot) -> Option<String> {
        let stops = self.0.lock().unwrap_or_else(|e| e.into_inner());
        stops.get(&slot).and_then(|s| s.reason.clone())
    }
}
