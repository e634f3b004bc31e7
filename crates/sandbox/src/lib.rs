//! plait's walls and its one way to run a command: [`sandbox`] (Landlock rules for every
//! process plait starts for a task, its network wall and whole-tree view, its PID namespace
//! and limits, and the seccomp observer that records what they refuse), [`child`] (what to
//! start and what was started, without a `fork` of plait), [`shell`] (a command in a
//! sandbox, with a log, a timeout, the interrupt and its process group) and [`forward`] (the
//! way into a task's view for a command already behind its walls, `plait run-in-view`).
//!
//! Start from [`sandbox::SandboxSettings`] (what a plan asks of the walls) and
//! [`sandbox::Sandbox`] (the walls built from it, for one purpose: a task's agent, its
//! checks, a reviewer), then [`shell::run`]. What the kernel offers is asked once
//! ([`sandbox::support`], [`sandbox::view_support`]). How the walls are built stays inside.
//!
//! Why a crate of its own: the walls bind the agents' processes, and every process plait
//! starts for a task goes through here; nothing above starts one another way.
//!
//! ```
//! use std::time::Duration;
//! use plait_core::cancel::Cancel;
//! use plait_sandbox::sandbox::{Confinement, Sandbox, SandboxSettings};
//! use plait_sandbox::shell::{self, Launch, ShellOutcome};
//!
//! let own = tempfile::tempdir()?;
//! let other = tempfile::tempdir()?;
//! let sandbox = Sandbox::new(&SandboxSettings::default(), vec![own.path().to_path_buf()]);
//! let (_interrupt, cancel) = Cancel::new();
//! let log = own.path().join("log");
//! let launch = Launch {
//!     dir: own.path(),
//!     env: &[],
//!     log: &log,
//!     timeout: Duration::from_secs(60),
//!     cancel: &cancel,
//!     sandbox: &sandbox,
//! };
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! // Its own directory takes writes...
//! let made = runtime.block_on(shell::run("echo made > made.txt", &launch));
//! assert!(matches!(made, ShellOutcome::Exited(0)), "{made:?}");
//! // ...another does not, where the kernel has the walls.
//! let outside = other.path().join("x.txt");
//! runtime.block_on(shell::run(&format!("echo x > '{}'", outside.display()), &launch));
//! let confined = matches!(sandbox.confinement(), Confinement::Landlock(_));
//! assert_eq!(outside.exists(), !confined);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

pub mod child;
pub mod forward;
pub mod sandbox;
pub mod shell;
