//! Environment benchmark: what the base layers (one per base commit: its tracked files,
//! `[setup]`, plait's own build of the base) cost and save, each figure against an anchor
//! measured in the same run. Prints figures, asserts nothing about time.
//!
//! 1. *a task's check checkout* on a generated repository of `--files N` (default 60,000):
//!    through the library, the base layer made once (`Environment::prepare`), then a check
//!    layer for each of `--layers` one-file commits (`LayerDir` made, `changes`, `apply`,
//!    `git_dir`: what a task's first check does before its command) against the seed copy
//!    it replaced (`cp -a --reflink=auto` of the checkout); a check's first command
//!    (`--spawns` times) and `git status` in the layer's view against the same without a
//!    view; and end to end, `--big-tasks` exec tasks with the task check `true` against the
//!    same run without checks;
//! 2. *`[setup] run = ["npm ci --offline"]`* for `--tasks` (default 100) exec tasks in a
//!    Node project whose dependency is a `file:` package: that the install ran once, and
//!    the run's wall time against the same plan without `[setup]`, less the install by hand;
//! 3. *an agent's first `cargo check`* after a one-file edit in regex-syntax (from the
//!    cargo registry, or `--crate DIR`), in its view over the warmed base layer, `--reps`
//!    runs, against the same incremental check by hand in a clone, and the cold check an
//!    agent's fresh worktree had before;
//! 4. *the rustfmt plan* over the crate (one exec task per `src/**/*.rs` file, task check
//!    `cargo check`, merged check `cargo test`), its second run on the same base, against
//!    the same job by hand in a warm clone (rustfmt over the files and `cargo test`; and
//!    with the plan's `cargo check` after each file).
//!
//! `--parts 1,2,3,4` picks parts; `--keep` keeps the directory. Run it through
//! `./bench --environment`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};
use plait_trees::environment::{apply, changes, git_dir, EnvRequest, Environment, LayerDir};

mod common;
use common::krate;
use common::runs::{cp, plait_run, sh, sh_env, toml_str, Run};
use common::{generate, git, isolate_git, median, secs, settle, stage, time, EMAIL, NAME};

