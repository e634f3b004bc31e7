//! Layers written by plait: the files by which one commit differs from another written into
//! a directory that overlayfs lays over the base layer (a file for each path added or
//! changed, a whiteout for each path of the base removed), and beside it a git directory
//! whose `HEAD` is the commit and whose index is the base's with those paths changed, so
//! that git in a check (`git diff`, `git status`) sees the commit checked out. The cost
//! follows what changed, never the size of the tree.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use crate::dirs::remove_tree;
use crate::workspace::files::{NewFiles, Placed};
use plait_core::beneath::{Kind, Tree};
#[cfg(test)]
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
/// holds (build output) stays. A check writes its layer, links included: every name is
/// cleared and written beneath the layer's handle, and nothing a check put there is
/// followed.
pub fn apply(
    repo: &Repository,
    upper: &Tree,
    changes: &BTreeMap<String, plait_core::git::Entry>,
    in_lower: &dyn Fn(&str) -> bool,
) -> Result<(), LayerError> {
    let mut writer = NewFiles::new(upper);
    for (path, entry) in changes {
        clear(upper, path)?;
        let placed = match entry {
            Some((oid, m)) => writer.blob(repo, path, *oid, *m),
            None if in_lower(path) => writer.whiteout(path),
            None => continue,
        };
        match placed.map_err(|e| LayerError(e.to_string()))? {
            Placed::Written => {}
            Placed::Taken => {
                return Err(LayerError(format!(
                    "{}: something was put there while plait wrote the layer",
                    upper.root().join(path).display()
                )))
            }
        }
    }
    Ok(())
}

/// Makes way for a file at `path`: whatever stands there (a file, a whiteout, a link, a
/// directory of build output) goes, and a whiteout, file or link standing where one of
/// its directories should be goes too. Each name is judged and removed beneath `upper`'s
/// handle; a link is removed, never followed.
fn clear(upper: &Tree, path: &str) -> Result<(), LayerError> {
    let failed =
        |e: std::io::Error| LayerError(format!("{}: {e}", upper.root().join(path).display()));
    for (end, _) in path.match_indices('/') {
        let dir = &path[..end];
        match upper.kind(dir).map_err(failed)? {
            Some(Kind::Dir) => {}
            // Nothing beneath it can stand.
            Some(_) => {
                upper.remove(dir).map_err(failed)?;
                return Ok(());
            }
            None => return Ok(()),
        }
    }
    match upper.kind(path).map_err(failed)? {
        Some(Kind::Dir) => upper.remove_all(path).map_err(failed),
        Some(_) => upper.remove(path).map_err(failed),
        None => Ok(()),
    }
}

