//! Stage 1 of plait: the plan. What the run should achieve, from which commit, and the tasks
//! with the files each one owns. A plan comes from a TOML file, a split rule or a manager
//! model's answer, and is validated against the repository before anything is created.
//!
//! # Where to start
//!
//! - [`PlanFile`] is a plan as written (`plait.toml`): [`parse`] or [`load`] reads one,
//!   refusing unknown keys with their name and line; [`to_toml`] writes one back.
//! - [`resolve`] (or [`resolve_with_env`], which also reads the providers' keys) checks it
//!   against the repository's base commit and gives a [`ResolvedPlan`]: each
//!   [`ResolvedTask`] with its owned files listed, its agent ([`AgentConfig`]), its walls,
//!   its attempts ([`Attempts`]) and the files its worktree holds ([`layout::Layout`]). Every
//!   fault is collected into one [`PlanError::Invalid`] rather than stopping at the first.
//! - [`split`] writes a plan from a rule (one task per directory, per module, per
//!   language); [`config`] merges the layered settings (user, repository) into a plan's
//!   text; [`setup`] is `[setup]`, what the views and checks get besides the tracked files.
//!
//! # Why a crate of its own
//!
//! The plan is the bottom of the engine: it names what every later stage does (workspace,
//! agents, collection, review, merge, landing) and depends on none of them, only on
//! `plait-core` (git, globs), `plait-sandbox` (the walls' settings) and `plait-llm` (the
//! providers' settings). Cut out, it can be read, tested and changed without the
//! orchestrator, and the compiler keeps it from reaching up.
//!
//! # Example
//!
//! A two-task plan parsed and resolved against a fresh repository:
//!
//! ```
//! use std::path::Path;
//!
//! let dir = tempfile::tempdir()?;
//! let repo = git2::Repository::init(dir.path())?;
//! for (path, text) in [("web/app.js", "app\n"), ("api/main.py", "main\n")] {
//!     std::fs::create_dir_all(dir.path().join(path).parent().unwrap())?;
//!     std::fs::write(dir.path().join(path), text)?;
//! }
//! let mut index = repo.index()?;
//! index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
//! let tree = repo.find_tree(index.write_tree()?)?;
//! let me = git2::Signature::now("me", "me@example.com")?;
//! repo.commit(Some("HEAD"), &me, &me, "start", &tree, &[])?;
//!
//! let text = r#"
//! goal = "Say hello in both halves"
//! [defaults]
//! agent = { exec = "true" }
//!
//! [[task]]
//! id = "web"
//! prompt = "Greet in the page"
//! owns = ["web/**"]
//!
//! [[task]]
//! id = "api"
//! prompt = "Greet in the API"
//! owns = ["api/**"]
//! "#;
//! let source = Path::new("plait.toml");
//! let plan = plait_plan::parse(text, source)?;
//! assert_eq!(plan.tasks.len(), 2);
//!
//! let resolved = plait_plan::resolve(&repo, plan, source)?;
//! assert_eq!(resolved.tasks[0].owned, ["web/app.js"]);
//! assert_eq!(resolved.tasks[1].owned, ["api/main.py"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

mod after;
mod attempts;
pub mod commands;
pub mod config;
mod exec;
mod keys;
pub mod layout;
mod programs;
mod resolved;
pub mod setup;
pub mod split;
pub mod tools;
mod validate;
mod validate_agents;
mod validate_settings;
mod validate_tasks;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use after::waits_for;
pub use attempts::MAX_ATTEMPTS;
pub use attempts::{AttemptSpec, Attempts, Fallback, PickFile, PickSpec};
pub use exec::ExecCommand;
pub use keys::unknown_keys;
use plait_llm::provider::ProviderFile;
use plait_sandbox::sandbox::SandboxMode;
pub use resolved::{AgentConfig, Reviewer, ToolSettings};
pub use resolved::{CheckSettings, CliSettings, ResolvedPlan, ResolvedTask};
pub use resolved::{GroupSettings, InheritedEnv, ReviewSettings};
pub use setup::suggested_setup;
pub use setup::{missing_setup_hint, SetupFile, SetupSettings};
pub use validate::resolve_kept;
pub use validate::{resolve, resolve_with_env};
pub use validate_agents::claude_code_settings;
pub use validate_settings::checks_of;

