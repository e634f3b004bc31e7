//! The judge of a task run as several attempts ("best of N"): when more than one attempt
//! passed its checks, the plan's reviewer chooses one, asked the way it is asked for a
//! review (`reviewer`): a model must call `submit_pick` (`{attempt, why}`, forced tool
//! choice); Claude Code answers in that form (`--json-schema`) with read-only tools over the
//! attempts' worktrees; an agent program (`{ cli, answer = "json" }`) answers with that
//! object, as the file `{answer}` or its last JSON object on stdout; a command answers with
//! the last line of its stdout, the number alone. An answer that names no candidate is
//! asked for again, with what was wrong and the numbers to choose from (three asks in all);
//! then, or when the judge cannot be asked (a failure, the budget, an interrupt), the first
//! attempt that passed is taken, with a note saying why. The choice is always one of the
//! candidates; a single candidate is taken without asking.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::reviewer::{self, CliQuestion, ModelRole, Unanswered};
use plait_agents::agent::{Budget, RoleGateway};
use plait_agents::prompts;
use plait_agents::prompts::pick::Shown;
use plait_core::cancel::Cancel;
use plait_core::state::{CheckResult, Usage};
use plait_llm::conversation::{Message, System, ToolSpec};
use plait_llm::http::Transcript;
use plait_llm::limiter::Limiters;
use plait_plan::{CliSettings, Reviewer, ToolSettings};
use plait_sandbox::sandbox::SandboxSettings;
use plait_sandbox::shell::{self, Launch, ShellOutcome};

/// The tool a model judge answers with.
pub(crate) const SUBMIT_PICK: &str = "submit_pick";

/// How many times a judge is asked before plait takes the first attempt itself.
const ASKS: u32 = 3;

/// One attempt that passed its checks, as the judge is shown it.
pub struct Candidate<'a> {
    /// The attempt's number, 1..=N.
    pub number: u32,
    /// The agent that made it: `exec`, `claude-code`, `model claude-sonnet-4-5 (anthropic)`.
    pub agent: String,
    /// Its diff against the base.
    pub diff: String,
    /// Its checks' results.
    pub checks: &'a [CheckResult],
    /// Its commit; empty when it changed nothing.
    pub commit: String,
    /// Its worktree, which a Claude Code or `{ cli }` judge may read.
    pub worktree: PathBuf,
    /// The agent's closing words, if any.
    pub summary: Option<String>,
}

/// What a judge is given.
pub struct PickInput<'a> {
    /// The run's id.
    pub run: &'a str,
    /// The run's goal.
    pub goal: &'a str,
    /// The task's id.
    pub task: &'a str,
    /// The task's prompt.
    pub prompt: &'a str,
    /// The task's owned globs.
    pub owns: &'a [String],
    /// The attempts that passed their checks.
    pub candidates: &'a [Candidate<'a>],
    /// The commit the attempts started from.
    pub base: String,
    /// The task's directory, where the pick's files go (`pick.jsonl`, `pick.log`, ...).
    pub dir: PathBuf,
    /// How long a judge program may run.
    pub timeout: Duration,
    /// The run's cost budget; a model judge's cost counts against it.
    pub budget: &'a Budget,
    /// The checks' walls: a judge program may write only `dir` (and its own TMPDIR).
    pub sandbox: &'a SandboxSettings,
    /// The plait binary, for Claude Code's guard.
    pub plait_program: &'a Path,
    /// A Claude Code or `{ cli }` judge's way to its model, when it has one.
    pub gateway: Option<&'a RoleGateway>,
}

/// The judge's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Picked {
    /// The chosen attempt's number: always one of the candidates' (0 only when there were
    /// none).
    pub chosen: u32,
    /// The judge's reason, or plait's when it chose itself.
    pub why: String,
    /// Who chose: `model <model> (<provider>)`, `claude-code`, `cli <program>`, `command`,
    /// or `plait`.
    pub by: String,
    /// What happened on the way: answers asked for again, or why plait chose itself.
    pub note: Option<String>,
    /// What the judge used.
    pub usage: Option<Usage>,
}

