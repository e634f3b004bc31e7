//! The runs' task work by content, for the git hooks: which blob (or deletion) each task's
//! recorded commit puts at which path against its run's base. A commit or ref update
//! outside `plait/` that brings such an entry in (a squash merge, a cherry-pick, a rebase,
//! `git am`, a reset) is told apart from one that touches no run's work without looking at
//! the branch it came from.
//!
//! It also answers which runs have a branch at a commit (a fast-forward onto a plait
//! branch), without reading a thousand loose refs on every commit.
//!
//! The index is a file under the plait dir, `task-work`, kept between hook calls: one
//! `run` line per run with a record (its id and the identity of its `state.json`: inode,
//! size, modification time), a `tips` line with the commits its branches point at (and
//! the identity of its loose refs' directory and of `packed-refs` when they were read),
//! then one `w` line per changed path of each of its tasks. A call only stats the records
//! and the refs' directories; a run whose record changed is diffed again, one whose refs
//! changed has them read again, the others are read back as they are. Refs changed in the
//! last two seconds are read every time (a file's time can stay the same over two quick
//! changes), and so are all refs under the reftable backend. A record that cannot be read
//! keeps what was indexed before it broke (the hook's judgement of a run it finds reads
//! the record again and stops there). Cleaned runs and tasks a landing of the run already
//! holds are not indexed: their work went through the gate, or is gone. The file is a
//! cache: written through a rename, never synced, rebuilt when it cannot be parsed.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use git2::{Oid, Repository, Tree};

use plait_core::git::{self, Entry};
use plait_core::state::{RunState, Store};

/// The index's file in the plait dir.
const INDEX_FILE: &str = "task-work";
/// Its first line; another means another format, which is rebuilt.
const HEADER: &str = "plait task-work 2";
/// Refs changed this recently are read again on the next call.
const RACY: std::time::Duration = std::time::Duration::from_secs(2);

/// Why the index of task work could not be read, built or written.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    /// The index could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The index's file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The index could not be written.
    #[error("cannot write the index of task work at {path}: {source}")]
    Write {
        /// The index's file.
        path: PathBuf,
        /// Why it could not be written.
        source: std::io::Error,
    },
    /// Reading the task branches failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// Where the index lives (benchmarks remove it to time a cold call).
pub(crate) fn index_path(repo: &Repository) -> PathBuf {
    git::plait_dir(repo).join(INDEX_FILE)
}

/// What a file (a run's record, a directory of refs) was when the index read it: one
/// written again (a record always through a rename) has another inode, size or time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileKey(String);

impl FileKey {
    fn of(meta: &std::fs::Metadata) -> FileKey {
        FileKey(format!(
            "{}:{}:{}.{:09}",
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec()
        ))
    }
}

/// The commits a run's branches point at; `key` names the refs they were read from, and is
/// `None` when they must be read again next time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tips {
    key: Option<String>,
    at: Vec<Oid>,
}

/// One changed path of a task: the blob its commit has there, `None` for a deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    task: String,
    blob: Option<Oid>,
    path: String,
}

/// One run's part of the index.
#[derive(Debug, Clone)]
struct IndexedRun {
    id: String,
    key: FileKey,
    tips: Tips,
    work: Vec<Change>,
}

/// The index of every run's task work, as of the records' last change.
#[derive(Debug, Clone, Default)]
pub struct WorkIndex {
    runs: Vec<IndexedRun>,
}

impl WorkIndex {
    /// The index of the repository's runs, brought up to date with their records and refs
    /// (and saved again when anything changed).
    pub fn load(repo: &Repository, store: &Store) -> Result<WorkIndex, WorkError> {
        let path = index_path(repo);
        let mut known = match std::fs::read_to_string(&path) {
            Ok(text) => parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(source) => return Err(WorkError::Read { path, source }),
        };
        let mut runs = Vec::new();
        let mut changed = false;
        for (id, key) in records(store)? {
            let mut run = match known.remove(&id) {
                Some(run) if run.key == key => run,
                earlier => {
                    changed = true;
                    let work = match store.load(&id) {
                        Ok(state) => work_of(repo, &state),
                        Err(_) => earlier.map(|r| r.work).unwrap_or_default(),
                    };
                    let tips = Tips {
                        key: None,
                        at: Vec::new(),
                    };
                    IndexedRun {
                        id,
                        key,
                        tips,
                        work,
                    }
                }
            };
            let key = refs_key(repo, &run.id);
            if key.is_none() || key != run.tips.key {
                changed |= key.is_some() || run.tips.key.is_some();
                run.tips = Tips {
                    at: tips_of(repo, &run.id)?,
                    key,
                };
            }
            runs.push(run);
        }
        let index = WorkIndex { runs };
        // What is left of the index file is runs whose record is gone.
        if changed || !known.is_empty() {
            write_cache(&path, &index.to_text())?;
        }
        Ok(index)
    }

