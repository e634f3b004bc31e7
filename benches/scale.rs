//! Scale benchmark: how a task's cost grows with the repository. Prints figures, asserts
//! nothing about time.
//!
//! For each size (6,000, 60,000 and 300,000 files by default), one generated repository of
//! `max(100, files / 100)` directories of equal size, 100 tasks each owning one directory
//! (100 files; 60 at 6,000), and in that one run:
//!
//! 1. plait's whole no-op run: the `plait` binary, `plait run PLAN -j 2` with exec `true`
//!    tasks, as a user starts it (sandbox on where the kernel has Landlock); wall time and
//!    peak memory (the child's `ru_maxrss`);
//! 2. plait's worktrees alone: `plait_trees::workspace::create` for the 100 tasks on 2 threads,
//!    from a resolved plan (the resolution timed apart);
//! 3. git CLI sparse worktrees in cone mode (`worktree add --no-checkout`, `sparse-checkout
//!    set --cone DIR`, `checkout`), and the same with `--sparse-index`, on a sample of the tasks, with
//!    their per-task time and what 100 would take;
//! 4. the per-task cost of plait at each size, against the smallest.
//!
//! `--sizes 6000,60000` picks the sizes, `--sample N` the git CLI sample (default 10),
//! `--reps N` the plait repetitions (median; default 3), `--keep` keeps the directory.
//! Run it through `./bench --scale`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{bail, Context, Result};

mod common;
use common::{
    bytes, fs_probe, git, isolate_git, median, secs, settle, stage, time, DATE, EMAIL, NAME,
};

const TASKS: usize = 100;

struct Config {
    sizes: Vec<usize>,
    sample: usize,
    reps: usize,
    keep: bool,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            sizes: vec![6_000, 60_000, 300_000],
            sample: 10,
            reps: 3,
            keep: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |key: &str| args.next().with_context(|| format!("{key} needs a value"));
            match arg.as_str() {
                "--sizes" => {
                    cfg.sizes = value("--sizes")?
                        .split(',')
                        .map(|n| n.trim().replace('_', "").parse::<usize>())
                        .collect::<Result<_, _>>()
                        .context("--sizes takes numbers separated by commas")?;
                }
                "--sample" => cfg.sample = value("--sample")?.parse()?,
                "--reps" => cfg.reps = value("--reps")?.parse()?,
                "--keep" => cfg.keep = true,
                "-h" | "--help" => {
                    println!(
                        "usage: bench --scale [--sizes N,N,...] [--sample N] [--reps N] [--keep]"
                    );
                    std::process::exit(0);
                }
                _ => {}
            }
        }
        if cfg.sizes.iter().any(|&n| n < TASKS) {
            bail!("every size needs at least {TASKS} files");
        }
        cfg.reps = cfg.reps.max(1);
        cfg.sample = cfg.sample.clamp(1, TASKS);
        Ok(cfg)
    }
}

/// One generated repository.
struct Repo {
    path: PathBuf,
    files: usize,
    dirs: usize,
    per_dir: usize,
}

impl Repo {
    fn dir(&self, d: usize) -> String {
        format!("d{d:04}")
    }

    /// The directory task `t` owns: spread over the repository.
    fn task_dir(&self, t: usize) -> String {
        self.dir(t * self.dirs / TASKS)
    }
}

