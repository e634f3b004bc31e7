//! plait runs many coding agents at once inside one git repository.
//!
//! Each task owns a disjoint set of files, gets its own branch and a worktree holding only
//! those files, and an agent edits it; plait commits the owned changes, merges the branches
//! and lands the result only when the merge is clean. This crate is the top of the engine:
//! the use cases ([`ops`], which the command line and the page share), the gate for hooks
//! and CI ([`check`]) and [`clean`], over the crates that follow the pipeline:
//!
//! 1. [`plait_plan`] — read and validate a plan (TOML, a split rule, or a manager model's
//!    answer): tasks, owned globs, base, providers, agent CLIs, checks, reviewer, groups.
//!    [`plait_agents::manager`] asks a model (or Claude Code, an `agent`) for one; it sits
//!    above both.
//! 2. [`plait_trees::workspace`] — per task, a branch `plait/<run>/<task>` and a worktree with
//!    only the owned and context files, built without a checkout (a sparse checkout in cone
//!    mode with a hand-written sparse index). [`plait_trees::environment`], the run's base
//!    layer that views and checks lie over, writes its files as the workspace does; both keep
//!    directories between runs through `dirs`, below them.
//! 3. [`plait_agents::agent`] — run the task's agent in its worktree: `exec` (a shell command),
//!    a model over HTTP with a confined tool loop, Claude Code (with plait's guard as its
//!    hook), aider, or any agent CLI.
//! 4. [`plait_stages::collect`] — walk the worktree, commit owned changes on the task branch,
//!    report every other change as a violation.
//! 5. [`plait_stages::review`] — checks on a full checkout of the branch and a reviewer's
//!    verdict; a failing check or a request for changes sends the worker back for another
//!    round.
//! 6. [`plait_stages::groups`] — in a large run, groups of tasks by path, each merged into
//!    `plait/<run>/group-<k>` and reviewed by a supervisor before the top merge.
//! 7. [`plait_stages::merge`] — combine the approved branches into `plait/<run>/merged`;
//!    disjoint changes go straight onto the base tree, overlapping paths go through `git
//!    merge-tree`; then the merged checks; when they fail, [`plait_stages::bisect`] finds the
//!    tasks to blame and holds them out.
//! 8. [`plait_stages::land`] — advance the user's branch to the merged result, only when the
//!    gate is green.
//! 9. [`plait_stages::report`] — per task and per run: state, changes, violations, verdicts,
//!    checks, conflicts, tokens, cost, time; diffs.
//!
//! [`plait_run::orchestrator`] drives stages 2–7 for a run with bounded concurrency, persisting the run's
//! record ([`plait_core::state`]) after every transition; [`clean`] removes what a run created;
//! [`check`] is the gate for hooks and CI. [`plait_core::git`] holds the repository helpers
//! every stage shares and [`plait_sandbox::shell`] the way every stage runs a command, inside
//! the walls of a [`plait_sandbox::sandbox`] (Landlock: a task's processes write only its own
//! places). [`plait_llm`] is the model APIs over HTTP that agents, reviewers and the planner
//! share, and [`plait_core::cancel`] the run's interrupt; [`plait_store::pg`] is the PostgreSQL
//! store a run is also written to for other machines. Only the command line (`src/cli`) prints,
//! reads the environment, installs signal handlers and chooses exit codes.

#![deny(missing_docs)]

pub mod check;
pub mod clean;
pub mod ops;
pub mod words;

/// The model agent's editor tools, for the benchmarks (`benches/nofollow.rs`).
#[doc(hidden)]
pub mod editor {
    pub use plait_agents::agent::model::tools::Workspace;
}
