//! Repository helpers every stage shares: opening the user's repository with clear errors,
//! the base tree as a flat list of files, and running the git CLI where it is the better
//! engine (`merge-tree`, `merge --ff-only`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::sync::Locked as _;
use git2::{ErrorCode, ObjectType, Oid, Repository, Tree, TreeWalkMode, TreeWalkResult};

/// Why a repository cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// The path is in no repository.
    #[error("{path} is not inside a git repository")]
    NotARepo {
        /// The path plait was given.
        path: PathBuf,
    },
    /// The repository has no working tree.
    #[error("{path} is a bare repository; plait needs a repository with a working tree")]
    Bare {
        /// Its git directory.
        path: PathBuf,
    },
    /// The repository has no commit to start from.
    #[error("the repository at {path} has no commits yet; commit something first")]
    NoCommits {
        /// Its working directory.
        path: PathBuf,
    },
    /// libgit2 failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// File modes as git stores them in trees and the index.
pub mod mode {
    /// A regular file.
    pub const FILE: u32 = 0o100644;
    /// An executable file.
    pub const EXEC: u32 = 0o100755;
    /// A symbolic link.
    pub const LINK: u32 = 0o120000;
    /// A submodule's commit.
    pub const GITLINK: u32 = 0o160000;
}

/// Opens the repository containing `path`, refusing bare repositories and unborn ones.
/// Keeps libgit2 from the user's, the XDG and the system git config, for a plait process
/// that runs inside a task's walls (`plait run-in-view`, `plait guard`): the walls keep
/// those files unreadable, and libgit2, which does not read `GIT_CONFIG_GLOBAL`, would
/// fail on them. Call before any repository is opened.
pub fn without_user_config() {
    for level in [
        git2::ConfigLevel::Global,
        git2::ConfigLevel::XDG,
        git2::ConfigLevel::System,
        git2::ConfigLevel::ProgramData,
    ] {
        // SAFETY: called first thing in a command, before any repository is opened and
        // before any other thread of plait's exists.
        let _ = unsafe { git2::opts::set_search_path(level, "/nonexistent/plait-no-config") };
    }
}

/// Opens the repository that holds `path`, refusing a bare one and one without commits.
pub fn open(path: &Path) -> Result<Repository, RepoError> {
    let repo = Repository::discover(path).map_err(|e| match e.code() {
        ErrorCode::NotFound => RepoError::NotARepo {
            path: path.to_path_buf(),
        },
        _ => RepoError::Git(e),
    })?;
    if repo.is_bare() {
        return Err(RepoError::Bare {
            path: repo.path().to_path_buf(),
        });
    }
    let head = repo.head().map(|_| ()).map_err(|e| e.code());
    match head {
        Ok(()) => Ok(repo),
        Err(ErrorCode::UnbornBranch | ErrorCode::NotFound) => Err(RepoError::NoCommits {
            path: workdir(&repo),
        }),
        Err(_) => {
            Err(RepoError::Git(repo.head().err().unwrap_or_else(|| {
                git2::Error::from_str("cannot read HEAD")
            })))
        }
    }
}

/// The branch HEAD is on, if any.
pub fn current_branch(repo: &Repository) -> Option<String> {
    let head = repo.head().ok()?;
    head.is_branch()
        .then(|| head.shorthand().ok().map(str::to_string))
        .flatten()
}

/// The working directory of a non-bare repository (its git dir for a bare one).
pub fn workdir(repo: &Repository) -> PathBuf {
    repo.workdir().unwrap_or_else(|| repo.path()).to_path_buf()
}

/// Where plait keeps its state: `<git-common-dir>/plait`, shared by every worktree.
pub fn plait_dir(repo: &Repository) -> PathBuf {
    repo.commondir().join("plait")
}

/// One non-tree entry of a tree, with its full slash-separated path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    /// Its path from the tree's root, `/`-separated.
    pub path: String,
    /// Its git mode (see [`mode`]).
    pub mode: u32,
    /// Its blob (or a submodule's commit).
    pub oid: Oid,
}

impl AsRef<str> for TreeFile {
    fn as_ref(&self) -> &str {
        &self.path
    }
}

impl TreeFile {
    /// Whether the entry is a file or symlink (not a submodule).
    pub fn is_blob(&self) -> bool {
        self.mode != mode::GITLINK
    }
}

