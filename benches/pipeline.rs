//! Pipeline benchmark: prints figures, asserts nothing about time.
//!
//! In one run, against one generated repository (so the ratios are meaningful):
//!
//! 1. generate a repository of `dirs` × `files` small text files plus a `.gitignore`;
//! 2. anchor A: `git worktree add` (full checkout), a handful of times;
//! 3. anchor B: git CLI sparse worktrees (`worktree add --no-checkout`, `sparse-checkout
//!    set`, `checkout`), non-cone and cone;
//! 4. plait: one owned-file worktree per directory through `plait_trees::workspace::create`,
//!    sequentially, on 2 threads, and the way the orchestrator calls it; disk use;
//! 5. merge: one commit per task branch, then `plait_stages::merge::merge` against a loop of
//!    `git merge-tree --write-tree`;
//! 6. plan validation (`plait_plan::resolve`) of one task per directory.
//!
//! Scale with `PLAIT_BENCH_DIRS`, `PLAIT_BENCH_FILES`, `PLAIT_BENCH_REPS` (or `--dirs N`,
//! `--files N`, `--reps N`, `--quick`); `PLAIT_BENCH_KEEP=1` keeps the temporary directory.
//! Run it through `./bench` or `cargo bench --bench pipeline`.
//!
//! Noise: every worktree figure is mostly file creation. On ext4, creating files within a
//! few minutes of deleting many (a previous run's temporary directory, `plait clean`) is
//! several times slower, because the inode allocator skips recently freed inodes; nothing
//! is deleted before the end of a run for that reason, and the "fs probe" rows show how
//! fast the file system was at the start and the end. Compare runs whose probes agree.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{bail, Context, Result};

mod common;
use common::{
    bytes, fast_import, fs_probe, git, isolate_git, median, secs, settle, stage, time, DATE, EMAIL,
    NAME,
};
use git2::build::{CheckoutBuilder, TreeUpdateBuilder};
use git2::{FileMode, Oid, Repository, RepositoryInitOptions, Signature, Time};

use plait_core::git::TreeFile;
use plait_core::globs::Globs;
use plait_plan::layout::Layout;
use plait_plan::{AgentSpec, PlanFile, ResolvedPlan, TaskFile};
use plait_stages::merge::{BranchInput, MergeSettings};
use plait_trees::workspace::{self, WorktreeSpec};

const GITIGNORE: &str = "/target\n*.log\n*.tmp\n";

struct Config {
    dirs: usize,
    files: usize,
    reps: usize,
    full: usize,
    sparse: usize,
    keep: bool,
}

impl Config {
    fn load() -> Result<Config> {
        let env = |name: &str, default: usize| -> Result<usize> {
            match std::env::var(name) {
                Ok(v) => v.trim().parse().with_context(|| format!("{name}={v}")),
                Err(_) => Ok(default),
            }
        };
        let mut cfg = Config {
            dirs: env("PLAIT_BENCH_DIRS", 100)?,
            files: env("PLAIT_BENCH_FILES", 50)?,
            reps: env("PLAIT_BENCH_REPS", 3)?,
            full: 5,
            sparse: 10,
            keep: std::env::var_os("PLAIT_BENCH_KEEP").is_some_and(|v| v != "0"),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let (key, inline) = match arg.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (arg.clone(), None),
            };
            let mut value = |key: &str| -> Result<usize> {
                let v = match inline.clone() {
                    Some(v) => v,
                    None => args
                        .next()
                        .with_context(|| format!("{key} needs a value"))?,
                };
                v.parse().with_context(|| format!("{key} {v}"))
            };
            match key.as_str() {
                "--dirs" => cfg.dirs = value("--dirs")?,
                "--files" => cfg.files = value("--files")?,
                "--reps" => cfg.reps = value("--reps")?,
                "--quick" => {
                    cfg.dirs = 20;
                    cfg.reps = 1;
                }
                "--keep" => cfg.keep = true,
                "-h" | "--help" => {
                    println!(
                        "usage: bench [--dirs N] [--files N] [--reps N] [--quick] [--keep]\n\
                         env: PLAIT_BENCH_DIRS PLAIT_BENCH_FILES PLAIT_BENCH_REPS PLAIT_BENCH_KEEP"
                    );
                    std::process::exit(0);
                }
                // `cargo bench` passes `--bench`, and possibly a filter: ignore them.
                _ => {}
            }
        }
        if cfg.dirs == 0 || cfg.files == 0 || cfg.dirs > 1000 {
            bail!("need 1..=1000 dirs and at least one file per dir");
        }
        cfg.reps = cfg.reps.max(1);
        cfg.full = cfg.full.min(cfg.dirs);
        cfg.sparse = cfg.sparse.min(cfg.dirs);
        Ok(cfg)
    }
}

fn sig() -> Result<Signature<'static>> {
    Ok(Signature::new(NAME, EMAIL, &Time::new(1_700_000_000, 0))?)
}

fn dir_name(d: usize) -> String {
    format!("d{d:03}")
}

fn file_path(d: usize, f: usize) -> String {
    format!("d{d:03}/f{f:03}.txt")
}

/// A few hundred bytes of text, different for every file.
fn content(d: usize, f: usize) -> String {
    let mut s = String::new();
    for line in 0..8 {
        let _ = writeln!(
            s,
            "dir {d:03} file {f:03} line {line}: the quick brown fox jumps over the lazy dog"
        );
    }
    s
}

// ---------------------------------------------------------------------------------------
// Timing and formatting.

/// Median seconds of `n` runs of `f`.
fn median_of(n: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        times.push(time(&mut f)?.0);
    }
    Ok(median(&times))
}

