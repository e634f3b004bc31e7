//! A task's layout: the files its worktree holds and the cone of directories git's sparse
//! checkout is told about, decided when the plan is resolved. Everything here costs what
//! the task holds, not what the repository holds: the files come from binary searches of
//! the run's sorted file list.
//!
//! Cone mode takes whole directories (the recursive ones) plus the files directly inside
//! their parents. A task's files are rarely exactly that, so plait's cone is the smallest
//! one holding them: every directory an owned glob can write under is whole, and the
//! directory of every other file it holds (context, single owned files) has its own files
//! in the cone. Files in the cone that the task does not hold stay in the index one by one
//! with the skip-worktree bit; only directories wholly outside are folded
//! (`workspace::sparse`).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use plait_core::git::TreeFile;
use plait_core::globs::{within, Globs, Reach};

/// How a directory stands in a cone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// The directory and everything below it.
    Whole,
    /// The files directly inside it; its subdirectories are looked at one by one.
    Own,
    /// Not in the cone: one sparse-directory entry in the index.
    Outside,
}

/// The directories of a sparse checkout in cone mode, without trailing slashes (`""` is
/// the root).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cone {
    whole: BTreeSet<String>,
    /// Directories whose own files are in the cone: the root, the ancestors of every
    /// whole directory, and the directory of every held file outside them.
    own: BTreeSet<String>,
}

impl Cone {
    /// The cone of everything: a full checkout.
    pub fn full() -> Cone {
        Cone {
            whole: BTreeSet::from([String::new()]),
            own: BTreeSet::new(),
        }
    }

    /// A cone of the given whole directories and directories with their own files; the
    /// ancestors are added, and whole directories inside others dropped.
    pub fn new(
        whole: impl IntoIterator<Item = String>,
        own: impl IntoIterator<Item = String>,
    ) -> Cone {
        let mut cone = Cone {
            whole: BTreeSet::new(),
            own: BTreeSet::from([String::new()]),
        };
        let mut dirs: Vec<String> = whole.into_iter().collect();
        dirs.sort();
        for dir in dirs {
            if !cone.is_whole(&dir) {
                cone.whole.insert(dir);
            }
        }
        if cone.whole.contains("") {
            return Cone::full();
        }
        let ancestors: Vec<String> = cone.whole.iter().flat_map(|d| ancestors(d)).collect();
        cone.own.extend(ancestors);
        for dir in own {
            cone.add_own(dir);
        }
        cone
    }

    /// Adds `dir`'s own files (and its ancestors) to the cone, unless it is already whole.
    pub fn add_own(&mut self, dir: String) {
        if self.is_whole(&dir) || self.own.contains(&dir) {
            return;
        }
        self.own.extend(ancestors(&dir));
        self.own.insert(dir);
    }

    /// Whether the cone holds everything.
    pub fn is_full(&self) -> bool {
        self.whole.contains("")
    }

    /// Whether `dir` or one of its ancestors is whole.
    fn is_whole(&self, dir: &str) -> bool {
        self.whole.contains("")
            || self.whole.contains(dir)
            || ancestors(dir).any(|a| !a.is_empty() && self.whole.contains(&a))
    }

    /// How the directory `dir` (no trailing slash) stands in the cone.
    pub fn dir(&self, dir: &str) -> Dir {
        if self.is_whole(dir) {
            Dir::Whole
        } else if self.own.contains(dir) {
            Dir::Own
        } else {
            Dir::Outside
        }
    }

    /// Whether the file at `path` is in the cone.
    pub fn holds(&self, path: &str) -> bool {
        self.dir(parent(path)) != Dir::Outside
    }

    /// The whole directories, as `git sparse-checkout list` prints them.
    pub fn whole(&self) -> impl Iterator<Item = &str> {
        self.whole.iter().map(String::as_str)
    }

    /// The directories whose own files (not their subdirectories) are in the cone, the
    /// root (`""`) first.
    pub fn own(&self) -> impl Iterator<Item = &str> {
        self.own.iter().map(String::as_str)
    }

    /// The `info/sparse-checkout` file of this cone, as `git sparse-checkout set --cone`
    /// writes it.
    pub fn patterns(&self) -> String {
        if self.is_full() {
            return "/*\n".to_string();
        }
        let mut out = String::from("/*\n!/*/\n");
        let dirs: BTreeSet<&String> = self.own.iter().chain(&self.whole).collect();
        for dir in dirs.into_iter().filter(|d| !d.is_empty()) {
            let escaped = escape(dir);
            let _ = writeln!(out, "/{escaped}/");
            if !self.whole.contains(dir) {
                let _ = writeln!(out, "!/{escaped}/*/");
            }
        }
        out
    }
}