/// Lists every non-tree entry of `tree`, sorted by path bytes (the index's order).
pub fn flatten_tree(tree: &Tree<'_>) -> Result<Vec<TreeFile>, git2::Error> {
    let mut files = Vec::new();
    let mut bad_name = None;
    tree.walk(TreeWalkMode::PreOrder, |root, entry| {
        if entry.kind() == Some(ObjectType::Tree) {
            return TreeWalkResult::Ok;
        }
        match entry.name() {
            Ok(name) => files.push(TreeFile {
                path: format!("{root}{name}"),
                mode: entry.filemode() as u32,
                oid: entry.id(),
            }),
            Err(_) => {
                bad_name = Some(format!(
                    "{root}{}",
                    String::from_utf8_lossy(entry.name_bytes())
                ));
                return TreeWalkResult::Abort;
            }
        }
        TreeWalkResult::Ok
    })
    .or_else(|e| if bad_name.is_some() { Ok(()) } else { Err(e) })?;
    if let Some(path) = bad_name {
        return Err(git2::Error::from_str(&format!(
            "the path {path:?} is not valid UTF-8; plait handles UTF-8 paths only"
        )));
    }
    files.sort_unstable_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    Ok(files)
}

/// The sorted file list of a tree that differs from the one `files` lists (sorted, as
/// [`flatten_tree`] gives it) by `changes` (from [`tree_changes`]): the same list as
/// flattening that tree, at the cost of the changes and a copy, not of reading every tree.
pub fn patched(files: &[TreeFile], changes: &BTreeMap<String, Entry>) -> Vec<TreeFile> {
    let mut out = Vec::with_capacity(files.len() + changes.len());
    let mut rest = files;
    for (path, entry) in changes {
        let at = rest.partition_point(|f| f.path.as_bytes() < path.as_bytes());
        out.extend_from_slice(&rest[..at]);
        rest = &rest[at..];
        if rest.first().is_some_and(|f| f.path == *path) {
            rest = &rest[1..];
        }
        if let Some((oid, mode)) = entry {
            out.push(TreeFile {
                path: path.clone(),
                mode: *mode,
                oid: *oid,
            });
        }
    }
    out.extend_from_slice(rest);
    out
}

/// A failed git CLI invocation.
#[derive(Debug, thiserror::Error)]
pub enum GitCliError {
    /// git could not be started.
    #[error("could not run git ({0}); is git installed and on PATH?")]
    Spawn(std::io::Error),
    /// git ran and failed.
    #[error("`git {args}` failed: {stderr}")]
    Failed {
        /// The arguments it was given, joined by spaces.
        args: String,
        /// What it wrote on its standard error.
        stderr: String,
    },
}

/// Environment variables that point git at another repository, worktree or index (git
/// sets some of them for hooks); every git and agent process plait starts goes without.
pub const REDIRECTING_VARS: [&str; 5] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
];

/// A `git` command in `dir` that ignores environment variables pointing it elsewhere.
pub fn git_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir);
    for var in REDIRECTING_VARS {
        cmd.env_remove(var);
    }
    cmd
}

/// Whether the git CLI on PATH reads sparse indexes (`index.sparse` in cone mode, git
/// 2.37 or later); asked once per process. An older git refuses an index with the `sdir`
/// extension, so plait then writes full indexes.
pub fn reads_sparse_index() -> bool {
    static READS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *READS.get_or_init(|| {
        let Ok(out) = Command::new("git").arg("--version").output() else {
            return false;
        };
        version_at_least(&String::from_utf8_lossy(&out.stdout), (2, 37))
    })
}

/// Whether `git version X.Y.Z...` names at least `want`.
fn version_at_least(text: &str, want: (u32, u32)) -> bool {
    let Some(version) = text.split_whitespace().nth(2) else {
        return false;
    };
    let mut parts = version.split('.').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .unwrap_or(0)
    });
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= want
}

