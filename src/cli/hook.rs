//! `plait hook`: git hooks that judge whatever brings a run's work into a branch outside
//! `plait/` (a merge, a fast-forward, a squash merge's commit, a cherry-pick, a rebase, a
//! reset) as `plait check` judges a merge, and run `plait check` before plait branches
//! are pushed. `ops::hook` installs them and judges; this file reads what git hands a hook
//! and prints.

use std::io::Read;
use std::path::Path;

use clap::{Args, Subcommand};

use super::check::text;
use super::ui::{err, outln};
use super::CommandError;
use plait::check::CheckReport;
use plait::ops::check::{BackOut, BranchUpdate};
use plait::ops::hook::{self, HookOutcome, HookRequest, HookStep};
use plait_core::git;
use plait_stages::context::Context;

/// Install or remove the git hooks that judge what brings a run's work into your branches
#[derive(Debug, Args)]
#[command(after_help = "\
`install` sets up pre-merge-commit, reference-transaction and pre-push.
pre-merge-commit (a merge) and reference-transaction (any other move of a branch outside
plait/: a commit, a fast-forward, a squash merge's commit, a cherry-pick, a rebase, git am,
a reset, update-ref) judge exactly what the branch is getting when it brings in a run's
work: when it merges or moves onto a run's branch, or its new tree holds a task's changes
(all of them or some, by content, whichever branch they came from). Judged as a merge: the
tree being committed, with the plan's merged checks run on it, ownership of each of the
run's tasks it includes, and the review verdicts of those tasks; it names the tasks it
includes and those it leaves out. Commits that bring in no run's work pass quietly.
pre-push runs `plait check` on the run. A refusal keeps the branch where it was and says
how to back out; `git -c core.hooksPath=/dev/null ...` goes ahead without the hooks
(--no-verify does not skip reference-transaction). A hook you already had is kept and runs
first; `uninstall` puts it back.")]
pub struct HookArgs {
    #[command(subcommand)]
    pub action: HookAction,
}

#[derive(Debug, Subcommand)]
pub enum HookAction {
    /// Install the hooks
    Install,
    /// Remove the hooks and restore the ones they replaced
    Uninstall,
    /// Run a hook (git calls this)
    #[command(hide = true)]
    Run {
        name: String,
        /// What git passed the hook.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

pub fn cmd_hook(dir: &Path, args: HookArgs) -> Result<(), CommandError> {
    let ctx = super::context(dir)?;
    match args.action {
        HookAction::Install => {
            for step in hook::install(&ctx)? {
                match step {
                    HookStep::Kept { name, path } => {
                        outln!("kept your {name} hook as {}; it runs first", path.display())?
                    }
                    HookStep::Installed { path } => outln!("installed {}", path.display())?,
                    _ => {}
                }
            }
            Ok(())
        }
        HookAction::Uninstall => {
            for step in hook::uninstall(&ctx)? {
                match step {
                    HookStep::Removed { path } => outln!("removed {}", path.display())?,
                    HookStep::Restored { name } => outln!("restored your {name} hook")?,
                    _ => {}
                }
            }
            Ok(())
        }
        HookAction::Run { name, args } => run(&ctx, &name, &args),
    }
}

/// Runs hook `name` as git called it: what git wrote on stdin and the commits it names as
/// being merged go to `ops::hook`, each run's report is printed on stderr as soon as it is
/// made, and a refusal says how to back out or go ahead.
fn run(ctx: &Context, name: &str, args: &[String]) -> Result<(), CommandError> {
    let mut input = String::new();
    if name != "pre-merge-commit" {
        let _ = std::io::stdin().read_to_string(&mut input);
    }
    // git names the commits being merged in GITHEAD_<sha> variables.
    let merge_heads = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("GITHEAD_").map(str::to_string))
        .collect();
    let show = |report: &CheckReport| err!("{}", text(report));
    let request = HookRequest {
        name,
        args,
        input: &input,
        merge_heads,
        heard: &show,
    };
    match super::runtime()?.block_on(hook::run(ctx, request))? {
        HookOutcome::Passed => Ok(()),
        HookOutcome::MergeRefused => Err(CommandError::attention(
            "plait check failed for the merge being made; see above",
        )
        .hint(
            "`git merge --abort` backs it out; `git -c core.hooksPath=/dev/null merge ...` \
             goes ahead without plait's hooks",
        )),
        HookOutcome::UpdatesRefused(refused) => {
            let lines: Vec<String> = refused
                .iter()
                .map(|(update, back_out)| refusal(update, *back_out))
                .collect();
            Err(CommandError::attention(lines.join("\n")).hint(BYPASS))
        }
        HookOutcome::PushRefused => Err(CommandError::attention(
            "plait check failed; see above (bypass with --no-verify)",
        )),
    }
}

/// How to go ahead anyway, for a refused ref update.
const BYPASS: &str = "to go ahead anyway, run the same command as \
    `git -c core.hooksPath=/dev/null ...` (`--no-verify` does not skip this hook), \
    or `plait hook uninstall`";

/// What happened to a refused update's branch and checkout, and how to back out.
fn refusal(update: &BranchUpdate, back_out: BackOut) -> String {
    let then = match back_out {
        BackOut::Abort(op) => format!("; `git {op} --abort` backs the {op} out"),
        BackOut::PutBack => {
            " and the checkout was put back with it (uncommitted changes kept)".to_string()
        }
        BackOut::IndexKept => {
            "; the index still holds what was to be committed (`git reset --merge` drops it)"
                .to_string()
        }
        BackOut::Untouched => String::new(),
    };
    format!(
        "plait check refused moving {branch} to {new} (see above): {branch} stays at {old}{then}.",
        branch = update.branch,
        new = git::short(&update.new.to_string()),
        old = git::short(&update.old.to_string()),
    )
}
