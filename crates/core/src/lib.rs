//! The bottom layer of plait, which every other crate shares. It knows nothing of agents,
//! models or the walls.
//!
//! Start from:
//! - [`state::RunState`] and [`state::TaskRecord`]: the run's record (`state.json`, written
//!   after every transition), and [`state::RunDir`] / [`state::TaskDir`], the one place that
//!   names what is in a run's and a task's directory;
//! - [`beneath::Tree`]: the one way plait touches a tree a task or a check could have
//!   written — a directory handle, every name resolved beneath it with no link followed;
//! - [`globs::Globs`]: what a task owns; [`git`], [`refs`] (every ref name plait makes) and
//!   [`cancel`] (the run's interrupt).
//!
//! Why a crate of its own: these are the facts every stage reads and writes, and the rules
//! (ownership, no link followed) every stage keeps; below everything, they cannot lean on
//! any of it.
//!
//! ```
//! use plait_core::beneath::{Content, Tree};
//! use plait_core::globs::Globs;
//!
//! let dir = tempfile::tempdir()?;
//! let tree = Tree::open(dir.path())?;
//! tree.create_dir_all("src")?;
//! tree.write("src/a.py", b"print(1)\n", false)?;
//! // A link planted in the tree is data, never a way out.
//! std::os::unix::fs::symlink("/etc/hostname", dir.path().join("src/b.py"))?;
//! assert!(matches!(tree.read("src/b.py")?, Some(Content::Link(_))));
//! assert!(tree.read_file("src/b.py").is_err());
//! // What a task owns.
//! let owns = Globs::new(&["/src/".to_string()])?;
//! assert!(owns.matches("src/a.py") && !owns.matches("README.md"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

pub mod beneath;
pub mod cancel;
pub mod git;
pub mod globs;
pub mod hex;
pub mod refs;
pub mod state;
pub mod sync;
