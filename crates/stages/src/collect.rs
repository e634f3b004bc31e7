//! Stage 4: collect. plait, not the agent, turns a worktree into a commit on the task's
//! branch. The worktree is walked file by file — a write to a path that is not checked out
//! is invisible to `git status` — and compared with the branch's tree. Changes to owned
//! paths are committed; every other change is a violation: left uncommitted where it is,
//! and reported by path. Build output is neither: files git would ignore, and the caches
//! build tools write ([`build_output::BUILD_OUTPUT`]) that the base does not track and the
//! task does not own.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use git2::{build::TreeUpdateBuilder, FileMode, ObjectType, Oid, Repository};

use plait_core::beneath::{Content, Kind, Step, Tree};
use plait_core::git::{mode, signatures};
use plait_core::globs::Globs;
use plait_core::refs::branch_ref;
use plait_core::state::{ChangeKind, FileChange};
use plait_plan::layout::{self, Cone};
use plait_trees::workspace::index;
use plait_trees::workspace::sparse::{self, DIR_MODE};

pub mod build_output;
pub mod violations;

/// Why a worktree could not be collected.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The task's worktree is gone or git does not know it as a worktree.
    #[error("worktree {path} is missing or not a git worktree: {source}")]
    NotAWorktree {
        /// The worktree.
        path: PathBuf,
        /// What git said.
        source: git2::Error,
    },
    /// The task's branch no longer points where the task started it.
    #[error("branch {branch} moved while its task was running (expected {expected})")]
    BranchMoved {
        /// The branch.
        branch: String,
        /// The commit it was expected at.
        expected: Oid,
    },
    /// A file of the worktree could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// A git operation failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// A difference between the worktree and the branch's tree.
#[derive(Debug, Clone)]
pub struct Change {
    /// The path, relative to the worktree's root.
    pub path: String,
    pub(crate) kind: ChangeKind,
    /// The new content and mode; `None` for a deletion.
    pub content: Option<(Vec<u8>, u32)>,
}

/// What a walk of a worktree found.
#[derive(Debug, Default)]
pub struct Scan {
    /// The commit the worktree's branch points at.
    pub head: Option<Oid>,
    /// Every difference found, owned or not.
    pub changes: Vec<Change>,
    /// Every file present in the worktree, tracked or not (build output left out).
    pub present: HashSet<String>,
    /// The tracked paths the worktree holds: the cone's files of the branch's tree that
    /// the task checks out.
    checked_out: HashSet<String>,
}

/// How to know which tracked files a worktree holds.
pub enum Held<'a> {
    /// From the task's layout: the cone of its sparse checkout, and which tracked files of
    /// the cone it checks out. An agent's `git rm` or `git update-index` cannot hide a
    /// deletion from this.
    Layout {
        /// The cone.
        cone: &'a Cone,
        /// Whether the worktree checks out a tracked file of the cone.
        holds: &'a dyn Fn(&str) -> bool,
    },
    /// From the worktree's index, for a worktree whose plan is not at hand.
    Index,
}

/// Walks `worktree` and lists every change against its branch's tree, build output left
/// out. The cost follows the worktree: the files on disk, and the branch's tree only where
/// the cone reaches.
pub fn scan(worktree: &Path, held: &Held<'_>) -> Result<Scan, CollectError> {
    scan_owning(worktree, held, &Globs::empty())
}

