//! The reviewer: a model that must answer through the `submit_review` tool (forced tool
//! choice) with `{verdict, summary, comments}`; Claude Code answering in that form
//! (`--json-schema`) with read-only tools; any agent program whose last JSON object on
//! stdout (or the file `{answer}`) is that answer; or a command whose exit status is the
//! verdict (0 approve, 1 request changes with its output as comments, 2 reject). A
//! malformed answer is asked for again, then counts as a request for changes with a note:
//! never as an approval.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::agent::Budget;
use crate::plan::Reviewer;
use crate::prompts;
use plait_core::cancel::Cancel;
use plait_core::state::{CheckResult, Comment, Review, Usage, Verdict};
use plait_llm::conversation::{Block, Message, ToolSpec};
use plait_llm::forced_tool_body;
use plait_llm::http::{self, Transcript};
use plait_llm::limiter::{Limiter, Limiters};
use plait_llm::provider::ProviderSettings;
use plait_sandbox::sandbox::{Sandbox, SandboxSettings};
use plait_sandbox::shell::{self, Launch, ShellOutcome};

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
    /// The plait binary, for Claude Code's guard.
    pub plait_program: &'a std::path::Path,
    /// A Claude Code or `{ cli }` reviewer's way to its model, when it has one.
    pub gateway: Option<&'a crate::agent::RoleGateway>,
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
        Reviewer::ClaudeCode(settings) => Some(by_claude_code(settings, input, cancel).await),
        Reviewer::Cli(cli) => Some(by_cli(cli, input, cancel).await),
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

/// The walls of a Claude Code or `{ cli }` reviewer: the checks' (it writes only `dir`),
/// with the gateway's port open when it reaches its model through it.
fn role_sandbox(input: &ReviewInput<'_>) -> Sandbox {
    let settings = match input.gateway {
        Some(g) => input
            .sandbox
            .with_network(plait_sandbox::sandbox::Network::Gateway)
            .through_gateway(g.lease.port()),
        None => input.sandbox.clone(),
    };
    Sandbox::new(&settings, vec![input.dir.clone()])
}

/// What a role's answer used: the gateway's count where it saw the answers, else the
/// program's own.
fn role_usage(input: &ReviewInput<'_>, own: Option<Usage>) -> Option<Usage> {
    input.gateway.and_then(|g| g.tally.take()).or(own)
}

/// A review in Claude Code: the reviewer's prompt, the task's diff and checks, read-only
/// tools in the task's worktree, and `submit_review`'s schema as the answer's form; asked
/// again when its answer is not a verdict.
async fn by_claude_code(
    settings: &crate::plan::ToolSettings,
    input: &ReviewInput<'_>,
    cancel: &Cancel,
) -> Review {
    let system = prompts::reviewer::system(
        input.goal,
        input.task,
        input.prompt,
        input.owns,
        "giving your verdict in the structured form asked for",
    );
    let message = prompts::reviewer::message(input.checks, input.diff);
    let schema = tool().schema;
    let sandbox = match input.gateway {
        Some(_) => role_sandbox(input),
        // Where the gateway cannot stand in (Bedrock, Vertex), the CLI needs the network.
        None => Sandbox::new(
            &input
                .sandbox
                .with_network(plait_sandbox::sandbox::Network::On),
            vec![input.dir.clone()],
        ),
    };
    let by = match &settings.model {
        Some(model) => format!("claude-code ({model})"),
        None => "claude-code".to_string(),
    };
    let mut problem = String::new();
    let mut usage: Option<Usage> = None;
    for attempt in 1..=ATTEMPTS {
        if let Some(reason) = input.budget.exhausted() {
            problem = format!("not reviewed: {reason}");
            break;
        }
        let name = format!("review-{}-{attempt}", input.round);
        let question = crate::agent::claude_code::Question {
            settings,
            system: format!("{}\n\n{}", system.shared, system.task),
            message: message.clone(),
            schema: &schema,
            cwd: &input.worktree,
            read_roots: vec![input.worktree.clone()],
            dir: &input.dir,
            name: &name,
            plait_program: input.plait_program,
            timeout: input.timeout,
            cancel,
            sandbox: &sandbox,
            gateway: input.gateway.map(|g| &g.lease),
            max_turns: 20,
        };
        let answered = crate::agent::claude_code::ask(&question).await;
        let own = answered.as_ref().ok().map(|a| a.usage.clone());
        if input.gateway.is_none() {
            if let Some(cost) = own.as_ref().and_then(|u| u.cost_usd) {
                input.budget.spend(cost);
            }
        }
        if let Some(u) = role_usage(input, own) {
            match usage.as_mut() {
                Some(total) => total.add(&u),
                None => usage = Some(u),
            }
        }
        match answered.and_then(|a| parse_value(&a.value)) {
            Ok((verdict, summary, comments)) => {
                return Review {
                    verdict,
                    summary,
                    comments,
                    by,
                    round: input.round,
                    note: (attempt > 1).then(|| format!("answered on attempt {attempt}")),
                    usage,
                }
            }
            Err(e) => problem = e,
        }
        if cancel.is_cancelled() {
            break;
        }
    }
    unusable(by, input.round, problem, usage)
}

