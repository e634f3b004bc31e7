//! A run's persistent record under `<git-common-dir>/plait/runs/<run>/`: the state of every
//! task, the merge outcome and landings, written atomically (temp file, fsync, rename) so a
//! reader in another terminal, or a crash, never sees half a file. Also the repository lock
//! that keeps two runs from working on one repository at once.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A path two sides could not agree on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    pub path: String,
    /// `content`, `add/add`, `modify/delete`, or git's own name for rarer kinds.
    pub kind: String,
    /// The tasks whose changes meet here.
    pub tasks: Vec<String>,
    /// The conflicting regions with git's markers, when the file has any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hunks: String,
    /// What git said about it.
    pub message: String,
}

/// The result of merging a run's branches (the `merge` stage's outcome, kept in the record).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergeOutcome {
    pub branch: String,
    pub commit: String,
    /// Tasks whose changes are in the merged branch.
    pub included: Vec<String>,
    /// Tasks left out because their changes conflict.
    pub excluded: Vec<String>,
    pub conflicts: Vec<Conflict>,
    /// Tasks left out because a task they come after (`after`) is not in the merge: their
    /// work was made on top of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
}

impl MergeOutcome {
    pub fn is_clean(&self) -> bool {
        self.conflicts.is_empty()
    }
}

/// 2024-01-01T00:00:00Z, the zero of run ids.
const RUN_ID_EPOCH: u64 = 1_704_067_200;

/// Version of the state file's layout.
pub const STATE_VERSION: u32 = 1;

/// Why a run's state cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("no run `{run}` in this repository; `plait runs` lists them")]
    UnknownRun { run: String },
    #[error("run id `{run}` is ambiguous: it matches {matches}")]
    Ambiguous { run: String, matches: String },
    #[error("this repository has no plait runs yet")]
    NoRuns,
    #[error("run {run} is in progress (plait process {pid}); wait for it to finish")]
    Locked { run: String, pid: u32 },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is damaged: {message}")]
    Corrupt { path: PathBuf, message: String },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where a task is in the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    Pending,
    Preparing,
    Running,
    Collecting,
    Reviewing,
    Done,
    Failed,
    Rejected,
    /// Stopped by a budget (the run's cost or the task's tokens) at a turn boundary.
    Stopped,
    /// Stopped by Ctrl-C or SIGTERM; its work so far is committed; `plait resume` goes on.
    Interrupted,
    /// Never started: a task it comes after (`after`) failed, was rejected, or their merge
    /// conflicted (`blocked_by` names them, `error` says why).
    Blocked,
}

impl TaskState {
    /// Whether the task has reached an end state.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskState::Done
                | TaskState::Failed
                | TaskState::Rejected
                | TaskState::Stopped
                | TaskState::Blocked
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Preparing => "preparing",
            TaskState::Running => "running",
            TaskState::Collecting => "collecting",
            TaskState::Reviewing => "reviewing",
            TaskState::Done => "done",
            TaskState::Failed => "failed",
            TaskState::Rejected => "rejected",
            TaskState::Stopped => "stopped",
            TaskState::Interrupted => "interrupted",
            TaskState::Blocked => "blocked",
        }
    }

    /// The state named `name` (as [`as_str`](Self::as_str) and serde write it).
    pub fn from_name(name: &str) -> Option<TaskState> {
        use serde::de::value::{Error, StrDeserializer};
        TaskState::deserialize(StrDeserializer::<Error>::new(name)).ok()
    }
}

/// How a path changed on a task's branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub fn letter(self) -> char {
        match self {
            ChangeKind::Added => 'A',
            ChangeKind::Modified => 'M',
            ChangeKind::Deleted => 'D',
        }
    }
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub kind: ChangeKind,
}