/// [`scan`] for a task owning `owns`: an owned file is never build output, so a directory
/// of build output where `owns` may reach is walked.
pub(crate) fn scan_owning(
    worktree: &Path,
    held: &Held<'_>,
    owns: &Globs,
) -> Result<Scan, CollectError> {
    let wt = Repository::open(worktree).map_err(|source| CollectError::NotAWorktree {
        path: worktree.to_path_buf(),
        source,
    })?;
    let head = wt.head()?.peel_to_commit()?;
    let head_tree = head.tree()?;
    let in_head = |path: &str| -> Option<(Oid, u32)> {
        let entry = head_tree.get_path(Path::new(path)).ok()?;
        Some((entry.id(), entry.filemode() as u32))
    };
    let checked_out: HashSet<String> = match held {
        Held::Layout { cone, holds } => sparse::entries(&wt, &head_tree, cone)?
            .into_iter()
            .filter(|e| e.mode != DIR_MODE && e.is_blob() && holds(&e.path))
            .map(|e| e.path)
            .collect(),
        Held::Index => {
            let path = wt.path().join("index");
            // An index plait cannot read (git wrote a split index) is asked of git itself.
            let listed = match index::checked_out(&path) {
                Ok(paths) => paths,
                Err(e) => checked_out_by_git(worktree)
                    .map_err(|_| CollectError::Io { path, source: e })?,
            };
            listed
                .into_iter()
                .filter(|p| in_head(p).is_some_and(|(_, m)| m != mode::GITLINK))
                .collect()
        }
    };
    let is_tracked_dir = |path: &str| {
        head_tree
            .get_path(Path::new(path))
            .is_ok_and(|e| e.kind() == Some(ObjectType::Tree))
    };
    // The worktree is the task's: walked and read through a handle, following no link.
    let tree = Tree::open(worktree).map_err(|source| CollectError::Io {
        path: worktree.to_path_buf(),
        source,
    })?;
    // A file beside which a directory is build output (`Cargo.toml`), in the base or new.
    let exists = |path: &str| -> bool {
        head_tree.get_path(Path::new(path)).is_ok()
            || matches!(tree.kind(path), Ok(Some(Kind::File { .. })))
    };
    let reaches = owns.reaches();

    let mut changes = Vec::new();
    let mut present = HashSet::new();
    tree.walk(&mut |entry| {
        let rel = entry.rel;
        if entry.kind == Kind::Dir {
            let gitlink = in_head(rel).is_some_and(|(_, m)| m == mode::GITLINK);
            let ignored = !is_tracked_dir(rel)
                && (wt.is_path_ignored(rel).unwrap_or(false)
                    || (build_output::holds(rel, true, &exists)
                        && !build_output::may_own_under(&reaches, rel)));
            return Ok(match rel == ".git" || gitlink || ignored {
                true => Step::Skip,
                false => Step::Descend,
            });
        }
        if rel == ".git" {
            return Ok(Step::Skip);
        }
        let known = in_head(rel);
        // An overlay view's deletion of a file of the base: a whiteout. For a file the
        // worktree holds, its absence says it all; for any other it is a change too.
        if let Kind::Other { whiteout } = entry.kind {
            if whiteout && known.is_some() && !checked_out.contains(rel) {
                changes.push(Change {
                    path: rel.to_string(),
                    kind: ChangeKind::Deleted,
                    content: None,
                });
            }
            // A FIFO, a socket, a device: not a file git stores, and never opened.
            return Ok(Step::Skip);
        }
        if known.is_none()
            && (wt.is_path_ignored(rel).unwrap_or(false)
                || build_output::is_unowned(rel, owns, &exists))
        {
            return Ok(Step::Skip);
        }
        // Read as it is now, judged by what was opened: a file's bytes, or a link as a link.
        let read = entry
            .read()
            .map_err(|e| io::Error::new(e.kind(), format!("{rel}: {e}")))?;
        let (bytes, file_mode) = match read {
            Some(Content::File { bytes, executable }) => {
                (bytes, if executable { mode::EXEC } else { mode::FILE })
            }
            Some(Content::Link(target)) => (target, mode::LINK),
            None => return Ok(Step::Skip),
        };
        present.insert(rel.to_string());
        let oid = Oid::hash_object(ObjectType::Blob, &bytes).map_err(io::Error::other)?;
        let kind = match known {
            None => ChangeKind::Added,
            Some((known_oid, known_mode)) if known_oid != oid || known_mode != file_mode => {
                ChangeKind::Modified
            }
            Some(_) => return Ok(Step::Skip),
        };
        changes.push(Change {
            path: rel.to_string(),
            kind,
            content: Some((bytes, file_mode)),
        });
        Ok(Step::Skip)
    })
    .map_err(|source| CollectError::Io {
        path: worktree.to_path_buf(),
        source,
    })?;
    for path in checked_out.iter().filter(|p| !present.contains(*p)) {
        changes.push(Change {
            path: path.clone(),
            kind: ChangeKind::Deleted,
            content: None,
        });
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Scan {
        head: Some(head.id()),
        changes,
        present,
        checked_out,
    })
}

