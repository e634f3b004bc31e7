//! plait's walls and its one way to run a command: [`sandbox`] (Landlock rules for every
//! process plait starts for a task, and the seccomp observer that records what they
//! refuse) and [`shell`] (a command in a sandbox, with a log, a timeout, the interrupt and
//! its process group).

#![deny(missing_docs)]

pub mod forward;
pub mod sandbox;
pub mod shell;
