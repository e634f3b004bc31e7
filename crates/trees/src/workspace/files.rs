//! Files plait writes from git's objects into a tree a task or a check may have written (a
//! worktree, a view filled in, a check's layer) or one of its own making (a base layer, a
//! base checkout): each beneath a handle of the tree (`plait_core::beneath`), no link
//! followed on the way, and made new where nothing stands (`O_EXCL`), so what a task put
//! at a name is never opened, followed or written through. Files come sorted by path and
//! most share their directory with the one before, so the last directory is held open.

use std::io;
use std::path::Path;

use git2::{Oid, Repository};

use plait_core::beneath::Tree;
use plait_core::git::mode;

/// What writing one file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placed {
    /// It was written.
    Written,
    /// Something stands at its name already, or a link or a file where one of its
    /// directories should be: nothing was written.
    Taken,
}

/// Why a file could not be written: its path in the tree and what failed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file system refused.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file, under the tree's root.
        path: std::path::PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// Its blob could not be read.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// New files written beneath one tree, holding the directory of the last one open.
pub(crate) struct NewFiles<'t> {
    tree: &'t Tree,
    /// The directory (relative to the tree) of the last file written, and its handle.
    held: Option<(String, Tree)>,
}

/// Whether `e` says a link, or something not a directory, stands where a directory of the
/// path should be.
fn blocked(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ELOOP) | Some(libc::ENOTDIR) | Some(libc::EXDEV)
    )
}

impl<'t> NewFiles<'t> {
    pub(crate) fn new(tree: &'t Tree) -> NewFiles<'t> {
        NewFiles { tree, held: None }
    }

    fn failed(&self, rel: &str, source: io::Error) -> FileError {
        FileError::Io {
            path: self.tree.root().join(rel),
            source,
        }
    }

    /// The directory `dir` beneath the tree, made when missing; `None` when a link or a
    /// file stands on the way.
    fn dir(&mut self, dir: &str) -> Result<Option<&Tree>, FileError> {
        if dir.is_empty() {
            return Ok(Some(self.tree));
        }
        let held = matches!(&self.held, Some((at, _)) if at == dir);
        if !held {
            self.held = None;
            let opened = match self.tree.open_dir(dir) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if let Err(e) = self.tree.create_dir_all(dir) {
                        return Err(self.failed(dir, e));
                    }
                    self.tree.open_dir(dir)
                }
                other => other,
            };
            match opened {
                Ok(handle) => self.held = Some((dir.to_string(), handle)),
                Err(e) if blocked(&e) => return Ok(None),
                Err(e) => return Err(self.failed(dir, e)),
            }
        }
        Ok(self.held.as_ref().map(|(_, handle)| handle))
    }

    /// Does `make` for the name of `rel` in its directory (made as needed).
    fn at(
        &mut self,
        rel: &str,
        make: impl FnOnce(&Tree, &str) -> io::Result<bool>,
    ) -> Result<Placed, FileError> {
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let made = match self.dir(dir)? {
            None => return Ok(Placed::Taken),
            Some(handle) => make(handle, name),
        };
        match made {
            Ok(true) => Ok(Placed::Written),
            Ok(false) => Ok(Placed::Taken),
            Err(e) if blocked(&e) => Ok(Placed::Taken),
            Err(e) => Err(self.failed(rel, e)),
        }
    }

    /// Writes blob `oid` of git mode `m` as the new file `rel` (a link for a link's mode,
    /// a directory for a submodule's).
    pub(crate) fn blob(
        &mut self,
        repo: &Repository,
        rel: &str,
        oid: Oid,
        m: u32,
    ) -> Result<Placed, FileError> {
        if m == mode::GITLINK {
            return match self.tree.create_dir_all(rel) {
                Ok(()) => Ok(Placed::Written),
                Err(e) => Err(self.failed(rel, e)),
            };
        }
        // Something there already (a second fill of a view holds most files): known by
        // one `fstatat` in the held directory, before the blob is read.
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        match self.dir(dir)? {
            None => return Ok(Placed::Taken),
            Some(handle) if matches!(handle.kind(name), Ok(Some(_))) => return Ok(Placed::Taken),
            Some(_) => {}
        }
        let blob = repo.find_blob(oid)?;
        let bytes = blob.content();
        if m == mode::LINK {
            self.at(rel, |dir, name| dir.create_link(bytes, name))
        } else {
            let exec = m == mode::EXEC;
            self.at(rel, |dir, name| dir.create_file(name, bytes, exec))
        }
    }

    /// An overlayfs whiteout at `rel`.
    pub(crate) fn whiteout(&mut self, rel: &str) -> Result<Placed, FileError> {
        self.at(rel, |dir, name| dir.create_whiteout(name))
    }
}

/// Opens the directory `root` (a path of plait's own) as a tree.
pub(crate) fn open(root: &Path) -> Result<Tree, FileError> {
    Tree::open(root).map_err(|source| FileError::Io {
        path: root.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::time::Instant;

    /// What writing files beneath a handle costs against writing them by path, as plait
    /// did before (`create_dir_all`, `fs::write`, `set_permissions`): a new tree of 20,000
    /// files in 400 directories, then the same files again where all are there (a second
    /// `materialize`). Prints; asserts nothing of time. `cargo test -p plait --lib
    /// files_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn files_cost() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path().join("repo")).unwrap();
        let oid = repo.blob(b"fn main() {}\n").unwrap();
        let paths: Vec<String> = (0..20_000)
            .map(|i| format!("src/m{}/d{}/f{i}.rs", i % 20, i % 400))
            .collect();
        let mut sorted = paths.clone();
        sorted.sort();
        let time = |f: &mut dyn FnMut()| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        };
        for round in 0..3 {
            let old = dir.path().join(format!("old-{round}"));
            let new = dir.path().join(format!("new-{round}"));
            fs::create_dir_all(&old).unwrap();
            fs::create_dir_all(&new).unwrap();
            let by_path = |root: &Path| {
                for p in &sorted {
                    let dest = root.join(p);
                    if fs::symlink_metadata(&dest).is_ok() {
                        continue;
                    }
                    fs::create_dir_all(dest.parent().unwrap()).unwrap();
                    let blob = repo.find_blob(oid).unwrap();
                    fs::write(&dest, blob.content()).unwrap();
                }
            };
            let beneath = |root: &Path| {
                let tree = Tree::open(root).unwrap();
                let mut writer = NewFiles::new(&tree);
                for p in &sorted {
                    writer.blob(&repo, p, oid, mode::FILE).unwrap();
                }
            };
            let (a, b) = (time(&mut || by_path(&old)), time(&mut || beneath(&new)));
            let (c, d) = (time(&mut || by_path(&old)), time(&mut || beneath(&new)));
            println!(
                "round {round}: new tree by path {a:.3}s, beneath {b:.3}s ({:.2}x); \
                 all there by path {c:.3}s, beneath {d:.3}s ({:.2}x)",
                b / a,
                d / c
            );
        }
    }
}
