//! `plait hook`: git hooks that run `plait check` before a plait branch is merged or pushed.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::check::{check_merge_one, check_one, current_branch, text};
use super::error::Context as _;
use super::ui::{err, outln};
use super::{open_store, CommandError};
use crate::check::MergeInProgress;
use crate::git;

/// Install or remove the git hooks that check plait branches before a merge or a push
#[derive(Debug, Args)]
#[command(after_help = "\
`install` sets up pre-merge-commit (a merge of a plait branch into the current branch),
reference-transaction (a fast-forward onto one) and pre-push (a push of plait branches).
The first two judge exactly the merge being made:
the tree git is about to commit, with the plan's merged checks run on it, ownership of each
of the run's task branches it brings in, and the review verdicts of those tasks; it names
the tasks the merge includes and those it leaves out. pre-push runs `plait check` on the
run. Either stops the merge or push when it fails. A hook you already had is kept and runs
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

const HOOKS: [&str; 3] = ["pre-merge-commit", "pre-push", "reference-transaction"];
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

fn script(name: &str, plait: &Path) -> String {
    let plait = plait.display().to_string().replace('\'', "'\\''");
    let chained = format!("\"$(dirname \"$0\")/{name}.plait-chained\"");
    let body = if name == "pre-push" || name == "reference-transaction" {
        // reference-transaction runs for every ref git updates, three times (prepared,
        // committed, aborted); plait only looks at prepared ones.
        let only = if name == "reference-transaction" {
            "[ \"$1\" = prepared ] || exit 0\n"
        } else {
            ""
        };
        format!(
            "input=$(cat)\nif [ -x {chained} ]; then\n  printf '%s\\n' \"$input\" | {chained} \"$@\" || exit $?\nfi\n\
             {only}printf '%s\\n' \"$input\" | exec '{plait}' hook run {name} \"$@\"\n"
        )
    } else {
        format!("if [ -x {chained} ]; then\n  {chained} \"$@\" || exit $?\nfi\nexec '{plait}' hook run {name}\n")
    };
    format!("#!/bin/sh\n{MARK}; `plait hook uninstall` restores any hook it replaced.\n{body}")
}

fn install(dir: &Path) -> Result<(), CommandError> {
    let hooks = hooks_dir(dir)?;
    std::fs::create_dir_all(&hooks).context(hooks.display())?;
    let plait = std::env::current_exe()
        .map_err(|e| CommandError::internal("cannot find plait's own binary").because(e))?;
    for name in HOOKS {
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
    for name in HOOKS {
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

/// The runs whose branches point at `commit`.
fn runs_at(dir: &Path, commit: &str) -> Vec<String> {
    let Ok(out) = git::run_git(
        dir,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "--points-at",
            commit,
            "refs/heads/plait/",
        ],
        &[],
    ) else {
        return Vec::new();
    };
    let mut runs: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|r| {
            r.strip_prefix("refs/heads/plait/")?
                .split('/')
                .next()
                .map(str::to_string)
        })
        .collect();
    runs.sort();
    runs.dedup();
    runs
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
    }))
}