    /// The runs (sorted) one of whose branches points at one of `commits`.
    pub fn runs_at(&self, commits: &[Oid]) -> Vec<String> {
        self.runs
            .iter()
            .filter(|r| r.tips.at.iter().any(|t| commits.contains(t)))
            .map(|r| r.id.clone())
            .collect()
    }

    /// The tasks of each run (by run id, in the record's order) whose work `changes`
    /// brings in: a path the task changed now holds the task's blob, or is deleted as the
    /// task deleted it. One such path is enough.
    pub fn brought_in(&self, changes: &BTreeMap<String, Entry>) -> BTreeMap<String, Vec<String>> {
        let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for run in &self.runs {
            for change in &run.work {
                let Some(entry) = changes.get(&change.path) else {
                    continue;
                };
                if entry.map(|(oid, _)| oid) != change.blob {
                    continue;
                }
                let tasks = found.entry(run.id.clone()).or_default();
                if !tasks.contains(&change.task) {
                    tasks.push(change.task.clone());
                }
            }
        }
        found
    }

    fn to_text(&self) -> String {
        let mut out = format!("{HEADER}\n");
        for run in &self.runs {
            let _ = writeln!(out, "run {} {}", run.id, run.key.0);
            if let Some(key) = &run.tips.key {
                let _ = write!(out, "tips {key}");
                for tip in &run.tips.at {
                    let _ = write!(out, " {tip}");
                }
                out.push('\n');
            }
            for c in &run.work {
                let blob = c.blob.map_or_else(|| "-".to_string(), |b| b.to_string());
                let _ = writeln!(out, "w {} {blob} {}", c.task, escape(&c.path));
            }
        }
        out
    }
}

/// The runs a move from tree `from` to tree `to` concerns, each with its tasks whose work
/// the move brings in by content (see [`WorkIndex::brought_in`]): those runs, and the ones
/// with a branch at one of `tips` (with no tasks of their own). Nothing is read but the
/// trees when they do not differ and there are no tips.
pub(crate) fn concerned(
    repo: &Repository,
    store: &Store,
    from: &Tree<'_>,
    to: &Tree<'_>,
    tips: &[Oid],
) -> Result<BTreeMap<String, Vec<String>>, WorkError> {
    let changes = git::tree_changes(repo, from, to)?;
    if changes.is_empty() && tips.is_empty() {
        return Ok(BTreeMap::new());
    }
    let index = WorkIndex::load(repo, store)?;
    let mut found = index.brought_in(&changes);
    for run in index.runs_at(tips) {
        found.entry(run).or_default();
    }
    Ok(found)
}