/// The tracked paths of `worktree` that are checked out, as `git ls-files -t` lists them
/// (`H`: neither skip-worktree nor a sparse directory).
fn checked_out_by_git(worktree: &Path) -> Result<Vec<String>, plait_core::git::GitCliError> {
    let out = plait_core::git::run_git(worktree, &["ls-files", "-t", "-z"], &[])?;
    Ok(out
        .stdout
        .split(|&b| b == 0)
        .filter_map(|entry| entry.strip_prefix(b"H "))
        .filter_map(|p| String::from_utf8(p.to_vec()).ok())
        .collect())
}

/// What collecting a task produced.
#[derive(Debug, Clone, Default)]
pub struct CollectOutcome {
    /// The new commit on the task's branch; `None` when no owned file changed.
    pub commit: Option<Oid>,
    /// The owned changes committed.
    pub changes: Vec<FileChange>,
    /// The changes to files the task does not own, never committed.
    pub violations: Vec<FileChange>,
}

/// What to commit and how to name it.
pub struct CollectSettings<'a> {
    /// The task's worktree.
    pub worktree: &'a Path,
    /// The task's branch, which the owned changes are committed on.
    pub branch: &'a str,
    /// The task's `owns` globs.
    pub owns: &'a Globs,
    /// The task's sparse-checkout cone.
    pub cone: &'a Cone,
    /// Whether the worktree holds a tracked file of the cone.
    pub holds: &'a dyn Fn(&str) -> bool,
    /// The commit's message.
    pub message: String,
    /// Where to keep the diffs of the violations (`TaskDir::violations`), if anywhere.
    pub violations_diff: Option<&'a Path>,
}

/// Commits the owned changes of a worktree on its branch and reports the others (keeping
/// their diffs where `settings.violations_diff` says).
pub fn collect(
    repo: &Repository,
    settings: &CollectSettings<'_>,
) -> Result<CollectOutcome, CollectError> {
    let held = Held::Layout {
        cone: settings.cone,
        holds: settings.holds,
    };
    let scan = scan_owning(settings.worktree, &held, settings.owns)?;
    let (owned, violations): (Vec<&Change>, Vec<&Change>) = scan
        .changes
        .iter()
        .partition(|c| settings.owns.matches(&c.path));
    let outcome = CollectOutcome {
        commit: None,
        changes: owned.iter().map(|c| record(c)).collect(),
        violations: violations.iter().map(|c| record(c)).collect(),
    };
    let head = scan
        .head
        .ok_or_else(|| git2::Error::from_str("worktree has no HEAD"))?;
    if let Some(path) = settings.violations_diff {
        violations::keep(repo, &repo.find_commit(head)?.tree()?, &violations, path)?;
    }
    if owned.is_empty() {
        return Ok(outcome);
    }
    let parent = repo.find_commit(head)?;
    let parent_tree = parent.tree()?;
    let mut update = TreeUpdateBuilder::new();
    let mut committed: HashMap<&str, Option<(Oid, u32)>> = HashMap::new();
    for change in &owned {
        match &change.content {
            Some((bytes, file_mode)) => {
                let blob = repo.blob(bytes)?;
                update.upsert(&change.path, blob, file_mode_of(*file_mode));
                committed.insert(&change.path, Some((blob, *file_mode)));
            }
            None => {
                update.remove(&change.path);
                committed.insert(&change.path, None);
            }
        }
    }
    let tree_id = update.create_updated(repo, &parent_tree)?;
    let tree = repo.find_tree(tree_id)?;
    let who = signatures(repo)?;
    let commit = repo.commit(
        None,
        &who.author,
        &who.committer,
        &settings.message,
        &tree,
        &[&parent],
    )?;
    let refname = branch_ref(settings.branch);
    repo.reference_matching(&refname, commit, true, head, "plait: collect")
        .map_err(|_| CollectError::BranchMoved {
            branch: settings.branch.to_string(),
            expected: head,
        })?;
    refresh_index(repo, settings, tree_id, &scan, &committed)?;
    Ok(CollectOutcome {
        commit: Some(commit),
        ..outcome
    })
}

