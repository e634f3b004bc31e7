//! The environment of a run: one base layer per commit that every view and every check of
//! that base lies over. It holds the base's tracked files, what `[setup]` adds (the files
//! `include` names copied in, and what its `run` commands made, run once in it), and
//! plait's own build of the base (its task checks run in it before any task's code ran
//! anywhere; the merged checks are run at the base, in a layer over it, only when they fail
//! on merged work, to tell whether the base fails them too); the directories `include` names come from the user's checkout as
//! layers of their own, never copied. No task ever writes it: an agent's view is its
//! worktree over it, a task's checks a layer of the task's own over it, the gate a new
//! layer each time, each an overlay in its process's mount namespace mounted at one stable
//! path (`stable`), so tools that key their caches on the source's path (cargo) find the
//! base's build valid in every view and check, and nothing walks up into the user's
//! checkout.
//!
//! Base layers are kept between runs under the plait directory's `envs/` (three, besides
//! those in use): a later run on the same base takes it as it is; one on a descendant base
//! whose setup `key` files are unchanged takes the nearest such layer over, its installed
//! dependencies and build moved to the new base by rewriting only what changed, and builds
//! it again incrementally.
//!
//! Where the system allows no user and mount namespaces, no layer is made: views are filled
//! in and checks run in copies of a seed checkout, as before, and `plait status` says so.
//!
//! Above [`crate::workspace`] (whose `write_tree` writes a base layer's files) and
//! `crate::dirs` (the kept directories' locks and removal, which the views' base
//! checkouts share); `remove_all` and `remove_tree` are named from here too.

mod layer;
mod setup;

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::{Oid, Repository};

pub use crate::dirs::remove_all;
pub use crate::dirs::remove_tree;
use crate::dirs::{flock, lock_file};
use crate::failures::Failure;
pub use layer::LayerError;
pub use layer::{apply, changes, git_dir, LayerDir};
pub use setup::preview;
pub use setup::{EnvRequest, SetupOutcome};

use plait_core::beneath::Tree;
use plait_core::sync::Locked as _;
use plait_sandbox::sandbox::{Layer, Nested, OverlayView};

/// How many base layers not in use are kept.
const KEEP: usize = 3;

/// Why the environment could not be made: a `[setup]` command failed (naming it and its
/// log), or the file system or git refused.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A `[setup]` command failed.
    #[error("[setup] run `{command}` failed ({outcome}); its output is in {}", log.display())]
    Setup {
        /// The command.
        command: String,
        /// How it ended (its exit status, or a timeout).
        outcome: String,
        /// The file its output is in.
        log: PathBuf,
    },
    /// A `[setup] include` cannot be shared: it is not in the checkout, or there is none.
    #[error("[setup] include `{path}`: {why}")]
    Include {
        /// The path as the plan gives it.
        path: String,
        /// Why not.
        why: String,
    },
    /// The base layer could not be written.
    #[error("cannot make the base layer of {base}: {why}")]
    Layer {
        /// The base commit.
        base: String,
        /// Why it could not be written.
        why: String,
    },
    /// The run was interrupted during the setup.
    #[error("the setup was interrupted")]
    Interrupted,
}

/// What a kept base layer holds, in `env.json` beside it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct EnvRecord {
    pub(crate) base: String,
    /// The setup it was made with (its `run` lines, `include`, and the `key` files' ids).
    pub setup_key: String,
    /// Whether `[setup] run` finished in it.
    pub set_up: bool,
    /// The lists of check commands plait ran in it at the base, with whether each passed.
    pub warmed: Vec<Warmed>,
    /// Where the layer was taken over from (a layer of an earlier base), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The directories `[setup] include` shared when it was last used, for the commands
    /// that check a run later (`Environment::open_kept`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub includes: Vec<(String, PathBuf)>,
}

/// One list of check commands plait ran in a base layer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Warmed {
    pub(crate) commands: Vec<String>,
    /// The commands that failed at the base (red before any task).
    pub failed: Vec<String>,
    /// How each of `failed` failed, by command: what a task's failure of it is compared with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failures: BTreeMap<String, Failure>,
    /// The commands that failed at the base with a read the sandbox refused, each with the
    /// refusals: the walls' doing, not the base's, so they excuse no task. This run's
    /// alone: a later run (walls changed, perhaps) runs them again.
    #[serde(skip)]
    pub walled: Vec<String>,
}

/// How one check command fared at the base, for [`Warmed::judged`].
pub struct AtBase<'a> {
    /// The command, as the plan writes it.
    pub command: &'a str,
    /// Whether it passed.
    pub passed: bool,
    /// The sandbox's refusals.
    pub refused: &'a [String],
    /// Its whole output.
    pub log: &'a Path,
}

