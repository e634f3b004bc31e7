//! Waves benchmark: what `after` costs a run beyond its critical path. Prints figures,
//! asserts nothing about time.
//!
//! 1. *a 3-wave plan of `--tasks` (default 100) exec tasks* (1 → N−2 → 1): `core`, then
//!    every middle task (after `core`), then `last` (after all of them). Each agent sleeps
//!    (0.3 s for the first and last, 0.1–0.5 s in the middle) and changes a file of its
//!    own. From the run's record: each wave's slowest task (its elapsed, from its start to
//!    its end, worktree and collect included), the critical path (their sum), the gaps
//!    between a wave's last end and the next wave's first start (the scheduling: a task
//!    released by what it comes after starts then, and its start merge is in its own time
//!    as a task's worktree is), and the whole run. The anchor, in the same repetition: the same tasks
//!    without `after`, all at once (`-j` as many as there are tasks), whose run less its
//!    slowest task is what any run costs beyond its tasks. What waves add per wave is
//!    (run − critical path − the anchor's run less its slowest task) / 3.
//! 2. *the same plan on the generated repository of `--files` (default 60,000) files*:
//!    the gaps there, and a start's merge of the middle wave's branches timed directly
//!    (`merge::merge` of N−2 branches, each changing one file, onto the base), with
//!    listing the start's files and its layout (`Start::at`'s work).
//!
//! `--reps N` (default 3, the median), `--keep` keeps the directory. Run it through
//! `./bench --waves`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

mod common;
use common::{dir_name, generate, isolate_git, median, stage, EMAIL, NAME};

struct Config {
    tasks: usize,
    files: usize,
    reps: usize,
    keep: bool,
}

impl Config {
    fn load() -> Result<Config> {
        let mut cfg = Config {
            tasks: 100,
            files: 60_000,
            reps: 3,
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
                "--tasks" => cfg.tasks = number("--tasks")?.max(3),
                "--files" => cfg.files = number("--files")?.max(1_000),
                "--reps" => cfg.reps = number("--reps")?.max(1),
                "--keep" => cfg.keep = true,
                "--bench" => {}
                other => bail!("unknown argument `{other}`"),
            }
        }
        Ok(cfg)
    }
}

/// The 1 → `tasks − 2` → 1 plan over directories `d0000`.. (`waves`: with `after`).
fn plan(tasks: usize, waves: bool) -> String {
    let mut toml = String::from("goal = \"waves\"\n[review]\nagent = \"off\"\n");
    let task = |toml: &mut String, id: &str, dir: usize, sleep: &str, after: &str| {
        let _ = write!(
            toml,
            "[[task]]\nid = \"{id}\"\nprompt = \"p\"\nowns = [\"/{d}/f000.txt\"]\n{after}\
             agent = {{ exec = \"sleep {sleep}; echo {id} >> {d}/f000.txt\" }}\n",
            d = dir_name(dir)
        );
    };
    let after = |ids: &str| {
        if waves {
            format!("after = [{ids}]\n")
        } else {
            String::new()
        }
    };
    task(&mut toml, "core", 0, "0.3", "");
    for k in 1..tasks - 1 {
        let sleep = format!("0.{}", 1 + k % 5);
        task(
            &mut toml,
            &format!("m{k:03}"),
            k,
            &sleep,
            &after("\"core\""),
        );
    }
    task(&mut toml, "last", tasks - 1, "0.3", &after("\"m*\""));
    toml
}

/// One run's figures, from its record.
struct Figures {
    wall: f64,
    /// The slowest task of each wave (seconds).
    slowest: [f64; 3],
    /// From the first wave's end to the second's first start, and from the second's last
    /// end to the third's start.
    gaps: [f64; 2],
}