struct Config {
    files: usize,
    layers: usize,
    spawns: usize,
    big_tasks: usize,
    tasks: usize,
    reps: usize,
    parts: Vec<u32>,
    krate: Option<String>,
    keep: bool,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            files: 60_000,
            layers: 20,
            spawns: 50,
            big_tasks: 20,
            tasks: 100,
            reps: 3,
            parts: vec![1, 2, 3, 4],
            krate: None,
            keep: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |key: &str| args.next().with_context(|| format!("{key} needs a value"));
            let number = |key: &str, text: String| -> Result<usize> {
                text.replace('_', "")
                    .parse()
                    .with_context(|| format!("{key} takes a number, not `{text}`"))
            };
            match arg.as_str() {
                "--files" => cfg.files = number(&arg, value(&arg)?)?.max(1_000),
                "--layers" => cfg.layers = number(&arg, value(&arg)?)?.max(1),
                "--spawns" => cfg.spawns = number(&arg, value(&arg)?)?.max(1),
                "--big-tasks" => cfg.big_tasks = number(&arg, value(&arg)?)?.max(1),
                "--tasks" => cfg.tasks = number(&arg, value(&arg)?)?.max(1),
                "--reps" => cfg.reps = number(&arg, value(&arg)?)?.max(1),
                "--parts" => {
                    cfg.parts = value(&arg)?
                        .split(',')
                        .map(|p| p.trim().parse().context("--parts takes numbers 1 to 4"))
                        .collect::<Result<_>>()?
                }
                "--crate" => cfg.krate = Some(value(&arg)?),
                "--keep" => cfg.keep = true,
                "--bench" => {}
                other => bail!(
                    "unknown argument `{other}` (--files N, --layers N, --spawns N, \
                     --big-tasks N, --tasks N, --reps N, --parts 1,2,3,4, --crate DIR, --keep)"
                ),
            }
        }
        Ok(cfg)
    }
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let dir = tempfile::Builder::new().prefix("plait-env-").tempdir()?;
    let root = dir.path().to_path_buf();
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    // The runs' worktrees and views go under the temporary directory, not the user's cache.
    std::env::set_var("XDG_CACHE_HOME", root.join("cache"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Err(why) = plait_sandbox::sandbox::view_support() {
        bail!("this system allows no views over layers: {why}");
    }
    println!(
        "plait environment benchmark ({} CPUs, load average {}), every figure against an \
         anchor of the same run",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        load()
    );
    if cfg.parts.contains(&1) {
        check_layers(&root, &cfg, &runtime)?;
    }
    if cfg.parts.contains(&2) {
        node_setup(&root, &cfg)?;
    }
    if cfg.parts.contains(&3) || cfg.parts.contains(&4) {
        let krate = krate::find(cfg.krate.clone())?;
        let repo = root.join("crate");
        krate::repo(&repo, &krate)?;
        let name = krate.file_name().unwrap_or_default().to_string_lossy();
        if cfg.parts.contains(&3) {
            first_check(&root, &repo, &name, &cfg)?;
        }
        if cfg.parts.contains(&4) {
            rustfmt_plan(&root, &repo, &name)?;
        }
    }
    println!();
    println!("load average at the end: {}", load());
    if cfg.keep {
        println!("kept {}", dir.keep().display());
    }
    Ok(())
}

/// The system's load averages over 1, 5 and 15 minutes: how noisy the machine was.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

// ---- 1. a task's check checkout -------------------------------------------------------

/// `n` commits on `base`, each changing one file of a different directory.
fn one_file_commits(repo: &Repository, base: Oid, n: usize, files: usize) -> Result<Vec<Oid>> {
    let parent = repo.find_commit(base)?;
    let tree = parent.tree()?;
    let sig = git2::Signature::new(NAME, EMAIL, &git2::Time::new(1_700_000_000, 0))?;
    let dirs = files / 100;
    (0..n)
        .map(|i| {
            let path = format!("{}/f000.txt", common::dir_name(i * dirs / n));
            let blob = repo.blob(format!("changed by commit {i}\n").as_bytes())?;
            let mut update = git2::build::TreeUpdateBuilder::new();
            update.upsert(path.as_str(), blob, git2::FileMode::Blob);
            let changed = repo.find_tree(update.create_updated(repo, &tree)?)?;
            Ok(repo.commit(None, &sig, &sig, &path, &changed, &[&parent])?)
        })
        .collect()
}

/// The steps of [`check_layer`], in order.
const STEPS: [&str; 4] = ["open, dirs", "changes", "apply", "git_dir"];

/// What a task's first check does before its command: a layer made over `env` for
/// `commit`, holding what the commit changes against the base, and its git directory (as
/// `review::layers` does); the seconds of each of [`STEPS`].
fn check_layer(
    repo: &Path,
    env: &Environment,
    dir: &Path,
    commit: Oid,
) -> Result<(LayerDir, [f64; 4])> {
    let mut lap = Instant::now();
    let mut steps = [0.0; 4];
    let mut split = |i: usize| {
        steps[i] = lap.elapsed().as_secs_f64();
        lap = Instant::now();
    };
    let repo = Repository::discover(repo)?;
    let layer = LayerDir(dir.to_path_buf());
    env.make_layer(&layer)?;
    split(0);
    let lower = plait_core::beneath::Tree::open(&env.tree())?;
    let in_lower = |p: &str| lower.kind(p).is_ok_and(|k| k.is_some());
    let changed = changes(&repo, env.base, commit)?;
    split(1);
    let upper = layer.open_upper()?;
    apply(&repo, &upper, &changed, &in_lower)?;
    split(2);
    let admin = layer.new_git_dir()?;
    git_dir(&repo, &admin, commit, &env.index(), &changed)?;
    let gitdir = format!("gitdir: {}\n", admin.root().display());
    upper.write(".git", gitdir.as_bytes(), false)?;
    split(3);
    Ok((layer, steps))
}

/// The base layer of `repo`'s `main`, made through the library as a run makes it (no
/// setup, no checks to warm); the seconds it took.
fn base_layer(
    rt: &tokio::runtime::Runtime,
    repo: &Path,
    root: &Path,
    settings: &plait_sandbox::sandbox::SandboxSettings,
) -> Result<(f64, Environment)> {
    let git = Repository::open(repo)?;
    let base = git.head()?.peel_to_commit()?;
    let files = Arc::new(plait_core::git::flatten_tree(&base.tree()?)?);
    let setup = plait_plan::SetupSettings::default();
    let (_keep, cancel) = plait_core::cancel::Cancel::new();
    let req = EnvRequest {
        repo,
        envs: git.path().join("plait/envs"),
        base: base.id(),
        files,
        setup: &setup,
        stable: root.join("stable/tree"),
        sandbox: settings,
        warm: Vec::new(),
        env: Vec::new(),
        warm_logs: root.join("logs/warm"),
        setup_logs: root.join("logs/setup"),
        timeout: Duration::from_secs(600),
        cancel: &cancel,
    };
    settle();
    time(|| Ok(rt.block_on(Environment::prepare(req))?.0))
}

/// Runs `command` `n` times through `sandbox` in `dir` as a check runs; the seconds of
/// each, and the last one's log.
fn starts(
    rt: &tokio::runtime::Runtime,
    sandbox: &plait_sandbox::sandbox::Sandbox,
    dir: &Path,
    log: &Path,
    command: &str,
    n: usize,
) -> Result<(Vec<f64>, String)> {
    let (_keep, cancel) = plait_core::cancel::Cancel::new();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        std::fs::write(log, "")?;
        let launch = plait_sandbox::shell::Launch {
            dir,
            env: &[],
            log,
            timeout: Duration::from_secs(120),
            cancel: &cancel,
            sandbox,
        };
        let start = Instant::now();
        let outcome = rt.block_on(plait_sandbox::shell::run(command, &launch));
        times.push(start.elapsed().as_secs_f64());
        if !matches!(outcome, plait_sandbox::shell::ShellOutcome::Exited(0)) {
            bail!(
                "`{command}` in {}: {}",
                dir.display(),
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
    }
    Ok((times, std::fs::read_to_string(log)?))
}

/// Part 1: a task's check checkout on the generated repository, through the library, then
/// end to end.
fn check_layers(root: &Path, cfg: &Config, rt: &tokio::runtime::Runtime) -> Result<()> {
    let repo = root.join("big");
    stage(&format!("1: generating {} files", cfg.files));
    generate(&repo, cfg.files, 100)?;
    let seed = root.join("seed");
    let at = seed.display().to_string();
    git(&repo, &["worktree", "add", "-q", "--detach", &at, "main"])?;
    stage("1: the seed copy (cp -a --reflink=auto), twice");
    let mut copies = Vec::new();
    for i in 0..2 {
        let copy = root.join(format!("copy-{i}"));
        settle();
        copies.push(time(|| cp(&seed, &copy))?.0);
        plait_trees::environment::remove_tree(&copy);
    }
    let settings = plait_sandbox::sandbox::SandboxSettings {
        temp_root: std::env::temp_dir(),
        ..Default::default()
    };
    stage("1: the base layer (Environment::prepare)");
    let (made, env) = base_layer(rt, &repo, root, &settings)?;
    let commits = one_file_commits(&Repository::open(&repo)?, env.base, cfg.layers, cfg.files)?;
    stage(&format!("1: {} check layers", commits.len()));
    let (mut times, mut steps) = (Vec::new(), vec![Vec::new(); STEPS.len()]);
    let mut last = None;
    for (i, commit) in commits.iter().enumerate() {
        settle();
        let dir = root.join(format!("layers/check-{i}"));
        let (s, (layer, split)) = time(|| check_layer(&repo, &env, &dir, *commit))?;
        times.push(s);
        for (all, one) in steps.iter_mut().zip(split) {
            all.push(one);
        }
        last = Some(layer);
    }
    println!();
    println!(
        "1. a task's check checkout, {} files, one-file commits",
        cfg.files
    );
    println!(
        "   base layer, made once per base (Environment::prepare): {}",
        secs(made)
    );
    print_layers(&env, &times, &steps, median(&copies));
    let layer = last.context("no layer")?;
    first_commands(rt, root, cfg, &settings, &env, &layer, &seed)?;
    drop(env);
    check_layers_end_to_end(root, &repo, cfg)
}

/// The check layers' times (`times`, and `steps` by step) against the seed copy's.
fn print_layers(env: &Environment, times: &[f64], steps: &[Vec<f64>], copy: f64) {
    let per_layer = median(times);
    println!(
        "   check layer (LayerDir, changes, apply, git_dir): {} median of {}, first {}, \
         max {} (goal <= 30 ms)",
        secs(per_layer),
        times.len(),
        secs(times[0]),
        secs(times.iter().copied().fold(0.0, f64::max))
    );
    let split: Vec<String> = STEPS
        .iter()
        .zip(steps)
        .map(|(name, times)| format!("{name} {}", secs(median(times))))
        .collect();
    let index = std::fs::metadata(env.index()).map_or(0, |m| m.len());
    println!(
        "   of which (medians): {}; the base index it copies and rewrites: {}",
        split.join(", "),
        common::bytes(index)
    );
    println!(
        "   anchor, the seed copy it replaces (cp -a --reflink=auto): {} -> layer / copy {:.4}x",
        secs(copy),
        per_layer / copy
    );
}

/// A check's first command (`true`) and `git status` in `layer`'s view, against the same
/// without a view in the checkout `seed`.
fn first_commands(
    rt: &tokio::runtime::Runtime,
    root: &Path,
    cfg: &Config,
    settings: &plait_sandbox::sandbox::SandboxSettings,
    env: &Environment,
    layer: &LayerDir,
    seed: &Path,
) -> Result<()> {
    use plait_sandbox::sandbox::Sandbox;
    stage("1: a check's first command in the layer's view");
    let log = root.join("logs/start.log");
    let view = Sandbox::new(settings, Vec::new()).with_view(Some(env.check_view(layer)));
    let bare = Sandbox::new(settings, Vec::new());
    let (in_view, _) = starts(rt, &view, &env.stable, &log, "true", cfg.spawns)?;
    let (in_seed, _) = starts(rt, &bare, seed, &log, "true", cfg.spawns)?;
    let status = "git status --porcelain";
    let (status_view, shown) = starts(rt, &view, &env.stable, &log, status, 3)?;
    let (status_seed, _) = starts(rt, &bare, seed, &log, status, 3)?;
    println!(
        "   a check's `true` in the layer's view: {} median of {}, anchor without a view in \
         the checkout {} -> +{}",
        secs(median(&in_view)),
        in_view.len(),
        secs(median(&in_seed)),
        secs(median(&in_view) - median(&in_seed))
    );
    let shown = match shown.trim() {
        "" => "clean".to_string(),
        dirty => format!("NOT CLEAN: {}", dirty.replace('\n', "; ")),
    };
    println!(
        "   `git status` in the layer's view: {} median of 3 ({shown}), anchor in the checkout \
         {} -> {:.2}x",
        secs(median(&status_view)),
        secs(median(&status_seed)),
        median(&status_view) / median(&status_seed)
    );
    Ok(())
}

/// Part 1 end to end: `--big-tasks` exec tasks each changing one file of the generated
/// repository, with the task check `true` and without checks.
fn check_layers_end_to_end(root: &Path, repo: &Path, cfg: &Config) -> Result<()> {
    let plan = |checks: &str| {
        let mut toml =
            format!("goal = \"edit\"\n[review]\nagent = \"off\"\n[checks]\ntask = [{checks}]\n");
        for t in 0..cfg.big_tasks {
            let file = format!(
                "{}/f001.txt",
                common::dir_name(t * (cfg.files / 100) / cfg.big_tasks)
            );
            let _ = write!(
                toml,
                "[[task]]\nid = \"t{t:03}\"\nprompt = \"p\"\nowns = [\"/{file}\"]\n\
                 agent = {{ exec = \"echo edited >> {file}\" }}\n"
            );
        }
        toml
    };
    stage(&format!("1: {} exec tasks without checks", cfg.big_tasks));
    let without = plait_run(root, repo, &plan(""), "big-nochecks")?;
    stage(&format!(
        "1: {} exec tasks with the task check `true`",
        cfg.big_tasks
    ));
    let with = plait_run(root, repo, &plan("\"true\""), "big-true")?;
    let check_ms: Vec<f64> = with.state["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["checks"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["ms"].as_f64())
        .map(|ms| ms / 1000.0)
        .collect();
    let n = cfg.big_tasks as f64;
    let env_s = with.environment_ms() / 1000.0;
    println!(
        "   end to end, {} exec tasks, -j 2: with the task check `true` {} (environment {}), \
         without checks {} -> {} a task beyond the environment; the check's own time \
         (tasks[].checks[].ms) {} median of {}; all done: {}",
        cfg.big_tasks,
        secs(with.wall),
        secs(env_s),
        secs(without.wall),
        secs((with.wall - env_s - without.wall) / n),
        secs(median(&check_ms)),
        check_ms.len(),
        with.all_done() && without.all_done()
    );
    Ok(())
}

// ---- 2. [setup] run = ["npm ci --offline"] --------------------------------------------

const LEFT_PAD: &str = "module.exports = (s, n, c) => String(c || ' ').repeat(Math.max(0, n - String(s).length)) + s;\n";
const LEFT_PAD_PACKAGE: &str =
    "{\"name\": \"left-pad\", \"version\": \"1.3.0\", \"main\": \"index.js\"}\n";
const NPM_CI: &str = "npm ci --offline --no-audit --no-fund";

/// A Node project of `modules` modules loading `left-pad` from `vendor/` (a `file:`
/// dependency, so installs are offline), its lockfile made by `npm install --offline` in a
/// copy, committed without `node_modules`.
fn node_project(path: &Path, modules: usize) -> Result<()> {
    let package = "{\"name\": \"np\", \"version\": \"1.0.0\", \
                   \"dependencies\": {\"left-pad\": \"file:vendor/left-pad\"}}\n";
    let mut files = vec![
        (".gitignore".to_string(), "node_modules/\n".to_string()),
        ("package.json".to_string(), package.to_string()),
        ("vendor/left-pad/index.js".to_string(), LEFT_PAD.to_string()),
        (
            "vendor/left-pad/package.json".to_string(),
            LEFT_PAD_PACKAGE.to_string(),
        ),
    ];
    for m in 0..modules {
        files.push((
            format!("src/m{m:03}.js"),
            format!("module.exports = () => require('left-pad')('{m}', 4, '0');\n"),
        ));
    }
    for (file, text) in &files {
        let dest = path.join(file);
        std::fs::create_dir_all(dest.parent().context("no parent")?)?;
        std::fs::write(dest, text)?;
    }
    let lock = path.with_file_name("node-lock");
    std::fs::create_dir_all(lock.join("vendor"))?;
    std::fs::copy(path.join("package.json"), lock.join("package.json"))?;
    cp(&path.join("vendor/left-pad"), &lock.join("vendor/left-pad"))?;
    sh(&lock, "npm install --offline --no-audit --no-fund")?;
    std::fs::copy(
        lock.join("package-lock.json"),
        path.join("package-lock.json"),
    )?;
    git(path, &["init", "-q", "-b", "main"])?;
    git(path, &["add", "-A"])?;
    git(path, &["commit", "-q", "-m", "base"])?;
    Ok(())
}

/// Part 2: `--tasks` exec tasks with `[setup] run = ["npm ci --offline"]` against the same
/// plan without `[setup]`, each run in a fresh copy; the install by hand.
fn node_setup(root: &Path, cfg: &Config) -> Result<()> {
    let repo = root.join("node");
    stage(&format!("2: a Node project of {} modules", cfg.tasks));
    node_project(&repo, cfg.tasks)?;
    let plan = |setup: bool| {
        let mut toml = String::from("goal = \"edit\"\n[review]\nagent = \"off\"\n");
        if setup {
            let _ = writeln!(toml, "[setup]\nrun = [\"{NPM_CI}\"]");
        }
        for t in 0..cfg.tasks {
            let _ = write!(
                toml,
                "[[task]]\nid = \"t{t:03}\"\nprompt = \"p\"\nowns = [\"/src/m{t:03}.js\"]\n\
                 agent = {{ exec = \"echo '// edited' >> src/m{t:03}.js\" }}\n"
            );
        }
        toml
    };
    // Two runs of each plan are enough to see the noise; four runs of 100 tasks are many.
    let reps = cfg.reps.min(2);
    let (mut with, mut without, mut install) = (Vec::new(), Vec::new(), Vec::new());
    let mut once = Vec::new();
    for rep in 0..reps {
        let hand = root.join(format!("node-hand-{rep}"));
        cp(&repo, &hand)?;
        stage(&format!("2: {NPM_CI} by hand ({}/{reps})", rep + 1));
        install.push(time(|| sh(&hand, NPM_CI))?.0);
        for setup in [true, false] {
            let name = format!("node-{}-{rep}", if setup { "setup" } else { "bare" });
            let copy = root.join(&name);
            cp(&repo, &copy)?;
            stage(&format!("2: {name}"));
            let run = plait_run(root, &copy, &plan(setup), &name)?;
            if setup {
                let logs = copy.join(".git/plait/runs").join(&run.id).join("setup");
                let count = std::fs::read_dir(&logs).map_or(0, |d| d.count());
                once.push((count, run.state["environment"]["setup"].clone()));
                with.push(run);
            } else {
                without.push(run);
            }
        }
    }
    let wall = |runs: &[Run]| median(&runs.iter().map(|r| r.wall).collect::<Vec<_>>());
    let env_ms = median(&with.iter().map(Run::environment_ms).collect::<Vec<_>>()) / 1000.0;
    let (w, wo, i) = (wall(&with), wall(&without), median(&install));
    println!();
    println!(
        "2. [setup] run = [\"{NPM_CI}\"], {} exec tasks, -j 2",
        cfg.tasks
    );
    for (count, setup) in &once {
        println!("   setup logs in the run's setup/: {count}; state environment.setup: {setup}");
    }
    println!(
        "   wall with [setup] {}, anchor without [setup] {} -> {:.2}x; the install by hand {}, \
         plait's environment {}",
        secs(w),
        secs(wo),
        w / wo,
        secs(i),
        secs(env_ms)
    );
    println!(
        "   beyond the install: (with - without - install) / {} = {} a task (goal <= 10 ms); \
         less plait's whole environment instead: {} a task; all done: {}",
        cfg.tasks,
        secs((w - wo - i) / cfg.tasks as f64),
        secs((w - wo - env_ms) / cfg.tasks as f64),
        with.iter().chain(&without).all(Run::all_done)
    );
    Ok(())
}

// ---- 3. an agent's first cargo check ------------------------------------------------

/// The file the agent edits, and its edit.
const EDITED: &str = "src/ast/parse.rs";
/// Where the agent keeps its timing and cargo's output, in the directory it owns
/// (`<BENCH>-ms.txt`, `<BENCH>-check.txt`): a task's globs must match a tracked file.
const BENCH: &str = "src/ast/plait-bench";
const EDIT: &str = "echo '// edited by the agent' >> src/ast/parse.rs";

/// A plan with `task` as its task check and one agent task that edits [`EDITED`] and times
/// its `cargo check` into files beside it (it owns their directory).
fn first_check_plan() -> String {
    let agent = format!(
        "{EDIT} && s=$(date +%s%N) && \
         cargo check --offline 2> {BENCH}-check.txt; e=$(date +%s%N); \
         echo $(( (e - s) / 1000000 )) > {BENCH}-ms.txt"
    );
    format!(
        "goal = \"edit\"\n[review]\nagent = \"off\"\n[checks]\n\
         task = [\"cargo check --offline -q\"]\ntimeout = \"30m\"\n\
         [defaults]\nsandbox = {{ writable = [{}] }}\n\
         [[task]]\nid = \"edit\"\nprompt = \"p\"\nowns = [\"/src/ast/\"]\n\
         agent = {{ cli = [\"sh\", \"-c\", {}] }}\n",
        toml_str(&krate::cargo_home().display().to_string()),
        toml_str(&agent)
    )
}

/// Part 3: the agent's first `cargo check` after an edit, `--reps` runs on the same base,
/// against the same check by hand in a warm clone, and the cold check.
fn first_check(root: &Path, repo: &Path, name: &str, cfg: &Config) -> Result<()> {
    let hand = root.join("check-hand");
    git(
        root,
        &[
            "clone",
            "-q",
            &repo.display().to_string(),
            &hand.display().to_string(),
        ],
    )?;
    stage("3: cargo check by hand, cold");
    let cold = time(|| sh(&hand, "cargo check --offline -q"))?.0;
    let mut by_hand = Vec::new();
    for rep in 0..cfg.reps {
        stage(&format!(
            "3: cargo check by hand after the edit ({}/{})",
            rep + 1,
            cfg.reps
        ));
        git(&hand, &["checkout", "-q", "--", EDITED])?;
        sh(&hand, "cargo check --offline -q")?;
        sh(&hand, EDIT)?;
        by_hand.push(time(|| sh(&hand, "cargo check --offline -q"))?.0);
    }
    let copy = root.join("check-plait");
    cp(repo, &copy)?;
    let (mut agent, mut checks, mut runs) = (Vec::new(), Vec::new(), Vec::new());
    let mut compiled = String::new();
    for rep in 0..cfg.reps {
        stage(&format!(
            "3: plait run, the agent's check ({}/{})",
            rep + 1,
            cfg.reps
        ));
        let run = plait_run(root, &copy, &first_check_plan(), &format!("check-{rep}"))?;
        let branch = format!("plait/{}/edit", run.id);
        let ms = git(&copy, &["show", &format!("{branch}:{BENCH}-ms.txt")])?;
        agent.push(ms.trim().parse::<f64>().context("the agent's time")? / 1000.0);
        let log = git(&copy, &["show", &format!("{branch}:{BENCH}-check.txt")])?;
        compiled = log
            .lines()
            .filter(|l| l.contains("Compiling") || l.contains("Checking"))
            .map(str::trim)
            .collect::<Vec<_>>()
            .join("; ");
        if let Some(ms) = run.state["tasks"][0]["checks"][0]["ms"].as_f64() {
            checks.push(ms / 1000.0);
        }
        runs.push(run);
    }
    let (a, h) = (median(&agent), median(&by_hand));
    println!();
    println!("3. an agent's first `cargo check --offline` after a one-file edit ({name})");
    println!(
        "   in its view over the warmed base layer: {} median of {} (each: {}); it compiled: {}",
        secs(a),
        agent.len(),
        agent
            .iter()
            .map(|s| secs(*s))
            .collect::<Vec<_>>()
            .join(", "),
        if compiled.is_empty() { "-" } else { &compiled }
    );
    println!(
        "   anchor, the same check by hand in a warm clone: {} -> {:.2}x (goal <= 1.5x)",
        secs(h),
        a / h
    );
    println!(
        "   before (a fresh checkout's cold check): {} -> now {:.2}x of it; the task check in \
         its layer: {}; the first run's environment (warming the base): {}; all done: {}",
        secs(cold),
        a / cold,
        secs(median(&checks)),
        secs(runs.first().map_or(0.0, Run::environment_ms) / 1000.0),
        runs.iter().all(Run::all_done)
    );
    Ok(())
}

// ---- 4. the rustfmt plan ----------------------------------------------------------------

/// Formats `file` the way a task whose worktree holds only that file can: from stdin
/// (rustfmt given a path formats the modules it declares too).
fn rustfmt(file: &str) -> String {
    format!("rustfmt --edition 2021 --emit stdout < {file} > \"$PLAIT_SCRATCH/out\" && cp \"$PLAIT_SCRATCH/out\" {file}")
}

fn rustfmt_plan_toml(files: &[String]) -> String {
    let mut toml = format!(
        "goal = \"format\"\n[checks]\ntask = [\"cargo check --offline -q\"]\n\
         merged = [\"cargo test --offline -q\"]\njobs = 2\ntimeout = \"30m\"\n\
         [review]\nagent = \"off\"\n[defaults]\nsandbox = {{ writable = [{}] }}\n",
        toml_str(&krate::cargo_home().display().to_string())
    );
    for (k, file) in files.iter().enumerate() {
        let _ = write!(
            toml,
            "[[task]]\nid = \"f{k:02}\"\nprompt = \"p\"\nowns = [\"/{file}\"]\n\
             agent = {{ exec = {} }}\n",
            toml_str(&rustfmt(file))
        );
    }
    toml
}

/// The job of the rustfmt plan by hand in the warm clone `hand`, timed: rustfmt over
/// `files` (with `cargo check` after each when `check_each`), then `cargo test`; the clone
/// put back and built at the base after.
fn fmt_by_hand(hand: &Path, scratch: &Path, files: &[String], check_each: bool) -> Result<f64> {
    let mut script = String::from("set -e\n");
    for file in files {
        let _ = writeln!(script, "{}", rustfmt(file));
        if check_each {
            script.push_str("cargo check --offline -q\n");
        }
    }
    script.push_str("cargo test --offline -q\n");
    let took = time(|| sh_env(hand, &script, &[("PLAIT_SCRATCH", scratch)]))?.0;
    git(hand, &["checkout", "-q", "--", "."])?;
    sh(
        hand,
        "cargo check --offline -q && cargo test --offline -q --no-run",
    )?;
    Ok(took)
}

/// Part 4: the rustfmt plan twice on the same base (the second measured), against
/// rustfmt over the files and one `cargo test` by hand in a warm clone (and the same with
/// the plan's task check after each file).
fn rustfmt_plan(root: &Path, repo: &Path, name: &str) -> Result<()> {
    let files = krate::sources(repo)?;
    let hand = root.join("fmt-hand");
    let (from, to) = (repo.display().to_string(), hand.display().to_string());
    git(root, &["clone", "-q", &from, &to])?;
    let scratch = root.join("fmt-scratch");
    std::fs::create_dir_all(&scratch)?;
    let all: String = files.iter().map(|f| rustfmt(f) + "\n").collect();
    sh_env(&hand, &all, &[("PLAIT_SCRATCH", &scratch)])?;
    let changed = git(&hand, &["diff", "--name-only"])?.lines().count();
    stage("4: by hand: warming the clone");
    git(&hand, &["checkout", "-q", "--", "."])?;
    sh(&hand, "cargo check --offline -q && cargo test --offline -q")?;
    stage("4: by hand: rustfmt over the files, then cargo test");
    let by_hand = fmt_by_hand(&hand, &scratch, &files, false)?;
    stage("4: by hand: rustfmt and cargo check file by file, then cargo test");
    let checked = fmt_by_hand(&hand, &scratch, &files, true)?;
    let copy = root.join("fmt-plait");
    cp(repo, &copy)?;
    let toml = rustfmt_plan_toml(&files);
    stage("4: plait run, first on the base");
    let first = plait_run(root, &copy, &toml, "fmt-1")?;
    stage("4: plait run, second on the same base");
    let second = plait_run(root, &copy, &toml, "fmt-2")?;
    println!();
    println!(
        "4. the rustfmt plan over {name}: {} tasks ({changed} files changed by rustfmt), task \
         check `cargo check`, merged check `cargo test`, -j 2",
        files.len()
    );
    for (label, run) in [("first run", &first), ("second run", &second)] {
        let (tasks, merged) = phases(run);
        println!(
            "   {label}: {} (environment {}; tasks {}, their checks {} in all; merged checks \
             {}; the rest {}); all done: {}, merged checks passed: {}",
            secs(run.wall),
            secs(run.environment_ms() / 1000.0),
            secs(tasks),
            secs(run.task_checks()),
            secs(merged),
            secs(run.wall - run.environment_ms() / 1000.0 - tasks - merged),
            run.all_done(),
            run.merged_green()
        );
    }
    println!(
        "   anchor, by hand in a warm clone (rustfmt over the files, cargo test): {} -> \
         second run {:.2}x (goal <= 1.3x), first run {:.2}x",
        secs(by_hand),
        second.wall / by_hand,
        first.wall / by_hand
    );
    println!(
        "   by hand with the plan's task check after each file (one at a time): {} -> second \
         run {:.2}x",
        secs(checked),
        second.wall / checked
    );
    Ok(())
}

/// Seconds from the first task's start to the last one's end, and of the merged checks.
fn phases(run: &Run) -> (f64, f64) {
    let at = |key: &'static str| run.tasks().filter_map(move |t| t[key].as_u64());
    let span = match (at("started_at").min(), at("finished_at").max()) {
        (Some(start), Some(end)) => end.saturating_sub(start) as f64 / 1000.0,
        _ => 0.0,
    };
    (span, run.merged_checks())
}