/// Chooses one of `input`'s candidates, asking `reviewer` when there is more than one.
pub async fn pick(
    reviewer: &Reviewer,
    input: &PickInput<'_>,
    client: &reqwest::Client,
    limiters: &Limiters,
    cancel: &Cancel,
) -> Picked {
    let mut candidates: Vec<&Candidate<'_>> = input.candidates.iter().collect();
    candidates.sort_by_key(|c| c.number);
    candidates.dedup_by_key(|c| c.number);
    let Some(first) = candidates.first().map(|c| c.number) else {
        return unasked(0, "no attempt passed: there was nothing to choose from");
    };
    if candidates.len() == 1 {
        return unasked(first, "the only attempt that passed");
    }
    let limiter;
    let judge = match reviewer {
        Reviewer::Off | Reviewer::Worker => {
            return unasked(first, "no judge: the first attempt that passed")
        }
        Reviewer::Command(command) => Judge::Command(command),
        Reviewer::ClaudeCode(settings) => Judge::ClaudeCode(settings),
        Reviewer::Cli(cli) => Judge::Cli(cli),
        Reviewer::Model(provider) => {
            limiter = limiters.get(provider);
            Judge::Model(ModelRole {
                provider,
                limiter: &limiter,
                client,
                budget: input.budget,
                cancel,
            })
        }
    };
    let numbers: Vec<u32> = candidates.iter().map(|c| c.number).collect();
    let asking = Asking::new(&judge, input, &candidates, &numbers, cancel);
    ask_until_chosen(&judge, &asking).await
}

/// A choice plait makes without asking, for `why`.
fn unasked(chosen: u32, why: &str) -> Picked {
    Picked {
        chosen,
        why: why.to_string(),
        by: "plait".to_string(),
        note: None,
        usage: None,
    }
}

/// Asks `judge` until it names a candidate, at most [`ASKS`] times; else the first
/// candidate, with the reasons.
async fn ask_until_chosen(judge: &Judge<'_>, asking: &Asking<'_>) -> Picked {
    let by = judge.by();
    let mut usage = None;
    let mut problems: Vec<String> = Vec::new();
    for ask in 1..=ASKS {
        if let Some(reason) = asking.input.budget.exhausted() {
            problems.push(format!("not asked: {reason}"));
            break;
        }
        if asking.cancel.is_cancelled() {
            problems.push("not asked: the run was interrupted".to_string());
            break;
        }
        let asked = judge
            .ask(asking, ask, problems.last().map(String::as_str))
            .await;
        reviewer::add_usage(&mut usage, asked.usage);
        match asked.answer.and_then(|v| decide(&v, asking.numbers)) {
            Ok((chosen, why)) => {
                return Picked {
                    chosen,
                    why,
                    by,
                    note: answered_after(&problems, ask),
                    usage,
                }
            }
            Err(Trouble::Again(problem)) => problems.push(problem),
            Err(Trouble::Stop(problem)) => {
                problems.push(problem);
                break;
            }
        }
    }
    Picked {
        chosen: asking.numbers[0],
        why: "the judge gave no usable answer: plait took the first attempt that passed"
            .to_string(),
        by,
        note: Some(format!(
            "fell back to the first that passed: {}",
            problems.join("; then ")
        )),
        usage,
    }
}

/// The note of an answer given at ask `ask`, after `problems` with the earlier ones.
fn answered_after(problems: &[String], ask: u32) -> Option<String> {
    (!problems.is_empty()).then(|| {
        let earlier: Vec<String> = problems
            .iter()
            .map(|p| format!("{p}; asked again"))
            .collect();
        format!("{} (answered on ask {ask} of {ASKS})", earlier.join("; "))
    })
}

/// The attempt an answer in `submit_pick`'s form names and the judge's reason; the error
/// says why it is not one of `numbers`, so the judge can be asked again.
fn decide(answer: &Value, numbers: &[u32]) -> Result<(u32, String), Trouble> {
    if !answer.is_object() {
        return Err(Trouble::Again(format!(
            "the answer is not a JSON object: {answer}"
        )));
    }
    let named = match &answer["attempt"] {
        Value::Null => return Err(Trouble::Again("the answer named no attempt".to_string())),
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().trim_start_matches('#').parse::<u64>().ok(),
        _ => None,
    };
    let Some(named) = named else {
        let said: String = answer["attempt"].to_string().chars().take(80).collect();
        return Err(Trouble::Again(format!(
            "the judge answered {said}, not an attempt's number"
        )));
    };
    let chosen = u32::try_from(named)
        .ok()
        .filter(|n| numbers.contains(n))
        .ok_or_else(|| Trouble::Again(format!("the judge named {named}, not a candidate")))?;
    let why = answer["why"].as_str().map(str::trim).unwrap_or_default();
    let why = if why.is_empty() {
        "(the judge gave no reason)"
    } else {
        why
    };
    Ok((chosen, why.to_string()))
}