fn ratio(slow: f64, fast: f64) -> String {
    if fast >= slow {
        format!("{:.1}x slower", fast / slow)
    } else {
        format!("{:.1}x faster", slow / fast)
    }
}

/// The 1, 5 and 15 minute load averages: a busy machine makes every figure worse.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

/// Apparent bytes, allocated bytes and number of files under `paths` (not following links).
fn disk_use(paths: &[&Path]) -> Result<(u64, u64, usize)> {
    let (mut apparent, mut allocated, mut files) = (0, 0, 0);
    for path in paths {
        for entry in walkdir::WalkDir::new(path).follow_links(false) {
            let meta = entry?.metadata()?;
            apparent += meta.len();
            allocated += meta.blocks() * 512;
            if !meta.is_dir() {
                files += 1;
            }
        }
    }
    Ok((apparent, allocated, files))
}

/// The administrative directory a linked worktree's `.git` file points at.
fn admin_of(worktree: &Path) -> Result<PathBuf> {
    let text = std::fs::read_to_string(worktree.join(".git"))?;
    let dir = text
        .trim()
        .strip_prefix("gitdir: ")
        .context("not a linked worktree")?;
    Ok(PathBuf::from(dir))
}

// ---------------------------------------------------------------------------------------
// 1. The repository.

/// `git init` + `git fast-import` (one pack) + `git reset --hard` (index and files).
fn generate_fast_import(path: &Path, cfg: &Config) -> Result<()> {
    std::fs::create_dir_all(path)?;
    git(path, &["init", "-q", "-b", "main"])?;
    git(path, &["config", "gc.auto", "0"])?;
    git(path, &["config", "maintenance.auto", "false"])?;
    let mut stream = String::with_capacity(cfg.dirs * cfg.files * 500);
    let _ = write!(
        stream,
        "commit refs/heads/main\nauthor {NAME} <{EMAIL}> {DATE}\n\
         committer {NAME} <{EMAIL}> {DATE}\ndata 5\nbase\n\n"
    );
    let mut add = |path: &str, text: &str| {
        let _ = write!(
            stream,
            "M 100644 inline {path}\ndata {}\n{text}\n",
            text.len()
        );
    };
    add(".gitignore", GITIGNORE);
    for d in 0..cfg.dirs {
        for f in 0..cfg.files {
            add(&file_path(d, f), &content(d, f));
        }
    }
    fast_import(path, &stream)?;
    Ok(())
}

/// The same repository through git2: loose objects, tree builders, a forced checkout.
fn generate_git2(path: &Path, cfg: &Config) -> Result<()> {
    let repo = Repository::init_opts(path, RepositoryInitOptions::new().initial_head("main"))?;
    let mut root = repo.treebuilder(None)?;
    root.insert(".gitignore", repo.blob(GITIGNORE.as_bytes())?, 0o100644)?;
    for d in 0..cfg.dirs {
        let mut dir = repo.treebuilder(None)?;
        for f in 0..cfg.files {
            let blob = repo.blob(content(d, f).as_bytes())?;
            dir.insert(format!("f{f:03}.txt"), blob, 0o100644)?;
        }
        root.insert(dir_name(d), dir.write()?, 0o040000)?;
    }
    let tree = repo.find_tree(root.write()?)?;
    let sig = sig()?;
    repo.commit(Some("HEAD"), &sig, &sig, "base\n", &tree, &[])?;
    repo.checkout_head(Some(CheckoutBuilder::new().force()))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 4. plait worktrees.

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// The layout made from the task's glob on the spot; one repository per thread.
    Prefix,
    /// As `orchestrator::prepare_worktree`: `git::open` per task, `ResolvedTask::checks_out`.
    Orchestrator,
}

struct PlaitRun<'a> {
    repo: &'a Path,
    root: &'a Path,
    run: &'a str,
    base: Oid,
    dirs: usize,
    plan: &'a ResolvedPlan,
}

impl PlaitRun<'_> {
    fn worktree(&self, d: usize) -> PathBuf {
        self.root.join(self.run).join(dir_name(d))
    }

    fn branch(&self, d: usize) -> String {
        format!("plait/{}/{}", self.run, dir_name(d))
    }

    fn admin_name(&self, d: usize) -> String {
        format!("plait-{}-{}", self.run, dir_name(d))
    }

    fn create_one(
        &self,
        repo: &Repository,
        files: &[TreeFile],
        d: usize,
        mode: Mode,
    ) -> Result<()> {
        let branch = self.branch(d);
        let admin = self.admin_name(d);
        let path = self.worktree(d);
        let own;
        let repo = if mode == Mode::Orchestrator {
            own = plait_core::git::open(self.repo)?;
            &own
        } else {
            repo
        };
        let computed;
        let layout = match mode {
            // The task's layout made here, from its one glob: what resolving a plan costs
            // per task.
            Mode::Prefix => {
                let owns = Globs::new(&[format!("/{}/", dir_name(d))])?;
                computed = Layout::new(files, &owns, &Globs::empty(), false);
                &computed
            }
            Mode::Orchestrator => &self.plan.tasks[d].layout,
        };
        let spec = WorktreeSpec {
            branch: &branch,
            admin_name: &admin,
            path: &path,
            base: self.base,
            files,
            layout,
        };
        workspace::create(repo, &spec)?;
        Ok(())
    }

    /// Creates every worktree on `threads` threads; returns the wall time, flatten included.
    fn create_all(&self, threads: usize, mode: Mode) -> Result<f64> {
        let start = Instant::now();
        let repo = Repository::open(self.repo)?;
        let files = plait_core::git::flatten_tree(&repo.find_commit(self.base)?.tree()?)?;
        if threads <= 1 {
            for d in 0..self.dirs {
                self.create_one(&repo, &files, d, mode)?;
            }
        } else {
            let next = AtomicUsize::new(0);
            std::thread::scope(|s| -> Result<()> {
                let workers: Vec<_> = (0..threads)
                    .map(|_| {
                        s.spawn(|| -> Result<()> {
                            let repo = Repository::open(self.repo)?;
                            loop {
                                let d = next.fetch_add(1, Ordering::Relaxed);
                                if d >= self.dirs {
                                    return Ok(());
                                }
                                self.create_one(&repo, &files, d, mode)?;
                            }
                        })
                    })
                    .collect();
                for w in workers {
                    w.join().map_err(|_| anyhow::anyhow!("worker panicked"))??;
                }
                Ok(())
            })?;
        }
        Ok(start.elapsed().as_secs_f64())
    }
}