impl Warmed {
    /// How `commands` fared at the base, each as `results` says; a failure with a refused
    /// read is the walls', not the base's.
    pub fn judged(commands: &[String], results: &[AtBase<'_>]) -> Warmed {
        let mut warmed = Warmed {
            commands: commands.to_vec(),
            failed: Vec::new(),
            failures: BTreeMap::new(),
            walled: Vec::new(),
        };
        for result in results.iter().filter(|r| !r.passed) {
            let command = result.command.to_string();
            let reads: Vec<&str> = result
                .refused
                .iter()
                .filter(|r| r.starts_with("read of "))
                .map(String::as_str)
                .collect();
            if reads.is_empty() {
                warmed
                    .failures
                    .insert(command.clone(), Failure::of_log(result.log));
                warmed.failed.push(command);
            } else {
                warmed
                    .walled
                    .push(format!("`{command}`: {}", reads.join("; ")));
            }
        }
        warmed
    }

    /// Whether it tells how each of `commands` failed (a layer's record from before plait
    /// kept that does not: its commands are run at the base again).
    fn complete(&self) -> bool {
        self.failed.iter().all(|c| self.failures.contains_key(c))
    }

    /// Whether it is a whole judgement of `commands`.
    pub(crate) fn judges(&self, commands: &[String]) -> bool {
        self.commands == commands && self.complete()
    }
}

/// The layer of a start, made once.
type StartLayer = tokio::sync::OnceCell<Result<PathBuf, String>>;

/// A directory `[setup] include` shares from the user's checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Include {
    /// Relative to the checkout's root.
    pub path: String,
    pub(crate) source: PathBuf,
    /// The device and inode of the directory as found beneath the checkout with no link
    /// followed: what every view's mount of it must show, so that a link put at its path or
    /// on the way since is refused rather than followed.
    identity: (u64, u64),
}

impl Include {
    /// The directory `path` of the checkout held in `checkout` (at `workdir`), opened
    /// beneath it with no link followed.
    pub(crate) fn open(
        checkout: &plait_core::beneath::Tree,
        workdir: &Path,
        path: &str,
    ) -> std::io::Result<Include> {
        use std::os::unix::fs::MetadataExt as _;
        let dir = checkout.open_dir(path)?;
        let meta =
            std::fs::File::from(std::os::fd::AsFd::as_fd(&dir).try_clone_to_owned()?).metadata()?;
        Ok(Include {
            path: path.to_string(),
            source: workdir.join(path),
            identity: (meta.dev(), meta.ino()),
        })
    }

    /// The directory `path` of the checkout its record names at `source`, opened again
    /// beneath the checkout with no link followed; `None` when it cannot be.
    fn reopened(path: &str, source: &Path) -> Option<Include> {
        let workdir = Path::new(source.to_str()?.strip_suffix(path)?);
        let tree = plait_core::beneath::Tree::open(workdir).ok()?;
        Include::open(&tree, workdir, path).ok()
    }
}

/// A run's base layer, ready: where it is, where views are mounted, what it shares.
#[derive(Debug)]
pub struct Environment {
    /// The base commit it is made from.
    pub base: Oid,
    /// Where every view and check of the repository is mounted, in its own namespace.
    pub stable: PathBuf,
    /// `envs/<base>`: the layer (`tree`), its index, its record and setup logs.
    pub dir: PathBuf,
    pub(crate) includes: Vec<Include>,
    pub(crate) record: Mutex<EnvRecord>,
    /// Layers of the starts of tasks that come after others: what a start changes against
    /// the base, made once.
    starts: Mutex<HashMap<Oid, Arc<StartLayer>>>,
    /// A shared lock of the layer while the run uses it.
    _held: fs::File,
}

impl Environment {
    /// The kept base layer of `base` under `envs`, as a run left it set up, for checks made
    /// after the run (a person's decisions, `plait land`, the culprit search of `plait
    /// check`); `None` when there is none, it is not set up, no views over layers can be
    /// had here, or a run is making it now.
    pub fn open_kept(envs: &Path, base: Oid, stable: PathBuf) -> Option<Environment> {
        plait_sandbox::sandbox::view_support().as_ref().ok()?;
        // The newest layer of the base that is set up (one per setup).
        let prefix = format!("{base}-");
        let mut found: Vec<(std::time::SystemTime, PathBuf, EnvRecord)> = fs::read_dir(envs)
            .ok()?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .filter(|p| p.join("tree").is_dir())
            .filter_map(|p| {
                let record = load_record(&p).filter(|r| r.set_up)?;
                let at = fs::metadata(record_path(&p)).ok()?.modified().ok()?;
                Some((at, p, record))
            })
            .collect();
        found.sort_by_key(|f| f.0);
        let (_, dir, record) = found.pop()?;
        let held = lock_file(&dir.with_extension("lock")).ok()?;
        if !flock(&held, libc::LOCK_SH | libc::LOCK_NB) {
            return None;
        }
        let includes = record
            .includes
            .iter()
            .filter_map(|(path, source)| Include::reopened(path, source))
            .collect();
        fs::create_dir_all(&stable).ok()?;
        Some(Environment {
            base,
            stable,
            dir,
            includes,
            record: Mutex::new(record),
            starts: Mutex::default(),
            _held: held,
        })
    }

