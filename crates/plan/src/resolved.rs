//! A plan checked against the repository, ready to run: the resolved plan, its tasks, agents,
//! checks, review and groups, as [`super::validate`] makes them from the plan file.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use git2::Oid;

use super::layout::{self, Layout};
use super::setup::SetupSettings;
use super::tools::RunCommands;
use super::{Checkout, ExecCommand};
use plait_core::git::TreeFile;
use plait_core::globs::Globs;
use plait_llm::provider::ProviderSettings;
use plait_sandbox::sandbox::{Network, SandboxMode, SandboxSettings, Support};

/// A plan checked against the repository, ready to run.
#[derive(Debug, Clone)]
pub struct ResolvedPlan {
    /// What the whole run should achieve; every agent sees it.
    pub goal: String,
    /// The commit every task starts from.
    pub base: Oid,
    /// How the plan named the base; without one, the current branch (or `HEAD` if detached).
    pub base_name: String,
    /// The tasks, in the plan's order.
    pub tasks: Vec<ResolvedTask>,
    /// Every entry of the base commit's tree, sorted by path.
    pub files: Arc<Vec<TreeFile>>,
    /// The commands that judge each task's branch and the merged result.
    pub checks: CheckSettings,
    /// Who reviews each task's branch.
    pub review: ReviewSettings,
    /// Supervisors for large runs: whether and how tasks are grouped.
    pub groups: GroupSettings,
    /// What the views and checks get besides the tracked files (`[setup]`).
    pub setup: SetupSettings,
}

impl ResolvedPlan {
    /// The one warning to give when some process would be confined but this system cannot
    /// confine it (mode `auto`).
    pub fn sandbox_warning(&self) -> Option<String> {
        let auto = self
            .tasks
            .iter()
            .map(|t| &t.sandbox)
            .chain([&self.checks.sandbox])
            .any(|s| s.mode == SandboxMode::Auto);
        match plait_sandbox::sandbox::support() {
            Support::Missing(why) if auto => Some(format!(
                "the sandbox is not available ({why}): agents and checks run unconfined, able to \
                 write anywhere you can; set [defaults] sandbox = {{ mode = \"off\" }} to choose \
                 that, or mode = \"required\" to refuse such a system"
            )),
            _ => None,
        }
    }
}

/// Runs with more tasks than this are grouped under supervisors unless the plan says.
pub(crate) const DEFAULT_GROUP_THRESHOLD: usize = 12;

/// How a large run is grouped under supervisors, resolved.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    /// More tasks than this: grouped.
    pub threshold: usize,
    /// A fixed number of groups.
    pub count: Option<usize>,
    /// Who reviews each group's merge; `Worker` means the first task's reviewer.
    pub reviewer: Reviewer,
    /// Times a supervisor's request for changes goes back to the group's tasks.
    pub rounds: u32,
}

impl GroupSettings {
    /// How many groups a run of `tasks` tasks gets (0 or 1: no grouping).
    pub fn groups_for(&self, tasks: usize) -> usize {
        match self.count {
            Some(n) => n.min(tasks),
            None if tasks > self.threshold => tasks.div_ceil(self.threshold),
            None => 0,
        }
    }
}

/// The commands that judge branches, resolved.
#[derive(Debug, Clone)]
pub struct CheckSettings {
    /// Run against each task's branch; a failure goes back to the worker.
    pub task: Vec<String>,
    /// Run against the merged branch; a failure keeps the run from landing.
    pub merged: Vec<String>,
    /// Checks at once.
    pub jobs: usize,
    /// How long one command may run.
    pub timeout: Duration,
    /// The walls of the merged checks (the plan's `[defaults] sandbox`, with the checks'
    /// network); task checks run in their task's, with the checks' network.
    pub sandbox: SandboxSettings,
    /// What checks and command reviewers may reach over the network.
    pub network: Network,
    /// Whether failing merged checks start a culprit search.
    pub bisect: bool,
    /// More rounds for the culprits a search finds, each with feedback naming the check,
    /// its output and the partners.
    pub rework: u32,
    /// Whether a check that already fails on the base is left out of the gate.
    pub base_ignored: bool,
}

