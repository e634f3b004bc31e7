//! Hook benchmark: what plait's git hooks add to a commit that brings in no run's work, in
//! a repository with many runs. Prints figures, asserts nothing about time (the goal is
//! at most 20 ms for the hook on such a commit with 10 runs of 100 tasks).
//!
//! A generated repository of 100 directories; `--runs` runs (default 10) of `--tasks` exec
//! tasks (default 100, one directory each), made by the `plait` binary as a user makes
//! them; then `plait hook install`. Each figure is the median of `--commits` commits
//! (default 15) of a file no task touches:
//!
//! 1. `git commit` with the hooks skipped (`-c core.hooksPath=/dev/null`), with a
//!    reference-transaction hook that only exits (what any such hook costs: git runs it
//!    up to three times a transaction, a commit makes two), and with plait's; the
//!    difference is what plait's hooks cost the commit;
//! 2. the same with a cold index of task work (its file removed before each commit);
//! 3. the reference-transaction hook alone (`plait hook run reference-transaction
//!    prepared`, fed the commit's update), warm, and plait's floor (`committed`, which
//!    returns once the repository is open);
//!
//! with the branches as plait leaves them (loose refs) and again after `git pack-refs`.
//! `--keep` keeps the directory. Run it through `./bench --hooks`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

mod common;
use common::{git, isolate_git, median, secs, stage, time};

struct Config {
    runs: usize,
    tasks: usize,
    commits: usize,
    keep: bool,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            runs: 10,
            tasks: 100,
            commits: 15,
            keep: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |key: &str| args.next().with_context(|| format!("{key} needs a value"));
            match arg.as_str() {
                "--runs" => cfg.runs = value("--runs")?.parse()?,
                "--tasks" => cfg.tasks = value("--tasks")?.parse()?,
                "--commits" => cfg.commits = value("--commits")?.parse()?,
                "--keep" => cfg.keep = true,
                "-h" | "--help" => {
                    println!("usage: bench --hooks [--runs N] [--tasks N] [--commits N] [--keep]");
                    std::process::exit(0);
                }
                _ => {}
            }
        }
        cfg.commits = cfg.commits.max(1);
        Ok(cfg)
    }
}

fn plait() -> Command {
    Command::new(env!("CARGO_BIN_EXE_plait"))
}

/// A repository of `dirs` directories of one file each, and a file no task owns.
fn repo(root: &Path, dirs: usize) -> Result<PathBuf> {
    let path = root.join("repo");
    for d in 0..dirs {
        std::fs::create_dir_all(path.join(format!("d{d:03}")))?;
        std::fs::write(path.join(format!("d{d:03}/f.txt")), format!("{d}\n"))?;
    }
    std::fs::write(path.join("notes.md"), "notes\n")?;
    git(&path, &["init", "-q", "-b", "main"])?;
    git(&path, &["add", "-A"])?;
    git(&path, &["commit", "-q", "-m", "base"])?;
    Ok(path)
}

/// Run `k`: each task appends its run's number to its own directory's file.
fn plan(k: usize, tasks: usize) -> String {
    let mut toml = format!("goal = \"run {k}\"\n[groups]\nthreshold = 100000\n");
    for t in 0..tasks {
        let _ = writeln!(
            toml,
            "[[task]]\nid = \"t{t:03}\"\nprompt = \"p\"\nowns = [\"/d{t:03}/\"]\n\
             agent = {{ exec = \"echo run{k} >> d{t:03}/f.txt\" }}"
        );
    }
    toml
}