/// `git fast-import` of `files` small files in equal directories, then a sparse checkout
/// of the root alone for the user's own worktree (plait never reads it).
fn generate(root: &Path, files: usize) -> Result<Repo> {
    let dirs = TASKS.max(files / 100);
    let per_dir = files / dirs;
    let path = root.join(format!("repo-{files}"));
    std::fs::create_dir_all(&path)?;
    git(&path, &["init", "-q", "-b", "main"])?;
    git(&path, &["config", "gc.auto", "0"])?;
    git(&path, &["config", "maintenance.auto", "false"])?;
    let mut stream = String::with_capacity(dirs * per_dir * 120);
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
    add(".gitignore", "/target\n*.log\n");
    for d in 0..dirs {
        for f in 0..per_dir {
            add(
                &format!("d{d:04}/f{f:03}.txt"),
                &format!("dir {d} file {f}\n"),
            );
        }
    }
    let mut child = plait_core::git::git_command(&path)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .context("no stdin")?
        .write_all(stream.as_bytes())?;
    if !child.wait()?.success() {
        bail!("git fast-import failed");
    }
    git(&path, &["sparse-checkout", "set", "--cone"])?;
    git(&path, &["read-tree", "-mu", "HEAD"])?;
    Ok(Repo {
        path,
        files: dirs * per_dir + 1,
        dirs,
        per_dir,
    })
}

/// The plan of 100 no-op exec tasks, one directory each (or, with `single`, one file of
/// that directory each: a cone of the directory's own files, not all of them held).
fn plan_text(repo: &Repo, single: bool) -> String {
    let mut toml = String::from(
        "goal = \"scale\"\n[defaults]\nagent = { exec = \"true\" }\n[review]\nagent = \"off\"\n",
    );
    for t in 0..TASKS {
        let dir = repo.task_dir(t);
        let owns = if single {
            format!("/{dir}/f000.txt")
        } else {
            format!("/{dir}/")
        };
        let _ = write!(
            toml,
            "[[task]]\nid = \"{dir}\"\nprompt = \"p\"\nowns = [\"{owns}\"]\n"
        );
    }
    toml
}

/// Runs `plait` to its end; wall seconds and the child's peak resident memory in bytes.
fn plait_run(repo: &Repo, plan: &Path) -> Result<(f64, u64)> {
    let start = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", &plan.display().to_string(), "-j", "2"])
        .current_dir(&repo.path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for the child spawned above, which nothing else waits for.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed().as_secs_f64();
    if waited != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let mut err = String::new();
        if let Some(mut stderr) = child.stderr {
            let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
        }
        bail!("plait run failed ({status}): {err}");
    }
    Ok((elapsed, usage.ru_maxrss as u64 * 1024))
}

/// Creates the 100 worktrees through the library on 2 threads; the plan's resolution and
/// the creation, in seconds.
fn plait_worktrees(repo: &Repo, plan_path: &Path, text: &str, run: &str) -> Result<(f64, f64)> {
    let (resolve_s, plan) = time(|| {
        let opened = plait_core::git::open(&repo.path)?;
        let parsed = plait_plan::parse(text, plan_path)?;
        Ok(plait_plan::resolve(&opened, parsed, plan_path)?)
    })?;
    let root = repo.path.join(".git").join(format!("bench-{run}"));
    let next = AtomicUsize::new(0);
    let (create_s, ()) = time(|| {
        std::thread::scope(|s| -> Result<()> {
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| -> Result<()> {
                        let git = plait_core::git::open(&repo.path)?;
                        loop {
                            let t = next.fetch_add(1, Ordering::Relaxed);
                            let Some(task) = plan.tasks.get(t) else {
                                return Ok(());
                            };
                            let branch = format!("bench/{run}/{}", task.id);
                            let admin = format!("bench-{run}-{}", task.id);
                            let path = root.join(&task.id);
                            let spec = plait_trees::workspace::WorktreeSpec {
                                branch: &branch,
                                admin_name: &admin,
                                path: &path,
                                base: plan.base,
                                files: &plan.files,
                                layout: &task.layout,
                            };
                            plait_trees::workspace::create(&git, &spec)?;
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join()
                    .map_err(|_| anyhow::anyhow!("a worker panicked"))??;
            }
            Ok(())
        })
    })?;
    Ok((resolve_s, create_s))
}

/// Seconds per worktree of the git CLI, sparse in cone mode, over `sample` tasks.
fn git_sparse(repo: &Repo, sample: usize, sparse_index: bool, tag: &str) -> Result<f64> {
    let root = repo.path.join(".git").join(format!("git-{tag}"));
    let mut times = Vec::new();
    for k in 0..sample {
        let t = k * TASKS / sample;
        let dir = repo.task_dir(t);
        let path = root.join(&dir);
        let path_s = path.display().to_string();
        let branch = format!("git-{tag}/{dir}");
        let (s, ()) = time(|| {
            git(
                &repo.path,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "--no-checkout",
                    "-b",
                    &branch,
                    &path_s,
                    "main",
                ],
            )?;
            let mut args = vec!["sparse-checkout", "set", "--cone"];
            if sparse_index {
                args.push("--sparse-index");
            }
            args.push(&dir);
            git(&path, &args)?;
            git(&path, &["checkout", "-q"])?;
            Ok(())
        })?;
        // Checked, not assumed: the worktree holds the directory and git sees it clean.
        if !path.join(&dir).join("f000.txt").exists()
            || !git(&path, &["status", "--porcelain"])?.trim().is_empty()
        {
            bail!(
                "git's sparse worktree {} is not as expected",
                path.display()
            );
        }
        times.push(s);
    }
    Ok(median(&times))
}

