//! Where a sandbox's processes may write and read, and what the walls refused them: the
//! places the observer judges each stopped call against, and the refusals read from a
//! process's log after it ends (the only witness before ABI 5).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{net, reads};
use plait_core::sync::Locked as _;

/// Devices every process may write (and `ioctl`), as `/dev/null` is written everywhere.
pub(super) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// At most this many refused writes are kept per sandbox.
const MAX_DENIALS: usize = 10;

/// The refused writes of a sandbox's processes, as `write to PATH refused`, oldest first,
/// each once, at most [`MAX_DENIALS`].
#[derive(Debug, Default)]
pub(super) struct Denials(Mutex<Vec<String>>);

impl Denials {
    pub(super) fn add(&self, found: impl IntoIterator<Item = String>) {
        let mut denials = self.0.locked();
        for denial in found {
            if denials.len() < MAX_DENIALS && !denials.contains(&denial) {
                denials.push(denial);
            }
        }
    }

    pub(super) fn list(&self) -> Vec<String> {
        self.0.locked().clone()
    }
}

/// Where an armed sandbox's processes may write, and the record of what they were refused:
/// what the observers of its processes share with the sandbox.
#[derive(Debug)]
pub(crate) struct Places {
    /// The own places, the private temporary directory and `writable`, each also with its
    /// links resolved (as the kernel names a working directory) when that differs.
    pub(super) roots: Vec<PathBuf>,
    /// Where they may read besides `roots` (`None`: everywhere).
    pub(super) reads: Option<Vec<PathBuf>>,
    pub(super) denials: Arc<Denials>,
    /// How the network is walled, for the observer to record refused connections; `None`
    /// when it is open.
    pub(super) net: Option<net::Watch>,
}

impl Places {
    pub(super) fn new(roots: Vec<PathBuf>, denials: Arc<Denials>) -> Places {
        let mut all = Vec::with_capacity(roots.len() * 2);
        for root in roots {
            let real = root.canonicalize().ok().filter(|real| *real != root);
            all.push(root);
            all.extend(real);
        }
        Places {
            roots: all,
            reads: None,
            denials,
            net: None,
        }
    }

    /// Whether `path` lies where every process of the sandbox may read.
    pub(super) fn may_read(&self, path: &Path) -> bool {
        match &self.reads {
            None => true,
            Some(reads) => self
                .roots
                .iter()
                .chain(reads)
                .any(|root| path.starts_with(root)),
        }
    }

    /// Whether `path` lies in one of the places every process of the sandbox may write.
    pub(super) fn may_write(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| path.starts_with(root))
            || DEVICES.iter().any(|d| path == Path::new(d))
    }

    /// Keeps a write to `path`, outside the places, that the walls refused. The
    /// controlling terminal is not kept: programs open it to write at start-up (a Python
    /// build probing it, for one) and go on without it, so it would stand in every task's
    /// record and say nothing (it is still refused).
    pub(super) fn record(&self, path: &Path) {
        if path == Path::new("/dev/tty") {
            return;
        }
        // A view's child maps its user and group before the walls go up (see [`view`]),
        // and sets its PID namespace's `pid_max` (see `super::pids`).
        if path.starts_with("/proc")
            && path.file_name().is_some_and(|n| {
                n == "uid_map" || n == "gid_map" || n == "setgroups" || n == "pid_max"
            })
        {
            return;
        }
        self.denials
            .add([format!("write to {} refused", path.display())]);
    }

    /// Keeps a connection the network wall refused, in words that name what would allow it.
    pub(super) fn record_connect(&self, what: String) {
        self.denials.add([what]);
    }
}

/// Phrases with which programs report a refused write (`EACCES`, `EPERM`, `EXDEV`).
const REFUSALS: &[&str] = &[
    "permission denied",
    "operation not permitted",
    "eacces",
    "eperm",
    "invalid cross-device link",
];

