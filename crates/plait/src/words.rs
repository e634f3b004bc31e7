//! What the use cases did, in words: the same lines for the command line and the page.
//! `ops` returns facts; this module, above it and below both of its callers, says them (a
//! person's decision, a landing's notes, outcome and refusal, a steering the run has not
//! answered yet).

use std::fmt::Write as _;

use crate::ops::decide::Decided;
use crate::ops::land::{Landing, Remerged};
use plait_core::git;
use plait_core::state::{RunState, Verdict};
use plait_stages::land::{LandOutcome, Refusal};

/// What the decision did, with how to land the run with it.
pub fn decided(decided: &Decided) -> String {
    let word = if decided.verdict == Verdict::Approve {
        "accepted"
    } else {
        "rejected"
    };
    format!(
        "{} {} of run {} {word}; `plait land {} --into BRANCH` merges again with this decision",
        decided.what, decided.id, decided.run, decided.run
    )
}

/// That run `run` has not answered a request to steer one of its tasks (`plait tell`,
/// `plait stop`) in time; each caller says where its answer will show.
pub fn not_answered(run: &str) -> String {
    format!("run {run} has not answered yet; it takes the request when it next looks")
}

/// What was done before the landing (branches collected, the merge made again), a line
/// each.
pub fn landing_notes(landing: &Landing) -> Vec<String> {
    let mut notes: Vec<String> = landing
        .adopted
        .iter()
        .map(|adopted| {
            let checks = match adopted.checks_pass {
                None => "no task checks",
                Some(true) => "task checks pass",
                Some(false) => "task checks FAIL",
            };
            format!(
                "branch of task {} moved by hand: collected its commits (own files only; {checks}); merging again and re-running the merged checks",
                adopted.task
            )
        })
        .collect();
    if landing.remerged == Some(Remerged::Decisions) {
        notes.push(format!(
            "decisions changed which tasks belong in run {}: merging again and re-running the merged checks",
            landing.run
        ));
    }
    notes
}

/// The landing's outcome in a line, unless it was refused ([`land_refusal`] says why).
pub fn landing_line(landing: &Landing) -> Option<String> {
    let run = &landing.run;
    match &landing.outcome {
        LandOutcome::Landed(record) => Some(format!(
            "landed run {run} into {}: {} → {} ({}{})",
            record.branch,
            git::short(&record.from),
            git::short(&record.to),
            if record.fast_forward {
                "fast-forward"
            } else {
                "merge commit"
            },
            if record.partial {
                "; in part: the tasks that did not merge cleanly are left out"
            } else {
                ""
            }
        )),
        LandOutcome::AlreadyLanded { branch } => {
            Some(format!("{branch} already contains run {run}'s result"))
        }
        LandOutcome::Refused(_) => None,
    }
}

/// Why a landing was refused, as one message listing what stands in the way, and what to
/// do about it.
pub fn land_refusal(
    run: &str,
    into: &str,
    state: &RunState,
    refusal: &Refusal,
) -> (String, String) {
    let (mut msg, items, hint) = match refusal {
        Refusal::Gate(why) => (
            format!("not landing run {run}:"),
            why.iter()
                .map(|w| plait_stages::report::blocker_line(w, run))
                .collect::<Vec<_>>(),
            format!(
                "`plait status {run}` shows the details; --partial lands only the tasks that merged cleanly"
            ),
        ),
        Refusal::Conflicts(conflicts) => (
            format!("not landing run {run}: {into} moved on and conflicts with it:"),
            conflicts
                .iter()
                .map(|c| {
                    let tasks = if c.tasks.is_empty() {
                        String::new()
                    } else {
                        format!(" (tasks {})", c.tasks.join(", "))
                    };
                    format!("{} ({}){tasks}", c.path, c.kind)
                })
                .collect(),
            format!(
                "merge {} into {into} by hand, or rebase the run's work onto it",
                state.merged_branch()
            ),
        ),
        Refusal::Dirty { worktree, paths } => (
            format!(
                "not landing run {run}: {into} is checked out in {} with uncommitted changes the landing would overwrite:",
                worktree.display()
            ),
            paths.clone(),
            "commit or stash those changes, then land again".to_string(),
        ),
    };
    for item in &items {
        let _ = write!(msg, "\n  - {item}");
    }
    (msg, hint)
}
