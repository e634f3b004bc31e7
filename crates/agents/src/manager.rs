//! Planning by a manager model: it sees the goal and the repository (tracked files with
//! sizes, grouped by directory, and the contents of files the user lets it read) and
//! answers through a forced `submit_plan` tool. Its plan is validated exactly like a
//! hand-written one; the problems go back to it for a bounded number of corrections.
//!
//! It sits above both [`plait_plan`] (whose validation judges its answers) and
//! `crate::agent` (Claude Code, when it plans there), so neither names the other through
//! it. The use case of planning by a manager is `ops::manage`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use git2::Repository;
use serde_json::{json, Value};

use crate::prompts;
use plait_core::cancel::Cancel;
use plait_core::git::TreeFile;
use plait_core::globs::Globs;
use plait_core::state::Usage;
use plait_llm::conversation::{Block, Message, Role, ToolSpec};
use plait_llm::http::{self, Transcript};
use plait_llm::limiter::Limiter;
use plait_llm::provider::ProviderSettings;
use plait_llm::{account, forced_tool_body};
use plait_plan::{
    resolve_with_env, AgentSpec, Defaults, PlanError, PlanFile, ResolvedPlan, SetupFile, TaskFile,
};

/// The tool the manager must answer with.
pub(crate) const SUBMIT_PLAN: &str = "submit_plan";

/// At most this many files are listed one by one; past it, directories are summed up.
const MAX_LISTED_FILES: usize = 3000;
/// Bytes of one included file, and of all of them, shown to the manager.
const MAX_INCLUDED_FILE: usize = 20_000;
const MAX_INCLUDED_TOTAL: usize = 200_000;

/// What the manager is asked.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// What the whole run should achieve.
    pub goal: String,
    /// Branch or commit the tasks start from (`None`: the current HEAD).
    pub base: Option<String>,
    /// Globs of files whose contents the manager may read.
    pub include: Vec<String>,
    /// The agent the planned tasks run.
    pub worker: AgentSpec,
    /// How many tasks at most.
    pub max_tasks: usize,
    /// How many times a plan that is not valid goes back to the manager.
    pub corrections: u32,
}

/// A plan the manager made and plait validated.
#[derive(Debug)]
pub struct Planned {
    /// The plan, as it is written to its file.
    pub plan: PlanFile,
    /// The plan resolved against the repository.
    pub resolved: ResolvedPlan,
    /// Tracked files at the base that no task owns.
    pub unowned: Vec<String>,
    /// How many answers it took (1 = right the first time).
    pub attempts: u32,
    /// The tokens the manager's answers took.
    pub usage: Usage,
}

/// Why no plan came out.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The manager model could not be called; the message says why.
    #[error("the manager model could not be reached: {0}")]
    Call(String),
    /// Every answer the manager gave was an invalid plan.
    #[error("the manager's plan was still not valid after {attempts} answer(s); no plan was written. Its last problems:\n{}", problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    NeverValid {
        /// How many answers it gave.
        attempts: u32,
        /// The problems of its last plan.
        problems: Vec<String>,
    },
    /// A plan could not be read or resolved.
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// Who plans: a model over its API (answering through a forced `submit_plan`), or Claude
/// Code (answering in `submit_plan`'s form through `--json-schema`, with read-only tools
/// in the repository, each correction a new question holding its last answer and what
/// was wrong with it).
pub enum Planner<'a> {
    /// A model over its API.
    Model {
        /// The model's provider.
        provider: &'a ProviderSettings,
        /// The provider's rate limiter.
        limiter: &'a Limiter,
        /// The HTTP client the call goes through.
        client: &'a reqwest::Client,
    },
    /// The Claude Code CLI.
    ClaudeCode {
        /// How to run Claude Code.
        settings: &'a plait_plan::ToolSettings,
        /// The plait binary, for Claude Code's guard.
        plait_program: &'a Path,
        /// Where its files go (the plans directory).
        dir: &'a Path,
    },
}

