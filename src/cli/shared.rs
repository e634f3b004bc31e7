//! `--store` on the commands that read or decide a run (`review`, `diff`, `check`, `land`,
//! `accept`, `reject`): the run as its PostgreSQL store has it, from any machine that has
//! the repository. The argument is parsed here; bringing the run in before the command and
//! sending it back after one that changed it is [`plait::ops::sync`].

use clap::Args;

use super::CommandError;
use plait::ops::sync;
use plait_stages::context::Context;

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
pub struct Synced(sync::Synced);

impl StoreArg {
    /// Brings run `run` in from the store, when there is one (`--store` or PLAIT_STORE).
    pub fn sync_in(&self, ctx: &Context, run: &str) -> Result<Option<Synced>, CommandError> {
        let Some(config) = super::store_config(self.store.as_deref())? else {
            return Ok(None);
        };
        let named = self.store.is_some();
        let synced = super::runtime()?.block_on(sync::sync_in(ctx, &config, run, named))?;
        Ok(synced.map(Synced))
    }
}

impl Synced {
    /// Sends the run's record, as the command left it, back to the store, and its branches
    /// (a merge made again) to its remote.
    pub fn sync_out(&self, ctx: &Context) -> Result<(), CommandError> {
        super::runtime()?.block_on(sync::sync_out(ctx, &self.0))?;
        Ok(())
    }
}
