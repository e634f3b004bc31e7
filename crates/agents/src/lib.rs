//! Stage 3 of plait: the agents, and every word plait tells them. A task's worker edits its
//! worktree behind one trait ([`agent::Agent`]), so the orchestrator treats a shell command,
//! a model over HTTP with confined tools, Claude Code, aider and any agent CLI alike; the
//! roles that judge or plan (a reviewer, a supervisor, the manager) ask the same programs
//! questions.
//!
//! # Where to start
//!
//! - [`agent::from_config`] builds the agent a resolved task names
//!   ([`plait_plan::AgentConfig`]); [`agent::Agent::run`] runs it on a
//!   [`agent::TaskContext`] (everything it gets to know about its task) and gives an
//!   [`agent::AgentReport`]. An agent's failure is an outcome ([`agent::AgentOutcome`]),
//!   never an error of plait's.
//! - [`agent::Budget`] and [`agent::Tally`] hold a run to its `--max-cost`.
//! - [`prompts`] is everything plait tells a worker, a reviewer, a supervisor or the
//!   manager, in one place; its functions only build text.
//! - [`manager::Manager`] asks a model (or Claude Code) for a plan from a goal and the
//!   repository, and has plait's own validation judge its answers.
//!
//! # Why a crate of its own
//!
//! Running an agent needs the plan (what to run, with which settings), the trees (the
//! worktree it edits) and the model APIs, walls and gateway below them, and nothing of
//! collection, review, merging or the orchestrator, which use it. The prompts go with the
//! agents because they are their words; the manager goes with them because it is an agent
//! asked for a plan, above both the plan and the agents.
//!
//! # Example
//!
//! An exec agent runs once per owned file with `{file}` quoted for the shell, and a worker
//! in its second round is told the task again with what the checks asked for:
//!
//! ```
//! use plait_agents::{agent::exec, prompts::worker};
//!
//! assert_eq!(
//!     exec::with_file("prettier --write {file}", "web/my app.js"),
//!     "prettier --write 'web/my app.js'"
//! );
//! let told = worker::round_message("Greet in the page", 2, Some("`npm test` failed"));
//! assert!(told.starts_with("Greet in the page"));
//! assert!(told.contains("round 2") && told.contains("`npm test` failed"));
//! ```

#![deny(missing_docs)]

pub mod agent;
pub mod manager;
pub mod prompts;

#[cfg(test)]
mod test_flipper;
