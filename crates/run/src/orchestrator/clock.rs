//! Where a run's time goes: the run's own steps (wall time, one after another) and its
//! tasks' steps (summed over every task and round), kept for the record's `timings` and
//! `plait run --timings`.

use std::sync::Mutex;
use std::time::Instant;

use plait_core::state::Timing;
use plait_core::sync::Locked as _;

/// The steps timed so far, in the order first taken.
#[derive(Default)]
pub(super) struct Clock {
    steps: Mutex<Vec<Timing>>,
}

impl Clock {
    /// Adds the time since `since` to the run's step `step`.
    pub(super) fn run_step(&self, step: &str, since: Instant) {
        self.add(step, since, false);
    }

    /// Adds the time since `since` to the tasks' step `step`, one more time taken.
    pub(super) fn task_step(&self, step: &str, since: Instant) {
        self.add(step, since, true);
    }

    /// Adds `ms` to the run's step `step`.
    pub(super) fn run_ms(&self, step: &str, ms: u64) {
        self.add_ms(step, ms, false);
    }

    fn add(&self, step: &str, since: Instant, task: bool) {
        self.add_ms(step, since.elapsed().as_millis() as u64, task);
    }

    fn add_ms(&self, step: &str, ms: u64, task: bool) {
        let mut steps = self.steps.locked();
        match steps.iter_mut().find(|t| t.step == step && t.task == task) {
            Some(t) => {
                t.ms += ms;
                t.count += u32::from(task);
            }
            None => steps.push(Timing {
                step: step.to_string(),
                ms,
                count: u32::from(task),
                task,
            }),
        }
    }

    /// The steps: the run's first, then its tasks'.
    pub(super) fn timings(&self) -> Vec<Timing> {
        let steps = self.steps.locked();
        let mut out: Vec<Timing> = steps.iter().filter(|t| !t.task).cloned().collect();
        out.extend(steps.iter().filter(|t| t.task).cloned());
        out
    }
}
