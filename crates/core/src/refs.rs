//! Every ref name plait makes, in one place: a run's branches (`plait/<run>/<task>`, its
//! groups', its merge and the culprit search's scratch branch), `plait check`'s scratch
//! branch, and the refs of a run over many machines on its remote (the base, each claim's
//! work). It imports nothing.

/// The name of a local branch's ref.
pub fn branch_ref(branch: &str) -> String {
    format!("refs/heads/{branch}")
}

/// What every branch plait makes starts with, as a ref.
pub const PLAIT_REFS: &str = "refs/heads/plait/";

/// The prefix of every branch of run `run`: `plait/<run>/`.
pub fn run_prefix(run: &str) -> String {
    format!("plait/{run}/")
}

/// The glob of the refs of every branch of run `run`.
pub fn run_glob(run: &str) -> String {
    format!("refs/heads/plait/{run}/*")
}

/// The branch of a task: `plait/<run>/<task>`.
pub fn task_branch(run: &str, task: &str) -> String {
    format!("plait/{run}/{task}")
}

/// The branch of attempt `n` of a task: `plait/<run>/<task>@<n>` (a task's id holds no
/// `@`, and `~`, which names the attempt elsewhere, cannot be in a ref).
pub fn attempt_branch(run: &str, task: &str, n: u32) -> String {
    format!("plait/{run}/{task}@{n}")
}

/// A supervisor group's branch: `plait/<run>/group-<k>`.
pub fn group_branch(run: &str, group: &str) -> String {
    format!("plait/{run}/{group}")
}

/// Where task `task` of run `run` starts when it comes after others: the base with their
/// work merged in, `plait/<run>/start-<task>`.
pub fn start_branch(run: &str, task: &str) -> String {
    format!("plait/{run}/start-{task}")
}

/// The run's integration branch: `plait/<run>/merged`.
pub fn merged_branch(run: &str) -> String {
    format!("plait/{run}/merged")
}

/// The culprit search's scratch branch of run `run`.
pub fn bisect_branch(run: &str) -> String {
    format!("plait/{run}/bisect")
}

/// `plait check`'s scratch branch, for the process `pid`.
pub fn check_branch(pid: u32) -> String {
    format!("plait/check-{pid}/merged")
}

/// Where the base commit `base` of runs is kept on the remote.
pub fn base_ref(base: &str) -> String {
    format!("refs/plait/base/{base}")
}

/// Where a claim (`generation`) of a task pushes its work.
pub fn attempt_ref(run: &str, task: &str, generation: i64) -> String {
    format!("refs/plait/{run}/{task}/g{generation}")
}

/// The refspec that moves every branch of run `run` (`plait/<run>/*`) to the same name.
pub fn run_branches(run: &str) -> String {
    format!("+refs/heads/plait/{run}/*:refs/heads/plait/{run}/*")
}
