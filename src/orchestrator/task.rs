//! One task's way through the pipeline: its worktree, then rounds of agent → collect →
//! checks and review, until the branch is approved, rejected, or out of rounds. Each step
//! changes the task's state through `Shared::update`; a failure ends the task, never the
//! run.

use std::path::Path;
use std::sync::Arc;

use git2::Oid;

use super::Shared;
use crate::agent::{self, AgentOutcome, AgentReport, TaskContext};
use crate::collect::{self, CollectSettings};
use crate::git;
use crate::git::tree_changes;
use crate::plan::Reviewer;
use crate::report::{self, DiffStyle};
use crate::review;
use crate::review::checks::CheckJob;
use crate::review::reviewer::{self, ReviewInput};
use crate::sandbox::Sandbox;
use crate::state::{
    now_ms, ChangeKind, FileChange, SandboxRecord, TaskRecord, TaskState, Usage, Verdict,
};
use crate::workspace::{self, WorktreeSpec};

pub(super) async fn run_task(shared: &Arc<Shared>, index: usize) {
    if shared.cancel.is_cancelled() {
        return;
    }
    let record = shared.record(index);
    // A resumed run: finished tasks stay as they are; interrupted ones go on from their
    // worktrees; one caught while preparing starts again.
    let resumed = match record.state {
        s if s.is_final() => return,
        TaskState::Pending => false,
        TaskState::Preparing => {
            discard_partial(shared, &record);
            false
        }
        _ => record.worktree.join(".git").exists(),
    };
    let fail = |reason: String, exit_code: Option<i32>| {
        shared.update(index, |t| {
            t.state = TaskState::Failed;
            t.error = Some(reason);
            t.exit_code = exit_code;
            t.finished_at = Some(now_ms());
        })
    };

    if !resumed {
        shared.update(index, |t| {
            t.state = TaskState::Preparing;
            t.started_at = Some(now_ms());
            t.error = None;
        });
        let prepared = {
            let shared = shared.clone();
            let record = record.clone();
            tokio::task::spawn_blocking(move || prepare_worktree(&shared, index, &record)).await
        };
        match prepared {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return fail(format!("could not create the worktree: {e}"), None),
            Err(e) => return fail(format!("worktree creation panicked: {e}"), None),
        }
    }

    let feedback = resumed.then(|| {
        "This task was interrupted. The worktree holds the work done so far (it is committed \
         on the task's branch); look at it and carry on from there."
            .to_string()
    });
    let limit = shared.plan.review.rounds;
    work(shared, index, &record, (record.rounds, limit), feedback).await;
}

/// Sends a finished task back to its worktree with `feedback` (a supervisor's request for
/// changes) for one more round and the review rounds that follow it.
pub(super) async fn rework(shared: &Arc<Shared>, index: usize, feedback: String) {
    if shared.cancel.is_cancelled() {
        return;
    }
    let record = shared.record(index);
    if !record.worktree.join(".git").exists() {
        return;
    }
    shared.update(index, |t| {
        t.finished_at = None;
        t.error = None;
    });
    let round = record.rounds + 1;
    let limit = round + shared.plan.review.rounds;
    work(shared, index, &record, (round, limit), Some(feedback)).await;
}

