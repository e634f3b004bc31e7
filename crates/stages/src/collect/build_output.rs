//! The caches build tools and test runners write, which collect takes for build output
//! whether or not a `.gitignore` says so: a repository without one (an sdist, a fresh
//! crate) would otherwise see every `__pycache__/*.pyc` its agent's `pytest` wrote reported
//! as a violation. Only names no project uses for its sources are listed; a file the base
//! tracks, or one the task owns by a glob that names the cache, is never build output.

use plait_core::globs::{Globs, Reach};

/// What a name of the list stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A directory of this name, anywhere.
    Dir(&'static str),
    /// A directory whose name ends so (`*.egg-info/`).
    DirSuffix(&'static str),
    /// A directory of this name whose parent holds the marker file (`target/` beside a
    /// `Cargo.toml`).
    DirBeside(&'static str, &'static str),
    /// A file of this name, anywhere.
    File(&'static str),
    /// A file whose name ends so (`*.pyc`).
    FileSuffix(&'static str),
}

/// The build output plait knows without a `.gitignore` (the README lists the same).
pub const BUILD_OUTPUT: &[Kind] = &[
    Kind::Dir("__pycache__"),
    Kind::FileSuffix(".pyc"),
    Kind::FileSuffix(".pyo"),
    Kind::Dir(".pytest_cache"),
    Kind::Dir(".mypy_cache"),
    Kind::Dir(".ruff_cache"),
    Kind::Dir(".hypothesis"),
    Kind::Dir(".tox"),
    Kind::Dir(".nox"),
    Kind::Dir(".venv"),
    Kind::DirSuffix(".egg-info"),
    Kind::File(".coverage"),
    Kind::Dir("node_modules"),
    Kind::Dir(".next"),
    Kind::Dir(".turbo"),
    Kind::Dir(".parcel-cache"),
    Kind::File(".eslintcache"),
    Kind::Dir(".gradle"),
    Kind::DirBeside("target", "Cargo.toml"),
];

/// Whether `path` (relative, slash-separated; a file, or a directory when `is_dir`) is
/// build output or lies in a directory that is. `exists` says whether the tree (the base's,
/// or the worktree) holds a file at a path, for the directories known by a file beside them.
pub fn holds(path: &str, is_dir: bool, exists: &dyn Fn(&str) -> bool) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let dirs = if is_dir { parts.len() } else { parts.len() - 1 };
    let dir_matches = (0..dirs).any(|i| {
        let name = parts[i];
        BUILD_OUTPUT.iter().any(|kind| match *kind {
            Kind::Dir(dir) => name == dir,
            Kind::DirSuffix(suffix) => name.len() > suffix.len() && name.ends_with(suffix),
            Kind::DirBeside(dir, marker) => {
                name == dir && exists(&join(&parts[..i].join("/"), marker))
            }
            Kind::File(_) | Kind::FileSuffix(_) => false,
        })
    });
    let file_matches = !is_dir
        && parts.last().is_some_and(|name| {
            BUILD_OUTPUT.iter().any(|kind| match *kind {
                Kind::File(file) => *name == file,
                Kind::FileSuffix(suffix) => name.len() > suffix.len() && name.ends_with(suffix),
                _ => false,
            })
        });
    dir_matches || file_matches
}

/// Whether any of `reaches` (an `owns` list's, [`Globs::reaches`]) may match a path at or
/// under directory `dir`: a directory of build output it may not is not walked at all.
pub(crate) fn may_own_under(reaches: &[Reach], dir: &str) -> bool {
    let inside = format!("{dir}/");
    reaches.iter().any(|reach| match reach {
        Reach::Path(path) => {
            path == dir || path.starts_with(&inside) || inside.starts_with(&format!("{path}/"))
        }
        Reach::Under(under) => {
            under.is_empty() || under.starts_with(&inside) || inside.starts_with(under.as_str())
        }
    })
}

/// Whether the file at `path`, not tracked at the base, is build output the task does not
/// own by name: collect leaves it where it is, neither committed nor a violation. A glob
/// that owns a whole directory (`pkg/**`) does not own the `__pycache__/` its tests leave
/// there; one that names the cache (`pkg/__pycache__/*`, `*.pyc`) does.
pub(crate) fn is_unowned(path: &str, owns: &Globs, exists: &dyn Fn(&str) -> bool) -> bool {
    holds(path, false, exists) && !(owns.matches(path) && names_build_output(owns))
}

/// Whether one of `owns`' patterns names a kind of build output of the list.
fn names_build_output(owns: &Globs) -> bool {
    owns.patterns().iter().any(|pattern| {
        BUILD_OUTPUT.iter().any(|kind| {
            let name = match *kind {
                Kind::Dir(n) | Kind::DirSuffix(n) | Kind::File(n) | Kind::FileSuffix(n) => n,
                Kind::DirBeside(n, _) => n,
            };
            pattern.contains(name)
        })
    })
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cargo_at_root(path: &str) -> bool {
        path == "Cargo.toml"
    }

    #[test]
    fn caches_are_build_output_and_sources_are_not() {
        for path in [
            "src/pkg/__pycache__/mod.cpython-311.pyc",
            "mod.pyc",
            ".pytest_cache/v/x",
            "a/node_modules/left-pad/index.js",
            "tomlkit.egg-info/PKG-INFO",
            "target/debug/foo",
            ".eslintcache",
            "web/.next/cache/x",
        ] {
            assert!(holds(path, false, &cargo_at_root), "{path}");
        }
        for path in [
            "src/main.py",
            "crates/x/target/debug/foo",
            "src/target.rs",
            "coverage/report.py",
            "pyc",
            ".egg-info/x",
        ] {
            assert!(!holds(path, false, &cargo_at_root), "{path}");
        }
        assert!(holds("node_modules", true, &cargo_at_root));
        assert!(!holds("node_modules", false, &cargo_at_root));
    }

    #[test]
    fn a_directory_is_walked_only_where_the_task_may_own_something() {
        let globs = |p: &[&str]| {
            Globs::new(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap()
                .reaches()
        };
        assert!(!may_own_under(
            &globs(&["src/pkg/mod.py"]),
            "src/pkg/__pycache__"
        ));
        assert!(may_own_under(
            &globs(&["src/pkg/**"]),
            "src/pkg/__pycache__"
        ));
        assert!(may_own_under(&globs(&["src"]), "src/pkg/__pycache__"));
        assert!(may_own_under(
            &globs(&["node_modules/x/**"]),
            "node_modules"
        ));
        assert!(may_own_under(&globs(&["*.pyc"]), "a/__pycache__"));
        assert!(!may_own_under(&globs(&["srcx/**"]), "src"));
        assert!(!may_own_under(&[], "target"));
    }
}