fn make_runs(repo: &Path, cfg: &Config) -> Result<()> {
    for k in 0..cfg.runs {
        let plan_path = repo
            .parent()
            .context("no parent")?
            .join(format!("run{k}.toml"));
        std::fs::write(&plan_path, plan(k, cfg.tasks))?;
        let (took, out) = time(|| {
            Ok(plait()
                .args(["run", &plan_path.display().to_string(), "-j", "8"])
                .current_dir(repo)
                .stdin(Stdio::null())
                .output()?)
        })?;
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if id.is_empty() {
            bail!("plait run failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        stage(&format!("run {id}: {} tasks in {}", cfg.tasks, secs(took)));
    }
    Ok(())
}

/// Which hooks a commit runs: none, the hooks in this directory, or plait's.
#[derive(Clone, Copy)]
enum Hooks<'a> {
    None,
    In(&'a Path),
    Plait,
}

/// Commits a change of notes.md; the commit's wall time.
fn commit(repo: &Path, n: usize, hooks: Hooks<'_>) -> Result<f64> {
    std::fs::write(repo.join("notes.md"), format!("notes {n}\n"))?;
    git(repo, &["add", "notes.md"])?;
    let path = match hooks {
        Hooks::None => Some("core.hooksPath=/dev/null".to_string()),
        Hooks::In(dir) => Some(format!("core.hooksPath={}", dir.display())),
        Hooks::Plait => None,
    };
    let mut args = vec![];
    if let Some(path) = &path {
        args.extend(["-c", path.as_str()]);
    }
    args.extend(["commit", "-q", "-m", "unrelated"]);
    let (took, ()) = time(|| {
        let out = plait_core::git::git_command(repo)
            .args(&args)
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() || !out.stderr.is_empty() {
            bail!(
                "the commit failed or plait spoke: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    })?;
    Ok(took)
}

/// The reference-transaction hook alone, in `phase`, fed HEAD's last move.
fn hook_alone(repo: &Path, phase: &str) -> Result<f64> {
    let old = git(repo, &["rev-parse", "HEAD~1"])?;
    let new = git(repo, &["rev-parse", "HEAD"])?;
    let line = format!("{} {} refs/heads/main\n", old.trim(), new.trim());
    let (took, ()) = time(|| {
        let mut child = plait()
            .args(["hook", "run", "reference-transaction", phase])
            .current_dir(repo)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        // `committed` returns without reading: like git, take a closed pipe as read.
        let _ = child
            .stdin
            .take()
            .context("no stdin")?
            .write_all(line.as_bytes());
        let out = child.wait_with_output()?;
        if !out.status.success() || !out.stderr.is_empty() {
            bail!("the hook failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    })?;
    Ok(took)
}

/// One row of figures: each a median over `cfg.commits`.
struct Row {
    without: f64,
    trivial: f64,
    with: f64,
    cold: f64,
    hook: f64,
    floor: f64,
}

fn measure(repo: &Path, trivial_hooks: &Path, cfg: &Config) -> Result<Row> {
    let index = repo.join(".git/plait/task-work");
    let mut trivial = vec![];
    let (mut without, mut with, mut cold, mut hook, mut floor) =
        (vec![], vec![], vec![], vec![], vec![]);
    for i in 0..cfg.commits {
        without.push(commit(repo, 4 * i, Hooks::None)?);
        trivial.push(commit(repo, 4 * i + 3, Hooks::In(trivial_hooks))?);
        with.push(commit(repo, 4 * i + 1, Hooks::Plait)?);
        hook.push(hook_alone(repo, "prepared")?);
        floor.push(hook_alone(repo, "committed")?);
        std::fs::remove_file(&index).context("the hook made no index of task work")?;
        cold.push(commit(repo, 4 * i + 2, Hooks::Plait)?);
    }
    Ok(Row {
        without: median(&without),
        trivial: median(&trivial),
        with: median(&with),
        cold: median(&cold),
        hook: median(&hook),
        floor: median(&floor),
    })
}

fn print_row(name: &str, row: &Row) {
    println!(
        "{name:<8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        secs(row.without),
        secs(row.trivial),
        secs(row.with),
        secs(row.with - row.without),
        secs(row.cold),
        secs(row.cold - row.without),
        secs(row.hook),
        secs(row.floor),
    );
}

/// A hooks directory whose reference-transaction only exits.
fn trivial_hooks(root: &Path) -> Result<PathBuf> {
    let dir = root.join("trivial-hooks");
    std::fs::create_dir_all(&dir)?;
    let hook = dir.join("reference-transaction");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n")?;
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    Ok(dir)
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let dir = tempfile::Builder::new().prefix("plait-hooks-").tempdir()?;
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    let repo = repo(dir.path(), cfg.tasks)?;
    let trivial = trivial_hooks(dir.path())?;
    println!(
        "plait hook benchmark: {} runs of {} exec tasks, a commit of a file no task touches, median of {}",
        cfg.runs, cfg.tasks, cfg.commits
    );
    make_runs(&repo, &cfg)?;
    let out = plait()
        .args(["hook", "install"])
        .current_dir(&repo)
        .output()?;
    if !out.status.success() {
        bail!(
            "plait hook install: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let refs = git(&repo, &["for-each-ref", "--format=x", "refs/heads/plait/"])?
        .lines()
        .count();
    stage("loose refs");
    let loose = measure(&repo, &trivial, &cfg)?;
    let index = std::fs::read_to_string(repo.join(".git/plait/task-work"))?;
    git(&repo, &["pack-refs", "--all"])?;
    stage("packed refs");
    let packed = measure(&repo, &trivial, &cfg)?;
    println!(
        "{refs} plait branches; the index of task work: {} lines, {} KiB",
        index.lines().count(),
        index.len() / 1024
    );
    println!();
    println!(
        "{:<8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "refs", "no hooks", "trivial", "plait's", "cost", "cold", "cold cost", "hook", "floor"
    );
    print_row("loose", &loose);
    print_row("packed", &packed);
    println!();
    println!("no hooks / trivial / plait's: `git commit` with core.hooksPath=/dev/null / with a reference-transaction");
    println!("  hook that only exits / with plait's hooks");
    println!("cost: plait's less no hooks (goal: at most 20 ms); cold: the index of task work removed first");
    println!(
        "hook: `plait hook run reference-transaction prepared` alone, fed the commit's update;"
    );
    println!("  floor: the same for `committed`, which returns once the repository is open");
    if cfg.keep {
        println!("kept {}", dir.keep().display());
    }
    Ok(())
}
