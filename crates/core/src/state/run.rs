//! The record of a run as a whole (`state.json`): its tasks, the merge's outcome, the
//! culprit search, supervisor groups, landings, the environment and the time its steps took.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::task::{CheckResult, Decision, Review, TaskRecord, Verdict};

/// Version of the state file's layout.
pub const STATE_VERSION: u32 = 1;

/// A path two sides could not agree on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// The path, from the repository's root.
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
    /// The merged branch (`plait/<run>/merged`).
    pub branch: String,
    /// Its commit.
    pub commit: String,
    /// Tasks whose changes are in the merged branch.
    pub included: Vec<String>,
    /// Tasks left out because their changes conflict.
    pub excluded: Vec<String>,
    /// Where the tasks' changes met and could not be merged.
    pub conflicts: Vec<Conflict>,
    /// Tasks left out because a task they come after (`after`) is not in the merge: their
    /// work was made on top of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
    /// The commit of each task it took in, as it took it (empty in records older than
    /// this field): a task whose commit changed since (another attempt accepted) makes the
    /// merge stale.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub commits: std::collections::BTreeMap<String, String>,
}

impl MergeOutcome {
    /// Whether every task's changes merged without a conflict.
    pub fn is_clean(&self) -> bool {
        self.conflicts.is_empty()
    }
}

/// Where the run is as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunPhase {
    /// Its tasks are being run.
    Running,
    /// Its tasks' branches are being merged and checked.
    Merging,
    /// Done: merged (or not, with the reasons recorded).
    Finished,
    /// Stopped by Ctrl-C or SIGTERM before it finished.
    Interrupted,
}

impl RunPhase {
    /// Its name, as the record writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunPhase::Running => "running",
            RunPhase::Merging => "merging",
            RunPhase::Finished => "finished",
            RunPhase::Interrupted => "interrupted",
        }
    }
}

/// A landing of the run's result onto a branch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LandRecord {
    /// The branch it landed on.
    pub branch: String,
    /// That branch's commit before the landing.
    pub from: String,
    /// Its commit after.
    pub to: String,
    /// Whether the branch was moved forward (else a merge commit was made).
    pub fast_forward: bool,
    /// When, in milliseconds since the Unix epoch.
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
    /// The layout's version ([`STATE_VERSION`]).
    pub version: u32,
    /// The run's id (six base-36 digits, sortable by time).
    pub id: String,
    /// The plan's goal.
    pub goal: String,
    /// The plan file the run was started with.
    pub plan: PathBuf,
    /// The commit the tasks start from.
    pub base: String,
    /// The branch (or revision) the base was named by.
    pub base_name: String,
    /// Where the tasks' worktrees are made.
    pub worktree_root: PathBuf,
    /// Where the run is as a whole.
    pub phase: RunPhase,
    /// The plait process running it.
    pub pid: u32,
    /// When it started, in milliseconds since the Unix epoch.
    pub created_at: u64,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    /// Every task's record, in the plan's order.
    pub tasks: Vec<TaskRecord>,
    /// The merge of the tasks' branches, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeOutcome>,
    /// Every landing of its result, oldest first.
    #[serde(default)]
    pub landed: Vec<LandRecord>,
    /// Whether `plait clean` removed its worktrees and branches.
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
    /// The step's name.
    pub step: String,
    /// The time it took, in milliseconds.
    pub ms: u64,
    /// How many times a task step was taken.
    #[serde(default, skip_serializing_if = "no_count")]
    pub count: u32,
    /// Whether it is a step of the tasks (summed) rather than of the run.
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
    /// The group's merged branch (`plait/<run>/group-<k>`).
    pub branch: String,
    /// Its tasks' ids.
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
    /// Task `id`'s record.
    pub fn task(&self, id: &str) -> Option<&TaskRecord> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The record of `id`: a task's, or an attempt's (`<task>~<n>`).
    pub fn record(&self, id: &str) -> Option<&TaskRecord> {
        self.task(id).or_else(|| self.attempt(id))
    }

    /// The record of attempt `id` (`<task>~<n>`), when the task ran as attempts.
    pub fn attempt(&self, id: &str) -> Option<&TaskRecord> {
        let (task, n) = super::split_attempt_id(id)?;
        self.task(task)?.attempt_no(n)
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

    /// Task `id`'s record, to change.
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
    /// The checks the sandbox kept from running at the base (a read it refused), each with
    /// what it refused: the walls' doing, not the base's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub walled_at_base: Vec<String>,
}
