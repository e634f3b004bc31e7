//! Views benchmark: what a task's whole-tree view costs its commands and its run. Prints
//! figures, asserts nothing about time.
//!
//! On a generated repository of `--files N` (default 60,000) in `N / 100` directories:
//!
//! 1. *first command*: the base's checkout every overlay view shares
//!    (`workspace::view::base_tree`, made once per base and kept), cold and then kept,
//!    against `git worktree add` of the same commit (a full checkout, what a task would
//!    need without the overlay), and against filling a sparse worktree in
//!    (`workspace::view::materialize`, `[sandbox] view = "filled"`);
//! 2. *a command after a one-file edit*: `true` started `--spawns` times (default 200) the
//!    way plait starts an agent's command (`shell::run_argv`), without walls, behind
//!    Landlock, and behind Landlock in the task's overlay view, one owned file edited
//!    before each start; the median per start and what the view adds;
//! 3. *reading the whole tree*: `find . -type f` in the overlay view against the same in
//!    the full checkout;
//! 4. *a run that runs nothing*: `plait run` of `--tasks` (default 100) exec `true` tasks,
//!    with this plait and the plait of `--baseline REV` (default: the last commit without
//!    views, built once under `target/bench-baseline/`), `--reps` times each (median), and
//!    the per-task ratio. `--no-baseline` skips the old plait;
//! 5. *a model agent fixing a failing test*: one task against the integration tests' mock
//!    model server, whose test imports a module it does not own: with the `run` tool it
//!    runs the test, fixes its file and runs it again in one round; without it
//!    (`[tools] run = []`) it guesses, the task check fails, and it fixes the file in a
//!    second round. Rounds, requests, tokens and time of each.
//!
//! `--keep` keeps the directory. Run it through `./bench --views`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

#[allow(dead_code)]
#[path = "../tests/it/mock/mod.rs"]
mod mock;

mod common;
use common::{
    baseline, fast_import, git, isolate_git, median, secs, settle, stage, DATE, EMAIL, NAME,
};

/// The last commit before whole-tree views.
const BASELINE: &str = "d28712d";

struct Config {
    files: usize,
    spawns: usize,
    tasks: usize,
    reps: usize,
    baseline: Option<String>,
    keep: bool,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            files: 60_000,
            spawns: 200,
            tasks: 100,
            reps: 3,
            baseline: Some(BASELINE.to_string()),
            keep: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut number = |key: &str| -> Result<usize> {
                let text = args
                    .next()
                    .with_context(|| format!("{key} needs a value"))?;
                text.replace('_', "")
                    .parse()
                    .with_context(|| format!("{key} takes a number, not `{text}`"))
            };
            match arg.as_str() {
                "--files" => cfg.files = number("--files")?.max(100),
                "--spawns" => cfg.spawns = number("--spawns")?.max(1),
                "--tasks" => cfg.tasks = number("--tasks")?.max(1),
                "--reps" => cfg.reps = number("--reps")?.max(1),
                "--baseline" => cfg.baseline = args.next(),
                "--no-baseline" => cfg.baseline = None,
                "--keep" => cfg.keep = true,
                "--bench" => {}
                other => bail!(
                    "unknown argument `{other}` (--files N, --spawns N, --tasks N, --reps N, \
                     --baseline REV, --no-baseline, --keep)"
                ),
            }
        }
        Ok(cfg)
    }
}

fn dir_name(d: usize) -> String {
    format!("d{d:04}")
}

/// `git init` and one `git fast-import` commit of `files` files, 100 per directory, then a
/// checkout.
fn generate(path: &Path, files: usize) -> Result<()> {
    std::fs::create_dir_all(path)?;
    git(path, &["init", "-q", "-b", "main"])?;
    git(path, &["config", "gc.auto", "0"])?;
    let mut stream = String::with_capacity(files * 120);
    let _ = write!(
        stream,
        "commit refs/heads/main\nauthor {NAME} <{EMAIL}> {DATE}\n\
         committer {NAME} <{EMAIL}> {DATE}\ndata 5\nbase\n\n"
    );
    let gitignore = "target/\n__pycache__/\n";
    let _ = write!(
        stream,
        "M 100644 inline .gitignore\ndata {}\n{gitignore}\n",
        gitignore.len()
    );
    for i in 0..files {
        let text = format!("file {i} of the generated repository\n");
        let _ = write!(
            stream,
            "M 100644 inline {}/f{:03}.txt\ndata {}\n{text}\n",
            dir_name(i / 100),
            i % 100,
            text.len()
        );
    }
    fast_import(path, &stream)?;
    Ok(())
}