/// The index file of a linked worktree.
fn index_size(worktree: &Path) -> u64 {
    let admin = std::fs::read_to_string(worktree.join(".git")).unwrap_or_default();
    let admin = admin.trim().trim_start_matches("gitdir: ");
    std::fs::metadata(Path::new(admin).join("index")).map_or(0, |m| m.len())
}

struct Figures {
    /// plait's worktrees alone when each task owns one file of its directory.
    single_s: f64,
    /// Seconds to create 1,000 files after this size's measurements.
    probe_s: f64,
    files: usize,
    run_s: f64,
    peak: u64,
    resolve_s: f64,
    create_s: f64,
    cone_s: f64,
    sparse_s: f64,
    plait_index: u64,
    git_index: u64,
}

fn measure(root: &Path, size: usize, cfg: &Config) -> Result<Figures> {
    stage(&format!("{size} files: generating"));
    let (gen_s, repo) = time(|| generate(root, size))?;
    stage(&format!(
        "{} files in {} directories of {} ({}); {TASKS} tasks of {} files",
        repo.files,
        repo.dirs,
        repo.per_dir,
        secs(gen_s),
        repo.per_dir
    ));
    let text = plan_text(&repo, false);
    let plan = root.join(format!("plan-{size}.toml"));
    std::fs::write(&plan, &text)?;

    let mut runs = Vec::new();
    let mut peaks = Vec::new();
    let mut resolves = Vec::new();
    let mut creates = Vec::new();
    for rep in 0..cfg.reps {
        stage(&format!("{size} files: plait run, rep {}", rep + 1));
        settle();
        let (s, peak) = plait_run(&repo, &plan)?;
        runs.push(s);
        peaks.push(peak);
        stage(&format!(
            "{size} files: plait worktrees alone, rep {}",
            rep + 1
        ));
        settle();
        let (r, c) = plait_worktrees(&repo, &plan, &text, &format!("r{rep}"))?;
        resolves.push(r);
        creates.push(c);
    }
    stage(&format!(
        "{size} files: plait worktrees alone, one file per task"
    ));
    let single = plan_text(&repo, true);
    let single_plan = root.join(format!("plan-{size}-single.toml"));
    std::fs::write(&single_plan, &single)?;
    settle();
    let (_, single_s) = plait_worktrees(&repo, &single_plan, &single, "single")?;
    let plait_index = index_size(
        &repo
            .path
            .join(".git")
            .join("bench-r0")
            .join(repo.task_dir(0)),
    );
    stage(&format!(
        "{size} files: git CLI, cone ({} worktrees)",
        cfg.sample
    ));
    settle();
    let cone_s = git_sparse(&repo, cfg.sample, false, "cone")?;
    stage(&format!("{size} files: git CLI, cone with --sparse-index"));
    settle();
    let sparse_s = git_sparse(&repo, cfg.sample, true, "sparse")?;
    let git_index = index_size(
        &repo
            .path
            .join(".git")
            .join("git-sparse")
            .join(repo.task_dir(0)),
    );
    // Nothing is deleted before the end: on ext4, creating files soon after deleting many
    // is several times slower (the inode allocator skips recently freed inodes).
    let probe_s = fs_probe(&root.join(format!("probe-{size}")))?;
    Ok(Figures {
        single_s,
        probe_s,
        files: repo.files,
        run_s: median(&runs),
        peak: peaks.into_iter().max().unwrap_or(0),
        resolve_s: median(&resolves),
        create_s: median(&creates),
        cone_s,
        sparse_s,
        plait_index,
        git_index,
    })
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let dir = tempfile::Builder::new().prefix("plait-scale-").tempdir()?;
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    println!(
        "plait scale benchmark: {TASKS} no-op tasks, -j 2; sizes {:?}",
        cfg.sizes
    );
    println!("temporary directory: {}", dir.path().display());
    let probe = fs_probe(&dir.path().join("probe-start"))?;
    println!("fs probe at the start: 1,000 files in {}", secs(probe));
    let mut all = Vec::new();
    for &size in &cfg.sizes {
        all.push(measure(dir.path(), size, &cfg)?);
    }
    println!();
    println!(
        "{:>8}  {:>9} {:>9} {:>9}  {:>9} {:>9}  {:>11} {:>11}  {:>9} {:>9}  {:>8}",
        "files",
        "run",
        "per task",
        "peak",
        "resolve",
        "worktrees",
        "git cone",
        "git sparse",
        "index",
        "git index",
        "run/git"
    );
    for f in &all {
        println!(
            "{:>8}  {:>9} {:>9} {:>9}  {:>9} {:>9}  {:>11} {:>11}  {:>9} {:>9}  {:>7.2}x",
            f.files,
            secs(f.run_s),
            secs(f.run_s / TASKS as f64),
            bytes(f.peak),
            secs(f.resolve_s),
            secs(f.create_s),
            secs(f.cone_s * TASKS as f64),
            secs(f.sparse_s * TASKS as f64),
            bytes(f.plait_index),
            bytes(f.git_index),
            f.run_s / (f.sparse_s * TASKS as f64),
        );
    }
    for f in &all {
        println!(
            "{} files, one owned file per task (its directory's own files in the cone, the rest skip-worktree): {TASKS} worktrees in {}",
            f.files,
            secs(f.single_s)
        );
    }
    for f in &all {
        println!(
            "fs probe after {} files: 1,000 files in {}",
            f.files,
            secs(f.probe_s)
        );
    }
    println!("(the probes should agree: a slow one means the file system, not plait, was slow)");
    println!();
    println!("run: plait's whole no-op run (median of {}); per task: run / {TASKS}; peak: its resident memory at most", cfg.reps);
    println!(
        "resolve: the plan's validation; worktrees: plait's {TASKS} worktrees alone, 2 threads"
    );
    println!(
        "git cone / git sparse: the git CLI's sparse worktree (worktree add --no-checkout + sparse-checkout set --cone [--sparse-index] + checkout), median of {} times {TASKS}",
        cfg.sample
    );
    println!("index: one worktree's index file, plait's and git's with --sparse-index; run/git: plait's whole run against git's sparse-index worktrees alone");
    if let (Some(first), Some(last)) = (all.first(), all.last()) {
        if all.len() > 1 {
            println!(
                "per-task cost at {} files: {:.2}x the cost at {} (whole run), {:.2}x (worktrees alone)",
                last.files,
                last.run_s / first.run_s,
                first.files,
                last.create_s / first.create_s
            );
        }
    }
    if cfg.keep {
        println!("kept: {}", dir.keep().display());
    }
    Ok(())
}
