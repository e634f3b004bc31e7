//! The bottom layer of plait, which every other crate shares: the run's record
//! ([`state`]: `state.json`, the lock, the names of a run's directory), the repository
//! helpers ([`git`]), every ref name plait makes ([`refs`]), the run's interrupt
//! ([`cancel`]) and ownership globs ([`globs`]). It knows nothing of agents, models or
//! the walls.

#![deny(missing_docs)]

pub mod cancel;
pub mod git;
pub mod globs;
pub mod refs;
pub mod state;
