//! Syncing a run between its PostgreSQL store and the local record, for the commands that
//! read or decide a run from any machine that has the repository. [`sync_in`] writes the
//! store's record of the run into this clone (the store's is the run's record; a run going
//! on here is left alone) and, for a run spread over workers, fetches its branches from its
//! remote; [`sync_out`], after a command changed the run, sends its record back to the
//! store and its branches to the remote.

use std::time::Duration;

use tokio_postgres::Config;

use plait_core::state::{RunState, StateError, Store};
use plait_stages::context::Context;
use plait_store::pg::{PgStore, Queue};

use super::OpsError;

/// How long connecting to the store may take.
const CONNECT: Duration = Duration::from_secs(10);

/// A run brought in from its store: where to send it back.
#[derive(Debug, Clone)]
pub struct Synced {
    /// The store.
    pub config: Config,
    /// The git remote the run is spread over, when it is.
    pub remote: Option<String>,
    /// The run's id.
    pub run: String,
}

/// Brings run `run` in from the store `config` into the context's clone. `named`: the
/// store was named for this command (`--store`), so a run it does not have is refused;
/// otherwise (a store set for every command) such a run is this clone's own, and `None`
/// says nothing was brought in.
pub async fn sync_in(
    ctx: &Context,
    config: &Config,
    run: &str,
    named: bool,
) -> Result<Option<Synced>, OpsError> {
    let pg = PgStore::connect(config, CONNECT).await?;
    let Some(state) = pg.run_state(run).await? else {
        if !named {
            return Ok(None);
        }
        return Err(OpsError::NotInStore {
            run: run.to_string(),
        });
    };
    let queue = pg.queue(run).await?;
    let store = ctx.store();
    if !store.is_running(run) {
        write_local(store, &state, queue.as_ref())?;
    }
    let remote = queue.map(|q| q.remote);
    if let Some(remote) = &remote {
        plait_store::remote::fetch(
            ctx.dir(),
            remote,
            &[plait_core::refs::run_branches(run)],
            &format!("the branches of run {run}"),
        )
        .map_err(OpsError::FetchBranches)?;
    }
    Ok(Some(Synced {
        config: config.clone(),
        remote,
        run: run.to_string(),
    }))
}

/// Writes the store's record of a run (and the plan its workers take, when it is queued)
/// into this clone's plait directory.
fn write_local(store: &Store, state: &RunState, queue: Option<&Queue>) -> Result<(), OpsError> {
    let dir = store.run_dir(&state.id);
    std::fs::create_dir_all(&dir).map_err(|source| StateError::Io {
        path: dir.clone(),
        source,
    })?;
    if let Some(queue) = queue {
        let copy = store.run(&state.id).plan();
        std::fs::write(&copy, &queue.plan).map_err(|source| StateError::Io {
            path: copy.clone(),
            source,
        })?;
    }
    store.save(state)?;
    Ok(())
}

/// Sends the run's record, as the command left it in the context's clone, back to its
/// store, and its branches (a merge made again) to its remote.
pub async fn sync_out(ctx: &Context, synced: &Synced) -> Result<(), OpsError> {
    let state = ctx.store().load(&synced.run)?;
    let pg = PgStore::connect(&synced.config, CONNECT).await?;
    pg.save_run(&state).await?;
    if let Some(remote) = &synced.remote {
        let run = &synced.run;
        plait_store::remote::push(
            ctx.dir(),
            remote,
            &[plait_core::refs::run_branches(run)],
            &format!("the branches of run {run}"),
        )
        .map_err(OpsError::PushBranches)?;
    }
    Ok(())
}

/// Run `run`'s record as the store `config` has it, from any machine (no clone needed).
pub async fn stored(config: &Config, run: &str) -> Result<RunState, OpsError> {
    let pg = PgStore::connect(config, CONNECT).await?;
    pg.run_state(run)
        .await?
        .ok_or_else(|| OpsError::NotInStore {
            run: run.to_string(),
        })
}