/// What run `run`'s refs are now: its loose refs' directory and `packed-refs`; `None` when
/// that says nothing (the reftable backend, refs changed in the last moments).
fn refs_key(repo: &Repository, run: &str) -> Option<String> {
    let common = repo.commondir();
    if common.join("reftable").exists() {
        return None;
    }
    let now = std::time::SystemTime::now();
    let mut parts = Vec::new();
    for path in [
        common.join(plait_core::refs::PLAIT_REFS).join(run),
        common.join("packed-refs"),
    ] {
        match std::fs::metadata(&path) {
            Ok(meta) => {
                let age = meta
                    .modified()
                    .ok()
                    .and_then(|m| now.duration_since(m).ok());
                if age.is_none_or(|age| age < RACY) {
                    return None;
                }
                parts.push(FileKey::of(&meta).0);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => parts.push("-".to_string()),
            Err(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// The commits run `run`'s branches point at, read from its refs.
fn tips_of(repo: &Repository, run: &str) -> Result<Vec<Oid>, WorkError> {
    let mut tips = Vec::new();
    for reference in repo.references_glob(&plait_core::refs::run_glob(run))? {
        if let Some(tip) = reference?.target() {
            tips.push(tip);
        }
    }
    tips.sort();
    tips.dedup();
    Ok(tips)
}

/// Writes the index through a rename; not synced (it is rebuilt when it cannot be read).
fn write_cache(path: &std::path::Path, text: &str) -> Result<(), WorkError> {
    let failed = |source| WorkError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(failed)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(failed)?;
    tmp.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

/// Every run with a record, and its record's key.
fn records(store: &Store) -> Result<Vec<(String, FileKey)>, WorkError> {
    let dir = store.runs_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(WorkError::Read { path: dir, source }),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(id) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        // A run without a record is no run to judge.
        if let Ok(meta) = std::fs::metadata(plait_core::state::RunDir(entry.path()).state()) {
            out.push((id, FileKey::of(&meta)));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// What each task of `state` changes against where it started (the run's base, or its
/// start); nothing for a cleaned run,
/// for tasks a landing holds, and where git no longer has the commits.
fn work_of(repo: &Repository, state: &RunState) -> Vec<Change> {
    if state.cleaned {
        return Vec::new();
    }
    let tree_of = |id: &str| {
        Oid::from_str(id)
            .and_then(|oid| repo.find_commit(oid))
            .and_then(|c| c.tree())
    };
    let Ok(base) = tree_of(&state.base) else {
        return Vec::new();
    };
    let landed: Vec<Oid> = state
        .landed
        .iter()
        .filter_map(|l| Oid::from_str(&l.to).ok())
        .collect();
    let mut work = Vec::new();
    for task in &state.tasks {
        let Some(commit) = task.commit.as_deref() else {
            continue;
        };
        let Ok(oid) = Oid::from_str(commit) else {
            continue;
        };
        let held = landed
            .iter()
            .any(|&to| to == oid || repo.graph_descendant_of(to, oid).unwrap_or(false));
        if held {
            continue;
        }
        let Ok(tree) = tree_of(commit) else {
            continue;
        };
        let Ok(from) = plait_stages::collect::start_tree(repo, &base, task) else {
            continue;
        };
        let Ok(changes) = git::tree_changes(repo, &from, &tree) else {
            continue;
        };
        work.extend(changes.into_iter().map(|(path, entry)| Change {
            task: task.id.clone(),
            blob: entry.map(|(oid, _)| oid),
            path,
        }));
    }
    work
}

/// The index file's runs by id; an unreadable or other-format file is an empty index.
fn parse(text: &str) -> HashMap<String, IndexedRun> {
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return HashMap::new();
    }
    let mut runs: Vec<IndexedRun> = Vec::new();
    for line in lines {
        if let Some(rest) = line.strip_prefix("run ") {
            let Some((id, key)) = rest.split_once(' ') else {
                return HashMap::new();
            };
            runs.push(IndexedRun {
                id: id.to_string(),
                key: FileKey(key.to_string()),
                tips: Tips {
                    key: None,
                    at: Vec::new(),
                },
                work: Vec::new(),
            });
            continue;
        }
        if let Some(rest) = line.strip_prefix("tips ") {
            let mut fields = rest.split(' ');
            let key = fields.next().map(str::to_string);
            let at: Result<Vec<Oid>, _> = fields.map(Oid::from_str).collect();
            match (at, runs.last_mut()) {
                (Ok(at), Some(run)) => run.tips = Tips { key, at },
                _ => return HashMap::new(),
            }
            continue;
        }
        let change = line.strip_prefix("w ").and_then(|rest| {
            let mut fields = rest.splitn(3, ' ');
            let task = fields.next()?.to_string();
            let blob = match fields.next()? {
                "-" => None,
                hex => Some(Oid::from_str(hex).ok()?),
            };
            Some(Change {
                task,
                blob,
                path: unescape(fields.next()?),
            })
        });
        match (change, runs.last_mut()) {
            (Some(change), Some(run)) => run.work.push(change),
            _ => return HashMap::new(),
        }
    }
    runs.into_iter().map(|r| (r.id.clone(), r)).collect()
}

/// A path on one line: backslashes and newlines escaped.
fn escape(path: &str) -> String {
    path.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            },
            (c, false) => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_through_the_line_format() {
        for path in ["a b/c", "back\\slash", "new\nline", "trailing\\"] {
            assert_eq!(unescape(&escape(path)), path);
        }
    }

    #[test]
    fn the_index_reads_back_what_it_wrote() {
        let blob = Oid::from_str("0123456789abcdef0123456789abcdef01234567").unwrap();
        let index = WorkIndex {
            runs: vec![IndexedRun {
                id: "0abc12".to_string(),
                key: FileKey("1:2:3.000000004".to_string()),
                tips: Tips {
                    key: Some("5:6:7.000000008/-".to_string()),
                    at: vec![blob],
                },
                work: vec![
                    Change {
                        task: "a".to_string(),
                        blob: Some(blob),
                        path: "x/a b.txt".to_string(),
                    },
                    Change {
                        task: "b".to_string(),
                        blob: None,
                        path: "gone".to_string(),
                    },
                ],
            }],
        };
        let back = parse(&index.to_text());
        let run = &back["0abc12"];
        assert_eq!(run.key, index.runs[0].key);
        assert_eq!(run.tips, index.runs[0].tips);
        assert_eq!(run.work, index.runs[0].work);
        assert_eq!(index.runs_at(&[blob]), vec!["0abc12".to_string()]);
        assert!(parse("plait task-work 1\nrun x y\n").is_empty());
        assert!(parse(&format!("{HEADER}\nw a - orphan\n")).is_empty());

        let mut changes = BTreeMap::new();
        changes.insert("gone".to_string(), None);
        changes.insert("x/a b.txt".to_string(), Some((Oid::ZERO_SHA1, 0o100644)));
        let found = index.brought_in(&changes);
        assert_eq!(found["0abc12"], vec!["b".to_string()]);
    }
}
