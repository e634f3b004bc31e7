//! A task's whole-tree view: where the commands its agent runs (builds, tests, linters, a
//! model's `run`, Claude Code's `Bash`) see the whole repository at the task's base with
//! the task's current edits in place of its owned files.
//!
//! Where the kernel lets an unprivileged process make a user and mount namespace (most
//! Linux systems), the view is an overlay: every process of the task's agent starts in a
//! mount namespace of its own where the worktree's path is an overlayfs whose lower layer
//! is a plain checkout of the base, shared read-only by every task of that base (made once
//! and kept between runs, `base_tree`), and whose upper layer is the task's worktree
//! itself. Nothing is copied or synchronised: an edit of an owned file is the worktree's,
//! build output (`target/`, `node_modules/`, `__pycache__/`, `.venv/`) lands in the
//! worktree as ignored files and is kept for the task's later commands, and a write to a
//! file the task does not own is copied up into the worktree, where collect finds it and
//! reports it as a violation, never committed. Per process it costs a namespace and a
//! mount; per task nothing, so a task that runs nothing keeps the sparse worktree's cost.
//!
//! Without such namespaces the view is the worktree filled in (`materialize`): the base's
//! other files written into it once, at the task's first command, skipping what it holds
//! and what it owns. That costs a checkout's writes, once per task, and collect's walk then
//! covers the whole tree.
//!
//! The base checkouts are kept and removed as the environment's base layers are, through
//! `crate::dirs`; the workspace names nothing of the environment, which lies above it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use git2::{Oid, Repository};

use plait_core::git::{mode, TreeFile};
use plait_core::globs::Globs;
use plait_sandbox::sandbox::OverlayView;

/// How a task's view is made on this system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewKind {
    /// The worktree over a shared checkout of the base, in a mount namespace per process.
    Overlay(OverlayView),
    /// The base's other files written into the worktree at the first command; why the
    /// overlay could not be had.
    Materialize(String),
    /// The worktree stays sparse for the agent's own command (`[sandbox] view = false`: an
    /// exec or `{ cli }` agent's codemod sees only its files); `$PLAIT_RUN_IN CMD` has plait
    /// start `CMD` in this overlay (`plait_sandbox::forward`).
    Entered(OverlayView),
}

/// One task's view, shared by its agent's rounds.
#[derive(Debug)]
pub struct TaskView {
    pub(crate) kind: ViewKind,
    worktree: PathBuf,
    /// The repository (a directory inside it), to read the base's blobs.
    repo: PathBuf,
    files: Arc<Vec<TreeFile>>,
    owns: Globs,
    /// Written once the worktree is filled in (`TaskDir::view_filled`).
    filled_marker: PathBuf,
    /// Written in once, for [`ViewKind::Materialize`].
    filled: tokio::sync::OnceCell<Result<(), String>>,
}

impl TaskView {
    /// The view of kind `kind` over the worktree at `worktree`, of the repository `repo` whose
    /// base has `files`, for a task that owns `owns`; `filled_marker` is written once a
    /// worktree is filled in.
    pub fn new(
        kind: ViewKind,
        worktree: PathBuf,
        repo: PathBuf,
        files: Arc<Vec<TreeFile>>,
        owns: Globs,
        filled_marker: PathBuf,
    ) -> TaskView {
        TaskView {
            kind,
            worktree,
            repo,
            files,
            owns,
            filled_marker,
            filled: tokio::sync::OnceCell::new(),
        }
    }

    /// The overlay every process of the task starts in, if the view is one.
    pub fn overlay(&self) -> Option<&OverlayView> {
        match &self.kind {
            ViewKind::Overlay(o) => Some(o),
            ViewKind::Materialize(_) | ViewKind::Entered(_) => None,
        }
    }

    /// The overlay `$PLAIT_RUN_IN` enters through plait, if the view is one.
    pub fn entered(&self) -> Option<&OverlayView> {
        match &self.kind {
            ViewKind::Entered(o) => Some(o),
            _ => None,
        }
    }

    /// Whether the worktree is the upper layer of an overlay (never filled in).
    pub fn layered(&self) -> bool {
        !matches!(self.kind, ViewKind::Materialize(_))
    }

    /// Makes the view ready for a command: nothing for an overlay; for a filled-in
    /// worktree, the base's other files written the first time.
    pub async fn ensure(&self) -> Result<(), String> {
        if self.layered() {
            return Ok(());
        }
        self.filled
            .get_or_init(|| async {
                let (repo, worktree) = (self.repo.clone(), self.worktree.clone());
                let (files, owns) = (self.files.clone(), self.owns.clone());
                let marker = self.filled_marker.clone();
                tokio::task::spawn_blocking(move || {
                    let repo = Repository::discover(&repo).map_err(|e| e.to_string())?;
                    materialize(&repo, &files, &|p| owns.matches(p), &worktree)?;
                    mark_filled(&marker)
                })
                .await
                .map_err(|e| format!("filling in the view failed: {e}"))?
            })
            .await
            .clone()
    }

    /// One phrase for a person.
    pub fn describe(&self) -> String {
        match &self.kind {
            ViewKind::Overlay(_) => "overlay".to_string(),
            ViewKind::Entered(_) => "overlay, entered through $PLAIT_RUN_IN".to_string(),
            ViewKind::Materialize(why) => format!("filled-in worktree ({why})"),
        }
    }
}

