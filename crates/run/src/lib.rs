//! plait's run: the orchestrator that drives a run's tasks through the stages, and the
//! steering that lets a person reach a task while the run goes on.
//!
//! # Where to start
//!
//! - [`orchestrator::prepare`] turns [`orchestrator::RunSettings`] (a resolved plan and
//!   where the run lives) into a [`orchestrator::Prepared`] run;
//!   [`orchestrator::execute`] runs it: each task through workspace, agent, collect and
//!   review with at most `jobs` at once, in waves when tasks come after others, as several
//!   attempts when the plan asks, here or spread over machines, then the merge. Each
//!   change of a task's state is an [`orchestrator::Event`] on a channel the caller may
//!   listen on. [`orchestrator::prepare_resume`] and [`orchestrator::prepare_send_back`]
//!   take an interrupted run up again or send tasks back for another round.
//! - [`steer`] is how a person's request (`plait tell`, `plait stop`, the page) reaches a
//!   running run: a file in the run's directory, answered beside it.
//!
//! # Why a crate of its own
//!
//! The stages ([`plait_stages`]) each do one step and return an outcome; the orchestrator
//! is the one place that decides when each runs, for how many tasks at once, and what a
//! failure means for the run, and it keeps the run's record. Cut from the stages below it
//! and from the use cases (`ops`) and the gate above it, the scheduling can be read on its
//! own. Steering goes with it because the orchestrator is what takes the requests.
//!
//! # Example
//!
//! A request to tell a task's agent something, written into a run's directory the way
//! `plait tell` writes it, then taken by the run and answered:
//!
//! ```
//! use plait_run::steer::{self, Answer, Ask, Request};
//!
//! let dir = tempfile::tempdir()?;
//! let run = plait_core::state::RunDir(dir.path().to_path_buf());
//! let request = Request {
//!     task: "web".into(),
//!     ask: Ask::Tell { text: "use the existing logger".into() },
//!     by: "command line".into(),
//!     at: 1,
//! };
//! steer::submit(&run, &request)?;
//!
//! let taken = steer::pending(&run);
//! assert_eq!(taken.len(), 1);
//! assert_eq!(taken[0].1, request);
//! steer::answer(&taken[0].0, &Answer { ok: true, message: "told at its next turn".into() });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

pub mod orchestrator;
pub mod steer;
