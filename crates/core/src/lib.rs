//! The bottom layer of plait, which every other crate shares: the run's record
//! ([`state`]: `state.json`, the lock, the names of a run's directory), the repository
//! helpers ([`git`]), every ref name plait makes ([`refs`]), the run's interrupt
//! ([`cancel`]), ownership globs ([`globs`]) and the one way plait touches a tree a task
//! could have written ([`beneath`]: a directory handle, no link followed). It knows nothing of agents, models or
//! the walls.

#![deny(missing_docs)]

pub mod beneath;
pub mod cancel;
pub mod git;
pub mod globs;
pub mod refs;
pub mod state;