/// Writes into `worktree` every file of the base (`files`) it does not hold and the task
/// does not own (`owned`): the whole tree, with the task's files as they are. Files already there
/// (held, or written by an earlier call) are left alone, so a second call costs a walk of
/// the list. The worktree is the task's: each file is made new beneath a handle of it, so
/// whatever the task put at a name, or a link or a file it put where a directory should be,
/// stands as it is and nothing is written through it. Returns how many files it wrote.
pub fn materialize(
    repo: &Repository,
    files: &[TreeFile],
    owned: &dyn Fn(&str) -> bool,
    worktree: &Path,
) -> Result<usize, String> {
    let tree = super::files::open(worktree).map_err(|e| e.to_string())?;
    let mut writer = super::files::NewFiles::new(&tree);
    let mut written = 0;
    for file in files {
        if file.mode == mode::GITLINK || owned(&file.path) {
            continue;
        }
        let placed = writer
            .blob(repo, &file.path, file.oid, file.mode)
            .map_err(|e| e.to_string())?;
        if placed == super::files::Placed::Written {
            written += 1;
        }
    }
    Ok(written)
}

/// Writes the base's files the worktree at `worktree` lacks into it, from base commit
/// `base`, but never one of the task's own (listed one per line in the file `owned`),
/// deleted ones included: `plait run-in-view`'s way into a whole tree where the system has
/// no overlays.
pub fn fill(worktree: &Path, base: &str, owned: Option<&Path>) -> Result<(), String> {
    let repo = Repository::open(worktree).map_err(|e| e.message().to_string())?;
    let base = git2::Oid::from_str(base).map_err(|e| e.to_string())?;
    let tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(|e| e.message().to_string())?;
    let files = plait_core::git::flatten_tree(&tree).map_err(|e| e.message().to_string())?;
    let owned: std::collections::HashSet<String> = match owned {
        Some(list) => fs::read_to_string(list)
            .map_err(|e| format!("{}: {e}", list.display()))?
            .lines()
            .map(str::to_string)
            .collect(),
        None => Default::default(),
    };
    materialize(&repo, &files, &|p| owned.contains(p), worktree).map(|_| ())
}

/// Notes that a worktree has been filled in (see `TaskDir::view_filled`). The marker lies
/// in the task's scratch, which its agent writes: it is written beneath a handle of the
/// scratch, replacing whatever stands at its name, never through it.
pub fn mark_filled(marker: &Path) -> Result<(), String> {
    let shown = |e: io::Error| format!("{}: {e}", marker.display());
    let (Some(dir), Some(name)) = (marker.parent(), marker.file_name()) else {
        return Err(format!("{}: not a file's path", marker.display()));
    };
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    plait_core::beneath::Tree::open(dir)
        .and_then(|tree| tree.write(name, b"", false))
        .map_err(shown)
}

/// How many base checkouts are kept; older ones not in use go when a new one is made.
const KEEP_TREES: usize = 3;

/// A plain checkout of `base` (no `.git`) under `dir`, made once (in a staging directory
/// renamed into place whole) and kept between runs; the returned lock (a shared `flock`)
/// keeps it from being removed while held.
pub fn base_tree(
    repo: &Repository,
    dir: &Path,
    base: Oid,
    files: &[TreeFile],
) -> Result<(PathBuf, fs::File), String> {
    let shown = |e: io::Error, p: &Path| format!("{}: {e}", p.display());
    fs::create_dir_all(dir).map_err(|e| shown(e, dir))?;
    let tree = dir.join(base.to_string());
    let lock_path = tree.with_extension("lock");
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| shown(e, &lock_path))?;
    crate::dirs::flock(&lock, libc::LOCK_SH);
    if !tree.is_dir() {
        let staging = dir.join(format!(".staging-{base}-{}", std::process::id()));
        crate::dirs::remove_tree(&staging);
        fs::create_dir_all(&staging).map_err(|e| shown(e, &staging))?;
        let made = super::write_tree(repo, &staging, files);
        if let Err(e) = made {
            crate::dirs::remove_tree(&staging);
            return Err(e);
        }
        if fs::rename(&staging, &tree).is_err() {
            // Another process made it meanwhile.
            crate::dirs::remove_tree(&staging);
        }
        crate::dirs::prune_kept(dir, &tree, KEEP_TREES);
    }
    Ok((tree, lock))
}

/// Removes every kept base checkout no one holds (`plait clean --seed`); returns how many.
pub fn remove_trees(dir: &Path) -> usize {
    crate::dirs::remove_all(dir)
}

/// The overlay's work directory for a worktree: beside it, on its file system.
pub fn work_dir(worktree: &Path) -> PathBuf {
    let name = worktree
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    worktree.with_file_name(format!(".{name}.view"))
}

/// Where a task's layers of the directories `[setup] include` shares go: beside its
/// worktree, on its file system.
pub fn include_dir(worktree: &Path) -> PathBuf {
    let name = worktree
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    worktree.with_file_name(format!(".{name}.include"))
}

/// Removes a worktree's overlay work directory and its include layers, whose inner `work`
/// directories overlayfs leaves without permissions.
pub(crate) fn remove_work_dir(worktree: &Path) {
    crate::dirs::remove_tree(&work_dir(worktree));
    crate::dirs::remove_tree(&include_dir(worktree));
}
