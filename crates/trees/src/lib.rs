//! Stage 2 of plait: the trees a task and its checks work in. Each task gets a branch and a
//! sparse git worktree holding only the files it owns and reads ([`workspace`]); the
//! commands its agent runs see the whole repository through a view over it
//! ([`workspace::view`]); and the run's base layer, set up once per base commit, is what
//! every view and check lies over ([`environment`]).
//!
//! # Where to start
//!
//! - [`workspace::create`] lays out one task's worktree from a [`workspace::WorktreeSpec`]
//!   (its branch, its base commit and the files its [`plait_plan::layout::Layout`] names),
//!   without a checkout; [`workspace::remove`] takes it away again.
//! - [`workspace::view`] is a task's whole-tree view: an overlay of its worktree on a
//!   shared checkout of the base, or, where the system has no namespaces, the worktree
//!   filled in.
//! - [`environment::Environment`] is a run's base layer: the base's files, what `[setup]`
//!   adds, and plait's own build of the base; it also keeps how the base fails its checks
//!   ([`failures::Failure`]), so a task's failure can be told from the base's own.
//!
//! # Why a crate of its own
//!
//! These are the places plait makes on disk for a run, and nothing in them knows of agents,
//! models, reviews or the orchestrator: they stand on the plan ([`plait_plan`], for a
//! task's layout and `[setup]`), the repository helpers ([`plait_core`]) and the walls'
//! settings ([`plait_sandbox`]). The kept directories both the views and the environment
//! hold between runs (their locks and removal) sit below both, in a private module.
//!
//! # Example
//!
//! A task's worktree, holding only the file it owns, made from a resolved plan:
//!
//! ```
//! use std::path::Path;
//!
//! let dir = tempfile::tempdir()?;
//! let repo = git2::Repository::init(dir.path())?;
//! for (path, text) in [("web/app.js", "app\n"), ("api/main.py", "main\n")] {
//!     std::fs::create_dir_all(dir.path().join(path).parent().unwrap())?;
//!     std::fs::write(dir.path().join(path), text)?;
//! }
//! let mut index = repo.index()?;
//! index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
//! let tree = repo.find_tree(index.write_tree()?)?;
//! let me = git2::Signature::now("me", "me@example.com")?;
//! repo.commit(Some("HEAD"), &me, &me, "start", &tree, &[])?;
//!
//! let text = "[defaults]\nagent = { exec = \"true\" }\n\n\
//!             [[task]]\nid = \"web\"\nprompt = \"p\"\nowns = [\"web/**\"]\n";
//! let source = Path::new("plait.toml");
//! let plan = plait_plan::resolve(&repo, plait_plan::parse(text, source)?, source)?;
//! let task = &plan.tasks[0];
//!
//! let trees = tempfile::tempdir()?;
//! let path = trees.path().join("web");
//! plait_trees::workspace::create(
//!     &repo,
//!     &plait_trees::workspace::WorktreeSpec {
//!         branch: "plait/example/web",
//!         admin_name: &plait_trees::workspace::admin_name("example", "web"),
//!         path: &path,
//!         base: plan.base,
//!         files: &plan.files,
//!         layout: &task.layout,
//!     },
//! )?;
//! assert!(path.join("web/app.js").exists());
//! assert!(!path.join("api/main.py").exists());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

mod dirs;
pub mod environment;
pub mod failures;
pub mod workspace;