/// How long an agent may run when the plan does not say.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How many model turns a task may take when the plan does not say.
pub(crate) const DEFAULT_MAX_TURNS: u32 = 30;

/// A plan as written in TOML.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// What the whole run should achieve; every agent sees it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub goal: String,
    /// Branch or commit the tasks start from (default: HEAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// `[defaults]`.
    #[serde(default, skip_serializing_if = "Defaults::is_empty")]
    pub defaults: Defaults,
    /// The `[[task]]` entries.
    #[serde(default, rename = "task")]
    pub tasks: Vec<TaskFile>,
    /// Named model providers, `[providers.NAME]`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, ProviderFile>,
    /// Commands that judge each task's branch and the merged result.
    #[serde(default, skip_serializing_if = "ChecksFile::is_empty")]
    pub checks: ChecksFile,
    /// Who reviews each task's branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewFile>,
    /// Settings of the agent CLIs plait drives itself, `[agents.claude-code]` and
    /// `[agents.aider]`.
    #[serde(default, skip_serializing_if = "AgentsFile::is_empty")]
    pub agents: AgentsFile,
    /// Supervisors for large runs: tasks grouped by path, each group merged and reviewed
    /// as a whole before the top merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<GroupsFile>,
    /// What a model agent's tools may do beyond its files: `[tools] run`, the commands its
    /// `run` tool may run.
    #[serde(default, skip_serializing_if = "tools::ToolsFile::is_empty")]
    pub tools: tools::ToolsFile,
    /// What the project needs besides its tracked files: ignored paths of the user's
    /// checkout shared into every view, and commands that install them once per base.
    #[serde(default, skip_serializing_if = "SetupFile::is_empty")]
    pub setup: SetupFile,
    /// How the attempt that becomes a task is chosen, for tasks run as several attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pick: Option<PickFile>,
}

/// The `[groups]` table.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupsFile {
    /// Runs with more tasks than this are grouped (default 12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<usize>,
    /// Exactly this many groups, whatever the number of tasks (`--groups N` overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// The supervisor who reviews each group's merged diff: `"off"`, a model provider or
    /// `{ exec = "CMD" }` (default: the `[review]` agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<AgentSpec>,
    /// Times a supervisor's request for changes goes back to the group's tasks (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
}

/// The `[agents]` table: one entry per agent CLI plait knows.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentsFile {
    #[serde(
        default,
        rename = "claude-code",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) claude_code: Option<ToolFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) aider: Option<ToolFile>,
}

impl AgentsFile {
    fn is_empty(&self) -> bool {
        self.claude_code.is_none() && self.aider.is_none()
    }
}

/// How to run one agent CLI.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolFile {
    /// The program: a name looked up on `PATH` (the default is the CLI's usual name) or a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin: Option<String>,
    /// The model it should use (default: the provider's model, or the CLI's own default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The provider (built-in or `[providers.NAME]`) whose base URL and key it gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// More arguments, added after plait's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// The `[checks]` table: shell commands, each run in a full checkout.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChecksFile {
    /// Run against each task's branch; a failure goes back to the worker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task: Vec<String>,
    /// Run against the merged branch; a failure keeps the run from landing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<String>,
    /// How many checks run at once (default: the number of CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<usize>,
    /// How long one check command may run (default 30m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Whether failing merged checks start a culprit search (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bisect: Option<bool>,
    /// More rounds for the culprits a search finds, before they are held out (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rework: Option<u32>,
    /// What checks and command reviewers may reach over the network: `"off"` (the
    /// default: a loopback of their own, and `[sandbox] ports`) or `"on"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<plait_sandbox::sandbox::Network>,
    /// What a check that already fails on the base does to the gate: `"fail"` (the
    /// default: it keeps the run from landing, saying it fails on the base too) or
    /// `"ignore"`. Either way it sends no task back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseChecks>,
}

