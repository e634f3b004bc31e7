//! Stage 8: land. Moves the user's branch to the run's merged result — only when the run
//! finished with a clean merge (or `partial` asks for the clean subset). A fast-forward when
//! the branch has not moved since the base; otherwise a merge commit after a clean
//! three-way merge against it. When the branch is checked out, git itself updates that
//! worktree (`merge --ff-only`), and uncommitted changes in paths the landing would change
//! stop it first. Never forced, never a rewrite of history. The gate is a list of typed
//! `Blocker`s, which `report` puts into words.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use crate::merge::{self, MergeError};
use plait_core::git::tree_changes;
use plait_core::git::{run_git, signatures, GitCliError};
use plait_core::refs::branch_ref;
use plait_core::state::Conflict;
use plait_core::state::{
    now_ms, CulpritSet, LandRecord, RunPhase, RunState, TaskRecord, TaskState, Verdict,
};

/// Set for the git that `plait land` runs to move a branch: the installed hooks know the
/// gate was already applied.
pub const LANDING_VAR: &str = "PLAIT_LANDING";

/// Why plait could not land (a refusal is not an error: it is the outcome).
#[derive(Debug, thiserror::Error)]
pub enum LandError {
    /// The target branch does not exist.
    #[error("branch `{branch}` does not exist; name an existing local branch with --into")]
    NoBranch {
        /// The target branch's name.
        branch: String,
    },
    /// Merging the target's new commits with the run's result failed.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// The git CLI failed.
    #[error(transparent)]
    Cli(#[from] GitCliError),
    /// A git operation failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// Why a landing was refused.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// The run is not finished, was cleaned, or needs attention.
    Gate(Vec<Blocker>),
    /// The target moved on and its changes conflict with the run's.
    Conflicts(Vec<Conflict>),
    /// The target is checked out with uncommitted changes the landing would overwrite.
    Dirty {
        /// The worktree that has the target checked out.
        worktree: PathBuf,
        /// The changed paths the landing would overwrite.
        paths: Vec<String>,
    },
}

/// How a landing ended.
#[derive(Debug, Clone)]
pub enum LandOutcome {
    /// The target branch was advanced to the merged result.
    Landed(LandRecord),
    /// The target already holds the merged result.
    AlreadyLanded {
        /// The target branch.
        branch: String,
    },
    /// Nothing was landed, for this reason.
    Refused(Refusal),
}

/// What to land where.
pub struct LandSettings<'a> {
    /// A directory of the repository.
    pub workdir: &'a Path,
    /// The branch to land on.
    pub into: &'a str,
    /// Land the merged branch even though some tasks failed, violated or conflicted.
    pub partial: bool,
}

/// One reason a run may not land, or needs a person before it can; `report::blocker_line`
/// says it in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// Tasks in one kind of trouble.
    Tasks {
        /// The kind of trouble.
        trouble: Trouble,
        /// The tasks in it.
        tasks: Vec<String>,
    },
    /// The run was interrupted.
    Interrupted,
    /// This many tasks never reached a final state.
    Unfinished(usize),
    /// The merged checks that failed, by command.
    MergedChecksFailed(Vec<String>),
    /// Task checks that fail on the base already, by command (`[checks] base = "ignore"`
    /// lets them be).
    BaseChecksFailed(Vec<String>),
    /// Groups with changes their supervisor did not approve, with the reason.
    GroupsHeld(Vec<(String, &'static str)>),
    /// Conflicts in the merge, and the tasks they left out.
    Conflicts {
        /// How many paths conflicted.
        count: usize,
        /// The tasks the conflicts left out of the merge.
        excluded: Vec<String>,
    },
    /// The run has not finished.
    NotFinished,
    /// The run was cleaned: its branches are gone.
    Cleaned,
    /// The run has no merged result.
    NoMerge,
    /// With `--partial`: one failing merged check.
    MergedCheckFailed(String),
    /// A task branch that moved since the run committed to it (`plait check`).
    Moved {
        /// The branch.
        branch: String,
    },
    /// Branches checked outside a run that conflicts kept out (`plait check --branches`).
    LeftOutByConflicts(Vec<String>),
    /// Tasks left out of the merge because what they started from is not in it as they
    /// took it, each with why ([`waiting_cause`]).
    Waiting(Vec<(String, WaitingCause)>),
    /// Sets of tasks that break the merged checks, held out of the merge by the culprit
    /// search.
    Culprits(Vec<CulpritSet>),
}

/// The kinds of trouble a task can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trouble {
    /// The task failed.
    Failed,
    /// The task changed files it does not own.
    Violations,
    /// The task was interrupted.
    Interrupted,
    /// The task was stopped by a budget.
    Stopped,
    /// The task's reviewer did not approve it.
    NotApproved,
    /// The task's reviewer, or a person, rejected it.
    Rejected,
    /// Never started: a task it comes after did not end well (`after`).
    Blocked,
    /// Ended done without changing any file it owns, though its agent was asked for a
    /// change (`TaskRecord::unchanged`); a person's acceptance clears it.
    Unchanged,
}

