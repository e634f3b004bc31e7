//! `plait land`: move a branch to the run's merged result.

use std::path::Path;

use clap::Args;

use super::error::Context as _;
use super::ui::{errln, outln};
use super::{open_store, CommandError};
use crate::git;
use crate::land::{self, LandOutcome, LandSettings, Refusal};
use crate::orchestrator;

/// Advance a branch to the run's merged result, only when the merge is clean
#[derive(Debug, Args)]
#[command(after_help = "\
A fast-forward when BRANCH has not moved since the run's base; otherwise a merge commit,
made only when merging BRANCH with the run's result is clean. If BRANCH is checked out, its
worktree is updated too, unless it has uncommitted changes in paths the landing changes.
Never forced; history is never rewritten.

Examples:
  plait land 0abc12 --into main
  plait land 0abc12 --into main --partial   # land the tasks that merged cleanly")]
pub struct LandArgs {
    /// The run
    pub run: String,
    /// The branch to advance
    #[arg(long, value_name = "BRANCH")]
    pub into: String,
    /// Land the merged result even though some tasks failed, changed files they do not
    /// own, or conflicted (they are not in it)
    #[arg(long)]
    pub partial: bool,
    #[command(flatten)]
    pub store: super::shared::StoreArg,
}

pub fn cmd_land(dir: &Path, args: LandArgs) -> Result<(), CommandError> {
    let synced = args.store.sync_in(dir, &args.run)?;
    let landed = land(dir, &args);
    // What landing recorded (or a merge made again) goes back to the store either way.
    if let Some(synced) = synced {
        synced.sync_out(dir)?;
    }
    landed
}

fn land(dir: &Path, args: &LandArgs) -> Result<(), CommandError> {
    let (repo, store) = open_store(dir)?;
    let run = store.find(Some(&args.run))?;
    let mut state = store.load(&run)?;
    let workdir = git::workdir(&repo);
    let finished = state.phase == crate::state::RunPhase::Finished;
    let adopted = if finished {
        adopt(&run, &store, &workdir, &mut state)?
    } else {
        false
    };
    if finished && (adopted || crate::merge::run::merge_is_stale(&state)) {
        if !adopted {
            errln!("decisions changed which tasks belong in run {run}: merging again and re-running the merged checks");
        }
        let plan = crate::plan::load(&store.run(&run).plan())?;
        let checks = crate::plan::checks_of(&plan, &|name| std::env::var(name).ok());
        super::runtime()?
            .block_on(orchestrator::remerge(
                workdir.clone(),
                store.run(&run),
                &mut state,
                &checks,
            ))
            .context("cannot merge again")?;
        store.save(&state)?;
    }
    let settings = LandSettings {
        workdir: &workdir,
        into: &args.into,
        partial: args.partial,
    };
    match land::land(&repo, &mut state, &settings)? {
        LandOutcome::Landed(record) => {
            store.save(&state)?;
            outln!(
                "landed run {run} into {}: {} → {} ({})",
                record.branch,
                crate::git::short(&record.from),
                crate::git::short(&record.to),
                if record.fast_forward {
                    "fast-forward"
                } else {
                    "merge commit"
                }
            )
        }
        LandOutcome::AlreadyLanded { branch } => {
            outln!("{branch} already contains run {run}'s result")
        }
        LandOutcome::Refused(refusal) => Err(refused(&run, &args.into, &state, refusal)),
    }
}

/// Collects task branches moved by hand since the run committed to them; whether any was,
/// so the run merges again. A move that cannot be collected refuses the landing.
fn adopt(
    run: &str,
    store: &crate::state::Store,
    workdir: &Path,
    state: &mut crate::state::RunState,
) -> Result<bool, CommandError> {
    let plan = crate::plan::load(&store.run(run).plan())?;
    let checks = crate::plan::checks_of(&plan, &|name| std::env::var(name).ok());
    let owns = crate::check::owns_of(&plan);
    let adoption = super::runtime()?
        .block_on(orchestrator::adopt::adopt_moved(
            workdir.to_path_buf(),
            store.run(run),
            state,
            &checks,
            &owns,
        ))
        .context("cannot collect the branches moved by hand")?;
    if !adoption.refused.is_empty() {
        let mut msg = format!("not landing run {run}: task branches moved by hand:");
        for (branch, why) in &adoption.refused {
            msg.push_str(&format!("\n  - {branch} {why}"));
        }
        return Err(CommandError::attention(msg).hint(
            "move each back to the run's commit (`git branch -f BRANCH COMMIT`, `plait status` names it), or keep its changes to the task's own files",
        ));
    }
    for id in &adoption.adopted {
        let task = state.task(id);
        let checks = match task {
            Some(t) if t.checks.is_empty() => "no task checks".to_string(),
            Some(t) if t.checks_pass() => "task checks pass".to_string(),
            _ => "task checks FAIL".to_string(),
        };
        errln!(
            "branch of task {id} moved by hand: collected its commits (own files only; {checks}); merging again and re-running the merged checks"
        );
    }
    if !adoption.adopted.is_empty() {
        store.save(state)?;
    }
    Ok(!adoption.adopted.is_empty())
}

/// Why the landing was refused, and what to do about it.
fn refused(
    run: &str,
    into: &str,
    state: &crate::state::RunState,
    refusal: Refusal,
) -> CommandError {
    let (mut msg, items, hint) = match refusal {
        Refusal::Gate(why) => (
            format!("not landing run {run}:"),
            why.iter()
                .map(|w| crate::report::blocker_line(w, run))
                .collect::<Vec<_>>(),
            format!(
                "`plait status {run}` shows the details; --partial lands only the tasks that merged cleanly"
            ),
        ),
        Refusal::Conflicts(conflicts) => (
            format!("not landing run {run}: {into} moved on and conflicts with it:"),
            conflicts
                .iter()
                .map(|c| {
                    let tasks = if c.tasks.is_empty() {
                        String::new()
                    } else {
                        format!(" (tasks {})", c.tasks.join(", "))
                    };
                    format!("{} ({}){tasks}", c.path, c.kind)
                })
                .collect(),
            format!(
                "merge {} into {into} by hand, or rebase the run's work onto it",
                state.merged_branch()
            ),
        ),
        Refusal::Dirty { worktree, paths } => (
            format!(
                "not landing run {run}: {into} is checked out in {} with uncommitted changes the landing would overwrite:",
                worktree.display()
            ),
            paths,
            "commit or stash those changes, then land again".to_string(),
        ),
    };
    for item in &items {
        msg.push_str(&format!("\n  - {item}"));
    }
    CommandError::attention(msg).hint(hint)
}
