//! A run's persistent record under `<git-common-dir>/plait/runs/<run>/`: its schema (each
//! task's record in `task`, the run's as a whole in `run`), the names of what its
//! directories hold (`dirs`), and the file store that writes it atomically and holds the
//! repository lock (`store`).

use std::time::{SystemTime, UNIX_EPOCH};

mod dirs;
mod run;
mod store;
mod task;

pub use dirs::{RunDir, TaskDir};
pub use run::{
    Conflict, CulpritSet, Culprits, EnvironmentRecord, GroupRecord, LandRecord, MergeOutcome,
    RunPhase, RunState, Timing, STATE_VERSION,
};
pub use store::{write_atomic, RunLock, StateError, Store};
pub use task::{
    attempt_id, split_attempt_id, ChangeKind, CheckResult, Comment, Decision, FileChange, Pick,
    Review, SandboxRecord, SentBack, TaskRecord, TaskState, Told, Usage, Verdict,
};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