impl Trouble {
    /// Every kind, in the order the gate lists them.
    pub(crate) const ALL: [Trouble; 8] = [
        Trouble::Failed,
        Trouble::Violations,
        Trouble::Interrupted,
        Trouble::Stopped,
        Trouble::NotApproved,
        Trouble::Rejected,
        Trouble::Blocked,
        Trouble::Unchanged,
    ];

    /// Whether task `t` is in this trouble (before a person's rejection, which clears
    /// every trouble: see [`troubles`]).
    fn applies(self, t: &TaskRecord) -> bool {
        match self {
            Trouble::Failed => t.state == TaskState::Failed,
            Trouble::Violations => !t.violations.is_empty() && !t.decided(Verdict::Approve),
            Trouble::Interrupted => t.state == TaskState::Interrupted,
            Trouble::Stopped => t.state == TaskState::Stopped,
            Trouble::NotApproved => {
                t.state == TaskState::Done && t.verdict() == Some(Verdict::RequestChanges)
            }
            Trouble::Rejected => t.verdict() == Some(Verdict::Reject),
            Trouble::Blocked => t.state == TaskState::Blocked,
            Trouble::Unchanged => t.unchanged() && !t.decided(Verdict::Approve),
        }
    }
}

/// The troubles of task `t` that hold up its run's landing, as [`blockers`] counts them:
/// none for a task a person rejected, which was decided away.
pub fn troubles(t: &TaskRecord) -> Vec<Trouble> {
    if t.decided(Verdict::Reject) {
        return Vec::new();
    }
    Trouble::ALL
        .into_iter()
        .filter(|trouble| trouble.applies(t))
        .collect()
}

