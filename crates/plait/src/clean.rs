//! Removing what a run created: its worktrees and branches. Nothing unsaved is lost: a
//! worktree holding uncommitted or uncollected work, or a branch whose commits reached no
//! other branch, stops the whole clean unless forced; every deleted branch is named with
//! its tip so it can be restored.

use std::path::Path;

use git2::{BranchType, Oid, Repository};

use plait_core::state::RunDir;
use plait_core::state::{RunState, TaskRecord, TaskState, Verdict};
use plait_stages::collect;
use plait_trees::workspace::{self, WorkspaceError};

/// Why a clean could not finish.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// The run is still going; cleaning it would pull its worktrees from under it.
    #[error("run {run} is still in progress; wait for it to finish")]
    InProgress {
        /// The run.
        run: String,
    },
    /// A worktree could not be removed.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// A git operation failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// Something that would be lost.
#[derive(Debug, Clone)]
pub struct AtRisk {
    /// The task or branch concerned.
    pub what: String,
    /// Why it would be lost.
    pub reason: String,
}

/// A branch that was deleted.
#[derive(Debug, Clone)]
pub struct DeletedBranch {
    /// The branch's name.
    pub name: String,
    /// The commit it pointed at.
    pub tip: String,
    /// Whether its commits are on a branch outside the run.
    pub landed: bool,
}

/// What a clean did, or why it did nothing.
#[derive(Debug, Clone, Default)]
pub struct CleanOutcome {
    /// Non-empty when the clean was refused; nothing was removed then.
    pub at_risk: Vec<AtRisk>,
    /// The worktrees removed.
    pub removed_worktrees: Vec<String>,
    /// The branches deleted.
    pub deleted_branches: Vec<DeletedBranch>,
    /// Branches left in place because a worktree of the user's has them checked out.
    pub kept_branches: Vec<AtRisk>,
}

/// Removes the run's worktrees and branches; `force` accepts losing work. Nothing is
/// removed while something is at risk and `force` is not given.
pub fn clean(
    repo: &Repository,
    state: &mut RunState,
    run_dir: &RunDir,
    live: bool,
    force: bool,
) -> Result<CleanOutcome, CleanError> {
    if live {
        return Err(CleanError::InProgress {
            run: state.id.clone(),
        });
    }
    // Agents a killed plait left behind would write into worktrees being removed.
    let worktrees: Vec<std::path::PathBuf> = state
        .tasks
        .iter()
        .flat_map(TaskRecord::with_attempts)
        .map(|t| t.worktree.clone())
        .collect();
    plait_sandbox::shell::stop_leftovers(&state.id, &worktrees);
    let mut outcome = CleanOutcome {
        at_risk: unsaved_work(state),
        ..CleanOutcome::default()
    };
    let branches = weigh_branches(repo, state, &mut outcome)?;
    if !force && !outcome.at_risk.is_empty() {
        return Ok(outcome);
    }
    remove_worktrees(repo, state, run_dir, &mut outcome)?;
    for (name, tip, landed) in branches {
        // The reference itself: `Branch::delete` asks every worktree of the repository
        // whether it has the branch checked out, which with thousands of worktrees makes
        // a large run's clean quadratic; `checked_out` answered that once.
        repo.find_reference(&plait_core::refs::branch_ref(&name))?
            .delete()?;
        outcome.deleted_branches.push(DeletedBranch {
            name,
            tip: tip.to_string(),
            landed,
        });
    }
    state.cleaned = true;
    Ok(outcome)
}

/// The tasks whose worktrees hold changes that no commit has, or cannot be read.
fn unsaved_work(state: &RunState) -> Vec<AtRisk> {
    let mut at_risk = Vec::new();
    for task in state
        .tasks
        .iter()
        .flat_map(TaskRecord::with_attempts)
        .filter(|t| t.worktree.exists())
    {
        match collect::scan(&task.worktree, &collect::Held::Index) {
            Ok(scan) if !scan.changes.is_empty() => {
                let paths: Vec<&str> = scan.changes.iter().map(|c| c.path.as_str()).collect();
                let what = if task.state == TaskState::Done {
                    "uncommitted changes"
                } else {
                    "uncollected work"
                };
                at_risk.push(AtRisk {
                    what: format!("task {} ({})", task.id, task.worktree.display()),
                    reason: format!("{what}: {}", list(&paths)),
                });
            }
            Ok(_) => {}
            Err(e) => at_risk.push(AtRisk {
                what: format!("task {}", task.id),
                reason: format!("its worktree cannot be read: {e}"),
            }),
        }
    }
    at_risk
}