/// Who reviews a task's branch.
#[derive(Debug, Clone)]
pub enum Reviewer {
    /// No reviewer: a task's rounds end without a verdict.
    Off,
    /// A shell command: exit 0 approve, 1 request changes, 2 reject.
    Command(String),
    /// A model, answering through `submit_review`.
    Model(Arc<ProviderSettings>),
    /// Claude Code (`[agents.claude-code]`), answering through `--json-schema`.
    ClaudeCode(Arc<ToolSettings>),
    /// Any agent program, whose last JSON object on stdout (or the file `{answer}`) is its
    /// answer: `{ cli = [...], answer = "json" }`.
    Cli(Arc<CliSettings>),
    /// The task's own model; off for exec workers.
    Worker,
}

impl Reviewer {
    /// The provider a Claude Code or `{ cli }` reviewer reaches through plait's gateway.
    pub fn gateway(&self) -> Option<&Arc<ProviderSettings>> {
        match self {
            Reviewer::ClaudeCode(t) => t.gateway.as_ref(),
            Reviewer::Cli(c) => c.gateway.as_ref(),
            _ => None,
        }
    }
}

/// How branches are reviewed, resolved.
#[derive(Debug, Clone)]
pub struct ReviewSettings {
    pub(crate) reviewer: Reviewer,
    /// Rounds of changes after the first try.
    pub rounds: u32,
    /// Whether the plan (or a config file) set `rounds`; if not, an exec agent gets none.
    pub rounds_set: bool,
}

impl ReviewSettings {
    /// The rounds of changes `task` gets after its first try: the plan's, or none for an
    /// exec agent the plan did not ask for more of (the same command would do the same
    /// again, or apply itself twice).
    pub fn rounds_for(&self, task: &ResolvedTask) -> u32 {
        match task.agent {
            AgentConfig::Exec(_) if !self.rounds_set => 0,
            _ => self.rounds,
        }
    }

    /// The reviewer of `task`, with `Worker` resolved.
    pub fn reviewer_for(&self, task: &ResolvedTask) -> Reviewer {
        match (&self.reviewer, &task.agent) {
            (Reviewer::Worker, AgentConfig::Model { provider, .. }) => {
                Reviewer::Model(provider.clone())
            }
            // Claude Code reviews Claude Code's work: a login is all the run needs.
            (Reviewer::Worker, AgentConfig::ClaudeCode(settings)) => {
                Reviewer::ClaudeCode(settings.clone())
            }
            (Reviewer::Worker, _) => Reviewer::Off,
            (other, _) => other.clone(),
        }
    }
}

/// The agent a task runs, with everything it needs resolved.
#[derive(Debug, Clone)]
pub enum AgentConfig {
    /// A shell command, once per task or once per owned file.
    Exec(ExecCommand),
    /// A model over HTTP, with its tool loop; `run`: the commands its `run` tool may run.
    Model {
        /// The model's provider.
        provider: Arc<ProviderSettings>,
        /// The commands its `run` tool may run.
        run: Arc<RunCommands>,
    },
    /// An agent program and its arguments, with placeholders.
    Cli(Arc<CliSettings>),
    /// The Claude Code CLI, run headless.
    ClaudeCode(Arc<ToolSettings>),
    /// aider, run with one message.
    Aider(Arc<ToolSettings>),
}

impl AgentConfig {
    /// The agent, as a person would name it.
    pub fn describe(&self) -> String {
        match self {
            AgentConfig::Exec(command) => format!("exec `{command}`"),
            AgentConfig::Model { provider, run } => format!(
                "model {} ({}) · run: {}",
                provider.model,
                provider.name,
                run.describe()
            ),
            AgentConfig::Cli(cli) => match &cli.gateway {
                Some(p) => format!(
                    "cli `{}` (its model {} through the gateway)",
                    cli.argv.join(" "),
                    p.name
                ),
                None => format!("cli `{}`", cli.argv.join(" ")),
            },
            AgentConfig::ClaudeCode(tool) => format!("claude-code ({})", tool.program),
            AgentConfig::Aider(tool) => format!("aider ({})", tool.program),
        }
    }
}

impl AgentConfig {
    /// The provider whose traffic the agent sends through plait's gateway, if it does.
    pub fn gateway(&self) -> Option<&Arc<ProviderSettings>> {
        match self {
            AgentConfig::ClaudeCode(t) | AgentConfig::Aider(t) => t.gateway.as_ref(),
            AgentConfig::Cli(c) => c.gateway.as_ref(),
            AgentConfig::Exec(_) | AgentConfig::Model { .. } => None,
        }
    }
}