/// `[checks] base`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BaseChecks {
    /// A task check that fails on the base fails the task (the default).
    #[default]
    Fail,
    /// A task check that fails on the base too does not count against the task.
    Ignore,
}

impl ChecksFile {
    fn is_empty(&self) -> bool {
        self.task.is_empty()
            && self.merged.is_empty()
            && self.jobs.is_none()
            && self.timeout.is_none()
            && self.bisect.is_none()
            && self.rework.is_none()
            && self.network.is_none()
            && self.base.is_none()
    }
}

/// The `[review]` table.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewFile {
    /// `"off"`, a model provider (`"anthropic"`, `"openai"`, a `[providers]` name) or
    /// `{ exec = "CMD" }` (exit 0 approve, 1 request changes, 2 reject). Default: the
    /// worker's own model, or off for exec workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentSpec>,
    /// Rounds of changes a task may get after its first try (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
}

/// Settings every task inherits unless it sets its own.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// The agent every task runs unless it names its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentSpec>,
    /// Which files every task's worktree holds unless it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout: Option<Checkout>,
    /// Globs of files every task's worktree holds read-only, unless it names its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Vec<String>>,
    /// How long an agent may run, such as `"90s"` or `"10m"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// How many turns a model agent may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// How many tokens (input, output and cache) a model agent may use in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// Whether a task that changes none of its files needs a person's look (default: yes
    /// for model agents and agent CLIs, which were asked for a change; no for exec agents,
    /// where a codemod with nothing to do is normal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_changes: Option<bool>,
    /// The kernel's walls around every process of a task (and the merged checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxFile>,
    /// Tasks every task waits for (ids or globs over ids; a task never waits for itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
    /// How many attempts each task runs, the best of which becomes the task (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// The agents a task's attempts take in turn, instead of `agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<AgentSpec>>,
}

impl Defaults {
    fn is_empty(&self) -> bool {
        self.agent.is_none()
            && self.checkout.is_none()
            && self.context.is_none()
            && self.timeout.is_none()
            && self.max_turns.is_none()
            && self.token_budget.is_none()
            && self.expect_changes.is_none()
            && self.sandbox.is_none()
            && self.after.is_none()
            && self.attempts.is_none()
            && self.agents.is_none()
    }
}

/// A `sandbox` table, under `[defaults]` or a task.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxFile {
    /// `"auto"` (the default), `"required"` or `"off"`; a task's overrides `[defaults]`'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SandboxMode>,
    /// More paths the processes may write (absolute or `~/...`), such as a package cache;
    /// a task's are added to `[defaults]`'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// More paths the processes may read (absolute or `~/...`) besides their own places,
    /// the system's trees and the toolchains plait knows; a task's are added to
    /// `[defaults]`'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readable: Vec<String>,
    /// How the task's whole-tree view is made: `"auto"` (an overlay where the system
    /// allows, the default), `"filled"`, or `false` (an exec or `{ cli }` agent's own
    /// command in its sparse worktree, the view through `$PLAIT_RUN_IN`); a task's
    /// overrides `[defaults]`'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<plait_sandbox::sandbox::ViewMode>,
    /// What the task's agent may reach over the network: `"off"` (a loopback of its own,
    /// and `ports`; the default for exec and model agents) or `"on"` (the default for
    /// agent CLIs, which talk to their model); a task's overrides `[defaults]'`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<plait_sandbox::sandbox::Network>,
    /// Ports on the machine's loopback that agents and checks may connect to with the
    /// network off (a database a test suite needs); a task's are added to `[defaults]'`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
    /// UNIX sockets served outside (a database's, at or beneath these paths) that agents and
    /// checks may still connect to with the network off; added like `ports`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sockets: Vec<String>,
    /// Variables that point at sockets or hold credentials, which a process with the
    /// network off does not get unless they are named here; added like `ports`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep_env: Vec<String>,
    /// How much the processes may take: `{ pids = 512, memory = "4G" }`, each also
    /// `"off"`; a task's keys override `[defaults]`'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsFile>,
}

/// `limits` of a `sandbox` table: each a number (`memory` also a size such as `"4G"`), or
/// `"off"`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    /// Processes and threads one command may have at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<toml::Value>,
    /// Memory each process may allocate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<toml::Value>,
}

