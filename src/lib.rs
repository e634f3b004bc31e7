//! plait runs many coding agents at once inside one git repository.
//!
//! Each task owns a disjoint set of files, gets its own branch and a worktree holding only
//! those files, and an agent edits it; plait commits the owned changes, merges the branches
//! and lands the result only when the merge is clean. The modules follow the pipeline:
//!
//! 1. [`plan`] — read and validate a plan (TOML or a split rule): tasks, owned globs, base.
//! 2. [`workspace`] — per task, a branch `plait/<run>/<task>` and a worktree with only the
//!    owned and context files, built without a checkout (hand-written index, skip-worktree).
//! 3. [`agent`] — run the task's agent in its worktree (`exec`: a shell command).
//! 4. [`collect`] — walk the worktree, commit owned changes on the task branch, report
//!    every other change as a violation.
//! 5. [`merge`] — combine the task branches into `plait/<run>/merged`; disjoint changes go
//!    straight onto the base tree, overlapping paths go through `git merge-tree`.
//! 6. [`land`] — advance the user's branch to the merged result, only when it is clean.
//! 7. [`report`] — per task and per run: state, changes, violations, conflicts, time; diffs.
//!
//! [`orchestrator`] drives stages 2–5 for a run with bounded concurrency, persisting the
//! run's [`state`] after every transition; [`clean`] removes what a run created; [`check`]
//! is the gate for hooks and CI. [`git`]
//! holds the repository helpers every stage shares. Only [`cli`] prints, reads the
//! environment and chooses exit codes.

pub mod agent;
pub mod check;
pub mod clean;
pub mod cli;
pub mod collect;
pub mod git;
pub mod land;
pub mod merge;
pub mod orchestrator;
pub mod plan;
pub mod report;
pub mod review;
pub mod shell;
pub mod state;
pub mod workspace;
