//! No-follow benchmark: what reading and writing a task's tree beneath a directory handle
//! (`plait_core::beneath`) costs plait, on the two paths issue 57 moved onto it. Prints
//! figures, asserts nothing about time.
//!
//! 1. collect: the walk, read and hash of a worktree of 1,000 changed files
//!    (`plait_stages::collect::scan`, the part of collect that touches the tree).
//! 2. the model agent's editor: 1,000 edits (`str_replace`, `insert` and `create` in turn,
//!    each on a file of its own) and 1,000 `view`s through the tools' `Workspace`.
//!
//! The same file builds against the plait before the change (add it, and the `editor`
//! re-export in `crates/plait/src/lib.rs`, to a checkout of that commit), which is how the
//! before figures are taken. `--files N` (1000), `--reps N` (15).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;

mod common;
use common::{git, isolate_git, median};

const DIRS: usize = 10;

fn args() -> Result<(usize, usize)> {
    let (mut files, mut reps) = (1000, 15);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--files" => files = it.next().context("--files N")?.parse()?,
            "--reps" => reps = it.next().context("--reps N")?.parse()?,
            _ => {}
        }
    }
    Ok((files, reps))
}

/// A repository of `files` files in `DIRS` directories, its branch `task` checked out in a
/// worktree where every file was changed.
fn setup(dir: &Path, files: usize) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let repo = dir.join("repo");
    for i in 0..files {
        let path = repo.join(format!("d{}/f{i:04}.txt", i % DIRS));
        std::fs::create_dir_all(path.parent().unwrap())?;
        let body: String = (0..20).map(|l| format!("line {l} of file {i}\n")).collect();
        std::fs::write(path, format!("alpha {i}\n{body}"))?;
    }
    git(&repo, &["init", "-q", "-b", "main"])?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-qm", "base"])?;
    let wt = dir.join("wt");
    git(
        &repo,
        &["worktree", "add", "-q", "-b", "task", wt.to_str().unwrap()],
    )?;
    for i in 0..files {
        let path = wt.join(format!("d{}/f{i:04}.txt", i % DIRS));
        let mut text = std::fs::read_to_string(&path)?;
        text.push_str("changed\n");
        std::fs::write(path, text)?;
    }
    Ok((repo, wt))
}

fn collect_scan(wt: &Path, reps: usize) -> Result<f64> {
    let mut times = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let scan = plait_stages::collect::scan(wt, &plait_stages::collect::Held::Index)?;
        times.push(t.elapsed().as_secs_f64());
        std::hint::black_box(scan);
    }
    Ok(median(&times))
}

/// The median time of `reps` rounds of 1,000 edits and of 1,000 views.
fn editor(repo: &Path, wt: &Path, files: usize, reps: usize) -> Result<(f64, f64)> {
    let git_repo = git2::Repository::open(repo)?;
    let tree = git_repo.revparse_single("main")?.peel_to_tree()?;
    let listed = Arc::new(plait_core::git::flatten_tree(&tree)?);
    let owns = plait_core::globs::Globs::new(&["/d*/".to_string()])?;
    let ws = plait::editor::Workspace::new(wt.to_path_buf(), repo.to_path_buf(), listed, owns);
    let (mut edits, mut views) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        let t = Instant::now();
        for i in 0..files {
            let path = format!("d{}/f{i:04}.txt", i % DIRS);
            let input = match i % 3 {
                0 => {
                    json!({"command": "str_replace", "path": path, "old_str": format!("alpha {i}\n"), "new_str": format!("alpha {i}\n")})
                }
                1 => {
                    json!({"command": "insert", "path": path, "insert_line": 1, "insert_text": format!("rep {rep}")})
                }
                _ => {
                    json!({"command": "create", "path": path, "file_text": format!("alpha {i}\nrep {rep}\n")})
                }
            };
            let out = ws.run("str_replace_based_edit_tool", &Ok(input));
            anyhow::ensure!(!out.is_error, "{path}: {}", out.content);
        }
        edits.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        for i in 0..files {
            let path = format!("d{}/f{i:04}.txt", i % DIRS);
            let input = json!({"command": "view", "path": path});
            let out = ws.run("str_replace_based_edit_tool", &Ok(input));
            anyhow::ensure!(!out.is_error, "{path}: {}", out.content);
        }
        views.push(t.elapsed().as_secs_f64());
    }
    Ok((median(&edits), median(&views)))
}

fn main() -> Result<()> {
    let (files, reps) = args()?;
    let dir = tempfile::tempdir()?;
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty)?;
    isolate_git(&empty)?;
    let (repo, wt) = setup(dir.path(), files)?;
    let scan = collect_scan(&wt, reps)?;
    let (edits, views) = editor(&repo, &wt, files, reps)?;
    println!("no-follow benchmark: {files} files, median of {reps}");
    println!(
        "  collect scan of {files} changed files: {:8.2} ms",
        scan * 1e3
    );
    println!(
        "  {files} editor edits:                 {:8.2} ms ({:.1} µs each)",
        edits * 1e3,
        edits * 1e6 / files as f64
    );
    println!(
        "  {files} editor views:                 {:8.2} ms ({:.1} µs each)",
        views * 1e3,
        views * 1e6 / files as f64
    );
    Ok(())
}