/// Everything the manager call needs.
pub struct Manager<'a> {
    /// Who writes the plan.
    pub planner: Planner<'a>,
    /// Fires when the command is interrupted; the manager stops at once.
    pub cancel: &'a Cancel,
    /// Where requests and answers are written (JSON lines).
    pub transcript: &'a Path,
    /// Environment lookups for validating the workers' agent.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl Manager<'_> {
    /// Asks for a plan until one is valid or the corrections run out.
    pub async fn plan(
        &self,
        repo: &Repository,
        files: &[TreeFile],
        request: &PlanRequest,
    ) -> Result<Planned, ManagerError> {
        let (provider, limiter, client) = match &self.planner {
            Planner::Model {
                provider,
                limiter,
                client,
            } => (*provider, *limiter, *client),
            Planner::ClaudeCode {
                settings,
                plait_program,
                dir,
            } => {
                return self
                    .plan_in_claude_code(repo, files, request, settings, plait_program, dir)
                    .await
            }
        };
        let setup = written_setup(repo, files);
        let system = prompts::planner::system(&request.goal, request.max_tasks, SUBMIT_PLAN);
        let mut messages = vec![Message::user_text(overview(repo, files, request))];
        let mut transcript = Transcript::open(self.transcript);
        let mut usage = Usage {
            cost_usd: provider.prices.map(|_| 0.0),
            ..Usage::default()
        };
        let mut problems = Vec::new();
        let attempts = request.corrections + 1;
        for attempt in 1..=attempts {
            let body = forced_tool_body(provider, &system, tool(), &messages);
            let (reply, timing) = http::call(
                client,
                provider,
                limiter,
                &body,
                attempt,
                &mut transcript,
                self.cancel,
            )
            .await
            .map_err(ManagerError::Call)?;
            account(&mut usage, provider, &reply, &timing);
            let call = reply.content.iter().find_map(|b| match b {
                Block::ToolUse { id, name, input } if name == SUBMIT_PLAN => Some((id, input)),
                _ => None,
            });
            let (id, verdict) = match call {
                None => (
                    None,
                    Err(vec![format!("the answer did not call {SUBMIT_PLAN}")]),
                ),
                Some((id, input)) => (Some(id.clone()), self.judge(repo, request, &setup, input)),
            };
            match verdict {
                Ok((plan, resolved)) => return Ok(planned(plan, resolved, attempt, usage)),
                Err(found) => problems = found,
            }
            messages.extend(correction(reply.content, id, &problems));
        }
        Err(ManagerError::NeverValid { attempts, problems })
    }

    /// [`Manager::plan`] with Claude Code as the planner.
    async fn plan_in_claude_code(
        &self,
        repo: &Repository,
        files: &[TreeFile],
        request: &PlanRequest,
        settings: &plait_plan::ToolSettings,
        plait_program: &Path,
        dir: &Path,
    ) -> Result<Planned, ManagerError> {
        let system = prompts::planner::system(
            &request.goal,
            request.max_tasks,
            "answering in the structured form asked for",
        );
        let overview = overview(repo, files, request);
        let setup = written_setup(repo, files);
        let schema = tool().schema;
        let workdir = repo
            .workdir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.to_path_buf());
        // Its reads stay in the repository (the guard); it writes only its own files.
        let walls = plait_sandbox::sandbox::SandboxSettings {
            network: plait_sandbox::sandbox::Network::On,
            // It reads the user's checkout to plan, before any task exists.
            read_all: true,
            ..plait_sandbox::sandbox::SandboxSettings::default()
        };
        let sandbox = plait_sandbox::sandbox::Sandbox::new(&walls, vec![dir.to_path_buf()]);
        let stamp = plait_core::state::now_ms();
        let mut usage = Usage {
            cost_usd: Some(0.0),
            ..Usage::default()
        };
        let mut problems = Vec::new();
        let mut last: Option<Value> = None;
        let attempts = request.corrections + 1;
        for attempt in 1..=attempts {
            let message = match &last {
                None => overview.clone(),
                Some(answer) => format!(
                    "{overview}\n\nYour last plan was:\n{answer}\n\n{}",
                    prompts::planner::correction(&problems, "your answer")
                ),
            };
            let name = format!("manager-{stamp}-{attempt}");
            let question = crate::agent::claude_code::Question {
                settings,
                system: format!("{}\n\n{}", system.shared, system.task),
                message,
                schema: &schema,
                cwd: &workdir,
                read_roots: vec![workdir.clone()],
                dir,
                name: &name,
                plait_program,
                timeout: std::time::Duration::from_secs(30 * 60),
                cancel: self.cancel,
                sandbox: &sandbox,
                gateway: None,
                max_turns: 40,
            };
            let answered = crate::agent::claude_code::ask(&question)
                .await
                .map_err(ManagerError::Call)?;
            usage.add(&answered.usage);
            match self.judge(repo, request, &setup, &Ok(answered.value.clone())) {
                Ok((plan, resolved)) => return Ok(planned(plan, resolved, attempt, usage)),
                Err(found) => problems = found,
            }
            last = Some(answered.value);
        }
        Err(ManagerError::NeverValid { attempts, problems })
    }

    /// Reads a `submit_plan` input into a plan with `setup` and validates it; the problems
    /// otherwise.
    fn judge(
        &self,
        repo: &Repository,
        request: &PlanRequest,
        setup: &SetupFile,
        input: &Result<Value, String>,
    ) -> Result<(PlanFile, ResolvedPlan), Vec<String>> {
        let input = input
            .as_ref()
            .map_err(|raw| vec![format!("the tool input is not JSON: {raw}")])?;
        let tasks = parse_tasks(input)?;
        let mut problems = Vec::new();
        if tasks.len() > request.max_tasks {
            problems.push(format!(
                "it has {} tasks; at most {} are allowed: merge some",
                tasks.len(),
                request.max_tasks
            ));
        }
        let plan = PlanFile {
            goal: request.goal.clone(),
            base: request.base.clone(),
            defaults: Defaults {
                agent: Some(request.worker.clone()),
                ..Defaults::default()
            },
            tasks,
            setup: setup.clone(),
            ..PlanFile::default()
        };
        match resolve_with_env(repo, plan.clone(), Path::new("<manager>"), self.env) {
            Ok(resolved) if problems.is_empty() => Ok((plan, resolved)),
            Ok(_) => Err(problems),
            Err(PlanError::Invalid {
                problems: found, ..
            }) => {
                problems.extend(found);
                Err(problems)
            }
            Err(other) => Err(vec![other.to_string()]),
        }
    }
}

