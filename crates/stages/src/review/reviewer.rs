//! The reviewer: a model that must answer through the `submit_review` tool (forced tool
//! choice) with `{verdict, summary, comments}`; Claude Code answering in that form
//! (`--json-schema`) with read-only tools; any agent program whose last JSON object on
//! stdout (or the file `{answer}`) is that answer; or a command whose exit status is the
//! verdict (0 approve, 1 request changes with its output as comments, 2 reject). A
//! malformed answer is asked for again, then counts as a request for changes with a note:
//! never as an approval. The ways of asking each kind (`ModelRole`, `ask_claude_code`,
//! `ask_cli`, the roles' walls and usage) are shared with the judge of a task's attempts,
//! `pick`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use plait_agents::agent::{Budget, RoleGateway};
use plait_agents::prompts;
use plait_core::cancel::Cancel;
use plait_core::state::{CheckResult, Comment, Review, Usage, Verdict};
use plait_llm::conversation::{Block, Message, Reply, System, ToolSpec};
use plait_llm::forced_tool_body;
use plait_llm::http::{self, Transcript};
use plait_llm::limiter::{Limiter, Limiters};
use plait_llm::provider::ProviderSettings;
use plait_plan::Reviewer;
use plait_sandbox::sandbox::{Sandbox, SandboxSettings};
use plait_sandbox::shell::{self, Launch, ShellOutcome};

/// The tool a model reviewer answers with.
pub const SUBMIT_REVIEW: &str = "submit_review";
const ATTEMPTS: u32 = 3;

/// What a reviewer is shown.
pub struct ReviewInput<'a> {
    /// The run's id.
    pub run: &'a str,
    /// What the whole run should achieve.
    pub goal: &'a str,
    /// The task's id.
    pub task: &'a str,
    /// What the task's agent was told to do.
    pub prompt: &'a str,
    /// The task's `owns` globs.
    pub owns: &'a [String],
    /// The task's diff against its base.
    pub diff: &'a str,
    /// The task's checks, as they ran.
    pub checks: &'a [CheckResult],
    /// The task's round (0 for the first).
    pub round: u32,
    /// The base commit, as a full hex id.
    pub base: String,
    /// The commit under review, as a full hex id.
    pub commit: String,
    /// The task's worktree, where a command reviewer runs.
    pub worktree: PathBuf,
    /// The task's directory for review files (diff, log, transcript).
    pub dir: PathBuf,
    /// How long the reviewer may take.
    pub timeout: Duration,
    /// The run's cost budget; a model reviewer's cost counts against it.
    pub budget: &'a Budget,
    /// The walls of a command reviewer: it may write only `dir` (and its own TMPDIR).
    pub sandbox: &'a SandboxSettings,
    /// The plait binary, for Claude Code's guard.
    pub plait_program: &'a std::path::Path,
    /// A Claude Code or `{ cli }` reviewer's way to its model, when it has one.
    pub gateway: Option<&'a plait_agents::agent::RoleGateway>,
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
    let sandbox = role_walls(input.sandbox, &input.dir);
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

/// The walls of a role given `dir`: `settings` (the checks'), reading `dir`, writing only
/// [`plait_agents::agent::role_own`] of it.
pub(crate) fn role_walls(settings: &SandboxSettings, dir: &Path) -> Sandbox {
    let mut settings = settings.clone();
    settings.readable.push(dir.to_path_buf());
    Sandbox::new(&settings, vec![plait_agents::agent::role_own(dir)])
}

/// The walls of a Claude Code or `{ cli }` role (a reviewer, a judge): the checks'
/// (`settings`; it reads `dir` and writes only [`plait_agents::agent::role_own`] of it), with the gateway's port
/// open when it reaches its model through it.
pub(crate) fn role_sandbox(
    settings: &SandboxSettings,
    gateway: Option<&RoleGateway>,
    dir: &Path,
) -> Sandbox {
    let settings = match gateway {
        Some(g) => settings
            .with_network(plait_sandbox::sandbox::Network::Gateway)
            .through_gateway(g.lease.port()),
        None => settings.clone(),
    };
    role_walls(&settings, dir).with_cli_homes()
}