// ---------------------------------------------------------------------------------------

struct Table {
    rows: Vec<(String, String)>,
}

impl Table {
    fn row(&mut self, label: impl Into<String>, value: impl Into<String>) {
        let (label, value) = (label.into(), value.into());
        eprintln!("[bench]   {label}: {value}");
        self.rows.push((label, value));
    }

    fn gap(&mut self) {
        self.rows.push((String::new(), String::new()));
    }

    fn print(&self) {
        let width = self
            .rows
            .iter()
            .map(|(l, _)| l.chars().count())
            .max()
            .unwrap_or(0);
        for (label, value) in &self.rows {
            if label.is_empty() {
                println!();
            } else {
                println!("  {label:<width$}  {value}");
            }
        }
    }
}

/// The sandbox's cost: `true` spawned through `plait_sandbox::shell` with and without Landlock
/// (interleaved), then whole runs of `n` no-op exec tasks with `mode = "off"` and `"auto"`
/// (interleaved, `-j 2`).
fn sandbox_costs(t: &mut Table, root: &Path, repo: &Path, n: usize, reps: usize) -> Result<()> {
    use plait_sandbox::sandbox::{Sandbox, SandboxMode, SandboxSettings};
    use plait_sandbox::shell::{self, Launch};
    use std::time::Duration;

    stage("7. sandbox: cost per spawn");
    let confinement = plait_sandbox::sandbox::support().clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let dir = root.join("spawn");
    std::fs::create_dir_all(&dir)?;
    let log = dir.join("spawn.log");
    let (_interrupt, cancel) = plait_core::cancel::Cancel::new();
    let walled = SandboxSettings {
        mode: SandboxMode::Auto,
        temp_root: root.to_path_buf(),
        ..SandboxSettings::default()
    };
    let settings = walled.with_network(plait_sandbox::sandbox::Network::On);
    // The same walls with reads left open (as before reads became an allow-list).
    let reads_open = SandboxSettings {
        read_all: true,
        ..settings.clone()
    };
    let open = Sandbox::none();
    let spawns = 200;
    let (mut on, mut off, mut netless, mut unread) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    runtime.block_on(async {
        for i in 0..4 * spawns {
            // A new sandbox each time, as each task has: its ruleset and TMPDIR are made
            // (and the directory removed) inside the timed span; every third with the
            // network off too (a namespace of its own where the system allows).
            let started = Instant::now();
            let confined = match i % 4 {
                0 => Some(Sandbox::new(&settings, vec![dir.clone()])),
                2 => Some(Sandbox::new(&walled, vec![dir.clone()])),
                3 => Some(Sandbox::new(&reads_open, vec![dir.clone()])),
                _ => None,
            };
            let sandbox = confined.as_ref().unwrap_or(&open);
            let launch = Launch {
                dir: &dir,
                env: &[],
                log: &log,
                timeout: Duration::from_secs(10),
                cancel: &cancel,
                sandbox,
            };
            let outcome = shell::run_argv(&["true".to_string()], &launch).await;
            drop(confined);
            let took = started.elapsed().as_secs_f64();
            if outcome != shell::ShellOutcome::Exited(0) {
                bail!("`true` did not succeed: {outcome:?}");
            }
            match i % 4 {
                0 => on.push(took),
                1 => off.push(took),
                2 => netless.push(took),
                _ => unread.push(took),
            }
        }
        Ok(())
    })?;
    let (on_s, off_s, netless_s, unread_s) =
        (median(&on), median(&off), median(&netless), median(&unread));
    t.gap();
    t.row(
        format!("sandbox: spawn `true`, median of {spawns}"),
        format!(
            "{} confined ({}), {} unconfined: +{:.2} ms per spawn (a sandbox's TMPDIR and ruleset, its spawning thread, posix_spawn)",
            secs(on_s),
            match &confinement {
                plait_sandbox::sandbox::Support::Landlock(abi) => format!("Landlock ABI {abi}"),
                plait_sandbox::sandbox::Support::Missing(why) => format!("NOT confined: {why}"),
            },
            secs(off_s),
            (on_s - off_s) * 1e3
        ),
    );
    t.row(
        format!("sandbox: the read allow-list, median of {spawns}"),
        format!(
            "{} with reads walled, {} with reads open: +{:.2} ms per spawn for the read rules (goal <= +1 ms)",
            secs(on_s),
            secs(unread_s),
            (on_s - unread_s) * 1e3
        ),
    );
    t.row(
        format!("sandbox: spawn `true` with the network off, median of {spawns}"),
        format!(
            "{} ({}): +{:.2} ms per spawn over confined with the network on",
            secs(netless_s),
            walled.describe(),
            (netless_s - on_s) * 1e3
        ),
    );

    stage("7. sandbox: whole runs of no-op tasks");
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..reps.max(5) {
        for (k, mode) in ["off", "auto"].iter().enumerate() {
            let mut toml = format!(
                "goal = \"bench\"\n[defaults]\nagent = {{ exec = \"true\" }}\nsandbox = {{ mode = \"{mode}\" }}\n"
            );
            for d in 0..n {
                let id = dir_name(d);
                let _ = writeln!(
                    toml,
                    "[[task]]\nid = \"{id}\"\nprompt = \"p\"\nowns = [\"/{id}/\"]"
                );
            }
            let plan_path = root.join(format!("sandbox-{mode}.toml"));
            std::fs::write(&plan_path, &toml)?;
            settle();
            let (s, ()) = time(|| {
                let opened = plait_core::git::open(repo)?;
                let parsed = plait_plan::parse(&toml, &plan_path)?;
                let resolved = plait_plan::resolve_with_env(&opened, parsed, &plan_path, &|k| {
                    std::env::var(k).ok()
                })?;
                let settings = plait_run::orchestrator::RunSettings {
                    context: plait_stages::context::Context::from_repo(
                        opened,
                        repo,
                        plait_stages::context::process_env(),
                        std::env::current_exe()?,
                    ),
                    store: None,
                    remote: None,
                    plan: std::sync::Arc::new(resolved),
                    plan_path: plan_path.clone(),
                    plan_text: toml.clone(),
                    jobs: 2,
                    worktree_root: None,
                    max_cost: None,
                    groups: Some(0),
                };
                let prepared = plait_run::orchestrator::prepare(settings)?;
                let state = runtime.block_on(plait_run::orchestrator::execute(
                    prepared,
                    None,
                    plait_core::cancel::Cancel::new().1,
                ))?;
                if state
                    .tasks
                    .iter()
                    .any(|t| t.state != plait_core::state::TaskState::Done)
                {
                    bail!("a no-op task did not finish");
                }
                Ok(())
            })?;
            times[k].push(s);
        }
    }
    let (off_run, on_run) = (median(&times[0]), median(&times[1]));
    t.row(
        format!("sandbox: run of {n} no-op exec tasks, -j 2"),
        format!(
            "{} confined, {} with mode = \"off\": {:+.1}% (median of {})",
            secs(on_run),
            secs(off_run),
            100.0 * (on_run - off_run) / off_run,
            times[0].len()
        ),
    );
    Ok(())
}

