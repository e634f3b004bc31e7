//! What the waves' starts are made of, apart from their making: a start merged once for
//! every task that starts there (`StartKey`, `StartMerge`), why one could not be made
//! (`Unmade`), and a task to run again from a new start (`Stale`). The lowest of the
//! orchestrator's task files: [`super::shared`] keeps the merged starts and hands `Stale`
//! tasks to the run's dispatch; [`super::waves`] makes them; it names neither.

use git2::Oid;

/// Why a start could not be made.
#[derive(Debug, Clone)]
pub(super) enum Unmade {
    /// The work of the tasks it comes after does not merge.
    Conflicts {
        tasks: Vec<String>,
        why: String,
    },
    Failed(String),
}

impl<E: std::fmt::Display> From<E> for Unmade {
    fn from(e: E) -> Unmade {
        Unmade::Failed(e.to_string())
    }
}

/// The tasks a start holds, each at its commit, in the order of the plan.
pub(super) type StartKey = Vec<(String, Oid)>;

/// A start made once for every task that starts there.
pub(super) type StartMerge = std::sync::OnceLock<Result<Oid, Unmade>>;

/// A task to run again from a new start, and the work it had.
pub(super) struct Stale {
    pub(super) index: usize,
    /// Its old start and tip, when it had committed work.
    pub(super) work: Option<(Oid, Oid)>,
    /// The tasks it comes after whose work changed (or that run again).
    pub(super) changed: Vec<String>,
    /// What a person said when they sent it back, for its next round.
    pub(super) told: Option<String>,
}
