//! Landing a run: task branches moved by hand collected first, the merge made again when
//! that or a person's decisions made it stale, then the gate and the landing itself.

use plait_core::state::{RunPhase, RunState};
use plait_run::orchestrator;
use plait_stages::context::Context;
use plait_stages::land::{self, LandOutcome, LandSettings};

use super::OpsError;

/// What to land where.
pub struct LandRequest<'a> {
    /// The run (default: the latest).
    pub run: Option<&'a str>,
    /// The branch to land on.
    pub into: &'a str,
    /// Land the tasks that merged cleanly even though others did not.
    pub partial: bool,
}

/// A task whose branch was moved by hand and whose new commits were collected.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Adopted {
    pub(crate) task: String,
    /// Its task checks on the collected tip: `None` when the plan has none.
    pub checks_pass: Option<bool>,
}

/// Why the run was merged again before landing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Remerged {
    /// Branches moved by hand were collected.
    Adopted,
    /// Decisions changed which tasks belong in the merge.
    Decisions,
}

/// What landing did.
#[derive(Debug)]
pub struct Landing {
    /// The run.
    pub run: String,
    pub(crate) adopted: Vec<Adopted>,
    pub(crate) remerged: Option<Remerged>,
    /// How the landing ended.
    pub outcome: LandOutcome,
    /// The run's record after it all (for a refusal's details).
    pub state: RunState,
}

/// Lands run `request.run` into `request.into` (see the module's doc). A refusal of the
/// gate, a conflict with a target that moved, or uncommitted changes in the target's
/// checkout are an `Ok` outcome; moved branches that cannot be taken are an error.
pub async fn land(ctx: &Context, request: LandRequest<'_>) -> Result<Landing, OpsError> {
    let store = ctx.store();
    let run = store.find(request.run)?;
    let mut state = store.load(&run)?;
    let workdir = ctx.workdir().to_path_buf();
    let env = |name: &str| ctx.var(name);
    let finished = state.phase == RunPhase::Finished;
    let mut adopted = Vec::new();
    if finished {
        adopted = adopt(ctx, &run, &mut state).await?;
    }
    let remerged = if !finished {
        None
    } else if !adopted.is_empty() {
        Some(Remerged::Adopted)
    } else if plait_stages::merge::run::merge_is_stale(&state) {
        Some(Remerged::Decisions)
    } else {
        None
    };
    if remerged.is_some() {
        let plan = plait_plan::load(&store.run(&run).plan())?;
        let checks = plait_plan::checks_of(&plan, &env, ctx.workdir());
        orchestrator::remerge(ctx.clone(), store.run(&run), &mut state, &checks)
            .await
            .map_err(|source| OpsError::Run {
                what: "cannot merge again",
                source,
            })?;
        store.save(&state)?;
    }
    let settings = LandSettings {
        workdir: &workdir,
        into: request.into,
        partial: request.partial,
    };
    let outcome = land::land(&*ctx.repo()?, &mut state, &settings)?;
    if matches!(outcome, LandOutcome::Landed(_)) {
        store.save(&state)?;
    }
    Ok(Landing {
        run,
        adopted,
        remerged,
        outcome,
        state,
    })
}

/// Collects the task branches moved by hand since the run committed to them.
async fn adopt(ctx: &Context, run: &str, state: &mut RunState) -> Result<Vec<Adopted>, OpsError> {
    let store = ctx.store();
    let plan = plait_plan::load(&store.run(run).plan())?;
    let checks = plait_plan::checks_of(&plan, &|name| ctx.var(name), ctx.workdir());
    let owns = crate::check::owns_of(&plan);
    let adoption = orchestrator::adopt::adopt_moved(ctx, store.run(run), state, &checks, &owns)
        .await
        .map_err(|source| OpsError::Run {
            what: "cannot collect the branches moved by hand",
            source,
        })?;
    if !adoption.refused.is_empty() {
        return Err(OpsError::MovedByHand {
            run: run.to_string(),
            refused: adoption.refused,
        });
    }
    let adopted: Vec<Adopted> = adoption
        .adopted
        .iter()
        .map(|id| Adopted {
            task: id.clone(),
            checks_pass: state
                .task(id)
                .filter(|t| !t.checks.is_empty())
                .map(|t| t.checks_green()),
        })
        .collect();
    if !adopted.is_empty() {
        store.save(state)?;
    }
    Ok(adopted)
}