/// Why an ask gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Trouble {
    /// The answer names no candidate, or is not in the form asked for: ask again.
    Again(String),
    /// The judge could not answer (it failed, or could not be reached): asking again would
    /// not help.
    Stop(String),
}

/// What one ask gave: an answer in `submit_pick`'s form, and what the judge used.
struct Asked {
    answer: Result<Value, Trouble>,
    usage: Option<Usage>,
}

/// What every ask of one pick shares.
struct Asking<'a> {
    input: &'a PickInput<'a>,
    /// The candidates, by number, each once.
    candidates: &'a [&'a Candidate<'a>],
    /// Their numbers, lowest first.
    numbers: &'a [u32],
    /// The judge's system prompt.
    system: System,
    /// The judge's message, without the words asking again.
    message: String,
    cancel: &'a Cancel,
}

impl<'a> Asking<'a> {
    /// What `judge` is told of `candidates` (`numbers`, lowest first) for `input`'s task.
    fn new(
        judge: &Judge<'_>,
        input: &'a PickInput<'a>,
        candidates: &'a [&'a Candidate<'a>],
        numbers: &'a [u32],
        cancel: &'a Cancel,
    ) -> Asking<'a> {
        let shown: Vec<Shown<'_>> = candidates
            .iter()
            .map(|c| Shown {
                number: c.number,
                agent: &c.agent,
                checks: c.checks,
                summary: c.summary.as_deref(),
                diff: &c.diff,
                worktree: judge.reads_files().then_some(c.worktree.as_path()),
            })
            .collect();
        let (goal, task, prompt) = (input.goal, input.task, input.prompt);
        Asking {
            system: prompts::pick::system(goal, task, prompt, input.owns, judge.answers()),
            message: prompts::pick::message(&shown),
            input,
            candidates,
            numbers,
            cancel,
        }
    }

    /// The message of an ask, telling the judge what was wrong with its last answer.
    fn message(&self, problem: Option<&str>) -> String {
        match problem {
            Some(problem) => format!(
                "{}{}",
                self.message,
                prompts::pick::again(problem, self.numbers)
            ),
            None => self.message.clone(),
        }
    }

    /// Where a judge program runs: the first candidate's worktree, or the task's
    /// directory when it is gone.
    fn workdir(&self) -> &Path {
        self.candidates
            .first()
            .map(|c| c.worktree.as_path())
            .filter(|w| w.is_dir())
            .unwrap_or(&self.input.dir)
    }

    /// The candidates for a judge program: `PLAIT_CANDIDATES` (their numbers) and, for
    /// each, `PLAIT_CANDIDATE_<n>` (its commit), `…_WORKTREE` and `…_DIFF` (the file
    /// `pick-<n>.diff` in the task's directory, written here, holding its diff).
    fn candidate_env(&self) -> Vec<(String, String)> {
        let mut env = vec![(
            "PLAIT_CANDIDATES".to_string(),
            prompts::pick::choices(self.numbers).replace(", ", " "),
        )];
        for c in self.candidates {
            let key = format!("PLAIT_CANDIDATE_{}", c.number);
            let diff = self.input.dir.join(format!("pick-{}.diff", c.number));
            let _ = std::fs::write(&diff, &c.diff);
            env.push((format!("{key}_WORKTREE"), c.worktree.display().to_string()));
            env.push((format!("{key}_DIFF"), diff.display().to_string()));
            env.push((key, c.commit.clone()));
        }
        env
    }
}