fn plan_file(dirs: usize) -> PlanFile {
    PlanFile {
        goal: "benchmark".to_string(),
        base: None,
        defaults: Default::default(),
        tasks: (0..dirs)
            .map(|d| TaskFile {
                agent: Some(AgentSpec::Exec("true".into())),
                ..TaskFile::new(
                    dir_name(d),
                    format!("edit {}", dir_name(d)),
                    vec![format!("/{}/", dir_name(d))],
                )
            })
            .collect(),
        ..PlanFile::default()
    }
}

/// What the sections share: the configuration, the temporary directory and the generated
/// repository.
struct Bench {
    cfg: Config,
    root: PathBuf,
    repo_path: PathBuf,
    /// Where the worktrees go: git CLI ones directly, plait's under `plait/`.
    wt: PathBuf,
    plait_root: PathBuf,
    base: String,
    base_oid: Oid,
    /// Files in the repository, `.gitignore` included.
    total_files: usize,
}

impl Bench {
    /// The worktrees plait made for run `run`.
    fn plait_run<'a>(&'a self, run: &'a str, plan: &'a ResolvedPlan) -> PlaitRun<'a> {
        PlaitRun {
            repo: &self.repo_path,
            root: &self.plait_root,
            run,
            base: self.base_oid,
            dirs: self.cfg.dirs,
            plan,
        }
    }
}

/// Section 6's figures: measured before plait's worktrees (the orchestrator variant needs
/// the plan), printed after the merge.
struct PlanFigures {
    resolved: ResolvedPlan,
    resolve_s: f64,
    owned_ok: bool,
    flatten_s: f64,
    singles: usize,
    single_s: f64,
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let tmp = tempfile::Builder::new().prefix("plait-bench-").tempdir()?;
    let root = tmp.path().canonicalize()?;
    let empty = root.join("empty-config");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    print_header(&cfg, &root)?;
    let mut t = Table { rows: Vec::new() };
    let probe_start = fs_probe(&root.join("probe-start"))?;

    // 1-3: the repository, and git's own worktrees to compare with.
    let b = generate(&mut t, cfg, root)?;
    full_worktrees(&mut t, &b)?;
    let sparse_total = sparse_worktrees(&mut t, &b)?;
    // 6 is measured here (read-only, and 4's orchestrator variant needs the plan); its rows
    // come after 5.
    let repo = Repository::open(&b.repo_path)?;
    let plan = plan_validation(&b, &repo)?;
    // 4: plait's worktrees, what one costs and holds.
    let (kept_run, plait_seq) = plait_worktrees(&mut t, &b, &plan, sparse_total)?;
    per_worktree_costs(&mut t, &b, &repo, &plan.resolved)?;
    let kept = b.plait_run(&kept_run, &plan.resolved);
    disk_use_rows(&mut t, &b, &repo, &kept)?;
    sanity_checks(&mut t, &b, &kept)?;
    // 5, 6's rows, 7.
    merge_costs(&mut t, &b, &repo, &kept)?;
    plan_rows(&mut t, &b, &plan, plait_seq);
    sandbox_costs(&mut t, &b.root, &b.repo_path, b.cfg.dirs, b.cfg.reps)?;
    fs_probe_end(&mut t, &b.root, probe_start)?;
    print_summary(&t, b.cfg.dirs);

