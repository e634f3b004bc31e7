//! `plait status`: a run's tasks, merge and landings.

use std::path::Path;

use clap::Args;

use super::ui::{out, outln};
use super::{open_store, CommandError};
use crate::report::{self, StatusJson};

/// Show a run: per task its state, files changed, violations and time; the merge
#[derive(Debug, Args)]
#[command(after_help = "\
Works from a second terminal while the run is going. RUN may be a unique prefix of a run
id; without it, the newest run is shown.

Examples:
  plait status
  plait status 0abc12 --json | jq '.tasks[] | select(.state == \"failed\")'")]
pub struct StatusArgs {
    /// The run (default: the newest)
    pub run: Option<String>,
    /// Print the state as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_status(dir: &Path, args: StatusArgs) -> Result<(), CommandError> {
    let (_repo, store) = open_store(dir)?;
    let run = store.find(args.run.as_deref())?;
    let state = store.load(&run)?;
    if args.json {
        let json = StatusJson {
            state: &state,
            attention: report::attention(&state),
        };
        outln!(
            "{}",
            serde_json::to_string_pretty(&json).unwrap_or_default()
        )?;
    } else {
        let live = store.lock_holder().is_some_and(|(_, run)| run == state.id);
        out!("{}", report::status_text(&state, live))?;
    }
    Ok(())
}
