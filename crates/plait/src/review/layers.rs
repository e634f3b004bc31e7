//! Checks in layers over the run's base layer (see [`crate::environment`]): a task's
//! checks run in a layer of the task's own, kept for its later rounds, that only its
//! commits and its own earlier checks wrote; each judgement of merged work (and of the base)
//! gets a new layer, removed after. Making one writes what its commit changes against the
//! base and a git directory, so its cost follows the change, not the repository; every one
//! is mounted at the same stable path, so the base's build stays valid in it.

use std::path::Path;
use std::sync::Arc;

use git2::{Oid, Repository};

use super::checks::{run_at, CheckJob, CheckPool, Lineage};
use crate::environment::{self, Environment, LayerDir};
use plait_core::cancel::Cancel;
use plait_core::state::CheckResult;

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
                let kept = self
                    .layers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(task);
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
        tokio::task::spawn_blocking(move || move_layer(&repo, &env2, &made, at, commit, fresh))
            .await
            .map_err(|e| format!("preparing a check layer panicked: {e}"))??;
        let view = env.check_view(&layer);
        // Its git directory is the check's own, as a checkout's is: `git status` saves its
        // refreshed index there (objects and refs stay the repository's, read-only).
        let results = run_at(&env.stable, &[layer.git()], Some(&view), job, cancel).await;
        match &job.lineage {
            Lineage::Task(task) => {
                self.layers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(task.clone(), (layer, job.commit));
            }
            Lineage::Gate => {
                let _ = tokio::task::spawn_blocking(move || layer.remove()).await;
            }
        }
        Ok(results)
    }
}

/// The commit a task's layer left by an earlier process holds over `base`, as it noted
/// (`held`); a layer that does not say, or lay over another base, is removed, and the task
/// starts a new one at the base.
fn held(layer: &LayerDir, base: Oid) -> Oid {
    let noted = std::fs::read_to_string(layer.0.join("held")).ok();
    let at = noted.and_then(|text| {
        let (over, at) = text.trim().split_once(' ')?;
        (Oid::from_str(over).ok()? == base).then_some(Oid::from_str(at).ok()?)
    });
    match at {
        Some(at) => at,
        None => {
            layer.remove();
            base
        }
    }
}

/// Puts `layer` (holding commit `at` over the base layer; `fresh`: not made yet) at
/// `commit`: the files that differ between the two rewritten, and its git directory
/// pointed at `commit`.
fn move_layer(
    repo: &Path,
    env: &Environment,
    layer: &LayerDir,
    at: Oid,
    commit: Oid,
    fresh: bool,
) -> Result<(), String> {
    let repo = Repository::discover(repo).map_err(|e| e.to_string())?;
    if fresh {
        env.make_layer(layer).map_err(|e| e.to_string())?;
    }
    let tree = env.tree();
    let in_lower = |p: &str| std::fs::symlink_metadata(tree.join(p)).is_ok();
    let moved = environment::changes(&repo, at, commit).map_err(|e| e.to_string())?;
    environment::apply(&repo, &layer.upper(), &moved, &in_lower).map_err(|e| e.to_string())?;
    let from_base = if at == env.base {
        moved
    } else {
        environment::changes(&repo, env.base, commit).map_err(|e| e.to_string())?
    };
    environment::git_dir(&repo, &layer.git(), commit, &env.index(), &from_base)
        .map_err(|e| e.to_string())?;
    let held = layer.0.join("held");
    std::fs::write(&held, format!("{} {commit}\n", env.base))
        .map_err(|e| format!("{}: {e}", held.display()))?;
    let dot_git = layer.upper().join(".git");
    let _ = std::fs::remove_file(&dot_git);
    std::fs::write(&dot_git, format!("gitdir: {}\n", layer.git().display()))
        .map_err(|e| format!("{}: {e}", dot_git.display()))
}
