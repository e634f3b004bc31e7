//! Stage 2: workspaces. Each task gets a branch `plait/<run>/<task>` at the base commit and
//! a real git worktree holding only the files it owns plus its context. `git worktree add`
//! would check out every file, and libgit2 has no sparse checkout, so plait lays the
//! worktree out itself, as git does: the administrative directory under
//! `<git-common-dir>/worktrees/`, the `.git` file, the chosen files, a sparse index
//! (`sparse`: directories outside the task's cone folded into one entry each, the files of
//! the cone that are not checked out marked skip-worktree) and the worktree's own config
//! and cone (`config.worktree`, `info/sparse-checkout`). `git status`, `git diff`,
//! `git add`, `git sparse-checkout list` and `git worktree list` work in it as in any
//! sparse worktree.

pub(crate) mod files;
pub mod index;
pub mod sparse;
pub mod view;

use plait_plan::layout::{Cone, Layout};

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use git2::{Oid, Repository};

use plait_core::beneath::{Content, Kind, Tree};
use plait_core::git::TreeFile;
use plait_core::refs::branch_ref;
use plait_core::sync::Locked as _;

/// Why a worktree could not be created or removed.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The task's branch exists already.
    #[error("branch {branch} already exists; pick another run or delete the branch")]
    BranchExists {
        /// The branch.
        branch: String,
    },
    /// The task's worktree directory exists already.
    #[error("worktree path {path} already exists")]
    PathExists {
        /// The directory.
        path: PathBuf,
    },
    /// A file of the worktree could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why it could not be written.
        source: io::Error,
    },
    /// A file from git's objects could not be written.
    #[error(transparent)]
    File(#[from] files::FileError),
    /// A git operation failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What to lay out for one task.
pub struct WorktreeSpec<'a> {
    /// Branch to create at `base` and check out.
    pub branch: &'a str,
    /// Name of the administrative directory under `<git-common-dir>/worktrees/`.
    pub admin_name: &'a str,
    /// Where the worktree goes.
    pub path: &'a Path,
    /// The commit it starts from.
    pub base: Oid,
    /// Every entry of the base tree, sorted by path.
    pub files: &'a [TreeFile],
    /// Which of them the worktree holds, and the cone git is told.
    pub layout: &'a Layout,
}

/// Puts back the worktree's `.git` file, plait's link to its administrative directory, if
/// something else is there; returns whether it had to. An agent may write its worktree,
/// `.git` included, but the link decides which index and HEAD collect reads, so collect
/// never trusts a link it did not write. What stands at `.git` is read and replaced beneath
/// a handle of the worktree: a link there is data, never followed.
pub fn restore_link(repo: &Repository, admin_name: &str, worktree: &Path) -> std::io::Result<bool> {
    let expected = format!("gitdir: {}\n", admin_dir(repo, admin_name).display());
    let tree = Tree::open(worktree)?;
    match tree.read(".git")? {
        Some(Content::File { bytes, .. }) if bytes == expected.as_bytes() => return Ok(false),
        _ => {}
    }
    if tree.kind(".git")? == Some(Kind::Dir) {
        tree.remove_all(".git")?;
    }
    tree.write(".git", expected.as_bytes(), false)?;
    Ok(true)
}

/// The name of a task's directory under `<git-common-dir>/worktrees/`.
pub fn admin_name(run: &str, task: &str) -> String {
    format!("plait-{run}-{task}")
}

/// Where a repository's task worktrees go unless `--worktree-dir` says: a directory of its
/// own under the user's cache, `<cache>/plait/<name>-<hash>` (the checkout's name and a
/// hash of its git directory's path, so two clones of one project never share it). It is
/// outside every checkout, so a tool walking up from a worktree for its configuration or
/// its cache finds the task's own files and nothing of the user's.
pub fn default_root(cache: &Path, repo: &Repository) -> PathBuf {
    use sha1::Digest as _;
    let common = repo.commondir();
    let common = common
        .canonicalize()
        .unwrap_or_else(|_| common.to_path_buf());
    let named = match common.file_name() {
        Some(n) if n == ".git" => common.parent().and_then(Path::file_name),
        other => other,
    };
    let name: String = named
        .map(|n| n.to_string_lossy().trim_end_matches(".git").to_string())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let digest = sha1::Sha1::digest(common.as_os_str().as_encoded_bytes());
    let hash = plait_core::hex::lower(&digest[..4]);
    let dir = if name.is_empty() || name.starts_with('.') {
        hash
    } else {
        format!("{name}-{hash}")
    };
    cache.join("plait").join(dir)
}

