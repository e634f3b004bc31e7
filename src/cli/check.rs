//! `plait check`: the gate, for git hooks and CI.

use std::path::{Path, PathBuf};

use clap::Args;

use super::error::Context as _;
use super::ui::{out, outln};
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

Without a run, --plan checks any branches against a plan's ownership and checks.

Examples:
  plait check 0abc12
  plait check 0abc12 --into release --json
  plait check --plan plait.toml --branch api=feature/api --branch feature/web --into main")]
pub struct CheckArgs {
    /// The run (leave out with --plan)
    #[arg(required_unless_present = "plan")]
    pub run: Option<String>,
    /// Check branches against this plan instead of a run's branches
    #[arg(long, value_name = "PLAN", conflicts_with = "run")]
    pub plan: Option<PathBuf>,
    /// With --plan: a branch to check, TASK=BRANCH or a branch whose last path component is a task id (repeat it)
    #[arg(long = "branch", value_name = "[TASK=]BRANCH", requires = "plan")]
    pub branches: Vec<String>,
    /// With --plan: the commit the branches started from (default: the plan's base, else their merge base with the target)
    #[arg(long, value_name = "REV", requires = "plan")]
    pub base: Option<String>,
    /// The branch the result would land on (default: the current branch)
    #[arg(long, value_name = "BRANCH")]
    pub into: Option<String>,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// When the merged checks fail, find the tasks to blame (the run is not changed)
    #[arg(long, requires = "run")]
    pub bisect: bool,
    #[command(flatten)]
    pub store: super::shared::StoreArg,
}

pub fn cmd_check(dir: &Path, args: CheckArgs) -> Result<(), CommandError> {
    if let Some(run) = &args.run {
        args.store.sync_in(dir, run)?;
    }
    let (repo, store) = open_store(dir)?;
    let into = match args.into.clone() {
        Some(b) => b,
        None => current_branch(&repo).ok_or_else(|| {
            CommandError::usage("HEAD is not on a branch; name the target with --into BRANCH")
        })?,
    };
    let mut culprits = None;
    let (label, report) = match (&args.run, &args.plan) {
        (Some(run), _) => {
            let run = store.find(Some(run))?;
            let report = check_one(&repo, &store, &run, &into)?;
            if args.bisect {
                culprits = bisect_one(&repo, &store, &run, &report, args.json)?;
            }
            (format!("run {run} does"), report)
        }
        (None, Some(plan)) => (
            "the branches do".to_string(),
            check_plan(&repo, &store, plan, &args, &into)?,
        ),
        (None, None) => {
            return Err(CommandError::usage(
                "name a run, or --plan PLAN with --branch",
            ))
        }
    };
    if args.json {
        let mut value = serde_json::to_value(&report).unwrap_or_default();
        if let Some(found) = &culprits {
            value["culprits"] = serde_json::to_value(found).unwrap_or_default();
        }
        outln!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )?;
    } else {
        out!("{}", text(&report))?;
        if let Some(found) = &culprits {
            out!("{}", culprit_text(found))?;
        }
    }
    if report.pass {
        Ok(())
    } else {
        Err(CommandError::attention(format!(
            "{label} not pass the check"
        )))
    }
}

