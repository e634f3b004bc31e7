//! Checking runs against a branch: the use case behind `plait check` and the git hooks.
//! A run is checked as `plait land` would find it: task branches moved by hand are
//! collected first, and the run is merged again when that or a person's decisions made its
//! merge stale; then come `check`'s steps (ownership, the merge with the target, the
//! merged checks, the gate), and what was learned is saved in the run's record. A hook
//! judges what a move of a branch brings in against every run it concerns and combines
//! their verdicts; `plait check --plan` checks branches made outside a run against a plan.

use std::collections::HashMap;
use std::path::Path;

use git2::Oid;

use crate::check::{self, work, CheckReport, MergeInProgress, TaskBranch};
use plait_core::git;
use plait_core::globs::Globs;
use plait_core::refs::branch_ref;
use plait_core::state::{Culprits, RunDir, RunPhase, RunState, StateError, Store};
use plait_plan::{CheckSettings, PlanFile};
use plait_run::orchestrator::{self, RunError};
use plait_stages::bisect::Step;

use super::OpsError;
use plait_stages::context::{Context, Repo};

/// Where checks run: the context, a handle on its repository lent for one case, and its
/// runs.
pub(super) struct Checker<'a> {
    pub(super) ctx: &'a Context,
    pub(super) repo: Repo<'a>,
    pub(super) store: &'a Store,
}

impl<'a> Checker<'a> {
    /// The checker of the context's repository.
    pub(super) fn of(ctx: &'a Context) -> Result<Checker<'a>, OpsError> {
        Ok(Checker {
            ctx,
            repo: ctx.repo()?,
            store: ctx.store(),
        })
    }

    /// The environment the plans' checks resolve their variables from.
    fn env(&self) -> impl Fn(&str) -> Option<String> + Sync + '_ {
        |name| self.ctx.var(name)
    }
}

/// What `plait check` is asked.
pub enum CheckRequest<'a> {
    /// A run's branches, as landing would find them, against `into` (default: the branch
    /// HEAD is on); with `bisect`, the culprit search when the merged checks fail, each of
    /// its steps told to `step` (the run is not changed).
    Run {
        /// The run's id or a prefix of it.
        run: &'a str,
        /// The target branch.
        into: Option<&'a str>,
        /// Whether to search for the culprits when the merged checks fail.
        bisect: bool,
        /// Told each step of the search.
        step: &'a (dyn Fn(Step) + Send + Sync),
    },
    /// Branches made outside a run, against a plan.
    Branches(BranchesRequest<'a>),
}

/// What a check found.
pub struct Checked {
    /// The findings.
    pub report: CheckReport,
    /// The culprit search's finding, when it was asked for and the merged checks failed.
    pub culprits: Option<Culprits>,
}

/// Checks what `request` names (see the module's doc); a run's record keeps what was
/// learned.
pub async fn check(ctx: &Context, request: CheckRequest<'_>) -> Result<Checked, OpsError> {
    let checker = Checker::of(ctx)?;
    let target = |into: Option<&str>| match into {
        Some(into) => Ok(into.to_string()),
        None => git::current_branch(&checker.repo).ok_or(OpsError::Detached),
    };
    match request {
        CheckRequest::Run {
            run,
            into,
            bisect,
            step,
        } => {
            let report = checker.run(run, &target(into)?).await?;
            let culprits = if bisect {
                checker.bisect(&report.run, &report, step).await?
            } else {
                None
            };
            Ok(Checked { report, culprits })
        }
        CheckRequest::Branches(request) => {
            let into = target(request.into)?;
            let report = checker.branches(&request, &into).await?;
            Ok(Checked {
                report,
                culprits: None,
            })
        }
    }
}

/// Branches made outside a run, to check against a plan.
pub struct BranchesRequest<'a> {
    /// The plan whose ownership and checks apply.
    pub plan: &'a Path,
    /// Each branch as `[TASK=]BRANCH`; without a task, the branch's last path component
    /// names it.
    pub branches: &'a [String],
    /// The commit the branches started from (default: the plan's base, else their merge
    /// base with the target).
    pub base: Option<&'a str>,
    /// The branch the result would land on (default: the branch HEAD is on).
    pub into: Option<&'a str>,
}

