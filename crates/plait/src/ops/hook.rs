//! The git hooks that judge whatever brings a run's work into a branch outside `plait/` (a
//! merge, a fast-forward, a squash merge's commit, a cherry-pick, a rebase, a reset) as
//! `plait check` judges a merge, and check a run before its plait branches are pushed:
//! [`install`] and [`uninstall`] them, and [`run`] one as git calls it. The judging itself
//! is [`super::check`]'s.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use crate::check::{CheckReport, MergeInProgress};
use plait_core::git;
use plait_stages::context::Context;

use super::check::{BackOut, BranchUpdate, Case, Checker};
use super::OpsError;

/// The line that marks a hook as plait's.
const MARK: &str = "# Installed by `plait hook install`";

/// The hooks, each with its body: the hook it replaced first (given the same input), then
/// plait. No command runs but the shell's own on the way to plait, and
/// reference-transaction starts plait only for a prepared update of a branch outside
/// `plait/` (it runs for every ref git updates, up to three times a transaction: each
/// costs a commit the shell's start).
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

/// What installing or removing the hooks did, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookStep {
    /// A hook of the user's was kept under another name; it runs first.
    Kept {
        /// The hook's name.
        name: &'static str,
        /// Where it was kept.
        path: PathBuf,
    },
    /// plait's hook was written here.
    Installed {
        /// The hook's file.
        path: PathBuf,
    },
    /// plait's hook was removed from here.
    Removed {
        /// The hook's file.
        path: PathBuf,
    },
    /// The user's hook was put back.
    Restored {
        /// The hook's name.
        name: &'static str,
    },
}

/// The repository's hooks directory.
fn hooks_dir(ctx: &Context) -> Result<PathBuf, OpsError> {
    let out =
        git::run_git(ctx.dir(), &["rev-parse", "--git-path", "hooks"], &[]).map_err(|source| {
            OpsError::Git {
                what: "cannot find the repository's hooks directory",
                source,
            }
        })?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Ok(if path.is_absolute() {
        path
    } else {
        ctx.dir().join(path)
    })
}

/// The script of hook `name`, calling `plait`.
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

