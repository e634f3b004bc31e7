//! Stage 6: groups. Supervisors, for large runs: tasks are grouped by path proximity; each group's branches
//! are merged into `plait/<run>/group-<k>`, where conflicts between its own tasks are found;
//! a supervisor reviews that merge as a whole; approved groups are merged at the top, where
//! only conflicts between groups can remain. This module cuts the groups and folds the two
//! levels of merging into the run's one merge outcome. The orchestrator drives the
//! supervisors (`orchestrator::grouped`).

use std::collections::BTreeSet;
use std::path::Path;

use crate::context::Context;
use crate::merge::run::{branch_inputs, merge_message};
use crate::merge::{self, BranchInput, MergeError, MergeSettings};
use plait_core::refs::group_branch;
use plait_core::state::{Conflict, MergeOutcome};
use plait_core::state::{GroupRecord, RunState};
use plait_core::sync::Locked as _;
use plait_plan::{ResolvedPlan, ResolvedTask, Reviewer};

/// Cuts `tasks` into `count` groups of nearly equal size, neighbours by path: tasks are
/// ordered by their first owned path, and each cut is moved, within a third of a group's
/// size, to where neighbouring paths share the fewest leading directories.
pub fn assign(tasks: &[ResolvedTask], count: usize) -> Vec<Vec<usize>> {
    let n = tasks.len();
    let count = count.clamp(1, n.max(1));
    let key = |t: &ResolvedTask| -> String {
        t.owned
            .first()
            .cloned()
            .or_else(|| t.owns.patterns().first().cloned())
            .unwrap_or_default()
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (key(&tasks[i]), i));
    let keys: Vec<String> = order.iter().map(|&i| key(&tasks[i])).collect();
    let shared_dirs = |p: usize| -> usize {
        // Leading directories that the paths on either side of cut `p` share.
        let (a, b) = (&keys[p - 1], &keys[p]);
        a.split('/')
            .zip(b.split('/'))
            .take_while(|(x, y)| x == y)
            .count()
    };
    let size = n as f64 / count as f64;
    let slack = (size / 3.0).floor() as usize;
    let mut cuts = Vec::with_capacity(count + 1);
    cuts.push(0);
    for j in 1..count {
        let ideal = (j as f64 * size).round() as usize;
        let low = ideal.saturating_sub(slack).max(cuts[j - 1] + 1);
        // Leave at least one task for each group still to come.
        let high = (ideal + slack).min(n - (count - j));
        let best = (low..=high.max(low))
            .min_by_key(|&p| (shared_dirs(p), p.abs_diff(ideal)))
            .unwrap_or(ideal);
        cuts.push(best);
    }
    cuts.push(n);
    cuts.windows(2)
        .map(|w| {
            let mut group: Vec<usize> = order[w[0]..w[1]].to_vec();
            group.sort_unstable();
            group
        })
        .collect()
}

/// The groups of a run of `tasks`, as recorded in its state.
pub fn records(
    run: &str,
    tasks: &[ResolvedTask],
    count: usize,
    supervised: bool,
) -> Vec<GroupRecord> {
    if count < 2 {
        return Vec::new();
    }
    assign(tasks, count)
        .into_iter()
        .enumerate()
        .map(|(k, members)| {
            let id = format!("group-{}", k + 1);
            GroupRecord {
                branch: group_branch(run, &id),
                id,
                tasks: members.iter().map(|&i| tasks[i].id.clone()).collect(),
                supervised,
                merge: None,
                review: None,
                decision: None,
                merged_up: false,
                from: None,
            }
        })
        .collect()
}

