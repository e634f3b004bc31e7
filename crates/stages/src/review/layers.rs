//! Checks in layers over the run's base layer (see [`plait_trees::environment`]): a task's
//! checks run in a layer of the task's own, kept for its later rounds, that only its
//! commits and its own earlier checks wrote; each judgement of merged work (and of the base)
//! gets a new layer, removed after. Making one writes what its commit changes against the
//! base and a git directory, so its cost follows the change, not the repository; every one
//! is mounted at the same stable path, so the base's build stays valid in it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use git2::{Oid, Repository};

use super::checks::{run_at, CheckJob, CheckPool, Lineage};
use plait_core::beneath::{Kind, Tree};
use plait_core::cancel::Cancel;
use plait_core::state::CheckResult;
use plait_core::sync::Locked as _;
use plait_trees::environment::{self, Environment, LayerDir};

impl CheckPool {
    /// Runs `job` in a layer over `env` that its lineage may use.
    pub(super) async fn run_layered(
        &self,
        env: &Arc<Environment>,
        job: &CheckJob<'_>,
        cancel: &Cancel,
    ) -> Result<Vec<CheckResult>, String> {
        let (layer, at) = match &job.lineage {
            Lineage::Task(task) => {
                let kept = self.layers.locked().remove(task);
                match kept {
                    Some(kept) => kept,
                    None => {
                        let layer = LayerDir(self.layer_path(&format!("task-{task}")));
                        let at = held(&layer, env.base);
                        (layer, at)
                    }
                }
            }
            Lineage::Gate => (LayerDir(self.layer_path("gate")), env.base),
        };
        let (repo, made, commit) = (self.repo_dir(), layer.clone(), job.commit);
        let env2 = env.clone();
        let fresh = at == env.base && !layer.0.exists();
        let git_dir =
            tokio::task::spawn_blocking(move || move_layer(&repo, &env2, &made, at, commit, fresh))
                .await
                .map_err(|e| format!("preparing a check layer panicked: {e}"))??;
        let view = env.check_view(&layer);
        // Its git directory is the check's own, as a checkout's is: `git status` saves its
        // refreshed index there (objects and refs stay the repository's, read-only). A new
        // one each time, which plait never writes again (see `LayerDir::new_git_dir`).
        let results = run_at(&env.stable, &[git_dir], Some(&view), job, cancel).await;
        match &job.lineage {
            Lineage::Task(task) => {
                self.layers
                    .locked()
                    .insert(task.clone(), (layer, job.commit));
            }
            Lineage::Gate => {
                let _ = tokio::task::spawn_blocking(move || layer.remove()).await;
            }
        }
        Ok(results)
    }
}

/// The commit a task's layer left by an earlier process holds over `base`, as plait noted
/// it (`held`, in the layer's own directory, which no check writes, read beneath its handle
/// all the same and judged strictly); a layer that does not say, or lay over another base,
/// is removed, and the task starts a new one at the base.
fn held(layer: &LayerDir, base: Oid) -> Oid {
    match layer.held(base) {
        Some(at) => at,
        None => {
            layer.remove();
            base
        }
    }
}

/// Puts `layer` (holding commit `at` over the base layer; `fresh`: not made yet) at
/// `commit`: the files that differ between the two rewritten, and a new git directory at
/// `commit`, whose path it returns. Everything in the layer is written beneath its handles:
/// its last check may have put links anywhere in it.
fn move_layer(
    repo: &Path,
    env: &Environment,
    layer: &LayerDir,
    at: Oid,
    commit: Oid,
    fresh: bool,
) -> Result<PathBuf, String> {
    let repo = Repository::discover(repo).map_err(|e| e.to_string())?;
    if fresh {
        env.make_layer(layer).map_err(|e| e.to_string())?;
    }
    let upper = layer.open_upper().map_err(|e| e.to_string())?;
    let lower = Tree::open(&env.tree()).map_err(|e| format!("{}: {e}", env.tree().display()))?;
    let in_lower = |p: &str| lower.kind(p).is_ok_and(|k| k.is_some());
    let moved = environment::changes(&repo, at, commit).map_err(|e| e.to_string())?;
    environment::apply(&repo, &upper, &moved, &in_lower).map_err(|e| e.to_string())?;
    let from_base = if at == env.base {
        moved
    } else {
        environment::changes(&repo, env.base, commit).map_err(|e| e.to_string())?
    };
    let admin = layer.new_git_dir().map_err(|e| e.to_string())?;
    environment::git_dir(&repo, &admin, commit, &env.index(), &from_base)
        .map_err(|e| e.to_string())?;
    layer
        .note_held(env.base, commit)
        .map_err(|e| e.to_string())?;
    let dot_git = upper.root().join(".git");
    let shown = |e: std::io::Error| format!("{}: {e}", dot_git.display());
    if upper.kind(".git").map_err(shown)? == Some(Kind::Dir) {
        upper.remove_all(".git").map_err(shown)?;
    }
    let link = format!("gitdir: {}\n", admin.root().display());
    upper.write(".git", link.as_bytes(), false).map_err(shown)?;
    Ok(admin.root().to_path_buf())
}