/// A `{ cli = [...] }` agent, resolved.
#[derive(Debug, Clone)]
pub struct CliSettings {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The provider the program reaches through plait's gateway, if the plan names one.
    pub gateway: Option<Arc<ProviderSettings>>,
    /// Whether it answers a role in JSON (`answer = "json"`).
    pub answers_json: bool,
}

/// An agent CLI that plait drives itself (`claude-code`, `aider`), resolved.
#[derive(Debug, Clone)]
pub struct ToolSettings {
    /// The program, as the plan or the default names it; found on `PATH` when validated.
    pub program: String,
    /// The model it should use, as the plan names it; `None`: the provider's model, or
    /// the CLI's own default.
    pub model: Option<String>,
    /// Where its base URL and key come from; `None`: the environment as it is.
    pub provider: Option<Arc<ProviderSettings>>,
    /// More arguments, added after plait's own.
    pub args: Vec<String>,
    /// What the CLI will find in plait's own environment.
    pub inherited: InheritedEnv,
    /// Where plait's gateway sends the CLI's requests: the plan's provider, else (Claude
    /// Code) Anthropic's API as the environment gives it; `None` where the gateway cannot
    /// stand in (Claude Code on Bedrock or Vertex).
    pub gateway: Option<Arc<ProviderSettings>>,
}

/// What an agent CLI finds in the environment plait was started with, read when the plan
/// is resolved (the library reads no environment of its own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InheritedEnv {
    /// `ANTHROPIC_API_KEY` is set and not empty.
    pub anthropic_key: bool,
    /// Another way Claude Code authenticates without a login of its own is set:
    /// `ANTHROPIC_AUTH_TOKEN`, `CLAUDE_CODE_OAUTH_TOKEN`, or Bedrock or Vertex
    /// (`CLAUDE_CODE_USE_BEDROCK`, `CLAUDE_CODE_USE_VERTEX`).
    pub anthropic_other_auth: bool,
    /// Claude Code's own config directory (`CLAUDE_CONFIG_DIR`, else `~/.claude`), where a
    /// logged-in user's credentials are.
    pub claude_config: Option<PathBuf>,
    /// `GIT_CONFIG_COUNT`, when set: git settings that come through the environment.
    pub git_config_count: Option<usize>,
}

impl InheritedEnv {
    /// Why Claude Code would start without a way to authenticate (it then fails every
    /// round with "Not logged in · Please run /login"), or `None` when it has one: a key or
    /// token in the environment, a provider with a key, a login's credentials in its config
    /// directory, or an `apiKeyHelper` in its settings. On macOS the login is in the
    /// keychain, where plait does not look.
    pub(crate) fn claude_login_missing(
        &self,
        provider: Option<&ProviderSettings>,
    ) -> Option<String> {
        if cfg!(target_os = "macos")
            || self.anthropic_key
            || self.anthropic_other_auth
            || provider.is_some_and(|p| p.api_key.is_some())
        {
            return None;
        }
        let config = self.claude_config.as_ref()?;
        if config.join(".credentials.json").is_file() {
            return None;
        }
        let helper = std::fs::read_to_string(config.join("settings.json"))
            .is_ok_and(|t| t.contains("\"apiKeyHelper\""));
        if helper {
            return None;
        }
        Some(format!(
            "agent `claude-code` has no way to sign in: no login in {} (no .credentials.json), \
             no ANTHROPIC_API_KEY and no provider with a key; run `claude` once and sign in \
             with /login, set ANTHROPIC_API_KEY, or name a provider under [agents.claude-code]",
            config.display()
        ))
    }

    /// What the environment `env` gives an agent CLI.
    pub fn read(env: &dyn Fn(&str) -> Option<String>) -> InheritedEnv {
        let set = |key: &str| env(key).filter(|v| !v.is_empty());
        InheritedEnv {
            anthropic_key: set("ANTHROPIC_API_KEY").is_some(),
            anthropic_other_auth: [
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
                "CLAUDE_CODE_USE_BEDROCK",
                "CLAUDE_CODE_USE_VERTEX",
            ]
            .iter()
            .any(|k| set(k).is_some()),
            claude_config: set("CLAUDE_CONFIG_DIR")
                .map(PathBuf::from)
                .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".claude"))),
            git_config_count: env("GIT_CONFIG_COUNT").and_then(|n| n.trim().parse().ok()),
        }
    }
}

