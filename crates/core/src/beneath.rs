//! Files beneath a directory handle, with no symlink followed: how plait touches every tree a
//! task or a check could have written (a worktree, a view's layer, a check's checkout and its
//! git directory, scratch). plait runs with all of the user's rights, and a process a task
//! left behind can swap any name in such a tree for a symlink at any moment; a check of a
//! name followed by an act on the same name is a race it can win. So nothing here acts on a
//! path twice: a [`Tree`] holds its root open, every name is resolved beneath that handle
//! with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` (a component-by-component walk with
//! `O_NOFOLLOW` where the kernel predates it), and what was opened is judged by `fstat` of
//! the descriptor, never by the name. A symlink inside the tree is data — read with
//! `readlinkat`, written with `symlinkat`, removed with `unlinkat` — and never a way through.
//!
//! Writes replace a file by a new one renamed over it, so a hard link planted in the tree
//! never carries plait's bytes to the file it shares. Reads open with `O_NONBLOCK`, so a FIFO
//! or a device planted in the tree is seen for what it is, not waited on.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

/// A directory held open; every path given to it is resolved beneath it, following no link.
#[derive(Debug)]
pub struct Tree {
    fd: OwnedFd,
    /// Where the tree was opened, for messages and for child processes only: plait never
    /// resolves a name through it.
    root: PathBuf,
}

/// What a name in a tree is, as `lstat` sees it (a link is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file; `executable` when its owner may execute it.
    File {
        /// Whether the owner's execute bit is set.
        executable: bool,
    },
    /// A symbolic link.
    Link,
    /// A directory.
    Dir,
    /// Anything else: a FIFO, a socket, a device (an overlay's whiteout among them).
    Other {
        /// Whether it is a character device 0:0, overlayfs's mark of a deleted file.
        whiteout: bool,
    },
}

/// What was read at a name: a file's bytes, or a link's target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// A regular file as opened.
    File {
        /// Its bytes.
        bytes: Vec<u8>,
        /// Whether the owner's execute bit was set on the opened file.
        executable: bool,
    },
    /// A symbolic link and the bytes of its target.
    Link(Vec<u8>),
}

/// How [`Tree::walk`] goes on after an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Into a directory (ignored for anything else).
    Descend,
    /// Past it.
    Skip,
}

/// One name met by [`Tree::walk`], with its directory held open.
pub struct Entry<'a> {
    /// Its path relative to the walked tree, `/`-separated.
    pub rel: &'a str,
    /// What it was when its directory was listed.
    pub kind: Kind,
    dir: BorrowedFd<'a>,
    name: &'a CStr,
}

impl Entry<'_> {
    /// Reads the entry from its directory's handle: a file's bytes as opened now, or a link's
    /// target; `None` for a directory or anything else (what the name is *now* decides, not
    /// [`Entry::kind`], so a name swapped since the listing is read as what it became).
    pub fn read(&self) -> io::Result<Option<Content>> {
        read_at(self.dir, self.name)
    }
}

const OPENAT2_UNKNOWN: u8 = 0;
const OPENAT2_WORKS: u8 = 1;
const OPENAT2_MISSING: u8 = 2;
/// Whether the kernel has `openat2` (Linux 5.6), learnt at the first call.
static OPENAT2: AtomicU8 = AtomicU8::new(OPENAT2_UNKNOWN);

fn resolve_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// The error for a path that may not be resolved beneath a tree at all.
fn refused(rel: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}: {why}", rel.display()),
    )
}

/// The normal components of `rel`, refusing an absolute path and `..`.
fn components(rel: &Path) -> io::Result<Vec<&OsStr>> {
    let mut out = Vec::new();
    for part in rel.components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(refused(rel, "an absolute path is not beneath the tree"))
            }
            Component::ParentDir => return Err(refused(rel, "`..` may not leave the tree")),
        }
    }
    Ok(out)
}

