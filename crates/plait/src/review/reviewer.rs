//! The reviewer: a model that must answer through the `submit_review` tool (forced tool
//! choice) with `{verdict, summary, comments}`, or a command whose exit status is the
//! verdict (0 approve, 1 request changes with its output as comments, 2 reject). A model's
//! malformed answer is asked for again, then counts as a request for changes with a note.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::agent::Budget;
use crate::cancel::Cancel;
use crate::llm::conversation::{Block, Message, ToolSpec};
use crate::llm::forced_tool_body;
use crate::llm::http::{self, Transcript};
use crate::llm::limiter::{Limiter, Limiters};
use crate::llm::provider::ProviderSettings;
use crate::plan::Reviewer;
use crate::prompts;
use crate::sandbox::{Sandbox, SandboxSettings};
use crate::shell::{self, Launch, ShellOutcome};
use crate::state::{CheckResult, Comment, Review, Usage, Verdict};

/// The tool a model reviewer answers with.
pub const SUBMIT_REVIEW: &str = "submit_review";
const ATTEMPTS: u32 = 3;

/// What a reviewer is shown.
pub struct ReviewInput<'a> {
    pub run: &'a str,
    pub goal: &'a str,
    pub task: &'a str,
    pub prompt: &'a str,
    pub owns: &'a [String],
    pub diff: &'a str,
    pub checks: &'a [CheckResult],
    pub round: u32,
    pub base: String,
    pub commit: String,
    /// The task's worktree, where a command reviewer runs.
    pub worktree: PathBuf,
    /// The task's directory for review files (diff, log, transcript).
    pub dir: PathBuf,
    pub timeout: Duration,
    /// The run's cost budget; a model reviewer's cost counts against it.
    pub budget: &'a Budget,
    /// The walls of a command reviewer: it may write only `dir` (and its own TMPDIR).
    pub sandbox: &'a SandboxSettings,
}

/// Reviews one round of a task; `None` when the reviewer is off.
pub async fn review(
    reviewer: &Reviewer,
    input: &ReviewInput<'_>,
    client: &reqwest::Client,
    limiters: &Limiters,
    cancel: &Cancel,
) -> Option<Review> {
    match reviewer {
        Reviewer::Off | Reviewer::Worker => None,
        Reviewer::Command(command) => Some(by_command(command, input, cancel).await),
        Reviewer::Model(provider) => {
            let limiter = limiters.get(provider);
            Some(by_model(provider, &limiter, input, client, cancel).await)
        }
    }
}

async fn by_command(command: &str, input: &ReviewInput<'_>, cancel: &Cancel) -> Review {
    let diff_path = input.dir.join(format!("review-{}.diff", input.round));
    let log = input.dir.join(format!("review-{}.log", input.round));
    let _ = std::fs::write(&diff_path, input.diff);
    let _ = std::fs::write(&log, "");
    let env = vec![
        ("PLAIT_RUN", input.run.to_string()),
        ("PLAIT_TASK", input.task.to_string()),
        ("PLAIT_GOAL", input.goal.to_string()),
        ("PLAIT_PROMPT", input.prompt.to_string()),
        ("PLAIT_ROUND", input.round.to_string()),
        ("PLAIT_BASE", input.base.clone()),
        ("PLAIT_COMMIT", input.commit.clone()),
        ("PLAIT_DIFF", diff_path.display().to_string()),
    ];
    // It reads the worktree but writes nothing there: what it wrote would be collected as
    // the worker's work.
    let sandbox = Sandbox::new(input.sandbox, vec![input.dir.clone()]);
    let launch = Launch {
        dir: &input.worktree,
        env: &env,
        log: &log,
        timeout: input.timeout,
        cancel,
        sandbox: &sandbox,
    };
    let outcome = shell::run(command, &launch).await;
    let output = shell::tail(&log, 60, 4000);
    let comments = if output.trim().is_empty() {
        Vec::new()
    } else {
        vec![Comment {
            path: String::new(),
            line: None,
            body: output.trim().to_string(),
        }]
    };
    let (verdict, note) = match outcome {
        ShellOutcome::Exited(0) => (Verdict::Approve, None),
        ShellOutcome::Exited(1) => (Verdict::RequestChanges, None),
        ShellOutcome::Exited(2) => (Verdict::Reject, None),
        other => (
            Verdict::RequestChanges,
            Some(format!(
                "the reviewer command did not give a verdict: {}",
                other.describe(input.timeout)
            )),
        ),
    };
    Review {
        verdict,
        summary: match verdict {
            Verdict::Approve => "approved by the review command".to_string(),
            Verdict::RequestChanges => "the review command asked for changes".to_string(),
            Verdict::Reject => "rejected by the review command".to_string(),
        },
        comments,
        by: "command".to_string(),
        round: input.round,
        note,
        usage: None,
    }
}

