//! The full checkouts checks run in, made and moved by the git CLI: a new detached
//! worktree at a commit, a copy of another checkout (its ignored build output with it, by
//! copy-on-write where the file system has it), a checkout moved to the next commit, and
//! one removed. plait's own git commands in a checkout name its git directory and work
//! tree explicitly: a check may rewrite the checkout's `.git` file, and plait must not
//! follow it into another repository.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use git2::Oid;

use plait_core::git::{git_command, run_git};
use plait_core::sync::Locked as _;

/// One full checkout: where its files are and its git directory (under the repository's
/// `worktrees/`).
#[derive(Debug, Clone)]
pub struct Checkout {
    /// Where its files are.
    pub path: PathBuf,
    admin: PathBuf,
}

impl Checkout {
    /// Runs git on this checkout, never on what its `.git` file says.
    fn git(&self, args: &[&str]) -> Result<(), String> {
        let out = git_command(&self.path)
            .arg("--git-dir")
            .arg(&self.admin)
            .arg("--work-tree")
            .arg(&self.path)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run git: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "git {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Moves the checkout's files to `to` (a rename: nothing is copied) and points its git
    /// directory and its `.git` file at each other again. What was at `to` (left by a run
    /// that crashed) is removed first.
    pub fn relocate(self, workdir: &Path, to: &Path) -> Result<Checkout, String> {
        if to == self.path {
            return Ok(self);
        }
        if to.exists() {
            remove(workdir, to);
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let shown = |e: std::io::Error| {
            format!(
                "cannot move {} to {}: {e}",
                self.path.display(),
                to.display()
            )
        };
        std::fs::rename(&self.path, to).map_err(shown)?;
        std::fs::write(
            self.admin.join("gitdir"),
            format!("{}\n", to.join(".git").display()),
        )
        .map_err(shown)?;
        // The checkout is the check's: its `.git` is replaced beneath a handle of it, never
        // written through (a check may have left a link or a directory there).
        let files = plait_core::beneath::Tree::open(to).map_err(shown)?;
        if files.kind(".git").map_err(shown)? == Some(plait_core::beneath::Kind::Dir) {
            files.remove_all(".git").map_err(shown)?;
        }
        let link = format!("gitdir: {}\n", self.admin.display());
        files.write(".git", link.as_bytes(), false).map_err(shown)?;
        Ok(Checkout {
            path: to.to_path_buf(),
            admin: self.admin,
        })
    }

    /// Puts the checkout at `commit`: tracked files rewritten where they differ (so
    /// unchanged files keep their times, and builds stay incremental), untracked files
    /// removed, ignored build output kept.
    pub fn move_to(&self, commit: Oid) -> Result<(), String> {
        let hex = commit.to_string();
        self.git(&["checkout", "--detach", "--force", "--quiet", &hex])
            .and_then(|_| self.git(&["clean", "-fdq"]))
            .map_err(|e| format!("cannot move the check checkout to {hex}: {e}"))
    }
}

/// The checkout plait made earlier at `path`, if it is still a worktree of the repository
/// at `workdir`.
pub fn open(workdir: &Path, path: &Path) -> Option<Checkout> {
    let listed = run_git(workdir, &["worktree", "list", "--porcelain"], &[]).ok()?;
    let wanted = format!("worktree {}", path.display());
    if !String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|l| l == wanted)
    {
        return None;
    }
    let out = run_git(path, &["rev-parse", "--absolute-git-dir"], &[]).ok()?;
    Some(Checkout {
        path: path.to_path_buf(),
        admin: PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()),
    })
}

/// Whether `ancestor` is `commit` or in its history.
pub fn is_ancestor(workdir: &Path, ancestor: Oid, commit: Oid) -> bool {
    let (a, c) = (ancestor.to_string(), commit.to_string());
    run_git(workdir, &["merge-base", "--is-ancestor", &a, &c], &[]).is_ok()
}

/// A new detached worktree at `commit` in `path`; with `files` false, its files are not
/// written (nor its index).
pub fn add(
    workdir: &Path,
    path: &Path,
    commit: Oid,
    files: bool,
    adding: &Mutex<()>,
) -> Result<Checkout, String> {
    let hex = commit.to_string();
    let shown = path.display().to_string();
    {
        // Concurrent adds race on `.git/worktrees`.
        let _adding = adding.locked();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let mut args = vec!["worktree", "add", "--detach", "--quiet"];
        if !files {
            args.push("--no-checkout");
        }
        args.extend([shown.as_str(), hex.as_str()]);
        run_git(workdir, &args, &[])
            .map_err(|e| format!("cannot make a checkout for checks: {e}"))?;
    }
    let out = run_git(path, &["rev-parse", "--absolute-git-dir"], &[])
        .map_err(|e| format!("cannot find the git directory of {shown}: {e}"))?;
    Ok(Checkout {
        path: path.to_path_buf(),
        admin: PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()),
    })
}

/// A new checkout in `path` holding a copy of `from`'s files (ignored ones included, times
/// kept) and its index, at `from`'s commit `at`; then moved to `commit`.
pub fn copy(
    workdir: &Path,
    from: &Checkout,
    at: Oid,
    path: &Path,
    adding: &Mutex<()>,
) -> Result<Checkout, String> {
    let made = add(workdir, path, at, false, adding)?;
    let entries: Vec<PathBuf> = std::fs::read_dir(&from.path)
        .map_err(|e| format!("{}: {e}", from.path.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name() != ".git")
        .map(|e| e.path())
        .collect();
    if !entries.is_empty() {
        copy_into(&entries, path)?;
    }
    std::fs::copy(from.admin.join("index"), made.admin.join("index"))
        .map_err(|e| format!("cannot copy the index of {}: {e}", from.path.display()))?;
    // The copied index's stat data are the original's: refresh them by content, so the
    // move that follows rewrites only the files that differ.
    let _ = git_command(path)
        .arg("--git-dir")
        .arg(&made.admin)
        .arg("--work-tree")
        .arg(path)
        .args(["update-index", "-q", "--refresh"])
        .output();
    Ok(made)
}

/// `cp -a` of `entries` into `dir`, by copy-on-write where the file system allows.
fn copy_into(entries: &[PathBuf], dir: &Path) -> Result<(), String> {
    let attempt = |reflink: bool| {
        let mut cmd = std::process::Command::new("cp");
        cmd.arg("-a");
        if reflink {
            cmd.arg("--reflink=auto");
        }
        cmd.args(entries).arg(dir).output()
    };
    let out = match attempt(true) {
        Ok(out) if out.status.success() => return Ok(()),
        // A `cp` without `--reflink` (not GNU) gets a second try without it.
        _ => attempt(false).map_err(|e| format!("cannot run cp: {e}"))?,
    };
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cannot copy a checkout into {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Removes the checkout at `path`, if it exists, with its git directory.
pub fn remove(workdir: &Path, path: &Path) {
    if path.exists() {
        let shown = path.display().to_string();
        if run_git(workdir, &["worktree", "remove", "--force", &shown], &[]).is_err() {
            // What a check locked up or linked out of, removed beneath a handle.
            plait_trees::environment::remove_tree(path);
            let _ = run_git(workdir, &["worktree", "prune"], &[]);
        }
    }
}
