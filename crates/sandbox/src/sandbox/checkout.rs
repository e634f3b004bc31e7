//! The user's checkout shown as the tree being judged: inside each process's mount
//! namespace, the view (a task's, a check's layer, the base layer for `[setup]`) is mounted
//! at the checkout's path too, so that what names the checkout by its absolute path (an
//! editable install's `.pth`, a venv's `pyvenv.cfg` and its scripts' `#!` lines, a
//! `tsconfig` path) reaches the tree the process works on, never the user's working copy.
//!
//! The repository's git directory usually lies in the checkout (`<checkout>/.git`), and
//! every view's git names it there (a worktree's `gitdir`, a check's `commondir`), while
//! the view's own `.git` is a file. So the checkout's path shows a small read-only tmpfs
//! (mounted on a directory plait made, then moved there) holding the real git directory
//! bound at `.git` and each entry of the view's root bound at its name (a link made again
//! as it is): writes through them reach the view, as writes at its own paths do; a new
//! name at the checkout's root is refused. Landlock's rules go on those entries, opened
//! with no link followed, never on the checkout's root, whose rule would cover the git
//! directory beneath it (its hooks, plait's store). An entry made at the view's root after
//! a process started is not at the checkout for it.
//!
//! Where no mount namespace can be had there is nothing to mount: paths naming the checkout
//! reach the user's working copy, as plait says where it describes the view.

use std::ffi::{CString, OsString};
use std::io;
use std::path::{Path, PathBuf};

use super::ffi::{add_rule_fd, c_path, c_str};

/// How the checkout is shown in one sandbox's views.
#[derive(Debug)]
pub(crate) struct Checkout {
    /// The user's checkout (the repository's working directory).
    pub(crate) path: PathBuf,
    /// Its git directory, when it is a directory at `<checkout>/.git`.
    pub(crate) git: Option<PathBuf>,
    /// An empty directory the tmpfs is mounted on in each process before it is moved onto
    /// the checkout, removed with the sandbox.
    mask: tempfile::TempDir,
}

impl Checkout {
    /// The checkout at `path` as a view's processes are to see it, the mask made under
    /// `temp_root`; `None` when it cannot be shown: not a directory, or the view is itself
    /// mounted in it (at one of `mounted_at`, its target and aliases), where the tmpfs
    /// would hide it. Its layers may
    /// lie in it (plait's store under the git directory): they are mounted before.
    pub(crate) fn for_view<'a>(
        path: &Path,
        mut mounted_at: impl Iterator<Item = &'a Path>,
        temp_root: &Path,
    ) -> Option<Checkout> {
        if !path.is_absolute() || !path.is_dir() {
            return None;
        }
        let hidden = mounted_at.any(|p| p.starts_with(path) || path.starts_with(p));
        if hidden {
            return None;
        }
        let dot_git = path.join(".git");
        let git = std::fs::symlink_metadata(&dot_git)
            .is_ok_and(|m| m.is_dir())
            .then_some(dot_git);
        let mask = make_mask(temp_root).ok()?;
        Some(Checkout {
            path: path.to_path_buf(),
            git,
            mask,
        })
    }

    /// The paths at the checkout its processes may write through: the view's root
    /// `names` as they are now (the git directory's are not among them).
    pub(crate) fn writable(&self, names: Vec<OsString>) -> Vec<PathBuf> {
        names.into_iter().map(|name| self.path.join(name)).collect()
    }

    /// Where the tmpfs is made ready.
    pub(crate) fn mask(&self) -> &Path {
        self.mask.path()
    }
}

/// An empty directory no one is to write (mode 0555), for a mount point.
fn make_mask(temp_root: &Path) -> io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt as _;
    let mask = tempfile::Builder::new()
        .prefix("plait-checkout-")
        .tempdir_in(temp_root)?;
    std::fs::set_permissions(mask.path(), std::fs::Permissions::from_mode(0o555))?;
    Ok(mask)
}

