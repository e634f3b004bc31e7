//! A run going in this process, as `run`, `resume` and `send_back` make it go: what the
//! caller is told when it starts ([`Started`]) and as it goes ([`Watch`]), the settings a
//! run made before goes on with (its own copy of its plan resolved again against the commit
//! it started from), and the run carried to its end.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use plait_core::cancel::Cancel;
use plait_core::state::{RunState, StateError};
use plait_run::orchestrator::{self, Prepared, RunSettings, Update};
use plait_stages::context::Context;

use super::OpsError;

/// How the caller follows a run and stops it.
pub struct Watch {
    /// Told once, when the run has been made (or made ready to go on) and before its
    /// first task starts.
    pub started: Option<oneshot::Sender<Started>>,
    /// Every change of a task's state and every step of a group or culprit search.
    pub updates: Option<mpsc::UnboundedSender<Update>>,
    /// The run stops at its next boundary when this fires.
    pub cancel: Cancel,
}

/// A run made, or made ready to go on, just before it goes.
#[derive(Debug)]
pub struct Started {
    /// The run's record as it goes (its id, its tasks and how far each got).
    pub state: RunState,
    /// The remote its tasks are queued through, for a run spread over workers.
    pub remote: Option<String>,
    /// What the user should be warned of before it goes: the plan's, the sandbox's, the
    /// worktrees' place.
    pub warnings: Vec<String>,
}

/// Carries `prepared` to its end, telling `watch` it started: the run's record at the
/// end.
pub(super) async fn go(
    prepared: Prepared,
    remote: Option<String>,
    warnings: Vec<String>,
    watch: Watch,
) -> Result<RunState, OpsError> {
    if let Some(started) = watch.started {
        let _ = started.send(Started {
            state: prepared.state().clone(),
            remote,
            warnings,
        });
    }
    Ok(orchestrator::execute(prepared, watch.updates, watch.cancel).await?)
}

/// The settings to carry on run `state` with, `jobs` tasks at once, and the sandbox's
/// warning when the run's processes cannot be confined here.
pub(super) fn kept_settings(
    ctx: &Context,
    state: &RunState,
    jobs: usize,
) -> Result<(RunSettings, Option<String>), OpsError> {
    let copy = ctx.store().run(&state.id).plan();
    let plan_text = std::fs::read_to_string(&copy).map_err(|source| StateError::Io {
        path: copy.clone(),
        source,
    })?;
    let resolved =
        plait_plan::resolve_kept(&*ctx.repo()?, &plan_text, &copy, &state.base, &|name| {
            ctx.var(name)
        })?;
    let warning = resolved.sandbox_warning();
    let settings = RunSettings {
        context: ctx.clone(),
        store: None,
        remote: None,
        plan: Arc::new(resolved),
        plan_path: state.plan.clone(),
        plan_text,
        jobs,
        // The tasks' worktrees are recorded in the state already.
        worktree_root: None,
        max_cost: state.max_cost,
        groups: None,
    };
    Ok((settings, warning))
}