/// What a model agent used: requests, tokens, cost and time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub requests: u64,
    pub turns: u64,
    /// Failed attempts that were retried.
    pub retries: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    /// USD; `None` when the model's prices are unknown.
    pub cost_usd: Option<f64>,
    /// USD the prompt cache saved: what its reads would have cost as input, less the
    /// writes' surcharge (0 when prices are unknown or nothing was cached).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_saved_usd: f64,
    /// Time to the first token of the first request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_ms: Option<u64>,
    /// Time spent waiting for the model, over all requests.
    pub model_ms: u64,
    /// Writes outside ownership the tools refused.
    pub refused_writes: u64,
    /// Commands the agent ran through its `run` tool.
    #[serde(default)]
    pub runs: u64,
    /// Time those commands took, in all.
    #[serde(default)]
    pub run_ms: u64,
    /// Some of these tokens are plait's estimate: a server sent no usage with its answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

impl Usage {
    /// Adds another task's usage; cost stays known only if both are known.
    pub fn add(&mut self, other: &Usage) {
        self.requests += other.requests;
        self.turns += other.turns;
        self.retries += other.retries;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.cache_saved_usd += other.cache_saved_usd;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.model_ms += other.model_ms;
        self.refused_writes += other.refused_writes;
        self.runs += other.runs;
        self.run_ms += other.run_ms;
        self.estimated |= other.estimated;
    }
}

/// A reviewer's (or a person's) judgement of a task's branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approve,
    RequestChanges,
    Reject,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "approve",
            Verdict::RequestChanges => "request_changes",
            Verdict::Reject => "reject",
        }
    }
}

/// One remark of a review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    #[serde(default)]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    pub body: String,
}

impl Comment {
    /// Where the comment points, as `path:line: ` (empty when it points nowhere).
    pub fn place(&self) -> String {
        match (self.path.is_empty(), self.line) {
            (true, _) => String::new(),
            (false, Some(line)) => format!("{}:{line}: ", self.path),
            (false, None) => format!("{}: ", self.path),
        }
    }
}

/// A review of a task's branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Review {
    pub verdict: Verdict,
    pub summary: String,
    #[serde(default)]
    pub comments: Vec<Comment>,
    /// `model`, `command` or `person`.
    pub by: String,
    /// The round it judged (0: the first try).
    pub round: u32,
    /// What plait adds, e.g. that the reviewer's answer was malformed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// The result of one check command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    pub command: String,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The last lines of its output.
    pub tail: String,
    /// Its whole output.
    pub log: PathBuf,
    pub ms: u64,
    /// Writes the sandbox refused it, as its output told of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// It failed on the base too, before any task's code ran: no task's fault, so it sends
    /// no task back and no culprit is searched for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_base: bool,
}

impl CheckResult {
    /// Whether it failed because of the work it judged (not on the base already).
    pub fn failed_here(&self) -> bool {
        !self.passed && !self.at_base
    }

    /// `failed`, or `failed (as on the base)`: how a person is told it did not pass.
    pub fn failure_word(&self) -> &'static str {
        if self.at_base {
            "failed, as it does on the base"
        } else {
            "failed"
        }
    }
}

/// How a task's processes ran: confined by the kernel or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxRecord {
    /// Whether they ran under the kernel's walls.
    pub confined: bool,
    /// How: `Landlock ABI 7`, `off in the plan`, `unconfined: <why>`.
    pub how: String,
    /// Writes the sandbox refused the agent and the task's checks, as their output told.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

impl SandboxRecord {
    /// Adds refused writes not yet recorded, keeping at most a few.
    pub fn add_refused(&mut self, refused: &[String]) {
        for r in refused {
            if self.refused.len() < 10 && !self.refused.contains(r) {
                self.refused.push(r.clone());
            }
        }
    }
}

/// A person's decision on a task, which overrides the reviewer's for the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub verdict: Verdict,
    pub at: u64,
}

