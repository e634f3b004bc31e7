//! `plait hook`: git hooks that judge whatever brings a run's work into a branch outside
//! `plait/` (a merge, a fast-forward, a squash merge's commit, a cherry-pick, a rebase, a
//! reset) as `plait check` judges a merge, and run `plait check` before plait branches
//! are pushed. `ops::check` does the judging; this file installs the hooks, reads what
//! git hands them and prints.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::check::text;
use super::error::Context as _;
use super::ui::{err, outln};
use super::{open_store, CommandError};
use plait::check::{CheckReport, MergeInProgress};
use plait::ops::check::{BackOut, BranchUpdate, Case, Checker, Judged};
use plait_core::git;

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

const MARK: &str = "# Installed by `plait hook install`";

pub fn cmd_hook(dir: &Path, args: HookArgs) -> Result<(), CommandError> {
    match args.action {
        HookAction::Install => install(dir),
        HookAction::Uninstall => uninstall(dir),
        HookAction::Run { name, args } => run(dir, &name, &args),
    }
}

fn hooks_dir(dir: &Path) -> Result<PathBuf, CommandError> {
    let out = git::run_git(dir, &["rev-parse", "--git-path", "hooks"], &[])
        .map_err(|e| CommandError::usage(e.to_string()).because(e))?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Ok(if path.is_absolute() {
        path
    } else {
        dir.join(path)
    })
}