/// The run's merge outcome from its groups' merges and the `top` merge of the group
/// branches: tasks of groups that went up are in it, conflicts are reported at the level
/// where they occurred, and a conflict between groups names the tasks whose changes meet.
pub fn combine(state: &RunState, top: MergeOutcome) -> MergeOutcome {
    let mut included = Vec::new();
    let mut excluded = Vec::new();
    let mut conflicts = Vec::new();
    let mut waiting = Vec::new();
    for group in &state.groups {
        let Some(merge) = &group.merge else {
            continue;
        };
        take_in(group, merge, (&mut excluded, &mut waiting, &mut conflicts));
        if top.included.contains(&group.id) {
            included.extend(merge.included.iter().cloned());
        } else if top.excluded.contains(&group.id) {
            excluded.extend(merge.included.iter().cloned());
        }
    }
    for conflict in &top.conflicts {
        let mut tasks = BTreeSet::new();
        for group in state
            .groups
            .iter()
            .filter(|g| conflict.tasks.contains(&g.id))
        {
            let included = group.merge.as_ref().map(|m| m.included.as_slice());
            for id in included.unwrap_or_default() {
                let touches = state
                    .task(id)
                    .is_some_and(|t| t.changes.iter().any(|c| c.path == conflict.path));
                if touches {
                    tasks.insert(id.clone());
                }
            }
        }
        conflicts.push(Conflict {
            tasks: tasks.into_iter().collect(),
            message: format!(
                "between {}: {}",
                conflict.tasks.join(" and "),
                conflict.message
            ),
            ..conflict.clone()
        });
    }
    let commits = state
        .groups
        .iter()
        .filter_map(|g| g.merge.as_ref())
        .flat_map(|m| m.commits.iter())
        .filter(|(task, _)| included.contains(*task))
        .map(|(task, commit)| (task.clone(), commit.clone()))
        .collect();
    MergeOutcome {
        branch: top.branch,
        commit: top.commit,
        included,
        excluded,
        conflicts,
        waiting,
        commits,
    }
}

/// Merges each group's mergeable tasks into its branch (blocking), the groups spread over
/// the CPUs: they write different branches from disjoint sets of commits. A group whose
/// merged tasks changed since its last merge loses its review: what was reviewed is gone.
pub fn merge_groups(context: &Context, state: &mut RunState) -> Result<(), MergeError> {
    let base = git2::Oid::from_str(&state.base)?;
    let inputs = group_inputs(state);
    let outcomes = merge_parallel(context, base, &inputs);
    for (group, outcome) in state.groups.iter_mut().zip(outcomes) {
        let (outcome, from) =
            outcome.unwrap_or_else(|| Err(MergeError::NotMerged(group.id.clone())))?;
        group.from = from;
        let same = group
            .merge
            .as_ref()
            .is_some_and(|m| m.included == outcome.included);
        if !same {
            group.review = None;
        }
        group.merge = Some(outcome);
    }
    Ok(())
}

/// One group's merge.
struct GroupInput {
    /// `plait/<run>/group-<k>`.
    branch: String,
    /// Its tasks' branches that may be merged.
    own: Vec<BranchInput>,
    /// The branches of other groups' tasks that its tasks started from (`after`): merged
    /// first, so that its tasks' work can be merged, and left out of its outcome.
    context: Vec<BranchInput>,
    message: String,
}

fn group_inputs(state: &RunState) -> Vec<GroupInput> {
    state
        .groups
        .iter()
        .map(|group| {
            let own = branch_inputs(
                group.tasks.iter().filter_map(|id| state.task(id)),
                state.culprits.as_ref(),
            );
            let mut from: BTreeSet<&str> = own
                .iter()
                .filter_map(|b| b.start.as_ref())
                .flat_map(|s| s.from.keys().map(String::as_str))
                .collect();
            from.retain(|id| !group.tasks.iter().any(|t| t == id));
            let context = branch_inputs(
                from.iter().filter_map(|id| state.task(id)),
                state.culprits.as_ref(),
            );
            let what = format!("{} of run {}", group.id, state.id);
            let message = merge_message(state, &what, "Tasks", &own);
            GroupInput {
                branch: group.branch.clone(),
                own,
                context,
                message,
            }
        })
        .collect()
}

/// A group's merge outcome and the commit it started from (when it has context).
type GroupMerge = (MergeOutcome, Option<String>);