/// The run's branches that may be deleted, with their tips and whether their work is on
/// a branch outside the run; those holding work nowhere else go into `outcome.at_risk`,
/// and those checked out in a worktree of the user's into `outcome.kept_branches`.
fn weigh_branches(
    repo: &Repository,
    state: &RunState,
    outcome: &mut CleanOutcome,
) -> Result<Vec<(String, Oid, bool)>, CleanError> {
    let base = Oid::from_str(&state.base)?;
    let prefix = plait_core::refs::run_prefix(&state.id);
    let elsewhere = reachable_elsewhere(repo, base, &prefix)?;
    let checked_out = checked_out_branches(repo)?;
    let mut branches = Vec::new();
    for name in state
        .tasks
        .iter()
        .flat_map(TaskRecord::with_attempts)
        .map(|t| t.branch.clone())
        .chain(state.groups.iter().map(|g| g.branch.clone()))
        .chain([state.merged_branch()])
    {
        let Ok(branch) = repo.find_branch(&name, BranchType::Local) else {
            continue;
        };
        let Some(tip) = branch.get().target() else {
            continue;
        };
        if let Some(place) = checked_out.get(&name) {
            // Never deleted, not even with --force.
            outcome.kept_branches.push(AtRisk {
                what: format!("branch {name}"),
                reason: format!(
                    "it is checked out at {}; switch that worktree to another branch, then clean again",
                    place.display()
                ),
            });
            continue;
        }
        let landed = tip == base || elsewhere.contains(&tip);
        // A person rejected that work: deleting its branch loses nothing they kept (the
        // tip is printed, to restore it).
        let rejected = state.tasks.iter().any(|t| {
            t.branch == name && t.decided(Verdict::Reject) && t.commit == Some(tip.to_string())
        });
        // An attempt of a task that picked one: the chosen one's work is on the task's
        // branch (weighed itself), the others were passed over.
        let passed_over = state
            .tasks
            .iter()
            .any(|t| t.pick.is_some() && t.attempts.iter().any(|a| a.branch == name));
        let rejected = rejected || passed_over;
        if !landed && !rejected {
            outcome.at_risk.push(AtRisk {
                what: format!("branch {name}"),
                reason: format!(
                    "holds work ({}) that is on no other branch",
                    plait_core::git::short(&tip.to_string())
                ),
            });
        }
        branches.push((name, tip, landed));
    }
    Ok(branches)
}

/// Removes the tasks' worktrees (and their administrative directories), the worktree root
/// when it is empty, and check checkouts a crashed run left behind.
fn remove_worktrees(
    repo: &Repository,
    state: &RunState,
    run_dir: &RunDir,
    outcome: &mut CleanOutcome,
) -> Result<(), CleanError> {
    for task in state.tasks.iter().flat_map(TaskRecord::with_attempts) {
        let admin = workspace::admin_name(&state.id, &task.id);
        if task.worktree.exists() || workspace::admin_dir(repo, &admin).exists() {
            workspace::remove(repo, &admin, &task.worktree)?;
            outcome.removed_worktrees.push(task.id.clone());
        }
    }
    remove_empty_dir(&state.worktree_root);
    let checks = run_dir.checks();
    if let Ok(entries) = std::fs::read_dir(&checks) {
        for entry in entries.flatten() {
            plait_stages::review::checkout::remove(&plait_core::git::workdir(repo), &entry.path());
        }
    }
    remove_empty_dir(&checks);
    Ok(())
}

/// The branches checked out in the main worktree and in the worktrees plait did not make,
/// with where.
fn checked_out_branches(
    repo: &Repository,
) -> Result<std::collections::HashMap<String, std::path::PathBuf>, git2::Error> {
    let mut out = std::collections::HashMap::new();
    let mut note = |r: &Repository| {
        if let Ok(head) = r.head() {
            if let (true, Ok(name)) = (head.is_branch(), head.shorthand()) {
                let place = r.workdir().unwrap_or(r.path()).to_path_buf();
                out.insert(name.to_string(), place);
            }
        }
    };
    note(repo);
    let names = repo.worktrees()?;
    for name in names.iter() {
        let Some(name) = name?.filter(|n| !n.starts_with("plait-")) else {
            continue;
        };
        if let Ok(r) = repo
            .find_worktree(name)
            .and_then(|w| Repository::open_from_worktree(&w))
        {
            note(&r);
        }
    }
    Ok(out)
}

/// The commits since `base` that local branches not under `prefix` contain: one walk
/// from all their tips, so checking every branch of a large run stays linear.
fn reachable_elsewhere(
    repo: &Repository,
    base: Oid,
    prefix: &str,
) -> Result<std::collections::HashSet<Oid>, git2::Error> {
    let mut walk = repo.revwalk()?;
    let mut any = false;
    for branch in repo.branches(Some(BranchType::Local))? {
        let (branch, _) = branch?;
        let Some(name) = branch.name()? else { continue };
        if name.starts_with(prefix) {
            continue;
        }
        if let Some(tip) = branch.get().target() {
            walk.push(tip)?;
            any = true;
        }
    }
    if !any {
        return Ok(Default::default());
    }
    walk.hide(base)?;
    walk.collect()
}

fn list(paths: &[&str]) -> String {
    let shown: Vec<&str> = paths.iter().take(5).copied().collect();
    if paths.len() > 5 {
        format!("{} and {} more", shown.join(", "), paths.len() - 5)
    } else {
        shown.join(", ")
    }
}

fn remove_empty_dir(dir: &Path) {
    let _ = std::fs::remove_dir(dir);
}