/// Opens `parts` beneath `dir` with `flags`, following no link on the way or at the end.
fn open_beneath(dir: BorrowedFd<'_>, parts: &[&OsStr], flags: OFlags) -> io::Result<OwnedFd> {
    let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    if parts.is_empty() {
        return Ok(rustix::fs::openat(dir, c".", flags, Mode::empty())?);
    }
    if OPENAT2.load(Ordering::Relaxed) != OPENAT2_MISSING && !tests_walk() {
        let joined = join(parts);
        match rustix::fs::openat2(dir, &joined, flags, Mode::empty(), resolve_flags()) {
            Ok(fd) => {
                OPENAT2.store(OPENAT2_WORKS, Ordering::Relaxed);
                return Ok(fd);
            }
            // Not in this kernel, or refused by a container's seccomp profile.
            Err(rustix::io::Errno::NOSYS) | Err(rustix::io::Errno::PERM)
                if OPENAT2.load(Ordering::Relaxed) == OPENAT2_UNKNOWN =>
            {
                OPENAT2.store(OPENAT2_MISSING, Ordering::Relaxed);
            }
            Err(e) => return Err(e.into()),
        }
    }
    // One component at a time, each directory opened with `O_NOFOLLOW`.
    let (last, dirs) = parts.split_last().expect("parts is not empty");
    let mut held: Option<OwnedFd> = None;
    for part in dirs {
        let at = held.as_ref().map_or(dir, AsFd::as_fd);
        let next = rustix::fs::openat(
            at,
            *part,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            // A link where a directory was: name it as openat2 would.
            if e == rustix::io::Errno::NOTDIR && is_link_at(at, part) {
                rustix::io::Errno::LOOP
            } else {
                e
            }
        })?;
        held = Some(next);
    }
    let at = held.as_ref().map_or(dir, AsFd::as_fd);
    Ok(rustix::fs::openat(at, *last, flags, Mode::empty())?)
}

#[cfg(test)]
thread_local! {
    /// The tests' way to try the component walk on a kernel with `openat2`.
    static WALK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn tests_walk() -> bool {
    WALK.with(std::cell::Cell::get)
}

#[cfg(not(test))]
fn tests_walk() -> bool {
    false
}

fn is_link_at(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

fn join(parts: &[&OsStr]) -> OsString {
    let mut out = OsString::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push("/");
        }
        out.push(part);
    }
    out
}

fn kind_of(st: &rustix::fs::Stat) -> Kind {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Kind::File {
            executable: st.st_mode & 0o100 != 0,
        },
        FileType::Symlink => Kind::Link,
        FileType::Directory => Kind::Dir,
        FileType::CharacterDevice => Kind::Other {
            whiteout: st.st_rdev == 0,
        },
        _ => Kind::Other { whiteout: false },
    }
}

/// Reads `name` in `dir` as it is now: see [`Entry::read`].
fn read_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Option<Content>> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) => {
            return match rustix::fs::readlinkat(dir, name, Vec::new()) {
                Ok(target) => Ok(Some(Content::Link(target.into_bytes()))),
                // Swapped again, for something that is no link: read what is there now.
                Err(rustix::io::Errno::INVAL) => read_at_once(dir, name),
                Err(e) => Err(e.into()),
            };
        }
        // A FIFO's writer side, a socket: not files.
        Err(rustix::io::Errno::NXIO) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    read_opened(fd)
}

/// [`read_at`] without a second chance: a name that keeps changing is an error.
fn read_at_once(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Option<Content>> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => read_opened(fd),
        Err(rustix::io::Errno::LOOP) => Ok(Some(Content::Link(
            rustix::fs::readlinkat(dir, name, Vec::new())?.into_bytes(),
        ))),
        Err(rustix::io::Errno::NXIO) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The content of an opened descriptor, judged by `fstat` of it: a regular file's bytes,
/// `None` for anything else.
fn read_opened(fd: OwnedFd) -> io::Result<Option<Content>> {
    let st = rustix::fs::fstat(&fd)?;
    let Kind::File { executable } = kind_of(&st) else {
        return Ok(None);
    };
    let mut file = File::from(fd);
    let mut bytes = Vec::with_capacity(usize::try_from(st.st_size).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(Some(Content::File { bytes, executable }))
}

fn cstring(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: a NUL byte in a name", name.to_string_lossy()),
        )
    })
}