/// Writes the git directory `admin` (new, made by plait) of a checkout of `commit` whose
/// files are the base layer's with `changes`: `HEAD` detached at `commit`, the
/// repository's objects and refs through `commondir`, and `index` (the base layer's,
/// `base_index`, a file of plait's own) with those paths changed. Every file is written
/// beneath `admin`'s handle, replacing whatever stands at its name.
pub fn git_dir(
    repo: &Repository,
    admin: &Tree,
    commit: Oid,
    base_index: &Path,
    changes: &BTreeMap<String, plait_core::git::Entry>,
) -> Result<(), LayerError> {
    let at = |name: &str| {
        let path = admin.root().join(name);
        move |e: std::io::Error| LayerError(format!("{}: {e}", path.display()))
    };
    admin
        .write("HEAD", format!("{commit}\n").as_bytes(), false)
        .map_err(at("HEAD"))?;
    let common = format!("{}\n", repo.commondir().display());
    admin
        .write("commondir", common.as_bytes(), false)
        .map_err(at("commondir"))?;
    let base = fs::read(base_index).map_err(io(base_index))?;
    admin.write("index", &base, false).map_err(at("index"))?;
    let index_path = admin.root().join("index");
    if changes.is_empty() || patch_with_git(repo, &index_path, changes) {
        return Ok(());
    }
    // Without the git CLI, libgit2 does the same (it reads and writes the index slower).
    admin.write("index", &base, false).map_err(at("index"))?;
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
/// `git-<n>` (the git directory of its latest check), `held` (what it holds). A check
/// writes its files (through the overlay) and its git directory, nothing else here; plait
/// reads nothing back from either, and writes them only beneath their handles.
#[derive(Debug, Clone)]
pub struct LayerDir(pub PathBuf);

/// The longest `held` note plait wrote: two object ids, a space and a newline.
const HELD_MAX: usize = 2 * 64 + 2;

impl LayerDir {
    /// Its files: the layer's upper directory.
    pub fn upper(&self) -> PathBuf {
        self.0.join("upper")
    }

    /// overlayfs's work directory for it.
    pub(crate) fn work(&self) -> PathBuf {
        self.0.join("work")
    }

    /// The layer of the `i`th directory `[setup] include` shares.
    pub fn include(&self, i: usize) -> plait_sandbox::sandbox::Layer {
        plait_sandbox::sandbox::Layer {
            upper: self.0.join(format!("include-{i}/upper")),
            work: self.0.join(format!("include-{i}/work")),
        }
    }

    /// The layer's own directory held open.
    fn open(&self) -> Result<Tree, LayerError> {
        Tree::open(&self.0).map_err(io(&self.0))
    }

    /// Makes its directories.
    pub fn make(&self, includes: usize) -> Result<(), LayerError> {
        fs::create_dir_all(&self.0).map_err(io(&self.0))?;
        let root = self.open()?;
        let mut dirs = vec!["upper".to_string(), "work".to_string()];
        for i in 0..includes {
            dirs.extend([format!("include-{i}/upper"), format!("include-{i}/work")]);
        }
        for dir in dirs {
            root.create_dir_all(&dir).map_err(io(&self.0.join(&dir)))?;
        }
        Ok(())
    }

    /// Its upper directory held open.
    pub fn open_upper(&self) -> Result<Tree, LayerError> {
        self.open()?.open_dir("upper").map_err(io(&self.upper()))
    }

    /// A new git directory for the layer's next check, `git-<n>` with `n` above every
    /// earlier one's, made now by plait, and the earlier ones removed: a check writes the
    /// git directory it is given (`git status` saves its index there), so plait never
    /// writes one a check was given again, nor reads one back. What it writes into the new
    /// one before the check starts no process of a task's can have touched: only plait
    /// writes the layer's own directory.
    pub fn new_git_dir(&self) -> Result<Tree, LayerError> {
        let root = self.open()?;
        let earlier: Vec<String> = root
            .list("")
            .map_err(io(&self.0))?
            .into_iter()
            .filter_map(|(name, _)| name.into_string().ok())
            .filter(|name| name == "git" || name.starts_with("git-"))
            .collect();
        let next = earlier
            .iter()
            .filter_map(|name| name.strip_prefix("git-")?.parse::<u64>().ok())
            .max()
            .map_or(1, |n| n + 1);
        let name = format!("git-{next}");
        root.create_dir_all(&name)
            .map_err(io(&self.0.join(&name)))?;
        let made = root.open_dir(&name).map_err(io(&self.0.join(&name)))?;
        for old in earlier {
            // One a process a check left behind still writes goes with the layer.
            let _ = root.remove_all(&old);
        }
        Ok(made)
    }

    /// The commit the layer holds over `base`, as plait noted it (`None`: no note, or one
    /// over another base, or not one plait wrote).
    pub fn held(&self, base: Oid) -> Option<Oid> {
        let bytes = self.open().ok()?.read_file("held").ok()?;
        if bytes.len() > HELD_MAX {
            return None;
        }
        let text = std::str::from_utf8(&bytes).ok()?;
        let (over, at) = text.strip_suffix('\n')?.split_once(' ')?;
        (Oid::from_str(over).ok()? == base).then_some(Oid::from_str(at).ok()?)
    }

    /// Notes that the layer holds `commit` over `base`.
    pub fn note_held(&self, base: Oid, commit: Oid) -> Result<(), LayerError> {
        let note = format!("{base} {commit}\n");
        self.open()?
            .write("held", note.as_bytes(), false)
            .map_err(io(&self.0.join("held")))
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
        let handle = Tree::open(upper.path()).unwrap();
        apply(&repo, &handle, &changed, &|p| {
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
        apply(&repo, &handle, &back, &|p| p == "gone.txt" || p == "a.txt").unwrap();
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
        let layer = LayerDir(dir.path().join("layer"));
        layer.make(0).unwrap();
        let changed = changes(&repo, from, to).unwrap();
        // git's own engine does it where there is a git CLI.
        let copy = dir.path().join("copy-index");
        fs::copy(&indexed, &copy).unwrap();
        assert!(patch_with_git(&repo, &copy, &changed));
        let made = layer.new_git_dir().unwrap();
        let admin = made.root().to_path_buf();
        git_dir(&repo, &made, to, &indexed, &changed).unwrap();
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

    /// What a check planted in its layer (a link where a directory of a changed path
    /// stands, links as its git directory's files) is data to plait: it is removed or
    /// replaced, and nothing outside the layer is written, created or removed.
    #[test]
    fn links_a_check_planted_in_its_layer_lead_nowhere() {
        let (dir, repo, from, to) = repo();
        let home = dir.path().join("home");
        fs::create_dir_all(home.join("dir/c.txt")).unwrap();
        fs::write(home.join("victim"), "mine\n").unwrap();
        fs::write(home.join("dir/a.txt"), "theirs\n").unwrap();
        let layer = LayerDir(dir.path().join("layer"));
        layer.make(0).unwrap();
        let upper = layer.upper();
        // `dir` a link to the home; `a.txt` a link to a file there.
        std::os::unix::fs::symlink(home.join("dir"), upper.join("dir")).unwrap();
        std::os::unix::fs::symlink(home.join("victim"), upper.join("a.txt")).unwrap();
        let changed = changes(&repo, from, to).unwrap();
        apply(&repo, &layer.open_upper().unwrap(), &changed, &|_| false).unwrap();
        assert_eq!(fs::read_to_string(upper.join("a.txt")).unwrap(), "A\n");
        assert_eq!(fs::read_to_string(upper.join("dir/c.txt")).unwrap(), "c\n");
        assert!(
            home.join("dir/c.txt").is_dir(),
            "nothing removed behind the link"
        );
        assert_eq!(fs::read_to_string(home.join("victim")).unwrap(), "mine\n");
        assert_eq!(
            fs::read_to_string(home.join("dir/a.txt")).unwrap(),
            "theirs\n"
        );

        // A git directory a check was given is never written again: the next is new.
        let first = layer.new_git_dir().unwrap().root().to_path_buf();
        fs::remove_file(first.join("HEAD")).ok();
        std::os::unix::fs::symlink(home.join("victim"), first.join("HEAD")).unwrap();
        std::os::unix::fs::symlink(home.join("new"), first.join("commondir")).unwrap();
        let index = dir.path().join("base-index");
        fs::write(&index, b"").unwrap();
        let next = layer.new_git_dir().unwrap();
        assert_ne!(next.root(), first.as_path());
        assert!(!first.exists(), "the earlier one is removed");
        git_dir(&repo, &next, to, &index, &Default::default()).unwrap();
        assert_eq!(fs::read_to_string(home.join("victim")).unwrap(), "mine\n");
        assert!(!home.join("new").exists());
        assert_eq!(
            fs::read_to_string(next.root().join("HEAD")).unwrap(),
            format!("{to}\n")
        );
        // Even written over planted links, git_dir replaces them, never follows them.
        std::os::unix::fs::symlink(home.join("victim"), next.root().join("HEAD.x")).unwrap();
        fs::remove_file(next.root().join("HEAD")).unwrap();
        fs::rename(next.root().join("HEAD.x"), next.root().join("HEAD")).unwrap();
        git_dir(&repo, &next, to, &index, &Default::default()).unwrap();
        assert_eq!(fs::read_to_string(home.join("victim")).unwrap(), "mine\n");

        // The `held` note: only what plait wrote is believed.
        assert_eq!(layer.held(from), None);
        layer.note_held(from, to).unwrap();
        assert_eq!(layer.held(from), Some(to));
        assert_eq!(layer.held(to), None);
        fs::remove_file(layer.0.join("held")).unwrap();
        std::os::unix::fs::symlink(home.join("victim"), layer.0.join("held")).unwrap();
        assert_eq!(layer.held(from), None);
        layer.remove();
        assert!(!layer.0.exists());
        assert_eq!(fs::read_to_string(home.join("victim")).unwrap(), "mine\n");
    }
}