/// Seconds `f` took.
fn timed(f: impl FnOnce() -> Result<()>) -> Result<f64> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed().as_secs_f64())
}

fn ms(s: f64) -> String {
    format!("{:.2} ms", s * 1000.0)
}

/// Starts `argv` `n` times through `sandbox` in `dir` as plait starts an agent's command,
/// writing `edit` before each start; the seconds of each start to its exit.
fn starts(
    runtime: &tokio::runtime::Runtime,
    sandbox: &plait_sandbox::sandbox::Sandbox,
    dir: &Path,
    log: &Path,
    argv: &[&str],
    edit: &Path,
    n: usize,
) -> Result<Vec<f64>> {
    let (_keep, cancel) = plait_core::cancel::Cancel::new();
    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        std::fs::write(edit, format!("edit {i}\n"))?;
        let launch = plait_sandbox::shell::Launch {
            dir,
            env: &[],
            log,
            timeout: Duration::from_secs(120),
            cancel: &cancel,
            sandbox,
        };
        let start = Instant::now();
        let outcome = runtime.block_on(plait_sandbox::shell::run_argv(&argv, &launch));
        times.push(start.elapsed().as_secs_f64());
        if !matches!(outcome, plait_sandbox::shell::ShellOutcome::Exited(0)) {
            bail!(
                "`{}` in {}: {}",
                argv.join(" "),
                dir.display(),
                outcome.describe(Duration::from_secs(120))
            );
        }
    }
    Ok(times)
}

/// A plan of `tasks` exec `true` tasks, each owning one directory.
fn noop_plan(tasks: usize, dirs: usize) -> String {
    let mut toml = String::from(
        "goal = \"nothing\"\n[defaults]\nagent = { exec = \"true\" }\n[review]\nagent = \"off\"\n",
    );
    for t in 0..tasks {
        let d = t * dirs / tasks;
        let _ = write!(
            toml,
            "[[task]]\nid = \"t{t:03}\"\nprompt = \"p\"\nowns = [\"/{}/\"]\n",
            dir_name(d)
        );
    }
    toml
}

