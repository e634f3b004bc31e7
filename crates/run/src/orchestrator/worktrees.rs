//! A task's worktree made ready for its rounds: its branch and sparse worktree created at
//! its start (`prepare`), what an interrupted preparation left removed, and the work pushed
//! for it elsewhere put back on its branch and in its worktree (`lay_out_from`). Above
//! [`super::collecting`] (whose [`TaskError`] and branch changes it uses), below the round
//! loop (`rounds`) and the task's entry points (`task`).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use git2::Oid;

use super::collecting::{branch_changes, io_at, start_of, TaskError};
use super::shared::{fail_task, Slot};
use super::Shared;
use plait_core::state::TaskDir;
use plait_core::state::{now_ms, ChangeKind, FileChange, TaskRecord, TaskState};
use plait_core::sync::Locked as _;
use plait_trees::workspace::{self, WorkspaceError, WorktreeSpec};

/// Marks the task preparing and creates its worktree; false when that failed (the failure
/// is recorded).
pub(super) async fn prepare(shared: &Arc<Shared>, slot: Slot, record: &TaskRecord) -> bool {
    // A task released by what it comes after started when it began making its start.
    let released = shared.released.locked().remove(&slot.index);
    shared.update(slot, |t| {
        t.state = TaskState::Preparing;
        t.started_at = Some(released.unwrap_or_else(now_ms));
        t.error = None;
    });
    let started = Instant::now();
    let prepared = {
        let shared = shared.clone();
        let record = record.clone();
        tokio::task::spawn_blocking(move || prepare_worktree(&shared, slot, &record)).await
    };
    shared.clock.task_step("worktree", started);
    let reason = match prepared {
        Ok(Ok(())) => return true,
        Ok(Err(e)) => format!("could not create the worktree: {e}"),
        Err(e) => format!("worktree creation panicked: {e}"),
    };
    fail_task(shared, slot, reason, None);
    false
}

/// Task `index`'s worktree at the base, then `commit` (work pushed for it, fetched
/// already) on its branch and its files in the worktree; the task's record, or `None` when
/// that failed (the failure is recorded).
pub(super) async fn lay_out_from(
    shared: &Arc<Shared>,
    index: usize,
    commit: Oid,
) -> Option<TaskRecord> {
    let record = shared.record(index);
    if !prepare(shared, index.into(), &record).await {
        return None;
    }
    let restored = {
        let (shared, record) = (shared.clone(), record.clone());
        tokio::task::spawn_blocking(move || restore(&shared, index, &record, commit)).await
    };
    let reason = match restored {
        Ok(Ok(changes)) => {
            shared.update(index, |t| {
                t.commit = Some(commit.to_string());
                t.changes = changes;
            });
            return Some(record);
        }
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    };
    fail_task(
        shared,
        index,
        format!("could not restore the work pushed for it before: {reason}"),
        None,
    );
    None
}

/// Puts `commit` (the task's work so far) on the task's branch and its files in the
/// worktree, which holds the base; what the branch changes against the base.
fn restore(
    shared: &Shared,
    index: usize,
    record: &TaskRecord,
    commit: Oid,
) -> Result<Vec<FileChange>, TaskError> {
    let repo = shared.context.repo()?;
    let task = &shared.plan.tasks[index];
    let start = start_of(shared, index)?;
    let changes = branch_changes(&repo, start, commit)?;
    let tree = repo.find_commit(commit).and_then(|c| c.tree())?;
    // The worktree is the task's: every file goes beneath a handle of it, replacing what
    // stands at its name, never written through it.
    let files =
        plait_core::beneath::Tree::open(&record.worktree).map_err(io_at(&record.worktree))?;
    for change in &changes {
        if !task.checks_out(&change.path) {
            continue;
        }
        let path = record.worktree.join(&change.path);
        if change.kind == ChangeKind::Deleted {
            let _ = files.remove(&change.path);
            continue;
        }
        let entry = tree.get_path(Path::new(&change.path))?;
        let blob = repo.find_blob(entry.id())?;
        if entry.filemode() == 0o120000 {
            files
                .symlink(blob.content(), &change.path)
                .map_err(io_at(&path))?;
            continue;
        }
        files
            .write(&change.path, blob.content(), entry.filemode() == 0o100755)
            .map_err(io_at(&path))?;
    }
    let refname = plait_core::refs::branch_ref(&record.branch);
    repo.reference(&refname, commit, true, "plait: take the task over")?;
    Ok(changes)
}

/// Removes what an interrupted preparation left: the worktree, its administrative
/// directory, and the branch while it still points at the base.
pub(super) fn discard_partial(shared: &Shared, record: &TaskRecord) {
    let Ok(repo) = shared.context.repo() else {
        return;
    };
    let name = workspace::admin_name(&shared.run, &record.id);
    let _ = workspace::remove(&repo, &name, &record.worktree);
    let at_base = repo
        .refname_to_id(&plait_core::refs::branch_ref(&record.branch))
        .is_ok_and(|tip| tip.to_string() == record.start_or(&shared.plan.base.to_string()));
    if at_base {
        if let Ok(mut branch) = repo.find_reference(&plait_core::refs::branch_ref(&record.branch)) {
            let _ = branch.delete();
        }
    }
}

/// Creates the task's branch and its worktree at the base, holding the files it checks out.
fn prepare_worktree(shared: &Shared, slot: Slot, record: &TaskRecord) -> Result<(), TaskError> {
    let repo = shared.context.repo()?;
    let admin_name = workspace::admin_name(&shared.run, &record.id);
    let start = shared.start(slot.index).map_err(TaskError::Start)?;
    if start.commit != shared.plan.base {
        // What it owns where it starts, for `$PLAIT_OWNED` and `{owned}`.
        let list = TaskDir::of_log(&record.log).owned_list();
        let mut text = start.owned.join("\n");
        text.push('\n');
        std::fs::write(&list, text).map_err(io_at(&list))?;
        let owned = start.owned.len();
        shared.update(slot, |t| t.owned = owned);
    }
    let spec = WorktreeSpec {
        branch: &record.branch,
        admin_name: &admin_name,
        path: &record.worktree,
        base: start.commit,
        files: &start.files,
        layout: &start.layout,
    };
    match workspace::create(&repo, &spec) {
        // A plait killed after it made the branch (or the worktree) and before the record
        // said so left them: its own, made for this task of this run, with no work on them.
        Err(WorkspaceError::BranchExists { .. } | WorkspaceError::PathExists { .. }) => {
            discard_partial(shared, record);
            Ok(workspace::create(&repo, &spec)?)
        }
        made => Ok(made?),
    }
}