/// `dir`'s ancestors, nearest last, the root (`""`) first.
fn ancestors(dir: &str) -> impl Iterator<Item = String> + '_ {
    parents(dir).map(str::to_string)
}

/// The directory holding `path` (`""` for a file at the root).
pub fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// Escapes a directory name for a cone pattern as git does: its glob characters `*?[\`
/// (a line starts with `/`, so `!` and `#` need nothing).
fn escape(dir: &str) -> String {
    let mut out = String::with_capacity(dir.len());
    for c in dir.chars() {
        if matches!(c, '*' | '?' | '[' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What one task's worktree holds.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Indices into the run's sorted file list of the files checked out, in order.
    pub files: Vec<usize>,
    /// The directories of its sparse checkout.
    pub cone: Cone,
}

impl Layout {
    /// The layout of a task that owns `owns`, reads `context`, and (with `full`) holds
    /// every file; `files` is the base's sorted file list. `.gitignore` files inside the
    /// cone are held too, so git and plait agree on what is ignored there.
    pub fn new(files: &[TreeFile], owns: &Globs, context: &Globs, full: bool) -> Layout {
        if full {
            return Layout {
                files: (0..files.len()).filter(|&i| files[i].is_blob()).collect(),
                cone: Cone::full(),
            };
        }
        let find = |path: &str| files.binary_search_by(|f| f.path.as_bytes().cmp(path.as_bytes()));
        // Everywhere an owned glob can write a new file is whole; an owned single file
        // needs only its directory's own files.
        let whole: Vec<String> = owns
            .reaches()
            .into_iter()
            .filter_map(|reach| match reach {
                Reach::Path(path) if find(&path).is_ok() => None,
                Reach::Path(path) => Some(path),
                Reach::Under(dir) => Some(dir.trim_end_matches('/').to_string()),
            })
            .collect();
        let mut held: Vec<usize> = Vec::new();
        for globs in [owns, context] {
            let scopes = globs.scopes();
            held.extend(
                within(files, &scopes)
                    .filter(|&i| files[i].is_blob() && globs.matches(&files[i].path)),
            );
        }
        // The directories on the way from the root to each owned file and to each
        // directory an owned glob can write in: their own files are the task's context,
        // where tools look for their configuration (pyproject.toml, Cargo.toml,
        // .editorconfig, package.json, tsconfig.json, conftest.py).
        let mut on_the_way: BTreeSet<&str> = whole.iter().map(String::as_str).collect();
        on_the_way.extend(
            held.iter()
                .filter(|&&i| owns.matches(&files[i].path))
                .map(|&i| parent(&files[i].path)),
        );
        let mut cone = Cone::new(whole.iter().cloned(), []);
        for &i in &held {
            cone.add_own(parent(&files[i].path).to_string());
        }
        let mut dirs: BTreeSet<&str> = BTreeSet::new();
        for dir in on_the_way {
            dirs.insert(dir);
            dirs.extend(parents(dir));
        }
        for dir in dirs {
            held.extend(own_files(files, dir).filter(|&i| files[i].is_blob()));
        }
        // The ignore files of the cone's directories.
        let mut scopes: Vec<String> = cone.whole().map(|d| format!("{d}/")).collect();
        scopes.sort();
        held.extend(within(files, &scopes).filter(|&i| is_ignore_file(&files[i].path)));
        for dir in &cone.own {
            let path = if dir.is_empty() {
                ".gitignore".to_string()
            } else {
                format!("{dir}/.gitignore")
            };
            if let Ok(i) = find(&path) {
                held.push(i);
            }
        }
        held.sort_unstable();
        held.dedup();
        Layout { files: held, cone }
    }
}

/// `dir`'s ancestors as slices of it, the root (`""`) first.
fn parents(dir: &str) -> impl Iterator<Item = &str> {
    let cuts = dir.match_indices('/').map(|(i, _)| i);
    std::iter::once("")
        .filter(move |_| !dir.is_empty())
        .chain(cuts.map(move |i| &dir[..i]))
}

/// The indices of the files directly inside `dir` (`""`: the root) in the sorted list
/// `files`. Each subdirectory is stepped over by a search that starts where it starts
/// (`past`), so this costs the directory's own entries, not what lies below it.
fn own_files<'a>(files: &'a [TreeFile], dir: &str) -> impl Iterator<Item = usize> + 'a {
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    let mut i = files.partition_point(|f| f.path.as_bytes() < prefix.as_bytes());
    std::iter::from_fn(move || loop {
        let path = files.get(i)?.path.as_str();
        let rest = path.strip_prefix(prefix.as_str())?;
        match rest.find('/') {
            None => {
                i += 1;
                return Some(i - 1);
            }
            // Past everything under `<prefix><sub>/`.
            Some(cut) => i = past(files, i, &path.as_bytes()[..prefix.len() + cut + 1]),
        }
    })
}