/// What needs a person in `state`: failed, violating, interrupted, stopped, unapproved or
/// rejected tasks, an interrupted or unfinished run, failing merged checks, held groups,
/// conflicts. Empty: the run is all good. A task a person rejected needs nobody: it was
/// decided away, and the rest lands without it; one a person accepted with its violations
/// is in the merge as it is.
pub fn blockers(state: &RunState) -> Vec<Blocker> {
    let mut out = Vec::new();
    let troubled: Vec<(&str, Vec<Trouble>)> = state
        .tasks
        .iter()
        .map(|t| (t.id.as_str(), troubles(t)))
        .filter(|(_, troubles)| !troubles.is_empty())
        .collect();
    for trouble in Trouble::ALL {
        let tasks: Vec<String> = troubled
            .iter()
            .filter(|(_, troubles)| troubles.contains(&trouble))
            .map(|(id, _)| id.to_string())
            .collect();
        if !tasks.is_empty() {
            out.push(Blocker::Tasks { trouble, tasks });
        }
    }
    if state.phase == RunPhase::Interrupted {
        out.push(Blocker::Interrupted);
    }
    let unfinished = state
        .tasks
        .iter()
        .filter(|t| !t.state.is_final() && t.state != TaskState::Interrupted)
        .count();
    if unfinished > 0 && matches!(state.phase, RunPhase::Finished | RunPhase::Interrupted) {
        out.push(Blocker::Unfinished(unfinished));
    }
    let failing: Vec<String> = failing_merged(state).collect();
    if !failing.is_empty() {
        out.push(Blocker::MergedChecksFailed(failing));
    }
    if !state.base_checks_ignored {
        // Red is red: a task's check that failed as it does on the base keeps the run from
        // landing, unless the same command passed on the merged result.
        let green_merged = |command: &str| {
            state
                .merged_checks
                .iter()
                .any(|m| m.command == command && m.passed)
        };
        let mut red: Vec<String> = Vec::new();
        for c in state.tasks.iter().flat_map(|t| &t.checks) {
            if !c.passed && c.as_on_base && !red.contains(&c.command) && !green_merged(&c.command) {
                red.push(c.command.clone());
            }
        }
        if !red.is_empty() {
            out.push(Blocker::BaseChecksFailed(red));
        }
    }
    let held: Vec<(String, &'static str)> = state
        .groups
        .iter()
        .filter(|g| state.merge.is_some() && !g.goes_up())
        .filter(|g| g.merge.as_ref().is_some_and(|m| !m.included.is_empty()))
        .map(|g| {
            (
                g.id.clone(),
                g.verdict().map_or("not reviewed", Verdict::as_str),
            )
        })
        .collect();
    if !held.is_empty() {
        out.push(Blocker::GroupsHeld(held));
    }
    if let Some(culprits) = state.culprits.as_ref().filter(|c| !c.sets.is_empty()) {
        out.push(Blocker::Culprits(culprits.sets.clone()));
    }
    if let Some(merge) = &state.merge {
        if !merge.waiting.is_empty() {
            let causes = merge
                .waiting
                .iter()
                .map(|id| {
                    let cause = state
                        .task(id)
                        .map_or(WaitingCause::default(), |t| waiting_cause(state, t));
                    (id.clone(), cause)
                })
                .collect();
            out.push(Blocker::Waiting(causes));
        }
        if !merge.conflicts.is_empty() {
            out.push(Blocker::Conflicts {
                count: merge.conflicts.len(),
                excluded: merge.excluded.clone(),
            });
        }
    }
    out
}

/// The merged checks that keep the run from landing, each named by its command (and, for
/// one that fails on the base too, saying how). Every failing one does, but that `[checks]
/// base = "ignore"` lets one be that fails exactly as on the base: the run made it no worse.
fn failing_merged(state: &RunState) -> impl Iterator<Item = String> + '_ {
    state
        .merged_checks
        .iter()
        .filter(|c| !(c.passed || (c.as_on_base && state.base_checks_ignored)))
        .map(|c| {
            if c.as_on_base {
                format!(
                    "{} (fails as it does on the base; [checks] base = \"ignore\" lets it be)",
                    c.command
                )
            } else if c.at_base {
                format!(
                    "{} (fails on the base too, but otherwise: the merged work made it worse)",
                    c.command
                )
            } else {
                c.command.clone()
            }
        })
}

/// The gate: what keeps this run from landing.
pub fn gate(state: &RunState, partial: bool) -> Vec<Blocker> {
    let mut why = Vec::new();
    if state.phase != RunPhase::Finished {
        why.push(Blocker::NotFinished);
    }
    if state.cleaned {
        why.push(Blocker::Cleaned);
    }
    if state.merge.is_none() {
        why.push(Blocker::NoMerge);
    }
    if partial {
        // The merged branch holds only the clean tasks; it must still pass its checks.
        for named in failing_merged(state) {
            why.push(Blocker::MergedCheckFailed(named));
        }
    } else {
        why.extend(blockers(state));
    }
    why
}

/// The landing that holds the run's merge as it is now: the last one, when it landed the
/// merge commit the run has and no decision since changed which tasks belong in it. The
/// page and `plait status` say "landed" from this alone; a landing of an earlier merge is
/// history, and the gate speaks for the merge the run has now.
pub fn current_landing(state: &RunState) -> Option<&LandRecord> {
    let last = state.landed.last()?;
    let merge = state.merge.as_ref()?;
    let same = last.merged().is_none_or(|m| m == merge.commit);
    (same && !merge::run::merge_is_stale(state)).then_some(last)
}

