//! What a worker is told when it goes back to its task for another round: why (the checks
//! and its reviewer, a supervisor, a person, the merged checks it breaks, or a run that
//! stopped) and what to change. The worker's backend wraps it in its round's message
//! (`prompts::worker::next_round`); an `exec` agent gets it as `PLAIT_FEEDBACK`.

use plait_core::state::{CheckResult, CulpritSet, GroupRecord, Review, RunState, Verdict};
use std::fmt::Write as _;

/// What a task whose run was interrupted is told when the run goes on.
pub const INTERRUPTED: &str = "This task was interrupted. The worktree holds the work done so \
    far (it is committed on the task's branch); look at it and carry on from there.";

/// What a task taken over from a worker that stopped is told.
pub const TAKEN_OVER: &str = "This task was taken over from another machine that stopped \
    working on it. The worktree holds the work done so far (it is committed on the task's \
    branch); look at it and carry on from there.";

/// What a task is told when the tasks it comes after changed since it started: `changed`
/// names them; `carried` says whether its work was carried onto their new result.
pub fn start_moved(changed: &[String], carried: Result<(), &str>) -> String {
    let what = match carried {
        Ok(()) => "Your work so far was carried onto their new result and is in the worktree; \
             check that it still fits what they did now, and finish."
            .to_string(),
        Err(why) => format!(
            "Your work so far could not be carried onto their new result ({why}); the \
             worktree holds their new result without it. Do the task again from there."
        ),
    };
    format!(
        "The tasks this task comes after changed since it started: {}. It starts again from \
         their new result. {what}",
        changed.join(", ")
    )
}

/// What the worker is told in its next round: the failing checks' output and the
/// reviewer's comments.
pub fn of_round(checks: &[CheckResult], review: Option<&Review>) -> Option<String> {
    let mut parts = Vec::new();
    // A check that fails exactly as on the base is nothing this task made worse; one that
    // fails otherwise is its own, the base's failure told beside it.
    for check in checks.iter().filter(|c| c.failed_here()) {
        let mut text = format!(
            "The check `{}` failed ({}). The end of its output:\n{}",
            check.command,
            check
                .exit_code
                .map_or("no exit code".to_string(), |c| format!("exit {c}")),
            check.tail
        );
        if check.at_base {
            text.push_str(
                "\nThis check also fails on the base, before any task's work, but not as it \
                 does here: what differs is this task's to fix (if making it pass is your \
                 task, make it pass).",
            );
            if !check.beyond_base.is_empty() {
                text.push_str("\nFailing here and not on the base:");
                for line in check.beyond_base.iter().take(20) {
                    let _ = write!(text, "\n- {line}");
                }
            }
        }
        parts.push(text);
    }
    if let Some(review) = review.filter(|r| r.verdict == Verdict::RequestChanges) {
        let mut text = format!("The reviewer asked for changes: {}", review.summary);
        for c in &review.comments {
            let _ = write!(text, "\n- {}{}", c.place(), c.body);
        }
        parts.push(text);
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// What a task is told when a person sends it back with `comment`.
pub fn person(comment: &str) -> String {
    format!(
        "A person reviewed your work and sent it back with this comment:\n{}\n\nChange what concerns the files your task owns.",
        comment.trim()
    )
}

/// What the tasks of `group` that its supervisor sends back are told: the supervisor's
/// summary and comments.
pub fn supervisor(group: &GroupRecord, review: &Review) -> String {
    let mut text = format!(
        "The supervisor of {} (the group of {} tasks your task belongs to) reviewed the group's \
         merged work and asked for changes: {}",
        group.id,
        group.tasks.len(),
        review.summary
    );
    for c in &review.comments {
        let _ = write!(text, "\n- {}{}", c.place(), c.body);
    }
    text.push_str("\n\nChange what concerns the files your task owns.");
    text
}

/// What a culprit of the merged checks is told (`[checks] rework`): which check broke
/// (`sentence`, the set in words as `report::culprit_sentence` says it), its output, and
/// what its partners in `state` changed.
pub fn culprit(set: &CulpritSet, sentence: &str, state: &RunState) -> String {
    let mut text = format!(
        "The run's merged checks fail with your branch merged in: {}.\n\nOutput of the failing check(s):\n{}\n",
        sentence,
        set.tail.trim_end()
    );
    for partner in &set.partners {
        let changed: Vec<&str> = state
            .task(partner)
            .map(|t| t.changes.iter().map(|c| c.path.as_str()).collect())
            .unwrap_or_default();
        let _ = write!(
            text,
            "\nTask `{partner}` (merged too) changed: {}",
            changed.join(", ")
        );
    }
    text.push_str(
        "\n\nChange the files your task owns so that the checks pass with the other tasks' changes merged in.",
    );
    text
}