/// Rounds of agent → collect → checks and review, from the first of `(round, limit)` to at
/// most the second, until the task is done, rejected or failed.
async fn work(
    shared: &Arc<Shared>,
    index: usize,
    record: &TaskRecord,
    (mut round, limit): (u32, u32),
    mut feedback: Option<String>,
) {
    let task = &shared.plan.tasks[index];
    let fail = |reason: String, exit_code: Option<i32>| {
        shared.update(index, |t| {
            t.state = TaskState::Failed;
            t.error = Some(reason);
            t.exit_code = exit_code;
            t.finished_at = Some(now_ms());
        })
    };
    let finish = |state: TaskState| {
        shared.update(index, |t| {
            t.state = state;
            t.finished_at = Some(now_ms());
        })
    };
    let agent = agent::from_config(&task.agent, &shared.client, &shared.limiters);
    let reviewer = shared.plan.review.reviewer_for(task);
    // The agent's processes may write its worktree and the task's directory (logs, the
    // agent CLIs' own files), and nothing of any other task.
    let task_dir = record
        .log
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let sandbox = Arc::new(Sandbox::new(
        &task.sandbox,
        vec![record.worktree.clone(), task_dir.clone()],
    ));
    let mut confinement = Some(task.sandbox.confinement());
    let note_refused = |refused: Vec<String>| {
        if !refused.is_empty() {
            shared.update(index, |t| {
                if let Some(s) = &mut t.sandbox {
                    s.add_refused(&refused);
                }
            });
        }
    };
    loop {
        shared.update(index, |t| {
            t.state = TaskState::Running;
            t.rounds = round;
            // How this try of the task is confined (the refusals of earlier ones are kept).
            if let Some(confinement) = confinement.take() {
                let refused = t.sandbox.take().map(|s| s.refused).unwrap_or_default();
                let mut now = SandboxRecord::new(&confinement);
                now.add_refused(&refused);
                t.sandbox = Some(now);
            }
        });
        let context = context(shared, index, record, round, feedback.take(), &sandbox);
        let report = agent.run(&context).await;
        record_report(shared, index, &report);
        note_refused(sandbox.denials());
        if shared.cancel.is_cancelled() {
            // Keep what the agent wrote so far, committed but not merged.
            let message = format!(
                "plait({}): work in progress (interrupted)\n\nPlait-Run: {}\n",
                task.id, shared.run
            );
            let kept = collect_round(shared, index, record, message).await;
            return shared.update(index, |t| {
                t.state = TaskState::Interrupted;
                t.error = match kept {
                    Ok(_) => Some("interrupted".to_string()),
                    Err(e) => Some(format!("interrupted; its work could not be committed: {e}")),
                };
            });
        }
        match report.outcome {
            AgentOutcome::Finished => {}
            AgentOutcome::Failed { reason, exit_code } => {
                return fail(with_refused(reason, &sandbox.denials()), exit_code)
            }
            AgentOutcome::Stopped { reason } => {
                return shared.update(index, |t| {
                    t.state = TaskState::Stopped;
                    t.error = Some(reason);
                    t.finished_at = Some(now_ms());
                })
            }
        }

        shared.update(index, |t| t.state = TaskState::Collecting);
        let message = collect::commit_message(&shared.run, &task.id, &task.prompt);
        let tip = match collect_round(shared, index, record, message).await {
            Ok(tip) => tip,
            Err(e) => return fail(format!("could not collect the worktree: {e}"), None),
        };
        let Some(tip) = tip else {
            return finish(TaskState::Done);
        };
        if shared.plan.checks.task.is_empty() && matches!(reviewer, Reviewer::Off) {
            return finish(TaskState::Done);
        }

        shared.update(index, |t| t.state = TaskState::Reviewing);
        let checks = if shared.plan.checks.task.is_empty() {
            Vec::new()
        } else {
            let logs = record.log.with_file_name(format!("checks-{round}"));
            let job = CheckJob {
                commit: tip,
                commands: &shared.plan.checks.task,
                env: vec![
                    ("PLAIT_RUN", shared.run.clone()),
                    ("PLAIT_TASK", task.id.clone()),
                    ("PLAIT_BASE", shared.plan.base.to_string()),
                    ("PLAIT_COMMIT", tip.to_string()),
                ],
                logs: &logs,
                timeout: shared.plan.checks.timeout,
                sandbox: &task.sandbox,
            };
            match shared.checks.run(&job, &shared.cancel).await {
                Ok(results) => {
                    note_refused(results.iter().flat_map(|r| r.refused.clone()).collect());
                    results
                }
                Err(e) => return fail(format!("the task checks could not run: {e}"), None),
            }
        };
        let diff = diff(shared, tip).await;
        let input = ReviewInput {
            run: &shared.run,
            goal: &shared.plan.goal,
            task: &task.id,
            prompt: &task.prompt,
            owns: task.owns.patterns(),
            diff: &diff,
            checks: &checks,
            round,
            base: shared.plan.base.to_string(),
            commit: tip.to_string(),
            worktree: record.worktree.clone(),
            dir: task_dir.clone(),
            timeout: shared.plan.checks.timeout,
            budget: &shared.budget,
            sandbox: &task.sandbox,
        };
        let verdict = reviewer::review(
            &reviewer,
            &input,
            &shared.client,
            &shared.limiters,
            &shared.cancel,
        )
        .await;
        let next = review::feedback(&checks, verdict.as_ref());
        let rejected = verdict
            .as_ref()
            .is_some_and(|r| r.verdict == Verdict::Reject);
        let checks_pass = checks.iter().all(|c| c.passed);
        shared.update(index, |t| {
            t.checks = checks;
            if let Some(review) = verdict {
                if let Some(u) = &review.usage {
                    t.usage
                        .get_or_insert_with(|| Usage {
                            cost_usd: Some(0.0),
                            ..Usage::default()
                        })
                        .add(u);
                }
                t.review = Some(review);
            }
        });
        if shared.cancel.is_cancelled() {
            return fail("interrupted".to_string(), None);
        }
        if rejected {
            return finish(TaskState::Rejected);
        }
        match next {
            None => return finish(TaskState::Done),
            Some(text) if round < limit => {
                round += 1;
                feedback = Some(text);
            }
            Some(_) if !checks_pass => {
                return fail(
                    format!("its checks still fail after {round} round(s) of changes"),
                    None,
                )
            }
            // Out of rounds with changes still requested: done, but not approved.
            Some(_) => return finish(TaskState::Done),
        }
    }
}