/// Everything recorded about one task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub branch: String,
    pub worktree: PathBuf,
    pub state: TaskState,
    /// Tracked files of the base this task owns.
    pub owned: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why the task failed, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The commit plait made on the task's branch, if the agent changed owned files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default)]
    pub changes: Vec<FileChange>,
    /// Changes outside ownership, left uncommitted in the worktree.
    #[serde(default)]
    pub violations: Vec<FileChange>,
    pub log: PathBuf,
    /// Model usage, for model agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The agent's closing words, for model agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Rounds of changes the task got after its first try.
    #[serde(default)]
    pub rounds: u32,
    /// The task checks of the last round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckResult>,
    /// The last review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Review>,
    /// A person's decision (`plait accept` / `plait reject`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Whether its processes ran confined, and what the sandbox refused them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxRecord>,
    /// What people said when they sent the task back (`plait send-back`), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent_back: Vec<SentBack>,
    /// The tasks it comes after (the plan's `after`, as ids), directly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// The commit its branch started from when that is not the run's base: the base with
    /// the work of every task it comes after merged in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// The commit of each task it comes after, as its start took them in (so a later move
    /// of theirs shows its start is stale).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub start_from: BTreeMap<String, String>,
    /// The tasks it comes after that keep it from starting (state `blocked`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<String>,
    /// Its agent was asked for a change (a model or an agent CLI, or the plan's
    /// `expect_changes`): ending done without one needs a person's look.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expects_change: bool,
}

/// A person's comment that sent a finished task back for one more round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentBack {
    pub comment: String,
    pub at: u64,
    /// The round it started (`PLAIT_ROUND` of the agent that heard it).
    pub round: u32,
}

impl TaskRecord {
    /// A task of run `run` that has not started: its branch, worktree, owned file count and
    /// log.
    pub fn pending(
        run: &str,
        id: &str,
        worktree: PathBuf,
        owned: usize,
        log: PathBuf,
    ) -> TaskRecord {
        TaskRecord {
            id: id.to_string(),
            branch: crate::refs::task_branch(run, id),
            worktree,
            state: TaskState::Pending,
            owned,
            started_at: None,
            finished_at: None,
            exit_code: None,
            error: None,
            commit: None,
            changes: Vec::new(),
            violations: Vec::new(),
            log,
            usage: None,
            summary: None,
            rounds: 0,
            checks: Vec::new(),
            review: None,
            decision: None,
            sandbox: None,
            sent_back: Vec::new(),
            after: Vec::new(),
            start: None,
            start_from: BTreeMap::new(),
            blocked_by: Vec::new(),
            expects_change: false,
        }
    }

    /// It ended done without changing any of its files though its agent was asked for a
    /// change.
    pub fn unchanged(&self) -> bool {
        self.expects_change && self.state == TaskState::Done && self.commit.is_none()
    }

    /// The commit its branch started from: [`start`](Self::start), or the run's `base`.
    pub fn start_or<'a>(&'a self, base: &'a str) -> &'a str {
        self.start.as_deref().unwrap_or(base)
    }

    /// The verdict that counts: a person's over the reviewer's; `None` when nobody judged.
    pub fn verdict(&self) -> Option<Verdict> {
        self.decision
            .as_ref()
            .map(|d| d.verdict)
            .or_else(|| self.review.as_ref().map(|r| r.verdict))
    }

    /// Whether a person decided `verdict` on the task (`plait accept` / `plait reject`).
    pub fn decided(&self, verdict: Verdict) -> bool {
        self.decision.as_ref().is_some_and(|d| d.verdict == verdict)
    }

    /// Whether the task's checks of the last round all passed, or failed only as they do on
    /// the base (true when there are none).
    pub fn checks_pass(&self) -> bool {
        !self.checks.iter().any(CheckResult::failed_here)
    }