/// Merges one group: its context alone first (`<branch>-from`), then its context and its
/// own tasks, the outcome telling of its own tasks only.
fn merge_group(
    repo: &git2::Repository,
    workdir: &Path,
    base: git2::Oid,
    input: &GroupInput,
) -> Result<GroupMerge, MergeError> {
    let mut from = None;
    if !input.context.is_empty() {
        let branch = format!("{}-from", input.branch);
        let settings = MergeSettings {
            workdir,
            branch: &branch,
            base,
            branches: &input.context,
            message: format!("{}\n(what its tasks start from)", input.message),
        };
        from = Some(merge::merge(repo, &settings)?.commit);
    }
    let branches: Vec<BranchInput> = input.context.iter().chain(&input.own).cloned().collect();
    let settings = MergeSettings {
        workdir,
        branch: &input.branch,
        base,
        branches: &branches,
        message: input.message.clone(),
    };
    let mut outcome = merge::merge(repo, &settings)?;
    if !input.context.is_empty() {
        let own = |id: &String| input.own.iter().any(|b| &b.task == id);
        outcome.included.retain(own);
        outcome.excluded.retain(own);
        outcome.waiting.retain(own);
        outcome.conflicts.retain(|c| c.tasks.iter().any(own));
    }
    Ok((outcome, from))
}