/// The walls of Claude Code in a role: [`role_sandbox`]'s; where the gateway cannot stand
/// in (Bedrock, Vertex), the CLI needs the network.
pub(crate) fn claude_code_sandbox(
    settings: &SandboxSettings,
    gateway: Option<&RoleGateway>,
    dir: &Path,
) -> Sandbox {
    match gateway {
        Some(_) => role_sandbox(settings, gateway, dir),
        None => role_walls(
            &settings.with_network(plait_sandbox::sandbox::Network::On),
            dir,
        )
        .with_cli_homes(),
    }
}

/// What a role's answer used: the gateway's count where it saw the answers, else the
/// program's own.
pub(crate) fn role_usage(gateway: Option<&RoleGateway>, own: Option<Usage>) -> Option<Usage> {
    gateway.and_then(|g| g.tally.take()).or(own)
}

/// Adds `more` to `total`, which may have nothing yet.
pub(crate) fn add_usage(total: &mut Option<Usage>, more: Option<Usage>) {
    if let Some(u) = more {
        match total.as_mut() {
            Some(t) => t.add(&u),
            None => *total = Some(u),
        }
    }
}

/// Asks Claude Code `question` once in a role: what it used counts against `budget`
/// unless the gateway counted it. Returns its answer (or why there is none) and what it
/// used.
pub(crate) async fn ask_claude_code(
    question: &plait_agents::agent::claude_code::Question<'_>,
    gateway: Option<&RoleGateway>,
    budget: &Budget,
) -> (Result<Value, String>, Option<Usage>) {
    let answered = plait_agents::agent::claude_code::ask(question).await;
    let own = answered.as_ref().ok().map(|a| a.usage.clone());
    if gateway.is_none() {
        if let Some(cost) = own.as_ref().and_then(|u| u.cost_usd) {
            budget.spend(cost);
        }
    }
    (answered.map(|a| a.value), role_usage(gateway, own))
}

