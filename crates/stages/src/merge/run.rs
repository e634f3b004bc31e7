//! The run's merge rules: which task branches may go into a merge (`mergeable`), merging
//! a run's tasks into its merged branch, whether decisions taken since make that merge
//! stale, and the merge commits' messages. Grouped runs merge in two levels (`groups`).

use std::fmt::Write as _;

use super::{BranchInput, MergeError, MergeSettings};
use crate::context::Context;
use plait_core::state::MergeOutcome;
use plait_core::state::{Culprits, RunState, TaskRecord, TaskState, Verdict};

/// Whether a task's branch may go into the merge: done, approved (or not reviewed), its
/// checks green, and no violation unless a person accepted the task as it is.
pub fn mergeable(task: &TaskRecord) -> bool {
    let accepted = task.decided(Verdict::Approve);
    (task.state == TaskState::Done || (task.state == TaskState::Rejected && accepted))
        && task.no_failure_of_its_own()
        && matches!(task.verdict(), None | Some(Verdict::Approve))
        && (task.violations.is_empty() || accepted)
}

/// Merges the mergeable tasks of `state` into its merged branch (blocking).
pub fn merge_tasks(context: &Context, state: &RunState) -> Result<MergeOutcome, MergeError> {
    let branches = branch_inputs(state.tasks.iter(), state.culprits.as_ref());
    let base = git2::Oid::from_str(&state.base)?;
    let repo = context.repo()?;
    let settings = MergeSettings {
        workdir: context.workdir(),
        branch: &state.merged_branch(),
        base,
        branches: &branches,
        message: merge_message(state, &format!("run {}", state.id), "Tasks", &branches),
    };
    super::merge(&repo, &settings)
}

/// Whether decisions taken since the merge (`plait accept` / `plait reject`) change which
/// tasks (or, in a grouped run, which groups) belong in it.
pub fn merge_is_stale(state: &RunState) -> bool {
    let Some(merge) = &state.merge else {
        return false;
    };
    if state.groups.is_empty() {
        return !merged_as_wanted(state.tasks.iter(), Some(merge), state.culprits.as_ref());
    }
    state.groups.iter().any(|g| {
        let tasks = g.tasks.iter().filter_map(|id| state.task(id));
        !merged_as_wanted(tasks, g.merge.as_ref(), state.culprits.as_ref())
            || g.goes_up() != g.merged_up
    })
}

/// Whether `merge` took in (or left out on a conflict) exactly the mergeable `tasks`, less
/// the culprits held out.
fn merged_as_wanted<'a>(
    tasks: impl Iterator<Item = &'a TaskRecord>,
    merge: Option<&MergeOutcome>,
    culprits: Option<&Culprits>,
) -> bool {
    let wanted: Vec<&TaskRecord> = tasks
        .filter(|t| {
            mergeable(t) && t.commit.is_some() && !culprits.is_some_and(|c| c.blames(&t.id))
        })
        .collect();
    // A task it took in whose commit is another now (another of its attempts accepted).
    let moved = wanted.iter().any(|t| {
        merge
            .and_then(|m| m.commits.get(&t.id))
            .is_some_and(|took| t.commit.as_ref() != Some(took))
    });
    let mut want: Vec<&str> = wanted.iter().map(|t| t.id.as_str()).collect();
    let mut have: Vec<&str> = merge
        .iter()
        .flat_map(|m| m.included.iter().chain(&m.excluded).chain(&m.waiting))
        .map(String::as_str)
        .collect();
    want.sort_unstable();
    have.sort_unstable();
    want == have && !moved
}

/// The branches of `tasks` that may go into a merge, with their commits; tasks a culprit
/// search blamed are held out.
pub fn branch_inputs<'a>(
    tasks: impl Iterator<Item = &'a TaskRecord>,
    culprits: Option<&Culprits>,
) -> Vec<BranchInput> {
    tasks
        .filter(|t| mergeable(t) && !culprits.is_some_and(|c| c.blames(&t.id)))
        .filter_map(BranchInput::of)
        .collect()
}

/// A merge commit's message: `plait: merge WHAT: goal`, then the merged branches' names under
/// `label` (`Tasks`, or `Groups` at the top of a grouped run) and the run's trailer.
pub(crate) fn merge_message(
    state: &RunState,
    what: &str,
    label: &str,
    branches: &[BranchInput],
) -> String {
    let goal = state.goal.lines().next().unwrap_or("").trim();
    let mut msg = format!("plait: merge {what}");
    if !goal.is_empty() {
        let _ = write!(msg, ": {goal}");
    }
    msg.push_str("\n\n");
    let names: Vec<&str> = branches.iter().map(|b| b.task.as_str()).collect();
    let _ = writeln!(msg, "{label}: {}", names.join(", "));
    let _ = writeln!(msg, "Plait-Run: {}", state.id);
    msg
}
