//! Layers written by plait: the files by which one commit differs from another written into
//! a directory that overlayfs lays over the base layer (a file for each path added or
//! changed, a whiteout for each path of the base removed), and beside it a git directory
//! whose `HEAD` is the commit and whose index is the base's with those paths changed, so
//! that git in a check (`git diff`, `git status`) sees the commit checked out. The cost
//! follows what changed, never the size of the tree.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use crate::dirs::remove_tree;
use plait_core::git::mode;

/// Why a layer could not be written: the path and what the file system or git said.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LayerError(pub String);

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LayerError + '_ {
    move |e| LayerError(format!("{}: {e}", path.display()))
}

fn git(e: git2::Error) -> LayerError {
    LayerError(e.message().to_string())
}

/// The paths by which `to` differs from `from`, each with its entry in `to` (`None`:
/// removed).
pub fn changes(
    repo: &Repository,
    from: Oid,
    to: Oid,
) -> Result<BTreeMap<String, plait_core::git::Entry>, LayerError> {
    let tree = |c: Oid| repo.find_commit(c).and_then(|c| c.tree()).map_err(git);
    plait_core::git::tree_changes(repo, &tree(from)?, &tree(to)?).map_err(git)
}

/// Writes `changes` into the upper layer `upper`, over a lower layer where a path exists
/// when `in_lower` says so: a changed file written whole, a removed one turned into a
/// whiteout where the lower holds it (else removed from the layer). Whatever else the layer
/// holds (build output) stays.
pub fn apply(
    repo: &Repository,
    upper: &Path,
    changes: &BTreeMap<String, plait_core::git::Entry>,
    in_lower: &dyn Fn(&str) -> bool,
) -> Result<(), LayerError> {
    for (path, entry) in changes {
        let dest = upper.join(path);
        clear(upper, &dest)?;
        match entry {
            Some((_, m)) if *m == mode::GITLINK => {
                fs::create_dir_all(&dest).map_err(io(&dest))?;
            }
            Some((oid, m)) => write(repo, &dest, *oid, *m)?,
            None if in_lower(path) => whiteout(&dest)?,
            None => {}
        }
    }
    Ok(())
}

/// Makes way for a file at `dest`: whatever stands there (a file, a whiteout, a directory
/// of build output) goes, and a whiteout or file standing where one of its parents should
/// be goes too.
fn clear(upper: &Path, dest: &Path) -> Result<(), LayerError> {
    let mut parent = dest.parent();
    while let Some(dir) = parent {
        if dir == upper || !dir.starts_with(upper) {
            break;
        }
        if let Ok(meta) = fs::symlink_metadata(dir) {
            if !meta.is_dir() {
                fs::remove_file(dir).map_err(io(dir))?;
            }
        }
        parent = dir.parent();
    }
    match fs::symlink_metadata(dest) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(dest).map_err(io(dest)),
        Ok(_) => fs::remove_file(dest).map_err(io(dest)),
        Err(_) => Ok(()),
    }
}

