//! What a violation tried to write, kept for a person to read. A change outside the task's
//! ownership is never committed, and the worktree that holds it may be cleaned or on
//! another machine; so at each collect its diff against the task's branch (where an
//! unowned path holds what the task started from) is written beside the task's logs
//! (`TaskDir::violations`), as the page lays a diff out (`report::diff::FileDiff`).

use std::path::Path;

use git2::Tree;

use super::{Change, CollectError};
use crate::report::diff::{file_diff_of, FileDiff};

/// Past this size a side of a file is not diffed: its diff says only that it is large.
const MAX_SIDE: usize = 1024 * 1024;

/// Past this many violations only the first are kept (the record names them all).
const MAX_FILES: usize = 200;

/// Writes the diffs of `violations` against `head` to `path`, or removes what an earlier
/// round left there when there are none.
pub fn keep(
    repo: &git2::Repository,
    head: &Tree<'_>,
    violations: &[&Change],
    path: &Path,
) -> Result<(), CollectError> {
    let io = |source| CollectError::Io {
        path: path.to_path_buf(),
        source,
    };
    if violations.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
            _ => Ok(()),
        };
    }
    let mut diffs = Vec::with_capacity(violations.len().min(MAX_FILES));
    for change in violations.iter().take(MAX_FILES) {
        let old = match head.get_path(Path::new(&change.path)) {
            Ok(entry) => entry
                .to_object(repo)?
                .into_blob()
                .ok()
                .map(|b| b.content().to_vec()),
            Err(e) if e.code() == git2::ErrorCode::NotFound => None,
            Err(e) => return Err(e.into()),
        };
        let new = change.content.as_ref().map(|(bytes, _)| bytes.as_slice());
        diffs.push(diff(&change.path, old.as_deref(), new));
    }
    let json = serde_json::to_vec(&diffs).map_err(|e| io(e.into()))?;
    plait_core::state::write_atomic(path, &json).map_err(|e| io(std::io::Error::other(e)))
}

/// The diff of one violation; a side too large to diff is said to be large, with no hunks.
fn diff(path: &str, old: Option<&[u8]>, new: Option<&[u8]>) -> FileDiff {
    let too_large = |side: Option<&[u8]>| side.is_some_and(|s| s.len() > MAX_SIDE);
    if too_large(old) || too_large(new) {
        let mut file = file_diff_of(path.to_string(), Some(&[]), Some(&[]));
        file.kind = match (old, new) {
            (None, _) => "added",
            (_, None) => "deleted",
            _ => "modified",
        };
        file.large = true;
        return file;
    }
    file_diff_of(path.to_string(), old, new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_too_large_to_diff_is_said_to_be_large_without_hunks() {
        let big = vec![b'x'; MAX_SIDE + 1];
        let file = diff("README.md", Some(b"a\n"), Some(&big));
        assert_eq!((file.kind, file.large), ("modified", true));
        assert!(file.hunks.is_empty());
        let file = diff("README.md", Some(b"a\n"), Some(b"a\nsneaky\n"));
        assert_eq!((file.added, file.removed, file.large), (1, 0, false));
        assert_eq!(file.hunks[0].lines[1].text, "sneaky");
    }
}