/// The tree of the index git is about to commit in `dir`: `git write-tree` of `index` (the
/// `GIT_INDEX_FILE` a hook was given, relative to `dir`), else of the worktree's own index.
pub fn index_tree(dir: &Path, index: Option<&Path>) -> Result<Oid, GitCliError> {
    let mut cmd = git_command(dir);
    if let Some(index) = index {
        cmd.env("GIT_INDEX_FILE", dir.join(index));
    }
    let out = cmd.arg("write-tree").output().map_err(GitCliError::Spawn)?;
    let text = String::from_utf8_lossy(&out.stdout);
    match (out.status.success(), Oid::from_str(text.trim())) {
        (true, Ok(tree)) => Ok(tree),
        _ => Err(GitCliError::Failed {
            args: "write-tree".to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }),
    }
}

/// Runs git in `dir` and returns its output; a non-zero exit is an error unless `allowed`
/// lists that code.
pub fn run_git(dir: &Path, args: &[&str], allowed: &[i32]) -> Result<Output, GitCliError> {
    run_git_with(dir, args, allowed, &[])
}

/// [`run_git`] with extra environment variables for git (and its hooks).
pub fn run_git_with(
    dir: &Path,
    args: &[&str],
    allowed: &[i32],
    env: &[(&str, &str)],
) -> Result<Output, GitCliError> {
    let out = git_command(dir)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(GitCliError::Spawn)?;
    let code = out.status.code().unwrap_or(-1);
    if out.status.success() || allowed.contains(&code) {
        Ok(out)
    } else {
        Err(GitCliError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Who plait's commits are by: the author and the committer, as `git commit` would name
/// them.
pub struct Identity {
    /// The commits' author.
    pub author: git2::Signature<'static>,
    /// The commits' committer.
    pub committer: git2::Signature<'static>,
}

/// One identity as `git var` prints it: name, email, and the date when one is fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ident {
    name: String,
    email: String,
    /// Seconds and minutes east of UTC, when `GIT_*_DATE` fixed them.
    fixed: Option<(i64, i32)>,
}

/// The identities plait commits with in `repo`: the author and committer git itself would
/// use (asked of `git var`, so `GIT_AUTHOR_*`, `GIT_COMMITTER_*`, `GIT_CONFIG_GLOBAL`,
/// `GIT_CONFIG_NOSYSTEM`, `XDG_CONFIG_HOME` and the repository's config count, which
/// libgit2 does not read), else `plait <plait@localhost>`. Asked once per repository
/// and process; the date is the time of the commit unless the environment fixed one.
pub fn signatures(repo: &Repository) -> Result<Identity, git2::Error> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Known = HashMap<PathBuf, (Option<Ident>, Option<Ident>)>;
    static KNOWN: OnceLock<Mutex<Known>> = OnceLock::new();
    let dir = workdir(repo);
    let (author, committer) = {
        let mut known = KNOWN.get_or_init(Default::default).locked();
        known
            .entry(dir.clone())
            .or_insert_with(|| {
                (
                    git_ident(&dir, "GIT_AUTHOR_IDENT"),
                    git_ident(&dir, "GIT_COMMITTER_IDENT"),
                )
            })
            .clone()
    };
    Ok(Identity {
        author: signature_of(author.as_ref())?,
        committer: signature_of(committer.as_ref())?,
    })
}

fn signature_of(ident: Option<&Ident>) -> Result<git2::Signature<'static>, git2::Error> {
    match ident {
        Some(Ident {
            name,
            email,
            fixed: Some((secs, offset)),
        }) => git2::Signature::new(name, email, &git2::Time::new(*secs, *offset)),
        Some(Ident { name, email, .. }) => git2::Signature::now(name, email),
        None => git2::Signature::now("plait", "plait@localhost"),
    }
}

