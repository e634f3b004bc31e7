//! `plait diff`: what one task's agent did.

use std::io::IsTerminal;
use std::path::Path;

use clap::{Args, ValueEnum};

use super::error::Context as _;
use super::ui::{errln, out};
use super::CommandError;
use plait::ops;
use plait::ops::diff::{DiffRequest, Ends};
use plait_stages::report::diff::{diff_text, DiffStyle};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

/// Show what a task changed on its branch, as a unified diff against where it started
#[derive(Debug, Args)]
#[command(after_help = "\
TASK may also be `merged`, for the whole merged result, or in a grouped run a supervisor
group (`group-<k>`), for the merge of its tasks.

A task that comes after others (`after`) started from their merge: its diff is its own
work against that start; `--from-base` shows it against the run's base, their work included.

Examples:
  plait diff 0abc12 lib-a
  plait diff 0abc12 merged --stat")]
pub struct DiffArgs {
    /// The run
    pub run: String,
    /// The task, `merged`, or a group (`group-<k>`)
    pub task: String,
    /// Show changed files with counts of added and removed lines
    #[arg(long)]
    pub stat: bool,
    /// Against the run's base, for a task that started from the tasks it comes after
    #[arg(long)]
    pub from_base: bool,
    /// When to colour the output
    #[arg(long, value_enum, default_value = "auto")]
    pub color: Color,
    #[command(flatten)]
    pub store: super::shared::StoreArg,
}

pub fn cmd_diff(dir: &Path, args: DiffArgs) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    args.store.sync_in(&ctx, &args.run)?;
    let request = DiffRequest {
        run: &args.run,
        what: &args.task,
        from_base: args.from_base,
    };
    let Ends { base, tip, .. } = ops::diff::ends(&ctx, request)?;
    let Some(tip) = tip else {
        errln!("task {} committed no changes", args.task);
        return Ok(());
    };
    let color = match args.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let text = diff_text(
        &*ctx.repo()?,
        base,
        tip,
        DiffStyle {
            color,
            stat: args.stat,
        },
    )
    .context("cannot diff")?;
    out!("{text}")?;
    Ok(())
}