/// `plait run` of `plan` with `bin` in `repo`, to its end; wall seconds.
fn plait_run(bin: &Path, repo: &Path, plan: &Path) -> Result<f64> {
    let start = Instant::now();
    let out = Command::new(bin)
        .args(["run", &plan.display().to_string(), "-j", "2"])
        .current_dir(repo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    let elapsed = start.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "{} run failed: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(elapsed)
}

const CORE: &str = "from pkg.util import double\n\n\ndef quadruple(x):\n    return double(x) + x\n";
const UTIL: &str = "def double(x):\n    return 2 * x\n";
const TEST: &str = "import unittest\n\nfrom pkg.core import quadruple\n\n\nclass T(unittest.TestCase):\n    def test_quadruple(self):\n        self.assertEqual(quadruple(3), 12)\n";
const UNITTEST: &str = "python3 -m unittest tests.test_core";
const KEY: &str = "sk-bench-views-0123456789";

/// What one fix cost.
struct Fix {
    rounds: u64,
    requests: usize,
    input: u64,
    output: u64,
    runs: u64,
    wall: f64,
    done: bool,
}

/// One task fixing `pkg/core.py`, whose test imports `pkg/util.py` (not owned), with the
/// `run` tool or without it, through the plait binary against the mock.
fn fix(root: &Path, with_run: bool) -> Result<Fix> {
    use mock::{edit, MockModel, Provider, ToolCall, Turn};
    let name = if with_run { "fix-run" } else { "fix-guess" };
    let repo = root.join(name);
    std::fs::create_dir_all(repo.join("pkg"))?;
    std::fs::create_dir_all(repo.join("tests"))?;
    for (path, text) in [
        (".gitignore", "__pycache__/\n"),
        ("pkg/__init__.py", ""),
        ("pkg/core.py", CORE),
        ("pkg/util.py", UTIL),
        ("tests/__init__.py", ""),
        ("tests/test_core.py", TEST),
    ] {
        std::fs::write(repo.join(path), text)?;
    }
    git(&repo, &["init", "-q", "-b", "main"])?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "base"])?;
    let mock = MockModel::start(Provider::Anthropic, KEY);
    let run = |command: &str| ToolCall::new("run", serde_json::json!({"command": command}));
    let right = |old: &str| edit::str_replace("pkg/core.py", old, "return double(double(x))");
    let script = if with_run {
        vec![
            Turn::Tools(vec![run(UNITTEST)]),
            Turn::Tools(vec![right("return double(x) + x")]),
            Turn::Tools(vec![run(UNITTEST)]),
            Turn::Text("fixed; the test passes".into()),
        ]
    } else {
        vec![
            Turn::Tools(vec![edit::str_replace(
                "pkg/core.py",
                "return double(x) + x",
                "return double(x) * x",
            )]),
            Turn::Text("fixed, I think".into()),
            Turn::Tools(vec![right("return double(x) * x")]),
            Turn::Text("fixed as the check said".into()),
        ]
    };
    mock.script("a", script);
    let tools = if with_run { "" } else { "[tools]\nrun = []\n" };
    let plan = format!(
        "goal = \"Make quadruple right\"\n{tools}\
         [providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key_env = \"PLAIT_BENCH_KEY\"\nmodel = \"claude-sonnet-4-5\"\nmax_tokens = 1024\n\
         [review]\nagent = \"off\"\nrounds = 2\n[checks]\ntask = [\"{UNITTEST}\"]\n\
         [defaults]\nagent = \"mock\"\ntimeout = \"120s\"\n\
         [[task]]\nid = \"a\"\nprompt = \"Fix quadruple in pkg/core.py\"\nowns = [\"/pkg/core.py\"]\n",
        mock.url()
    );
    let plan_path = root.join(format!("{name}.toml"));
    std::fs::write(&plan_path, plan)?;
    let bin = env!("CARGO_BIN_EXE_plait");
    let start = Instant::now();
    let out = Command::new(bin)
        .args(["run", &plan_path.display().to_string()])
        .current_dir(&repo)
        .env("PLAIT_BENCH_KEY", KEY)
        .stdin(Stdio::null())
        .output()?;
    let wall = start.elapsed().as_secs_f64();
    let status = Command::new(bin)
        .args(["status", "--json"])
        .current_dir(&repo)
        .output()?;
    let status: serde_json::Value = serde_json::from_slice(&status.stdout)
        .with_context(|| format!("plait status: {}", String::from_utf8_lossy(&out.stderr)))?;
    let task = &status["tasks"][0];
    let usage = &task["usage"];
    let number = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    Ok(Fix {
        rounds: number(&task["rounds"]) + 1,
        requests: mock.count("a"),
        input: number(&usage["input_tokens"]),
        output: number(&usage["output_tokens"]),
        runs: number(&usage["runs"]),
        wall,
        done: task["state"] == "done" && out.status.success(),
    })
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let root = tempfile::Builder::new()
        .prefix("plait-bench-views-")
        .tempdir()?;
    let empty = root.path().join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    let baseline_bin = match &cfg.baseline {
        Some(rev) => Some(baseline(rev)?),
        None => None,
    };
    let dirs = cfg.files / 100;
    let repo_path = root.path().join("repo");
    stage(&format!("generating {} files", cfg.files));
    generate(&repo_path, dirs * 100)?;
    let repo = git2::Repository::open(&repo_path)?;
    let base = repo.revparse_single("main")?.peel_to_commit()?;
    let files = plait_core::git::flatten_tree(&base.tree()?)?;
    let mut report = String::new();
    let _ = writeln!(
        report,
        "views benchmark: {} files in {dirs} directories, {} CPUs, sandbox {:?}, views {:?}",
        files.len(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        plait_sandbox::sandbox::support(),
        plait_sandbox::sandbox::view_support(),
    );

    // 1. The first command's checkout.
    settle();
    stage("the base's checkout for views, a full checkout, a filled-in worktree");
    let views = root.path().join("views");
    let mut lower = PathBuf::new();
    let cold = timed(|| {
        let (tree, _lock) =
            plait_trees::workspace::view::base_tree(&repo, &views, base.id(), &files)
                .map_err(anyhow::Error::msg)?;
        lower = tree;
        Ok(())
    })?;
    let kept = timed(|| {
        plait_trees::workspace::view::base_tree(&repo, &views, base.id(), &files)
            .map_err(anyhow::Error::msg)?;
        Ok(())
    })?;
    settle();
    let full_dir = root.path().join("full");
    let full = timed(|| {
        git(
            &repo_path,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                &full_dir.display().to_string(),
                "main",
            ],
        )?;
        Ok(())
    })?;
    settle();
    let filled_dir = root.path().join("filled");
    std::fs::create_dir_all(filled_dir.join(dir_name(0)))?;
    let owned = format!("{}/", dir_name(0));
    let filled = timed(|| {
        plait_trees::workspace::view::materialize(
            &repo,
            &files,
            &|p: &str| p.starts_with(&owned),
            &filled_dir,
        )
        .map_err(anyhow::Error::msg)?;
        Ok(())
    })?;
    let _ = writeln!(report, "\n1. a task's first command: the checkout it needs");
    let _ = writeln!(
        report,
        "   base checkout for every view of the base (cold): {:>10}   ({:.2}x a full checkout)",
        secs(cold),
        cold / full
    );
    let _ = writeln!(
        report,
        "   base checkout, kept (every later task, run):     {:>10}",
        ms(kept)
    );
    let _ = writeln!(
        report,
        "   git worktree add (a full checkout):              {:>10}",
        secs(full)
    );
    let _ = writeln!(
        report,
        "   filled-in worktree (view = \"filled\"):            {:>10}   ({:.2}x a full checkout)",
        secs(filled),
        filled / full
    );

    // 2. A command after a one-file edit.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let worktree = root.path().join("task/worktree");
    let owned_dir = worktree.join(dir_name(0));
    std::fs::create_dir_all(&owned_dir)?;
    for f in 0..100 {
        std::fs::write(owned_dir.join(format!("f{f:03}.txt")), "owned\n")?;
    }
    let edit = owned_dir.join("f000.txt");
    let scratch = root.path().join("task/scratch");
    std::fs::create_dir_all(&scratch)?;
    let log = root.path().join("task/agent.log");
    let work = plait_trees::workspace::view::work_dir(&worktree);
    std::fs::create_dir_all(&work)?;
    let settings = plait_sandbox::sandbox::SandboxSettings {
        temp_root: std::env::temp_dir(),
        ..Default::default()
    };
    let open = plait_sandbox::sandbox::Sandbox::none();
    let walled =
        plait_sandbox::sandbox::Sandbox::new(&settings, vec![worktree.clone(), scratch.clone()]);
    let overlay = plait_sandbox::sandbox::OverlayView::of_worktree(
        worktree.clone(),
        vec![lower.clone()],
        worktree.clone(),
        work,
    );
    let viewed =
        plait_sandbox::sandbox::Sandbox::new(&settings, vec![worktree.clone(), scratch.clone()])
            .with_view(
                plait_sandbox::sandbox::view_support()
                    .is_ok()
                    .then_some(overlay),
            );
    let n = cfg.spawns;
    stage(&format!(
        "`true` started {n} times: no walls, walls, walls in the view"
    ));
    let mut figures = Vec::new();
    for (name, sandbox) in [
        ("no walls", &open),
        ("Landlock", &walled),
        ("Landlock in the view", &viewed),
    ] {
        settle();
        let times = starts(&runtime, sandbox, &worktree, &log, &["true"], &edit, n)?;
        figures.push((name, median(&times)));
    }
    // The view shows the base's files and the task's edit.
    let probe = format!("{}/f099.txt", dir_name(dirs - 1));
    let times = starts(
        &runtime,
        &viewed,
        &worktree,
        &log,
        &[
            "sh",
            "-c",
            &format!("test -f {probe} && grep -q edit {}/f000.txt", dir_name(0)),
        ],
        &edit,
        1,
    );
    let shows = times.is_ok();
    let _ = writeln!(
        report,
        "\n2. a command after a one-file edit (`true`, median of {n} starts)"
    );
    let plain = figures[0].1;
    for (name, t) in &figures {
        let _ = writeln!(
            report,
            "   {name:<22} {:>10}   (+{} over no walls)",
            ms(*t),
            ms(t - plain)
        );
    }
    let _ = writeln!(
        report,
        "   the view's own cost (over Landlock alone): {}; the command saw the whole tree and the edit: {shows}",
        ms(figures[2].1 - figures[1].1)
    );

    // 3. Reading the whole tree.
    stage("find . -type f in the view and in a full checkout");
    let find = [
        "sh",
        "-c",
        "find . -type f -not -path './.git*' | wc -l >/dev/null",
    ];
    settle();
    let in_view = median(&starts(
        &runtime, &viewed, &worktree, &log, &find, &edit, 5,
    )?);
    settle();
    let full_edit = full_dir.join(dir_name(0)).join("f000.txt");
    let in_full = median(&starts(
        &runtime, &walled, &full_dir, &log, &find, &full_edit, 5,
    )?);
    let _ = writeln!(
        report,
        "\n3. a command reading the whole tree (find, median of 5)\n   in the view: {}   in a full checkout: {}   ({:.2}x)",
        ms(in_view),
        ms(in_full),
        in_view / in_full
    );

    // 4. A run that runs nothing.
    let plan_path = root.path().join("noop.toml");
    std::fs::write(&plan_path, noop_plan(cfg.tasks, dirs))?;
    let this = PathBuf::from(env!("CARGO_BIN_EXE_plait"));
    let mut bins: Vec<(String, PathBuf)> = vec![("this plait".to_string(), this)];
    if let (Some(rev), Some(bin)) = (&cfg.baseline, &baseline_bin) {
        bins.insert(0, (format!("plait {rev}"), bin.clone()));
    }
    let mut walls = Vec::new();
    for (name, bin) in &bins {
        stage(&format!(
            "{name}: {} runs of {} no-op tasks",
            cfg.reps, cfg.tasks
        ));
        let mut times = Vec::new();
        for _ in 0..=cfg.reps {
            settle();
            times.push(plait_run(bin, &repo_path, &plan_path)?);
        }
        // The first run of a base makes the views' checkout of it, kept for later runs.
        walls.push((name.clone(), times[0], median(&times[1..])));
    }
    let _ = writeln!(
        report,
        "\n4. {} exec `true` tasks that run nothing (plait run -j 2): the first run on the base, then the median of {} more",
        cfg.tasks, cfg.reps
    );
    let anchor = walls[0].2;
    for (name, first, wall) in &walls {
        let _ = writeln!(
            report,
            "   {name:<22} first {:>9}   then {:>9}, {} per task   ({:.3}x)",
            secs(*first),
            secs(*wall),
            ms(wall / cfg.tasks as f64),
            wall / anchor
        );
    }
    // 5. A model agent fixing a failing test, with `run` and without.
    stage("a model agent fixing a failing test, with the run tool and without");
    let with = fix(root.path(), true)?;
    let without = fix(root.path(), false)?;
    let _ = writeln!(
        report,
        "\n5. a model agent fixing a test that imports a module it does not own (mock server)"
    );
    for (name, f) in [("with `run`", &with), ("without (run = [])", &without)] {
        let _ = writeln!(
            report,
            "   {name:<20} rounds {}   requests {}   tokens in {} out {}   commands run {}   {}   {}",
            f.rounds,
            f.requests,
            f.input,
            f.output,
            f.runs,
            secs(f.wall),
            if f.done { "done" } else { "NOT done" }
        );
    }
    print!("{report}");
    if cfg.keep {
        let kept = root.keep();
        eprintln!("kept {}", kept.display());
    }
    Ok(())
}