/// Rewrites the worktree's sparse index for its new tree, so `git status` shows only what
/// was left uncommitted. A directory outside the cone that holds a file on disk (a
/// violation) is listed file by file, so git sees that file.
fn refresh_index(
    repo: &Repository,
    settings: &CollectSettings<'_>,
    tree: Oid,
    scan: &Scan,
    committed: &HashMap<&str, Option<(Oid, u32)>>,
) -> Result<(), CollectError> {
    let mut cone = if plait_core::git::reads_sparse_index() {
        settings.cone.clone()
    } else {
        Cone::full()
    };
    for path in &scan.present {
        if !cone.holds(path) {
            cone.add_own(layout::parent(path).to_string());
        }
    }
    let entries = sparse::entries(repo, &repo.find_tree(tree)?, &cone)?;
    let held: HashSet<&str> = scan
        .checked_out
        .iter()
        .chain(&scan.present)
        .map(String::as_str)
        .collect();
    // Violations stay in the worktree uncommitted: their entries get no stat data, so
    // `git status` looks at them and shows them.
    let dirty: HashSet<&str> = scan
        .changes
        .iter()
        .map(|c| c.path.as_str())
        .filter(|p| !committed.contains_key(p))
        .collect();
    let presence = sparse::presence(&entries, &held, &dirty);
    let wt = Repository::open(settings.worktree)?;
    let index_path = wt.path().join("index");
    index::write(&index_path, settings.worktree, &entries, &presence).map_err(|source| {
        CollectError::Io {
            path: index_path.clone(),
            source,
        }
    })?;
    Ok(())
}

fn record(change: &Change) -> FileChange {
    FileChange {
        path: change.path.clone(),
        kind: change.kind,
    }
}

fn file_mode_of(m: u32) -> FileMode {
    match m {
        mode::EXEC => FileMode::BlobExecutable,
        mode::LINK => FileMode::Link,
        _ => FileMode::Blob,
    }
}

/// The commit message for a task: `plait(<task>): <first line of prompt>` and a trailer.
pub fn commit_message(run: &str, task: &str, prompt: &str) -> String {
    let first = prompt
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut subject: String = first.chars().take(72).collect();
    if first.chars().count() > 72 {
        subject.push('…');
    }
    format!("plait({task}): {subject}\n\nPlait-Run: {run}\n")
}

/// The tree task `task`'s own work is told from: its start's (the base with the work of the
/// tasks it comes after), or the run's base's, `base_tree`.
pub fn start_tree<'r>(
    repo: &'r git2::Repository,
    base_tree: &git2::Tree<'r>,
    task: &plait_core::state::TaskRecord,
) -> Result<git2::Tree<'r>, git2::Error> {
    match &task.start {
        Some(start) => repo.find_commit(git2::Oid::from_str(start)?)?.tree(),
        None => Ok(base_tree.clone()),
    }
}

/// The paths commit `tip` changes against `base_tree` outside task `task`'s ownership, as
/// `task: path`: this stage's rule applied to commits made without it (a task branch moved
/// by hand, branches `plait check` is given). A task with no entry in `owns` owns nothing.
pub fn outside_ownership(
    repo: &Repository,
    base_tree: &git2::Tree<'_>,
    tip: Oid,
    task: &str,
    owns: &HashMap<String, Globs>,
) -> Result<Vec<String>, git2::Error> {
    let tree = repo.find_commit(tip).and_then(|c| c.tree())?;
    let globs = owns.get(task);
    Ok(plait_core::git::tree_changes(repo, base_tree, &tree)?
        .into_keys()
        .filter(|path| !globs.is_some_and(|g| g.matches(path)))
        .map(|path| format!("{task}: {path}"))
        .collect())
}

#[cfg(test)]
mod tests;