/// One run's case for a hook to judge.
#[derive(Debug, Clone)]
pub enum Case {
    /// The run's branches, as `plait check RUN --into INTO` checks them (pre-push).
    Run {
        /// The run.
        run: String,
        /// The branch pushed to.
        into: String,
    },
    /// A merge into `into`, or another move of it, that brings in the run's work.
    Merge {
        /// The run.
        run: String,
        /// The branch merged into.
        into: String,
        /// The merge and what it brings in.
        merging: MergeInProgress,
    },
}

impl Case {
    /// The run the case is about.
    pub(super) fn run(&self) -> &str {
        match self {
            Case::Run { run, .. } | Case::Merge { run, .. } => run,
        }
    }
}

/// How the runs concerned judged a move or a push, combined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Judged {
    /// How many runs judged it.
    pub runs: usize,
    /// Whether one of them refused it.
    pub refused: bool,
}

/// One ref update of a transaction that moves a branch outside `plait/` from one commit
/// to another.
#[derive(Debug, Clone)]
pub struct BranchUpdate {
    /// The branch.
    pub branch: String,
    /// The commit it moves from.
    pub old: Oid,
    /// The commit it moves to.
    pub new: Oid,
}

/// What becomes of the checkout when a branch update is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackOut {
    /// git leaves an operation in progress (`merge`, `cherry-pick`, `revert`, `rebase`,
    /// `am`), which its `--abort` backs out.
    Abort(&'static str),
    /// The checkout was put back with the branch, uncommitted changes kept.
    PutBack,
    /// The index still holds what was to be committed.
    IndexKept,
    /// Nothing to do: the branch is not checked out here, or its checkout is not at the
    /// refused commit.
    Untouched,
}

/// A finished run's record, with its plan's checks and owned globs.
struct Finished {
    run: String,
    state: RunState,
    checks: CheckSettings,
    owns: HashMap<String, Globs>,
}

