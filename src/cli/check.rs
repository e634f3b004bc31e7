//! `plait check`: the gate, for git hooks and CI.

use std::path::Path;

use clap::Args;

use super::{open_store, CommandError};
use crate::check::{self, CheckReport};
use crate::git;
use crate::state::{RunPhase, Store};

/// Check that a run's branches may land: ownership, merges, merged checks, the gate
#[derive(Debug, Args)]
#[command(after_help = "\
Verifies that each task branch changes only files its task owns, merges the branches that
belong in the result with each other and with BRANCH, runs the plan's merged checks on that
result, and applies the run's gate (approvals, violations, conflicts). Prints a report.
Exit codes: 0 pass, 1 fail, 2 usage.

Examples:
  plait check 0abc12
  plait check 0abc12 --into release --json")]
pub struct CheckArgs {
    /// The run
    pub run: String,
    /// The branch the result would land on (default: the current branch)
    #[arg(long, value_name = "BRANCH")]
    pub into: Option<String>,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn cmd_check(dir: &Path, args: CheckArgs) -> Result<(), CommandError> {
    let (repo, store) = open_store(dir)?;
    let run = store.find(Some(&args.run))?;
    let into = match args.into {
        Some(b) => b,
        None => current_branch(&repo).ok_or_else(|| {
            CommandError::usage("HEAD is not on a branch; name the target with --into BRANCH")
        })?,
    };
    let report = check_one(&repo, &store, &run, &into)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print!("{}", text(&report));
    }
    if report.pass {
        Ok(())
    } else {
        Err(CommandError::attention(format!(
            "run {run} does not pass the check"
        )))
    }
}

/// Checks one run against branch `into` and saves what it learned.
pub fn check_one(
    repo: &git2::Repository,
    store: &Store,
    run: &str,
    into: &str,
) -> Result<CheckReport, CommandError> {
    let mut state = store.load(run)?;
    if state.phase != RunPhase::Finished {
        return Err(CommandError::attention(format!(
            "run {run} has not finished"
        )));
    }
    let plan = crate::plan::load(&store.run_dir(run).join("plan.toml"))?;
    let checks = crate::plan::checks_of(&plan);
    let owns = check::owns_of(&plan);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError::internal(format!("cannot start the async runtime: {e}")))?;
    let report = runtime
        .block_on(check::check_run(
            git::workdir(repo),
            store.run_dir(run),
            &mut state,
            into,
            &checks,
            &owns,
        ))
        .map_err(|e| CommandError::internal(format!("cannot check run {run}: {e}")))?;
    store.save(&state)?;
    Ok(report)
}

/// The branch HEAD is on, if any.
pub fn current_branch(repo: &git2::Repository) -> Option<String> {
    let head = repo.head().ok()?;
    head.is_branch()
        .then(|| head.shorthand().ok().map(str::to_string))
        .flatten()
}

/// The report for people.
pub fn text(report: &CheckReport) -> String {
    let mut out = format!(
        "plait check: run {} into {}: {}\n",
        report.run,
        report.target,
        if report.pass { "PASS" } else { "FAIL" }
    );
    for o in &report.ownership {
        out.push_str(&format!("  changes a file it does not own: {o}\n"));
    }
    for c in &report.conflicts {
        out.push_str(&format!(
            "  conflicts with {} ({}): {}\n",
            report.target, c.kind, c.path
        ));
    }
    for c in &report.checks {
        out.push_str(&format!(
            "  merged check `{}`: {}\n",
            c.command,
            if c.passed { "passed" } else { "FAILED" }
        ));
    }
    for g in &report.gate {
        out.push_str(&format!("  {g}\n"));
    }
    out
}
