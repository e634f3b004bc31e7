//! The names of what a run's and a task's directories hold, kept in one place.

use std::path::{Path, PathBuf};

/// One run's directory, `<git-common-dir>/plait/runs/<run>/`: the one place that names
/// what is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir(pub PathBuf);

impl RunDir {
    /// The directory itself.
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

    /// What people ask of the run while it goes (`plait tell`, `plait stop`, the page):
    /// one JSON file a request, its answer beside it, taken by the run's own process.
    pub fn requests(&self) -> PathBuf {
        self.0.join("requests")
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

    /// The directory of task `task` of this run.
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

    /// The directory itself.
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

    /// The model's metadata plait writes for aider (`--model-metadata-file`): read-only to
    /// the task's processes.
    pub fn aider_models(&self) -> PathBuf {
        self.0.join("aider-models.json")
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