/// The plan's reviewer, as a judge.
enum Judge<'r> {
    Command(&'r str),
    Model(ModelRole<'r>),
    ClaudeCode(&'r ToolSettings),
    Cli(&'r CliSettings),
}

impl Judge<'_> {
    /// Who chose, for the record.
    fn by(&self) -> String {
        match self {
            Judge::Command(_) => "command".to_string(),
            Judge::Model(role) => role.by(),
            Judge::ClaudeCode(settings) => match &settings.model {
                Some(model) => format!("claude-code ({model})"),
                None => "claude-code".to_string(),
            },
            Judge::Cli(cli) => format!("cli {}", cli.argv.first().map_or("", String::as_str)),
        }
    }

    /// How its prompt tells it to answer (a command reads no prompt).
    fn answers(&self) -> &'static str {
        match self {
            Judge::Model(_) => "by calling submit_pick",
            Judge::ClaudeCode(_) => "in the structured form asked for",
            Judge::Cli(_) | Judge::Command(_) => "by printing one JSON object in the schema given",
        }
    }

    /// Whether it can read the candidates' worktrees.
    fn reads_files(&self) -> bool {
        matches!(self, Judge::ClaudeCode(_) | Judge::Cli(_))
    }

    /// Asks once (ask number `ask`); `problem` is what was wrong with its last answer.
    async fn ask(&self, asking: &Asking<'_>, ask: u32, problem: Option<&str>) -> Asked {
        match self {
            Judge::Command(command) => by_command(command, asking, ask, problem).await,
            Judge::Model(role) => by_model(role, asking, ask, problem).await,
            Judge::ClaudeCode(settings) => by_claude_code(settings, asking, ask, problem).await,
            Judge::Cli(cli) => by_cli(cli, asking, problem).await,
        }
    }
}

/// `submit_pick`: the attempt chosen and why.
fn tool() -> ToolSpec {
    ToolSpec {
        name: SUBMIT_PICK,
        description: "Submit your choice among the attempts: the number of the best one, and why \
            it is better than the others.",
        schema: json!({
            "type": "object",
            "properties": {
                "attempt": {"type": "integer", "description": "The chosen attempt's number."},
                "why": {"type": "string", "description": "Why it is the best of them."}
            },
            "required": ["attempt", "why"]
        }),
    }
}

/// Asks a model, forced to call `submit_pick`; requests go to `pick.jsonl`.
async fn by_model(
    role: &ModelRole<'_>,
    asking: &Asking<'_>,
    ask: u32,
    problem: Option<&str>,
) -> Asked {
    let mut transcript = Transcript::open(&asking.input.dir.join("pick.jsonl"));
    let messages = [Message::user_text(asking.message(problem))];
    let mut usage = role.no_usage();
    let asked = role.ask(
        &asking.system,
        tool(),
        &messages,
        ask,
        &mut transcript,
        &mut usage,
    );
    let answer = match asked.await {
        Ok(reply) => reviewer::tool_input(&reply.content, SUBMIT_PICK)
            .cloned()
            .map_err(Trouble::Again),
        Err(reason) => Err(Trouble::Stop(format!(
            "the judge could not be reached: {reason}"
        ))),
    };
    Asked {
        answer,
        usage: Some(usage),
    }
}

/// Asks Claude Code, with `submit_pick`'s schema as the answer's form and read-only tools
/// over the candidates' worktrees; its files are `pick-<ask>.*`.
async fn by_claude_code(
    settings: &ToolSettings,
    asking: &Asking<'_>,
    ask: u32,
    problem: Option<&str>,
) -> Asked {
    let input = asking.input;
    let schema = tool().schema;
    let sandbox = reviewer::claude_code_sandbox(input.sandbox, input.gateway, &input.dir);
    let name = format!("pick-{ask}");
    let question = plait_agents::agent::claude_code::Question {
        settings,
        system: format!("{}\n\n{}", asking.system.shared, asking.system.task),
        message: asking.message(problem),
        schema: &schema,
        cwd: asking.workdir(),
        read_roots: asking
            .candidates
            .iter()
            .map(|c| c.worktree.clone())
            .collect(),
        dir: &input.dir,
        name: &name,
        plait_program: input.plait_program,
        timeout: input.timeout,
        cancel: asking.cancel,
        sandbox: &sandbox,
        gateway: input.gateway.map(|g| &g.lease),
        max_turns: 20,
    };
    let (answer, usage) = reviewer::ask_claude_code(&question, input.gateway, input.budget).await;
    Asked {
        answer: answer.map_err(Trouble::Again),
        usage,
    }
}

/// Asks an agent program: `{prompt}` holds the judge's prompt, the schema and the
/// attempts; its files are `pick.*`.
async fn by_cli(cli: &CliSettings, asking: &Asking<'_>, problem: Option<&str>) -> Asked {
    let input = asking.input;
    let schema = tool().schema;
    let prompt = prompts::pick::for_program(&asking.system, &schema, &asking.message(problem));
    let candidates = asking.candidate_env();
    let mut env: Vec<(&str, String)> = vec![
        ("PLAIT_RUN", input.run.to_string()),
        ("PLAIT_TASK", input.task.to_string()),
    ];
    env.extend(candidates.iter().map(|(k, v)| (k.as_str(), v.clone())));
    let question = CliQuestion {
        cli,
        role: "judge",
        prompt: &prompt,
        schema: &schema,
        name: "pick",
        dir: &input.dir,
        worktree: asking.workdir(),
        goal: input.goal,
        task: input.task,
        env,
        timeout: input.timeout,
        sandbox: input.sandbox,
        gateway: input.gateway,
        cancel: asking.cancel,
    };
    let (answer, usage) = reviewer::ask_cli(&question).await;
    let answer = answer.map_err(|e| match e {
        Unanswered::Failed(reason) => Trouble::Stop(reason),
        Unanswered::Malformed(reason) => Trouble::Again(reason),
    });
    Asked { answer, usage }
}

/// Runs the judge command as a command reviewer runs (in the walls of the checks, writing
/// only the task's directory), with the candidates in its environment, and on a later ask
/// `PLAIT_PICK_PROBLEM`; the last line of its stdout is the number, the lines before it
/// the reason. Its output goes to `pick.log`.
async fn by_command(command: &str, asking: &Asking<'_>, ask: u32, problem: Option<&str>) -> Asked {
    let input = asking.input;
    let log = input.dir.join("pick.log");
    let stdout_path = input.dir.join("pick.stdout");
    if ask == 1 {
        let _ = std::fs::write(&log, "");
    }
    let candidates = asking.candidate_env();
    let mut env: Vec<(&str, String)> = vec![
        ("PLAIT_RUN", input.run.to_string()),
        ("PLAIT_TASK", input.task.to_string()),
        ("PLAIT_GOAL", input.goal.to_string()),
        ("PLAIT_PROMPT", input.prompt.to_string()),
        ("PLAIT_BASE", input.base.clone()),
        ("PLAIT_PICK_ASK", ask.to_string()),
    ];
    env.extend(candidates.iter().map(|(k, v)| (k.as_str(), v.clone())));
    if let Some(problem) = problem {
        env.push(("PLAIT_PICK_PROBLEM", problem.to_string()));
    }
    let sandbox = reviewer::role_walls(input.sandbox, &input.dir);
    let launch = Launch {
        dir: asking.workdir(),
        env: &env,
        log: &log,
        timeout: input.timeout,
        cancel: asking.cancel,
        sandbox: &sandbox,
    };
    let argv = ["sh".to_string(), "-c".to_string(), command.to_string()];
    let (outcome, stdout) = shell::run_argv_capturing(&argv, &launch, &stdout_path).await;
    if outcome != ShellOutcome::Exited(0) {
        let reason = format!(
            "the pick command did not answer: {}; see {}",
            outcome.describe(input.timeout),
            log.display()
        );
        return Asked {
            answer: Err(Trouble::Stop(reason)),
            usage: None,
        };
    }
    Asked {
        answer: command_answer(&stdout),
        usage: None,
    }
}

/// A judge command's answer in `submit_pick`'s form: the last line of its output is the
/// number, the lines before it the reason.
fn command_answer(stdout: &str) -> Result<Value, Trouble> {
    let lines: Vec<&str> = stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match lines.split_last() {
        None => Err(Trouble::Again(
            "the pick command printed nothing".to_string(),
        )),
        Some((last, [])) => Ok(json!({"attempt": last, "why": "the pick command's choice"})),
        Some((last, before)) => {
            let why = before.join("\n");
            let why = match why.char_indices().nth(2000) {
                Some((cut, _)) => &why[..cut],
                None => &why,
            };
            Ok(json!({"attempt": last, "why": why}))
        }
    }
}

#[cfg(test)]
mod tests;
