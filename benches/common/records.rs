//! Runs as the store's tests and benchmark record them: pending tasks with made-up paths,
//! for a store that only queues them.

use std::path::PathBuf;

use plait_core::state::{RunPhase, RunState, TaskRecord, STATE_VERSION};

/// Run `run` of the tasks `ids`, in order, all pending.
pub fn run_state(run: &str, ids: impl IntoIterator<Item = String>) -> RunState {
    let tasks: Vec<TaskRecord> = ids
        .into_iter()
        .map(|id| {
            let worktree = PathBuf::from(format!("/worktrees/{id}"));
            let log = PathBuf::from(format!("/logs/{id}.log"));
            TaskRecord::pending(run, &id, worktree, 0, log)
        })
        .collect();
    RunState {
        version: STATE_VERSION,
        id: run.to_string(),
        goal: format!("{} tasks", tasks.len()),
        plan: PathBuf::from("plan.toml"),
        base: "0".repeat(40),
        base_name: "main".to_string(),
        worktree_root: PathBuf::from("/worktrees"),
        phase: RunPhase::Running,
        pid: 0,
        created_at: 0,
        finished_at: None,
        tasks,
        merge: None,
        landed: Vec::new(),
        cleaned: false,
        merged_checks: Vec::new(),
        environment: None,
        base_checks_ignored: false,
        max_cost: None,
        groups: Vec::new(),
        culprits: None,
        timings: Vec::new(),
    }
}
