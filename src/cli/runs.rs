//! `plait runs`: every run of this repository.

use std::path::Path;

use clap::Args;

use super::ui::{errln, outln};
use super::CommandError;
use plait_stages::report;

/// List the runs of this repository, oldest first
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Print the run states as a JSON array
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_runs(dir: &Path, args: RunsArgs) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    let store = ctx.store();
    // A damaged record is named and skipped; the other runs are still listed.
    let mut states = Vec::new();
    for id in store.list()? {
        match store.load(&id) {
            Ok(state) => states.push(state),
            Err(e @ plait_core::state::StateError::Corrupt { .. }) => errln!("warning: {e}"),
            Err(e) => return Err(e.into()),
        }
    }
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&states).unwrap_or_default()
        )?;
    } else if states.is_empty() {
        errln!("no runs yet; start one with `plait run PLAN`");
    } else {
        for state in &states {
            outln!("{}", report::run_line(state))?;
        }
    }
    Ok(())
}
