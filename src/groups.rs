//! Supervisors, for large runs: tasks are grouped by path proximity; each group's branches
//! are merged into `plait/<run>/group-<k>`, where conflicts between its own tasks are found;
//! a supervisor reviews that merge as a whole; approved groups are merged at the top, where
//! only conflicts between groups can remain. This module cuts the groups and folds the two
//! levels of merging into the run's one merge outcome.

use std::collections::BTreeSet;

use crate::merge::{Conflict, MergeOutcome};
use crate::plan::ResolvedTask;
use crate::state::{group_branch, GroupRecord, RunState};

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
    for group in &state.groups {
        let Some(merge) = &group.merge else {
            continue;
        };
        excluded.extend(merge.excluded.iter().cloned());
        conflicts.extend(merge.conflicts.iter().map(|c| Conflict {
            message: format!("in {}: {}", group.id, c.message),
            ..c.clone()
        }));
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
    MergeOutcome {
        branch: top.branch,
        commit: top.commit,
        included,
        excluded,
        conflicts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::globs::Globs;

    fn task(id: &str, path: &str) -> ResolvedTask {
        ResolvedTask {
            id: id.to_string(),
            prompt: String::new(),
            agent: crate::plan::AgentConfig::Exec("true".into()),
            checkout: Default::default(),
            timeout: std::time::Duration::from_secs(1),
            max_turns: 1,
            token_budget: None,
            owns: Globs::empty(),
            context: Globs::empty(),
            owned: vec![path.to_string()],
            sandbox: Default::default(),
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