/// reference-transaction, prepared: a branch outside `plait/` moved forward onto a commit
/// a run's branch points at (a fast-forward merge makes no merge commit, so
/// pre-merge-commit never runs for it). Judged as a merge: the new tip's tree, the old tip
/// as the target, the run's tasks it brings in.
fn fast_forwards(
    dir: &Path,
    repo: &git2::Repository,
    store: &crate::state::Store,
) -> Result<(), CommandError> {
    // `plait land` moves branches only after its own gate.
    if std::env::var_os(crate::land::LANDING_VAR).is_some() {
        return Ok(());
    }
    let mut input = String::new();
    let _ = std::io::stdin().read_to_string(&mut input);
    let mut failed = false;
    for line in input.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [old, new, refname] = fields.as_slice() else {
            continue;
        };
        let Some(branch) = refname.strip_prefix("refs/heads/") else {
            continue;
        };
        let (Ok(old), Ok(new)) = (git2::Oid::from_str(old), git2::Oid::from_str(new)) else {
            continue;
        };
        if branch.starts_with("plait/") || old.is_zero() || new.is_zero() || old == new {
            continue;
        }
        if !repo.graph_descendant_of(new, old).unwrap_or(false) {
            continue;
        }
        let runs = runs_at(dir, &new.to_string());
        if runs.is_empty() {
            continue;
        }
        let Ok(tree) = repo.find_commit(new).and_then(|c| c.tree()) else {
            continue;
        };
        let merging = MergeInProgress {
            tree: tree.id(),
            target: old,
            heads: vec![new],
        };
        let mut refused = false;
        for run in runs {
            if !has_record(store, &run)? {
                continue;
            }
            let report = check_merge_one(repo, store, &run, branch, &merging)?;
            err!("{}", text(&report));
            refused |= !report.pass;
        }
        if refused && current_branch(repo).as_deref() == Some(branch) {
            // git updated the checkout before the ref; the ref stays, so the checkout goes
            // back too (as a checkout from the new tip to the old would, local changes kept).
            let _ = git::run_git(
                &git::workdir(repo),
                &["read-tree", "-m", "-u", &new.to_string(), &old.to_string()],
                &[],
            );
        }
        failed |= refused;
    }
    if failed {
        Err(CommandError::attention(
            "plait check failed for the fast-forward being made; see above (bypass with --no-verify where git has it, or merge with --no-ff)",
        ))
    } else {
        Ok(())
    }
}

/// Whether run `run` has a record here: a branch of a run whose record is gone is not
/// judged, but a record that cannot be read stops the hook (the gate cannot judge it).
fn has_record(store: &crate::state::Store, run: &str) -> Result<bool, CommandError> {
    match store.load(run) {
        Ok(_) => Ok(true),
        Err(crate::state::StateError::UnknownRun { .. }) => Ok(false),
        Err(crate::state::StateError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

fn run(dir: &Path, name: &str, args: &[String]) -> Result<(), CommandError> {
    let (repo, store) = open_store(dir)?;
    let mut targets: Vec<(String, String)> = Vec::new();
    if name == "reference-transaction" {
        if args.first().map(String::as_str) != Some("prepared") {
            return Ok(());
        }
        return fast_forwards(dir, &repo, &store);
    }
    match name {
        "pre-merge-commit" => {
            let Some(into) = current_branch(&repo) else {
                return Ok(());
            };
            let Some(merging) = merge_in_progress(dir, &repo)? else {
                return Ok(());
            };
            let mut runs: Vec<String> = merging
                .heads
                .iter()
                .flat_map(|h| runs_at(dir, &h.to_string()))
                .collect();
            runs.sort();
            runs.dedup();
            let mut failed = false;
            for run in runs {
                if !has_record(&store, &run)? {
                    continue;
                }
                let report = check_merge_one(&repo, &store, &run, &into, &merging)?;
                err!("{}", text(&report));
                failed |= !report.pass;
            }
            return if failed {
                Err(CommandError::attention(
                    "plait check failed for the merge being made; see above (bypass with --no-verify)",
                ))
            } else {
                Ok(())
            };
        }
        "pre-push" => {
            let mut input = String::new();
            let _ = std::io::stdin().read_to_string(&mut input);
            for line in input.lines() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let [local, sha, ..] = fields.as_slice() else {
                    continue;
                };
                let Some(rest) = local.strip_prefix("refs/heads/plait/") else {
                    continue;
                };
                if sha.chars().all(|c| c == '0') {
                    continue;
                }
                let Some(run) = rest.split('/').next() else {
                    continue;
                };
                if let Ok(state) = store.load(run) {
                    let into = if state.base_name == "HEAD" {
                        current_branch(&repo).unwrap_or_default()
                    } else {
                        state.base_name.clone()
                    };
                    targets.push((run.to_string(), into));
                }
            }
        }
        other => return Err(CommandError::usage(format!("unknown hook `{other}`"))),
    }
    targets.sort();
    targets.dedup();
    let mut failed = false;
    for (run, into) in targets {
        if !has_record(&store, &run)? {
            continue;
        }
        let report = check_one(&repo, &store, &run, &into)?;
        err!("{}", text(&report));
        failed |= !report.pass;
    }
    if failed {
        Err(CommandError::attention(
            "plait check failed; see above (bypass with --no-verify)",
        ))
    } else {
        Ok(())
    }
}