impl Drop for Checkout {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt as _;
        // Writable again, so that the temporary directory can be removed.
        let _ = std::fs::set_permissions(self.mask.path(), std::fs::Permissions::from_mode(0o755));
    }
}

/// What the child does to show a view at the checkout's path, prepared before the fork:
/// a tmpfs mounted on the mask, the git directory bound at its `.git`, a mount point for
/// each entry at the view's root (a directory or a file; a link made again as it is), the
/// tmpfs made read-only, each entry bound from the view, and the whole moved onto the
/// checkout. Writes through an entry reach the view, as writes at its own path do; a new
/// name at the checkout's root is refused (read-only).
pub(crate) struct Shown {
    mask: CString,
    tmpfs: CString,
    options: CString,
    checkout: CString,
    /// The repository's git directory and where it is bound in the mask.
    git: Option<(CString, CString)>,
    /// Each entry: in the view, in the mask, at the checkout (for its rule), and whether it
    /// was bound (written by the child).
    entries: Vec<(CString, CString, CString)>,
    bound: Vec<bool>,
    /// The device and inode each entry was found as (written by the child): its bind is
    /// taken down when it shows anything else (a link put at its name meanwhile).
    found: Vec<(u64, u64)>,
    /// A link's target, read into it (`PATH_MAX`, and a NUL).
    link: Vec<u8>,
    /// Whether the checkout shows the view (written by the child).
    made: bool,
}

impl Checkout {
    /// The child's steps to show the view mounted at `target`, whose root holds `names`,
    /// at the checkout.
    pub(crate) fn prepare(&self, target: &Path, names: Vec<OsString>) -> io::Result<Shown> {
        let mask = self.mask();
        let mut entries = Vec::new();
        for name in names {
            entries.push((
                c_path(&target.join(&name))?,
                c_path(&mask.join(&name))?,
                c_path(&self.path.join(&name))?,
            ));
        }
        let git = match &self.git {
            Some(git) => Some((c_path(git)?, c_path(&mask.join(".git"))?)),
            None => None,
        };
        Ok(Shown {
            mask: c_path(mask)?,
            tmpfs: c_str("tmpfs"),
            options: c_str("mode=755,size=1m"),
            checkout: c_path(&self.path)?,
            git,
            bound: vec![false; entries.len()],
            found: vec![(0, 0); entries.len()],
            entries,
            link: vec![0; libc::PATH_MAX as usize + 1],
            made: false,
        })
    }
}

impl Shown {
    /// The entries to give rules, once the checkout shows the view: those bound.
    pub(crate) fn rules(&self) -> impl Iterator<Item = &CString> {
        self.entries
            .iter()
            .zip(&self.bound)
            .filter(|(_, bound)| self.made && **bound)
            .map(|((_, _, at), _)| at)
    }

    /// In the child, after the view's mounts: shows the view at the checkout, or leaves
    /// the checkout as it is when a step fails.
    ///
    /// # Safety
    /// Between fork (or clone) and exec only: plain system calls, no allocation.
    pub(crate) unsafe fn make(&mut self) {
        let (null, none) = (
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
        );
        if libc::mount(
            self.tmpfs.as_ptr(),
            self.mask.as_ptr(),
            self.tmpfs.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            self.options.as_ptr().cast(),
        ) != 0
        {
            return;
        }
        let undo = |mask: &CString| {
            libc::umount2(mask.as_ptr(), libc::MNT_DETACH);
        };
        if let Some((git, at)) = &self.git {
            if libc::mkdir(at.as_ptr(), 0o755) != 0
                || libc::mount(
                    git.as_ptr(),
                    at.as_ptr(),
                    null,
                    libc::MS_BIND | libc::MS_REC,
                    none,
                ) != 0
            {
                return undo(&self.mask);
            }
        }
        for (i, (from, at, _)) in self.entries.iter().enumerate() {
            self.bound[i] = place(from, at, &mut self.link, &mut self.found[i]);
        }
        let read_only = libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
        if libc::mount(null, self.mask.as_ptr(), null, read_only, none) != 0 {
            return undo(&self.mask);
        }
        for (i, (from, at, _)) in self.entries.iter().enumerate() {
            if self.bound[i] {
                let flags = libc::MS_BIND | libc::MS_REC;
                self.bound[i] = libc::mount(from.as_ptr(), at.as_ptr(), null, flags, none) == 0
                    && shows(at, self.found[i]);
            }
        }
        if libc::mount(
            self.mask.as_ptr(),
            self.checkout.as_ptr(),
            null,
            libc::MS_MOVE,
            none,
        ) != 0
        {
            return undo(&self.mask);
        }
        self.made = true;
    }
}