    /// Takes `stored`, the record another machine made of this task (as the store holds
    /// it: its state, rounds, usage and judgements), in place of this one, keeping this
    /// machine's own branch, worktree and log.
    pub fn adopt(&mut self, stored: TaskRecord) {
        let branch = std::mem::take(&mut self.branch);
        let worktree = std::mem::take(&mut self.worktree);
        let log = std::mem::take(&mut self.log);
        *self = TaskRecord {
            branch,
            worktree,
            log,
            ..stored
        };
    }
}

impl TaskRecord {
    /// Milliseconds between start and finish (or now, while running).
    pub fn elapsed_ms(&self) -> Option<u64> {
        let start = self.started_at?;
        Some(
            self.finished_at
                .unwrap_or_else(now_ms)
                .saturating_sub(start),
        )
    }
}

/// Where the run is as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunPhase {
    Running,
    Merging,
    Finished,
    /// Stopped by Ctrl-C or SIGTERM before it finished.
    Interrupted,
}

/// A landing of the run's result onto a branch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LandRecord {
    pub branch: String,
    pub from: String,
    pub to: String,
    pub fast_forward: bool,
    pub at: u64,
    /// The run's merge commit it landed (absent in records older than this field: then
    /// `to` for a fast-forward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<String>,
    /// Landed with `--partial`: the tasks that did not merge cleanly were left out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

impl LandRecord {
    /// The run's merge commit this landing brought in, when the record says.
    pub fn merged(&self) -> Option<&str> {
        self.merged
            .as_deref()
            .or(self.fast_forward.then_some(self.to.as_str()))
    }
}

/// Everything recorded about one run; serialized as `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunState {
    pub version: u32,
    pub id: String,
    pub goal: String,
    pub plan: PathBuf,
    pub base: String,
    pub base_name: String,
    pub worktree_root: PathBuf,
    pub phase: RunPhase,
    pub pid: u32,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    pub tasks: Vec<TaskRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeOutcome>,
    #[serde(default)]
    pub landed: Vec<LandRecord>,
    #[serde(default)]
    pub cleaned: bool,
    /// The merged checks, run on the merged branch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_checks: Vec<CheckResult>,
    /// Whether checks that fail on the base are left out of the gate (`[checks] base =
    /// "ignore"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub base_checks_ignored: bool,
    /// What the run's views and checks lie over: its base layer, or why copies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentRecord>,
    /// The run's cost budget in USD, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// Supervisor groups, for large runs: each merged and reviewed before the top merge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupRecord>,
    /// What the culprit search found after the merged checks failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub culprits: Option<Culprits>,
    /// Where the run's time went, step by step (`plait run --timings`, `status --json`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timings: Vec<Timing>,
}

/// One step of a run and the time it took: a step of the run itself (wall time), or a
/// step of its tasks (`task: true`), summed over every task and round that took it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    pub step: String,
    pub ms: u64,
    /// How many times a task step was taken.
    #[serde(default, skip_serializing_if = "no_count")]
    pub count: u32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub task: bool,
}

fn no_count(n: &u32) -> bool {
    *n == 0
}

/// The outcome of a culprit search: the sets of tasks that break the merged checks
/// (held out of the merged branch), or why no task is to blame.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Culprits {
    /// Check runs the search used.
    pub runs: u32,
    /// Each culprit (the fewest tasks whose holding out makes the rest pass), with the
    /// partners it needs to break them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<CulpritSet>,
    /// Checks that failed on the base alone: no task's fault.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub base_fails: Vec<String>,
    /// Checks that failed and then passed on the same tree: flaky, no task blamed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky: Vec<String>,
    /// Culprits of earlier searches sent back for another round (`[checks] rework`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reworked: Vec<String>,
    /// The search was stopped (interrupted) before it ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

/// A task that breaks checks (alone, or together with partners), and where the failing
/// output of that merge is kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CulpritSet {
    /// The culprits: held out of the merge.
    pub tasks: Vec<String>,
    /// The tasks they break the checks together with (these stay in the merge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partners: Vec<String>,
    /// The checks that fail on the base with these tasks merged.
    pub checks: Vec<String>,
    /// The directory of those checks' logs.
    pub logs: PathBuf,
    /// The end of their output.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tail: String,
}

