//! What keeps a run from landing, as people read it: each blocker of the gate in one
//! sentence (the status, the JSON and `plait land` say the same), the culprits the gate's
//! bisection held out, and the status's closing section of what needs a person.

use std::fmt::Write as _;

use crate::land::{Blocker, Trouble};
use plait_core::state::{CulpritSet, RunState};

/// What needs a person before the run can land, one sentence per blocker.
pub fn attention(state: &RunState) -> Vec<String> {
    crate::land::blockers(state)
        .iter()
        .map(|b| blocker_line(b, &state.id))
        .collect()
}

/// One blocker of the gate as the status, the JSON and `plait land` say it.
pub fn blocker_line(blocker: &Blocker, run: &str) -> String {
    let list = |tasks: &[String]| format!("{} task(s)", tasks.len());
    match blocker {
        Blocker::Tasks { trouble, tasks } => {
            let what = match trouble {
                Trouble::Failed => "failed".to_string(),
                Trouble::Violations => "changed files they do not own".to_string(),
                Trouble::Interrupted => format!(
                    "interrupted (their work so far is committed on their branches; `plait resume {run}` goes on)"
                ),
                Trouble::Stopped => "stopped by a budget".to_string(),
                Trouble::NotApproved => {
                    "not approved (changes still requested; left out of the merge)".to_string()
                }
                Trouble::Rejected => "rejected (left out of the merge)".to_string(),
                Trouble::Unchanged => format!(
                    "ended without changing any file they own, though asked to: the agent \
                     changed nothing (`plait log {run} TASK` says what it did; `plait \
                     send-back {run} TASK -m ...` for another round, `plait accept {run} \
                     TASK` if nothing was needed)"
                ),
                Trouble::Blocked => format!(
                    "blocked, never started: a task they come after did not end well \
                     (`plait status {run}` says which; once it is mended or accepted, \
                     `plait send-back {run} TASK` starts one; `plait land {run} --partial` \
                     lands the rest)"
                ),
            };
            format!("{} {what}: {}", list(tasks), tasks.join(", "))
        }
        Blocker::Interrupted => "the run was interrupted".to_string(),
        Blocker::Unfinished(n) => format!("{n} task(s) did not finish"),
        Blocker::BaseChecksFailed(commands) => format!(
            "task checks fail on the base too, before any task: {} (fix the base, or [checks] base = \"ignore\")",
            commands.join("; ")
        ),
        Blocker::MergedChecksFailed(commands) => {
            format!("merged checks failed: {}", commands.join("; "))
        }
        Blocker::GroupsHeld(groups) => {
            let named: Vec<String> = groups
                .iter()
                .map(|(group, why)| format!("{group} ({why})"))
                .collect();
            format!(
                "{} group(s) not approved by their supervisor, left out of the merge: {} (`plait accept {run} GROUP` overrules)",
                groups.len(),
                named.join(", ")
            )
        }
        Blocker::Conflicts { count, excluded } => format!(
            "{count} conflict(s); left out of the merge: {}",
            excluded.join(", ")
        ),
        Blocker::NotFinished => format!("run {run} has not finished"),
        Blocker::Cleaned => format!("run {run} was cleaned; its branches are gone"),
        Blocker::NoMerge => format!("run {run} has no merged result"),
        Blocker::MergedCheckFailed(command) => format!("merged check `{command}` failed"),
        Blocker::Moved { branch } => format!("branch {branch} moved since the run committed to it"),
        Blocker::LeftOutByConflicts(tasks) => {
            format!("left out of the merge by conflicts: {}", tasks.join(", "))
        }
        Blocker::Waiting(tasks) => {
            let each: Vec<String> = tasks
                .iter()
                .map(|(id, cause)| format!("{id} ({cause})"))
                .collect();
            let again: Vec<&str> = tasks
                .iter()
                .filter(|(_, c)| c.missing.is_empty() && !c.moved.is_empty())
                .map(|(id, _)| id.as_str())
                .collect();
            let hint = match again.as_slice() {
                [] => String::new(),
                [one] => format!(
                    "; `plait send-back {run} {one} -m TEXT` runs it again from their work as it is now"
                ),
                _ => format!(
                    "; `plait send-back {run} TASK -m TEXT` runs {} again from their work as it is now",
                    again.join(", ")
                ),
            };
            format!(
                "left out of the merge with what they started from: {}{hint} (`plait land {run} --partial` lands the rest)",
                each.join(", ")
            )
        }
        Blocker::Culprits(sets) => {
            let named: Vec<String> = sets.iter().map(culprit_sentence).collect();
            format!(
                "{}; held out of the merge (`plait land {run} --partial` lands the rest)",
                named.join("; ")
            )
        }
    }
}

/// "`parser` breaks `cargo test` together with `lexer`".
pub fn culprit_sentence(set: &CulpritSet) -> String {
    let quoted = |items: &[String]| -> String {
        let q: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
        match q.as_slice() {
            [] => String::new(),
            [one] => one.clone(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        }
    };
    let checks = if set.checks.is_empty() {
        "the merged checks".to_string()
    } else {
        quoted(&set.checks)
    };
    let culprits = quoted(&set.tasks);
    let verb = if set.tasks.len() == 1 {
        "breaks"
    } else {
        "break"
    };
    if set.partners.is_empty() {
        format!("{culprits} {verb} {checks}")
    } else {
        format!(
            "{culprits} {verb} {checks} together with {}",
            quoted(&set.partners)
        )
    }
}

/// What the culprit search found, in words: one line per finding.
pub(super) fn culprit_lines(out: &mut String, state: &RunState) {
    let Some(c) = &state.culprits else {
        return;
    };
    let _ = writeln!(
        out,
        "
culprit search ({} check run(s)):",
        c.runs
    );
    for set in &c.sets {
        let _ = writeln!(
            out,
            "  {}; held out of {} (output: {})",
            culprit_sentence(set),
            state.merged_branch(),
            set.logs.display()
        );
    }
    if !c.base_fails.is_empty() {
        let _ = writeln!(
            out,
            "  {} fail(s) on the base alone: no task is to blame",
            c.base_fails
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !c.flaky.is_empty() {
        let _ = writeln!(
            out,
            "  flaky: {} failed, then passed on the same tree; no task is blamed",
            c.flaky
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if c.stopped {
        let _ = writeln!(out, "  interrupted before it ended");
    }
}

/// Serializes blockers as their sentences (the JSON's `gate` and `attention` fields).
pub fn serialize_blockers<S: serde::Serializer>(
    blockers: &[Blocker],
    run: &str,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq as _;
    let mut seq = serializer.serialize_seq(Some(blockers.len()))?;
    for b in blockers {
        seq.serialize_element(&blocker_line(b, run))?;
    }
    seq.end()
}

/// What needs a person before the run can land, as a list under its heading.
pub(super) fn attention_lines(out: &mut String, state: &RunState) {
    let attention = attention(state);
    if !attention.is_empty() {
        let _ = writeln!(out, "\nneeds attention:");
        for a in &attention {
            let _ = writeln!(out, "  - {a}");
        }
    }
}