    if b.cfg.keep {
        let path = tmp.keep();
        println!("\nkept {}", path.display());
    }
    Ok(())
}

/// The lines before the table: the scale, the machine, git's version, where it all goes.
fn print_header(cfg: &Config, root: &Path) -> Result<()> {
    let total_files = cfg.dirs * cfg.files + 1;
    let git_version = git(root, &["--version"])?;
    println!(
        "plait pipeline benchmark: {} dirs x {} files (+ .gitignore) = {total_files} files, \
         {} repetition(s), {} cores, {}",
        cfg.dirs,
        cfg.files,
        cfg.reps,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        git_version.trim()
    );
    println!("temporary directory: {}", root.display());
    println!("load average at start: {}", load_average());
    Ok(())
}

/// Section 1: The repository, made twice (fast-import, used; git2, for comparison).
fn generate(t: &mut Table, cfg: Config, root: PathBuf) -> Result<Bench> {
    stage("1. generating the repository");
    let repo_path = root.join("repo");
    let (gen_fi, ()) = time(|| generate_fast_import(&repo_path, &cfg))?;
    let (gen_g2, ()) = time(|| generate_git2(&root.join("repo-git2"), &cfg))?;
    t.row(
        "repo: generate (git fast-import + reset --hard)",
        format!("{}   (used: one pack, like a real clone)", secs(gen_fi)),
    );
    t.row(
        "repo: generate (git2 blobs + treebuilder + checkout)",
        format!("{}   (loose objects; for comparison only)", secs(gen_g2)),
    );
    let base = git(&repo_path, &["rev-parse", "HEAD"])?.trim().to_string();
    let base_oid = Oid::from_str(&base)?;
    let wt = root.join("wt");
    std::fs::create_dir_all(&wt)?;
    Ok(Bench {
        total_files: cfg.dirs * cfg.files + 1,
        cfg,
        root,
        repo_path,
        plait_root: wt.join("plait"),
        wt,
        base,
        base_oid,
    })
}

/// Section 2: Anchor A: full worktrees through `git worktree add`.
fn full_worktrees(t: &mut Table, b: &Bench) -> Result<()> {
    let n = b.cfg.dirs;
    stage("2. anchor A: git worktree add (full)");
    let mut full_times = Vec::new();
    settle();
    for i in 0..b.cfg.full {
        let path = b.wt.join(format!("full-{i}"));
        let branch = format!("bench/full/{i}");
        let p = path.to_str().context("path")?;
        let (s, _) = time(|| {
            git(
                &b.repo_path,
                &["worktree", "add", "-q", "-b", &branch, p, &b.base],
            )
        })?;
        full_times.push(s);
    }
    let full_each = median(&full_times);
    t.gap();
    t.row(
        "worktrees: git worktree add (full)",
        format!(
            "{} each, median of {}   ({} for {n}, extrapolated)",
            secs(full_each),
            b.cfg.full,
            secs(full_each * n as f64)
        ),
    );
    Ok(())
}

/// Section 3: Anchor B: sparse worktrees through the CLI, non-cone and cone. Returns the
/// faster one's time per worktree times the number of tasks.
fn sparse_worktrees(t: &mut Table, b: &Bench) -> Result<f64> {
    let n = b.cfg.dirs;
    stage("3. anchor B: git CLI sparse worktrees");
    let mut sparse_each = Vec::new();
    for cone in [false, true] {
        let mut times = Vec::new();
        settle();
        for i in 0..b.cfg.sparse {
            let name = format!("sparse-{}-{i}", if cone { "cone" } else { "nocone" });
            let path = b.wt.join(&name);
            let p = path.to_str().context("path")?;
            let branch = format!("bench/{name}");
            let dir = dir_name((i * 7 + usize::from(cone)) % n);
            let (s, _) = time(|| {
                git(
                    &b.repo_path,
                    &[
                        "worktree",
                        "add",
                        "-q",
                        "--no-checkout",
                        "-b",
                        &branch,
                        p,
                        &b.base,
                    ],
                )?;
                if cone {
                    git(&path, &["sparse-checkout", "set", "--cone", &dir])?;
                } else {
                    let pattern = format!("/{dir}/");
                    git(
                        &path,
                        &[
                            "sparse-checkout",
                            "set",
                            "--no-cone",
                            &pattern,
                            "/.gitignore",
                        ],
                    )?;
                }
                git(&path, &["checkout", "-q"])
            })?;
            times.push(s);
        }
        let each = median(&times);
        sparse_each.push(each);
        t.row(
            format!(
                "worktrees: git CLI sparse ({})",
                if cone { "cone" } else { "non-cone" }
            ),
            format!(
                "{} each, median of {}   ({} for {n}, extrapolated)",
                secs(each),
                b.cfg.sparse,
                secs(each * n as f64)
            ),
        );
    }
    let sparse_best = sparse_each.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(sparse_best * n as f64)
}

