//! Writing a worktree's index by hand. libgit2 cannot make a sparse checkout, and adding
//! thousands of entries one by one through it is slow; the index format is small and
//! stable, so plait writes it directly: every entry of the tree, with real stat data for
//! the files it wrote and the skip-worktree bit on the ones it did not.
//! Format: git's `Documentation/gitformat-index.txt`, versions 2 and 3.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sha1::{Digest, Sha1};

use crate::git::TreeFile;

const FLAG_EXTENDED: u16 = 0x4000;
const EXT_SKIP_WORKTREE: u16 = 0x4000;

/// Stat data git compares to decide whether a file may have changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stat {
    ctime: (u32, u32),
    mtime: (u32, u32),
    dev: u32,
    ino: u32,
    uid: u32,
    gid: u32,
    size: u32,
}

impl Stat {
    /// Reads the stat data of `path` without following a final symlink.
    pub fn of(path: &Path) -> io::Result<Stat> {
        let m = fs::symlink_metadata(path)?;
        Ok(Stat {
            ctime: (m.ctime() as u32, m.ctime_nsec() as u32),
            mtime: (m.mtime() as u32, m.mtime_nsec() as u32),
            dev: m.dev() as u32,
            ino: m.ino() as u32,
            uid: m.uid(),
            gid: m.gid(),
            size: m.size() as u32,
        })
    }
}

/// Builds the bytes of an index holding `files` (sorted by path); `stat` gives the stat
/// data of an entry present in the worktree, or `None` to mark it skip-worktree.
pub fn build<F>(files: &[TreeFile], mut stat: F) -> Vec<u8>
where
    F: FnMut(&TreeFile) -> Option<Stat>,
{
    let stats: Vec<Option<Stat>> = files.iter().map(&mut stat).collect();
    let extended = stats.iter().any(Option::is_none);
    let mut out = Vec::with_capacity(12 + files.len() * 96);
    out.extend_from_slice(b"DIRC");
    out.extend_from_slice(&(if extended { 3u32 } else { 2u32 }).to_be_bytes());
    out.extend_from_slice(&(files.len() as u32).to_be_bytes());
    for (file, stat) in files.iter().zip(&stats) {
        let start = out.len();
        let s = stat.unwrap_or_default();
        for word in [
            s.ctime.0, s.ctime.1, s.mtime.0, s.mtime.1, s.dev, s.ino, file.mode, s.uid, s.gid,
            s.size,
        ] {
            out.extend_from_slice(&word.to_be_bytes());
        }
        out.extend_from_slice(file.oid.as_bytes());
        let name_len = file.path.len().min(0xFFF) as u16;
        if stat.is_none() {
            out.extend_from_slice(&(name_len | FLAG_EXTENDED).to_be_bytes());
            out.extend_from_slice(&EXT_SKIP_WORKTREE.to_be_bytes());
        } else {
            out.extend_from_slice(&name_len.to_be_bytes());
        }
        out.extend_from_slice(file.path.as_bytes());
        // One to eight NULs: the name stays NUL-terminated and the entry 8-byte aligned.
        let len = out.len() - start;
        let padded = (len + 8) & !7;
        out.resize(start + padded, 0);
    }
    let digest = Sha1::digest(&out);
    out.extend_from_slice(&digest);
    out
}

/// How an entry stands in the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Not checked out: a skip-worktree entry.
    Skip,
    /// Checked out with the entry's content: its stat data lets git trust it.
    Clean,
    /// Checked out but changed and not committed: no stat data, so git looks at it.
    Dirty,
}

/// Writes an index for `files` at `index_path`, one `presence` per file.
pub fn write(
    index_path: &Path,
    worktree: &Path,
    files: &[TreeFile],
    presence: &[Presence],
) -> io::Result<()> {
    let mut each = presence.iter();
    let bytes = build(files, |f| {
        match each.next().copied().unwrap_or(Presence::Skip) {
            Presence::Skip => None,
            Presence::Clean => Some(Stat::of(&worktree.join(&f.path)).unwrap_or_default()),
            Presence::Dirty => Some(Stat::default()),
        }
    });
    let tmp = index_path.with_extension("plait-tmp");
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, index_path)
}