/// `git var NAME` in `dir`, parsed: `Name <email> 1700000000 +0100`; `None` when git
/// knows no identity.
fn git_ident(dir: &Path, var: &str) -> Option<Ident> {
    let out = git_command(dir).args(["var", var]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let ident = parse_ident(String::from_utf8_lossy(&out.stdout).trim())?;
    // A date git made up is now; one more than a minute away was fixed by GIT_*_DATE.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let fixed = ident.fixed.filter(|(secs, _)| (secs - now).abs() > 60);
    Some(Ident { fixed, ..ident })
}

fn parse_ident(line: &str) -> Option<Ident> {
    let (name, rest) = line.rsplit_once(" <")?;
    let (email, date) = rest.split_once('>')?;
    let mut fields = date.split_whitespace();
    let secs: i64 = fields.next()?.parse().ok()?;
    let zone = fields.next().unwrap_or("+0000");
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits: i32 = zone.trim_start_matches(['+', '-']).parse().unwrap_or(0);
    let offset = sign * ((digits / 100) * 60 + digits % 100);
    Some(Ident {
        name: name.to_string(),
        email: email.to_string(),
        fixed: Some((secs, offset)),
    })
}

/// A path's entry on one side of a tree diff: its id and mode; `None` where it is absent.
pub type Entry = Option<(git2::Oid, u32)>;

/// Every path that differs between two trees, with its entry in `to` (None: deleted).
/// Subtrees with the same id on both sides are skipped without being read, so the cost
/// follows the change, not the size of the trees.
pub fn tree_changes(
    repo: &git2::Repository,
    from: &git2::Tree<'_>,
    to: &git2::Tree<'_>,
) -> Result<BTreeMap<String, Entry>, git2::Error> {
    let mut out = BTreeMap::new();
    diff_trees(repo, Some(from), Some(to), "", &mut out)?;
    Ok(out)
}

/// An entry of a tree: its id, mode, and whether it is a tree.
type Side = Option<(git2::Oid, u32, bool)>;

fn side(e: &git2::TreeEntry<'_>) -> Side {
    Some((
        e.id(),
        e.filemode() as u32,
        e.kind() == Some(git2::ObjectType::Tree),
    ))
}

fn entry_name(e: &git2::TreeEntry<'_>) -> Result<String, git2::Error> {
    e.name()
        .map(str::to_string)
        .map_err(|_| git2::Error::from_str("a path in a tree is not valid UTF-8"))
}

/// Orders two entries of a tree as git sorts them: by name, a tree's name as if it ended
/// in `/`.
fn tree_order(a: &git2::TreeEntry<'_>, b: &git2::TreeEntry<'_>) -> std::cmp::Ordering {
    let (x, y) = (a.name_bytes(), b.name_bytes());
    let n = x.len().min(y.len());
    let end = |e: &git2::TreeEntry<'_>, name: &[u8]| match name.get(n) {
        Some(&c) => c,
        None if e.kind() == Some(git2::ObjectType::Tree) => b'/',
        None => 0,
    };
    x[..n].cmp(&y[..n]).then_with(|| end(a, x).cmp(&end(b, y)))
}

/// The entries of `from` and `to` that differ, by name. Both trees are walked side by side
/// in git's order, so an entry that is the same on both sides costs one comparison: a
/// directory of thousands of entries changed in one place allocates for that one.
fn differing(
    from: Option<&git2::Tree<'_>>,
    to: Option<&git2::Tree<'_>>,
) -> Result<BTreeMap<String, (Side, Side)>, git2::Error> {
    use std::cmp::Ordering;
    let mut a = from.into_iter().flat_map(|t| t.iter()).peekable();
    let mut b = to.into_iter().flat_map(|t| t.iter()).peekable();
    // A name that is a file on one side and a directory on the other sorts apart on the
    // two: the entries are paired by name here, not by place.
    let mut out: BTreeMap<String, (Side, Side)> = BTreeMap::new();
    loop {
        let order = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(x), Some(y)) => tree_order(x, y),
        };
        let (x, y) = match order {
            Ordering::Less => (a.next(), None),
            Ordering::Greater => (None, b.next()),
            Ordering::Equal => (a.next(), b.next()),
        };
        let (sx, sy) = (x.as_ref().and_then(side), y.as_ref().and_then(side));
        if sx == sy {
            continue;
        }
        let Some(named) = y.as_ref().or(x.as_ref()) else {
            continue;
        };
        let slot = out.entry(entry_name(named)?).or_insert((None, None));
        if x.is_some() {
            slot.0 = sx;
        }
        if y.is_some() {
            slot.1 = sy;
        }
    }
    // Paired by name, the two sides of a tree out of git's order may be the same after all.
    out.retain(|_, (x, y)| x != y);
    Ok(out)
}