/// A failure's reason, with the writes the sandbox refused the agent, which may be why.
fn with_refused(reason: String, refused: &[String]) -> String {
    if refused.is_empty() {
        return reason;
    }
    format!(
        "{reason}; the sandbox refused it: {} (if the tool needs that path, add it to [sandbox] writable)",
        refused.join(", ")
    )
}

fn context(
    shared: &Shared,
    index: usize,
    record: &TaskRecord,
    round: u32,
    feedback: Option<String>,
    sandbox: &Arc<Sandbox>,
) -> TaskContext {
    let task = &shared.plan.tasks[index];
    TaskContext {
        run: shared.run.clone(),
        task: task.id.clone(),
        goal: shared.plan.goal.clone(),
        prompt: task.prompt.clone(),
        base: shared.plan.base.to_string(),
        worktree: record.worktree.clone(),
        owned_list: record.log.with_file_name("owned.txt"),
        single_file: task.single_file().map(str::to_string),
        log: record.log.clone(),
        timeout: task.timeout,
        cancel: shared.cancel.clone(),
        repo: shared.repo.clone(),
        owns: task.owns.clone(),
        owned: task.owned.clone(),
        files: shared.plan.files.clone(),
        transcript: record.log.with_file_name("transcript.jsonl"),
        max_turns: task.max_turns,
        round,
        feedback,
        budget: shared.budget.clone(),
        token_budget: task.token_budget,
        sandbox: sandbox.clone(),
        plait_program: shared.plait_program.clone(),
    }
}

/// Adds a round's usage to the task's and keeps the agent's last words.
fn record_report(shared: &Shared, index: usize, report: &AgentReport) {
    if report.usage.is_none() && report.summary.is_none() {
        return;
    }
    shared.update(index, |t| {
        if let Some(u) = &report.usage {
            match &mut t.usage {
                Some(total) => total.add(u),
                None => t.usage = Some(u.clone()),
            }
        }
        if report.summary.is_some() {
            t.summary = report.summary.clone();
        }
    });
}

