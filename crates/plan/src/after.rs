//! `after`: which tasks each task of a plan comes after, resolved from ids and globs over
//! ids (its own list, else `[defaults]`'s), with the problems a plan can have there (a
//! pattern that names no task, a task naming itself, a circle), and every task each one
//! waits for through others, which ownership and the scheduler both follow.

use std::collections::{BTreeSet, HashMap};

use super::resolved::ResolvedTask;
use super::PlanFile;

/// Each task's `after` (its own, else `[defaults]`'s): ids, or globs over ids, of the tasks
/// it waits for; a pattern that names no task, and a cycle, are problems. `[defaults]`
/// holds for every task but the ones it names, and a task's own `after = []` opts out.
pub(super) fn resolve_after(
    plan: &PlanFile,
    tasks: &mut [ResolvedTask],
    problems: &mut Vec<String>,
) {
    let ids: Vec<String> = tasks.iter().map(|t| t.id.clone()).collect();
    // Each pattern matched against the ids once: a plan of thousands of tasks that all
    // take `[defaults] after = ["m*"]` must not match them all again for each.
    let mut matches: HashMap<&str, Result<Vec<usize>, String>> = HashMap::new();
    let matched_by = |pattern: &'_ str| -> Result<Vec<usize>, String> {
        if !pattern.contains(['*', '?', '[']) {
            return Ok(ids
                .iter()
                .position(|id| id == pattern)
                .into_iter()
                .collect());
        }
        let glob = globset::Glob::new(pattern).map_err(|e| e.to_string())?;
        let glob = glob.compile_matcher();
        Ok((0..ids.len()).filter(|&k| glob.is_match(&ids[k])).collect())
    };
    if let Some(patterns) = &plan.defaults.after {
        for pattern in patterns {
            let found = matched_by(pattern);
            match &found {
                Err(e) => problems.push(format!("[defaults] after `{pattern}`: {e}")),
                Ok(m) if m.is_empty() => problems.push(format!(
                    "[defaults] after `{pattern}` names no task of the plan"
                )),
                Ok(_) => {}
            }
            matches.insert(pattern, found);
        }
    }
    for (t, file) in plan.tasks.iter().enumerate().take(tasks.len()) {
        let (patterns, own) = match (&file.after, &plan.defaults.after) {
            (Some(own), _) => (own, true),
            (None, Some(defaults)) => (defaults, false),
            (None, None) => continue,
        };
        let mut after = Vec::new();
        for pattern in patterns {
            let found = matches
                .entry(pattern)
                .or_insert_with(|| matched_by(pattern))
                .clone();
            let matched = match found {
                Ok(m) => m,
                Err(e) => {
                    if own {
                        problems.push(format!("task `{}`: after `{pattern}`: {e}", ids[t]));
                    }
                    continue;
                }
            };
            let others: Vec<usize> = matched.iter().copied().filter(|&k| k != t).collect();
            if own && others.is_empty() {
                let why = if matched == [t] {
                    "names only the task itself, and a task cannot come after itself"
                } else {
                    "names no other task of the plan"
                };
                problems.push(format!("task `{}`: after `{pattern}` {why}", ids[t]));
            }
            after.extend(others);
        }
        after.sort_unstable();
        after.dedup();
        tasks[t].after = after;
    }
    if let Some(cycle) = find_cycle(tasks) {
        let names: Vec<&str> = cycle.iter().map(|&k| ids[k].as_str()).collect();
        problems.push(format!(
            "the tasks wait for each other in a circle: {}; no task of it could ever start",
            names.join(" → ")
        ));
    }
}

/// A circle of `after`, as the tasks on it with the first repeated at the end.
fn find_cycle(tasks: &[ResolvedTask]) -> Option<Vec<usize>> {
    // 0: not seen, 1: on the path, 2: done.
    let mut mark = vec![0u8; tasks.len()];
    let mut path = Vec::new();
    fn visit(
        k: usize,
        tasks: &[ResolvedTask],
        mark: &mut [u8],
        path: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        mark[k] = 1;
        path.push(k);
        for &d in &tasks[k].after {
            if mark[d] == 1 {
                let from = path.iter().position(|&p| p == d).unwrap_or(0);
                let mut cycle = path[from..].to_vec();
                cycle.push(d);
                // In the order the work flows: what is waited for first.
                cycle.reverse();
                return Some(cycle);
            }
            if mark[d] == 0 {
                if let Some(cycle) = visit(d, tasks, mark, path) {
                    return Some(cycle);
                }
            }
        }
        path.pop();
        mark[k] = 2;
        None
    }
    (0..tasks.len()).find_map(|k| {
        if mark[k] == 0 {
            visit(k, tasks, &mut mark, &mut path)
        } else {
            None
        }
    })
}

/// For each task, every task it waits for, directly or through others.
pub fn waits_for(tasks: &[ResolvedTask]) -> Vec<BTreeSet<usize>> {
    let mut all: Vec<Option<BTreeSet<usize>>> = vec![None; tasks.len()];
    fn close(
        k: usize,
        tasks: &[ResolvedTask],
        all: &mut Vec<Option<BTreeSet<usize>>>,
        depth: usize,
    ) -> BTreeSet<usize> {
        if let Some(done) = &all[k] {
            return done.clone();
        }
        let mut set = BTreeSet::new();
        // A cycle is a problem reported elsewhere; stop rather than loop.
        if depth <= tasks.len() {
            for &d in &tasks[k].after {
                set.insert(d);
                set.extend(close(d, tasks, all, depth + 1));
            }
        }
        all[k] = Some(set.clone());
        set
    }
    (0..tasks.len())
        .map(|k| close(k, tasks, &mut all, 0))
        .collect()
}