/// The agent CLIs plait drives itself: name, default program, and the provider it takes by
/// default.
pub(super) const TOOLS: &[(&str, &str, Option<&str>)] = &[
    ("claude-code", "claude", None),
    ("aider", "aider", Some("openai")),
];

/// One task with its settings resolved and its owned files listed.
#[derive(Debug, Clone)]
pub struct ResolvedTask {
    /// The task's id.
    pub id: String,
    /// What the agent is told to do.
    pub prompt: String,
    /// The agent it runs (its first attempt's, when it has several).
    pub agent: AgentConfig,
    /// Which files its worktree holds.
    pub checkout: Checkout,
    /// How long its agent may run.
    pub timeout: Duration,
    /// The most turns a model agent may take.
    pub max_turns: u32,
    /// Tokens a model agent may use in all.
    pub token_budget: Option<u64>,
    /// Whether ending without a change needs a person's look (`expect_changes`).
    pub expect_changes: bool,
    /// The files it may change.
    pub owns: Globs,
    /// The files checked out read-only for its agent to look at.
    pub context: Globs,
    /// Tracked files of the base that this task owns, sorted.
    pub owned: Vec<String>,
    /// The walls of the task's agent's processes.
    pub sandbox: SandboxSettings,
    /// The tasks it waits for, by index into the plan's tasks, directly (`after`).
    pub after: Vec<usize>,
    /// The walls of its checks and command reviewer: the same, with the checks' network.
    pub check_sandbox: SandboxSettings,
    /// The files its worktree holds and its sparse-checkout cone.
    pub layout: Layout,
    /// Its attempts, when it runs as several (`attempts`): the task's own `agent` and
    /// walls above are its first attempt's.
    pub attempts: Option<Arc<super::Attempts>>,
    /// The checks that are its own job (its `checks`), run after `[checks] task`.
    pub own_checks: Vec<String>,
}

impl ResolvedTask {
    /// The task as its attempt `n` runs (`attempt`: its id `<task>~<n>`) or, after the
    /// pick, as the task goes on with attempt `n`'s agent and walls.
    pub fn as_attempt(&self, n: u32, attempt: bool) -> ResolvedTask {
        let mut task = self.clone();
        if let Some(attempts) = &self.attempts {
            let spec = attempts.spec(n);
            task.agent = spec.agent.clone();
            task.sandbox = spec.sandbox.clone();
            task.check_sandbox = spec.check_sandbox.clone();
            task.expect_changes = spec.expect_changes;
        }
        if attempt {
            task.id = plait_core::state::attempt_id(&self.id, n);
        }
        task
    }

    /// The checks its work is judged by: `task` (`[checks] task`), then its own.
    pub fn checks(&self, task: &[String]) -> Vec<String> {
        let mut all = task.to_vec();
        all.extend(
            self.own_checks
                .iter()
                .filter(|c| !task.contains(c))
                .cloned(),
        );
        all
    }

    /// Every agent it runs: its own, and each of its attempts'.
    pub fn agents(&self) -> Vec<&AgentConfig> {
        let mut agents = vec![&self.agent];
        if let Some(attempts) = &self.attempts {
            agents.extend(attempts.specs.iter().map(|w| &w.agent));
        }
        agents
    }

    /// Every wall of its processes, to change: its agent's and its checks', and each of its
    /// attempts'.
    pub(crate) fn walls_mut(&mut self) -> Vec<&mut SandboxSettings> {
        let mut walls = vec![&mut self.sandbox, &mut self.check_sandbox];
        if let Some(attempts) = &mut self.attempts {
            for spec in &mut Arc::make_mut(attempts).specs {
                let spec = Arc::make_mut(spec);
                walls.extend([&mut spec.sandbox, &mut spec.check_sandbox]);
            }
        }
        walls
    }

    /// The task's single owned file, when it owns exactly one.
    pub fn single_file(&self) -> Option<&str> {
        match self.owned.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Whether the worktree holds the tracked file `path` (of the base, or of the task's
    /// branch since): what its layout selected at the base, by the same rules.
    pub fn checks_out(&self, path: &str) -> bool {
        self.checkout == Checkout::Full
            || self.owns.matches(path)
            || self.context.matches(path)
            || (layout::is_ignore_file(path) && self.layout.cone.holds(path))
    }
}
