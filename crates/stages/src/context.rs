//! What a command or a request works on, opened once: the repository, plait's store in it,
//! the environment its plans resolve their variables from, and the program the agents'
//! hooks call back. The command line makes one per command, `plait serve` one for its
//! repository, a worker one per clone it works in; every use case (`ops`) and the
//! orchestrator take it, and nothing below them opens the repository again.
//!
//! git2's handles may move between threads but not be shared by them, so the context keeps
//! a pool: [`Context::repo`] lends a handle for one step of work and takes it back when the
//! step ends; a second handle is opened only while the first is lent (tasks' steps on the
//! blocking threads), and kept for the next. A lent handle sees what other handles and the
//! git CLI wrote: libgit2 reads refs and new packs from disk as it meets them.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::Repository;

use plait_core::git::{self, RepoError};
use plait_core::state::Store;
use plait_core::sync::Locked as _;

/// The environment variables a plan's `${NAME}`s and `env` keys resolve from, given by the
/// caller (the command line passes its own process's; a test or the page passes theirs).
pub type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process's own environment, as an [`Env`].
pub fn process_env() -> Env {
    Arc::new(|name: &str| std::env::var(name).ok())
}

/// The user's cache directory in `env`: `XDG_CACHE_HOME` when it is absolute, else
/// `~/.cache`.
pub fn cache_home(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| {
            env("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| Path::new(&h).join(".cache"))
        })
}

/// The repository a command works on, its store and environment; cheap to clone (every
/// clone shares the same handles).
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

struct Inner {
    /// The directory the command was pointed at, made absolute.
    dir: PathBuf,
    /// The repository's working directory.
    workdir: PathBuf,
    /// Where the repository's handles are opened again (its git directory).
    git_dir: PathBuf,
    /// `<git-common-dir>/plait`, where the store and the manager's plans are.
    plait_dir: PathBuf,
    store: Store,
    env: Env,
    program: PathBuf,
    /// Handles not lent at the moment.
    idle: Mutex<Vec<Repository>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("workdir", &self.inner.workdir)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// Opens the repository `dir` is in (refused when it is bare or has no commit yet),
    /// with `env` for its plans and `program` (this plait) for the agents' hooks.
    pub fn open(dir: &Path, env: Env, program: PathBuf) -> Result<Context, RepoError> {
        let repo = git::open(dir)?;
        Ok(Context::from_repo(repo, dir, env, program))
    }

    /// The context of `repo`, opened already (at `dir`).
    pub fn from_repo(repo: Repository, dir: &Path, env: Env, program: PathBuf) -> Context {
        let plait_dir = git::plait_dir(&repo);
        let store = Store::new(plait_dir.clone());
        let workdir = git::workdir(&repo);
        let git_dir = repo.path().to_path_buf();
        Context {
            inner: Arc::new(Inner {
                dir: std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()),
                workdir,
                git_dir,
                plait_dir,
                store,
                env,
                program,
                idle: Mutex::new(vec![repo]),
            }),
        }
    }

    /// A handle on the repository for one step of work, given back when dropped.
    pub fn repo(&self) -> Result<Repo<'_>, RepoError> {
        let idle = self.inner.idle.locked().pop();
        let repo = match idle {
            Some(repo) => repo,
            None => Repository::open(&self.inner.git_dir)?,
        };
        Ok(Repo {
            repo: Some(repo),
            context: self,
        })
    }

    /// plait's store in the repository (`<git-common-dir>/plait`).
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// plait's directory in the repository (`<git-common-dir>/plait`).
    pub fn plait_dir(&self) -> &Path {
        &self.inner.plait_dir
    }

    /// The directory the command was pointed at, absolute.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The repository's working directory.
    pub fn workdir(&self) -> &Path {
        &self.inner.workdir
    }

    /// The environment plans resolve their variables from.
    pub fn env(&self) -> &Env {
        &self.inner.env
    }

    /// The variable `name` of [`Context::env`].
    pub fn var(&self, name: &str) -> Option<String> {
        (self.inner.env)(name)
    }

    /// The user's cache directory, by [`cache_home`] of this context's environment.
    pub fn cache_home(&self) -> Option<PathBuf> {
        cache_home(&*self.inner.env)
    }

    /// The plait program the agents' hooks call back.
    pub fn program(&self) -> &Path {
        &self.inner.program
    }
}