/// The administrative directory of a linked worktree.
pub fn admin_dir(repo: &Repository, admin_name: &str) -> PathBuf {
    repo.commondir().join("worktrees").join(admin_name)
}

/// Creates the branch and the worktree, writing only the files of the spec's layout.
/// On failure nothing is left behind: the branch, the worktree and its administrative
/// directory are removed again.
pub fn create(repo: &Repository, spec: &WorktreeSpec<'_>) -> Result<(), WorkspaceError> {
    let refname = branch_ref(spec.branch);
    if repo.find_reference(&refname).is_ok() {
        return Err(WorkspaceError::BranchExists {
            branch: spec.branch.to_string(),
        });
    }
    if spec.path.exists() {
        return Err(WorkspaceError::PathExists {
            path: spec.path.to_path_buf(),
        });
    }
    let admin = admin_dir(repo, spec.admin_name);
    if admin.exists() {
        return Err(WorkspaceError::PathExists { path: admin });
    }
    repo.reference(&refname, spec.base, false, "plait: create task branch")?;
    let laid_out = lay_out(repo, spec, &admin);
    if laid_out.is_err() {
        let _ = remove(repo, spec.admin_name, spec.path);
        if let Ok(mut branch) = repo.find_reference(&refname) {
            let _ = branch.delete();
        }
    }
    laid_out
}

fn lay_out(repo: &Repository, spec: &WorktreeSpec<'_>, admin: &Path) -> Result<(), WorkspaceError> {
    fs::create_dir_all(spec.path).map_err(io_err(spec.path))?;
    let path = spec.path.canonicalize().map_err(io_err(spec.path))?;
    let worktrees = admin.parent().unwrap_or(admin);
    fs::create_dir_all(worktrees).map_err(io_err(worktrees))?;
    let admin = worktrees
        .canonicalize()
        .map_err(io_err(worktrees))?
        .join(spec.admin_name);
    // The administrative directory is filled elsewhere and renamed into place whole: a
    // git command listing worktrees meanwhile must never see it half made.
    let staging = repo
        .commondir()
        .join("plait")
        .join("staging")
        .join(spec.admin_name);
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging).map_err(io_err(&staging))?;
    write_file(&staging.join("commondir"), b"../..\n")?;
    write_file(
        &staging.join("gitdir"),
        format!("{}\n", path.join(".git").display()).as_bytes(),
    )?;
    write_file(
        &staging.join("HEAD"),
        format!("ref: {}\n", branch_ref(spec.branch)).as_bytes(),
    )?;
    // The worktree is new (`create` refused one that was there), yet its files are written
    // as in any tree a task may write: beneath a handle, nothing followed.
    let tree = files::open(&path)?;
    let gitdir = format!("gitdir: {}\n", admin.display());
    tree.write(".git", gitdir.as_bytes(), false)
        .map_err(io_err(&path.join(".git")))?;
    let mut held = HashSet::with_capacity(spec.layout.files.len());
    let mut writer = files::NewFiles::new(&tree);
    for &i in &spec.layout.files {
        let file = &spec.files[i];
        writer.blob(repo, &file.path, file.oid, file.mode)?;
        held.insert(file.path.as_str());
    }
    // A git too old for sparse indexes gets a full one (the same files, skip-worktree).
    let full = Cone::full();
    let cone = if plait_core::git::reads_sparse_index() {
        &spec.layout.cone
    } else {
        &full
    };
    let tree = repo.find_commit(spec.base)?.tree()?;
    let entries = sparse::entries(repo, &tree, cone)?;
    let presence = sparse::presence(&entries, &held, &HashSet::new());
    let index = staging.join("index");
    index::write(&index, &path, &entries, &presence).map_err(io_err(&index))?;
    if !cone.is_full() {
        enable_worktree_config(repo)?;
        write_file(&staging.join("config.worktree"), SPARSE_CONFIG.as_bytes())?;
        let info = staging.join("info");
        fs::create_dir_all(&info).map_err(io_err(&info))?;
        write_file(&info.join("sparse-checkout"), cone.patterns().as_bytes())?;
    }
    fs::rename(&staging, &admin).map_err(io_err(&admin))
}

