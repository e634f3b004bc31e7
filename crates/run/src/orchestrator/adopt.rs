//! Task branches moved by hand after the run committed to them: a person's fix committed in
//! a task's worktree. Such work is never dropped in silence: a branch whose new commits
//! come after the run's and change only what the task owns is collected (its task checks
//! run on the new tip, in a checkout of the task's own lineage, and the task's commit
//! becomes that tip, so the run merges again); any other move is named, and the run does
//! not land until a person sorts it out.

use std::collections::HashMap;

use git2::Oid;

use super::RunError;
use plait_core::cancel::Cancel;
use plait_core::git;
use plait_core::globs::Globs;
use plait_core::refs::branch_ref;
use plait_core::state::RunDir;
use plait_core::state::{RunState, TaskState};
use plait_plan::CheckSettings;
use plait_stages::context::Context;
use plait_stages::review::checks::{CheckJob, CheckPool, Lineage};

/// What became of the moved branches.
#[derive(Debug, Default)]
pub struct Adoption {
    /// Tasks whose branch's new commits were collected.
    pub adopted: Vec<String>,
    /// Branches that moved in a way plait cannot take, with why.
    pub refused: Vec<(String, String)>,
}

/// Collects the task branches of `state` that moved since the run committed to them (see
/// the module's doc); `owns` are the tasks' owned globs.
pub async fn adopt_moved(
    context: &Context,
    run_dir: RunDir,
    state: &mut RunState,
    checks: &CheckSettings,
    owns: &HashMap<String, Globs>,
) -> Result<Adoption, RunError> {
    let (moved, mut adoption) = {
        let (context, snapshot, owns) = (context.clone(), state.clone(), owns.clone());
        tokio::task::spawn_blocking(move || weigh(&context, &snapshot, &owns))
            .await
            .map_err(RunError::panicked("weighing the moved branches"))??
    };
    let pool = CheckPool::for_run(run_dir.checks(), context, checks.jobs, state);
    let (_interrupt, cancel) = Cancel::new();
    for (id, tip) in moved {
        let logs = run_dir
            .task(&id)
            .checks_by_hand(git::short(&tip.to_string()));
        let job = CheckJob {
            commit: tip,
            commands: &checks.task,
            own: &[],
            env: vec![
                ("PLAIT_RUN", state.id.clone()),
                ("PLAIT_TASK", id.clone()),
                ("PLAIT_BASE", state.base.clone()),
                ("PLAIT_COMMIT", tip.to_string()),
            ],
            logs: &logs,
            timeout: checks.timeout,
            sandbox: &checks.sandbox,
            lineage: Lineage::Task(id.clone()),
        };
        let results = pool.run(&job, &cancel).await?;
        if let Some(task) = state.task_mut(&id) {
            task.commit = Some(tip.to_string());
            task.checks = results;
            if task.no_failure_of_its_own() {
                // A person's fix of a failed task counts once its checks pass.
                if task.state == TaskState::Failed {
                    task.state = TaskState::Done;
                    task.error = None;
                }
            } else {
                task.state = TaskState::Failed;
                task.error = Some(format!(
                    "its checks fail on the commits made by hand in its branch (now {})",
                    git::short(&tip.to_string())
                ));
            }
        }
        adoption.adopted.push(id);
    }
    let _ = tokio::task::spawn_blocking(move || pool.remove_all()).await;
    Ok(adoption)
}

/// The moved branches that can be collected, with their tips, and those that cannot.
fn weigh(
    context: &Context,
    state: &RunState,
    owns: &HashMap<String, Globs>,
) -> Result<(Vec<(String, Oid)>, Adoption), RunError> {
    let repo = context.repo()?;
    let base = Oid::from_str(&state.base)?;
    let base_tree = repo.find_commit(base).and_then(|c| c.tree())?;
    let (mut moved, mut adoption) = (Vec::new(), Adoption::default());
    for task in &state.tasks {
        let Some(commit) = task.commit.as_deref().and_then(|c| Oid::from_str(c).ok()) else {
            continue;
        };
        let Ok(tip) = repo.refname_to_id(&branch_ref(&task.branch)) else {
            continue;
        };
        if tip == commit {
            continue;
        }
        if !repo.graph_descendant_of(tip, commit)? {
            adoption.refused.push((
                task.branch.clone(),
                "was moved to a commit that does not come after the run's".to_string(),
            ));
            continue;
        }
        let prefix = format!("{}: ", task.id);
        let outside: Vec<String> = plait_stages::collect::outside_ownership(
            &repo,
            &plait_stages::collect::start_tree(&repo, &base_tree, task)?,
            tip,
            &task.id,
            owns,
        )?
        .into_iter()
        .map(|p| p.strip_prefix(&prefix).map(str::to_string).unwrap_or(p))
        .collect();
        if !outside.is_empty() {
            adoption.refused.push((
                task.branch.clone(),
                format!(
                    "has commits that change files task `{}` does not own: {}",
                    task.id,
                    outside.join(", ")
                ),
            ));
            continue;
        }
        moved.push((task.id.clone(), tip));
    }
    Ok((moved, adoption))
}