/// Runs the merges of `inputs` on as many threads as there are CPUs, each with its own
/// handle on the repository, the largest first (a group whose tasks start from many
/// others' work merges them too: begun last, it would run alone at the end); `None` for a
/// merge no thread got to.
fn merge_parallel(
    context: &Context,
    base: git2::Oid,
    inputs: &[GroupInput],
) -> Vec<Option<Result<GroupMerge, MergeError>>> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(inputs.len())
        .max(1);
    // A group with context merges it twice (see `merge_group`).
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(inputs[k].own.len() + 2 * inputs[k].context.len()));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let claim = || {
        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        order.get(n).copied().unwrap_or(inputs.len())
    };
    let results = std::sync::Mutex::new((0..inputs.len()).map(|_| None).collect::<Vec<_>>());
    let put = |k: usize, outcome| {
        if k < inputs.len() {
            results.locked()[k] = Some(outcome);
        }
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let repo = match context.repo() {
                    Ok(r) => r,
                    Err(e) => return put(claim(), Err(e.into())),
                };
                let workdir = context.workdir();
                loop {
                    let k = claim();
                    let Some(input) = inputs.get(k) else {
                        return;
                    };
                    put(k, merge_group(&repo, workdir, base, input));
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// Merges the groups that may go up into the run's merged branch (blocking) and folds the
/// two levels into the run's merge outcome.
pub fn merge_top(context: &Context, state: &mut RunState) -> Result<MergeOutcome, MergeError> {
    let base = git2::Oid::from_str(&state.base)?;
    let repo = context.repo()?;
    let workdir = context.workdir();
    if state.tasks.iter().any(|t| !t.after.is_empty()) {
        return merge_top_tasks(&repo, workdir, state);
    }
    let branches: Vec<BranchInput> = state
        .groups
        .iter()
        .filter(|g| g.goes_up())
        .filter_map(|g| {
            Some(BranchInput {
                task: g.id.clone(),
                branch: g.branch.clone(),
                commit: git2::Oid::from_str(&g.merge.as_ref()?.commit).ok()?,
                start: None,
            })
        })
        .collect();
    let message = merge_message(state, &format!("run {}", state.id), "Groups", &branches);
    let settings = MergeSettings {
        workdir,
        branch: &state.merged_branch(),
        base,
        branches: &branches,
        message,
    };
    let top = merge::merge(&repo, &settings)?;
    for group in &mut state.groups {
        group.merged_up = top.included.contains(&group.id);
    }
    Ok(combine(state, top))
}

/// The top merge of a run whose tasks come after others: the tasks of the groups that go
/// up, merged as one level (a task's work can only go in on top of what it started from,
/// which may be another group's), folded with the groups' own merges.
fn merge_top_tasks(
    repo: &git2::Repository,
    workdir: &Path,
    state: &mut RunState,
) -> Result<MergeOutcome, MergeError> {
    let base = git2::Oid::from_str(&state.base)?;
    let up: Vec<&str> = state
        .groups
        .iter()
        .filter(|g| g.goes_up())
        .filter_map(|g| g.merge.as_ref())
        .flat_map(|m| m.included.iter().map(String::as_str))
        .collect();
    let branches = branch_inputs(
        state.tasks.iter().filter(|t| up.contains(&t.id.as_str())),
        state.culprits.as_ref(),
    );
    let message = merge_message(state, &format!("run {}", state.id), "Tasks", &branches);
    let settings = MergeSettings {
        workdir,
        branch: &state.merged_branch(),
        base,
        branches: &branches,
        message,
    };
    let top = merge::merge(repo, &settings)?;
    let mut excluded = top.excluded.clone();
    let mut waiting = top.waiting.clone();
    let mut conflicts = top.conflicts.clone();
    for group in &mut state.groups {
        group.merged_up = group.goes_up()
            && group
                .merge
                .as_ref()
                .is_some_and(|m| m.included.iter().any(|t| top.included.contains(t)));
        let Some(merge) = &group.merge else {
            continue;
        };
        take_in(group, merge, (&mut excluded, &mut waiting, &mut conflicts));
    }
    excluded.sort();
    excluded.dedup();
    waiting.sort();
    waiting.dedup();
    Ok(MergeOutcome {
        included: top.included,
        excluded,
        waiting,
        conflicts,
        ..top
    })
}

/// The supervisor of `group` (an index into the state's groups): the plan's `[groups]
/// review`, or the reviewer its first task would get.
pub fn supervisor(plan: &ResolvedPlan, state: &RunState, group: usize) -> Reviewer {
    match &plan.groups.reviewer {
        Reviewer::Worker => state.groups[group]
            .tasks
            .first()
            .and_then(|id| plan.tasks.iter().find(|t| &t.id == id))
            .map_or(Reviewer::Off, |t| plan.review.reviewer_for(t)),
        other => other.clone(),
    }
}

/// Whether anyone supervises the groups of `plan`.
pub fn supervised(plan: &ResolvedPlan) -> bool {
    match &plan.groups.reviewer {
        Reviewer::Off => false,
        Reviewer::Worker => plan
            .tasks
            .first()
            .is_some_and(|t| !matches!(plan.review.reviewer_for(t), Reviewer::Off)),
        _ => true,
    }
}

/// Adds what group `group`'s merge `merge` left out (tasks excluded by conflicts, tasks
/// waiting for what they started from) and its conflicts, named by the group, to the
/// run's.
fn take_in(
    group: &GroupRecord,
    merge: &MergeOutcome,
    (excluded, waiting, conflicts): (&mut Vec<String>, &mut Vec<String>, &mut Vec<Conflict>),
) {
    excluded.extend(merge.excluded.iter().cloned());
    waiting.extend(merge.waiting.iter().cloned());
    conflicts.extend(merge.conflicts.iter().map(|c| Conflict {
        message: format!("in {}: {}", group.id, c.message),
        ..c.clone()
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use plait_core::globs::Globs;

    fn task(id: &str, path: &str) -> ResolvedTask {
        ResolvedTask {
            id: id.to_string(),
            prompt: String::new(),
            agent: plait_plan::AgentConfig::Exec("true".into()),
            checkout: Default::default(),
            timeout: std::time::Duration::from_secs(1),
            max_turns: 1,
            token_budget: None,
            expect_changes: false,
            owns: Globs::empty(),
            context: Globs::empty(),
            owned: vec![path.to_string()],
            sandbox: Default::default(),
            check_sandbox: Default::default(),
            after: Vec::new(),
            layout: Default::default(),
            attempts: None,
            own_checks: Vec::new(),
        }
    }

    #[test]
    fn groups_keep_directories_together_and_are_near_equal() {
        let mut tasks = Vec::new();
        for (dir, n) in [("api", 5), ("db", 3), ("web", 4)] {
            for i in 0..n {
                tasks.push(task(&format!("{dir}{i}"), &format!("src/{dir}/f{i}.rs")));
            }
        }
        tasks.reverse();
        let groups = assign(&tasks, 3);
        let ids: Vec<Vec<&str>> = groups
            .iter()
            .map(|g| {
                let mut ids: Vec<&str> = g.iter().map(|&i| tasks[i].id.as_str()).collect();
                ids.sort_unstable();
                ids
            })
            .collect();
        assert_eq!(
            ids,
            vec![
                vec!["api0", "api1", "api2", "api3", "api4"],
                vec!["db0", "db1", "db2"],
                vec!["web0", "web1", "web2", "web3"]
            ]
        );
        let sizes: Vec<usize> = assign(&tasks, 5).iter().map(Vec::len).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 12);
        assert!(sizes.iter().all(|&s| (1..=4).contains(&s)), "{sizes:?}");
        assert_eq!(assign(&tasks[..2], 5).len(), 2);
    }
}