/// One `[[task]]` entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskFile {
    /// The task's id, unique in the plan.
    pub id: String,
    /// What the agent is told to do.
    pub prompt: String,
    /// Gitignore-style globs of the files this task may change.
    pub owns: Vec<String>,
    /// Globs of files checked out read-only for the agent to look at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Vec<String>>,
    /// Which files its worktree holds, if not the default's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout: Option<Checkout>,
    /// The agent it runs, if not the default's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentSpec>,
    /// How long its agent may run (`30m`), if not the default's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// The most turns its agent may take, if not the default's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// The most tokens its agent may spend, if not the default's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// Whether its agent is expected to change a file it owns, if not the default's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_changes: Option<bool>,
    /// Its walls, if not the default's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxFile>,
    /// The tasks this one waits for (ids, or globs over ids): it starts from the merge of
    /// their work, once each has ended done and merged cleanly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
    /// How many attempts it runs, the best of which becomes the task, if not the
    /// default's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// The agents its attempts take in turn (instead of `agent`); as many attempts as
    /// agents unless `attempts` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<AgentSpec>>,
    /// How its attempt is chosen, if not `[pick] by`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pick: Option<PickSpec>,
    /// Checks that are this task's own job (a test it is to make pass), run on its work
    /// after `[checks] task`: their failure is the task's whatever the base does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<Vec<String>>,
}

impl TaskFile {
    /// A task of id `id` told `prompt`, owning `owns`, everything else left to the plan's
    /// defaults.
    pub fn new(id: String, prompt: String, owns: Vec<String>) -> TaskFile {
        TaskFile {
            id,
            prompt,
            owns,
            context: None,
            checkout: None,
            agent: None,
            timeout: None,
            max_turns: None,
            token_budget: None,
            expect_changes: None,
            sandbox: None,
            after: None,
            attempts: None,
            agents: None,
            pick: None,
            checks: None,
        }
    }
}

/// Which files a task's worktree holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Checkout {
    /// The owned files, the context files and the repository's `.gitignore` files.
    #[default]
    Owned,
    /// Every tracked file.
    Full,
}

/// The agent a task runs: a name, `{ exec = "CMD" }`, `{ exec_each = "CMD {file}" }` or
/// `{ cli = [...] }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSpec {
    /// An agent by name: a built-in one (`anthropic`, `openai`, `claude-code`, `aider`) or a
    /// `[providers.NAME]` table.
    Named(String),
    /// A shell command: `{ exec = "CMD" }` or `{ exec_each = "CMD {file}" }`.
    Exec(ExecCommand),
    /// An agent program and its arguments: `{ cli = [...] }`.
    Cli(CliSpec),
}

/// `{ cli = [...], gateway = "provider" }`: an agent program, and the provider whose API it
/// speaks when it reaches its model through plait's gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliSpec {
    /// The program and its arguments, with placeholders.
    pub argv: Vec<String>,
    /// A built-in provider or a `[providers.NAME]` table; the program is given the
    /// gateway as that provider's base URL and key (`ANTHROPIC_BASE_URL`,
    /// `OPENAI_BASE_URL`, ...).
    pub gateway: Option<String>,
    /// `"json"`: in a role that answers (a reviewer, a supervisor), the program's last JSON
    /// object on stdout, or the file `{answer}`, is its answer.
    pub answer: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentTable {
    exec: Option<String>,
    exec_each: Option<String>,
    files: Option<Vec<String>>,
    cli: Option<Vec<String>>,
    gateway: Option<String>,
    answer: Option<String>,
}