fn write(repo: &Repository, dest: &Path, oid: Oid, m: u32) -> Result<(), LayerError> {
    if let Some(dir) = dest.parent() {
        fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let blob = repo.find_blob(oid).map_err(git)?;
    if m == mode::LINK {
        let target = String::from_utf8_lossy(blob.content()).into_owned();
        return std::os::unix::fs::symlink(target, dest).map_err(io(dest));
    }
    fs::write(dest, blob.content()).map_err(io(dest))?;
    if m == mode::EXEC {
        fs::set_permissions(dest, fs::Permissions::from_mode(0o755)).map_err(io(dest))?;
    }
    Ok(())
}

/// An overlayfs whiteout at `dest`: a character device 0/0, which Linux lets any user make
/// since 5.8.
pub fn whiteout(dest: &Path) -> Result<(), LayerError> {
    if let Some(dir) = dest.parent() {
        fs::create_dir_all(dir).map_err(io(dir))?;
    }
    plait_sandbox::sandbox::whiteout(dest).map_err(io(dest))
}

/// A git directory at `admin` for a checkout of `commit` whose files are the base layer's
/// with `changes`: `HEAD` detached at `commit`, the repository's objects and refs through
/// `commondir`, and `index` (the base layer's, `base_index`) with those paths changed.
pub fn git_dir(
    repo: &Repository,
    admin: &Path,
    commit: Oid,
    base_index: &Path,
    changes: &BTreeMap<String, plait_core::git::Entry>,
) -> Result<(), LayerError> {
    fs::create_dir_all(admin).map_err(io(admin))?;
    let head = admin.join("HEAD");
    fs::write(&head, format!("{commit}\n")).map_err(io(&head))?;
    let common = admin.join("commondir");
    fs::write(&common, format!("{}\n", repo.commondir().display())).map_err(io(&common))?;
    let index_path = admin.join("index");
    fs::copy(base_index, &index_path).map_err(io(&index_path))?;
    if changes.is_empty() || patch_with_git(repo, &index_path, changes) {
        return Ok(());
    }
    // Without the git CLI, libgit2 does the same (it reads and writes the index slower).
    fs::copy(base_index, &index_path).map_err(io(&index_path))?;
    let mut index = git2::Index::open(&index_path).map_err(git)?;
    for (path, entry) in changes {
        match entry {
            Some((oid, m)) => index.add(&entry_for(path, *oid, *m)).map_err(git)?,
            None => {
                let _ = index.remove_path(Path::new(path));
            }
        }
    }
    index.write().map_err(git)
}

/// Changes the entries of `changes` in the index at `index` with git's own engine (`git
/// update-index -z --index-info`), which rewrites a large index in a fraction of libgit2's
/// time; whether it did.
fn patch_with_git(
    repo: &Repository,
    index: &Path,
    changes: &BTreeMap<String, plait_core::git::Entry>,
) -> bool {
    use std::io::Write as _;
    let mut input = Vec::new();
    for (path, entry) in changes {
        // Mode 0 removes the path.
        let (m, oid) = entry.map_or((0, "0".repeat(40)), |(oid, m)| (m, oid.to_string()));
        let _ = write!(input, "{m:o} {oid}\t{path}\0");
    }
    let spawned = plait_core::git::git_command(repo.commondir())
        .arg("--git-dir")
        .arg(repo.commondir())
        .args(["update-index", "-z", "--index-info"])
        .env("GIT_INDEX_FILE", index)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = spawned else {
        return false;
    };
    let written = child
        .stdin
        .take()
        .is_some_and(|mut stdin| stdin.write_all(&input).is_ok());
    child.wait().is_ok_and(|status| status.success()) && written
}

/// An index entry with no stat data: git compares such a file by content.
fn entry_for(path: &str, oid: Oid, m: u32) -> git2::IndexEntry {
    let zero = git2::IndexTime::new(0, 0);
    git2::IndexEntry {
        ctime: zero,
        mtime: zero,
        dev: 0,
        ino: 0,
        mode: m,
        uid: 0,
        gid: 0,
        file_size: 0,
        id: oid,
        flags: (path.len().min(0xfff)) as u16,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// The index of the base layer at `tree` (a checkout of `commit` made by plait), with the
/// stat data of its files so that git finds them unchanged without reading them.
pub(crate) fn base_index(
    repo: &Repository,
    tree: &Path,
    commit: Oid,
    out: &Path,
) -> Result<(), LayerError> {
    use std::os::unix::fs::MetadataExt as _;
    let tree_obj = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(git)?;
    let _ = fs::remove_file(out);
    let mut index = git2::Index::open(out).map_err(git)?;
    index.read_tree(&tree_obj).map_err(git)?;
    let entries: Vec<git2::IndexEntry> = index.iter().collect();
    for mut entry in entries {
        let path = tree.join(String::from_utf8_lossy(&entry.path).as_ref());
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        entry.ctime = git2::IndexTime::new(meta.ctime() as i32, meta.ctime_nsec() as u32);
        entry.mtime = git2::IndexTime::new(meta.mtime() as i32, meta.mtime_nsec() as u32);
        entry.dev = meta.dev() as u32;
        entry.ino = meta.ino() as u32;
        entry.uid = meta.uid();
        entry.gid = meta.gid();
        entry.file_size = meta.size() as u32;
        index.add(&entry).map_err(git)?;
    }
    index.write().map_err(git)
}

/// Where a layer directory keeps its parts: `upper` (its files), `work` (overlayfs's),
/// `git` (its git directory).
#[derive(Debug, Clone)]
pub struct LayerDir(pub PathBuf);

impl LayerDir {
    /// Its files: the layer's upper directory.
    pub fn upper(&self) -> PathBuf {
        self.0.join("upper")
    }

    /// overlayfs's work directory for it.
    pub(crate) fn work(&self) -> PathBuf {
        self.0.join("work")
    }

    /// Its git directory.
    pub fn git(&self) -> PathBuf {
        self.0.join("git")
    }

    /// The layer of the `i`th directory `[setup] include` shares.
    pub fn include(&self, i: usize) -> plait_sandbox::sandbox::Layer {
        plait_sandbox::sandbox::Layer {
            upper: self.0.join(format!("include-{i}/upper")),
            work: self.0.join(format!("include-{i}/work")),
        }
    }

    /// Makes its directories.
    pub(crate) fn make(&self, includes: usize) -> Result<(), LayerError> {
        let mut dirs = vec![self.upper(), self.work()];
        for i in 0..includes {
            let layer = self.include(i);
            dirs.extend([layer.upper, layer.work]);
        }
        for dir in dirs {
            fs::create_dir_all(&dir).map_err(io(&dir))?;
        }
        Ok(())
    }

    /// Removes it, work directories the kernel left without permissions included.
    pub fn remove(&self) {
        remove_tree(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with commits `from` (a.txt, gone.txt, dir/b.txt) and `to` (a.txt
    /// changed, gone.txt removed, dir/c.txt added).
    fn repo() -> (tempfile::TempDir, Repository, Oid, Oid) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let commit = |files: &[(&str, &str)], parent: Option<Oid>| {
            let mut index = git2::Index::new().unwrap();
            for (path, text) in files {
                let blob = repo.blob(text.as_bytes()).unwrap();
                index.add(&entry_for(path, blob, mode::FILE)).unwrap();
            }
            let tree = index.write_tree_to(&repo).unwrap();
            let tree = repo.find_tree(tree).unwrap();
            let parents: Vec<git2::Commit> = parent
                .map(|p| repo.find_commit(p).unwrap())
                .into_iter()
                .collect();
            let parents: Vec<&git2::Commit> = parents.iter().collect();
            repo.commit(None, &sig, &sig, "c", &tree, &parents).unwrap()
        };
        let from = commit(
            &[("a.txt", "a\n"), ("gone.txt", "g\n"), ("dir/b.txt", "b\n")],
            None,
        );
        let to = commit(
            &[("a.txt", "A\n"), ("dir/b.txt", "b\n"), ("dir/c.txt", "c\n")],
            Some(from),
        );
        (dir, repo, from, to)
    }

    #[test]
    fn a_layer_holds_what_changed_and_whiteouts_for_what_went() {
        use std::os::unix::fs::FileTypeExt as _;
        let (_dir, repo, from, to) = repo();
        let upper = tempfile::tempdir().unwrap();
        // Build output an earlier check left stays.
        fs::create_dir_all(upper.path().join("target")).unwrap();
        fs::write(upper.path().join("target/out"), "o").unwrap();
        let changed = changes(&repo, from, to).unwrap();
        assert_eq!(changed.len(), 3, "{changed:?}");
        apply(&repo, upper.path(), &changed, &|p| {
            p == "gone.txt" || p == "a.txt"
        })
        .unwrap();
        assert_eq!(
            fs::read_to_string(upper.path().join("a.txt")).unwrap(),
            "A\n"
        );
        assert_eq!(
            fs::read_to_string(upper.path().join("dir/c.txt")).unwrap(),
            "c\n"
        );
        assert!(!upper.path().join("dir/b.txt").exists());
        let gone = fs::symlink_metadata(upper.path().join("gone.txt")).unwrap();
        assert!(gone.file_type().is_char_device());
        assert!(upper.path().join("target/out").exists());

        // Back to `from`: the whiteout makes way for the file again.
        let back = changes(&repo, to, from).unwrap();
        apply(&repo, upper.path(), &back, &|p| {
            p == "gone.txt" || p == "a.txt"
        })
        .unwrap();
        assert_eq!(
            fs::read_to_string(upper.path().join("gone.txt")).unwrap(),
            "g\n"
        );
        // dir/c.txt is not in the lower layer: removed, not whited out.
        assert!(fs::symlink_metadata(upper.path().join("dir/c.txt")).is_err());
    }

    #[test]
    fn a_layers_git_directory_is_at_its_commit_with_the_changed_paths_indexed() {
        let (dir, repo, from, to) = repo();
        let tree = tempfile::tempdir().unwrap();
        for (path, text) in [("a.txt", "a\n"), ("gone.txt", "g\n"), ("dir/b.txt", "b\n")] {
            let file = tree.path().join(path);
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(file, text).unwrap();
        }
        let indexed = dir.path().join("base-index");
        base_index(&repo, tree.path(), from, &indexed).unwrap();
        let admin = dir.path().join("layer-git");
        let changed = changes(&repo, from, to).unwrap();
        // git's own engine does it where there is a git CLI.
        let copy = dir.path().join("copy-index");
        fs::copy(&indexed, &copy).unwrap();
        assert!(patch_with_git(&repo, &copy, &changed));
        git_dir(&repo, &admin, to, &indexed, &changed).unwrap();
        assert_eq!(
            fs::read_to_string(admin.join("HEAD")).unwrap(),
            format!("{to}\n")
        );
        let index = git2::Index::open(&admin.join("index")).unwrap();
        let paths: Vec<String> = index
            .iter()
            .map(|e| String::from_utf8(e.path).unwrap())
            .collect();
        assert_eq!(paths, ["a.txt", "dir/b.txt", "dir/c.txt"]);
        let commit_tree = repo.find_commit(to).unwrap().tree().unwrap();
        for entry in index.iter() {
            let path = String::from_utf8(entry.path.clone()).unwrap();
            let in_tree = commit_tree.get_path(Path::new(&path)).unwrap();
            assert_eq!(entry.id, in_tree.id(), "{path}");
        }
    }
}