impl Checker<'_> {
    /// Checks run `run` against branch `into` (see the module's doc) and saves what it
    /// learned. Refused unless the run has finished.
    pub(super) async fn run(&self, run: &str, into: &str) -> Result<CheckReport, OpsError> {
        let Finished {
            run,
            mut state,
            checks,
            owns,
        } = self.finished(run)?;
        let report = against(
            self.ctx,
            self.store.run(&run),
            &mut state,
            into,
            &checks,
            &owns,
        )
        .await
        .map_err(|source| OpsError::Check {
            what: format!("cannot check run {run}"),
            source,
        })?;
        self.store.save(&state)?;
        Ok(report)
    }

    /// Checks the merge `merging` into branch `into` against run `run`: only what that
    /// merge brings in (`check::check_merge`). The run is not changed.
    pub(super) async fn merge(
        &self,
        run: &str,
        into: &str,
        merging: &MergeInProgress,
    ) -> Result<CheckReport, OpsError> {
        let finished = self.finished(run)?;
        check::check_merge(
            self.ctx.clone(),
            self.store.run(&finished.run),
            &finished.state,
            into,
            merging,
            &finished.checks,
            &finished.owns,
        )
        .await
        .map_err(|source| OpsError::Check {
            what: format!("cannot check the merge against run {}", finished.run),
            source,
        })
    }

    /// Checks branches made outside a run against a plan (`plait check --plan`), in a
    /// scratch directory under the store that is removed again.
    pub(super) async fn branches(
        &self,
        request: &BranchesRequest<'_>,
        into: &str,
    ) -> Result<CheckReport, OpsError> {
        let plan = plait_plan::load(request.plan)?;
        if request.branches.is_empty() {
            return Err(OpsError::NoBranches);
        }
        let branches = self.task_branches(&plan, request)?;
        let base = self.base_of(&plan, request, into, &branches)?;
        let scratch = self.store.run_dir(&format!("check-{}", std::process::id()));
        let report = check::check_branches(
            self.ctx.clone(),
            scratch.clone(),
            base,
            &branches,
            into,
            &plait_plan::checks_of(&plan, &self.env(), self.ctx.workdir()),
            &check::owns_of(&plan),
        )
        .await;
        let _ = std::fs::remove_dir_all(&scratch);
        report.map_err(|source| OpsError::Check {
            what: "cannot check the branches".to_string(),
            source,
        })
    }

    /// The culprit search over run `run`'s merged tasks for the merged checks that failed
    /// in `report` (its check), without changing the run; `None` when none failed. `step`
    /// hears each step.
    pub(super) async fn bisect(
        &self,
        run: &str,
        report: &CheckReport,
        step: &(dyn Fn(Step) + Send + Sync),
    ) -> Result<Option<Culprits>, OpsError> {
        let failing: Vec<String> = report
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.command.clone())
            .collect();
        if failing.is_empty() {
            return Ok(None);
        }
        let finished = self.finished(run)?;
        check::bisect_run(
            self.ctx.clone(),
            self.store.run(&finished.run),
            &finished.state,
            &finished.checks,
            &failing,
            step,
        )
        .await
        .map(Some)
        .map_err(|source| OpsError::Check {
            what: format!("cannot search run {} for culprits", finished.run),
            source,
        })
    }

    /// Judges each case in turn, skipping runs that have no record here, and combines the
    /// verdicts; `heard` hears each report as soon as it is made.
    pub(super) async fn judge(
        &self,
        cases: Vec<Case>,
        heard: &dyn Fn(&CheckReport),
    ) -> Result<Judged, OpsError> {
        let mut judged = Judged::default();
        for case in cases {
            if !self.has_record(case.run())? {
                continue;
            }
            let report = match &case {
                Case::Run { run, into } => self.run(run, into).await?,
                Case::Merge { run, into, merging } => self.merge(run, into, merging).await?,
            };
            heard(&report);
            judged.runs += 1;
            judged.refused |= !report.pass;
        }
        Ok(judged)
    }

    /// The runs a move of branch `into` concerns, each a case to judge as a merge: those
    /// whose tasks' work `merging`'s tree brings in by content (as against its target's),
    /// with those tasks as the ones it brings in, and those with a branch at one of `tips`.
    pub(super) fn concerned(
        &self,
        into: &str,
        merging: &MergeInProgress,
        tips: &[Oid],
    ) -> Result<Vec<Case>, OpsError> {
        let repo = &*self.repo;
        let trees = repo
            .find_commit(merging.target)
            .and_then(|c| c.tree())
            .and_then(|old| Ok((old, repo.find_tree(merging.tree)?)));
        let Ok((old, new)) = trees else {
            return Ok(Vec::new());
        };
        let found = work::concerned(repo, self.store, &old, &new, tips)?;
        Ok(found
            .into_iter()
            .map(|(run, brings)| Case::Merge {
                run,
                into: into.to_string(),
                merging: MergeInProgress {
                    brings,
                    ..merging.clone()
                },
            })
            .collect())
    }

    /// Judges one branch update (a commit, a merge, a fast-forward, a squash merge's
    /// commit, a cherry-pick, a rebase, `git am`, a reset, `update-ref`) as a merge of what
    /// it brings in: the new tip's tree, the old tip as the target, against the runs whose
    /// tasks' work that tree brings in and those with a branch at the new tip (a
    /// fast-forward) or at a commit it merges. `None` when no run refuses it; otherwise what
    /// became of the checkout, `reflog_action` being how git named the operation
    /// (`GIT_REFLOG_ACTION`).
    pub(super) async fn judge_update(
        &self,
        update: &BranchUpdate,
        reflog_action: &str,
        heard: &dyn Fn(&CheckReport),
    ) -> Result<Option<BackOut>, OpsError> {
        let Ok(new) = self.repo.find_commit(update.new) else {
            return Ok(None);
        };
        let forward = self
            .repo
            .graph_descendant_of(update.new, update.old)
            .unwrap_or(false);
        // A fast-forward's new tip, and the commits a merge commit merges in.
        let tips: Vec<Oid> = forward
            .then_some(update.new)
            .into_iter()
            .chain(new.parent_ids().skip(1))
            .collect();
        let merging = MergeInProgress {
            tree: new.tree_id(),
            target: update.old,
            heads: vec![update.new],
            brings: Vec::new(),
        };
        let cases = self.concerned(&update.branch, &merging, &tips)?;
        if cases.is_empty() || !self.judge(cases, heard).await?.refused {
            return Ok(None);
        }
        let plaits = !work::WorkIndex::load(&self.repo, self.store)?
            .runs_at(&[update.new])
            .is_empty();
        Ok(Some(self.back_out(update, forward, plaits, reflog_action)))
    }

    /// The cases pre-push judges: the run of each plait branch pushed, checked into the
    /// run's target (the branch HEAD is on for a run based on HEAD). `pushes` are the
    /// local ref and commit of each line git gives the hook.
    pub(super) fn pushed<'p>(
        &self,
        pushes: impl IntoIterator<Item = (&'p str, &'p str)>,
    ) -> Vec<Case> {
        let mut targets: Vec<(String, String)> = Vec::new();
        for (local, sha) in pushes {
            let Some(rest) = local.strip_prefix(plait_core::refs::PLAIT_REFS) else {
                continue;
            };
            if sha.chars().all(|c| c == '0') {
                continue;
            }
            let Some(run) = rest.split('/').next() else {
                continue;
            };
            if let Ok(state) = self.store.load(run) {
                let into = if state.base_name == "HEAD" {
                    git::current_branch(&self.repo).unwrap_or_default()
                } else {
                    state.base_name.clone()
                };
                targets.push((run.to_string(), into));
            }
        }
        targets.sort();
        targets.dedup();
        targets
            .into_iter()
            .map(|(run, into)| Case::Run { run, into })
            .collect()
    }

    /// Run `run`'s record (found by its id or a prefix of it), which must be finished, with
    /// its plan's checks and owned globs.
    fn finished(&self, run: &str) -> Result<Finished, OpsError> {
        let run = self.store.find(Some(run))?;
        let state = self.store.load(&run)?;
        if state.phase != RunPhase::Finished {
            return Err(OpsError::NotFinished { run });
        }
        let plan = plait_plan::load(&self.store.run(&run).plan())?;
        Ok(Finished {
            checks: plait_plan::checks_of(&plan, &self.env(), self.ctx.workdir()),
            owns: check::owns_of(&plan),
            run,
            state,
        })
    }

    /// Whether run `run` has a record here: a branch of a run whose record is gone is not
    /// judged, but a record that cannot be read stops the hook (the gate cannot judge it).
    fn has_record(&self, run: &str) -> Result<bool, OpsError> {
        match self.store.load(run) {
            Ok(_) => Ok(true),
            Err(StateError::UnknownRun { .. }) => Ok(false),
            Err(StateError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The branches of `request` with the task each must keep to, each checked against
    /// the plan's tasks and the repository's branches.
    fn task_branches(
        &self,
        plan: &PlanFile,
        request: &BranchesRequest<'_>,
    ) -> Result<Vec<TaskBranch>, OpsError> {
        let ids: Vec<&str> = plan.tasks.iter().map(|t| t.id.as_str()).collect();
        let mut branches = Vec::new();
        for spec in request.branches {
            let (task, branch) = match spec.split_once('=') {
                Some((t, b)) => (t.to_string(), b.to_string()),
                None => (
                    spec.rsplit('/').next().unwrap_or(spec).to_string(),
                    spec.clone(),
                ),
            };
            if !ids.contains(&task.as_str()) {
                return Err(OpsError::UnknownTask {
                    spec: spec.clone(),
                    plan: request.plan.to_path_buf(),
                    task,
                });
            }
            if self.repo.find_reference(&branch_ref(&branch)).is_err() {
                return Err(OpsError::NoBranch {
                    spec: spec.clone(),
                    branch,
                });
            }
            branches.push(TaskBranch { task, branch });
        }
        Ok(branches)
    }

    /// The commit `branches` started from: the request's base, else the plan's, else their
    /// merge base with the target.
    fn base_of(
        &self,
        plan: &PlanFile,
        request: &BranchesRequest<'_>,
        into: &str,
        branches: &[TaskBranch],
    ) -> Result<Oid, OpsError> {
        let repo = &*self.repo;
        if let Some(rev) = request.base.or(plan.base.as_deref()) {
            return repo
                .revparse_single(rev)
                .and_then(|o| o.peel_to_commit())
                .map(|c| c.id())
                .map_err(|_| OpsError::BadBase {
                    rev: rev.to_string(),
                });
        }
        let mut tips =
            vec![repo
                .refname_to_id(&branch_ref(into))
                .map_err(|_| OpsError::NoTarget {
                    into: into.to_string(),
                })?];
        for b in branches {
            tips.extend(repo.refname_to_id(&branch_ref(&b.branch)).ok());
        }
        repo.merge_base_many(&tips)
            .map_err(|_| OpsError::NoSharedHistory)
    }

    /// What to do about the checkout after a refused update. An operation git leaves in
    /// progress (a merge, cherry-pick, revert, rebase, `git am`) is backed out by its
    /// `--abort`. A checkout git moved onto a commit that is not the user's own (a
    /// fast-forward merge, or a commit a plait branch points at, as a reset onto a task's
    /// commit) is put back, uncommitted changes kept. Otherwise (a commit of the user's)
    /// the index keeps what was to be committed.
    fn back_out(
        &self,
        update: &BranchUpdate,
        forward: bool,
        plaits: bool,
        reflog_action: &str,
    ) -> BackOut {
        use git2::RepositoryState as S;
        let repo = &*self.repo;
        let op = match repo.state() {
            S::Merge => Some("merge"),
            S::CherryPick | S::CherryPickSequence => Some("cherry-pick"),
            S::Revert | S::RevertSequence => Some("revert"),
            S::Rebase | S::RebaseInteractive | S::RebaseMerge => Some("rebase"),
            S::ApplyMailbox | S::ApplyMailboxOrRebase => Some("am"),
            S::Clean | S::Bisect => None,
        };
        if let Some(op) = op {
            return BackOut::Abort(op);
        }
        if git::current_branch(repo).as_deref() != Some(update.branch.as_str()) {
            return BackOut::Untouched;
        }
        let workdir = git::workdir(repo);
        let index = git::index_tree(&workdir, None).ok();
        let new_tree = repo.find_commit(update.new).map(|c| c.tree_id()).ok();
        if index.is_none() || index != new_tree {
            return BackOut::Untouched;
        }
        let fast_forward =
            forward && (reflog_action.starts_with("merge") || reflog_action.starts_with("pull"));
        if fast_forward || plaits {
            // git updated the checkout before the ref; the ref stays, so the checkout goes
            // back too (as a checkout from the new tip to the old would, local changes kept).
            let (new, old) = (update.new.to_string(), update.old.to_string());
            let undone = git::run_git(&workdir, &["read-tree", "-m", "-u", &new, &old], &[]);
            if undone.is_ok() {
                return BackOut::PutBack;
            }
        }
        BackOut::IndexKept
    }
}

/// Checks run `state` against branch `into` as `plait land` would find it: the branches
/// moved by hand collected (one that cannot be stays moved, and the report says so), the
/// run merged again if that or decisions made its merge stale, then `check::check_run`.
async fn against(
    context: &Context,
    run_dir: RunDir,
    state: &mut RunState,
    into: &str,
    checks: &CheckSettings,
    owns: &HashMap<String, Globs>,
) -> Result<CheckReport, RunError> {
    let adoption =
        orchestrator::adopt::adopt_moved(context, run_dir.clone(), state, checks, owns).await?;
    let branches = check::weigh_branches(context, state, owns).await?;
    if !adoption.adopted.is_empty() || plait_stages::merge::run::merge_is_stale(state) {
        orchestrator::remerge(context.clone(), run_dir.clone(), state, checks).await?;
    }
    check::check_run(context.clone(), run_dir, state, into, checks, branches).await
}
