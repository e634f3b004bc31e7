//! Making a run's environment: the base layer found, taken over or written, `[setup]` run
//! in it once, and the base's checks run in it once (plait's own build of the base), all
//! before any task's code runs anywhere. Only here is a base layer ever written.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use git2::{Oid, Repository};
use sha1::Digest as _;

use super::layer::{self, LayerError};
use super::{load_record, save_record, AtBase, EnvError, EnvRecord, Environment, Include, Warmed};
use crate::dirs::{flock, lock_file, prune_kept, remove_tree};
use plait_core::beneath::{Content, Kind, Tree};
use plait_core::cancel::Cancel;
use plait_core::git::TreeFile;
use plait_core::sync::Locked as _;
use plait_plan::SetupSettings;
use plait_sandbox::sandbox::{Sandbox, SandboxSettings};
use plait_sandbox::shell::{self, Launch, ShellOutcome};

/// Files whose content decides what an install makes, the default `[setup] key`.
const LOCKFILES: &[&str] = &[
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lockb",
    "bun.lock",
    "package.json",
    "uv.lock",
    "poetry.lock",
    "Pipfile.lock",
    "pdm.lock",
    "pyproject.toml",
    "requirements.txt",
    "requirements-dev.txt",
    "Gemfile.lock",
    "Gemfile",
    "Cargo.lock",
    "go.sum",
    "go.mod",
    "composer.lock",
    "mix.lock",
    "pubspec.lock",
    "Podfile.lock",
    "gradle.lockfile",
    "flake.lock",
];

/// What a run's environment is made from.
pub struct EnvRequest<'a> {
    /// A directory of the repository (its checkout's root for `include`).
    pub repo: &'a Path,
    /// Where base layers are kept (`Store::envs_dir`).
    pub envs: PathBuf,
    /// The base commit.
    pub base: Oid,
    /// The base commit's files.
    pub files: Arc<Vec<TreeFile>>,
    /// The plan's `[setup]`.
    pub setup: &'a SetupSettings,
    /// Where views are mounted.
    pub stable: PathBuf,
    /// The walls of the checks, which the base's checks and the setup run in (the setup
    /// with its own network).
    pub sandbox: &'a SandboxSettings,
    /// The lists of check commands to run at the base, each once per layer.
    pub warm: Vec<Vec<String>>,
    /// The environment of the checks run at the base.
    pub env: Vec<(&'a str, String)>,
    /// Where the base's checks log (`<n>/check-<i>.log`) and the setup logs (`setup-<i>.log`).
    pub warm_logs: PathBuf,
    /// Where the setup's commands log.
    pub setup_logs: PathBuf,
    /// How long each of the base's checks may run.
    pub timeout: Duration,
    /// The run's interrupt.
    pub cancel: &'a Cancel,
}

/// What making the environment did, for the run's record and `plait log --setup`.
#[derive(Debug, Clone, Default)]
pub struct SetupOutcome {
    /// Whether the layer was made by this run (else taken as an earlier run left it).
    pub made: bool,
    /// The setup commands run, each with its log.
    pub ran: Vec<(String, PathBuf)>,
    /// How long making it took in all, in milliseconds.
    pub ms: u64,
    /// What making it took, step by step (the layer, the setup, the base's checks).
    pub steps: Vec<(String, u64)>,
}

