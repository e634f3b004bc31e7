//! The words a supervisor reads about its group. A supervisor is a reviewer
//! (`prompts::reviewer`) whose task is a group's merge: its prompt is the brief below, its
//! diff the group's merge against the base.

use plait_core::state::RunState;
use std::fmt::Write as _;

/// What a supervisor is told about its group: for each task, whether it was merged, how
/// many files it changed and its worker's summary.
pub fn brief(state: &RunState, group: usize) -> String {
    let group = &state.groups[group];
    let mut text = format!(
        "Supervisor review of {}: the merged work of {} task(s). Judge the group's diff as a whole: \
         do the tasks together do what they were asked, consistently with each other and the goal?\n",
        group.id,
        group.tasks.len()
    );
    let merge = group.merge.as_ref();
    for id in &group.tasks {
        let Some(task) = state.task(id) else {
            continue;
        };
        let status = if merge.is_some_and(|m| m.included.contains(id)) {
            "merged"
        } else if merge.is_some_and(|m| m.excluded.contains(id)) {
            "left out: conflict"
        } else {
            "not merged"
        };
        let _ = write!(
            text,
            "\n- task {id} ({status}), files changed: {}\n  worker's summary: {}",
            task.changes.len(),
            task.summary.as_deref().unwrap_or("(none)").trim()
        );
    }
    text
}
