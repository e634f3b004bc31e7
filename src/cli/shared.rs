//! `--store` on the commands that read or decide a run (`review`, `diff`, `check`, `land`,
//! `accept`, `reject`): the run as its PostgreSQL store has it, from any machine that has
//! the repository. Before the command, the store's record of the run is written into this
//! clone (the store's is the run's record; a run going on here is left alone) and, for a
//! run spread over workers, its branches are fetched from its remote; after a command that
//! changed the run, its record goes back to the store and its branches to the remote.

use std::path::Path;

use clap::Args;

use super::CommandError;
use crate::state::{RunState, Store};

/// The store a command reads the run from.
#[derive(Debug, Args, Default)]
pub struct StoreArg {
    /// Read the run from this PostgreSQL store (or PLAIT_STORE), as on any machine that
    /// has the repository; a run spread over workers has its branches fetched from its
    /// remote
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

/// A run brought in from its store.
pub struct Synced {
    config: tokio_postgres::Config,
    remote: Option<String>,
    run: String,
}

impl StoreArg {
    /// Brings run `run` in from the store, when there is one (`--store` or PLAIT_STORE).
    pub fn sync_in(&self, dir: &Path, run: &str) -> Result<Option<Synced>, CommandError> {
        let Some(config) = super::store_config(self.store.as_deref())? else {
            return Ok(None);
        };
        let explicit = self.store.is_some();
        let found = super::runtime()?.block_on(async {
            let pg =
                crate::pg::PgStore::connect(&config, std::time::Duration::from_secs(10)).await?;
            let Some(state) = pg.run_state(run).await? else {
                return Ok(None);
            };
            let queue = pg.queue(run).await?;
            Ok::<_, CommandError>(Some((state, queue)))
        })?;
        let (state, queue) = match found {
            Some(found) => found,
            // PLAIT_STORE alone: a run this clone made without the store is its own.
            None if !explicit => return Ok(None),
            None => {
                return Err(CommandError::usage(format!("the store has no run `{run}`"))
                    .hint("`plait status RUN --store URL` shows a run the store has"))
            }
        };
        let (_repo, store) = super::open_store(dir)?;
        let live_here = store.is_running(run);
        if !live_here {
            write_local(&store, &state, queue.as_ref().map(|q| q.plan.as_str()))?;
        }
        let remote = queue.map(|q| q.remote);
        if let Some(remote) = &remote {
            crate::remote::fetch(
                dir,
                remote,
                &[crate::refs::run_branches(run)],
                &format!("the branches of run {run}"),
            )
            .map_err(|e| {
                CommandError::usage(e.to_string())
                    .hint("the run's branches are on the remote it was started with")
            })?;
        }
        Ok(Some(Synced {
            config,
            remote,
            run: run.to_string(),
        }))
    }
}

/// Writes the store's record of a run into this clone's plait directory.
fn write_local(store: &Store, state: &RunState, plan: Option<&str>) -> Result<(), CommandError> {
    let dir = store.run_dir(&state.id);
    std::fs::create_dir_all(&dir)
        .map_err(|e| CommandError::internal(format!("cannot make {}: {e}", dir.display())))?;
    if let Some(plan) = plan {
        let copy = store.run(&state.id).plan();
        std::fs::write(&copy, plan)
            .map_err(|e| CommandError::internal(format!("cannot write {}: {e}", copy.display())))?;
    }
    store.save(state)?;
    Ok(())
}

impl Synced {
    /// Sends the run's record, as the command left it, back to the store, and its branches
    /// (a merge made again) to its remote.
    pub fn sync_out(&self, dir: &Path) -> Result<(), CommandError> {
        let (_repo, store) = super::open_store(dir)?;
        let state = store.load(&self.run)?;
        super::runtime()?.block_on(async {
            let pg = crate::pg::PgStore::connect(&self.config, std::time::Duration::from_secs(10))
                .await?;
            pg.save_run(&state).await.map_err(CommandError::from)
        })?;
        if let Some(remote) = &self.remote {
            let run = &self.run;
            crate::remote::push(
                dir,
                remote,
                &[crate::refs::run_branches(run)],
                &format!("the branches of run {run}"),
            )?;
        }
        Ok(())
    }
}