impl Culprits {
    /// Whether task `id` is in a culprit set (and so held out of the merge).
    pub fn blames(&self, id: &str) -> bool {
        self.sets.iter().any(|s| s.tasks.iter().any(|t| t == id))
    }
}

/// One supervisor group: its tasks, their merge into `plait/<run>/group-<k>`, and the
/// supervisor's review of that merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupRecord {
    /// `group-<k>`, from 1.
    pub id: String,
    pub branch: String,
    pub tasks: Vec<String>,
    /// Whether a supervisor reviews the group (off: the group goes up unreviewed).
    pub supervised: bool,
    /// The merge of the group's tasks; its conflicts are between tasks of this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeOutcome>,
    /// The supervisor's review of the group's merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Review>,
    /// A person's decision (`plait accept RUN group-<k>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Whether the group's branch went into the top merge.
    #[serde(default)]
    pub merged_up: bool,
    /// Where its merge starts when its tasks come after tasks of other groups: the base
    /// with those tasks' work merged in (its diff is shown from there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

impl GroupRecord {
    /// The verdict that counts: a person's over the supervisor's.
    pub fn verdict(&self) -> Option<Verdict> {
        self.decision
            .as_ref()
            .map(|d| d.verdict)
            .or_else(|| self.review.as_ref().map(|r| r.verdict))
    }

    /// Whether the group's branch may go into the top merge: it has changes and is approved
    /// (or nobody supervises it).
    pub fn goes_up(&self) -> bool {
        let has_changes = self.merge.as_ref().is_some_and(|m| !m.included.is_empty());
        let approved = match self.verdict() {
            Some(v) => v == Verdict::Approve,
            None => !self.supervised,
        };
        has_changes && approved
    }
}