fn check_plan(
    repo: &git2::Repository,
    store: &Store,
    path: &Path,
    args: &CheckArgs,
    into: &str,
) -> Result<CheckReport, CommandError> {
    let plan = crate::plan::load(path)?;
    if args.branches.is_empty() {
        return Err(CommandError::usage(
            "--plan needs at least one --branch [TASK=]BRANCH",
        ));
    }
    let ids: Vec<&str> = plan.tasks.iter().map(|t| t.id.as_str()).collect();
    let mut branches = Vec::new();
    for spec in &args.branches {
        let (task, branch) = match spec.split_once('=') {
            Some((t, b)) => (t.to_string(), b.to_string()),
            None => (
                spec.rsplit('/').next().unwrap_or(spec).to_string(),
                spec.clone(),
            ),
        };
        if !ids.contains(&task.as_str()) {
            return Err(CommandError::usage(format!(
                "--branch {spec}: plan {} has no task `{task}`; write it as TASK=BRANCH",
                path.display()
            )));
        }
        if repo
            .find_reference(&crate::refs::branch_ref(&branch))
            .is_err()
        {
            return Err(CommandError::usage(format!(
                "--branch {spec}: no branch `{branch}`"
            )));
        }
        branches.push(check::TaskBranch { task, branch });
    }
    let base = match args.base.as_ref().or(plan.base.as_ref()) {
        Some(rev) => repo
            .revparse_single(rev)
            .and_then(|o| o.peel_to_commit())
            .map(|c| c.id())
            .map_err(|_| CommandError::usage(format!("base `{rev}` is not a branch or commit")))?,
        None => {
            let mut tips = vec![repo
                .refname_to_id(&crate::refs::branch_ref(into))
                .map_err(|_| CommandError::usage(format!("branch `{into}` does not exist")))?];
            for b in &branches {
                tips.extend(repo.refname_to_id(&crate::refs::branch_ref(&b.branch)).ok());
            }
            repo.merge_base_many(&tips).map_err(|_| {
                CommandError::usage(
                    "the branches share no history with the target; pass --base REV",
                )
            })?
        }
    };
    let scratch = store.run_dir(&format!("check-{}", std::process::id()));
    let runtime = super::runtime()?;
    let report = runtime.block_on(check::check_branches(
        git::workdir(repo),
        scratch.clone(),
        base,
        &branches,
        into,
        &crate::plan::checks_of(&plan, &|name| std::env::var(name).ok()),
        &check::owns_of(&plan),
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    report.context("cannot check the branches")
}

/// A finished run's state, with its plan's checks and owned globs.
fn finished_run(
    store: &Store,
    run: &str,
) -> Result<
    (
        crate::state::RunState,
        crate::plan::CheckSettings,
        std::collections::HashMap<String, crate::plan::globs::Globs>,
    ),
    CommandError,
> {
    let state = store.load(run)?;
    if state.phase != RunPhase::Finished {
        return Err(CommandError::attention(format!(
            "run {run} has not finished"
        )));
    }
    let plan = crate::plan::load(&store.run(run).plan())?;
    let checks = crate::plan::checks_of(&plan, &|name| std::env::var(name).ok());
    Ok((state, checks, check::owns_of(&plan)))
}

/// Checks one run against branch `into` and saves what it learned.
pub fn check_one(
    repo: &git2::Repository,
    store: &Store,
    run: &str,
    into: &str,
) -> Result<CheckReport, CommandError> {
    let (mut state, checks, owns) = finished_run(store, run)?;
    let runtime = super::runtime()?;
    let report = runtime
        .block_on(check::check_run(
            git::workdir(repo),
            store.run(run),
            &mut state,
            into,
            &checks,
            &owns,
        ))
        .context(format!("cannot check run {run}"))?;
    store.save(&state)?;
    Ok(report)
}

/// Checks the merge git is about to commit against run `run` (the `pre-merge-commit`
/// hook): only what that merge brings in.
pub fn check_merge_one(
    repo: &git2::Repository,
    store: &Store,
    run: &str,
    into: &str,
    merging: &check::MergeInProgress,
) -> Result<CheckReport, CommandError> {
    let (state, checks, owns) = finished_run(store, run)?;
    let runtime = super::runtime()?;
    runtime
        .block_on(check::check_merge(
            git::workdir(repo),
            store.run(run),
            &state,
            into,
            merging,
            &checks,
            &owns,
        ))
        .context(format!("cannot check the merge against run {run}"))
}

/// The culprit search for `plait check --bisect`, when the report's merged checks fail;
/// each step is a line on stderr (a JSON line with `--json`).
fn bisect_one(
    repo: &git2::Repository,
    store: &Store,
    run: &str,
    report: &CheckReport,
    json: bool,
) -> Result<Option<crate::state::Culprits>, CommandError> {
    let failing: Vec<String> = report
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.command.clone())
        .collect();
    if failing.is_empty() {
        return Ok(None);
    }
    let (state, checks, _) = finished_run(store, run)?;
    let step = move |step: crate::bisect::Step| {
        if json {
            let line = serde_json::json!({"event": "bisect", "step": step});
            super::ui::errln!("{line}");
        } else {
            super::ui::errln!("bisect      {} ({} check run(s))", step.detail, step.runs);
        }
    };
    let runtime = super::runtime()?;
    let found = runtime
        .block_on(check::bisect_run(
            git::workdir(repo),
            store.run(run),
            &state,
            &checks,
            &failing,
            &step,
        ))
        .context(format!("cannot search run {run} for culprits"))?;
    Ok(Some(found))
}

/// What `plait check --bisect` found, for people.
fn culprit_text(found: &crate::state::Culprits) -> String {
    let mut out = format!("culprit search ({} check run(s)):\n", found.runs);
    for set in &found.sets {
        out.push_str(&format!(
            "  {} (output: {})\n",
            crate::report::culprit_sentence(set),
            set.logs.display()
        ));
    }
    if !found.base_fails.is_empty() {
        out.push_str(&format!(
            "  {} fail(s) on the base alone: no task is to blame\n",
            found.base_fails.join(", ")
        ));
    }
    if !found.flaky.is_empty() {
        out.push_str(&format!(
            "  flaky: {} failed, then passed on the same tree\n",
            found.flaky.join(", ")
        ));
    }
    out
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
    if let Some(scope) = &report.merge {
        let list = |tasks: &[String]| {
            if tasks.is_empty() {
                "none".to_string()
            } else {
                tasks.join(", ")
            }
        };
        out.push_str(&format!(
            "  this merge includes: {}
  it leaves out: {}
",
            list(&scope.included),
            list(&scope.left_out)
        ));
    }
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
        if !c.passed && !c.tail.trim().is_empty() {
            for line in c.tail.trim_end().lines() {
                out.push_str(&format!("    | {line}\n"));
            }
        }
    }
    for g in &report.gate {
        out.push_str(&format!(
            "  {}\n",
            crate::report::blocker_line(g, &report.run)
        ));
    }
    out
}