    /// The base layer's files.
    pub fn tree(&self) -> PathBuf {
        self.dir.join("tree")
    }

    /// The git directory a check at the base sees (`HEAD` the base): its own to write, as a
    /// checkout's is (`git status` saves its refreshed index there).
    pub(crate) fn git_dir(&self) -> PathBuf {
        self.dir.join("git")
    }

    /// The git index of the base layer's files.
    pub fn index(&self) -> PathBuf {
        self.dir.join("index")
    }

    /// The base layer mounted writable at the stable path: plait's own steps on the base.
    pub(crate) fn base_view(&self) -> OverlayView {
        OverlayView {
            target: self.stable.clone(),
            lower: vec![self.tree()],
            upper: None,
            aliases: Vec::new(),
            nested: self.nested(None),
        }
    }

    /// A check's view: `layer`'s files over the base layer, at the stable path.
    pub fn check_view(&self, layer: &LayerDir) -> OverlayView {
        OverlayView {
            target: self.stable.clone(),
            lower: vec![self.tree()],
            upper: Some(Layer {
                upper: layer.upper(),
                work: layer.work(),
            }),
            aliases: Vec::new(),
            nested: self.nested(Some(layer)),
        }
    }

    /// A task's view: its worktree over its start's layer (when it has one) and the base
    /// layer, at the stable path and at the worktree's own; the included directories in
    /// layers under `own` (beside the worktree).
    pub fn task_view(
        &self,
        start: Option<PathBuf>,
        worktree: &Path,
        work: PathBuf,
        own: &LayerDir,
    ) -> OverlayView {
        let mut lower: Vec<PathBuf> = start.into_iter().collect();
        lower.push(self.tree());
        let mut view =
            OverlayView::of_worktree(self.stable.clone(), lower, worktree.to_path_buf(), work);
        view.nested = self.nested(Some(own));
        view
    }

    /// The included directories: each under a layer of `own`'s, or read-only without one.
    fn nested(&self, own: Option<&LayerDir>) -> Vec<Nested> {
        self.includes
            .iter()
            .enumerate()
            .map(|(i, include)| Nested {
                path: PathBuf::from(&include.path),
                source: include.source.clone(),
                identity: Some(include.identity),
                layer: own.map(|o| o.include(i)),
            })
            .collect()
    }

    /// Makes the directories of a layer that will lie over this environment.
    pub fn make_layer(&self, layer: &LayerDir) -> Result<(), LayerError> {
        layer.make(self.includes.len())
    }

    /// The layer of start `commit`: its files that differ from the base's, and whiteouts
    /// for the base's files it removed; made once, under this layer's `starts/`.
    pub async fn start_layer(&self, repo: &Path, commit: Oid) -> Result<PathBuf, String> {
        let cell = self.starts.locked().entry(commit).or_default().clone();
        cell.get_or_init(|| async {
            let (repo, base, tree) = (repo.to_path_buf(), self.base, self.tree());
            let dir = self.dir.join("starts").join(commit.to_string());
            tokio::task::spawn_blocking(move || {
                if dir.is_dir() {
                    return Ok(dir);
                }
                let repo = Repository::discover(&repo).map_err(|e| e.to_string())?;
                let staging = dir.with_extension(format!("staging-{}", std::process::id()));
                remove_tree(&staging);
                fs::create_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
                let changed = changes(&repo, base, commit).map_err(|e| e.to_string())?;
                let opened = |p: &Path| Tree::open(p).map_err(|e| format!("{}: {e}", p.display()));
                let (lower, upper) = (opened(&tree)?, opened(&staging)?);
                apply(&repo, &upper, &changed, &|p| {
                    lower.kind(p).is_ok_and(|k| k.is_some())
                })
                .map_err(|e| e.to_string())?;
                if fs::rename(&staging, &dir).is_err() {
                    remove_tree(&staging);
                }
                Ok(dir)
            })
            .await
            .map_err(|e| e.to_string())?
        })
        .await
        .clone()
    }