/// A review by any agent program: `{prompt}` (the reviewer's prompt, the checks and the
/// diff), `{schema}` (a file holding the answer's JSON schema), `{answer}` (a file it may
/// write its answer to) and the other placeholders filled in; its answer is that file, or
/// else the last JSON object on its stdout.
async fn by_cli(
    cli: &crate::plan::CliSettings,
    input: &ReviewInput<'_>,
    cancel: &Cancel,
) -> Review {
    let by = format!("cli {}", cli.argv.first().map_or("", String::as_str));
    let system = prompts::reviewer::system(
        input.goal,
        input.task,
        input.prompt,
        input.owns,
        "printing one JSON object in the schema given",
    );
    let schema_path = input
        .dir
        .join(format!("review-{}.schema.json", input.round));
    let answer_path = input
        .dir
        .join(format!("review-{}.answer.json", input.round));
    let log = input.dir.join(format!("review-{}.log", input.round));
    let stdout_path = input.dir.join(format!("review-{}.stdout", input.round));
    let schema = tool().schema;
    let prompt = format!(
        "{}\n\n{}\n\nAnswer with one JSON object of this schema, and nothing after it:\n{}\n\n{}",
        system.shared,
        system.task,
        schema,
        prompts::reviewer::message(input.checks, input.diff)
    );
    let _ = std::fs::remove_file(&answer_path);
    if let Err(e) = std::fs::write(&schema_path, schema.to_string()) {
        return unusable(
            by,
            input.round,
            format!("cannot write {}: {e}", schema_path.display()),
            None,
        );
    }
    let url = input
        .gateway
        .map(|g| g.lease.base_url())
        .unwrap_or_default();
    let argv: Vec<String> = cli
        .argv
        .iter()
        .map(|arg| {
            arg.replace("{prompt}", &prompt)
                .replace("{goal}", input.goal)
                .replace("{task}", input.task)
                .replace("{schema}", &schema_path.display().to_string())
                .replace("{answer}", &answer_path.display().to_string())
                .replace("{worktree}", &input.worktree.display().to_string())
                .replace("{gateway}", &url)
        })
        .collect();
    let mut env = vec![
        ("PLAIT_RUN", input.run.to_string()),
        ("PLAIT_TASK", input.task.to_string()),
        ("PLAIT_ROUND", input.round.to_string()),
        ("PLAIT_ANSWER", answer_path.display().to_string()),
        ("PLAIT_SCHEMA", schema_path.display().to_string()),
    ];
    if let (Some(g), Some(p)) = (input.gateway, &cli.gateway) {
        env.extend(crate::agent::cli::gateway_env(&g.lease, p.kind));
    }
    let sandbox = role_sandbox(input);
    let launch = Launch {
        dir: &input.worktree,
        env: &env,
        log: &log,
        timeout: input.timeout,
        cancel,
        sandbox: &sandbox,
    };
    let (outcome, stdout) = shell::run_argv_capturing(&argv, &launch, &stdout_path).await;
    let usage = role_usage(input, None);
    if let Some(reason) = match &outcome {
        ShellOutcome::Exited(0) => None,
        other => Some(other.describe(input.timeout)),
    } {
        return unusable(
            by,
            input.round,
            format!("the reviewer program {reason}; see {}", log.display()),
            usage,
        );
    }
    let written = std::fs::read_to_string(&answer_path)
        .ok()
        .filter(|t| !t.trim().is_empty());
    let answer = match written {
        Some(text) => serde_json::from_str::<Value>(text.trim())
            .map_err(|e| format!("its answer in {} is not JSON ({e})", answer_path.display())),
        None => last_json_object(&stdout).ok_or_else(|| {
            let said: String = stdout.trim().chars().take(200).collect();
            format!("it printed no JSON object on stdout (it printed: {said:?})")
        }),
    };
    match answer.and_then(|v| parse_value(&v)) {
        Ok((verdict, summary, comments)) => Review {
            verdict,
            summary,
            comments,
            by,
            round: input.round,
            note: None,
            usage,
        },
        Err(problem) => unusable(by, input.round, problem, usage),
    }
}

/// The last JSON object in `text`: the last line that is one, else the last `{` from which
/// the rest parses as one.
pub fn last_json_object(text: &str) -> Option<Value> {
    let object = |t: &str| {
        serde_json::from_str::<Value>(t.trim())
            .ok()
            .filter(Value::is_object)
    };
    if let Some(v) = text.lines().rev().find_map(object) {
        return Some(v);
    }
    text.match_indices('{').rev().find_map(|(at, _)| {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        values.next()?.ok().filter(Value::is_object)
    })
}

/// A review whose reviewer gave no verdict: a request for changes, with the reason.
fn unusable(by: String, round: u32, problem: String, usage: Option<Usage>) -> Review {
    Review {
        verdict: Verdict::RequestChanges,
        summary: "the reviewer gave no usable verdict".to_string(),
        comments: Vec::new(),
        by,
        round,
        note: Some(format!("counted as request_changes: {problem}")),
        usage,
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
        plait_llm::account(&mut usage, provider, &reply, &timing);
        input.budget.spend(usage.cost_usd.unwrap_or(0.0) - before);
        match parse(&reply.content) {
            Ok((verdict, summary, comments)) => {
                return Review {
                    verdict,
                    summary,
                    comments,
                    by: format!("model {} ({})", provider.model, provider.name),
                    round: input.round,
                    note: (attempt > 1).then(|| format!("answered on attempt {attempt}")),
                    usage: Some(usage),
                }
            }
            Err(e) => problem = e,
        }
    }
    unusable(
        format!("model {} ({})", provider.model, provider.name),
        input.round,
        problem,
        Some(usage),
    )
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
    parse_value(input)
}

/// Reads a verdict, its summary and comments from `submit_review`'s form.
pub fn parse_value(input: &Value) -> Result<(Verdict, String, Vec<Comment>), String> {
    if !input.is_object() {
        return Err(format!("the answer is not a JSON object: {input}"));
    }
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
