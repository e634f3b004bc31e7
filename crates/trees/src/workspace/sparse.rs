//! The entries of a sparse index (git's `sdir` format) for a task's cone: every file of the
//! cone's directories, and every directory outside the cone folded into one entry. Built
//! from the tree objects of the cone's directories alone.

use std::collections::HashSet;

use git2::{ObjectType, Repository, Tree};

use super::index::Presence;
pub use super::index::DIR_MODE;
use plait_core::git::{mode, TreeFile};
use plait_plan::layout::{Cone, Dir};

/// The index entries of `tree` for `cone`, in the index's order: every file of the cone's
/// directories, and every directory outside the cone as one entry (mode `040000`, its
/// path with a trailing `/`, its tree's id). Reads only the cone's tree objects.
pub fn entries(
    repo: &Repository,
    tree: &Tree<'_>,
    cone: &Cone,
) -> Result<Vec<TreeFile>, git2::Error> {
    let mut out = Vec::new();
    walk(repo, tree, "", cone, &mut out)?;
    Ok(out)
}

fn walk(
    repo: &Repository,
    tree: &Tree<'_>,
    prefix: &str,
    cone: &Cone,
    out: &mut Vec<TreeFile>,
) -> Result<(), git2::Error> {
    for entry in tree.iter() {
        let name = String::from_utf8_lossy(entry.name_bytes());
        let path = format!("{prefix}{name}");
        if entry.kind() != Some(ObjectType::Tree) {
            out.push(TreeFile {
                path,
                mode: entry.filemode() as u32,
                oid: entry.id(),
            });
            continue;
        }
        if cone.dir(&path) == Dir::Outside {
            out.push(TreeFile {
                path: format!("{path}/"),
                mode: DIR_MODE,
                oid: entry.id(),
            });
        } else {
            let sub = repo.find_tree(entry.id())?;
            walk(repo, &sub, &format!("{path}/"), cone, out)?;
        }
    }
    Ok(())
}

/// How each of `entries` stands, given the paths checked out (`held`) and, among them,
/// those changed and not committed (`dirty`).
pub fn presence(
    entries: &[TreeFile],
    held: &HashSet<&str>,
    dirty: &HashSet<&str>,
) -> Vec<Presence> {
    entries
        .iter()
        .map(|e| {
            if e.mode == DIR_MODE || e.mode == mode::GITLINK || !held.contains(e.path.as_str()) {
                Presence::Skip
            } else if dirty.contains(e.path.as_str()) {
                Presence::Dirty
            } else {
                Presence::Clean
            }
        })
        .collect()
}