/// Lands the run's merged result into `settings.into`, recording it in `state`: the gate,
/// the target, the commit to move it to, then the move itself.
pub fn land(
    repo: &Repository,
    state: &mut RunState,
    settings: &LandSettings<'_>,
) -> Result<LandOutcome, LandError> {
    let why = gate(state, settings.partial);
    if !why.is_empty() {
        return Ok(LandOutcome::Refused(Refusal::Gate(why)));
    }
    let Some(merged) = state.merge.as_ref() else {
        return Ok(LandOutcome::Refused(Refusal::Gate(vec![Blocker::NoMerge])));
    };
    let merged = Oid::from_str(&merged.commit)?;
    let refname = branch_ref(settings.into);
    let target = repo
        .find_reference(&refname)
        .and_then(|r| r.peel_to_commit())
        .map_err(|_| LandError::NoBranch {
            branch: settings.into.to_string(),
        })?
        .id();
    if target == merged || repo.graph_descendant_of(target, merged)? {
        return Ok(LandOutcome::AlreadyLanded {
            branch: settings.into.to_string(),
        });
    }
    let fast_forward = repo.graph_descendant_of(merged, target)?;
    let new = if fast_forward {
        merged
    } else {
        match merge_commit(repo, state, settings, target, merged)? {
            Ok(commit) => commit,
            Err(conflicts) => return Ok(LandOutcome::Refused(Refusal::Conflicts(conflicts))),
        }
    };
    if let Some(refused) = move_branch(repo, state, settings, target, new)? {
        return Ok(LandOutcome::Refused(refused));
    }
    let record = LandRecord {
        branch: settings.into.to_string(),
        from: target.to_string(),
        to: new.to_string(),
        fast_forward,
        at: now_ms(),
        merged: Some(merged.to_string()),
        // Partial only when the full gate would have refused it.
        partial: settings.partial && !gate(state, false).is_empty(),
    };
    state.landed.push(record.clone());
    Ok(LandOutcome::Landed(record))
}

/// The merge commit of the target (which moved on since the base) and the run's result,
/// after a clean three-way merge; or the conflicts, with the tasks that touched each path.
fn merge_commit(
    repo: &Repository,
    state: &RunState,
    settings: &LandSettings<'_>,
    target: Oid,
    merged: Oid,
) -> Result<Result<Oid, Vec<Conflict>>, LandError> {
    let result = merge::merge_tree(
        settings.workdir,
        None,
        &branch_ref(settings.into),
        &branch_ref(&state.merged_branch()),
    )?;
    if !result.conflicts.is_empty() {
        let conflicts = result
            .conflicts
            .into_iter()
            .map(|raw| {
                let tasks = state
                    .tasks
                    .iter()
                    .filter(|t| t.changes.iter().any(|c| c.path == raw.path))
                    .map(|t| t.id.clone())
                    .collect();
                Conflict {
                    tasks,
                    ..raw.into_conflict()
                }
            })
            .collect();
        return Ok(Err(conflicts));
    }
    let tree = repo.find_tree(result.tree)?;
    let who = signatures(repo)?;
    let message = format!(
        "plait: land run {} into {}\n\nPlait-Run: {}\n",
        state.id, settings.into, state.id
    );
    let parents = [&repo.find_commit(target)?, &repo.find_commit(merged)?];
    Ok(Ok(repo.commit(
        None,
        &who.author,
        &who.committer,
        &message,
        &tree,
        &parents,
    )?))
}