impl Tree {
    /// Opens the directory at `root`, a path of plait's own making (the tree's root itself
    /// is resolved as given; everything beneath it is not).
    pub fn open(root: &Path) -> io::Result<Tree> {
        let fd = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            io::Error::new(
                io::Error::from(e).kind(),
                format!("{}: {e}", root.display()),
            )
        })?;
        Ok(Tree {
            fd,
            root: root.to_path_buf(),
        })
    }

    /// Where the tree was opened.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory `rel` beneath this one as a tree of its own; a link on the way is
    /// refused (`ELOOP`).
    pub fn open_dir(&self, rel: impl AsRef<Path>) -> io::Result<Tree> {
        let rel = rel.as_ref();
        let fd = open_beneath(
            self.fd.as_fd(),
            &components(rel)?,
            OFlags::RDONLY | OFlags::DIRECTORY,
        )?;
        Ok(Tree {
            fd,
            root: self.root.join(rel),
        })
    }

    /// The parent directory of `rel` held open, and `rel`'s last name; `None` for the tree
    /// itself.
    fn parent(&self, rel: &Path) -> io::Result<Option<(OwnedFd, CString)>> {
        let parts = components(rel)?;
        let Some((last, dirs)) = parts.split_last() else {
            return Ok(None);
        };
        let dir = open_beneath(self.fd.as_fd(), dirs, OFlags::RDONLY | OFlags::DIRECTORY)?;
        Ok(Some((dir, cstring(last)?)))
    }

    /// [`Tree::parent_of`] without opening the tree again for a name directly in it:
    /// `None` stands for the tree's own handle.
    fn parent_or_self(&self, rel: &Path) -> io::Result<(Option<OwnedFd>, CString)> {
        let parts = components(rel)?;
        match parts.as_slice() {
            [name] => Ok((None, cstring(name)?)),
            _ => {
                let (dir, name) = self.parent_of(rel)?;
                Ok((Some(dir), name))
            }
        }
    }

    fn parent_of(&self, rel: &Path) -> io::Result<(OwnedFd, CString)> {
        self.parent(rel)?
            .ok_or_else(|| refused(rel, "names the tree itself"))
    }

    /// What `rel` is, without following a link; `None` when nothing is there (or a link
    /// stands where a directory on the way should be).
    pub fn kind(&self, rel: impl AsRef<Path>) -> io::Result<Option<Kind>> {
        let rel = rel.as_ref();
        if components(rel)?.is_empty() {
            return Ok(Some(Kind::Dir));
        }
        let (held, name) = match self.parent_or_self(rel) {
            Ok(found) => found,
            Err(e) if missing(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let dir = held.as_ref().map_or(self.fd.as_fd(), AsFd::as_fd);
        match rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(kind_of(&st))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads `rel` as it is now: a file's bytes or a link's target; `None` when it is
    /// missing, a directory or anything else.
    pub fn read(&self, rel: impl AsRef<Path>) -> io::Result<Option<Content>> {
        let rel = rel.as_ref();
        let (dir, name) = match self.parent(rel) {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(None),
            Err(e) if missing(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        match read_at(dir.as_fd(), &name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            other => other,
        }
    }

    /// The bytes of the regular file `rel`; an error naming it when it is anything else (a
    /// link among them).
    pub fn read_file(&self, rel: impl AsRef<Path>) -> io::Result<Vec<u8>> {
        let rel = rel.as_ref();
        let fd = open_beneath(
            self.fd.as_fd(),
            &components(rel)?,
            OFlags::RDONLY | OFlags::NONBLOCK,
        )
        .map_err(|e| with_name(e, rel))?;
        match read_opened(fd)? {
            Some(Content::File { bytes, .. }) => Ok(bytes),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a regular file", rel.display()),
            )),
        }
    }

    /// Creates `rel` and the directories above it that are missing; a link on the way is
    /// refused, never followed.
    pub fn create_dir_all(&self, rel: impl AsRef<Path>) -> io::Result<()> {
        let rel = rel.as_ref();
        let parts = components(rel)?;
        let mut held: Option<OwnedFd> = None;
        for part in parts {
            let at = held.as_ref().map_or(self.fd.as_fd(), AsFd::as_fd);
            match rustix::fs::mkdirat(at, part, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(with_name(e.into(), rel)),
            }
            let next = open_beneath(at, &[part], OFlags::RDONLY | OFlags::DIRECTORY)
                .map_err(|e| with_name(e, rel))?;
            held = Some(next);
        }
        Ok(())
    }

    /// Writes `bytes` as the regular file `rel` (its directories made as needed): a new file
    /// renamed over whatever was there, so neither a link nor a hard link at `rel` carries
    /// the bytes anywhere else.
    pub fn write(&self, rel: impl AsRef<Path>, bytes: &[u8], executable: bool) -> io::Result<()> {
        let rel = rel.as_ref();
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(parent)?;
        }
        let (dir, name) = self.parent_of(rel)?;
        let mode = if executable { 0o777 } else { 0o666 };
        let (temp, fd) = create_temp(dir.as_fd(), &name, mode)?;
        let written = (|| {
            let mut file = File::from(fd);
            file.write_all(bytes)?;
            // The umask applies to a new file; the mode asked for is what git records.
            let umask = current_umask();
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode & !umask))?;
            Ok::<(), io::Error>(())
        })();
        let renamed = written
            .and_then(|()| rustix::fs::renameat(&dir, &temp, &dir, &name).map_err(io::Error::from));
        if let Err(e) = renamed {
            let _ = rustix::fs::unlinkat(&dir, &temp, AtFlags::empty());
            return Err(with_name(e, rel));
        }
        Ok(())
    }

    /// Makes `rel` a symbolic link to `target` (its directories made as needed), replacing
    /// a file or link that was there.
    pub fn symlink(&self, target: &[u8], rel: impl AsRef<Path>) -> io::Result<()> {
        let rel = rel.as_ref();
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(parent)?;
        }
        let (dir, name) = self.parent_of(rel)?;
        let target = OsStr::from_bytes(target);
        for attempt in 0..16u32 {
            let temp = temp_name(&name, attempt);
            match rustix::fs::symlinkat(target, &dir, &temp) {
                Ok(()) => {
                    return rustix::fs::renameat(&dir, &temp, &dir, &name).map_err(|e| {
                        let _ = rustix::fs::unlinkat(&dir, &temp, AtFlags::empty());
                        with_name(e.into(), rel)
                    })
                }
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(with_name(e.into(), rel)),
            }
        }
        Err(with_name(
            io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name"),
            rel,
        ))
    }

    /// Writes `bytes` as a new regular file `rel`, whose directory must exist (a link on
    /// the way refused): created with `O_EXCL`, so nothing already at the name (a file, a
    /// link, anything) is followed, opened or replaced; `false`, with nothing written, when
    /// something is there. Mode 0666 less the umask, 0755 when `executable`.
    pub fn create_file(
        &self,
        rel: impl AsRef<Path>,
        bytes: &[u8],
        executable: bool,
    ) -> io::Result<bool> {
        let rel = rel.as_ref();
        let (held, name) = self.parent_or_self(rel)?;
        let dir = held.as_ref().map_or(self.fd.as_fd(), AsFd::as_fd);
        let fd = match rustix::fs::openat(
            dir,
            &name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::EXIST) => return Ok(false),
            Err(e) => return Err(with_name(e.into(), rel)),
        };
        let mut file = File::from(fd);
        file.write_all(bytes).map_err(|e| with_name(e, rel))?;
        if executable {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(0o755))
                .map_err(|e| with_name(e.into(), rel))?;
        }
        Ok(true)
    }

    /// Makes `rel` a new symbolic link to `target`, whose directory must exist (a link on
    /// the way refused); `false`, with nothing made, when something is at the name.
    pub fn create_link(&self, target: &[u8], rel: impl AsRef<Path>) -> io::Result<bool> {
        let rel = rel.as_ref();
        let (held, name) = self.parent_or_self(rel)?;
        let dir = held.as_ref().map_or(self.fd.as_fd(), AsFd::as_fd);
        match rustix::fs::symlinkat(OsStr::from_bytes(target), dir, &name) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::EXIST) => Ok(false),
            Err(e) => Err(with_name(e.into(), rel)),
        }
    }

    /// Makes `rel` an overlayfs whiteout (a character device 0:0, which Linux lets any user
    /// make since 5.8), whose directory must exist (a link on the way refused); `false`
    /// when something is at the name.
    pub fn create_whiteout(&self, rel: impl AsRef<Path>) -> io::Result<bool> {
        let rel = rel.as_ref();
        let (held, name) = self.parent_or_self(rel)?;
        let dir = held.as_ref().map_or(self.fd.as_fd(), AsFd::as_fd);
        match rustix::fs::mknodat(
            dir,
            &name,
            FileType::CharacterDevice,
            Mode::empty(),
            rustix::fs::makedev(0, 0),
        ) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::EXIST) => Ok(false),
            Err(e) => Err(with_name(e.into(), rel)),
        }
    }

    /// Removes the file, link or empty directory `rel`; nothing there is no error. A link
    /// is removed, never what it points at.
    pub fn remove(&self, rel: impl AsRef<Path>) -> io::Result<()> {
        let rel = rel.as_ref();
        let (dir, name) = match self.parent(rel) {
            Ok(Some(found)) => found,
            Ok(None) => return Err(refused(rel, "names the tree itself")),
            Err(e) if missing(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        match rustix::fs::unlinkat(&dir, &name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(rustix::io::Errno::ISDIR) => {
                match rustix::fs::unlinkat(&dir, &name, AtFlags::REMOVEDIR) {
                    Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
                    Err(e) => Err(with_name(e.into(), rel)),
                }
            }
            Err(e) => Err(with_name(e.into(), rel)),
        }
    }

    /// Removes `rel` and everything beneath it; nothing there is no error. Directories a
    /// task made unreadable or unwritable are opened up by their handles, never by name, and
    /// a link is removed, never followed.
    pub fn remove_all(&self, rel: impl AsRef<Path>) -> io::Result<()> {
        let rel = rel.as_ref();
        let (dir, name) = match self.parent(rel) {
            Ok(Some(found)) => found,
            Ok(None) => return self.clear(),
            Err(e) if missing(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        remove_at(dir.as_fd(), &name).map_err(|e| with_name(e, rel))
    }

    /// Removes everything inside the tree, keeping the tree's own directory.
    pub fn clear(&self) -> io::Result<()> {
        clear_dir(self.fd.as_fd()).map_err(|e| with_name(e, &self.root))
    }

    /// Renames `from` to `to`, both beneath this tree (replacing what `to` names).
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
        let (from, to) = (from.as_ref(), to.as_ref());
        let (from_dir, from_name) = self.parent_of(from)?;
        let (to_dir, to_name) = self.parent_of(to)?;
        rustix::fs::renameat(&from_dir, &from_name, &to_dir, &to_name)
            .map_err(|e| with_name(e.into(), from))
    }

    /// Sets the permission bits of the file or directory `rel` through a handle to it (a
    /// link is refused, never followed).
    pub fn set_mode(&self, rel: impl AsRef<Path>, mode: u32) -> io::Result<()> {
        let rel = rel.as_ref();
        let fd = open_beneath(self.fd.as_fd(), &components(rel)?, OFlags::PATH)
            .map_err(|e| with_name(e, rel))?;
        chmod_handle(fd.as_fd(), mode).map_err(|e| with_name(e, rel))
    }

    /// Walks the tree in name order, depth first, calling `visit` for every name beneath
    /// it; each directory is held open while its names are visited, so an entry is read
    /// from the directory that was listed, whatever happens to the names above it.
    pub fn walk(&self, visit: &mut dyn FnMut(&Entry<'_>) -> io::Result<Step>) -> io::Result<()> {
        let mut prefix = String::new();
        walk_dir(self.fd.as_fd(), &mut prefix, visit)
    }

    /// The names in the directory `rel` with what each is, in name order.
    pub fn list(&self, rel: impl AsRef<Path>) -> io::Result<Vec<(OsString, Kind)>> {
        let sub;
        let dir = if rel.as_ref().as_os_str().is_empty() {
            self.fd.as_fd()
        } else {
            sub = self.open_dir(rel)?;
            sub.fd.as_fd()
        };
        Ok(list_dir(dir)?
            .into_iter()
            .map(|(name, kind)| (OsString::from_vec(name.into_bytes()), kind))
            .collect())
    }
}

impl AsFd for Tree {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn missing(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

fn with_name(e: io::Error, rel: &Path) -> io::Error {
    let message = match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::EXDEV) => format!(
            "{}: a symbolic link stands on the way; plait does not follow links in a task's tree",
            rel.display()
        ),
        _ => format!("{}: {e}", rel.display()),
    };
    io::Error::new(e.kind(), message)
}

fn current_umask() -> u32 {
    // SAFETY: umask only sets and returns the process's mask; it is put back at once.
    unsafe {
        let mask = libc::umask(0o022);
        libc::umask(mask);
        mask as u32
    }
}

fn temp_name(name: &CStr, attempt: u32) -> CString {
    let mut temp = b".plait-".to_vec();
    temp.extend_from_slice(&name.to_bytes()[..name.to_bytes().len().min(200)]);
    temp.extend_from_slice(format!(".{}.{attempt}.tmp", std::process::id()).as_bytes());
    CString::new(temp).expect("no NUL in a name that came from a CStr")
}

fn create_temp(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<(CString, OwnedFd)> {
    for attempt in 0..16u32 {
        let temp = temp_name(name, attempt);
        match rustix::fs::openat(
            dir,
            &temp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        ) {
            Ok(fd) => return Ok((temp, fd)),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary name",
    ))
}

/// `chmod` of what `fd` holds, through its `/proc/self/fd` entry (which names that very
/// inode, whatever its name has become): `fchmod` refuses an `O_PATH` handle.
fn chmod_handle(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    Ok(rustix::fs::chmod(
        proc_path.as_str(),
        Mode::from_raw_mode(mode),
    )?)
}

fn list_dir(dir: BorrowedFd<'_>) -> io::Result<Vec<(CString, Kind)>> {
    let mut entries = Vec::new();
    let mut listing = rustix::fs::Dir::read_from(dir)?;
    while let Some(entry) = listing.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::RegularFile | FileType::CharacterDevice | FileType::Unknown => {
                // The execute bit, the device number: ask the directory, not the name's path.
                match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => kind_of(&st),
                    Err(rustix::io::Errno::NOENT) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            FileType::Symlink => Kind::Link,
            FileType::Directory => Kind::Dir,
            _ => Kind::Other { whiteout: false },
        };
        entries.push((name.to_owned(), kind));
    }
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(entries)
}

fn walk_dir(
    dir: BorrowedFd<'_>,
    prefix: &mut String,
    visit: &mut dyn FnMut(&Entry<'_>) -> io::Result<Step>,
) -> io::Result<()> {
    for (name, kind) in list_dir(dir)? {
        let Ok(text) = name.to_str() else {
            // plait's paths are UTF-8, as git's paths are in its record.
            continue;
        };
        let len = prefix.len();
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(text);
        let step = visit(&Entry {
            rel: prefix,
            kind,
            dir,
            name: &name,
        })?;
        if kind == Kind::Dir && step == Step::Descend {
            match rustix::fs::openat(
                dir,
                &name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(sub) => walk_dir(sub.as_fd(), prefix, visit)?,
                // Gone, or swapped for a link or a file since the listing: nothing to walk.
                Err(rustix::io::Errno::NOENT)
                | Err(rustix::io::Errno::LOOP)
                | Err(rustix::io::Errno::NOTDIR) => {}
                Err(e) => return Err(with_name(e.into(), Path::new(prefix.as_str()))),
            }
        }
        prefix.truncate(len);
    }
    Ok(())
}

/// Removes `name` in `dir`, whatever it is, and all beneath it.
fn remove_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(rustix::io::Errno::ISDIR) | Err(rustix::io::Errno::PERM) => {}
        Err(e) => return Err(e.into()),
    }
    let sub = match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::ACCESS) => {
            // A directory its task made unreadable: opened up through a handle to it.
            let held = rustix::fs::openat(
                dir,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            chmod_handle(held.as_fd(), 0o700)?;
            rustix::fs::openat(
                dir,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?
        }
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    clear_dir(sub.as_fd())?;
    match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Removes everything in the directory `dir` holds.
fn clear_dir(dir: BorrowedFd<'_>) -> io::Result<()> {
    // A directory without write permission cannot lose its names.
    let st = rustix::fs::fstat(dir)?;
    if st.st_mode & 0o700 != 0o700 {
        rustix::fs::fchmod(dir, Mode::from_raw_mode((st.st_mode | 0o700) & 0o7777))?;
    }
    for (name, _) in list_dir(dir)? {
        remove_at(dir, &name)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
