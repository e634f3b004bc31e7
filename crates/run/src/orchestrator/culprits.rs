//! When the merged checks fail: the culprit search, the culprits sent back to their
//! workers, and the merge rebuilt without them.

use std::sync::Arc;

use super::merging::merged_checks;
use super::{RunError, Shared, Update};
use plait_core::state::RunState;
use plait_core::sync::Locked as _;
use plait_stages::{groups, merge};

/// When the merged checks failed (and `[checks] bisect` is on): the culprit search; with
/// `[checks] rework = N`, up to N rounds in which the culprits go back to their workers
/// with what broke and the whole is merged and checked again; then the merge rebuilt
/// without the culprits (in both levels of a grouped run) and its merged checks.
pub(super) async fn search_culprits(
    shared: &Arc<Shared>,
    mut merge: plait_core::state::MergeOutcome,
    mut checks: Vec<plait_core::state::CheckResult>,
) -> Result<
    (
        plait_core::state::MergeOutcome,
        Vec<plait_core::state::CheckResult>,
        Option<plait_core::state::Culprits>,
    ),
    RunError,
> {
    let mut reworked: Vec<String> = Vec::new();
    let mut runs = 0;
    let rework = shared.plan.checks.rework;
    for attempt in 0..=rework {
        // A check that fails exactly as on the base has no culprit among the tasks.
        let failing: Vec<String> = checks
            .iter()
            .filter(|c| c.failed_here())
            .map(|c| c.command.clone())
            .collect();
        if failing.is_empty()
            || !shared.plan.checks.bisect
            || shared.cancel.is_cancelled()
            || merge.included.is_empty()
        {
            // The checks the base layer's build saw fail: no task is to blame, and no
            // search need say so.
            let base_fails: Vec<String> = checks
                .iter()
                .filter(|c| !c.passed && c.as_on_base)
                .map(|c| c.command.clone())
                .collect();
            let said = (!reworked.is_empty() || !base_fails.is_empty()).then(|| {
                plait_core::state::Culprits {
                    runs,
                    reworked: reworked.clone(),
                    base_fails,
                    ..Default::default()
                }
            });
            return Ok((merge, checks, said));
        }
        let state = shared.snapshot();
        // The tasks in the merge (a grouped run's outcome names them too).
        let inputs: Vec<merge::BranchInput> =
            merge::run::branch_inputs(merge.included.iter().filter_map(|id| state.task(id)), None);
        let report = |step: plait_stages::bisect::Step| shared.emit(Update::Bisect(step));
        let search = plait_stages::bisect::Search {
            context: &shared.context,
            state: &state,
            pool: &shared.checks,
            checks: plait_stages::bisect::failing_only(&shared.plan.checks, &failing),
            logs: shared.store.run(&shared.run).bisect(attempt),
            cancel: &shared.cancel,
            report: &report,
        };
        let mut culprits = plait_stages::bisect::find(&search, &inputs).await?;
        runs += culprits.runs;
        culprits.runs = runs;
        culprits.reworked = reworked.clone();
        if culprits.sets.is_empty() {
            return Ok((merge, checks, Some(culprits)));
        }
        if attempt < rework && !shared.cancel.is_cancelled() {
            send_back_culprits(shared, &state, &culprits).await?;
            reworked.extend(culprits.sets.iter().flat_map(|s| s.tasks.clone()));
            (merge, checks) = rebuild(shared, None).await?;
            continue;
        }
        let (merge, checks) = rebuild(shared, Some(culprits.clone())).await?;
        return Ok((merge, checks, Some(culprits)));
    }
    Ok((merge, checks, None))
}

/// Sends each culprit back to its worker for one more round, told which check broke, its
/// output, and what its partners changed.
pub(super) async fn send_back_culprits(
    shared: &Arc<Shared>,
    state: &RunState,
    culprits: &plait_core::state::Culprits,
) -> Result<(), RunError> {
    let mut targets = Vec::new();
    for set in &culprits.sets {
        let sentence = plait_stages::report::culprit_sentence(set);
        let text = plait_agents::prompts::feedback::culprit(set, &sentence, state);
        for id in &set.tasks {
            if let Some(index) = shared.plan.tasks.iter().position(|t| &t.id == id) {
                targets.push((index, text.clone()));
            }
        }
    }
    shared.dispatch.rework(shared, targets).await
}

/// The run merged again (in both levels of a grouped run), holding out `culprits`, and
/// its merged checks.
pub(super) async fn rebuild(
    shared: &Arc<Shared>,
    culprits: Option<plait_core::state::Culprits>,
) -> Result<
    (
        plait_core::state::MergeOutcome,
        Vec<plait_core::state::CheckResult>,
    ),
    RunError,
> {
    let mut state = shared.snapshot();
    state.culprits = culprits;
    let context = shared.context.clone();
    let snapshot = state.clone();
    let (snapshot, rebuilt) = tokio::task::spawn_blocking(move || {
        let mut snapshot = snapshot;
        let outcome = if snapshot.groups.is_empty() {
            merge::run::merge_tasks(&context, &snapshot)?
        } else {
            groups::merge_groups(&context, &mut snapshot)?;
            groups::merge_top(&context, &mut snapshot)?
        };
        Ok::<_, RunError>((snapshot, outcome))
    })
    .await
    .map_err(RunError::panicked("the merge"))??;
    state.groups = snapshot.groups;
    shared.state.locked().groups = state.groups.clone();
    let run_dir = shared.store.run(&shared.run);
    let checks = merged_checks(
        &shared.checks,
        &state,
        &rebuilt,
        &shared.plan.checks,
        &run_dir,
        &shared.cancel,
    )
    .await;
    Ok((rebuilt, checks))
}