/// `plait run` of `plan` in `repo` with as many slots as tasks; its figures.
fn run(bin: &Path, repo: &Path, plan: &Path, tasks: usize) -> Result<Figures> {
    let start = Instant::now();
    let out = Command::new(bin)
        .args(["run", &plan.display().to_string(), "-j", &tasks.to_string()])
        .current_dir(repo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()?;
    let wall = start.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("plait run failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let run = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let status = Command::new(bin)
        .args(["status", &run, "--json"])
        .current_dir(repo)
        .output()?;
    let state: serde_json::Value = serde_json::from_slice(&status.stdout)?;
    let tasks = state["tasks"].as_array().context("no tasks")?;
    let times = |t: &serde_json::Value| -> Result<(u64, u64)> {
        let s = t["started_at"].as_u64().context("no start")?;
        let f = t["finished_at"].as_u64().context("no end")?;
        if t["state"] != "done" {
            bail!("task {} ended {}", t["id"], t["state"]);
        }
        Ok((s, f))
    };
    let first = times(&tasks[0])?;
    let middle: Vec<(u64, u64)> = tasks[1..tasks.len() - 1]
        .iter()
        .map(times)
        .collect::<Result<_>>()?;
    let last = times(&tasks[tasks.len() - 1])?;
    let span = |(s, f): (u64, u64)| (f - s) as f64 / 1000.0;
    let slowest_middle = middle.iter().map(|&t| span(t)).fold(0.0, f64::max);
    let middle_start = middle.iter().map(|t| t.0).min().unwrap_or(first.1);
    let middle_end = middle.iter().map(|t| t.1).max().unwrap_or(first.1);
    let gap = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1000.0;
    Ok(Figures {
        wall,
        slowest: [span(first), slowest_middle, span(last)],
        gaps: [gap(first.1, middle_start), gap(middle_end, last.0)],
    })
}

fn ms(s: f64) -> String {
    format!("{:.0} ms", s * 1000.0)
}

/// Part 1 (or 2 on the big repository): the waves and the anchor, `reps` times each.
fn waves_against_anchor(bin: &Path, repo: &Path, cfg: &Config, label: &str) -> Result<()> {
    let scratch = repo.parent().context("no parent")?;
    let waves_plan = scratch.join(format!("{label}-waves.toml"));
    let flat_plan = scratch.join(format!("{label}-flat.toml"));
    std::fs::write(&waves_plan, plan(cfg.tasks, true))?;
    std::fs::write(&flat_plan, plan(cfg.tasks, false))?;
    let (mut waved, mut flat) = (Vec::new(), Vec::new());
    for rep in 0..cfg.reps {
        stage(&format!("{label}: repetition {} of {}", rep + 1, cfg.reps));
        waved.push(run(bin, repo, &waves_plan, cfg.tasks)?);
        flat.push(run(bin, repo, &flat_plan, cfg.tasks)?);
    }
    let med = |f: &dyn Fn(&Figures) -> f64, of: &[Figures]| -> f64 {
        median(&of.iter().map(f).collect::<Vec<_>>())
    };
    let critical = |f: &Figures| f.slowest.iter().sum::<f64>();
    let beyond = |f: &Figures| f.wall - critical(f);
    let flat_beyond = |f: &Figures| f.wall - f.slowest.iter().fold(0.0, |a: f64, &b| a.max(b));
    println!(
        "{label}: 1 → {} → 1 exec tasks, -j {}, median of {}",
        cfg.tasks - 2,
        cfg.tasks,
        cfg.reps
    );
    println!(
        "  slowest task of each wave: {} + {} + {} = critical path {}",
        ms(med(&|f| f.slowest[0], &waved)),
        ms(med(&|f| f.slowest[1], &waved)),
        ms(med(&|f| f.slowest[2], &waved)),
        ms(med(&critical, &waved))
    );
    println!(
        "  between the waves (a wave's last end to the next one's first start; a start merge is in its task's time): {} and {}",
        ms(med(&|f| f.gaps[0], &waved)),
        ms(med(&|f| f.gaps[1], &waved))
    );
    println!(
        "  whole run: {} ({} beyond the critical path)",
        ms(med(&|f| f.wall, &waved)),
        ms(med(&beyond, &waved))
    );
    println!(
        "  anchor, the same tasks at once without after: {} ({} beyond its slowest task)",
        ms(med(&|f| f.wall, &flat)),
        ms(med(&flat_beyond, &flat))
    );
    let per_wave: Vec<f64> = waved
        .iter()
        .zip(&flat)
        .map(|(w, f)| (beyond(w) - flat_beyond(f)) / 3.0)
        .collect();
    println!(
        "  what waves add per wave beyond the critical path and a run's own costs: {} (goal ≤ 50 ms)",
        ms(median(&per_wave))
    );
    Ok(())
}

/// Part 2's direct timing: the start of `last`, the merge of the middle wave's branches.
fn start_merge(repo: &Path, tasks: usize, reps: usize) -> Result<()> {
    let git2_repo = plait_core::git::open(repo)?;
    let base = git2_repo.head()?.peel_to_commit()?.id();
    let mut branches = Vec::new();
    for k in 1..tasks - 1 {
        let path = format!("{}/f001.txt", dir_name(k));
        let blob = git2_repo.blob(format!("changed by m{k:03}\n").as_bytes())?;
        let tree = git2_repo.find_commit(base)?.tree()?;
        let mut update = git2::build::TreeUpdateBuilder::new();
        update.upsert(&path, blob, git2::FileMode::Blob);
        let tree = git2_repo.find_tree(update.create_updated(&git2_repo, &tree)?)?;
        let who = git2::Signature::now(NAME, EMAIL)?;
        let parent = git2_repo.find_commit(base)?;
        let commit = git2_repo.commit(None, &who, &who, "m", &tree, &[&parent])?;
        let branch = format!("bench/m{k:03}");
        git2_repo.reference(&format!("refs/heads/{branch}"), commit, true, "bench")?;
        branches.push(plait_stages::merge::BranchInput {
            task: format!("m{k:03}"),
            branch,
            commit,
            start: None,
        });
    }
    let mut merges = Vec::new();
    let mut listings = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let outcome = plait_stages::merge::merge(
            &git2_repo,
            &plait_stages::merge::MergeSettings {
                workdir: repo,
                branch: "bench/start-last",
                base,
                branches: &branches,
                message: "the start of last".to_string(),
            },
        )?;
        merges.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let commit = git2::Oid::from_str(&outcome.commit)?;
        let tree = git2_repo.find_commit(commit)?.tree()?;
        let files = plait_core::git::flatten_tree(&tree)?;
        let owns = plait_core::globs::Globs::new(&[format!("/{}/", dir_name(tasks - 1))])?;
        let context = plait_core::globs::Globs::new(&[] as &[String])?;
        let layout = plait_plan::layout::Layout::new(&files, &owns, &context, false);
        listings.push(t.elapsed().as_secs_f64());
        if layout.files.is_empty() {
            bail!("the start's layout holds nothing");
        }
    }
    println!(
        "  a start's merge of {} branches onto the {}-file base: {} (median of {reps}); its files listed and laid out: {}",
        branches.len(),
        plait_core::git::flatten_tree(&git2_repo.find_commit(base)?.tree()?)?.len(),
        ms(median(&merges)),
        ms(median(&listings))
    );
    Ok(())
}

fn main() -> Result<()> {
    let cfg = Config::load()?;
    let root = tempfile::Builder::new()
        .prefix("plait-bench-waves")
        .tempdir()?;
    let empty = root.path().join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    std::env::set_var("XDG_CACHE_HOME", root.path().join("cache"));
    let bin = Path::new(env!("CARGO_BIN_EXE_plait")).to_path_buf();

    stage("part 1: a small repository");
    let small = root.path().join("small").join("repo");
    generate(&small, cfg.tasks * 10, 10)?;
    waves_against_anchor(&bin, &small, &cfg, "part 1")?;

    stage(&format!("part 2: the {}-file repository", cfg.files));
    let big = root.path().join("big").join("repo");
    generate(&big, cfg.files.max(cfg.tasks * 100), 100)?;
    waves_against_anchor(&bin, &big, &cfg, "part 2")?;
    start_merge(&big, cfg.tasks, cfg.reps)?;

    if cfg.keep {
        let kept = root.keep();
        println!("kept {}", kept.display());
    }
    Ok(())
}
