//! The record of one task: where it is in the pipeline, what it changed, what its agent
//! used, how its checks and reviews went and what a person decided.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::now_ms;

/// Where a task is in the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    /// Not started yet.
    Pending,
    /// Its worktree is being made.
    Preparing,
    /// Its agent is running.
    Running,
    /// Its work is being committed and its checks run.
    Collecting,
    /// Its branch is being reviewed.
    Reviewing,
    /// Finished without failing or being rejected.
    Done,
    /// Its agent or its checks failed.
    Failed,
    /// A reviewer or a person rejected its work.
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

    /// Its name, as the record and the command line write it.
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
    /// A new path.
    Added,
    /// A path whose content or mode changed.
    Modified,
    /// A path removed.
    Deleted,
}

impl ChangeKind {
    /// Its letter, as `git status --short` writes it.
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
    /// The path, from the repository's root.
    pub path: String,
    /// How it changed.
    pub kind: ChangeKind,
}

/// What a model agent used: requests, tokens, cost and time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Requests sent, retries included.
    pub requests: u64,
    /// Answers the model gave.
    pub turns: u64,
    /// Failed attempts that were retried.
    pub retries: u64,
    /// Input tokens, not counting those written to or read from the cache.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens written to the provider's cache.
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the provider's cache.
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
    /// The work may be merged.
    Approve,
    /// The work needs another round; the comments say what to change.
    RequestChanges,
    /// The work is refused.
    Reject,
}

impl Verdict {
    /// Its name, as the record and the command line write it.
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
    /// The file it points at (empty: none).
    #[serde(default)]
    pub path: String,
    /// The line it points at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// What it says.
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
    /// The judgement.
    pub verdict: Verdict,
    /// Why, in a few sentences.
    pub summary: String,
    /// Remarks on particular files and lines.
    #[serde(default)]
    pub comments: Vec<Comment>,
    /// `model`, `command` or `person`.
    pub by: String,
    /// The round it judged (0: the first try).
    pub round: u32,
    /// What plait adds, e.g. that the reviewer's answer was malformed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What a model reviewer used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// The result of one check command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The command, as the plan gives it.
    pub command: String,
    /// Whether it passed: it exited 0. Nothing else counts as passing.
    pub passed: bool,
    /// Its exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The last lines of its output.
    pub tail: String,
    /// Its whole output.
    pub log: PathBuf,
    /// How long it ran, in milliseconds.
    pub ms: u64,
    /// Writes the sandbox refused it, as its output told of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// It failed, and it fails on the base too, before any task's code ran: context for a
    /// person, never a pass.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_base: bool,
    /// It failed no worse than it does on the base (the same failing tests with the same
    /// messages or some of them, or an output saying nothing the base's did not, run-to-run
    /// noise aside): the work it judged made nothing worse, so it sends no task back and no
    /// culprit is searched for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub as_on_base: bool,
    /// Where it also fails on the base but otherwise: the failing tests the base does not
    /// fail so (empty when its runner is not known).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub beyond_base: Vec<String>,
}

impl CheckResult {
    /// Whether it failed because of the work it judged: it failed, and not exactly as it
    /// does on the base.
    pub fn failed_here(&self) -> bool {
        !self.passed && !self.as_on_base
    }

    /// How a person is told it did not pass: `failed`, `failed (as on the base)`, or
    /// `failed (also on the base, otherwise)`.
    pub fn failure_word(&self) -> &'static str {
        if self.as_on_base {
            "failed, as it also does on the base"
        } else if self.at_base {
            "failed (it also fails on the base, but otherwise)"
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
    /// The decision.
    pub verdict: Verdict,
    /// When, in milliseconds since the Unix epoch.
    pub at: u64,
}

/// Everything recorded about one task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The task's id in the plan.
    pub id: String,
    /// Its branch (`plait/<run>/<task>`).
    pub branch: String,
    /// Its worktree.
    pub worktree: PathBuf,
    /// Where it is in the pipeline.
    pub state: TaskState,
    /// Tracked files of the base this task owns.
    pub owned: usize,
    /// When its agent started, in milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    /// When it reached its end state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    /// Its agent's exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why the task failed, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The commit plait made on the task's branch, if the agent changed owned files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The owned paths its commit changed.
    #[serde(default)]
    pub changes: Vec<FileChange>,
    /// Changes outside ownership, left uncommitted in the worktree.
    #[serde(default)]
    pub violations: Vec<FileChange>,
    /// Its agent's log.
    pub log: PathBuf,
    /// Model usage, for model agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The agent's closing words, for model agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Why the agent found nothing to change, when it said so (a model's `nothing_to_do`)
    /// in its last round: a declared no-op, which needs no person's look.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nothing_to_do: Option<String>,
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
    /// Its attempts, when the plan runs it as several (`attempts`): each a record of its
    /// own (id `<task>~<n>`, branch `plait/<run>/<task>@<n>`). Until the pick the task
    /// itself runs nothing; once picked, its commit, changes, checks and review are the
    /// chosen attempt's, and its usage counts every attempt's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<TaskRecord>,
    /// Which attempt became the task, by whom and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pick: Option<Pick>,
    /// What people told its agent while it ran (`plait tell`, the page), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub told: Vec<Told>,
}