impl<'de> Deserialize<'de> for AgentSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpecVisitor;
        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = AgentSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "an agent name, or a table { exec = \"CMD\" }, { exec_each = \"CMD {file}\" } \
                     or { cli = [...] }",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<AgentSpec, E> {
                Ok(AgentSpec::Named(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<AgentSpec, A::Error> {
                let table = AgentTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                if table.files.is_some() && table.exec_each.is_none() {
                    return Err(de::Error::custom(
                        "`files` goes with `exec_each`: it chooses the owned files the \
                         per-file command runs on",
                    ));
                }
                if table.answer.as_deref().is_some_and(|a| a != "json") {
                    return Err(de::Error::custom(
                        "`answer` takes \"json\": the program's last JSON object on stdout (or \
                         the file {answer}) is its answer",
                    ));
                }
                if (table.gateway.is_some() || table.answer.is_some()) && table.cli.is_none() {
                    return Err(de::Error::custom(
                        "`gateway` and `answer` go with `cli`: the provider whose API the \
                         program speaks through plait's gateway, and how it answers",
                    ));
                }
                match (table.exec, table.exec_each, table.cli) {
                    (Some(cmd), None, None) => Ok(AgentSpec::Exec(ExecCommand::once(cmd))),
                    (None, Some(cmd), None) => Ok(AgentSpec::Exec(
                        ExecCommand::each_file(cmd).on_files(table.files.unwrap_or_default()),
                    )),
                    (None, None, Some(argv)) => Ok(AgentSpec::Cli(CliSpec {
                        argv,
                        gateway: table.gateway,
                        answer: table.answer,
                    })),
                    _ => Err(de::Error::custom(
                        "an agent table needs exactly one of `exec`, `exec_each` or `cli`",
                    )),
                }
            }
        }
        deserializer.deserialize_any(SpecVisitor)
    }
}

impl Serialize for AgentSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            AgentSpec::Named(name) => serializer.serialize_str(name),
            AgentSpec::Exec(cmd) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry(cmd.key(), &cmd.command)?;
                if !cmd.files.is_empty() {
                    map.serialize_entry("files", &cmd.files)?;
                }
                map.end()
            }
            AgentSpec::Cli(spec) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("cli", &spec.argv)?;
                if let Some(provider) = &spec.gateway {
                    map.serialize_entry("gateway", provider)?;
                }
                if let Some(answer) = &spec.answer {
                    map.serialize_entry("answer", answer)?;
                }
                map.end()
            }
        }
    }
}

/// Why a plan cannot be used. Nothing has been created when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The plan's file could not be read.
    #[error("cannot read plan {path}: {source}")]
    Read {
        /// The plan's file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The plan is not valid TOML of a plan's form.
    #[error("plan {path} is not valid: {message}")]
    Parse {
        /// The plan's file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A config file is not valid TOML of a config's form.
    #[error("config {path} is not valid: {message}")]
    Config {
        /// The config file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// The plan's base names no branch or commit.
    #[error("plan {path}: base `{base}` is not a branch or commit in this repository")]
    BaseNotFound {
        /// The plan's file.
        path: PathBuf,
        /// The base as the plan gives it.
        base: String,
    },
    /// The plan parses but does not hold together.
    #[error("plan {path} has {} problem{}:\n{}", problems.len(), if problems.len() == 1 { "" } else { "s" }, problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The plan's file.
        path: PathBuf,
        /// Every problem found, one line each.
        problems: Vec<String>,
    },
    /// A split rule could not be read.
    #[error("bad split rule `{spec}`: {reason}")]
    Split {
        /// The rule as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A git operation failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// Reads and parses a plan file; unknown keys are refused with their line.
pub fn load(path: &Path) -> Result<PlanFile, PlanError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlanError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Parses plan text; `path` is only used in messages. Unknown keys are refused all at
/// once, each with its line and the keys its table may hold.
pub fn parse(text: &str, path: &Path) -> Result<PlanFile, PlanError> {
    toml::from_str(text).map_err(|e| {
        let message = match keys::unknown(text, &keys::PLAN) {
            Some(found) if !found.is_empty() => keys::message(&found),
            _ => e.to_string().trim_end().to_string(),
        };
        PlanError::Parse {
            path: path.to_path_buf(),
            message,
        }
    })
}

/// Renders a plan as TOML, with a comment saying how it was made.
pub fn to_toml(plan: &PlanFile, header: &str) -> String {
    let body =
        toml::to_string_pretty(plan).unwrap_or_else(|e| format!("# could not render: {e}\n"));
    let mut out = String::new();
    for line in header.lines() {
        out.push_str("# ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&body);
    out
}
