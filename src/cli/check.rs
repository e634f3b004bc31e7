//! `plait check`: the gate, for git hooks and CI. `ops::check` does the checking; this
//! file reads the arguments and prints the report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;

use super::ui::{out, outln};
use super::CommandError;
use plait::check::CheckReport;
use plait::ops::check::{check, BranchesRequest, CheckRequest, Checked};
use plait_stages::bisect::Step;

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
    let ctx = super::context(dir)?;
    if let Some(run) = &args.run {
        args.store.sync_in(&ctx, run)?;
    }
    let step = bisect_step(args.json);
    let request = match (&args.run, &args.plan) {
        (Some(run), _) => CheckRequest::Run {
            run,
            into: args.into.as_deref(),
            bisect: args.bisect,
            step: &step,
        },
        (None, Some(plan)) => CheckRequest::Branches(BranchesRequest {
            plan,
            branches: &args.branches,
            base: args.base.as_deref(),
            into: args.into.as_deref(),
        }),
        (None, None) => {
            return Err(CommandError::usage(
                "name a run, or --plan PLAN with --branch",
            ))
        }
    };
    let Checked { report, culprits } = super::runtime()?.block_on(check(&ctx, request))?;
    let label = match &args.run {
        Some(_) => format!("run {} does", report.run),
        None => "the branches do".to_string(),
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

/// How `plait check --bisect` shows each step of the culprit search: a line on stderr (a
/// JSON line with `--json`).
fn bisect_step(json: bool) -> impl Fn(Step) + Send + Sync {
    move |step: Step| {
        if json {
            let line = serde_json::json!({"event": "bisect", "step": step});
            super::ui::errln!("{line}");
        } else {
            super::ui::errln!("bisect      {} ({} check run(s))", step.detail, step.runs);
        }
    }
}

/// What `plait check --bisect` found, for people.
fn culprit_text(found: &plait_core::state::Culprits) -> String {
    let mut out = format!("culprit search ({} check run(s)):\n", found.runs);
    for set in &found.sets {
        let _ = writeln!(
            out,
            "  {} (output: {})",
            plait_stages::report::culprit_sentence(set),
            set.logs.display()
        );
    }
    if !found.base_fails.is_empty() {
        let _ = writeln!(
            out,
            "  {} fail(s) on the base alone: no task is to blame",
            found.base_fails.join(", ")
        );
    }
    if !found.flaky.is_empty() {
        let _ = writeln!(
            out,
            "  flaky: {} failed, then passed on the same tree",
            found.flaky.join(", ")
        );
    }
    out
}

/// The report for people.
pub(super) fn text(report: &CheckReport) -> String {
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
        let _ = write!(
            out,
            "  this merge includes: {}
  it leaves out: {}
",
            list(&scope.included),
            list(&scope.left_out)
        );
    }
    for o in &report.ownership {
        let _ = writeln!(out, "  changes a file it does not own: {o}");
    }
    for c in &report.conflicts {
        let _ = writeln!(
            out,
            "  conflicts with {} ({}): {}",
            report.target, c.kind, c.path
        );
    }
    for c in &report.checks {
        let _ = writeln!(
            out,
            "  merged check `{}`: {}",
            c.command,
            if c.passed { "passed" } else { "FAILED" }
        );
        if !c.passed && !c.tail.trim().is_empty() {
            for line in c.tail.trim_end().lines() {
                let _ = writeln!(out, "    | {line}");
            }
        }
    }
    for g in &report.gate {
        let _ = writeln!(
            out,
            "  {}",
            plait_stages::report::blocker_line(g, &report.run)
        );
    }
    out
}