/// Section 6: Plan validation, of one task per directory and of many single-file tasks (run
/// early: read-only, and the orchestrator variant of section 4 needs the plan). Prints
/// nothing; [`plan_rows`] does.
fn plan_validation(b: &Bench, repo: &Repository) -> Result<PlanFigures> {
    let n = b.cfg.dirs;
    stage("6. plan validation");
    let plan = plan_file(n);
    let mut resolved = None;
    let mut resolve_times = Vec::new();
    for _ in 0..b.cfg.reps {
        let p = plan.clone();
        settle();
        let (s, r) = time(|| Ok(plait_plan::resolve(repo, p, Path::new("bench.toml"))?))?;
        resolve_times.push(s);
        resolved = Some(r);
    }
    let resolved = resolved.context("no repetitions")?;
    let resolve_s = median(&resolve_times);
    let owned_ok = resolved
        .tasks
        .iter()
        .all(|task| task.owned.len() == b.cfg.files);
    let base_tree = repo.find_commit(b.base_oid)?.tree()?;
    let flatten_s = median_of(b.cfg.reps.max(5), || {
        plait_core::git::flatten_tree(&base_tree)?;
        Ok(())
    })?;
    // Validation cost grows with tasks x files: a second point with many single-file tasks.
    let singles = (5 * n).min(n * b.cfg.files);
    let single_plan = PlanFile {
        tasks: (0..singles)
            .map(|i| {
                let (d, f) = (i % n, (i / n) % b.cfg.files);
                TaskFile {
                    agent: Some(AgentSpec::Exec("true".into())),
                    ..TaskFile::new(
                        format!("t{i:04}"),
                        "edit".to_string(),
                        vec![format!("/{}", file_path(d, f))],
                    )
                }
            })
            .collect(),
        ..plan_file(0)
    };
    let mut single_times = Vec::new();
    for _ in 0..b.cfg.reps {
        let p = single_plan.clone();
        settle();
        let (s, r) = time(|| Ok(plait_plan::resolve(repo, p, Path::new("bench.toml"))?))?;
        single_times.push(s);
        std::hint::black_box(r.tasks.len());
    }
    Ok(PlanFigures {
        resolved,
        resolve_s,
        owned_ok,
        flatten_s,
        singles,
        single_s: median(&single_times),
    })
}

/// Section 4: plait's worktrees, one per directory: sequentially, on 2 threads, and as the
/// orchestrator makes them. Returns the run whose worktrees the later sections look at (the
/// last sequential one) and the sequential time.
fn plait_worktrees(
    t: &mut Table,
    b: &Bench,
    plan: &PlanFigures,
    sparse_total: f64,
) -> Result<(String, f64)> {
    let n = b.cfg.dirs;
    stage("4. plait worktrees");
    let mut kept = None;
    let variants: [(&str, usize, Mode); 3] = [
        ("seq", 1, Mode::Prefix),
        ("par", 2, Mode::Prefix),
        ("orch", 1, Mode::Orchestrator),
    ];
    // Repetitions outside, variants inside, so drift on a noisy machine hits all alike.
    let mut times = vec![Vec::new(); variants.len()];
    for rep in 0..b.cfg.reps {
        for (v, &(tag, threads, mode)) in variants.iter().enumerate() {
            let run = format!("{tag}{rep}");
            let pr = b.plait_run(&run, &plan.resolved);
            settle();
            times[v].push(pr.create_all(threads, mode)?);
            // Nothing is deleted until the end: on ext4, creating files soon after
            // deleting many is slow (the allocator skips recently freed inodes).
            if tag == "seq" && rep + 1 == b.cfg.reps {
                kept = Some(run);
            }
        }
    }
    let results: Vec<f64> = times.iter().map(|t| median(t)).collect();
    let kept_run = kept.context("no kept run")?;
    let plait_seq = results[0];
    t.gap();
    for (s, label) in results.iter().zip([
        format!("worktrees: plait, {n}, 1 thread"),
        format!("worktrees: plait, {n}, 2 threads"),
        format!("worktrees: plait, {n}, as orchestrator"),
    ]) {
        t.row(
            label,
            format!(
                "{} total  ({} each)   {} than git CLI sparse x{n}",
                secs(*s),
                secs(s / n as f64),
                ratio(sparse_total, *s)
            ),
        );
    }
    t.row(
        "  note",
        format!(
            "median of {}; totals include one flatten_tree ({}); 'as orchestrator' = \
             git::open per task + ResolvedTask::checks_out; ratios against the faster \
             git CLI sparse variant, extrapolated to {n}",
            b.cfg.reps,
            secs(plan.flatten_s)
        ),
    );
    Ok((kept_run, plait_seq))
}

/// Section 4: Where plait's time goes, per worktree: selecting the files, the index,
/// opening the repository.
fn per_worktree_costs(
    t: &mut Table,
    b: &Bench,
    repo: &Repository,
    resolved: &ResolvedPlan,
) -> Result<()> {
    let base_tree = repo.find_commit(b.base_oid)?.tree()?;
    let files = plait_core::git::flatten_tree(&base_tree)?;
    let prefix = "d000/";
    let by_prefix = |p: &str| p.starts_with(prefix) || p.ends_with(".gitignore");
    let scan_prefix = median_of(20, || {
        std::hint::black_box(files.iter().filter(|f| by_prefix(&f.path)).count());
        Ok(())
    })?;
    let task0 = &resolved.tasks[0];
    let scan_globs = median_of(5, || {
        std::hint::black_box(files.iter().filter(|f| task0.checks_out(&f.path)).count());
        Ok(())
    })?;
    let index_build = median_of(20, || {
        let bytes = plait_trees::workspace::index::build(&files, |f| {
            by_prefix(&f.path).then(plait_trees::workspace::index::Stat::default)
        });
        std::hint::black_box(bytes.len());
        Ok(())
    })?;
    let open_s = median_of(20, || {
        plait_core::git::open(&b.repo_path)?;
        Ok(())
    })?;
    t.row(
        "  per worktree: select files, prefix closure",
        format!("{}   (scan of {} entries)", secs(scan_prefix), files.len()),
    );
    t.row(
        "  per worktree: select files, ResolvedTask::checks_out",
        format!("{}   (gitignore-glob match per entry)", secs(scan_globs)),
    );
    t.row(
        "  per worktree: index::build (serialize + SHA-1)",
        secs(index_build),
    );
    t.row("  per worktree: git::open (orchestrator)", secs(open_s));
    Ok(())
}

