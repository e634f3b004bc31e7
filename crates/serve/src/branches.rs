//! `GET /api/runs/{run}/branches`: what git says of a run's branches now, which its record
//! cannot: each task's added and removed lines against the run's base, the task branches
//! a person moved since the run committed to them, those the run's target already has
//! although the run did not land (merged by hand), and how far the target moved since the
//! base. The line counts are kept by (base, tip) commit, so only a branch that moved is
//! diffed again; the first look at a run of 10,000 tasks diffs them all, on every core,
//! while its page shows "…".

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::http::HeaderMap;
use axum::response::Response;
use git2::{Oid, Repository};
use serde::Serialize;

use super::cache::{self, Body};
use super::{blocking, ApiError, App};
use plait_core::git;
use plait_core::state::RunState;
use plait_core::sync::Locked as _;

/// How many of the target's new commits are looked through for task commits merged by
/// hand; past that, none is said to be.
const TARGET_WALK: usize = 100_000;

/// Added and removed lines by (base, tip), for every run shown since the server started.
#[derive(Default)]
pub(super) struct LineCounts {
    counts: Mutex<HashMap<(Oid, Oid), [usize; 2]>>,
    /// Held while counting, so two pages opening one run diff its branches once.
    counting: Mutex<()>,
}

impl LineCounts {
    fn known(&self, base: Oid, tip: Oid) -> Option<[usize; 2]> {
        let counts = self.counts.locked();
        counts.get(&(base, tip)).copied()
    }

