//! plait's walls and its one way to run a command: [`sandbox`] (Landlock rules for every
//! process plait starts for a task, its network wall and whole-tree view, and the seccomp
//! observer that records what they refuse), [`child`] (what to start and what was started,
//! without a `fork` of plait), [`shell`] (a command in a sandbox, with a log, a timeout,
//! the interrupt and its process group) and [`forward`] (the way into a task's view for a
//! command already behind its walls, `plait run-in-view`).
//!
//! Its surface is small: [`sandbox::SandboxSettings`] and [`sandbox::Sandbox`] (what a
//! plan asks of the walls, and the walls built from it), what the kernel offers
//! ([`sandbox::support`], [`sandbox::view_support`]), [`shell::run`] and its kin, and
//! [`forward`]'s channel. How the walls are built stays inside.

#![deny(missing_docs)]

pub mod child;
pub mod forward;
pub mod sandbox;
pub mod shell;