fn tool() -> ToolSpec {
    ToolSpec {
        name: SUBMIT_REVIEW,
        description: "Submit your review of the task's diff. approve: it does what the task asks, \
            correctly. request_changes: fixable problems; say exactly what to change in comments. \
            reject: wrong approach or harmful; it must not be merged.",
        schema: json!({
            "type": "object",
            "properties": {
                "verdict": {"type": "string", "enum": ["approve", "request_changes", "reject"]},
                "summary": {"type": "string"},
                "comments": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "line": {"type": "integer"},
                            "body": {"type": "string"}
                        },
                        "required": ["body"]
                    }
                }
            },
            "required": ["verdict", "summary"]
        }),
    }
}

async fn by_model(
    provider: &ProviderSettings,
    limiter: &Limiter,
    input: &ReviewInput<'_>,
    client: &reqwest::Client,
    cancel: &Cancel,
) -> Review {
    let system = prompts::reviewer::system(
        input.goal,
        input.task,
        input.prompt,
        input.owns,
        SUBMIT_REVIEW,
    );
    let messages = [Message::user_text(prompts::reviewer::message(
        input.checks,
        input.diff,
    ))];
    let mut transcript = Transcript::open(&input.dir.join("review.jsonl"));
    let mut usage = Usage {
        cost_usd: provider.prices.map(|_| 0.0),
        ..Usage::default()
    };
    let mut problem = String::new();
    for attempt in 1..=ATTEMPTS {
        if let Some(reason) = input.budget.exhausted() {
            problem = format!("not reviewed: {reason}");
            break;
        }
        let body = forced_tool_body(provider, &system, tool(), &messages);
        let (reply, timing) = match http::call(
            client,
            provider,
            limiter,
            &body,
            attempt,
            &mut transcript,
            cancel,
        )
        .await
        {
            Ok(r) => r,
            Err(reason) => {
                problem = format!("the reviewer could not be reached: {reason}");
                break;
            }
        };
        let before = usage.cost_usd.unwrap_or(0.0);
        crate::llm::account(&mut usage, provider, &reply, &timing);
        input.budget.spend(usage.cost_usd.unwrap_or(0.0) - before);
        match parse(&reply.content) {
            Ok((verdict, summary, comments)) => {
                return Review {
                    verdict,
                    summary,
                    comments,
                    by: "model".to_string(),
                    round: input.round,
                    note: (attempt > 1).then(|| format!("answered on attempt {attempt}")),
                    usage: Some(usage),
                }
            }
            Err(e) => problem = e,
        }
    }
    Review {
        verdict: Verdict::RequestChanges,
        summary: "the reviewer gave no usable verdict".to_string(),
        comments: Vec::new(),
        by: "model".to_string(),
        round: input.round,
        note: Some(format!("counted as request_changes: {problem}")),
        usage: Some(usage),
    }
}

/// Reads a `submit_review` call from a reply.
pub fn parse(content: &[Block]) -> Result<(Verdict, String, Vec<Comment>), String> {
    let Some(input) = content.iter().find_map(|b| match b {
        Block::ToolUse { name, input, .. } if name == SUBMIT_REVIEW => Some(input),
        _ => None,
    }) else {
        return Err(format!("the answer did not call {SUBMIT_REVIEW}"));
    };
    let input: &Value = input
        .as_ref()
        .map_err(|raw| format!("its input is not JSON: {raw}"))?;
    let verdict = match input.get("verdict").and_then(Value::as_str) {
        Some("approve") => Verdict::Approve,
        Some("request_changes") => Verdict::RequestChanges,
        Some("reject") => Verdict::Reject,
        Some(other) => return Err(format!("unknown verdict `{other}`")),
        None => return Err("the verdict is missing".to_string()),
    };
    let summary = input
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let comments = input
        .get("comments")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|c| {
                    Some(Comment {
                        body: c.get("body").and_then(Value::as_str)?.to_string(),
                        path: c
                            .get("path")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        line: c.get("line").and_then(Value::as_u64),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok((verdict, summary, comments))
}
