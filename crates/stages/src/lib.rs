//! Stages 4 to 9 of plait: what happens to a task's work after its agent ends, up to the
//! user's branch. Each stage is a module named for its step, and each takes settings and
//! returns an outcome; none drives another (the orchestrator, above, does).
//!
//! # Where to start
//!
//! - [`collect`] — plait, not the agent, turns a worktree into a commit on the task's
//!   branch ([`collect::collect`]); a change to a file the task does not own is a
//!   violation, reported, never committed.
//! - [`review`] — the task's checks on a full checkout of its branch and a reviewer's
//!   verdict; a failure sends the worker back for another round.
//! - [`groups`] — in a large run, tasks grouped by path, each group merged and reviewed by
//!   a supervisor before the top merge.
//! - [`merge`] — the approved branches combined into `plait/<run>/merged`
//!   ([`merge::merge`]), disjoint changes straight onto the base tree, overlapping paths
//!   through `git merge-tree`; [`bisect`] finds the tasks to blame when the merged checks
//!   fail.
//! - [`land`] — the user's branch moved to the merged result, only when the gate is green
//!   ([`land::gate`] says what stands in the way).
//! - [`report`] — per task and per run, as text for people and JSON for scripts.
//! - [`context::Context`] is what they all work in, opened once per command: the
//!   repository, plait's store in it, the environment plans read.
//!
//! # Why a crate of its own
//!
//! These are the steps of the pipeline a reader follows one by one; they stand on the
//! plan, the trees and the agents (a reviewer or a supervisor is an agent asked a
//! question) and know nothing of how a run is scheduled, resumed or steered, which is
//! the orchestrator's, nor of the use cases (`ops`) and the gate in hooks and CI, above.
//! The context goes with them because the merge, the review and the culprit search open
//! the repository through it.
//!
//! # Example
//!
//! Every task's commit says which task and run it is, so `git log` tells a task's work
//! from a person's:
//!
//! ```
//! let message = plait_stages::collect::commit_message("r1", "web", "Greet in the page\nthen more");
//! assert_eq!(message, "plait(web): Greet in the page\n\nPlait-Run: r1\n");
//! ```

#![deny(missing_docs)]

pub mod bisect;
pub mod collect;
pub mod context;
pub mod groups;
pub mod land;
pub mod merge;
pub mod report;
pub mod review;

#[cfg(test)]
#[path = "../../agents/src/test_flipper.rs"]
mod test_flipper;
