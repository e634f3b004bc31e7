//! Network wall benchmark: what `network = "off"` costs against `"on"`, side by side in
//! one run. Prints figures, asserts nothing about time.
//!
//! 1. *per process*: `true` spawned `--spawns` times (default 200) behind one sandbox with
//!    the network off and behind one with it on, alternating, each through
//!    `plait_sandbox::shell::run_argv` as a task's commands are: the median wall time of a
//!    spawn, and the CPU time (plait's and its children's, user and system) per spawn.
//! 2. *whole runs*: `plait run` (the binary) of `--tasks` (default 100) no-op exec tasks at
//!    `-j` (default 8) on a generated repository (`--files`, default 20,000, a directory per
//!    task), with `[defaults] sandbox = { network = "off" }` against `"on"`, alternating,
//!    `--reps` times (default 5): the median wall time, and the CPU time of the run's whole
//!    process tree (user and system, from `wait4`), and of the machine (`/proc/stat`, which
//!    counts the kernel's own work on namespaces, done outside any process of the run).
//!
//! `--keep` keeps the directory. Run it through `./bench --network`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

mod common;
use common::{dir_name, generate, isolate_git, median, settle, stage};

struct Config {
    spawns: usize,
    tasks: usize,
    jobs: usize,
    files: usize,
    reps: usize,
    keep: bool,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            spawns: 200,
            tasks: 100,
            jobs: 8,
            files: 20_000,
            reps: 5,
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
                "--spawns" => cfg.spawns = number("--spawns")?.max(1),
                "--tasks" => cfg.tasks = number("--tasks")?.max(1),
                "-j" => cfg.jobs = number("-j")?.max(1),
                "--files" => cfg.files = number("--files")?,
                "--reps" => cfg.reps = number("--reps")?.max(1),
                "--keep" => cfg.keep = true,
                "--bench" => {}
                other => bail!(
                    "unknown argument `{other}` (--spawns N, --tasks N, -j N, --files N, --reps N, --keep)"
                ),
            }
        }
        cfg.files = cfg.files.max(cfg.tasks);
        Ok(cfg)
    }
}

/// CPU seconds (user, system) of this process and of its children waited for.
fn cpu_now() -> (f64, f64) {
    let mut total = (0.0, 0.0);
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: all-zero is a valid `rusage`, which the call fills.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a plain system call on a struct of ours.
        unsafe { libc::getrusage(who, &mut usage) };
        total.0 += tv(usage.ru_utime);
        total.1 += tv(usage.ru_stime);
    }
    total
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

/// The machine's busy CPU seconds so far (every CPU, `/proc/stat`'s user, nice, system,
/// irq, softirq and steal).
fn machine_busy() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0.0;
    };
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let f: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // SAFETY: a plain query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| f.get(i))
        .sum::<f64>()
        / hz
}

/// Part 1: a spawn of `true` behind walls with the network off and on.
fn per_process(cfg: &Config, root: &Path) -> Result<String> {
    use plait_sandbox::sandbox::{Network, Sandbox, SandboxMode, SandboxSettings};
    use plait_sandbox::shell::{self, Launch};
    stage("1. a spawn of `true`, the network off and on");
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
    let off_settings = walled.with_network(Network::Off);
    let on_settings = walled.with_network(Network::On);
    let (off, on) = (
        Sandbox::new(&off_settings, vec![dir.clone()]),
        Sandbox::new(&on_settings, vec![dir.clone()]),
    );
    let mut walls = [Vec::new(), Vec::new()];
    let mut cpus = [(0.0, 0.0), (0.0, 0.0)];
    runtime.block_on(async {
        for i in 0..2 * cfg.spawns {
            let k = i % 2;
            let sandbox = if k == 0 { &off } else { &on };
            let launch = Launch {
                dir: &dir,
                env: &[],
                log: &log,
                timeout: Duration::from_secs(10),
                cancel: &cancel,
                sandbox,
            };
            let before = cpu_now();
            let started = Instant::now();
            let outcome = shell::run_argv(&["true".to_string()], &launch).await;
            walls[k].push(started.elapsed().as_secs_f64());
            let after = cpu_now();
            cpus[k].0 += after.0 - before.0;
            cpus[k].1 += after.1 - before.1;
            if outcome != shell::ShellOutcome::Exited(0) {
                bail!("`true` did not succeed: {outcome:?}");
            }
        }
        Ok(())
    })?;
    let n = cfg.spawns as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "1. a spawn of `true` behind one sandbox, {} each, alternating",
        cfg.spawns
    );
    let _ = writeln!(
        out,
        "   {:<28} {:>10} {:>12} {:>12}",
        "network", "wall", "user CPU", "system CPU"
    );
    for (k, name) in [(0, "off"), (1, "on")] {
        let _ = writeln!(
            out,
            "   {:<28} {:>7.2} ms {:>9.2} ms {:>9.2} ms",
            name,
            median(&walls[k]) * 1e3,
            cpus[k].0 / n * 1e3,
            cpus[k].1 / n * 1e3
        );
    }
    let _ = writeln!(out, "   off: {}", off_settings.describe());
    let _ = writeln!(out, "   on: {}", on_settings.describe());
    let _ = writeln!(
        out,
        "   off / on: wall x{:.2}, CPU x{:.2}",
        median(&walls[0]) / median(&walls[1]),
        (cpus[0].0 + cpus[0].1) / (cpus[1].0 + cpus[1].1)
    );
    Ok(out)
}

