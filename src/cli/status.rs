//! `plait status`: a run's tasks, merge and landings.

use std::path::Path;

use clap::Args;

use super::ui::{out, outln};
use super::CommandError;
use plait_stages::context::Context;
use plait_stages::report::{self, StatusJson};

/// Show a run: per task its state, files changed, violations and time; the merge
#[derive(Debug, Args)]
#[command(after_help = "\
Works from a second terminal while the run is going. RUN may be a unique prefix of a run
id; without it, the newest run is shown. A failed task's error is followed by its agent
log's path and last lines (all of it: plait log RUN TASK); when something failed and your
checkout has ignored dependency directories (node_modules/, .venv/) that the plan's [setup]
does not share, a hint says so.

Examples:
  plait status
  plait status 0abc12 --json | jq '.tasks[] | select(.state == \"failed\")'")]
pub struct StatusArgs {
    /// The run (default: the newest)
    pub run: Option<String>,
    /// Print the state as JSON
    #[arg(long)]
    pub json: bool,
    /// Read the run from this PostgreSQL store (or PLAIT_STORE) instead of this clone
    #[arg(long, value_name = "URL", requires = "run")]
    pub store: Option<String>,
}

pub fn cmd_status(dir: &Path, args: StatusArgs) -> Result<(), CommandError> {
    if args.store.is_some() {
        return status_from_store(&args);
    }
    let ctx = super::context(dir)?;
    let store = ctx.store();
    let run = store.find(args.run.as_deref())?;
    let state = store.load(&run)?;
    let live = store.is_running(&state.id);
    print_status(&state, args.json, live)?;
    if !args.json {
        if let Some(hint) = setup_hint(&ctx, &state) {
            outln!("\nhint: {hint}")?;
        }
    }
    Ok(())
}

/// The hint under a run's failures when its plan's `[setup]` leaves out dependency
/// directories of the context's checkout (`report::setup_hint`).
pub(super) fn setup_hint(ctx: &Context, state: &plait_core::state::RunState) -> Option<String> {
    let kept = ctx.store().run(&state.id).plan();
    report::setup_hint(state, ctx.workdir(), &kept)
}

/// The status of `state`, as JSON or as text (`live`: its plait process is running).
fn print_status(
    state: &plait_core::state::RunState,
    json: bool,
    live: bool,
) -> Result<(), CommandError> {
    if json {
        let json = StatusJson {
            state,
            attention: report::attention(state),
            failures: report::failures(state),
        };
        outln!(
            "{}",
            serde_json::to_string_pretty(&json).unwrap_or_default()
        )?;
    } else {
        out!("{}", report::status_text(state, live))?;
    }
    Ok(())
}

/// `plait status RUN --store URL`: the run as its PostgreSQL store has it, from any machine.
fn status_from_store(args: &StatusArgs) -> Result<(), CommandError> {
    let run = args.run.clone().unwrap_or_default();
    let config = super::store_config(args.store.as_deref())?
        .ok_or_else(|| CommandError::usage("--store needs a URL"))?;
    let state = super::runtime()?.block_on(plait::ops::sync::stored(&config, &run))?;
    // Another machine cannot tell whether the run's process lives: its phase says.
    print_status(&state, args.json, true)
}