/// Section 4: Disk use of one worktree of each kind, and plait's against a full one.
fn disk_use_rows(t: &mut Table, b: &Bench, repo: &Repository, kept: &PlaitRun) -> Result<()> {
    let plait_wt = kept.worktree(0);
    let plait_admin = workspace::admin_dir(repo, &kept.admin_name(0));
    let plait_disk = disk_use(&[&plait_wt, &plait_admin])?;
    let disk_row = |t: &mut Table, label: &str, path: &Path| -> Result<(u64, u64, usize)> {
        let admin = admin_of(path)?;
        let d = disk_use(&[path, &admin])?;
        t.row(
            format!("disk: {label}"),
            format!(
                "{} allocated, {} apparent, {} files (worktree + admin dir)",
                bytes(d.1),
                bytes(d.0),
                d.2
            ),
        );
        Ok(d)
    };
    t.gap();
    let full_disk = if b.cfg.full > 0 {
        Some(disk_row(
            t,
            "one git worktree add (full)",
            &b.wt.join("full-0"),
        )?)
    } else {
        None
    };
    if b.cfg.sparse > 0 {
        disk_row(
            t,
            "one git CLI sparse worktree",
            &b.wt.join("sparse-nocone-0"),
        )?;
    }
    disk_row(t, "one plait worktree", &plait_wt)?;
    if let Some(full) = full_disk {
        t.row(
            "disk: plait / full",
            format!(
                "{:.1}% allocated, {:.1}% apparent; plait's index alone: {}",
                100.0 * plait_disk.1 as f64 / full.1 as f64,
                100.0 * plait_disk.0 as f64 / full.0 as f64,
                bytes(std::fs::metadata(plait_admin.join("index"))?.len())
            ),
        );
    }
    Ok(())
}

/// Section 4b: Sanity checks of plait's worktrees, through the git CLI: printed, not
/// asserted.
fn sanity_checks(t: &mut Table, b: &Bench, kept: &PlaitRun) -> Result<()> {
    let n = b.cfg.dirs;
    let plait_wt = kept.worktree(0);
    stage("4b. sanity checks");
    let (status_s, status) = time(|| git(&plait_wt, &["status", "--porcelain"]))?;
    let (status2_s, _) = time(|| git(&plait_wt, &["status", "--porcelain"]))?;
    let listed = git(&b.repo_path, &["worktree", "list", "--porcelain"])?
        .lines()
        .filter(|l| l.starts_with("worktree "))
        .count();
    let ls = git(&plait_wt, &["ls-files", "-t"])?;
    let shown = ls.lines().filter(|l| l.starts_with("H ")).count();
    let skipped = ls.lines().filter(|l| l.starts_with("S ")).count();
    let on_disk = walkdir::WalkDir::new(&plait_wt)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .count();
    t.gap();
    t.row(
        "check: git status --porcelain in a plait worktree",
        format!(
            "{}   (first run {}, second {})",
            if status.trim().is_empty() {
                "empty: OK".to_string()
            } else {
                format!(
                    "NOT EMPTY: {:?}",
                    status.lines().take(5).collect::<Vec<_>>()
                )
            },
            secs(status_s),
            secs(status2_s)
        ),
    );
    t.row(
        "check: git worktree list",
        format!(
            "{listed} worktrees   ({})",
            if listed > n {
                "OK"
            } else {
                "FEWER THAN EXPECTED"
            }
        ),
    );
    t.row(
        "check: plait worktree contents",
        format!(
            "{on_disk} files on disk, index {shown} checked out + {skipped} skip-worktree (expected {} + {})",
            b.cfg.files + 1,
            b.total_files - b.cfg.files - 1
        ),
    );
    Ok(())
}