impl RunState {
    pub fn task(&self, id: &str) -> Option<&TaskRecord> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// Each task's wave, by index: 0 for a task that comes after none, else one more than
    /// the deepest task it comes after (`after`). A circle, which a validated plan cannot
    /// hold, leaves its tasks at 0.
    pub fn waves(&self) -> Vec<usize> {
        let index: std::collections::HashMap<&str, usize> = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.as_str(), i))
            .collect();
        let ups: Vec<Vec<usize>> = self
            .tasks
            .iter()
            .map(|t| {
                t.after
                    .iter()
                    .filter_map(|a| index.get(a.as_str()).copied())
                    .collect()
            })
            .collect();
        // Kahn's order: a task is placed once every task it comes after is.
        let mut waiting: Vec<usize> = ups.iter().map(Vec::len).collect();
        let mut downs: Vec<Vec<usize>> = vec![Vec::new(); ups.len()];
        for (i, list) in ups.iter().enumerate() {
            for &u in list {
                downs[u].push(i);
            }
        }
        let mut wave = vec![0usize; ups.len()];
        let mut ready: Vec<usize> = (0..ups.len()).filter(|&i| waiting[i] == 0).collect();
        while let Some(i) = ready.pop() {
            for &d in &downs[i] {
                wave[d] = wave[d].max(wave[i] + 1);
                waiting[d] -= 1;
                if waiting[d] == 0 {
                    ready.push(d);
                }
            }
        }
        wave
    }

    pub fn task_mut(&mut self, id: &str) -> Option<&mut TaskRecord> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    /// The group a task belongs to, in a grouped run.
    pub fn group_of(&self, task: &str) -> Option<&GroupRecord> {
        self.groups
            .iter()
            .find(|g| g.tasks.iter().any(|t| t == task))
    }

    /// The merged branch's name.
    pub fn merged_branch(&self) -> String {
        crate::refs::merged_branch(&self.id)
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One run's directory, `<git-common-dir>/plait/runs/<run>/`: the one place that names
/// what is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir(pub PathBuf);

impl RunDir {
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The run's record.
    pub fn state(&self) -> PathBuf {
        self.0.join("state.json")
    }

    /// The copy of the plan the run was started with (the config files merged in).
    pub fn plan(&self) -> PathBuf {
        self.0.join("plan.toml")
    }

    /// Every update of the run, one JSON object a line.
    pub fn events(&self) -> PathBuf {
        self.0.join("events.jsonl")
    }

    /// The run's check checkouts, parked between a task's rounds.
    pub fn checks(&self) -> PathBuf {
        self.0.join("checks")
    }

    /// The worktrees, when there is no cache directory to put them in.
    pub fn worktrees(&self) -> PathBuf {
        self.0.join("worktrees")
    }

    /// The logs of the merged checks.
    pub fn merged_checks(&self) -> PathBuf {
        self.0.join("merged-checks")
    }

    /// The logs of the culprit search's attempt `attempt`.
    pub fn bisect(&self, attempt: u32) -> PathBuf {
        self.0.join("bisect").join(attempt.to_string())
    }

    /// The logs of the checks of a merge in progress (a hook's).
    pub fn check_in_progress(&self) -> PathBuf {
        self.0.join("check-merge-in-progress")
    }

    /// The logs of `plait check`'s merged checks of the run merged with its target.
    pub fn check_with_target(&self) -> PathBuf {
        self.0.join("check-merged-with-target")
    }

    /// The checkouts of `plait check --bisect`.
    pub fn check_bisect(&self) -> PathBuf {
        self.0.join("check-bisect")
    }

    /// The logs of `plait check --bisect`.
    pub fn bisect_logs(&self) -> PathBuf {
        self.check_bisect().join("logs")
    }

    pub fn task(&self, task: &str) -> TaskDir {
        TaskDir(self.0.join("tasks").join(task))
    }
}

/// One task's directory under its run: its agent's log, transcript, owned-file list and
/// the logs of each round's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDir(pub PathBuf);

impl TaskDir {
    /// The directory of the task whose agent log is `log` (a record's `log`).
    pub fn of_log(log: &Path) -> TaskDir {
        TaskDir(log.parent().unwrap_or(Path::new(".")).to_path_buf())
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Everything the agent printed, every round.
    pub fn agent_log(&self) -> PathBuf {
        self.0.join("agent.log")
    }

    /// The owned paths, one a line.
    pub fn owned_list(&self) -> PathBuf {
        self.0.join("owned.txt")
    }

    /// A model agent's conversation, as JSON lines.
    pub fn transcript(&self) -> PathBuf {
        self.0.join("transcript.jsonl")
    }

    /// The logs of the task checks of round `round`.
    pub fn checks(&self, round: u32) -> PathBuf {
        self.0.join(format!("checks-{round}"))
    }

    /// The logs of the task checks of a tip committed by hand.
    pub fn checks_by_hand(&self, short: &str) -> PathBuf {
        self.0.join(format!("checks-by-hand-{short}"))
    }

    /// The prefix of [`TaskDir::checks`]'s names, to list the rounds.
    pub const CHECKS_PREFIX: &'static str = "checks-";

    /// plait's control files for the task's agent CLI (the guard's rules, Claude Code's
    /// settings and hooks): beside the task's scratch, never writable by its processes.
    pub fn claude_code(&self) -> PathBuf {
        self.0.join("claude-code")
    }

    /// The one place in the task's directory its agent's processes may write (an agent
    /// CLI's own config directory and history, a `run` command's files): everything else
    /// there (logs, transcript, control files, check logs) is plait's, read-only to them.
    pub fn scratch(&self) -> PathBuf {
        self.0.join("scratch")
    }

    /// Written once the task's worktree has been filled in as its whole-tree view (where
    /// there is no overlay): from then on collect holds every file of the base the task
    /// does not own to be there, so a deletion of one is a violation. In the scratch, as
    /// `plait run-in-view` writes it from inside the walls; an agent that removes it
    /// only hides a deletion that never reaches a branch anyway.
    pub fn view_filled(&self) -> PathBuf {
        self.scratch().join(".view-filled")
    }

    /// The output of each `run` command of the task's agent, one file per command.
    pub fn runs(&self) -> PathBuf {
        self.0.join("runs")
    }

    /// The diffs of the last collect's violations against the task's branch (what the agent
    /// tried to write outside what it owns), as JSON; absent when it had none.
    pub fn violations(&self) -> PathBuf {
        self.0.join("violations.json")
    }
}

/// A run's environment, as `plait status` and `--json` show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentRecord {
    /// The base layer and where its views are mounted, or `none: copies (why)`.
    pub layer: String,
    /// The `[setup] run` commands this run ran (none when an earlier run's layer was kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<String>,
    /// Whether this run made or finished the layer (else it took it as it was).
    #[serde(default)]
    pub made: bool,
    /// How long making (or finding) it took.
    #[serde(default)]
    pub ms: u64,
    /// The checks that already failed at the base, before any task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_at_base: Vec<String>,
}

/// The directories of one repository's plait state.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// The store under `plait_dir` (`<git-common-dir>/plait`).
    pub fn new(plait_dir: PathBuf) -> Store {
        Store { root: plait_dir }
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }

    /// Where the checkouts of bases that tasks' views lie over are kept between runs.
    pub fn views_dir(&self) -> PathBuf {
        self.root.join("views")
    }

    /// Where the base layers are kept between runs: per commit its tracked files, what
    /// `[setup]` made, and plait's own build of it.
    pub fn envs_dir(&self) -> PathBuf {
        self.root.join("envs")
    }

    /// Where the checks' seed is kept between runs: plait's own build of a base.
    pub fn seed_dir(&self) -> PathBuf {
        self.root.join("seed")
    }

    pub fn run_dir(&self, run: &str) -> PathBuf {
        self.runs_dir().join(run)
    }

    /// The paths under run `run`'s directory.
    pub fn run(&self, run: &str) -> RunDir {
        RunDir(self.run_dir(run))
    }

    pub fn task_dir(&self, run: &str, task: &str) -> PathBuf {
        self.run(run).task(task).0
    }

    fn state_path(&self, run: &str) -> PathBuf {
        self.run(run).state()
    }

    /// Makes a new, short, sortable run id and its directory: the seconds since 2024-01-01
    /// UTC in six base-36 digits (sortable until 2093).
    pub fn create_run(&self) -> Result<String, StateError> {
        let runs = self.runs_dir();
        fs::create_dir_all(&runs).map_err(io_err(&runs))?;
        let mut secs = (now_ms() / 1000).saturating_sub(RUN_ID_EPOCH);
        loop {
            let id = base36(secs);
            let dir = self.run_dir(&id);
            match fs::create_dir(&dir) {
                Ok(()) => return Ok(id),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => secs += 1,
                Err(e) => return Err(io_err(&dir)(e)),
            }
        }
    }

    /// Writes the run's state atomically.
    pub fn save(&self, state: &RunState) -> Result<(), StateError> {
        let bytes = serde_json::to_vec_pretty(state).map_err(|e| StateError::Corrupt {
            path: self.state_path(&state.id),
            message: e.to_string(),
        })?;
        write_atomic(&self.state_path(&state.id), &bytes)
    }

    /// Reads a run's state.
    pub fn load(&self, run: &str) -> Result<RunState, StateError> {
        let path = self.state_path(run);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StateError::UnknownRun {
                    run: run.to_string(),
                })
            }
            Err(e) => return Err(io_err(&path)(e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| StateError::Corrupt {
            path,
            message: e.to_string(),
        })
    }

    /// Every run id with a state file, oldest first.
    pub fn list(&self) -> Result<Vec<String>, StateError> {
        let runs = self.runs_dir();
        let entries = match fs::read_dir(&runs) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&runs)(e)),
        };
        let mut ids: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("state.json").is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// Finds a run by id or unique prefix; `None` means the newest.
    pub fn find(&self, run: Option<&str>) -> Result<String, StateError> {
        let ids = self.list()?;
        let Some(want) = run else {
            return ids.last().cloned().ok_or(StateError::NoRuns);
        };
        if ids.iter().any(|id| id == want) {
            return Ok(want.to_string());
        }
        let matches: Vec<&String> = ids.iter().filter(|id| id.starts_with(want)).collect();
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(StateError::UnknownRun {
                run: want.to_string(),
            }),
            many => Err(StateError::Ambiguous {
                run: want.to_string(),
                matches: many
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Takes the repository's run lock; a lock left by a dead process is taken over.
    pub fn lock(&self) -> Result<RunLock, StateError> {
        let run = "-";
        fs::create_dir_all(&self.root).map_err(io_err(&self.root))?;
        let path = self.root.join("lock");
        for _ in 0..3 {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => {
                    let body = format!("{} {}\n", std::process::id(), run);
                    file.write_all(body.as_bytes()).map_err(io_err(&path))?;
                    return Ok(RunLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if let Some((pid, holder)) = self.lock_holder() {
                        return Err(StateError::Locked { run: holder, pid });
                    }
                    // The holder is gone: the lock is stale.
                    match fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(io_err(&path)(e)),
                    }
                }
                Err(e) => return Err(io_err(&path)(e)),
            }
        }
        Err(StateError::Locked {
            run: "another run".to_string(),
            pid: 0,
        })
    }

    /// Whether run `run`'s plait process is running now (it holds the lock).
    pub fn is_running(&self, run: &str) -> bool {
        self.lock_holder().is_some_and(|(_, holder)| holder == run)
    }

    /// The live process holding the lock and its run, if any.
    pub fn lock_holder(&self) -> Option<(u32, String)> {
        let text = fs::read_to_string(self.root.join("lock")).ok()?;
        let (pid, run) = text.trim().split_once(' ')?;
        let pid: u32 = pid.parse().ok()?;
        process_alive(pid).then(|| (pid, run.to_string()))
    }
}

/// The repository lock; released when dropped.
#[derive(Debug)]
pub struct RunLock {
    path: PathBuf,
}

impl RunLock {
    /// Records which run holds the lock.
    pub fn set_run(&self, run: &str) -> Result<(), StateError> {
        write_atomic(
            &self.path,
            format!("{} {}\n", std::process::id(), run).as_bytes(),
        )
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

fn process_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid as i32, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Writes `bytes` to `path` through a synced temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_err(dir))?;
    tmp.write_all(bytes).map_err(io_err(path))?;
    tmp.as_file().sync_all().map_err(io_err(path))?;
    tmp.persist(path).map_err(|e| io_err(path)(e.error))?;
    Ok(())
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = vec![b'0'; 6];
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(n % 36) as usize];
        n /= 36;
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adopted_record_keeps_this_machines_paths() {
        let mut here = TaskRecord::pending("r1", "a", "/here/a".into(), 1, "/here/a.log".into());
        let mut stored =
            TaskRecord::pending("r1", "a", "/there/a".into(), 1, "/there/a.log".into());
        stored.state = TaskState::Done;
        stored.rounds = 2;
        stored.branch = "elsewhere".into();
        here.adopt(stored);
        assert_eq!((here.state, here.rounds), (TaskState::Done, 2));
        assert_eq!(here.branch, crate::refs::task_branch("r1", "a"));
        assert_eq!(here.worktree, PathBuf::from("/here/a"));
        assert_eq!(here.log, PathBuf::from("/here/a.log"));
    }
}
