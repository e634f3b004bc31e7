//! Small-run benchmark: a small job through plait against the same job by hand, in the
//! same run. Prints figures (and plait's own `--timings` of its last run), asserts nothing
//! about time.
//!
//! The job (issue "a second day without surprises", item 13): tomlkit, from its sdist, whose
//! modules and tests were formatted narrower (`ruff format --line-length 60`) in a commit of
//! their own; a plan of one exec task per module (`plait plan --split 'module:tomlkit/*'
//! --exec-each 'ruff format {file}'`), task check `ruff check --no-cache .` (red on the
//! base, as tomlkit's is: `[checks] base = "ignore"`), merged check `python -m pytest`. By
//! hand: `ruff format` file by file, one `ruff check`, one pytest, in a fresh copy.
//!
//! Each of `--reps` rounds (default 3) takes a fresh copy of the repository: by hand, then
//! plait's first run there (the base layer made), then a second run on the same base (the
//! base layer kept). The tools: `ruff` and `pytest` from `--venv DIR` (its `bin/`), else
//! `target/ci-tools/bench-venv`, else `PATH`; the sdist from `--sdist FILE`, else
//! `target/ci-tools/sdist/tomlkit-*.tar.gz`. Without them it says how to get them and
//! measures nothing. Run it through `./bench --small`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

mod common;
use common::runs::{cp, sh};
use common::{git, isolate_git, median, secs, settle, stage};

struct Config {
    reps: usize,
    venv: Option<PathBuf>,
    sdist: Option<PathBuf>,
    keep: bool,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            reps: 3,
            venv: None,
            sdist: None,
            keep: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |key: &str| args.next().with_context(|| format!("{key} needs a value"));
            match arg.as_str() {
                "--reps" => {
                    let v = value(&arg)?;
                    cfg.reps = v
                        .parse::<usize>()
                        .with_context(|| format!("--reps takes a number, not `{v}`"))?
                        .max(1)
                }
                "--venv" => cfg.venv = Some(PathBuf::from(value(&arg)?)),
                "--sdist" => cfg.sdist = Some(PathBuf::from(value(&arg)?)),
                "--keep" => cfg.keep = true,
                "--bench" => {}
                other => {
                    bail!("unknown argument `{other}` (--reps N, --venv DIR, --sdist FILE, --keep)")
                }
            }
        }
        Ok(cfg)
    }
}

/// The directory holding `ruff` and `pytest`, or `None` for `PATH`.
fn tools(cfg: &Config) -> Result<Option<PathBuf>> {
    let ci = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ci-tools/bench-venv");
    let candidates = cfg.venv.iter().cloned().chain([ci]);
    for venv in candidates {
        let bin = venv.join("bin");
        if bin.join("ruff").exists() && bin.join("pytest").exists() {
            return Ok(Some(bin));
        }
        if cfg.venv.as_ref() == Some(&venv) {
            bail!("{} holds no bin/ruff and bin/pytest", venv.display());
        }
    }
    let on_path = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if on_path("ruff") && on_path("pytest") {
        return Ok(None);
    }
    bail!(
        "ruff and pytest are needed: python3 -m venv target/ci-tools/bench-venv && \
         target/ci-tools/bench-venv/bin/pip install ruff pytest (or --venv DIR)"
    )
}