/// The body of each hook: the hook it replaced first (given the same input), then plait.
/// No command runs but the shell's own on the way to plait, and reference-transaction
/// starts plait only for a prepared update of a branch outside `plait/` (it runs for every
/// ref git updates, up to three times a transaction: each costs a commit the shell's start).
const BODIES: [(&str, &str); 3] = [
    (
        "pre-merge-commit",
        r#"if [ -x "$chained" ]; then
  "$chained" "$@" || exit $?
fi
exec '@PLAIT@' hook run pre-merge-commit
"#,
    ),
    (
        "pre-push",
        r#"if [ -x "$chained" ]; then
  input=$(cat)
  printf '%s\n' "$input" | "$chained" "$@" || exit $?
  exec <<PLAIT_INPUT
$input
PLAIT_INPUT
fi
exec '@PLAIT@' hook run pre-push "$@"
"#,
    ),
    (
        "reference-transaction",
        r#"if [ -x "$chained" ]; then
  input=$(cat)
  printf '%s\n' "$input" | "$chained" "$@" || exit $?
  exec <<PLAIT_INPUT
$input
PLAIT_INPUT
fi
[ "$1" = prepared ] || exit 0
input= judge=
while read -r old new ref; do
  input="$input$old $new $ref
"
  case "$ref" in
    refs/heads/plait/*) ;;
    refs/heads/*) case "$new" in *[!0]*) [ "$old" = "$new" ] || judge=1 ;; esac ;;
  esac
done
[ -n "$judge" ] || exit 0
exec '@PLAIT@' hook run reference-transaction "$@" <<PLAIT_INPUT
$input
PLAIT_INPUT
"#,
    ),
];

fn script(name: &str, plait: &Path) -> String {
    let plait = plait.display().to_string().replace('\'', "'\\''");
    let body = BODIES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, body)| body)
        .replace("@PLAIT@", &plait);
    format!(
        "#!/bin/sh\n{MARK}; `plait hook uninstall` restores any hook it replaced.\n\
         chained=\"${{0%/*}}/{name}.plait-chained\"\n{body}"
    )
}

fn install(dir: &Path) -> Result<(), CommandError> {
    let hooks = hooks_dir(dir)?;
    std::fs::create_dir_all(&hooks).context(hooks.display())?;
    let plait = std::env::current_exe()
        .map_err(|e| CommandError::internal("cannot find plait's own binary").because(e))?;
    for (name, _) in BODIES {
        let path = hooks.join(name);
        let chained = hooks.join(format!("{name}.plait-chained"));
        let existing = std::fs::read_to_string(&path).ok();
        if let Some(text) = &existing {
            if !text.contains(MARK) {
                if chained.exists() {
                    return Err(CommandError::usage(format!(
                        "{} exists and so does {}; move one of them away first",
                        path.display(),
                        chained.display()
                    )));
                }
                std::fs::rename(&path, &chained)?;
                outln!(
                    "kept your {name} hook as {}; it runs first",
                    chained.display()
                )?;
            }
        }
        std::fs::write(&path, script(name, &plait)).context(path.display())?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .context(path.display())?;
        outln!("installed {}", path.display())?;
    }
    Ok(())
}

fn uninstall(dir: &Path) -> Result<(), CommandError> {
    let hooks = hooks_dir(dir)?;
    for (name, _) in BODIES {
        let path = hooks.join(name);
        let chained = hooks.join(format!("{name}.plait-chained"));
        let ours = std::fs::read_to_string(&path).is_ok_and(|t| t.contains(MARK));
        if ours {
            std::fs::remove_file(&path)?;
            outln!("removed {}", path.display())?;
        }
        if chained.exists() && !path.exists() {
            std::fs::rename(&chained, &path)?;
            outln!("restored your {name} hook")?;
        }
    }
    Ok(())
}

/// The merge git is about to commit, at its `pre-merge-commit` hook: the tree in the
/// index it was given, HEAD, and the commits it merges.
fn merge_in_progress(
    dir: &Path,
    repo: &git2::Repository,
) -> Result<Option<MergeInProgress>, CommandError> {
    // git names the commits being merged in GITHEAD_<sha> variables; MERGE_HEAD is not
    // always written yet when this hook runs.
    let mut heads: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("GITHEAD_").map(str::to_string))
        .collect();
    if let Ok(out) = git::run_git(dir, &["rev-parse", "-q", "--verify", "MERGE_HEAD"], &[]) {
        heads.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    let mut heads: Vec<git2::Oid> = heads
        .iter()
        .filter_map(|h| git2::Oid::from_str(h).ok())
        .collect();
    heads.sort();
    heads.dedup();
    let Ok(target) = repo.head().and_then(|h| h.peel_to_commit()) else {
        return Ok(None);
    };
    if heads.is_empty() {
        return Ok(None);
    }
    let index = std::env::var_os("GIT_INDEX_FILE").map(PathBuf::from);
    let workdir = git::workdir(repo);
    let tree = git::index_tree(&workdir, index.as_deref())
        .map_err(|e| CommandError::internal("cannot read the tree git is merging").because(e))?;
    Ok(Some(MergeInProgress {
        tree,
        target: target.id(),
        heads,
        brings: Vec::new(),
    }))
}

/// Judges `cases`, printing each report on stderr as soon as it is made.
fn judge(checker: &Checker<'_>, cases: Vec<Case>) -> Result<Judged, CommandError> {
    if cases.is_empty() {
        return Ok(Judged::default());
    }
    Ok(super::runtime()?.block_on(checker.judge(cases, &show))?)
}

/// Prints a hook's report of one run on stderr.
fn show(report: &CheckReport) {
    err!("{}", text(report));
}

/// pre-merge-commit: the merge git is about to commit, judged against the runs whose
/// branches it merges and those whose task work its tree brings in. A merge that passed
/// leaves a note for reference-transaction, which then lets its commit's update through
/// without judging it again.
fn pre_merge_commit(dir: &Path, checker: &Checker<'_>) -> Result<(), CommandError> {
    let repo = checker.repo;
    let Some(into) = git::current_branch(repo) else {
        return Ok(());
    };
    let Some(merging) = merge_in_progress(dir, repo)? else {
        return Ok(());
    };
    let judged = judge(checker, checker.concerned(&into, &merging, &merging.heads)?)?;
    if judged.refused {
        return Err(CommandError::attention(
            "plait check failed for the merge being made; see above",
        )
        .hint(
            "`git merge --abort` backs it out; `git -c core.hooksPath=/dev/null merge ...` \
             goes ahead without plait's hooks",
        ));
    }
    if judged.runs > 0 {
        let note = format!("{} {}\n", merging.tree, merging.target);
        std::fs::write(judged_note(repo), note)?;
    }
    Ok(())
}

/// Where pre-merge-commit notes the merge it passed (the tree, then the target): in the
/// worktree's own git dir, beside MERGE_HEAD.
fn judged_note(repo: &git2::Repository) -> PathBuf {
    repo.path().join("plait-merge-judged")
}

/// Whether `update` is the merge commit pre-merge-commit passed (its tree, onto the same
/// target): then it was judged already.
fn judged_already(repo: &git2::Repository, note: Option<&str>, update: &BranchUpdate) -> bool {
    let Some((tree, target)) = note.and_then(|n| n.trim().split_once(' ')) else {
        return false;
    };
    let new_tree = repo.find_commit(update.new).map(|c| c.tree_id());
    target == update.old.to_string() && new_tree.is_ok_and(|t| t.to_string() == tree)
}

/// The branch update a line of reference-transaction's input describes, if it is one to
/// judge: not a plait branch's, not a creation or deletion, not a no-op. git passes a zero
/// old value for a forced update too; the branch's current tip is the old one then.
fn branch_update(repo: &git2::Repository, line: &str) -> Option<BranchUpdate> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [old, new, refname] = fields.as_slice() else {
        return None;
    };
    let branch = refname.strip_prefix("refs/heads/")?;
    let new = git2::Oid::from_str(new).ok()?;
    let mut old = git2::Oid::from_str(old).ok()?;
    if branch.starts_with("plait/") || new.is_zero() {
        return None;
    }
    if old.is_zero() {
        old = repo.refname_to_id(refname).ok()?;
    }
    (old != new).then(|| BranchUpdate {
        branch: branch.to_string(),
        old,
        new,
    })
}

/// reference-transaction, prepared: every branch outside `plait/` that moves is judged as
/// a merge of what it brings in (`Checker::judge_update`), unless pre-merge-commit judged
/// it already.
fn reference_transaction(checker: &Checker<'_>) -> Result<(), CommandError> {
    // `plait land` moves branches only after its own gate.
    if std::env::var_os(plait::land::LANDING_VAR).is_some() {
        return Ok(());
    }
    let repo = checker.repo;
    let mut input = String::new();
    let _ = std::io::stdin().read_to_string(&mut input);
    let updates: Vec<BranchUpdate> = input
        .lines()
        .filter_map(|line| branch_update(repo, line))
        .collect();
    if updates.is_empty() {
        return Ok(());
    }
    let note_path = judged_note(repo);
    let note = std::fs::read_to_string(&note_path).ok();
    if note.is_some() {
        // The note is for this transaction or it is stale: either way it is used up.
        let _ = std::fs::remove_file(&note_path);
    }
    let updates: Vec<BranchUpdate> = updates
        .into_iter()
        .filter(|update| !judged_already(repo, note.as_deref(), update))
        .collect();
    if updates.is_empty() {
        return Ok(());
    }
    let reflog_action = std::env::var("GIT_REFLOG_ACTION").unwrap_or_default();
    let runtime = super::runtime()?;
    let mut refused = Vec::new();
    for update in updates {
        let judged = checker.judge_update(&update, &reflog_action, &show);
        if let Some(back_out) = runtime.block_on(judged)? {
            refused.push(refusal(&update, back_out));
        }
    }
    if refused.is_empty() {
        return Ok(());
    }
    Err(CommandError::attention(refused.join("\n")).hint(BYPASS))
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

fn run(dir: &Path, name: &str, args: &[String]) -> Result<(), CommandError> {
    let (repo, store) = open_store(dir)?;
    let env = |name: &str| std::env::var(name).ok();
    let checker = Checker {
        repo: &repo,
        store: &store,
        env: &env,
    };
    match name {
        // git runs it three times a transaction (prepared, committed, aborted).
        "reference-transaction" if args.first().map(String::as_str) == Some("prepared") => {
            reference_transaction(&checker)
        }
        "reference-transaction" => Ok(()),
        "pre-merge-commit" => pre_merge_commit(dir, &checker),
        "pre-push" => pre_push(&checker),
        other => Err(CommandError::usage(format!("unknown hook `{other}`"))),
    }
}

/// pre-push: `plait check` on the run of each plait branch pushed, into the run's target.
fn pre_push(checker: &Checker<'_>) -> Result<(), CommandError> {
    let mut input = String::new();
    let _ = std::io::stdin().read_to_string(&mut input);
    // Each line: local ref, local commit, remote ref, remote commit.
    let pushes = input.lines().filter_map(|line| {
        let mut fields = line.split_whitespace();
        Some((fields.next()?, fields.next()?))
    });
    if judge(checker, checker.pushed(pushes))?.refused {
        Err(CommandError::attention(
            "plait check failed; see above (bypass with --no-verify)",
        ))
    } else {
        Ok(())
    }
}