/// The manager's answer and plait's reply to it: the problems, as the tool's error result
/// when it called the tool (a plain message when it did not), and a request to try again.
fn correction(answer: Vec<Block>, call: Option<String>, problems: &[String]) -> [Message; 2] {
    let feedback = prompts::planner::correction(problems, SUBMIT_PLAN);
    let reply = match call {
        Some(id) => Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                id,
                content: feedback,
                is_error: true,
            }],
        },
        None => Message::user_text(feedback),
    };
    [
        Message {
            role: Role::Assistant,
            content: answer,
        },
        reply,
    ]
}

/// The tasks of a `submit_plan` input.
fn parse_tasks(input: &Value) -> Result<Vec<TaskFile>, Vec<String>> {
    let Some(items) = input.get("tasks").and_then(Value::as_array) else {
        return Err(vec!["`tasks` is missing or not a list".to_string()]);
    };
    let mut problems = Vec::new();
    let mut tasks = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let text = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_string);
        let list = |key: &str| -> Option<Vec<String>> {
            item.get(key)?
                .as_array()?
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect()
        };
        let (Some(id), Some(prompt)) = (text("id"), text("prompt")) else {
            problems.push(format!("tasks[{i}] needs a string `id` and `prompt`"));
            continue;
        };
        let Some(owns) = list("owns") else {
            problems.push(format!("task `{id}`: `owns` must be a list of globs"));
            continue;
        };
        let context = match item.get("context") {
            None | Some(Value::Null) => None,
            Some(_) => match list("context") {
                Some(c) if c.is_empty() => None,
                Some(c) => Some(c),
                None => {
                    problems.push(format!("task `{id}`: `context` must be a list of globs"));
                    continue;
                }
            },
        };
        let after = match item.get("after") {
            None | Some(Value::Null) => None,
            Some(_) => match list("after") {
                Some(a) if a.is_empty() => None,
                Some(a) => Some(a),
                None => {
                    problems.push(format!("task `{id}`: `after` must be a list of task ids"));
                    continue;
                }
            },
        };
        let attempts = match item.get("attempts") {
            None | Some(Value::Null) => None,
            Some(n) => match n.as_u64().filter(|n| (1..=5).contains(n)) {
                Some(1) => None,
                Some(n) => Some(n as u32),
                None => {
                    problems.push(format!(
                        "task `{id}`: `attempts` must be a whole number from 1 to 5"
                    ));
                    continue;
                }
            },
        };
        tasks.push(TaskFile {
            context,
            after,
            attempts,
            ..TaskFile::new(id, prompt, owns)
        });
    }
    if items.is_empty() {
        problems.push("the plan has no tasks".to_string());
    }
    if problems.is_empty() {
        Ok(tasks)
    } else {
        Err(problems)
    }
}

/// The `[setup]` a manager's plan gets: the dependency directories of the checkout that
/// git ignores and a tracked lockfile fills ([`plait_plan::suggested_setup`]).
fn written_setup(repo: &Repository, files: &[TreeFile]) -> SetupFile {
    repo.workdir()
        .and_then(|w| plait_plan::suggested_setup(w, files))
        .unwrap_or_default()
}

/// A valid plan, made in `attempts` answers, with the files it leaves unowned.
fn planned(plan: PlanFile, resolved: ResolvedPlan, attempts: u32, usage: Usage) -> Planned {
    Planned {
        unowned: unowned(&resolved),
        plan,
        resolved,
        attempts,
        usage,
    }
}

/// Tracked files no task owns.
fn unowned(plan: &ResolvedPlan) -> Vec<String> {
    plan.files
        .iter()
        .filter(|f| f.is_blob())
        .filter(|f| !plan.tasks.iter().any(|t| t.owns.matches(&f.path)))
        .map(|f| f.path.clone())
        .collect()
}