/// One `plait run` of `plan`: its wall seconds, its process tree's CPU seconds (user,
/// system) and the machine's busy seconds meanwhile.
fn one_run(repo: &Path, plan: &Path, jobs: usize) -> Result<(f64, f64, f64, f64)> {
    settle();
    let busy = machine_busy();
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", &plan.display().to_string(), "-j", &jobs.to_string()])
        .current_dir(repo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: all-zero is a valid `rusage`, which the call fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, once; `child` is not waited for again.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed().as_secs_f64();
    if waited != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let mut err = String::new();
        if let Some(mut e) = child.stderr {
            use std::io::Read as _;
            let _ = e.read_to_string(&mut err);
        }
        bail!("plait run {} failed: {err}", plan.display());
    }
    // The kernel's work on namespaces that ended goes on a moment after the run.
    std::thread::sleep(Duration::from_millis(300));
    let machine = machine_busy() - busy;
    Ok((wall, tv(usage.ru_utime), tv(usage.ru_stime), machine))
}

/// Part 2: whole runs of no-op exec tasks, the network off and on.
fn whole_runs(cfg: &Config, root: &Path) -> Result<String> {
    stage("2. whole runs of no-op exec tasks, the network off and on");
    let repo = root.join("repo");
    generate(&repo, cfg.files, cfg.files / cfg.tasks)?;
    let mut plans = Vec::new();
    for network in ["off", "on"] {
        let mut toml = format!(
            "goal = \"bench\"\n[defaults]\nagent = {{ exec = \"true\" }}\nexpect_changes = false\n\
             sandbox = {{ network = \"{network}\" }}\n"
        );
        for d in 0..cfg.tasks {
            let id = dir_name(d);
            let _ = writeln!(
                toml,
                "[[task]]\nid = \"{id}\"\nprompt = \"p\"\nowns = [\"/{id}/\"]"
            );
        }
        let plan = root.join(format!("network-{network}.toml"));
        std::fs::write(&plan, toml)?;
        plans.push(plan);
    }
    let mut rows: [Vec<(f64, f64, f64, f64)>; 2] = [Vec::new(), Vec::new()];
    for rep in 0..cfg.reps {
        for (k, plan) in plans.iter().enumerate() {
            let got = one_run(&repo, plan, cfg.jobs)?;
            stage(&format!(
                "rep {} network {}: {:.2} s",
                rep + 1,
                ["off", "on"][k],
                got.0
            ));
            rows[k].push(got);
        }
    }
    let col = |k: usize, f: fn(&(f64, f64, f64, f64)) -> f64| -> f64 {
        median(&rows[k].iter().map(f).collect::<Vec<_>>())
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "2. plait run of {} no-op exec tasks, -j {}, {} files; medians of {} runs each, alternating",
        cfg.tasks, cfg.jobs, cfg.files, cfg.reps
    );
    let _ = writeln!(
        out,
        "   {:<10} {:>9} {:>10} {:>11} {:>13}",
        "network", "wall", "user CPU", "system CPU", "machine CPU"
    );
    for (k, name) in ["off", "on"].iter().enumerate() {
        let _ = writeln!(
            out,
            "   {:<10} {:>7.2} s {:>8.2} s {:>9.2} s {:>11.2} s",
            name,
            col(k, |r| r.0),
            col(k, |r| r.1),
            col(k, |r| r.2),
            col(k, |r| r.3)
        );
    }
    let _ = writeln!(
        out,
        "   off / on: wall x{:.2} (goal <= 1.15), process CPU x{:.2}, machine CPU x{:.2}",
        col(0, |r| r.0) / col(1, |r| r.0),
        (col(0, |r| r.1) + col(0, |r| r.2)) / (col(1, |r| r.1) + col(1, |r| r.2)),
        col(0, |r| r.3) / col(1, |r| r.3)
    );
    Ok(out)
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let tmp = tempfile::Builder::new()
        .prefix("plait-bench-net-")
        .tempdir()?;
    let root = tmp.path().to_path_buf();
    isolate_git(&root.join("empty"))?;
    let mut report = String::new();
    let _ = writeln!(
        report,
        "network wall benchmark ({} spawns, {} tasks at -j {}, {} reps)\n",
        cfg.spawns, cfg.tasks, cfg.jobs, cfg.reps
    );
    report.push_str(&per_process(&cfg, &root)?);
    report.push('\n');
    report.push_str(&whole_runs(&cfg, &root)?);
    println!("{report}");
    if cfg.keep {
        let kept = tmp.keep();
        eprintln!("kept {}", kept.display());
    }
    Ok(())
}
