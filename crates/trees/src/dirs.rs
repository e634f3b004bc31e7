//! The directories plait keeps between runs (the environment's base layers, the views'
//! base checkouts) and how they are held and removed: a `flock` of `<dir>.lock` shared
//! while a run uses one, taken exclusively to remove it, and a tree's removal that opens
//! up the directories overlayfs leaves without permissions. Both the environment and the
//! workspace's views keep such directories; this module sits below both and names
//! neither.

use std::fs;
use std::path::{Path, PathBuf};

/// Opens (or makes) the lock file `path` for a `flock`.
pub(crate) fn lock_file(path: &Path) -> Result<fs::File, String> {
    fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))
}

pub(crate) fn flock(file: &fs::File, how: libc::c_int) -> bool {
    use std::os::fd::AsRawFd as _;
    // SAFETY: flock on an open file this process owns.
    unsafe { libc::flock(file.as_raw_fd(), how) == 0 }
}

/// Removes the oldest directories under `dir` beyond `count` (with `keep`, never removed)
/// that no run holds (an exclusive `flock` of `<dir>.lock` taken at once): the kept base
/// layers, and the views' base checkouts.
pub(crate) fn prune_kept(dir: &Path, keep: &Path, count: usize) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut layers: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .filter(|(_, p)| p != keep)
        .collect();
    layers.sort();
    let excess = (layers.len() + 1).saturating_sub(count);
    for (_, dir) in layers.into_iter().take(excess) {
        let Ok(lock) = lock_file(&dir.with_extension("lock")) else {
            continue;
        };
        if flock(&lock, libc::LOCK_EX | libc::LOCK_NB) {
            remove_tree(&dir);
            let _ = fs::remove_file(dir.with_extension("lock"));
        }
    }
}

/// Removes every kept directory under `dir` no run holds (`plait clean --seed`: the base
/// layers, the views' base checkouts), and unfinished ones (`.staging-*`); returns how many
/// it removed of the first.
pub fn remove_all(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if entry.file_name().to_string_lossy().starts_with('.') {
            remove_tree(&path);
            continue;
        }
        let Ok(lock) = lock_file(&path.with_extension("lock")) else {
            continue;
        };
        if flock(&lock, libc::LOCK_EX | libc::LOCK_NB) {
            remove_tree(&path);
            let _ = fs::remove_file(path.with_extension("lock"));
            removed += 1;
        }
    }
    removed
}

/// Removes `dir` whole, opening up the directories overlayfs (or a task) leaves without
/// permissions; what cannot be removed stays.
pub fn remove_tree(dir: &Path) {
    let _ = remove(dir);
}

/// Removes `dir` whole; nothing there is no error. `dir` is a path of plait's own, but
/// what lies beneath it a task or a check may have written: everything is removed beneath
/// a handle of `dir`'s parent (`plait_core::beneath`), a link removed and never followed,
/// and a directory locked up opened up through its handle, never by name.
pub(crate) fn remove(dir: &Path) -> std::io::Result<()> {
    let Some(name) = dir.file_name() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: not a directory plait removes", dir.display()),
        ));
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match plait_core::beneath::Tree::open(parent) {
        Ok(tree) => tree.remove_all(name),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
