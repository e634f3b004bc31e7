//! A run's merge: the tasks, or the groups then the top, merged; the merged checks; and
//! `remerge`, which does both again after a person's decisions.

use std::sync::Arc;

use super::{grouped, RunError, Shared};
use plait_core::cancel::Cancel;
use plait_core::state::{RunDir, RunState};
use plait_core::sync::Locked as _;
use plait_plan::CheckSettings;
use plait_stages::context::Context;
use plait_stages::review::checks::{checks_at, CheckPool};
use plait_stages::{groups, merge};

pub(super) async fn merge_run(
    shared: Arc<Shared>,
) -> Result<plait_core::state::MergeOutcome, RunError> {
    let mut state = shared.snapshot();
    let context = shared.context.clone();
    if state.groups.is_empty() {
        return tokio::task::spawn_blocking(move || {
            merge::run::merge_tasks(&context, &state).map_err(RunError::from)
        })
        .await
        .map_err(RunError::panicked("the merge"))?;
    }
    let groups_context = context.clone();
    let mut state = tokio::task::spawn_blocking(move || {
        groups::merge_groups(&groups_context, &mut state).map(|()| state)
    })
    .await
    .map_err(RunError::panicked("the merge"))??;
    grouped::report(&shared, &state, false);
    grouped::review_groups(&shared, &mut state).await;
    for _ in 0..shared.plan.groups.rounds {
        if shared.cancel.is_cancelled() || !grouped::send_back(&shared, &mut state).await? {
            break;
        }
        // The tasks' new rounds are in the shared state; the groups' are here.
        let groups = std::mem::take(&mut state.groups);
        state = shared.snapshot();
        state.groups = groups;
        let groups_context = context.clone();
        state = tokio::task::spawn_blocking(move || {
            groups::merge_groups(&groups_context, &mut state).map(|()| state)
        })
        .await
        .map_err(RunError::panicked("the merge"))??;
        grouped::report(&shared, &state, false);
        grouped::review_groups(&shared, &mut state).await;
    }
    let (state, outcome) = tokio::task::spawn_blocking(move || {
        groups::merge_top(&context, &mut state).map(|outcome| (state, outcome))
    })
    .await
    .map_err(RunError::panicked("the merge"))??;
    grouped::report(&shared, &state, true);
    shared.state.locked().groups = state.groups;
    Ok(outcome)
}

/// Merges the run again with the tasks that belong in it now and runs the merged checks
/// on the result; the state is updated (not saved).
pub async fn remerge(
    context: Context,
    run_dir: RunDir,
    state: &mut RunState,
    checks: &CheckSettings,
) -> Result<(), RunError> {
    let mut snapshot = state.clone();
    let merging = context.clone();
    let (snapshot, outcome) = tokio::task::spawn_blocking(move || {
        if snapshot.groups.is_empty() {
            merge::run::merge_tasks(&merging, &snapshot).map(|o| (snapshot, o))
        } else {
            groups::merge_groups(&merging, &mut snapshot)?;
            groups::merge_top(&merging, &mut snapshot).map(|o| (snapshot, o))
        }
    })
    .await
    .map_err(RunError::panicked("the merge"))??;
    state.groups = snapshot.groups;
    let merged_checks = if checks.merged.is_empty() || outcome.included.is_empty() {
        Vec::new()
    } else {
        let pool = Arc::new(CheckPool::for_run(
            run_dir.checks(),
            &context,
            checks.jobs,
            state,
        ));
        let (_interrupt, cancel) = Cancel::new();
        let results = merged_checks(&pool, state, &outcome, checks, &run_dir, &cancel).await;
        let _ = tokio::task::spawn_blocking(move || pool.remove_all()).await;
        results
    };
    state.merge = Some(outcome);
    state.merged_checks = merged_checks;
    Ok(())
}

pub(super) async fn run_merged_checks(
    shared: &Arc<Shared>,
    merge: &plait_core::state::MergeOutcome,
) -> Vec<plait_core::state::CheckResult> {
    let state = shared.snapshot();
    let run_dir = shared.store.run(&shared.run);
    merged_checks(
        &shared.checks,
        &state,
        merge,
        &shared.plan.checks,
        &run_dir,
        &shared.cancel,
    )
    .await
}

pub(super) async fn merged_checks(
    pool: &CheckPool,
    state: &RunState,
    merge: &plait_core::state::MergeOutcome,
    checks: &CheckSettings,
    run_dir: &RunDir,
    cancel: &Cancel,
) -> Vec<plait_core::state::CheckResult> {
    let Ok(commit) = git2::Oid::from_str(&merge.commit) else {
        return Vec::new();
    };
    checks_at(
        pool,
        state,
        commit,
        checks,
        &run_dir.merged_checks(),
        cancel,
    )
    .await
}