    /// Whether the list of check commands `commands` has been run at the base in this
    /// layer (by this run or an earlier one).
    pub fn judged_at_base(&self, commands: &[String]) -> bool {
        let mut record = self.record.locked();
        if record.warmed.iter().any(|w| w.judges(commands)) {
            return true;
        }
        // Another run on the same layer may have judged them since this one opened it.
        if let Some(on_disk) = load_record(&self.dir) {
            for w in on_disk.warmed {
                if !record.warmed.iter().any(|m| m.judges(&w.commands)) {
                    record.warmed.retain(|m| m.commands != w.commands);
                    record.warmed.push(w);
                }
            }
        }
        record.warmed.iter().any(|w| w.judges(commands))
    }

    /// Keeps how `commands` fared at the base, run in a layer over it: `failed` those that
    /// failed. Kept with the layer, for later runs too.
    pub fn note_at_base(&self, warmed: Warmed) {
        {
            let mut record = self.record.locked();
            if record.warmed.iter().any(|w| w.judges(&warmed.commands)) {
                return;
            }
            record.warmed.retain(|w| w.commands != warmed.commands);
            record.warmed.push(warmed);
        }
        self.save();
    }

    /// The check commands the sandbox kept from running at the base (a refused read), each
    /// once, with what it refused.
    pub fn walled_at_base(&self) -> Vec<String> {
        let record = self.record.locked();
        let mut walled: Vec<String> = Vec::new();
        for line in record.warmed.iter().flat_map(|w| &w.walled) {
            if !walled.contains(line) {
                walled.push(line.clone());
            }
        }
        walled
    }

    /// The check commands that failed at the base when plait built it, each once.
    pub fn failed_at_base(&self) -> Vec<String> {
        let record = self.record.locked();
        let mut failed: Vec<String> = Vec::new();
        for command in record.warmed.iter().flat_map(|w| &w.failed) {
            if !failed.contains(command) {
                failed.push(command.clone());
            }
        }
        failed
    }

    /// How `command` failed when plait ran it in this layer at the base; `None` when it
    /// passed there or was not run. A command that names one of plait's variables
    /// (`$PLAIT_TASK`, `$PLAIT_BASE`, `$PLAIT_COMMIT`, …) judges each task by what is its
    /// own, which the base has none of: its failure there says nothing of a task's.
    pub fn failure_at_base(&self, command: &str) -> Option<Failure> {
        if command.contains("PLAIT_") {
            return None;
        }
        let record = self.record.locked();
        record
            .warmed
            .iter()
            .find_map(|w| w.failures.get(command))
            .cloned()
    }

    /// One phrase for a person: the layer and where its views are mounted.
    pub fn describe(&self) -> String {
        let record = self.record.locked();
        let mut parts = vec![format!(
            "base layer {} at {}",
            plait_core::git::short(&record.base),
            self.stable.display()
        )];
        if !self.includes.is_empty() {
            let names: Vec<&str> = self.includes.iter().map(|i| i.path.as_str()).collect();
            parts.push(format!("sharing {}", names.join(", ")));
        }
        if let Some(from) = &record.from {
            parts.push(format!("taken over from {}", plait_core::git::short(from)));
        }
        parts.join(", ")
    }

    fn save(&self) {
        let mut record = self.record.locked().clone();
        // What the walls kept from running is judged again by the next run.
        record.warmed.retain(|w| w.walled.is_empty());
        save_record(&self.dir, &record);
    }
}

fn record_path(dir: &Path) -> PathBuf {
    dir.join("env.json")
}

fn load_record(dir: &Path) -> Option<EnvRecord> {
    serde_json::from_slice(&fs::read(record_path(dir)).ok()?).ok()
}

fn save_record(dir: &Path, record: &EnvRecord) {
    if let Ok(text) = serde_json::to_vec_pretty(record) {
        let _ = plait_core::state::write_atomic(&record_path(dir), &text);
    }
}

/// Where the base layer of `base` made with the setup whose key is `key` is kept: one per
/// base and setup, so runs of two setups on one base do not wait for each other.
pub(crate) fn layer_dir(envs: &Path, base: Oid, key: &str) -> PathBuf {
    envs.join(format!("{base}-{}", &key[..key.len().min(12)]))
}

/// Where the views of the runs whose worktrees are under `worktree_root` are mounted: one
/// directory beside the runs' worktrees (by default under the user's cache, outside every
/// checkout), the same for every run of the repository.
pub fn stable_path(worktree_root: &Path) -> PathBuf {
    match worktree_root.parent() {
        Some(parent) => parent.join("tree"),
        None => worktree_root.join("tree"),
    }
}
