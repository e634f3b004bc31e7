//! Collecting a task's round: what the agent wrote in the worktree committed on the task's
//! branch (only what it owns), the rest reported as violations, an agent's own commits
//! undone and a replaced `.git` link put back; and what a branch changes against its start.
//! [`TaskError`], the failure of a step of the task's pipeline, lives here, the lowest of
//! the task's files: above [`super::shared`], below the worktree's preparation
//! (`worktrees`), the round loop (`rounds`) and the task's entry points (`task`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use git2::Oid;

use super::shared::Slot;
use super::Shared;
use plait_core::git;
use plait_core::git::tree_changes;
use plait_core::state::TaskDir;
use plait_core::state::{ChangeKind, FileChange, TaskRecord};
use plait_stages::collect::{self, CollectSettings};
use plait_trees::workspace;

/// Why a step of a task's pipeline failed; its text is the task's failure in the record.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskError {
    #[error(transparent)]
    Repo(#[from] git::RepoError),
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error(transparent)]
    Collect(#[from] collect::CollectError),
    #[error(transparent)]
    Worktree(#[from] workspace::WorkspaceError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} panicked: {source}")]
    Panicked {
        what: &'static str,
        source: tokio::task::JoinError,
    },
    /// Where the task starts could not be read.
    #[error("{0}")]
    Start(String),
    /// The agent replaced the worktree's `.git` link; plait put it back.
    #[error("the agent replaced {link}, plait's link to the worktree's git data; plait put it back and collected nothing")]
    LinkReplaced { link: PathBuf },
}

pub(super) fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> TaskError + '_ {
    move |source| TaskError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The commit task `index`'s branch started from.
pub(super) fn start_of(shared: &Shared, index: usize) -> Result<Oid, TaskError> {
    shared
        .start(index)
        .map(|s| s.commit)
        .map_err(TaskError::Start)
}

/// Commits the round's owned changes; returns the branch's tip when it differs from the
/// base, and records what the branch changes as a whole.
pub(super) async fn collect_round(
    shared: &Arc<Shared>,
    slot: Slot,
    record: &TaskRecord,
    unlayered: bool,
    message: String,
) -> Result<Option<Oid>, TaskError> {
    // Where plait last left the branch: an agent's own `git commit` must not smuggle
    // changes past collect.
    let expected = shared
        .record(slot)
        .commit
        .and_then(|c| Oid::from_str(&c).ok());
    let start = start_of(shared, slot.index)?;
    let expected = expected.unwrap_or(start);
    let collected = {
        let shared = shared.clone();
        let record = record.clone();
        tokio::task::spawn_blocking(move || {
            collect_worktree(&shared, slot, &record, expected, unlayered, message)
        })
        .await
        .map_err(|source| TaskError::Panicked {
            what: "collecting",
            source,
        })?
    };
    let collected = collected?;
    let base = start;
    let tip = collected.tip;
    shared.update(slot, |t| {
        t.commit = (tip != base).then(|| tip.to_string());
        t.changes = collected.changes;
        t.violations = collected.violations;
    });
    Ok((tip != base).then_some(tip))
}

/// What collecting a round leaves on the task's branch.
struct Collected {
    /// The branch's tip.
    tip: Oid,
    /// What the branch changes against the base.
    changes: Vec<FileChange>,
    /// Changes outside ownership, left uncommitted in the worktree.
    violations: Vec<FileChange>,
}

/// Collects the worktree onto the task's branch, which plait last left at `expected`
/// (blocking: run it off the async threads).
fn collect_worktree(
    shared: &Shared,
    slot: Slot,
    record: &TaskRecord,
    expected: Oid,
    unlayered: bool,
    message: String,
) -> Result<Collected, TaskError> {
    let repo = shared.context.repo()?;
    let task = shared.task(slot);
    check_git_link(&repo, &shared.run, &record.id, record)?;
    let refname = plait_core::refs::branch_ref(&record.branch);
    undo_agent_commits(&repo, &refname, expected)?;
    // A worktree filled in as the task's view holds every file of the base: one it does
    // not own that is gone is a deletion. (`unlayered`: the view is not an overlay, whose
    // worktree never holds the base's files, so a marker an agent wrote there means nothing.)
    let filled = unlayered && TaskDir::of_log(&record.log).view_filled().exists();
    let full = plait_plan::layout::Cone::full();
    let violations = TaskDir::of_log(&record.log).violations();
    let settings = CollectSettings {
        worktree: &record.worktree,
        branch: &record.branch,
        owns: &task.owns,
        cone: if filled { &full } else { &task.layout.cone },
        holds: &|path| task.checks_out(path) || (filled && !task.owns.matches(path)),
        message,
        violations_diff: Some(&violations),
    };
    let outcome = collect::collect(&repo, &settings)?;
    let tip = repo.refname_to_id(&plait_core::refs::branch_ref(&record.branch))?;
    let changes = branch_changes(&repo, start_of(shared, slot.index)?, tip)?;
    Ok(Collected {
        tip,
        changes,
        violations: outcome.violations,
    })
}

/// Checks the worktree's `.git` link to its git data: one the agent replaced is put back,
/// and is an error (nothing is collected).
fn check_git_link(
    repo: &git2::Repository,
    run: &str,
    task: &str,
    record: &TaskRecord,
) -> Result<(), TaskError> {
    let link = record.worktree.join(".git");
    let restored =
        workspace::restore_link(repo, &workspace::admin_name(run, task), &record.worktree)
            .map_err(io_at(&link))?;
    if restored {
        return Err(TaskError::LinkReplaced { link });
    }
    Ok(())
}

/// Moves the branch `refname` back to `expected` if the agent committed on it.
fn undo_agent_commits(
    repo: &git2::Repository,
    refname: &str,
    expected: Oid,
) -> Result<(), TaskError> {
    let tip = repo.refname_to_id(refname)?;
    if tip != expected {
        // Its commits' files are still in the worktree; collect judges them there.
        repo.reference_matching(
            refname,
            expected,
            true,
            tip,
            "plait: undo a commit the agent made",
        )?;
    }
    Ok(())
}

/// What a branch changes against the base, path by path.
pub(super) fn branch_changes(
    repo: &git2::Repository,
    base: Oid,
    tip: Oid,
) -> Result<Vec<FileChange>, git2::Error> {
    let base_tree = repo.find_commit(base)?.tree()?;
    let tip_tree = repo.find_commit(tip)?.tree()?;
    let changes = tree_changes(repo, &base_tree, &tip_tree)?;
    Ok(changes
        .into_iter()
        .map(|(path, entry)| {
            let kind = match entry {
                None => ChangeKind::Deleted,
                Some(_) if base_tree.get_path(std::path::Path::new(&path)).is_ok() => {
                    ChangeKind::Modified
                }
                Some(_) => ChangeKind::Added,
            };
            FileChange { path, kind }
        })
        .collect())
}