/// A message a person told a running task's agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Told {
    /// What they said.
    pub text: String,
    /// Where from: `command line` or `page`.
    pub by: String,
    /// When, in milliseconds since the Unix epoch.
    pub at: u64,
    /// The round it was told in.
    pub round: u32,
    /// How it reaches the agent: `next turn` (a model agent, in its conversation) or `next
    /// round` (as the next round's comment, for agents that take no input mid-round).
    pub way: String,
    /// When the agent got it; `None` while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heard_at: Option<u64>,
}

/// The choice of one attempt as the task (`attempts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pick {
    /// The chosen attempt's number (1..).
    pub attempt: u32,
    /// Who chose: `checks` (the first that passed), `command`, the judge (`model …`,
    /// `claude-code`, `cli …`) or `person`.
    pub by: String,
    /// Why, in a sentence.
    pub why: String,
    /// The attempts that were candidates: those whose checks (and review) passed.
    #[serde(default)]
    pub candidates: Vec<u32>,
    /// What plait adds, e.g. that the judge's first answer named no candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When, in milliseconds since the Unix epoch.
    pub at: u64,
    /// What a model judge used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// The id of attempt `n` of task `task`: `<task>~<n>`.
pub fn attempt_id(task: &str, n: u32) -> String {
    format!("{task}~{n}")
}

/// The task and number an attempt's id (`<task>~<n>`) names; `None` for a task's own id.
pub fn split_attempt_id(id: &str) -> Option<(&str, u32)> {
    let (task, n) = id.rsplit_once('~')?;
    let n: u32 = n.parse().ok().filter(|n| *n > 0)?;
    (!task.is_empty()).then_some((task, n))
}

/// A person's comment that sent a finished task back for one more round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentBack {
    /// What the person said.
    pub comment: String,
    /// When, in milliseconds since the Unix epoch.
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
            nothing_to_do: None,
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
            attempts: Vec::new(),
            pick: None,
            told: Vec::new(),
        }
    }

    /// Attempt `n` of this task, not started: its own branch (`plait/<run>/<task>@<n>`),
    /// `worktree` and `log`, owning what the task owns.
    pub fn attempt(&self, run: &str, n: u32, worktree: PathBuf, log: PathBuf) -> TaskRecord {
        let mut attempt =
            TaskRecord::pending(run, &attempt_id(&self.id, n), worktree, self.owned, log);
        attempt.branch = crate::refs::attempt_branch(run, &self.id, n);
        attempt.after = self.after.clone();
        attempt.expects_change = self.expects_change;
        attempt
    }

    /// Its attempt numbered `n`.
    pub fn attempt_no(&self, n: u32) -> Option<&TaskRecord> {
        self.attempts.get((n as usize).checked_sub(1)?)
    }

    /// The task's record, then each of its attempts'.
    pub fn with_attempts(&self) -> impl Iterator<Item = &TaskRecord> {
        std::iter::once(self).chain(&self.attempts)
    }

    /// Every attempt's usage added up, with `judge`'s (what the pick itself used).
    pub fn attempts_usage(&self, judge: Option<&Usage>) -> Option<Usage> {
        let mut total: Option<Usage> = None;
        for usage in self
            .attempts
            .iter()
            .filter_map(|a| a.usage.as_ref())
            .chain(judge)
        {
            match total.as_mut() {
                Some(t) => t.add(usage),
                None => total = Some(usage.clone()),
            }
        }
        total
    }

    /// Makes attempt `pick.attempt` the task: its end, work, checks and review become the
    /// task's, its usage every attempt's and the judge's, and `pick` is kept. False (and
    /// nothing changed) when it has no such attempt.
    pub fn take_attempt(&mut self, pick: Pick) -> bool {
        let Some(attempt) = self.attempt_no(pick.attempt).cloned() else {
            return false;
        };
        self.state = attempt.state;
        self.error = attempt.error;
        self.exit_code = attempt.exit_code;
        self.commit = attempt.commit;
        self.changes = attempt.changes;
        self.violations = attempt.violations;
        self.checks = attempt.checks;
        self.review = attempt.review;
        self.summary = attempt.summary;
        self.sandbox = attempt.sandbox;
        self.rounds = attempt.rounds;
        self.expects_change = attempt.expects_change;
        self.finished_at = Some(pick.at);
        self.usage = self.attempts_usage(pick.usage.as_ref());
        self.pick = Some(pick);
        true
    }

    /// The attempt that became the task, once picked.
    pub fn chosen(&self) -> Option<&TaskRecord> {
        self.attempt_no(self.pick.as_ref()?.attempt)
    }

    /// It ended done without changing any of its files though its agent was asked for a
    /// change, and without saying there was nothing to do.
    pub fn unchanged(&self) -> bool {
        self.expects_change
            && self.state == TaskState::Done
            && self.commit.is_none()
            && self.nothing_to_do.is_none()
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

    /// Whether every check of the task's last round passed (exited 0).
    pub fn checks_green(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// Whether a person decided `verdict` on the task (`plait accept` / `plait reject`).
    pub fn decided(&self, verdict: Verdict) -> bool {
        self.decision.as_ref().is_some_and(|d| d.verdict == verdict)
    }

    /// Whether no check of the task's last round failed by its work: each passed, or failed
    /// exactly as it does on the base (true when there are none). Not that they passed: see
    /// [`TaskRecord::checks_green`].
    pub fn no_failure_of_its_own(&self) -> bool {
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