impl Environment {
    /// The environment of `req`'s base: the kept layer, or one taken over or made now,
    /// set up and warmed. Waits while another run makes it.
    pub async fn prepare(req: EnvRequest<'_>) -> Result<(Environment, SetupOutcome), EnvError> {
        let started = Instant::now();
        let base_hex = req.base.to_string();
        let failed = |why: String| EnvError::Layer {
            base: plait_core::git::short(&base_hex).to_string(),
            why,
        };
        let (includes, files_in) = includes(req.repo, req.setup)?;
        let key = setup_key(req.setup, &req.files, req.base, &files_in);
        let dir = super::layer_dir(&req.envs, req.base, &key);
        // `stable` is the mount point of every view: an empty directory no one writes.
        for made in [&req.envs, &req.stable] {
            fs::create_dir_all(made).map_err(|e| failed(format!("{}: {e}", made.display())))?;
        }
        let lock = lock_file(&dir.with_extension("lock")).map_err(failed)?;
        let mut outcome = SetupOutcome::default();
        loop {
            if req.cancel.is_cancelled() {
                return Err(EnvError::Interrupted);
            }
            if flock(&lock, libc::LOCK_EX | libc::LOCK_NB) {
                break;
            }
            // Another run holds it: in use (then it is ready) or being made (wait).
            if flock(&lock, libc::LOCK_SH | libc::LOCK_NB) {
                if load_record(&dir).is_some_and(|r| r.set_up && r.setup_key == key) {
                    let record = load_record(&dir).unwrap_or_default();
                    let env = Environment::new(req.base, &req, dir, includes, record, lock);
                    outcome.ms = started.elapsed().as_millis() as u64;
                    return Ok((env, outcome));
                }
                flock(&lock, libc::LOCK_UN);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Held alone: make it, or finish making it.
        let laying = Instant::now();
        let record = {
            let (repo, envs, dir, files) = (
                req.repo.to_path_buf(),
                req.envs.clone(),
                dir.clone(),
                req.files.clone(),
            );
            let (base, key, inc) = (req.base, key.clone(), includes.clone());
            let copied = files_in.clone();
            tokio::task::spawn_blocking(move || {
                lay(&repo, &envs, &dir, base, &files, &key, &inc, &copied)
            })
            .await
            .map_err(|e| failed(e.to_string()))?
            .map_err(|e| failed(e.0))?
        };
        let (mut record, made) = record;
        outcome
            .steps
            .push(("environment: base layer".into(), ms_since(laying)));
        record.includes = includes
            .iter()
            .map(|i| (i.path.clone(), i.source.clone()))
            .collect();
        outcome.made = made;
        let env = Environment::new(req.base, &req, dir, includes, record, lock);
        if !env.record.locked().set_up {
            let setting_up = Instant::now();
            outcome.ran = env.run_setup(&req).await?;
            if !outcome.ran.is_empty() {
                outcome
                    .steps
                    .push(("environment: [setup] run".into(), ms_since(setting_up)));
            }
            outcome.made = true;
            env.record.locked().set_up = true;
            env.save();
        }
        let warming = Instant::now();
        if env.warm(&req).await {
            outcome
                .steps
                .push(("environment: checks at the base".into(), ms_since(warming)));
        }
        prune_kept(&req.envs, &env.dir, super::KEEP);
        flock(&env._held, libc::LOCK_SH);
        outcome.ms = started.elapsed().as_millis() as u64;
        Ok((env, outcome))
    }

    fn new(
        base: Oid,
        req: &EnvRequest<'_>,
        dir: PathBuf,
        includes: Vec<Include>,
        record: EnvRecord,
        held: fs::File,
    ) -> Environment {
        Environment {
            base,
            stable: req.stable.clone(),
            dir,
            includes,
            record: Mutex::new(record),
            starts: Mutex::default(),
            _held: held,
        }
    }

    /// Runs `[setup] run` in the base layer, one command after another; the first that
    /// fails stops the run, named with its log.
    async fn run_setup(&self, req: &EnvRequest<'_>) -> Result<Vec<(String, PathBuf)>, EnvError> {
        let _ = fs::create_dir_all(&req.setup_logs);
        let mut settings = req.sandbox.for_checks(req.setup.network);
        settings.network_key = "[setup] network";
        // The user's own step: it reads what it needs (a registry's token included).
        settings.read_all = true;
        let env = vec![("PLAIT_BASE", req.base.to_string())];
        let mut ran = Vec::new();
        for (i, command) in req.setup.run.iter().enumerate() {
            let log = req.setup_logs.join(format!("setup-{}.log", i + 1));
            let _ = fs::write(&log, format!("$ {command}\n"));
            let sandbox =
                Sandbox::new(&settings, vec![self.git_dir()]).with_view(Some(self.base_view()));
            let launch = Launch {
                dir: &self.stable,
                env: &env,
                log: &log,
                timeout: req.setup.timeout,
                cancel: req.cancel,
                sandbox: &sandbox,
            };
            let outcome = shell::run(command, &launch).await;
            ran.push((command.clone(), log.clone()));
            match outcome {
                ShellOutcome::Exited(0) => {}
                ShellOutcome::Interrupted => return Err(EnvError::Interrupted),
                other => {
                    return Err(EnvError::Setup {
                        command: command.clone(),
                        outcome: other.describe(req.setup.timeout),
                        log,
                    })
                }
            }
        }
        Ok(ran)
    }

    /// Runs each list of check commands not yet run in this layer at the base, in it:
    /// plait's own build of the base, which every view and check starts from. A failure is
    /// kept (the check is red before any task), never fatal.
    /// Whether it ran any.
    async fn warm(&self, req: &EnvRequest<'_>) -> bool {
        let mut ran = false;
        for commands in &req.warm {
            if commands.is_empty() || req.cancel.is_cancelled() {
                continue;
            }
            let done = {
                let record = self.record.locked();
                record.warmed.iter().any(|w| w.judges(commands))
            };
            if done {
                continue;
            }
            ran = true;
            let n = self.record.locked().warmed.len() + 1;
            let logs = req.warm_logs.join(n.to_string());
            let _ = fs::create_dir_all(&logs);
            let mut results = Vec::new();
            for (i, command) in commands.iter().enumerate() {
                let log = logs.join(format!("check-{}.log", i + 1));
                let _ = fs::write(&log, format!("$ {command}\n"));
                let sandbox = Sandbox::new(req.sandbox, vec![self.git_dir()])
                    .with_view(Some(self.base_view()));
                let launch = Launch {
                    dir: &self.stable,
                    env: &req.env,
                    log: &log,
                    timeout: req.timeout,
                    cancel: req.cancel,
                    sandbox: &sandbox,
                };
                let passed = match shell::run(command, &launch).await {
                    ShellOutcome::Exited(0) => true,
                    ShellOutcome::Interrupted => return ran,
                    _ => false,
                };
                results.push((command.clone(), passed, sandbox.denials(), log));
            }
            let results: Vec<AtBase<'_>> = results
                .iter()
                .map(|(command, passed, refused, log)| AtBase {
                    command,
                    passed: *passed,
                    refused,
                    log,
                })
                .collect();
            self.note_at_base(Warmed::judged(commands, &results));
        }
        ran
    }
}

fn ms_since(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

/// A file `[setup] include` names, as it was read from the checkout (beneath it, no link
/// followed): copied into the base layer.
#[derive(Debug, Clone)]
pub(crate) struct CopiedFile {
    /// Relative to the checkout's root.
    path: String,
    bytes: Vec<u8>,
    executable: bool,
}

/// The files `[setup] include` names, copied into the base layer.
type Copied = Vec<CopiedFile>;

/// The directories and the files `[setup] include` names in the checkout at `repo`, each
/// found beneath the checkout with no link followed: a directory by its device and inode
/// (what every view's mount of it must show), a file read. A link at the path or on the way is refused, naming it and where it
/// leads; one that is not there is refused unless `[setup] run` may make it.
fn includes(repo: &Path, setup: &SetupSettings) -> Result<(Vec<Include>, Copied), EnvError> {
    if setup.include.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let workdir = Repository::discover(repo)
        .ok()
        .and_then(|r| r.workdir().map(Path::to_path_buf))
        .ok_or_else(|| EnvError::Include {
            path: setup.include[0].clone(),
            why: "the repository has no checkout to share it from".to_string(),
        })?;
    let checkout = Tree::open(&workdir).map_err(|e| EnvError::Include {
        path: setup.include[0].clone(),
        why: e.to_string(),
    })?;
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    for path in &setup.include {
        let refused = |why: String| EnvError::Include {
            path: path.clone(),
            why,
        };
        let source = workdir.join(path);
        match checkout.kind(path) {
            Ok(Some(Kind::Dir)) => {
                let include = Include::open(&checkout, &workdir, path)
                    .map_err(|e| refused(plait_plan::setup::include_link(&workdir, path, &e)))?;
                dirs.push(include);
            }
            Ok(Some(Kind::File { .. })) => match checkout.read(path) {
                Ok(Some(Content::File { bytes, executable })) => files.push(CopiedFile {
                    path: path.clone(),
                    bytes,
                    executable,
                }),
                Ok(_) => {
                    return Err(refused(format!(
                        "{} changed as it was read",
                        source.display()
                    )))
                }
                Err(e) => return Err(refused(plait_plan::setup::include_link(&workdir, path, &e))),
            },
            Ok(Some(Kind::Link)) => {
                let e = std::io::Error::from_raw_os_error(libc::ELOOP);
                return Err(refused(plait_plan::setup::include_link(&workdir, path, &e)));
            }
            Ok(Some(Kind::Other { .. })) => {
                return Err(refused(format!(
                    "{} is neither a file nor a directory; include names ignored files and \
                     directories of the checkout",
                    source.display()
                )))
            }
            // A link where a directory on the way should be reads as nothing there.
            Ok(None) if source.symlink_metadata().is_ok() => {
                let e = std::io::Error::from_raw_os_error(libc::ELOOP);
                return Err(refused(plait_plan::setup::include_link(&workdir, path, &e)));
            }
            Ok(None) if !setup.run.is_empty() => {}
            Ok(None) => {
                return Err(refused(format!(
                "{} is not in your checkout; install it there, or add a [setup] run that makes it",
                source.display()
            )))
            }
            Err(e) => return Err(refused(plait_plan::setup::include_link(&workdir, path, &e))),
        }
    }
    Ok((dirs, files))
}

/// What decides whether a kept layer's setup still holds: the `run` lines, `include`, and
/// the ids of the `key` files (by default the lockfiles and manifests the base tracks, else
/// its whole tree); the included files' contents too, since they are copied in.
fn setup_key(
    setup: &SetupSettings,
    files: &[TreeFile],
    base: Oid,
    copied: &[CopiedFile],
) -> String {
    let mut hash = sha1::Sha1::new();
    for line in setup.run.iter().chain(&setup.include) {
        hash.update(line.as_bytes());
        hash.update(b"\0");
    }
    let globs = plait_core::globs::Globs::new(&setup.key).ok();
    let keyed: Vec<&TreeFile> = files
        .iter()
        .filter(|f| match (&globs, setup.key.is_empty()) {
            (Some(g), false) => g.matches(&f.path),
            _ => {
                let name = f.path.rsplit('/').next().unwrap_or(&f.path);
                LOCKFILES.contains(&name)
            }
        })
        .collect();
    if keyed.is_empty() && !setup.run.is_empty() {
        hash.update(base.as_bytes());
    }
    for file in keyed {
        hash.update(file.path.as_bytes());
        hash.update(file.oid.as_bytes());
    }
    for file in copied {
        hash.update(file.path.as_bytes());
        hash.update(&file.bytes);
    }
    plait_core::hex::lower(&hash.finalize())
}

/// Makes the layer at `dir` hold `base`'s files as `key`'s setup wants them, holding its
/// lock alone: kept as it is, taken over from a layer of an earlier base with the same
/// setup, or written anew; then the included files copied in and the included
/// directories' mount points made. Returns its record, and whether it was written now.
#[allow(clippy::too_many_arguments)]
fn lay(
    repo: &Path,
    envs: &Path,
    dir: &Path,
    base: Oid,
    files: &[TreeFile],
    key: &str,
    includes: &[Include],
    copied: &[CopiedFile],
) -> Result<(EnvRecord, bool), LayerError> {
    let repo = Repository::discover(repo).map_err(|e| LayerError(e.to_string()))?;
    let tree = dir.join("tree");
    // A layer whose setup did not finish (a failed command, a crash) is made anew: what
    // the command left half-done is nothing to build on.
    let kept = load_record(dir).filter(|r| tree.is_dir() && r.setup_key == key && r.set_up);
    let made = kept.is_none();
    let mut record = match kept {
        Some(record) => record,
        None => {
            remove_tree(dir);
            let from = take_over(&repo, envs, dir, base, key)?;
            if from.is_none() {
                let staging = envs.join(format!(".staging-{base}-{}", std::process::id()));
                remove_tree(&staging);
                fs::create_dir_all(&staging).map_err(|e| LayerError(e.to_string()))?;
                crate::workspace::write_tree(&repo, &staging, files).map_err(LayerError)?;
                fs::create_dir_all(dir).map_err(|e| LayerError(e.to_string()))?;
                fs::rename(&staging, &tree).map_err(|e| LayerError(e.to_string()))?;
            }
            EnvRecord {
                base: base.to_string(),
                setup_key: key.to_string(),
                set_up: false,
                warmed: Vec::new(),
                from,
                includes: Vec::new(),
            }
        }
    };
    record.set_up = record.set_up && record.setup_key == key;
    let failed = |e: std::io::Error| LayerError(e.to_string());
    let files = Tree::open(&tree).map_err(failed)?;
    for file in copied {
        files
            .write(&file.path, &file.bytes, file.executable)
            .map_err(failed)?;
    }
    for include in includes {
        if files
            .kind(&include.path)
            .map_err(failed)?
            .is_some_and(|k| k != Kind::Dir)
        {
            files.remove(&include.path).map_err(failed)?;
        }
        files.create_dir_all(&include.path).map_err(failed)?;
    }
    // The layer's own git directory: a check at the base, and the setup, see the base
    // checked out. They write it (the base's own code, before any task's), and plait
    // writes it again only beneath its handle.
    let index = dir.join("index");
    if !index.exists() {
        layer::base_index(&repo, &tree, base, &index)?;
    }
    let own = Tree::open(dir).map_err(failed)?;
    own.create_dir_all("git").map_err(failed)?;
    let admin = own.open_dir("git").map_err(failed)?;
    layer::git_dir(&repo, &admin, base, &index, &Default::default())?;
    let link = format!("gitdir: {}\n", admin.root().display());
    files
        .write(".git", link.as_bytes(), false)
        .map_err(failed)?;
    save_record(dir, &record);
    Ok((record, made))
}

/// Moves the nearest kept layer of an ancestor of `base` with the same setup (`key`) that
/// no run holds to `dir`, its tracked files rewritten to `base`'s where they differ; its
/// installed dependencies and build come along. Returns the base it was made for.
fn take_over(
    repo: &Repository,
    envs: &Path,
    dir: &Path,
    base: Oid,
    key: &str,
) -> Result<Option<String>, LayerError> {
    let Ok(entries) = fs::read_dir(envs) else {
        return Ok(None);
    };
    let mut found: Vec<(usize, PathBuf, Oid)> = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(record) = load_record(&path) else {
            continue;
        };
        let Ok(old) = Oid::from_str(&record.base) else {
            continue;
        };
        if path == dir || !record.set_up || record.setup_key != key {
            continue;
        }
        if !repo.graph_descendant_of(base, old).unwrap_or(false) {
            continue;
        }
        let distance = repo
            .graph_ahead_behind(base, old)
            .map_or(usize::MAX, |(ahead, _)| ahead);
        found.push((distance, path, old));
    }
    found.sort();
    for (_, path, old) in found {
        let Ok(lock) = lock_file(&path.with_extension("lock")) else {
            continue;
        };
        if !flock(&lock, libc::LOCK_EX | libc::LOCK_NB) {
            continue;
        }
        fs::rename(&path, dir).map_err(|e| LayerError(e.to_string()))?;
        let _ = fs::remove_file(path.with_extension("lock"));
        let _ = fs::remove_file(dir.join("index"));
        remove_tree(&dir.join("starts"));
        let changed = layer::changes(repo, old, base)?;
        let tree = Tree::open(&dir.join("tree")).map_err(|e| LayerError(e.to_string()))?;
        layer::apply(repo, &tree, &changed, &|_| false)?;
        return Ok(Some(old.to_string()));
    }
    Ok(None)
}

/// What a run of `plan` would find for its environment, for `plait run --dry-run`: the
/// kept base layer, one it would take over, or one it would make; where views are mounted.
/// Reads only.
pub fn preview(repo: &Path, envs: &Path, plan: &plait_plan::ResolvedPlan, stable: &Path) -> String {
    if let Err(why) = plait_sandbox::sandbox::view_support() {
        return format!(
            "no base layer: checks copy a seed checkout and views are filled in ({why}); \
             paths naming your checkout reach your working copy"
        );
    }
    let copied = includes(repo, &plan.setup)
        .map(|(_, f)| f)
        .unwrap_or_default();
    let key = setup_key(&plan.setup, &plan.files, plan.base, &copied);
    let dir = super::layer_dir(envs, plan.base, &key);
    let at = format!("mounted at {}", stable.display());
    if let Some(record) = load_record(&dir).filter(|r| r.setup_key == key && r.set_up) {
        return format!(
            "the base layer of {} kept from an earlier run ({} list(s) of checks built in it), {at}",
            plait_core::git::short(&record.base),
            record.warmed.len()
        );
    }
    let mut steps = vec!["its tracked files"];
    if !plan.setup.include.is_empty() {
        steps.push("[setup] include");
    }
    if !plan.setup.run.is_empty() {
        steps.push("[setup] run");
    }
    if !(plan.checks.task.is_empty() && plan.checks.merged.is_empty()) {
        steps.push("the checks run at the base");
    }
    format!(
        "a base layer of {} made before any task ({}), or an earlier base's with the same setup moved here, {at}",
        plait_core::git::short(&plan.base.to_string()),
        steps.join(", ")
    )
}