/// The refused reads and writes `text` tells of: for each line that reports one, the paths
/// it names (relative ones from `cwd`) that `readable` says the process may not read, as
/// `read of PATH refused (…)`, or else that `writable` says it may not write, as
/// `write to PATH refused`. A path that is not there was no read's refusal (a read of it
/// fails as missing before any wall is asked): it was a write's, creating it.
pub(super) fn refused(
    text: &str,
    cwd: &Path,
    readable: impl Fn(&Path) -> bool,
    writable: impl Fn(&Path) -> bool,
) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let lower = line.to_ascii_lowercase();
        if !REFUSALS.iter().any(|r| lower.contains(r)) {
            continue;
        }
        for path in paths_in(line, cwd) {
            let denial = if !readable(&path) && path.symlink_metadata().is_ok() {
                if reads::habit(&path) {
                    // Read by habit (a shell's rc file, git's or npm's config): no news.
                    continue;
                }
                format!(
                    "read of {} refused (allow it with [sandbox] readable)",
                    path.display()
                )
            } else if !writable(&path) {
                format!("write to {} refused", path.display())
            } else {
                continue;
            };
            if !found.contains(&denial) {
                found.push(denial);
            }
        }
    }
    found
}

/// [`refused`] where every path is readable: the refused writes alone.
#[cfg(test)]
fn refused_writes(text: &str, cwd: &Path, allowed: impl Fn(&Path) -> bool) -> Vec<String> {
    refused(text, cwd, |_| true, allowed)
}

/// The paths written in a line of output, quoted or not: words that start with `/`, or hold
/// one and are not URLs (those are taken from `cwd`), without `.` and `..`.
fn paths_in(line: &str, cwd: &Path) -> Vec<PathBuf> {
    let stops = |c: char| c.is_whitespace() || "'\"`,;()[]{}<>=‘’“”«»".contains(c);
    line.split(stops)
        .map(|word| word.trim_end_matches([':', '.']))
        .filter(|word| word.len() > 1 && word.contains('/') && !word.contains("://"))
        .map(|word| lexical(&cwd.join(word)))
        .collect()
}

/// `path` without `.` and `..`, taken as written (a `..` after a link is not followed).
pub(super) fn lexical(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                normal.pop();
            }
            std::path::Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_writes_name_the_paths_outside() {
        let log = "touch: cannot touch '/home/u/x': Permission denied\n\
                   mkdir: cannot create directory ‘/home/u/.cache’: Permission denied\n\
                   sh: 1: cannot create /srv/wt/ok.txt: Permission denied\n\
                   PermissionError: [Errno 13] Permission denied: '/root/.cache/pip/y'\n\
                   Error: EACCES: permission denied, open '/var/tmp/z'\n\
                   ssh: Permission denied (publickey).\n\
                   plain line with /etc/passwd\n";
        let cwd = Path::new("/srv/wt");
        let found = refused_writes(log, cwd, |p| p.starts_with("/srv/wt"));
        assert_eq!(
            found,
            [
                "write to /home/u/x refused",
                "write to /home/u/.cache refused",
                "write to /root/.cache/pip/y refused",
                "write to /var/tmp/z refused",
            ]
        );
        // Not readable: a read's refusal where the file is there, a write's where the
        // write was to create it.
        let dir = std::env::temp_dir().join(format!("plait-places-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("there"), "").unwrap();
        let log = format!(
            "cat: {d}/there: Permission denied\nbash: {d}/new: Permission denied\n",
            d = dir.display()
        );
        let found = refused(&log, cwd, |_| false, |_| false);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            found,
            [
                format!(
                    "read of {}/there refused (allow it with [sandbox] readable)",
                    dir.display()
                ),
                format!("write to {}/new refused", dir.display()),
            ]
        );
        assert_eq!(
            paths_in(
                "mv: cannot move 'a/b' to '../n/y': Invalid cross-device link (see https://x.y/z)",
                cwd
            ),
            [PathBuf::from("/srv/wt/a/b"), PathBuf::from("/srv/n/y")]
        );
    }
}