/// Commits the round's owned changes; returns the branch's tip when it differs from the
/// base, and records what the branch changes as a whole.
async fn collect_round(
    shared: &Arc<Shared>,
    index: usize,
    record: &TaskRecord,
    message: String,
) -> Result<Option<Oid>, String> {
    // Where plait last left the branch: an agent's own `git commit` must not smuggle
    // changes past collect.
    let expected = shared
        .record(index)
        .commit
        .and_then(|c| Oid::from_str(&c).ok())
        .unwrap_or(shared.plan.base);
    let collected = {
        let shared = shared.clone();
        let record = record.clone();
        tokio::task::spawn_blocking(move || -> Result<_, String> {
            let repo = git::open(&shared.repo).map_err(|e| e.to_string())?;
            let task = &shared.plan.tasks[index];
            let link = record.worktree.join(".git");
            let restored = workspace::restore_link(&repo, &workspace::admin_name(&shared.run, &task.id), &record.worktree)
                .map_err(|e| format!("cannot check {}: {e}", link.display()))?;
            if restored {
                return Err(format!(
                    "the agent replaced {}, plait's link to the worktree's git data; plait put it back and collected nothing",
                    link.display()
                ));
            }
            let refname = git::branch_ref(&record.branch);
            let tip = repo.refname_to_id(&refname).map_err(|e| e.to_string())?;
            if tip != expected {
                // Its commits' files are still in the worktree; collect judges them there.
                repo.reference_matching(
                    &refname,
                    expected,
                    true,
                    tip,
                    "plait: undo a commit the agent made",
                )
                .map_err(|e| e.to_string())?;
            }
            let settings = CollectSettings {
                worktree: &record.worktree,
                branch: &record.branch,
                owns: &task.owns,
                message,
            };
            let outcome = collect::collect(&repo, &settings).map_err(|e| e.to_string())?;
            let tip = repo
                .refname_to_id(&git::branch_ref(&record.branch))
                .map_err(|e| e.to_string())?;
            let changes =
                branch_changes(&repo, shared.plan.base, tip).map_err(|e| e.to_string())?;
            Ok((outcome, tip, changes))
        })
        .await
        .map_err(|e| format!("collecting panicked: {e}"))?
    };
    let (outcome, tip, changes) = collected?;
    let base = shared.plan.base;
    shared.update(index, |t| {
        t.commit = (tip != base).then(|| tip.to_string());
        t.changes = changes;
        t.violations = outcome.violations;
    });
    Ok((tip != base).then_some(tip))
}

/// What a branch changes against the base, path by path.
fn branch_changes(
    repo: &git2::Repository,
    base: Oid,
    tip: Oid,
) -> Result<Vec<FileChange>, git2::Error> {
    let base_tree = repo.find_commit(base)?.tree()?;
    let tip_tree = repo.find_commit(tip)?.tree()?;
    let changes = tree_changes(repo, &base_tree, &tip_tree)
        .map_err(|e| git2::Error::from_str(&e.to_string()))?;
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

async fn diff(shared: &Arc<Shared>, tip: Oid) -> String {
    let (repo_path, base) = (shared.repo.clone(), shared.plan.base);
    tokio::task::spawn_blocking(move || {
        let repo = git::open(&repo_path).map_err(|e| e.to_string())?;
        report::diff_text(&repo, base, tip, DiffStyle::default()).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|d| d)
    .unwrap_or_else(|e| format!("(the diff could not be made: {e})"))
}

/// Removes what an interrupted preparation left: the worktree, its administrative
/// directory, and the branch while it still points at the base.
fn discard_partial(shared: &Shared, record: &TaskRecord) {
    let Ok(repo) = git::open(&shared.repo) else {
        return;
    };
    let name = workspace::admin_name(&shared.run, &record.id);
    let _ = workspace::remove(&repo, &name, &record.worktree);
    let at_base = repo
        .refname_to_id(&git::branch_ref(&record.branch))
        .is_ok_and(|tip| tip == shared.plan.base);
    if at_base {
        if let Ok(mut branch) = repo.find_reference(&git::branch_ref(&record.branch)) {
            let _ = branch.delete();
        }
    }
}

fn prepare_worktree(shared: &Shared, index: usize, record: &TaskRecord) -> Result<(), String> {
    let repo = git::open(&shared.repo).map_err(|e| e.to_string())?;
    let task = &shared.plan.tasks[index];
    let admin_name = workspace::admin_name(&shared.run, &task.id);
    let spec = WorktreeSpec {
        branch: &record.branch,
        admin_name: &admin_name,
        path: &record.worktree,
        base: shared.plan.base,
        files: &shared.plan.files,
    };
    workspace::create(&repo, &spec, &|path| task.checks_out(path)).map_err(|e| e.to_string())
}
