//! The words a model reviewer reads: a system prompt whose first part — its job and the
//! run's goal — is the same for every task, and whose second part is the task under
//! review; then one message with the checks' results and the diff. A supervisor is a
//! reviewer too: its task is its group, its prompt the group's brief (`supervisor`).

use plait_core::state::CheckResult;
use plait_llm::conversation::System;
use std::fmt::Write as _;

/// Bytes of the diff a reviewer is shown; past it the diff is cut.
const MAX_DIFF: usize = 200_000;

/// The reviewer's system prompt for `task`; it must answer by calling `tool`.
pub fn system(goal: &str, task: &str, prompt: &str, owns: &[String], tool: &str) -> System {
    let goal = if goal.trim().is_empty() {
        "(none given)"
    } else {
        goal.trim()
    };
    System {
        shared: format!(
            "You review the work of coding agents that change one git repository in parallel, each \
             owning its own files. The goal of the whole run: {goal}\n\n\
             Judge one task's diff: does it do what the task asks, completely and correctly, without \
             unrelated changes, in the project's style? The checks' results are included. Answer only \
             by calling {tool}."
        ),
        task: format!(
            "Review of task: {}\n\nThe task's prompt:\n{}\n\nIt owns: {}",
            task,
            prompt,
            owns.join(", ")
        ),
    }
}

/// The reviewer's message: each check's result (a failed one's output), then the diff
/// against the base, cut at [`MAX_DIFF`] bytes.
pub fn message(checks: &[CheckResult], diff: &str) -> String {
    let mut text = String::new();
    if checks.is_empty() {
        text.push_str("No checks were run.\n");
    }
    for c in checks {
        let _ = writeln!(
            text,
            "Check `{}`: {}",
            c.command,
            if c.passed {
                "passed".to_string()
            } else {
                format!("FAILED\n{}", c.tail)
            }
        );
    }
    let mut diff = diff.to_string();
    if diff.len() > MAX_DIFF {
        let cut = (0..=MAX_DIFF)
            .rev()
            .find(|&i| diff.is_char_boundary(i))
            .unwrap_or(0);
        diff.truncate(cut);
        diff.push_str("\n[diff truncated]\n");
    }
    let _ = writeln!(text, "\nThe diff against the base:\n```diff\n{diff}```");
    text
}