fn diff_trees(
    repo: &git2::Repository,
    from: Option<&git2::Tree<'_>>,
    to: Option<&git2::Tree<'_>>,
    prefix: &str,
    out: &mut BTreeMap<String, Entry>,
) -> Result<(), git2::Error> {
    for (name, (a, b)) in differing(from, to)? {
        let path = format!("{prefix}{name}");
        let sub = |s: Side| -> Result<Option<git2::Tree<'_>>, git2::Error> {
            match s {
                Some((oid, _, true)) => Ok(Some(repo.find_tree(oid)?)),
                _ => Ok(None),
            }
        };
        let (ta, tb) = (sub(a)?, sub(b)?);
        if ta.is_some() || tb.is_some() {
            diff_trees(repo, ta.as_ref(), tb.as_ref(), &format!("{path}/"), out)?;
        }
        match (a, b) {
            (_, Some((oid, m, false))) => {
                out.insert(path, Some((oid, m)));
            }
            (Some((_, _, false)), _) => {
                out.insert(path, None);
            }
            _ => {}
        }
    }
    Ok(())
}

/// The first 8 characters of a commit id, as it is shown; whole if shorter (a damaged
/// record never makes this panic).
pub fn short(id: &str) -> &str {
    id.char_indices().nth(8).map_or(id, |(i, _)| &id[..i])
}

#[cfg(test)]
mod tests {
    #[test]
    fn git_versions_are_compared_by_number() {
        use super::version_at_least as at_least;
        assert!(at_least("git version 2.47.3", (2, 37)));
        assert!(at_least("git version 2.37.0.windows.1", (2, 37)));
        assert!(at_least("git version 3.0.0", (2, 37)));
        assert!(!at_least("git version 2.25.1", (2, 37)));
        assert!(!at_least("git version 2.9.5", (2, 37)));
        assert!(!at_least("nonsense", (2, 37)));
    }

    /// A tree of `files` (path, content; a content of `None` is a link to `target`).
    fn tree<'r>(repo: &'r git2::Repository, files: &[(&str, &str)]) -> git2::Tree<'r> {
        let empty = repo.treebuilder(None).unwrap().write().unwrap();
        let mut update = git2::build::TreeUpdateBuilder::new();
        for (path, text) in files {
            let blob = repo.blob(text.as_bytes()).unwrap();
            update.upsert(*path, blob, git2::FileMode::Blob);
        }
        let empty = repo.find_tree(empty).unwrap();
        let id = update.create_updated(repo, &empty).unwrap();
        repo.find_tree(id).unwrap()
    }

    #[test]
    fn tree_changes_names_every_path_that_differs_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(dir.path()).unwrap();
        let from = tree(
            &repo,
            &[
                ("a", "1"),
                ("a.txt", "same"),
                ("b/c.txt", "old"),
                ("b/d.txt", "same"),
                ("b.txt", "same"),
                ("e/f.txt", "gone"),
                ("g", "a file that becomes a directory"),
                ("z.txt", "same"),
            ],
        );
        let to = tree(
            &repo,
            &[
                ("a", "1"),
                ("a.txt", "same"),
                ("b/c.txt", "new"),
                ("b/d.txt", "same"),
                ("b/new.txt", "added"),
                ("b.txt", "same"),
                ("g/h.txt", "inside"),
                ("z.txt", "same"),
            ],
        );
        let changes = super::tree_changes(&repo, &from, &to).unwrap();
        let paths: Vec<(&str, bool)> = changes
            .iter()
            .map(|(p, e)| (p.as_str(), e.is_some()))
            .collect();
        assert_eq!(
            paths,
            [
                ("b/c.txt", true),
                ("b/new.txt", true),
                ("e/f.txt", false),
                ("g", false),
                ("g/h.txt", true),
            ]
        );
        let back: Vec<(String, bool)> = super::tree_changes(&repo, &to, &from)
            .unwrap()
            .into_iter()
            .map(|(p, e)| (p, e.is_some()))
            .collect();
        let expected = [
            ("b/c.txt", true),
            ("b/new.txt", false),
            ("e/f.txt", true),
            ("g", true),
            ("g/h.txt", false),
        ];
        assert_eq!(back, expected.map(|(p, e)| (p.to_string(), e)).to_vec());
        assert!(super::tree_changes(&repo, &from, &from).unwrap().is_empty());
        let listed = |t: &git2::Tree<'_>| super::flatten_tree(t).unwrap();
        assert_eq!(super::patched(&listed(&from), &changes), listed(&to));
        let back = super::tree_changes(&repo, &to, &from).unwrap();
        assert_eq!(super::patched(&listed(&to), &back), listed(&from));
    }
}