/// The first index after `from` (whose path starts with `under`) of a path that does not
/// start with `under`: steps that double from `from`, then a binary search in the last
/// one, so a directory's entries are stepped over at the cost of their count's logarithm,
/// among entries near each other in memory rather than across the whole list.
fn past(files: &[TreeFile], from: usize, under: &[u8]) -> usize {
    let inside = |f: &TreeFile| f.path.as_bytes().starts_with(under);
    let (mut known, mut step) = (from, 1);
    loop {
        let probe = from + step;
        if probe >= files.len() || !inside(&files[probe]) {
            let end = probe.min(files.len());
            return known + files[known..end].partition_point(inside);
        }
        known = probe;
        step *= 2;
    }
}

/// `.gitignore` files are held wherever the cone reaches.
pub(crate) fn is_ignore_file(path: &str) -> bool {
    path == ".gitignore" || path.ends_with("/.gitignore")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cone_knows_its_directories_and_writes_them_as_git_does() {
        let mut cone = Cone::new(["src/a".to_string(), "src/a/b".to_string()], []);
        cone.add_own("docs/guide".to_string());
        cone.add_own("src/a/c".to_string());
        assert_eq!(cone.dir(""), Dir::Own);
        assert_eq!(cone.dir("src"), Dir::Own);
        assert_eq!(cone.dir("src/a"), Dir::Whole);
        assert_eq!(cone.dir("src/a/c/d"), Dir::Whole);
        assert_eq!(cone.dir("src/ab"), Dir::Outside);
        assert_eq!(cone.dir("docs"), Dir::Own);
        assert_eq!(cone.dir("docs/guide/x"), Dir::Outside);
        assert!(cone.holds("README.md"));
        assert!(cone.holds("docs/guide/intro.md"));
        assert!(!cone.holds("tests/x.rs"));
        assert_eq!(
            cone.patterns(),
            "/*\n!/*/\n/docs/\n!/docs/*/\n/docs/guide/\n!/docs/guide/*/\n/src/\n!/src/*/\n/src/a/\n"
        );
        assert_eq!(cone.whole().collect::<Vec<_>>(), vec!["src/a"]);
        assert!(Cone::new(["".to_string()], []).is_full());
    }

    #[test]
    fn own_files_steps_over_subdirectories() {
        let mut paths = [
            "a.txt",
            "b/c.txt",
            "b/d/e.txt",
            "b/d/f.txt",
            "b/g.txt",
            "b.txt",
            "b-x/h.txt",
            "z.txt",
        ];
        paths.sort();
        let files: Vec<TreeFile> = paths
            .iter()
            .map(|p| TreeFile {
                path: p.to_string(),
                mode: plait_core::git::mode::FILE,
                oid: git2::Oid::ZERO_SHA1,
            })
            .collect();
        let names = |dir: &str| -> Vec<&str> {
            own_files(&files, dir)
                .map(|i| files[i].path.as_str())
                .collect()
        };
        assert_eq!(names(""), ["a.txt", "b.txt", "z.txt"]);
        assert_eq!(names("b"), ["b/c.txt", "b/g.txt"]);
        assert_eq!(names("b/d"), ["b/d/e.txt", "b/d/f.txt"]);
        assert!(names("q").is_empty());
        assert_eq!(parents("x/y/z").collect::<Vec<_>>(), ["", "x", "x/y"]);
    }

    #[test]
    fn own_files_steps_over_subdirectories_of_every_size() {
        let mut paths: Vec<String> = Vec::new();
        for n in [0usize, 1, 2, 3, 7, 8, 9, 100] {
            paths.push(format!("d{n:03}.txt"));
            paths.extend((0..n).map(|k| format!("d{n:03}/f{k:03}.txt")));
            paths.extend((0..n).map(|k| format!("d{n:03}/sub/f{k:03}.txt")));
        }
        paths.push("z.txt".to_string());
        paths.sort();
        let files: Vec<TreeFile> = paths
            .iter()
            .map(|p| TreeFile {
                path: p.clone(),
                mode: plait_core::git::mode::FILE,
                oid: git2::Oid::ZERO_SHA1,
            })
            .collect();
        let names = |dir: &str| -> Vec<&str> {
            own_files(&files, dir)
                .map(|i| files[i].path.as_str())
                .collect()
        };
        let top: Vec<&str> = paths
            .iter()
            .filter(|p| !p.contains('/'))
            .map(String::as_str)
            .collect();
        assert_eq!(names(""), top);
        assert_eq!(names("d009").len(), 9);
        assert_eq!(names("d100/sub").len(), 100);
    }
}
