//! Which tasks need a person, by id, for `plait review --attention`: a run of 47 tasks
//! reads as 1,265 lines, and the few that need someone are what the reader is after. The
//! gate's blockers decide it (failed, violating, interrupted, stopped, not approved or
//! rejected tasks, supervisor groups held back), plus the tasks of every conflict and
//! every culprit set.

use std::collections::HashSet;

use crate::land::Blocker;
use plait_core::state::RunState;

/// The ids of the tasks and groups of `state` that need a person, tasks in the run's order
/// first, then groups.
pub fn needing_attention(state: &RunState) -> Vec<String> {
    let mut named: HashSet<String> = HashSet::new();
    for blocker in crate::land::blockers(state) {
        match blocker {
            Blocker::Tasks { tasks, .. } => named.extend(tasks),
            Blocker::GroupsHeld(groups) => named.extend(groups.into_iter().map(|(g, _)| g)),
            Blocker::Culprits(sets) => named.extend(sets.into_iter().flat_map(|s| s.tasks)),
            _ => {}
        }
    }
    let merges = state
        .merge
        .iter()
        .chain(state.groups.iter().filter_map(|g| g.merge.as_ref()));
    for merge in merges {
        named.extend(merge.excluded.iter().cloned());
        named.extend(merge.conflicts.iter().flat_map(|c| c.tasks.iter().cloned()));
    }
    let tasks = state.tasks.iter().map(|t| &t.id);
    let groups = state.groups.iter().map(|g| &g.id);
    tasks
        .chain(groups)
        .filter(|id| named.contains(*id))
        .cloned()
        .collect()
}
