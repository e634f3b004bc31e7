//! Stage 5: review. Each task's branch is judged before it may be merged: the `[checks]`
//! commands run against a full checkout of it, and a reviewer — a model answering through
//! `submit_review`, or a command — reads its diff and the check results. A failing check
//! or a request for changes sends the worker back to its worktree for another round
//! (bounded); a rejection keeps the branch out of the merge. The merged branch gets its own
//! checks; all of it together is the gate `plait land` obeys.

pub mod checkout;
pub mod checks;
pub mod reviewer;

use crate::state::{CheckResult, Review, Verdict};

/// What the worker is told in its next round: the failing checks' output and the
/// reviewer's comments.
pub fn feedback(checks: &[CheckResult], review: Option<&Review>) -> Option<String> {
    let mut parts = Vec::new();
    for check in checks.iter().filter(|c| !c.passed) {
        parts.push(format!(
            "The check `{}` failed ({}). The end of its output:\n{}",
            check.command,
            check
                .exit_code
                .map_or("no exit code".to_string(), |c| format!("exit {c}")),
            check.tail
        ));
    }
    if let Some(review) = review.filter(|r| r.verdict == Verdict::RequestChanges) {
        let mut text = format!("The reviewer asked for changes: {}", review.summary);
        for c in &review.comments {
            text.push_str(&format!("\n- {}{}", c.place(), c.body));
        }
        parts.push(text);
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}