fn tool() -> ToolSpec {
    ToolSpec {
        name: SUBMIT_PLAN,
        description: "Submit the plan: the tasks that together reach the goal, each owning a set of files no task running at the same time owns.",
        schema: json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": "Short, unique; letters, digits, - _ . (it becomes a branch name)"},
                            "owns": {"type": "array", "items": {"type": "string"}, "description": "gitignore-style globs of the files this task may change; no file may be owned by two tasks"},
                            "prompt": {"type": "string", "description": "What the worker should do, complete in itself"},
                            "context": {"type": "array", "items": {"type": "string"}, "description": "Globs of files the worker should see but not change"},
                            "after": {"type": "array", "items": {"type": "string"}, "description": "Ids of tasks this one must come after: it starts from their merged result (definitions before uses, build files before sources, removals last); leave out for independent tasks"},
                            "attempts": {"type": "integer", "minimum": 1, "maximum": 5, "description": "For a risky or hard task only: how many times to try it on its own, the best attempt that passes being kept (each costs as much as a task); leave out for routine work"}
                        },
                        "required": ["id", "owns", "prompt"]
                    }
                }
            },
            "required": ["tasks"]
        }),
    }
}

/// The first message: the goal, the tracked files with sizes by directory, and the
/// included files' contents.
fn overview(repo: &Repository, files: &[TreeFile], request: &PlanRequest) -> String {
    let odb = repo.odb().ok();
    let size = |f: &TreeFile| -> u64 {
        odb.as_ref()
            .and_then(|o| o.read_header(f.oid).ok())
            .map_or(0, |(size, _)| size as u64)
    };
    let blobs: Vec<&TreeFile> = files.iter().filter(|f| f.is_blob()).collect();
    let mut out = format!(
        "The goal: {}\n\nThe repository has {} tracked files.\n",
        request.goal.trim(),
        blobs.len()
    );
    let mut dirs: BTreeMap<&str, Vec<(&str, u64)>> = BTreeMap::new();
    for f in &blobs {
        let (dir, name) = f.path.rsplit_once('/').unwrap_or(("", f.path.as_str()));
        dirs.entry(dir).or_default().push((name, size(f)));
    }
    let itemized = blobs.len() <= MAX_LISTED_FILES;
    out.push_str(if itemized {
        "\nFiles by directory (bytes):\n"
    } else {
        "\nDirectories (files, bytes); too many files to list one by one:\n"
    });
    for (dir, entries) in &dirs {
        let total: u64 = entries.iter().map(|e| e.1).sum();
        let shown = if dir.is_empty() { "/" } else { dir };
        let _ = writeln!(out, "{shown}/ ({} files, {total} bytes)", entries.len());
        if itemized {
            for (name, bytes) in entries {
                let _ = writeln!(out, "  {name} {bytes}");
            }
        }
    }
    let include = Globs::new(&request.include).unwrap_or_else(|_| Globs::empty());
    let mut budget = MAX_INCLUDED_TOTAL;
    let mut skipped = 0;
    for f in blobs.iter().filter(|f| include.matches(&f.path)) {
        let Ok(blob) = repo.find_blob(f.oid) else {
            continue;
        };
        let Ok(text) = std::str::from_utf8(blob.content()) else {
            continue;
        };
        if budget == 0 {
            skipped += 1;
            continue;
        }
        let mut cut = text.len().min(MAX_INCLUDED_FILE).min(budget);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        budget -= cut;
        let more = if cut < text.len() {
            format!("\n[... {} more bytes]", text.len() - cut)
        } else {
            String::new()
        };
        let _ = write!(out, "\n--- {} ---\n{}{more}\n", f.path, &text[..cut]);
    }
    if skipped > 0 {
        let _ = writeln!(
            out,
            "\n[{skipped} more included file(s) left out: too much text]"
        );
    }
    out
}

/// The TOML of a manager's plan, with a header naming what no task owns.
pub fn render(planned: &Planned, manager: &str) -> String {
    let mut header = format!(
        "plait plan, made by the manager model `{manager}` in {} answer(s)\n{} task(s); edit freely, then: plait run <this file>",
        planned.attempts,
        planned.plan.tasks.len()
    );
    if planned.unowned.is_empty() {
        header.push_str("\nEvery tracked file is owned by a task.");
    } else {
        let _ = write!(
            header,
            "\n{} tracked file(s) no task owns (no agent can change them):",
            planned.unowned.len()
        );
        for path in planned.unowned.iter().take(50) {
            let _ = write!(header, "\n  {path}");
        }
        if planned.unowned.len() > 50 {
            let _ = write!(header, "\n  ... and {} more", planned.unowned.len() - 50);
        }
    }
    plait_plan::to_toml(&planned.plan, &header)
}