/// A review in Claude Code: the reviewer's prompt, the task's diff and checks, read-only
/// tools in the task's worktree, and `submit_review`'s schema as the answer's form; asked
/// again when its answer is not a verdict.
async fn by_claude_code(
    settings: &plait_plan::ToolSettings,
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
    let sandbox = claude_code_sandbox(input.sandbox, input.gateway, &input.dir);
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
        let question = plait_agents::agent::claude_code::Question {
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
        let (answered, used) = ask_claude_code(&question, input.gateway, input.budget).await;
        add_usage(&mut usage, used);
        match answered.and_then(|value| parse_value(&value)) {
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
async fn by_cli(cli: &plait_plan::CliSettings, input: &ReviewInput<'_>, cancel: &Cancel) -> Review {
    let by = format!("cli {}", cli.argv.first().map_or("", String::as_str));
    let system = prompts::reviewer::system(
        input.goal,
        input.task,
        input.prompt,
        input.owns,
        "printing one JSON object in the schema given",
    );
    let schema = tool().schema;
    let prompt = format!(
        "{}\n\n{}\n\nAnswer with one JSON object of this schema, and nothing after it:\n{}\n\n{}",
        system.shared,
        system.task,
        schema,
        prompts::reviewer::message(input.checks, input.diff)
    );
    let name = format!("review-{}", input.round);
    let question = CliQuestion {
        cli,
        role: "reviewer",
        prompt: &prompt,
        schema: &schema,
        name: &name,
        dir: &input.dir,
        worktree: &input.worktree,
        goal: input.goal,
        task: input.task,
        env: vec![
            ("PLAIT_RUN", input.run.to_string()),
            ("PLAIT_TASK", input.task.to_string()),
            ("PLAIT_ROUND", input.round.to_string()),
        ],
        timeout: input.timeout,
        sandbox: input.sandbox,
        gateway: input.gateway,
        cancel,
    };
    let (answer, usage) = ask_cli(&question).await;
    match answer
        .map_err(Unanswered::into_reason)
        .and_then(|v| parse_value(&v))
    {
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

/// A question to an agent program in a role (`{ cli, answer = "json" }`): a reviewer, a
/// judge.
pub(crate) struct CliQuestion<'a> {
    /// The program and its arguments, with placeholders.
    pub cli: &'a plait_plan::CliSettings,
    /// Its role, for messages: "reviewer", "judge".
    pub role: &'a str,
    /// All it is told: `{prompt}`.
    pub prompt: &'a str,
    /// The answer's JSON schema, written to the file `{schema}`.
    pub schema: &'a Value,
    /// The stem of its files in `dir`: `.schema.json`, `.answer.json`, `.log`, `.stdout`.
    pub name: &'a str,
    /// The directory it may write, where its files are.
    pub dir: &'a Path,
    /// Where it runs: `{worktree}`.
    pub worktree: &'a Path,
    /// `{goal}`.
    pub goal: &'a str,
    /// `{task}`.
    pub task: &'a str,
    /// Its environment besides `PLAIT_ANSWER`, `PLAIT_SCHEMA` and the gateway's.
    pub env: Vec<(&'a str, String)>,
    /// How long it may run.
    pub timeout: Duration,
    /// The checks' walls, which [`role_sandbox`] opens to the gateway.
    pub sandbox: &'a SandboxSettings,
    /// Its way to its model through plait's gateway, if it has one.
    pub gateway: Option<&'a RoleGateway>,
    /// The run's interrupt.
    pub cancel: &'a Cancel,
}

/// Why an agent program in a role gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unanswered {
    /// It could not run or did not end well (a failure, a timeout, an interrupt).
    Failed(String),
    /// It ended well, but without a JSON object for an answer.
    Malformed(String),
}

impl Unanswered {
    /// The reason, for a note.
    pub(crate) fn into_reason(self) -> String {
        match self {
            Unanswered::Failed(reason) | Unanswered::Malformed(reason) => reason,
        }
    }
}

/// Asks an agent program once: its answer is the file `{answer}`, or else the last JSON
/// object on its stdout. Returns that answer (or why there is none) and what it used.
pub(crate) async fn ask_cli(q: &CliQuestion<'_>) -> (Result<Value, Unanswered>, Option<Usage>) {
    let file = |suffix: &str| q.dir.join(format!("{}.{suffix}", q.name));
    let schema_path = file("schema.json");
    // The one file it writes, where it may.
    let answer_path = plait_agents::agent::role_own(q.dir).join(format!("{}.answer.json", q.name));
    let (log, stdout_path) = (file("log"), file("stdout"));
    let _ = std::fs::remove_file(&answer_path);
    if let Err(e) = std::fs::write(&schema_path, q.schema.to_string()) {
        let reason = format!("cannot write {}: {e}", schema_path.display());
        return (Err(Unanswered::Failed(reason)), None);
    }
    let url = q.gateway.map(|g| g.lease.base_url()).unwrap_or_default();
    let argv: Vec<String> = q
        .cli
        .argv
        .iter()
        .map(|arg| {
            arg.replace("{prompt}", q.prompt)
                .replace("{goal}", q.goal)
                .replace("{task}", q.task)
                .replace("{schema}", &schema_path.display().to_string())
                .replace("{answer}", &answer_path.display().to_string())
                .replace("{worktree}", &q.worktree.display().to_string())
                .replace("{gateway}", &url)
        })
        .collect();
    let mut env = q.env.clone();
    env.push(("PLAIT_ANSWER", answer_path.display().to_string()));
    env.push(("PLAIT_SCHEMA", schema_path.display().to_string()));
    if let (Some(g), Some(p)) = (q.gateway, &q.cli.gateway) {
        env.extend(plait_agents::agent::cli::gateway_env(&g.lease, p.kind));
    }
    let sandbox = role_sandbox(q.sandbox, q.gateway, q.dir);
    let launch = Launch {
        dir: q.worktree,
        env: &env,
        log: &log,
        timeout: q.timeout,
        cancel: q.cancel,
        sandbox: &sandbox,
    };
    let (outcome, stdout) = shell::run_argv_capturing(&argv, &launch, &stdout_path).await;
    let usage = role_usage(q.gateway, None);
    if outcome != ShellOutcome::Exited(0) {
        let reason = format!(
            "the {} program {}; see {}",
            q.role,
            outcome.describe(q.timeout),
            log.display()
        );
        return (Err(Unanswered::Failed(reason)), usage);
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
    (answer.map_err(Unanswered::Malformed), usage)
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
    let role = ModelRole {
        provider,
        limiter,
        client,
        budget: input.budget,
        cancel,
    };
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
    let mut usage = role.no_usage();
    let mut problem = String::new();
    for attempt in 1..=ATTEMPTS {
        if let Some(reason) = input.budget.exhausted() {
            problem = format!("not reviewed: {reason}");
            break;
        }
        let asked = role.ask(
            &system,
            tool(),
            &messages,
            attempt,
            &mut transcript,
            &mut usage,
        );
        let reply = match asked.await {
            Ok(reply) => reply,
            Err(reason) => {
                problem = format!("the reviewer could not be reached: {reason}");
                break;
            }
        };
        match parse(&reply.content) {
            Ok((verdict, summary, comments)) => {
                return Review {
                    verdict,
                    summary,
                    comments,
                    by: role.by(),
                    round: input.round,
                    note: (attempt > 1).then(|| format!("answered on attempt {attempt}")),
                    usage: Some(usage),
                }
            }
            Err(e) => problem = e,
        }
    }
    unusable(role.by(), input.round, problem, Some(usage))
}

/// A model in a role that answers by calling one forced tool (a reviewer, a judge): its
/// provider and limiter, the run's client and interrupt, and the budget it spends.
pub(crate) struct ModelRole<'a> {
    /// The provider and model asked.
    pub provider: &'a ProviderSettings,
    /// The provider's limiter, shared with the run.
    pub limiter: &'a Limiter,
    /// The run's HTTP client.
    pub client: &'a reqwest::Client,
    /// The run's budget, which pays for the answers.
    pub budget: &'a Budget,
    /// The run's interrupt.
    pub cancel: &'a Cancel,
}

impl ModelRole<'_> {
    /// Who answers, for the record: `model <model> (<provider>)`.
    pub(crate) fn by(&self) -> String {
        format!("model {} ({})", self.provider.model, self.provider.name)
    }

    /// Nothing used yet; the cost is zero, not unknown, where the model's prices are known.
    pub(crate) fn no_usage(&self) -> Usage {
        Usage {
            cost_usd: self.provider.prices.map(|_| 0.0),
            ..Usage::default()
        }
    }

    /// Asks once (request `turn` of `transcript`), forced to call `tool`; what the answer
    /// used is added to `usage` and its cost spent from the budget. The error says why
    /// there is no answer.
    pub(crate) async fn ask(
        &self,
        system: &System,
        tool: ToolSpec,
        messages: &[Message],
        turn: u32,
        transcript: &mut Transcript,
        usage: &mut Usage,
    ) -> Result<Reply, String> {
        let body = forced_tool_body(self.provider, system, tool, messages);
        // Its worst case held against the run's budget while it is in flight.
        let hold = self
            .budget
            .hold(plait_llm::estimate::worst_usd(self.provider, &body))
            .await?;
        let (reply, timing) = http::call(
            self.client,
            self.provider,
            self.limiter,
            &body,
            turn,
            transcript,
            self.cancel,
        )
        .await?;
        let before = usage.cost_usd.unwrap_or(0.0);
        plait_llm::account(usage, self.provider, &reply, &timing);
        hold.settle(usage.cost_usd.unwrap_or(0.0) - before);
        Ok(reply)
    }
}

/// The input of the call of `tool` in a reply's `content`; the error says why there is none.
pub(crate) fn tool_input<'c>(content: &'c [Block], tool: &str) -> Result<&'c Value, String> {
    let Some(input) = content.iter().find_map(|b| match b {
        Block::ToolUse { name, input, .. } if name == tool => Some(input),
        _ => None,
    }) else {
        return Err(format!("the answer did not call {tool}"));
    };
    input
        .as_ref()
        .map_err(|raw| format!("its input is not JSON: {raw}"))
}

/// Reads a `submit_review` call from a reply.
pub fn parse(content: &[Block]) -> Result<(Verdict, String, Vec<Comment>), String> {
    parse_value(tool_input(content, SUBMIT_REVIEW)?)
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