/// A task worktree's own configuration: a sparse checkout in cone mode with a sparse
/// index, so git reads plait's index as it is instead of expanding it.
const SPARSE_CONFIG: &str =
    "[core]\n\tsparseCheckout = true\n\tsparseCheckoutCone = true\n[index]\n\tsparse = true\n";

/// Sets `extensions.worktreeConfig` in the repository's config, as `git sparse-checkout`
/// does in a linked worktree, so git reads each worktree's `config.worktree`. Only once:
/// the setting changes nothing for worktrees without such a file.
fn enable_worktree_config(repo: &Repository) -> Result<(), git2::Error> {
    static WRITING: Mutex<()> = Mutex::new(());
    let _one = WRITING.locked();
    let mut config = repo.config()?.open_level(git2::ConfigLevel::Local)?;
    if config
        .get_bool("extensions.worktreeConfig")
        .unwrap_or(false)
    {
        return Ok(());
    }
    config.set_bool("extensions.worktreeConfig", true)
}

/// Writes every file of `files` into the new tree `root` (a base layer, a base checkout),
/// on as many threads as there are CPUs, each file beneath a handle of the tree.
pub(crate) fn write_tree(repo: &Repository, root: &Path, files: &[TreeFile]) -> Result<(), String> {
    let tree = files::open(root).map_err(|e| e.to_string())?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = files.len().div_ceil(threads).max(1);
    let path = repo.path().to_path_buf();
    std::thread::scope(|scope| {
        let workers: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                let (path, tree) = (path.clone(), &tree);
                scope.spawn(move || -> Result<(), String> {
                    let repo = Repository::open(&path).map_err(|e| e.to_string())?;
                    let mut writer = files::NewFiles::new(tree);
                    for file in part {
                        writer
                            .blob(&repo, &file.path, file.oid, file.mode)
                            .map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().unwrap_or_else(|_| Err("a thread panicked".into())))
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), WorkspaceError> {
    fs::write(path, bytes).map_err(io_err(path))
}

/// Removes a worktree, its view's work directory and its administrative directory (not its
/// branch), each beneath a handle of its parent: a link inside is removed, never followed,
/// and directories the task locked up are opened by their handles.
pub fn remove(repo: &Repository, admin_name: &str, path: &Path) -> Result<(), WorkspaceError> {
    view::remove_work_dir(path);
    for dir in [path.to_path_buf(), admin_dir(repo, admin_name)] {
        crate::dirs::remove(&dir).map_err(io_err(&dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.git` the agent made a link to a file in the home, or a directory holding a link,
    /// is replaced by plait's link; nothing behind it is read into it or written.
    #[test]
    fn restoring_the_link_writes_nothing_behind_a_planted_one() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path().join("repo")).unwrap();
        let home = dir.path().join("home");
        fs::create_dir_all(&home).unwrap();
        fs::write(home.join("victim"), "mine\n").unwrap();
        let worktree = dir.path().join("wt");
        fs::create_dir_all(&worktree).unwrap();
        std::os::unix::fs::symlink(home.join("victim"), worktree.join(".git")).unwrap();
        assert!(restore_link(&repo, "plait-r-a", &worktree).unwrap());
        let expected = format!("gitdir: {}\n", admin_dir(&repo, "plait-r-a").display());
        assert_eq!(fs::read_to_string(worktree.join(".git")).unwrap(), expected);
        assert!(!restore_link(&repo, "plait-r-a", &worktree).unwrap());
        fs::remove_file(worktree.join(".git")).unwrap();
        fs::create_dir_all(worktree.join(".git")).unwrap();
        std::os::unix::fs::symlink(&home, worktree.join(".git/out")).unwrap();
        assert!(restore_link(&repo, "plait-r-a", &worktree).unwrap());
        assert_eq!(fs::read_to_string(worktree.join(".git")).unwrap(), expected);
        assert_eq!(fs::read_to_string(home.join("victim")).unwrap(), "mine\n");
        assert_eq!(fs::read_dir(&home).unwrap().count(), 1);
    }
}
