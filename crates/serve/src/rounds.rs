//! A task's rounds as its page shows them: round by round, what the agent was told (the
//! task's prompt, a person's send-back comment, what a person told it while the round
//! before ran, or the feedback of the round before), the
//! checks and the review that judged the round, and how the round ended. The record keeps
//! the last round's checks and review and every send-back; the rounds before are read back
//! from the task's directory (`checks-<round>/check-<n>.log`, `review-<round>.log`), whose
//! logs say what ran and what it printed but not whether a check passed: for those rounds
//! the page knows only that changes were asked for, since another round followed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use plait_core::state::{Comment, TaskDir, TaskRecord, TaskState, Verdict};

/// How much of a round's log the page is sent: its last lines, at most this many bytes.
const OUTPUT_LINES: usize = 40;
const OUTPUT_BYTES: usize = 4000;

/// One round of a task.
#[derive(Debug, Serialize)]
pub(super) struct Round {
    /// `PLAIT_ROUND`: 0 for the first try.
    pub round: u32,
    pub told: Told,
    pub checks: Vec<RoundCheck>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<RoundReview>,
    /// How the round ended, in a few words.
    pub outcome: String,
}

/// What the agent was told at the start of a round.
#[derive(Debug, Serialize)]
pub(super) struct Told {
    /// `prompt` (the first try), `person` (a send-back), `steer` (what a person told its
    /// agent while the round before ran: `plait tell`, the page), `feedback` (the checks'
    /// and the reviewer's of the round before).
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
}

/// One check of a round; `passed` is known for the last round only.
#[derive(Debug, Serialize)]
pub(super) struct RoundCheck {
    pub command: String,
    pub passed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The end of its output.
    pub output: String,
}

/// The review of a round: the record's for the last one, a command reviewer's output for
/// the others.
#[derive(Debug, Serialize)]
pub(super) struct RoundReview {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<Comment>,
    /// What a command reviewer printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// The rounds of `task`, whose directory is `dir`, first to last.
pub(super) fn rounds(task: &TaskRecord, dir: &Path) -> Vec<Round> {
    let mut logs: BTreeMap<u32, Vec<plait_stages::report::logs::CheckLog>> = BTreeMap::new();
    for log in plait_stages::report::logs::check_logs(task) {
        logs.entry(log.round).or_default().push(log);
    }
    let last = logs
        .keys()
        .next_back()
        .copied()
        .unwrap_or(0)
        .max(task.rounds);
    if task.state == TaskState::Pending {
        return Vec::new();
    }
    (0..=last)
        .map(|round| {
            let checks = logs
                .remove(&round)
                .unwrap_or_default()
                .into_iter()
                .map(|log| {
                    let recorded = task.checks.iter().find(|c| c.log == log.path);
                    RoundCheck {
                        command: log.command,
                        passed: recorded.map(|c| c.passed),
                        exit_code: recorded.and_then(|c| c.exit_code),
                        output: output(&log.path),
                    }
                })
                .collect();
            Round {
                round,
                told: told(task, round),
                checks,
                review: review(task, round, dir),
                outcome: outcome(task, round, last),
            }
        })
        .collect()
}

fn told(task: &TaskRecord, round: u32) -> Told {
    if let Some(sent) = task.sent_back.iter().rev().find(|s| s.round == round) {
        return Told {
            kind: "person",
            text: Some(sent.comment.clone()),
            at: Some(sent.at),
        };
    }
    let steered = steered(task, round);
    if let Some(first) = round.checked_sub(1).and(steered.first()) {
        let texts: Vec<&str> = steered.iter().map(|t| t.text.as_str()).collect();
        return Told {
            kind: "steer",
            text: Some(texts.join("\n\n")),
            at: Some(first.at),
        };
    }
    Told {
        kind: if round == 0 { "prompt" } else { "feedback" },
        text: None,
        at: None,
    }
}

/// What people told `task`'s agent while the round before `round` ran that it heard as
/// `round`'s comment.
fn steered(task: &TaskRecord, round: u32) -> Vec<&plait_core::state::Told> {
    task.told
        .iter()
        .filter(|t| t.way == "next round" && t.heard_at.is_some())
        .filter(|t| Some(t.round) == round.checked_sub(1))
        .collect()
}

fn review(task: &TaskRecord, round: u32, dir: &Path) -> Option<RoundReview> {
    let printed = dir.join(format!("review-{round}.log"));
    let printed = printed
        .is_file()
        .then(|| output(&printed))
        .filter(|s| !s.trim().is_empty());
    match task.review.as_ref().filter(|r| r.round == round) {
        Some(r) => Some(RoundReview {
            verdict: Some(r.verdict),
            by: Some(r.by.clone()),
            summary: Some(r.summary.clone()).filter(|s| !s.is_empty()),
            comments: r.comments.clone(),
            output: printed.filter(|p| !r.comments.iter().any(|c| c.body.trim() == p.trim())),
        }),
        None => printed.map(|output| RoundReview {
            verdict: None,
            by: None,
            summary: None,
            comments: Vec::new(),
            output: Some(output),
        }),
    }
}

fn outcome(task: &TaskRecord, round: u32, last: u32) -> String {
    if round < last {
        return if task.sent_back.iter().any(|s| s.round == round + 1) {
            "ended; then a person sent it back".to_string()
        } else if !steered(task, round + 1).is_empty() {
            "ended; what a person told it followed as its next round's comment".to_string()
        } else {
            "changes asked for: another round followed".to_string()
        };
    }
    let verdict = task
        .verdict()
        .map(|v| format!(" · {}", v.as_str().replace('_', " ")))
        .unwrap_or_default();
    match (&task.error, task.state.is_final()) {
        (Some(error), _) => format!("{}: {error}", task.state.as_str()),
        (None, true) => format!("{}{verdict}", task.state.as_str()),
        (None, false) => format!("{} (going on)", task.state.as_str()),
    }
}

fn output(path: &Path) -> String {
    plait_sandbox::shell::tail(path, OUTPUT_LINES, OUTPUT_BYTES)
}

/// The commit a person made on the task's branch that plait collected (`plait land` or
/// `plait check` adopting it), as the record's checks' logs name it.
pub(super) fn adopted(task: &TaskRecord) -> Option<String> {
    let named = TaskDir(PathBuf::new()).checks_by_hand("");
    let prefix = named.file_name()?.to_str()?;
    task.checks.iter().find_map(|c| {
        let dir = c.log.parent()?.file_name()?.to_str()?;
        dir.strip_prefix(prefix).map(str::to_string)
    })
}
