//! Going on with a run that was started before: the use case behind `plait resume` (its
//! refusals, then the run made ready to go on from its own copy of its plan, and carried
//! to its end).

use plait_core::state::{RunPhase, RunState};
use plait_stages::context::Context;

use super::running::{go, kept_settings, Watch};
use super::OpsError;

/// What a resume is asked.
pub struct ResumeRequest<'a> {
    /// The run, as the user named it (a prefix of its id will do).
    pub run: &'a str,
    /// Tasks at once on this machine.
    pub jobs: usize,
    /// The PostgreSQL store of a run spread over workers, connected to already: its tasks
    /// are waited for again, through the remote the run was started with.
    pub store: Option<tokio_postgres::Config>,
}

/// Carries on the run `request.run` names, followed through `watch`: refused when it has
/// finished (nothing to resume) or its plait process is still going; else its kept plan
/// resolved again, the lock taken, the tasks that had not ended set to run again from
/// their worktrees, and the run carried to its end. The run's record at the end.
pub async fn resume(
    ctx: &Context,
    request: ResumeRequest<'_>,
    watch: Watch,
) -> Result<RunState, OpsError> {
    let store = ctx.store();
    let run = store.find(Some(request.run))?;
    let state = store.load(&run)?;
    if state.phase == RunPhase::Finished {
        return Err(OpsError::Finished { run });
    }
    if let Some((pid, holder)) = store.lock_holder() {
        if holder == run {
            return Err(OpsError::Going { run, pid });
        }
    }
    let (mut settings, warning) = kept_settings(ctx, &state, request.jobs)?;
    let mut remote = None;
    if let Some(config) = request.store {
        remote = queued_remote(&config, &run).await?;
        settings.store = Some(config);
        settings.remote = remote.clone();
    }
    let prepared = plait_run::orchestrator::prepare_resume(settings, state)?;
    go(prepared, remote, warning.into_iter().collect(), watch).await
}

/// The remote through which run `run` of the store `config` is spread over workers, if
/// it is.
async fn queued_remote(
    config: &tokio_postgres::Config,
    run: &str,
) -> Result<Option<String>, OpsError> {
    let pg = plait_store::pg::PgStore::connect(config, std::time::Duration::from_secs(10)).await?;
    Ok(pg.queue(run).await?.map(|q| q.remote))
}