    /// Counts the lines of every tip in `tips` not known yet, on up to as many threads as
    /// there are cores, each with its own repository handle. A tip with the paths it
    /// changes (the record's) is counted from those files alone; one without (a branch
    /// moved by hand), by diffing the trees, which reads every directory of the base.
    fn count(&self, workdir: &Path, base: Oid, tips: &[(Oid, Option<Vec<&str>>)]) {
        let _counting = self.counting.locked();
        let missing: Vec<&(Oid, Option<Vec<&str>>)> = {
            let counts = self.counts.locked();
            let mut seen = HashSet::new();
            tips.iter()
                .filter(|(t, _)| !counts.contains_key(&(base, *t)) && seen.insert(*t))
                .collect()
        };
        if missing.is_empty() {
            return;
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(missing.len().div_ceil(64))
            .max(1);
        let chunk = missing.len().div_ceil(threads);
        std::thread::scope(|scope| {
            for part in missing.chunks(chunk) {
                scope.spawn(move || {
                    let Ok(repo) = git::open(workdir) else {
                        return;
                    };
                    let Ok(base_tree) = repo.find_commit(base).and_then(|c| c.tree()) else {
                        return;
                    };
                    let mut done = Vec::with_capacity(part.len());
                    for (tip, paths) in part {
                        let counted = match paths {
                            Some(paths) => lines_of(&repo, &base_tree, *tip, paths),
                            None => lines(&repo, &base_tree, *tip),
                        };
                        if let Ok(lines) = counted {
                            done.push(((base, *tip), lines));
                        }
                    }
                    let mut counts = self.counts.locked();
                    counts.extend(done);
                });
            }
        });
    }
}

/// The lines commit `tip` adds and removes against `base_tree` (binary files count none).
fn lines(
    repo: &Repository,
    base_tree: &git2::Tree<'_>,
    tip: Oid,
) -> Result<[usize; 2], git2::Error> {
    let tree = repo.find_commit(tip)?.tree()?;
    let mut options = git2::DiffOptions::new();
    options.context_lines(0);
    let diff = repo.diff_tree_to_tree(Some(base_tree), Some(&tree), Some(&mut options))?;
    let stats = diff.stats()?;
    Ok([stats.insertions(), stats.deletions()])
}

/// [`lines`] of `tip`, which changes only `paths`: those files' blobs diffed one by one.
fn lines_of(
    repo: &Repository,
    base_tree: &git2::Tree<'_>,
    tip: Oid,
    paths: &[&str],
) -> Result<[usize; 2], git2::Error> {
    let tree = repo.find_commit(tip)?.tree()?;
    let blob = |tree: &git2::Tree<'_>, path: &str| -> Result<Option<git2::Blob<'_>>, git2::Error> {
        match tree.get_path(Path::new(path)) {
            Ok(entry) if entry.kind() == Some(git2::ObjectType::Blob) => {
                repo.find_blob(entry.id()).map(Some)
            }
            Ok(_) => Ok(None),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    };
    let mut options = git2::DiffOptions::new();
    options.context_lines(0);
    let [mut added, mut removed] = [0, 0];
    for path in paths {
        let (old, new) = (blob(base_tree, path)?, blob(&tree, path)?);
        if old.as_ref().map(|b| b.id()) == new.as_ref().map(|b| b.id()) {
            continue;
        }
        let content =
            |b: &Option<git2::Blob<'_>>| b.as_ref().map_or(&[][..], |b| b.content()).to_vec();
        let (old, new) = (content(&old), content(&new));
        let path = Some(Path::new(path));
        let patch = git2::Patch::from_buffers(&old, path, &new, path, Some(&mut options))?;
        let (_, plus, minus) = patch.line_stats()?;
        added += plus;
        removed += minus;
    }
    Ok([added, removed])
}

/// What git says of a run's branches.
#[derive(Debug, Serialize)]
pub(super) struct Branches {
    pub base: String,
    /// The branch the run would land into, as it is now.
    pub target: Option<Target>,
    /// Each task's added and removed lines against the base (none for a task whose
    /// commit git cannot read).
    pub lines: HashMap<String, [usize; 2]>,
    /// Task branches a person moved since the run committed to them: their tips now.
    pub moved: HashMap<String, String>,
    /// Tasks whose commit the target has although the run did not land it.
    pub merged: Vec<String>,
}

/// The run's target branch.
#[derive(Debug, Serialize)]
pub(super) struct Target {
    pub branch: String,
    pub tip: String,
    /// Commits on it since the run's base.
    pub ahead: usize,
    /// Commits of the base it no longer has (it was reset or rewritten).
    pub behind: usize,
}

/// `GET /api/runs/{run}/branches`.
pub(super) async fn branches(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    blocking(move || {
        let (repo, store) = cache::store(&app)?;
        let loaded = cache::loaded(&app, store, &run)?;
        let facts = of(&app.lines, &repo, &loaded.state)?;
        let body = serde_json::to_vec(&facts).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(Body::new(body).respond(&headers))
    })
    .await
}

/// What git says of `state`'s branches in `repo`, with the line counts of `counts`
/// (counting those not known yet).
pub(super) fn of(
    counts: &LineCounts,
    repo: &Repository,
    state: &RunState,
) -> Result<Branches, ApiError> {
    let base = Oid::from_str(&state.base)
        .map_err(|e| ApiError::internal(format!("the run's base: {e}")))?;
    let refs = task_refs(repo, &state.id);
    let tips: Vec<(&str, Option<Oid>, Option<Oid>)> = state
        .tasks
        .iter()
        .map(|t| {
            let committed = t.commit.as_deref().and_then(|c| Oid::from_str(c).ok());
            let now = refs.get(&plait_core::refs::branch_ref(&t.branch)).copied();
            (t.id.as_str(), committed, now.or(committed))
        })
        .collect();
    // A tip the run made changes what its record says; any other, the trees tell.
    let wanted: Vec<(Oid, Option<Vec<&str>>)> = state
        .tasks
        .iter()
        .zip(&tips)
        .filter_map(|(t, &(_, committed, tip))| {
            let tip = tip?;
            let paths = (Some(tip) == committed)
                .then(|| t.changes.iter().map(|c| c.path.as_str()).collect());
            Some((tip, paths))
        })
        .collect();
    let workdir = repo.workdir().unwrap_or_else(|| repo.path()).to_path_buf();
    counts.count(&workdir, base, &wanted);
    let mut out = Branches {
        base: state.base.clone(),
        target: None,
        lines: HashMap::with_capacity(tips.len()),
        moved: HashMap::new(),
        merged: Vec::new(),
    };
    for &(id, committed, tip) in &tips {
        match tip {
            Some(tip) if tip != base => {
                if let Some(lines) = counts.known(base, tip) {
                    out.lines.insert(id.to_string(), lines);
                }
            }
            _ => {
                out.lines.insert(id.to_string(), [0, 0]);
            }
        }
        // A branch that moved off the commit the run made (or, with none, off the base).
        if let Some(tip) = tip {
            if tip != committed.unwrap_or(base) {
                out.moved.insert(id.to_string(), tip.to_string());
            }
        }
    }
    let target = repo
        .find_reference(&plait_core::refs::branch_ref(&state.base_name))
        .ok()
        .and_then(|r| r.peel_to_commit().ok())
        .map(|c| c.id());
    if let Some(tip) = target {
        let (ahead, behind) = repo.graph_ahead_behind(tip, base).unwrap_or((0, 0));
        if ahead > 0 && state.landed.is_empty() {
            let new = commits_between(repo, tip, base);
            out.merged = tips
                .iter()
                .filter(|(_, _, t)| t.is_some_and(|t| t != base && new.contains(&t)))
                .map(|(id, _, _)| id.to_string())
                .collect();
        }
        out.target = Some(Target {
            branch: state.base_name.clone(),
            tip: tip.to_string(),
            ahead,
            behind,
        });
    }
    Ok(out)
}

/// What git says of one task's branch (for its page).
#[derive(Debug, Serialize)]
pub(super) struct TaskBranch {
    /// Its tip now (the run's commit when the branch is gone).
    pub tip: Option<String>,
    /// Moved by hand since the run committed to it.
    pub moved: bool,
    /// The target has its commit although the run did not land.
    pub merged: bool,
    /// The target's name.
    pub target: String,
}

/// What git says of `task`'s branch in `repo`.
pub(super) fn of_task(
    repo: &Repository,
    state: &RunState,
    task: &plait_core::state::TaskRecord,
) -> TaskBranch {
    let base = Oid::from_str(&state.base).ok();
    let committed = task.commit.as_deref().and_then(|c| Oid::from_str(c).ok());
    let tip = repo
        .refname_to_id(&plait_core::refs::branch_ref(&task.branch))
        .ok()
        .or(committed);
    let target = repo
        .find_reference(&plait_core::refs::branch_ref(&state.base_name))
        .ok()
        .and_then(|r| r.peel_to_commit().ok())
        .map(|c| c.id());
    let merged = match (tip, target) {
        (Some(tip), Some(target)) if state.landed.is_empty() && Some(tip) != base => {
            tip == target || repo.graph_descendant_of(target, tip).unwrap_or(false)
        }
        _ => false,
    };
    TaskBranch {
        tip: tip.map(|t| t.to_string()),
        moved: tip.is_some() && tip != committed.or(base),
        merged,
        target: state.base_name.clone(),
    }
}

/// The tips of run `run`'s branches (`refs/heads/plait/<run>/…`), by ref name.
fn task_refs(repo: &Repository, run: &str) -> HashMap<String, Oid> {
    let Ok(refs) = repo.references_glob(&plait_core::refs::run_glob(run)) else {
        return HashMap::new();
    };
    refs.filter_map(Result::ok)
        .filter_map(|r| {
            let oid = r.resolve().ok()?.target()?;
            Some((r.name().ok()?.to_string(), oid))
        })
        .collect()
}

/// The commits `tip` has and `base` has not, at most [`TARGET_WALK`] of them.
fn commits_between(repo: &Repository, tip: Oid, base: Oid) -> HashSet<Oid> {
    let Ok(mut walk) = repo.revwalk() else {
        return HashSet::new();
    };
    if walk.push(tip).is_err() || walk.hide(base).is_err() {
        return HashSet::new();
    }
    walk.filter_map(Result::ok).take(TARGET_WALK).collect()
}