/// Section 5: Merge: one commit per task branch of the kept run, then `plait_stages::merge::merge`
/// against a loop of `git merge-tree --write-tree`.
fn merge_costs(t: &mut Table, b: &Bench, repo: &Repository, kept: &PlaitRun) -> Result<()> {
    let n = b.cfg.dirs;
    let base = &b.base;
    stage("5. merge: building one commit per task branch");
    let sig = sig()?;
    let base_commit = repo.find_commit(b.base_oid)?;
    let base_tree = base_commit.tree()?;
    let mut branches = Vec::with_capacity(n);
    let mut expected = Vec::with_capacity(n);
    let (setup_s, ()) = time(|| {
        for d in 0..n {
            let path = file_path(d, 0);
            let text = format!("{}changed by task {}\n", content(d, 0), dir_name(d));
            let blob = repo.blob(text.as_bytes())?;
            let tree = TreeUpdateBuilder::new()
                .upsert(&path, blob, FileMode::Blob)
                .create_updated(repo, &base_tree)?;
            let tree = repo.find_tree(tree)?;
            let msg = format!("change {path}");
            let commit = repo.commit(None, &sig, &sig, &msg, &tree, &[&base_commit])?;
            let branch = kept.branch(d);
            repo.reference(
                &format!("refs/heads/{branch}"),
                commit,
                true,
                "bench: task change",
            )?;
            branches.push(BranchInput {
                task: dir_name(d),
                branch,
                commit,
                start: None,
            });
            expected.push((path, blob));
        }
        Ok(())
    })?;
    stage("5. merge: plait_stages::merge::merge");
    let merged_branch = format!("plait/{}/merged", kept.run);
    let mut merge_times = Vec::new();
    let mut outcome = None;
    for _ in 0..b.cfg.reps {
        settle();
        let settings = MergeSettings {
            workdir: &b.repo_path,
            branch: &merged_branch,
            base: b.base_oid,
            branches: &branches,
            message: "plait: merge run bench\n".to_string(),
        };
        let (s, o) = time(|| Ok(plait_stages::merge::merge(repo, &settings)?))?;
        merge_times.push(s);
        outcome = Some(o);
    }
    let outcome = outcome.context("no merge")?;
    let merge_s = median(&merge_times);
    let merged_commit = repo.find_commit(Oid::from_str(&outcome.commit)?)?;
    let merged_tree = merged_commit.tree()?;
    let present = expected
        .iter()
        .filter(|(path, blob)| {
            merged_tree
                .get_path(Path::new(path))
                .is_ok_and(|e| e.id() == *blob)
        })
        .count();

    stage("5. merge: git merge-tree --write-tree loop");
    let mut cli_times = Vec::new();
    let mut cli_tree = String::new();
    let merge_base = format!("--merge-base={base}");
    for _ in 0..b.cfg.reps {
        settle();
        let (s, tree) = time(|| {
            let mut acc = base.clone();
            for br in &branches {
                let out = git(
                    &b.repo_path,
                    &["merge-tree", "--write-tree", &merge_base, &acc, &br.branch],
                )?;
                acc = out
                    .lines()
                    .next()
                    .context("no tree from merge-tree")?
                    .to_string();
            }
            let parents: Vec<String> = std::iter::once(base.clone())
                .chain(branches.iter().map(|br| br.commit.to_string()))
                .collect();
            let mut args = vec!["commit-tree", acc.as_str(), "-m", "git CLI merge"];
            for p in &parents {
                args.extend(["-p", p.as_str()]);
            }
            git(&b.repo_path, &args)?;
            Ok(acc)
        })?;
        cli_times.push(s);
        cli_tree = tree;
    }
    let cli_s = median(&cli_times);
    t.gap();
    t.row(
        format!("merge: setup, {n} task commits via git2 (untimed)"),
        secs(setup_s),
    );
    t.row(
        format!("merge: plait_stages::merge::merge, {n} branches"),
        format!(
            "{}   ({} per branch; median of {})",
            secs(merge_s),
            secs(merge_s / n as f64),
            b.cfg.reps
        ),
    );
    t.row(
        format!("merge: git merge-tree loop, {n} branches"),
        format!(
            "{}   ({} per branch; fold with --merge-base=BASE ACC_TREE BRANCH, then one commit-tree)   plait {}",
            secs(cli_s),
            secs(cli_s / n as f64),
            ratio(cli_s, merge_s)
        ),
    );
    t.row(
        "check: merged tree",
        format!(
            "{present}/{n} changes present, {} included, {} conflicts, {} parents; {}",
            outcome.included.len(),
            outcome.conflicts.len(),
            merged_commit.parent_count(),
            if cli_tree == merged_tree.id().to_string() {
                "same tree as the git CLI: OK"
            } else {
                "DIFFERS from the git CLI tree"
            }
        ),
    );
    Ok(())
}

/// Section 6: Plan validation's rows, measured by [`plan_validation`], against the time
/// plait took for its worktrees on one thread (`plait_seq`).
fn plan_rows(t: &mut Table, b: &Bench, plan: &PlanFigures, plait_seq: f64) {
    let (n, total_files) = (b.cfg.dirs, b.total_files);
    let singles = plan.singles;
    t.gap();
    t.row(
        format!("plan: resolve, {n} tasks x {total_files} files"),
        format!(
            "{}   (median of {}; of which flatten_tree {}; owned lists {})",
            secs(plan.resolve_s),
            b.cfg.reps,
            secs(plan.flatten_s),
            if plan.owned_ok { "OK" } else { "WRONG" }
        ),
    );
    t.row(
        format!("plan: resolve, {singles} single-file tasks x {total_files} files"),
        format!(
            "{}   ({:.0} ns per task x file pair, vs {:.0} ns above)",
            secs(plan.single_s),
            plan.single_s * 1e9 / (singles * total_files) as f64,
            plan.resolve_s * 1e9 / (n * total_files) as f64
        ),
    );
    t.row(
        "plan: resolve vs plait worktrees (1 thread)",
        format!(
            "{:.0}% of the time to create all {n} worktrees",
            100.0 * plan.resolve_s / plait_seq
        ),
    );
}

/// How fast the file system was at the end, beside how fast it was at the start.
fn fs_probe_end(t: &mut Table, root: &Path, probe_start: f64) -> Result<()> {
    let probe_end = fs_probe(&root.join("probe-end"))?;
    t.gap();
    t.row(
        "fs probe: create 1,000 files of 400 B",
        format!(
            "{} at start, {} at end   (compare runs only when these are alike)",
            secs(probe_start),
            secs(probe_end)
        ),
    );
    Ok(())
}

/// The table, under a line with the load average at the end.
fn print_summary(t: &Table, n: usize) {
    println!();
    println!(
        "summary ({n} tasks; lower is better; load average at end: {}):",
        load_average()
    );
    t.print();
}