/// Moves the target from `target` to `new`: through `git merge --ff-only` in the worktree
/// that has it checked out (refused when uncommitted changes there touch what changes), or
/// as a compare-and-swap of the ref. `Some` is the refusal.
fn move_branch(
    repo: &Repository,
    state: &RunState,
    settings: &LandSettings<'_>,
    target: Oid,
    new: Oid,
) -> Result<Option<Refusal>, LandError> {
    let refname = branch_ref(settings.into);
    let Some(worktree) = checked_out_at(settings.workdir, &refname)? else {
        repo.reference_matching(
            &refname,
            new,
            true,
            target,
            &format!("plait: land run {}", state.id),
        )?;
        return Ok(None);
    };
    let changing: BTreeSet<String> = tree_changes(
        repo,
        &repo.find_commit(target)?.tree()?,
        &repo.find_commit(new)?.tree()?,
    )?
    .into_keys()
    .collect();
    let blocked: Vec<String> = dirty_paths(&worktree)?
        .into_iter()
        .filter(|p| {
            changing.contains(p)
                || changing
                    .iter()
                    .any(|c| c.starts_with(&format!("{p}/")) || p.starts_with(&format!("{c}/")))
        })
        .collect();
    if !blocked.is_empty() {
        return Ok(Some(Refusal::Dirty {
            worktree,
            paths: blocked,
        }));
    }
    // The gate was applied above; the hooks need not judge this move again.
    plait_core::git::run_git_with(
        &worktree,
        &["merge", "--ff-only", "--no-edit", "-q", &new.to_string()],
        &[],
        &[(LANDING_VAR, "1")],
    )?;
    Ok(None)
}

/// The worktree that has `refname` checked out, if any.
fn checked_out_at(workdir: &Path, refname: &str) -> Result<Option<PathBuf>, GitCliError> {
    let out = run_git(workdir, &["worktree", "list", "--porcelain", "-z"], &[])?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut current: Option<PathBuf> = None;
    for field in text.split('\0') {
        if let Some(path) = field.strip_prefix("worktree ") {
            current = Some(PathBuf::from(path));
        } else if field.strip_prefix("branch ") == Some(refname) {
            return Ok(current);
        }
    }
    Ok(None)
}

/// Paths with uncommitted changes (staged, unstaged or untracked) in a worktree.
fn dirty_paths(worktree: &Path) -> Result<Vec<String>, GitCliError> {
    let out = run_git(
        worktree,
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
        &[],
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut paths = Vec::new();
    let mut fields = text.split('\0');
    while let Some(entry) = fields.next() {
        if entry.len() < 4 {
            continue;
        }
        let (status, path) = entry.split_at(3);
        paths.push(path.to_string());
        if status.starts_with('R') || status.starts_with('C') {
            if let Some(orig) = fields.next() {
                paths.push(orig.to_string());
            }
        }
    }
    Ok(paths)
}

/// Why a task with `after` was left out of the merge (`waiting`): the tasks it started from
/// that are not in the merge, and those in it at other commits than it started from
/// (sent back or moved by hand since).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitingCause {
    pub(crate) missing: Vec<String>,
    pub(crate) moved: Vec<String>,
}

impl std::fmt::Display for WaitingCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A few names, then how many more: a task after a hundred says so in one line.
        let names = |list: &[String]| match list {
            [] | [_] | [_, _] | [_, _, _] => list.join(", "),
            _ => format!("{} and {} more", list[..3].join(", "), list.len() - 3),
        };
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(format!("{} not in it", names(&self.missing)));
        }
        if !self.moved.is_empty() {
            parts.push(format!(
                "{} moved since it started from {}",
                names(&self.moved),
                if self.moved.len() == 1 { "it" } else { "them" }
            ));
        }
        if parts.is_empty() {
            parts.push("what it started from is not in it as it took it".to_string());
        }
        f.write_str(&parts.join("; "))
    }
}

/// Why task `task` is `waiting` in `state`'s merge (see [`WaitingCause`]).
pub fn waiting_cause(state: &RunState, task: &TaskRecord) -> WaitingCause {
    let included: Vec<&str> = state
        .merge
        .iter()
        .flat_map(|m| m.included.iter().map(String::as_str))
        .collect();
    let mut cause = WaitingCause::default();
    for (up, commit) in &task.start_from {
        if !included.contains(&up.as_str()) {
            cause.missing.push(up.clone());
        } else if state.task(up).and_then(|u| u.commit.as_ref()) != Some(commit) {
            cause.moved.push(up.clone());
        }
    }
    // The tasks it names in `after` when they are among them, not what they came after.
    let direct = |list: &mut Vec<String>| {
        if list.iter().any(|t| task.after.contains(t)) {
            list.retain(|t| task.after.contains(t));
        }
    };
    direct(&mut cause.missing);
    direct(&mut cause.moved);
    cause
}
