//! What the benchmarks share: a git kept away from the user's configuration, timing, and
//! how figures are printed.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// A real crate (regex-syntax) made a repository, for the benchmarks that build one.
pub mod krate;

/// Running plans and commands: `plait run` to its end, a shell script, a copy.
pub mod runs;

pub const NAME: &str = "Plait Bench";
pub const EMAIL: &str = "bench@plait.invalid";
pub const DATE: &str = "1700000000 +0000";

/// Keeps git, the CLI and libgit2 alike, away from the user's configuration and identity.
pub fn isolate_git(empty_dir: &Path) -> Result<()> {
    let extra = [
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CEILING_DIRECTORIES",
    ];
    for var in plait_core::git::REDIRECTING_VARS.into_iter().chain(extra) {
        std::env::remove_var(var);
    }
    std::env::set_var("GIT_CONFIG_GLOBAL", "/dev/null");
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    std::env::set_var("GIT_TERMINAL_PROMPT", "0");
    for (var, value) in [
        ("GIT_AUTHOR_NAME", NAME),
        ("GIT_AUTHOR_EMAIL", EMAIL),
        ("GIT_AUTHOR_DATE", DATE),
        ("GIT_COMMITTER_NAME", NAME),
        ("GIT_COMMITTER_EMAIL", EMAIL),
        ("GIT_COMMITTER_DATE", DATE),
    ] {
        std::env::set_var(var, value);
    }
    // libgit2 does not read GIT_CONFIG_GLOBAL: point its search paths at an empty dir.
    for level in [
        git2::ConfigLevel::System,
        git2::ConfigLevel::XDG,
        git2::ConfigLevel::Global,
    ] {
        // SAFETY: called before any other thread exists or any repository is opened.
        unsafe { git2::opts::set_search_path(level, empty_dir.as_os_str())? };
    }
    Ok(())
}

/// Runs git in `dir`; a non-zero exit is an error.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = plait_core::git::git_command(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "`git {}` in {} failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub fn time<T>(f: impl FnOnce() -> Result<T>) -> Result<(f64, T)> {
    let start = Instant::now();
    let out = f()?;
    Ok((start.elapsed().as_secs_f64(), out))
}

pub fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 0.01 {
        format!("{:.0} ms", s * 1e3)
    } else if s >= 0.001 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

pub fn bytes(b: u64) -> String {
    if b >= 10 << 20 {
        format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
    } else {
        format!("{:.0} KiB", b as f64 / 1024.0)
    }
}

/// Flushes dirty pages so one phase's writeback does not land in the next one's timing.
pub fn settle() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

pub fn stage(msg: &str) {
    eprintln!("[bench] {msg}");
}

/// Seconds to create 1,000 files of 400 bytes in 20 new directories under `dir`: how fast
/// the file system is right now, since every worktree figure depends on it.
pub fn fs_probe(dir: &Path) -> Result<f64> {
    settle();
    let (s, ()) = time(|| {
        for d in 0..20 {
            let sub = dir.join(format!("p{d:02}"));
            std::fs::create_dir_all(&sub)?;
            for f in 0..50 {
                std::fs::write(sub.join(format!("f{f:02}")), [b'x'; 400])?;
            }
        }
        Ok(())
    })?;
    Ok(s)
}

/// The plait binary of `rev`, built once under `target/bench-baseline/`.
pub fn baseline(rev: &str) -> Result<PathBuf> {
    let root = std::env::current_dir()?.join("target/bench-baseline");
    let full = git(&std::env::current_dir()?, &["rev-parse", rev])?
        .trim()
        .to_string();
    let src = root.join(&full);
    let target = root.join("target");
    let bin = target.join(&full).join("release/plait");
    if bin.exists() {
        return Ok(bin);
    }
    if !src.exists() {
        git(
            &std::env::current_dir()?,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                &src.display().to_string(),
                &full,
            ],
        )?;
    }
    // The checkout lies inside this workspace's directory: a plait from before the
    // workspace gets an empty `[workspace]` of its own, or cargo takes it for a member.
    let manifest = src.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)?;
    if !text.lines().any(|l| l.trim() == "[workspace]") {
        std::fs::write(&manifest, format!("{text}\n[workspace]\n"))?;
    }
    stage(&format!("building the baseline plait at {rev} (once)"));
    let status = Command::new("cargo")
        .args([
            "build",
            "--release",
            "--locked",
            "--bin",
            "plait",
            "--target-dir",
        ])
        .arg(target.join(&full))
        .current_dir(&src)
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("cannot build plait at {rev}");
    }
    Ok(bin)
}

/// Feeds `stream` to `git fast-import` in `repo`, which holds one commit on `main` then,
/// and checks it out with `git reset --hard` (index and files): a generated repository.
pub fn fast_import(repo: &Path, stream: &str) -> Result<()> {
    use std::io::Write as _;
    let mut child = plait_core::git::git_command(repo)
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
    git(repo, &["reset", "-q", "--hard", "main"])?;
    Ok(())
}

/// The name of directory `d` of a generated repository.
pub fn dir_name(d: usize) -> String {
    format!("d{d:04}")
}

/// A generated repository at `path`: `git init` and one `git fast-import` commit on `main`
/// of `files` small text files, `per_dir` in each directory, then checked out.
pub fn generate(path: &Path, files: usize, per_dir: usize) -> Result<()> {
    use std::fmt::Write as _;
    std::fs::create_dir_all(path)?;
    git(path, &["init", "-q", "-b", "main"])?;
    git(path, &["config", "gc.auto", "0"])?;
    let mut stream = String::with_capacity(files * 120);
    let _ = write!(
        stream,
        "commit refs/heads/main\nauthor {NAME} <{EMAIL}> {DATE}\n\
         committer {NAME} <{EMAIL}> {DATE}\ndata 5\nbase\n\n"
    );
    for i in 0..files {
        let text = format!("file {i} of the generated repository\n");
        let _ = write!(
            stream,
            "M 100644 inline {}/f{:03}.txt\ndata {}\n{text}\n",
            dir_name(i / per_dir),
            i % per_dir,
            text.len()
        );
    }
    fast_import(path, &stream)
}