fn sdist(cfg: &Config) -> Result<PathBuf> {
    if let Some(file) = &cfg.sdist {
        return Ok(file.clone());
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ci-tools/sdist");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("tomlkit-") && n.ends_with(".tar.gz"))
        })
        .collect();
    found.sort();
    found.pop().with_context(|| {
        format!(
            "tomlkit's sdist is needed: mkdir -p {0} && pip download --no-deps --no-binary :all: \
             -d {0} tomlkit==0.15.3 (or --sdist FILE)",
            dir.display()
        )
    })
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let bin = match tools(&cfg) {
        Ok(bin) => bin,
        Err(why) => {
            println!("small-run benchmark: nothing measured: {why}");
            return Ok(());
        }
    };
    let sdist = match sdist(&cfg) {
        Ok(file) => file,
        Err(why) => {
            println!("small-run benchmark: nothing measured: {why}");
            return Ok(());
        }
    };
    let dir = tempfile::Builder::new().prefix("plait-small-").tempdir()?;
    let root = dir.path().to_path_buf();
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    std::env::set_var("XDG_CACHE_HOME", root.join("cache"));
    if let Some(bin) = &bin {
        let path = std::env::var("PATH").unwrap_or_default();
        std::env::set_var("PATH", format!("{}:{path}", bin.display()));
    }
    let base = root.join("base");
    stage(&format!("repository from {}", sdist.display()));
    make_repo(&root, &base, &sdist)?;
    let plan = root.join("plait.toml");
    write_plan(&base, &plan)?;
    let tasks = std::fs::read_to_string(&plan)?.matches("[[task]]").count();
    let files = git(&base, &["ls-files"])?.lines().count();
    println!(
        "plait small-run benchmark ({} CPUs, load average {}): tomlkit ({files} files), \
         {tasks} exec tasks `ruff format {{file}}`, task check `ruff check --no-cache .`, \
         merged check pytest; every figure against the job by hand in the same round",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| l.split_whitespace().next().map(str::to_string))
            .unwrap_or_default()
    );
    let (mut hand, mut first, mut second) = (Vec::new(), Vec::new(), Vec::new());
    let mut timings = String::new();
    for rep in 1..=cfg.reps {
        let copy = root.join(format!("rep-{rep}"));
        cp(&base, &copy)?;
        let by_hand = root.join(format!("hand-{rep}"));
        cp(&base, &by_hand)?;
        stage(&format!("round {rep}: by hand"));
        hand.push(by_hand_job(&by_hand)?);
        stage(&format!("round {rep}: plait, first run (base layer made)"));
        first.push(plait_run(&copy, &plan)?.0);
        stage(&format!("round {rep}: plait, second run (base layer kept)"));
        let (wall, text) = plait_run(&copy, &plan)?;
        second.push(wall);
        timings = text;
    }
    let (h, f, s) = (median(&hand), median(&first), median(&second));
    println!(
        "  by hand (ruff format file by file, ruff check, pytest): {}",
        secs(h)
    );
    println!(
        "  plait run, first on its base:  {} -> {:.2}x by hand",
        secs(f),
        f / h
    );
    println!(
        "  plait run, again on that base: {} -> {:.2}x by hand (goal <= 1.5x)",
        secs(s),
        s / h
    );
    println!("  (medians of {} round(s))", cfg.reps);
    println!("  the last run's own timings (plait run --timings):");
    for line in timings.lines() {
        println!("    {line}");
    }
    if cfg.keep {
        let kept = dir.keep();
        println!("kept: {}", kept.display());
    }
    Ok(())
}

/// tomlkit's sources as a repository: the sdist as released, then its modules and tests
/// formatted narrower, so that formatting them has work to do.
fn make_repo(root: &Path, repo: &Path, sdist: &Path) -> Result<()> {
    let unpack = root.join("unpack");
    std::fs::create_dir_all(&unpack)?;
    sh(
        &unpack,
        &format!(
            "tar xzf '{}' && mv tomlkit-* '{}'",
            sdist.display(),
            repo.display()
        ),
    )?;
    git(repo, &["init", "-q", "-b", "main"])?;
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-qm", "tomlkit as released"])?;
    sh(
        repo,
        "ruff format --line-length 60 tomlkit tests/test_*.py >/dev/null",
    )?;
    git(repo, &["commit", "-qam", "formatted narrower"])?;
    Ok(())
}

/// The plan `plait plan --split` writes, with the checks added.
fn write_plan(repo: &Path, plan: &Path) -> Result<()> {
    let out = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args([
            "plan",
            "--split",
            "module:tomlkit/*",
            "--prompt",
            "Format {path}",
            "--exec-each",
            "ruff format {file}",
        ])
        .current_dir(repo)
        .output()?;
    if !out.status.success() {
        bail!("plait plan: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8(out.stdout)?;
    let checks = "[checks]\ntask = [\"ruff check --no-cache .\"]\n\
                  merged = [\"python -m pytest -q -x -p no:cacheprovider\"]\nbase = \"ignore\"\n\n";
    let at = text.find("[defaults").unwrap_or(0);
    std::fs::write(plan, format!("{}{checks}{}", &text[..at], &text[at..]))?;
    Ok(())
}

/// The job by hand in `dir`, timed.
fn by_hand_job(dir: &Path) -> Result<f64> {
    settle();
    let start = Instant::now();
    sh(
        dir,
        "for f in $(git ls-files 'tomlkit/*.py' 'tests/test_*.py'); do ruff format \"$f\" >/dev/null 2>&1; done; \
         ruff check --no-cache . >/dev/null || true; \
         python -m pytest -q -x -p no:cacheprovider >/dev/null",
    )?;
    Ok(start.elapsed().as_secs_f64())
}

/// `plait run --timings` of `plan` in `repo`, two tasks at a time: its wall time and the
/// timings it printed.
fn plait_run(repo: &Path, plan: &Path) -> Result<(f64, String)> {
    settle();
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", "--timings", "-j", "2"])
        .arg(plan)
        .current_dir(repo)
        .stdin(Stdio::null())
        .output()?;
    let wall = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("plait run failed: {stderr}");
    }
    if !stderr.contains("merged check `python -m pytest -q -x -p no:cacheprovider`: passed") {
        bail!("plait run's merged check did not pass: {stderr}");
    }
    let timings = stderr
        .split_once("timings (")
        .map(|(_, t)| format!("timings ({}", t.split("\n\n").next().unwrap_or(t)))
        .unwrap_or_default();
    Ok((wall, timings))
}