/// Installs pre-merge-commit, reference-transaction and pre-push, calling the context's
/// program; a hook of the user's is kept and runs first.
pub fn install(ctx: &Context) -> Result<Vec<HookStep>, OpsError> {
    let hooks = hooks_dir(ctx)?;
    std::fs::create_dir_all(&hooks).map_err(OpsError::io(&hooks))?;
    let mut steps = Vec::new();
    for (name, _) in BODIES {
        let path = hooks.join(name);
        let chained = hooks.join(format!("{name}.plait-chained"));
        if let Ok(text) = std::fs::read_to_string(&path) {
            if !text.contains(MARK) {
                if chained.exists() {
                    return Err(OpsError::HookInTheWay { path, chained });
                }
                std::fs::rename(&path, &chained).map_err(OpsError::io(&path))?;
                steps.push(HookStep::Kept {
                    name,
                    path: chained,
                });
            }
        }
        std::fs::write(&path, script(name, ctx.program())).map_err(OpsError::io(&path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(OpsError::io(&path))?;
        steps.push(HookStep::Installed { path });
    }
    Ok(steps)
}

/// Removes plait's hooks and puts back the ones they replaced.
pub fn uninstall(ctx: &Context) -> Result<Vec<HookStep>, OpsError> {
    let hooks = hooks_dir(ctx)?;
    let mut steps = Vec::new();
    for (name, _) in BODIES {
        let path = hooks.join(name);
        let chained = hooks.join(format!("{name}.plait-chained"));
        let ours = std::fs::read_to_string(&path).is_ok_and(|t| t.contains(MARK));
        if ours {
            std::fs::remove_file(&path).map_err(OpsError::io(&path))?;
            steps.push(HookStep::Removed { path: path.clone() });
        }
        if chained.exists() && !path.exists() {
            std::fs::rename(&chained, &path).map_err(OpsError::io(&chained))?;
            steps.push(HookStep::Restored { name });
        }
    }
    Ok(steps)
}

/// A hook as git runs it.
pub struct HookRequest<'a> {
    /// The hook's name.
    pub name: &'a str,
    /// What git passed it.
    pub args: &'a [String],
    /// What git wrote on its standard input.
    pub input: &'a str,
    /// The commits git names as being merged (its `GITHEAD_<sha>` variables).
    pub merge_heads: Vec<String>,
    /// Hears each run's report as soon as it is made.
    pub heard: &'a dyn Fn(&CheckReport),
}

/// What a hook decided.
#[derive(Debug, Clone)]
pub enum HookOutcome {
    /// Nothing of a run's was refused (or nothing concerned a run).
    Passed,
    /// pre-merge-commit: the merge being made did not pass.
    MergeRefused,
    /// reference-transaction: these branch updates did not pass, each with what became
    /// of its checkout.
    UpdatesRefused(Vec<(BranchUpdate, BackOut)>),
    /// pre-push: a run of a pushed plait branch did not pass.
    PushRefused,
}

/// Runs hook `request.name` (see the module's doc). git runs reference-transaction three
/// times a transaction; only the `prepared` one judges.
pub async fn run(ctx: &Context, request: HookRequest<'_>) -> Result<HookOutcome, OpsError> {
    let checker = Checker::of(ctx)?;
    match request.name {
        "reference-transaction" if request.args.first().map(String::as_str) == Some("prepared") => {
            reference_transaction(ctx, &checker, &request).await
        }
        "reference-transaction" => Ok(HookOutcome::Passed),
        "pre-merge-commit" => pre_merge_commit(ctx, &checker, &request).await,
        "pre-push" => pre_push(&checker, &request).await,
        other => Err(OpsError::UnknownHook {
            name: other.to_string(),
        }),
    }
}

/// Judges `cases`; whether one of them refused.
async fn refused(
    checker: &Checker<'_>,
    cases: Vec<Case>,
    request: &HookRequest<'_>,
) -> Result<(bool, usize), OpsError> {
    if cases.is_empty() {
        return Ok((false, 0));
    }
    let judged = checker.judge(cases, request.heard).await?;
    Ok((judged.refused, judged.runs))
}

/// pre-merge-commit: the merge git is about to commit, judged against the runs whose
/// branches it merges and those whose task work its tree brings in. A merge that passed
/// leaves a note for reference-transaction, which then lets its commit's update through
/// without judging it again.
async fn pre_merge_commit(
    ctx: &Context,
    checker: &Checker<'_>,
    request: &HookRequest<'_>,
) -> Result<HookOutcome, OpsError> {
    let repo = &*checker.repo;
    let Some(into) = git::current_branch(repo) else {
        return Ok(HookOutcome::Passed);
    };
    let Some(merging) = merge_in_progress(ctx, repo, &request.merge_heads)? else {
        return Ok(HookOutcome::Passed);
    };
    let cases = checker.concerned(&into, &merging, &merging.heads)?;
    let (refused, runs) = refused(checker, cases, request).await?;
    if refused {
        return Ok(HookOutcome::MergeRefused);
    }
    if runs > 0 {
        let note = format!("{} {}\n", merging.tree, merging.target);
        let path = judged_note(repo);
        std::fs::write(&path, note).map_err(OpsError::io(&path))?;
    }
    Ok(HookOutcome::Passed)
}

/// The merge git is about to commit, at its `pre-merge-commit` hook: the tree in the
/// index it was given, HEAD, and the commits it merges (`heads`, and MERGE_HEAD).
fn merge_in_progress(
    ctx: &Context,
    repo: &Repository,
    heads: &[String],
) -> Result<Option<MergeInProgress>, OpsError> {
    // MERGE_HEAD is not always written yet when this hook runs.
    let mut heads = heads.to_vec();
    if let Ok(out) = git::run_git(
        ctx.dir(),
        &["rev-parse", "-q", "--verify", "MERGE_HEAD"],
        &[],
    ) {
        heads.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    let mut heads: Vec<Oid> = heads.iter().filter_map(|h| Oid::from_str(h).ok()).collect();
    heads.sort();
    heads.dedup();
    let Ok(target) = repo.head().and_then(|h| h.peel_to_commit()) else {
        return Ok(None);
    };
    if heads.is_empty() {
        return Ok(None);
    }
    let index = ctx.var("GIT_INDEX_FILE").map(PathBuf::from);
    let tree =
        git::index_tree(ctx.workdir(), index.as_deref()).map_err(|source| OpsError::Git {
            what: "cannot read the tree git is merging",
            source,
        })?;
    Ok(Some(MergeInProgress {
        tree,
        target: target.id(),
        heads,
        brings: Vec::new(),
    }))
}

/// Where pre-merge-commit notes the merge it passed (the tree, then the target): in the
/// worktree's own git dir, beside MERGE_HEAD.
fn judged_note(repo: &Repository) -> PathBuf {
    repo.path().join("plait-merge-judged")
}

/// Whether `update` is the merge commit pre-merge-commit passed (its tree, onto the same
/// target): then it was judged already.
fn judged_already(repo: &Repository, note: Option<&str>, update: &BranchUpdate) -> bool {
    let Some((tree, target)) = note.and_then(|n| n.trim().split_once(' ')) else {
        return false;
    };
    let new_tree = repo.find_commit(update.new).map(|c| c.tree_id());
    target == update.old.to_string() && new_tree.is_ok_and(|t| t.to_string() == tree)
}

/// The branch update a line of reference-transaction's input describes, if it is one to
/// judge: not a plait branch's, not a creation or deletion, not a no-op. git passes a zero
/// old value for a forced update too; the branch's current tip is the old one then.
fn branch_update(repo: &Repository, line: &str) -> Option<BranchUpdate> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [old, new, refname] = fields.as_slice() else {
        return None;
    };
    let branch = refname.strip_prefix("refs/heads/")?;
    let new = Oid::from_str(new).ok()?;
    let mut old = Oid::from_str(old).ok()?;
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
/// it already. `plait land` moves branches only after its own gate, and is let through.
async fn reference_transaction(
    ctx: &Context,
    checker: &Checker<'_>,
    request: &HookRequest<'_>,
) -> Result<HookOutcome, OpsError> {
    if ctx.var(plait_stages::land::LANDING_VAR).is_some() {
        return Ok(HookOutcome::Passed);
    }
    let repo = &*checker.repo;
    let updates: Vec<BranchUpdate> = request
        .input
        .lines()
        .filter_map(|line| branch_update(repo, line))
        .collect();
    if updates.is_empty() {
        return Ok(HookOutcome::Passed);
    }
    let note_path = judged_note(repo);
    let note = std::fs::read_to_string(&note_path).ok();
    if note.is_some() {
        // The note is for this transaction or it is stale: either way it is used up.
        let _ = std::fs::remove_file(&note_path);
    }
    let reflog_action = ctx.var("GIT_REFLOG_ACTION").unwrap_or_default();
    let mut refused = Vec::new();
    for update in updates {
        if judged_already(repo, note.as_deref(), &update) {
            continue;
        }
        let judged = checker.judge_update(&update, &reflog_action, request.heard);
        if let Some(back_out) = judged.await? {
            refused.push((update, back_out));
        }
    }
    Ok(if refused.is_empty() {
        HookOutcome::Passed
    } else {
        HookOutcome::UpdatesRefused(refused)
    })
}

/// pre-push: `plait check` on the run of each plait branch pushed, into the run's target.
async fn pre_push(
    checker: &Checker<'_>,
    request: &HookRequest<'_>,
) -> Result<HookOutcome, OpsError> {
    // Each line: local ref, local commit, remote ref, remote commit.
    let pushes = request.input.lines().filter_map(|line| {
        let mut fields = line.split_whitespace();
        Some((fields.next()?, fields.next()?))
    });
    let cases = checker.pushed(pushes);
    Ok(if refused(checker, cases, request).await?.0 {
        HookOutcome::PushRefused
    } else {
        HookOutcome::Passed
    })
}