/// A lent handle on the context's repository.
pub struct Repo<'a> {
    repo: Option<Repository>,
    context: &'a Context,
}

impl Deref for Repo<'_> {
    type Target = Repository;

    fn deref(&self) -> &Repository {
        self.repo
            .as_ref()
            .expect("a lent handle is there until dropped")
    }
}

impl DerefMut for Repo<'_> {
    fn deref_mut(&mut self) -> &mut Repository {
        self.repo
            .as_mut()
            .expect("a lent handle is there until dropped")
    }
}

impl Drop for Repo<'_> {
    fn drop(&mut self) {
        if let Some(repo) = self.repo.take() {
            self.context.inner.idle.locked().push(repo);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with_commit() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        let tree = repo.find_tree(tree).unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "first", &tree, &[])
            .unwrap();
        dir
    }

    #[test]
    fn a_handle_is_lent_and_given_back_and_a_second_opened_only_while_one_is_out() {
        let dir = repo_with_commit();
        let ctx = Context::open(dir.path(), process_env(), PathBuf::from("plait")).unwrap();
        let first = ctx.repo().unwrap();
        let second = ctx.repo().unwrap();
        assert!(second.head().is_ok());
        drop(second);
        drop(first);
        assert_eq!(ctx.inner.idle.lock().unwrap().len(), 2);
        let again = ctx.repo().unwrap();
        assert!(again.head().is_ok());
        assert!(ctx.store().runs_dir().ends_with(".git/plait/runs"));
    }

    #[test]
    fn a_handle_lent_again_sees_what_the_git_cli_wrote_since() {
        let dir = repo_with_commit();
        let ctx = Context::open(dir.path(), process_env(), PathBuf::from("plait")).unwrap();
        let head = ctx.repo().unwrap().head().unwrap().target().unwrap();
        assert!(ctx
            .repo()
            .unwrap()
            .find_branch("later", git2::BranchType::Local)
            .is_err());
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        git(&["commit", "--allow-empty", "-q", "-m", "later"]);
        git(&["branch", "later"]);
        git(&["gc", "-q"]);
        let later = git(&["rev-parse", "HEAD"]);
        let repo = ctx.repo().unwrap();
        let branch = repo
            .find_branch("later", git2::BranchType::Local)
            .unwrap()
            .get()
            .target()
            .unwrap();
        assert_eq!(branch.to_string(), later);
        assert_ne!(branch, head);
        assert!(
            repo.find_commit(branch).is_ok(),
            "the new commit, now packed"
        );
    }

    #[test]
    fn a_linked_worktree_s_second_handle_is_the_same_worktree() {
        let dir = repo_with_commit();
        let linked = dir.path().join("linked");
        let out = std::process::Command::new("git")
            .args(["worktree", "add", "-q", "-b", "side"])
            .arg(&linked)
            .current_dir(dir.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let ctx = Context::open(&linked, process_env(), PathBuf::from("plait")).unwrap();
        let first = ctx.repo().unwrap();
        let second = ctx.repo().unwrap();
        for repo in [&first, &second] {
            assert_eq!(repo.head().unwrap().shorthand().ok(), Some("side"));
            assert_eq!(
                repo.workdir().unwrap().canonicalize().unwrap(),
                linked.canonicalize().unwrap()
            );
        }
        assert!(ctx.store().runs_dir().ends_with(".git/plait/runs"));
    }

    #[test]
    fn a_bare_or_missing_repository_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = Context::open(dir.path(), process_env(), PathBuf::from("plait")).unwrap_err();
        assert!(matches!(err, RepoError::NotARepo { .. }), "{err:?}");
    }
}
