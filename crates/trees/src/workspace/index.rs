//! Writing a worktree's index by hand. libgit2 cannot make a sparse checkout nor read a
//! sparse index, and adding thousands of entries one by one through it is slow; the index
//! format is small and stable, so plait writes it directly: the entries of
//! [`super::sparse::entries`], with real stat data for the files it wrote, the
//! skip-worktree bit on the ones it did not, and directories outside the cone as
//! sparse-directory entries (with the `sdir` extension).
//! Format: git's `Documentation/gitformat-index.txt`, versions 2 and 3.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sha1::{Digest, Sha1};

use plait_core::git::TreeFile;

/// A sparse-directory entry's mode.
pub const DIR_MODE: u32 = 0o040000;

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
/// data of an entry present in the worktree, or `None` to mark it skip-worktree (which a
/// sparse-directory entry always is).
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
    // A sparse index says so with an empty `sdir` extension; git then reads its
    // directory entries as whole trees outside the sparse-checkout cone.
    if files.iter().any(|f| f.mode == DIR_MODE) {
        out.extend_from_slice(b"sdir");
        out.extend_from_slice(&0u32.to_be_bytes());
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

/// The paths of the entries of the index at `index_path` that are checked out: neither
/// skip-worktree nor sparse directories nor in a conflict stage. Reads versions 2 to 4,
/// full or sparse, as git or plait wrote them; a split index (`link`) is refused.
pub fn checked_out(index_path: &Path) -> io::Result<Vec<String>> {
    let bytes = fs::read(index_path)?;
    parse_checked_out(&bytes).map_err(|why| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}", index_path.display()),
        )
    })
}

fn parse_checked_out(bytes: &[u8]) -> Result<Vec<String>, String> {
    let u32_at = |at: usize| -> Result<u32, String> {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| "the index is cut short".to_string())
    };
    if bytes.get(..4) != Some(b"DIRC") {
        return Err("not a git index".into());
    }
    let version = u32_at(4)?;
    if !(2..=4).contains(&version) {
        return Err(format!("index version {version} is not known"));
    }
    let count = u32_at(8)? as usize;
    let mut at = 12;
    let mut previous: Vec<u8> = Vec::new();
    let mut paths = Vec::new();
    for _ in 0..count {
        let start = at;
        let mode = u32_at(at + 24)?;
        let flags = u32_at(at + 60)? >> 16;
        at += 62;
        let mut extended = 0u16;
        if flags as u16 & FLAG_EXTENDED != 0 {
            extended = (u32_at(at)? >> 16) as u16;
            at += 2;
        }
        let path = if version == 4 {
            // The number of bytes to take off the previous path, then the rest of this one.
            let mut byte = *bytes.get(at).ok_or("the index is cut short")?;
            at += 1;
            let mut strip = (byte & 0x7f) as usize;
            while byte & 0x80 != 0 {
                byte = *bytes.get(at).ok_or("the index is cut short")?;
                at += 1;
                strip = ((strip + 1) << 7) + (byte & 0x7f) as usize;
            }
            let end = at
                + bytes[at..]
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or("a path has no end")?;
            let keep = previous
                .len()
                .checked_sub(strip)
                .ok_or("a path strips too much")?;
            previous.truncate(keep);
            previous.extend_from_slice(&bytes[at..end]);
            at = end + 1;
            previous.clone()
        } else {
            let end = at
                + bytes[at..]
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or("a path has no end")?;
            let path = bytes[at..end].to_vec();
            at = start + ((end - start + 8) & !7);
            path
        };
        let stage = (flags >> 12) & 0x3;
        if extended & EXT_SKIP_WORKTREE == 0 && mode != DIR_MODE && stage == 0 {
            paths.push(String::from_utf8(path).map_err(|_| "a path is not UTF-8")?);
        }
    }
    // Extensions: each a signature and a size; a split index keeps its entries elsewhere.
    while at + 8 <= bytes.len().saturating_sub(20) {
        if &bytes[at..at + 4] == b"link" {
            return Err("a split index (core.splitIndex) is not read by plait".into());
        }
        at += 8 + u32_at(at + 4)? as usize;
    }
    Ok(paths)
}