/// Whether the bind at `at` shows the entry found as `(dev, ino)`; if not, it is taken
/// down (mount(2) follows a link put at the entry's name since it was found).
///
/// # Safety
/// Between fork (or clone) and exec only: plain system calls, no allocation.
unsafe fn shows(at: &CString, (dev, ino): (u64, u64)) -> bool {
    let mut st: libc::stat = std::mem::zeroed();
    if libc::lstat(at.as_ptr(), &mut st) == 0 && st.st_dev == dev && st.st_ino == ino {
        return true;
    }
    libc::umount2(at.as_ptr(), libc::MNT_DETACH);
    false
}

/// A mount point at `at` for the view's entry `from`, as it is (no link followed): a
/// directory or an empty file, to bind it on (true, its device and inode in `found`); a
/// link made again, its target read into `link` (false).
///
/// # Safety
/// Between fork (or clone) and exec only: plain system calls, no allocation.
unsafe fn place(from: &CString, at: &CString, link: &mut [u8], found: &mut (u64, u64)) -> bool {
    let mut st: libc::stat = std::mem::zeroed();
    if libc::lstat(from.as_ptr(), &mut st) != 0 {
        return false;
    }
    *found = (st.st_dev, st.st_ino);
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => libc::mkdir(at.as_ptr(), 0o755) == 0,
        libc::S_IFREG => {
            let fd = libc::open(
                at.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o644,
            );
            fd >= 0 && libc::close(fd) == 0
        }
        libc::S_IFLNK => {
            let room = link.len() - 1;
            let n = libc::readlink(from.as_ptr(), link.as_mut_ptr().cast(), room);
            if n >= 0 {
                link[n as usize] = 0;
                libc::symlink(link.as_ptr().cast(), at.as_ptr());
            }
            false
        }
        _ => false,
    }
}

/// Landlock's rights that a rule on a file (not a directory) may hold: execute, write,
/// read, truncate, ioctl on a device.
#[cfg(target_os = "linux")]
const FILE_RIGHTS: u64 = 1 | 2 | 4 | (1 << 14) | (1 << 15);

/// A rule on the entry at `path`, opened with no link followed (a link an agent put at a
/// checkout's root gives nothing): a directory's with `access`, a regular file's with its
/// file rights, anything else none; an entry that is gone, none. Async-signal-safe.
#[cfg(target_os = "linux")]
pub(super) unsafe fn add_entry_rule(
    ruleset: std::os::fd::RawFd,
    path: &std::ffi::CStr,
    access: u64,
) -> io::Result<()> {
    let fd = libc::open(
        path.as_ptr(),
        libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
    );
    if fd < 0 {
        return Ok(());
    }
    let mut st: libc::stat = std::mem::zeroed();
    let access = if libc::fstat(fd, &mut st) != 0 {
        0
    } else {
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => access,
            libc::S_IFREG => access & FILE_RIGHTS,
            _ => 0,
        }
    };
    let added = if access == 0 {
        Ok(())
    } else {
        add_rule_fd(ruleset, fd, access)
    };
    libc::close(fd);
    added
}
