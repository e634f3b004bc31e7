//! Stage 7: merge. All successful task branches are combined into `plait/<run>/merged`.
//! Changes to paths no other branch touched are applied straight onto the base tree, so
//! their order does not matter and no file is merged twice. A branch that touches a path
//! an earlier branch changed goes through `git merge-tree --write-tree`, git's own merge
//! engine, so the result is exactly git's; a conflict keeps that branch out of the merged
//! tree and is reported with its path, kind, tasks and marked-up hunks. Conflicted content
//! is never committed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use git2::{build::TreeUpdateBuilder, FileMode, Oid, Repository, Tree};

use plait_core::git::{mode, run_git, signatures, GitCliError, RepoError};
use plait_core::refs::branch_ref;
use plait_core::state::{Conflict, MergeOutcome};

pub mod run;

/// Why plait could not merge (a conflict is not an error: it is in the outcome).
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The git CLI failed.
    #[error(transparent)]
    Cli(#[from] GitCliError),
    /// The output of `git merge-tree` could not be read; the message says how.
    #[error("could not read the output of git merge-tree: {0}")]
    Parse(String),
    /// A git operation failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    /// The repository cannot be used.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// A group's branch was not merged (its id).
    #[error("{0} was not merged")]
    NotMerged(String),
}

/// One branch to merge.
#[derive(Debug, Clone)]
pub struct BranchInput {
    /// The task whose branch it is.
    pub task: String,
    /// The branch's name.
    pub branch: String,
    /// The commit to merge.
    pub commit: Oid,
    /// Where the branch started when not at the base (a task with `after`).
    pub start: Option<Start>,
}

/// A branch's starting point when it is not the base: the base with other tasks' work
/// merged in. Its own work is what it changes against `commit`; it can only be merged
/// together with exactly the work it started from.
#[derive(Debug, Clone)]
pub struct Start {
    pub(crate) commit: Oid,
    /// The tasks whose work the start holds, each at the commit it held.
    pub from: BTreeMap<String, Oid>,
}

impl BranchInput {
    /// The branch of a task as its record has it (its commit, and its start when it has
    /// one); `None` without a commit.
    pub fn of(task: &plait_core::state::TaskRecord) -> Option<BranchInput> {
        let commit = Oid::from_str(task.commit.as_deref()?).ok()?;
        let start = match &task.start {
            None => None,
            Some(start) => Some(Start {
                commit: Oid::from_str(start).ok()?,
                from: task
                    .start_from
                    .iter()
                    .filter_map(|(id, c)| Some((id.clone(), Oid::from_str(c).ok()?)))
                    .collect(),
            }),
        };
        Some(BranchInput {
            task: task.id.clone(),
            branch: task.branch.clone(),
            commit,
            start,
        })
    }
}

/// What to merge and where to put it.
pub struct MergeSettings<'a> {
    /// The repository's working directory, where the git CLI runs.
    pub workdir: &'a Path,
    /// The branch to write, `plait/<run>/merged`.
    pub branch: &'a str,
    /// The commit the merge starts from.
    pub base: Oid,
    /// The branches to merge, in order.
    pub branches: &'a [BranchInput],
    /// The merged commit's message.
    pub message: String,
}

use plait_core::git::{tree_changes, Entry};

/// `branches` in an order where each comes after the branches its start holds, otherwise
/// as given.
fn in_start_order(branches: &[BranchInput]) -> Vec<&BranchInput> {
    let mut placed: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(branches.len());
    let present: HashSet<&str> = branches.iter().map(|b| b.task.as_str()).collect();
    let mut rest: Vec<&BranchInput> = branches.iter().collect();
    while !rest.is_empty() {
        let before = rest.len();
        rest.retain(|b| {
            let ready = b.start.as_ref().is_none_or(|s| {
                s.from
                    .keys()
                    .all(|k| placed.contains(k.as_str()) || !present.contains(k.as_str()))
            });
            if ready {
                placed.insert(b.task.as_str());
                out.push(*b);
            }
            !ready
        });
        if rest.len() == before {
            // A cycle cannot be in a validated plan; keep what is left as given.
            out.append(&mut rest);
        }
    }
    out
}

/// Merges `settings.branches` onto the base in order and writes the merged branch. A
/// branch with a start goes in after the branches its start holds and only when they went
/// in at the commits it started from (else it is `waiting`); its own work is merged with
/// its start as the merge base.
pub fn merge(repo: &Repository, settings: &MergeSettings<'_>) -> Result<MergeOutcome, MergeError> {
    let base = repo.find_commit(settings.base)?;
    let base_tree = base.tree()?;
    let mut merging = Merging::default();
    // The tasks of a wave share their start: its tree is read once.
    let mut starts: HashMap<Oid, Tree<'_>> = HashMap::new();
    for input in in_start_order(settings.branches) {
        let Some(from) = merging.start_tree(repo, input, &base_tree, &mut starts)? else {
            merging.waiting.push(input.task.clone());
            continue;
        };
        let tree = repo.find_commit(input.commit)?.tree()?;
        let changes = tree_changes(repo, &from, &tree)?;
        if changes.is_empty() {
            merging.taken.insert(&input.task, input.commit);
            continue;
        }
        if !changes.keys().any(|p| overlaps(&merging.merged, p)) {
            merging.take_disjoint(input, changes);
            continue;
        }
        merging.merge_overlapping(repo, settings, (&base, &base_tree), input, &changes)?;
    }
    let commit = merging.commit(repo, settings, (&base, &base_tree))?;
    repo.reference(&branch_ref(settings.branch), commit, true, "plait: merged")?;
    Ok(MergeOutcome {
        branch: settings.branch.to_string(),
        commit: commit.to_string(),
        included: merging.included.iter().map(|i| i.task.clone()).collect(),
        excluded: merging.excluded,
        conflicts: merging.conflicts,
        waiting: merging.waiting,
        commits: merging
            .included
            .iter()
            .map(|i| (i.task.clone(), i.commit.to_string()))
            .collect(),
    })
}

/// What [`merge`] has gathered so far, branch by branch.
#[derive(Default)]
struct Merging<'a> {
    /// Path → its entry in the merged tree (None: deleted).
    merged: BTreeMap<String, Entry>,
    /// Path → the tasks that changed it.
    touched: HashMap<String, Vec<String>>,
    included: Vec<&'a BranchInput>,
    /// Every branch whose work is in the merge (those that change nothing too), by commit.
    taken: HashMap<&'a str, Oid>,
    excluded: Vec<String>,
    waiting: Vec<String>,
    conflicts: Vec<Conflict>,
}

impl<'a> Merging<'a> {
    /// The tree `input`'s work is measured from: its start's (read once into `starts`), or
    /// the base's; `None` while the branches its start holds are not all in at the commits
    /// it started from.
    fn start_tree<'r>(
        &self,
        repo: &'r Repository,
        input: &BranchInput,
        base_tree: &Tree<'r>,
        starts: &mut HashMap<Oid, Tree<'r>>,
    ) -> Result<Option<Tree<'r>>, MergeError> {
        Ok(Some(match &input.start {
            Some(start) => {
                let whole = start
                    .from
                    .iter()
                    .all(|(task, commit)| self.taken.get(task.as_str()) == Some(commit));
                if !whole {
                    return Ok(None);
                }
                match starts.get(&start.commit) {
                    Some(tree) => tree.clone(),
                    None => {
                        let tree = repo.find_commit(start.commit)?.tree()?;
                        starts.insert(start.commit, tree.clone());
                        tree
                    }
                }
            }
            None => base_tree.clone(),
        }))
    }

    /// Takes `input`'s `changes`, which meet nothing merged so far, straight onto the
    /// merged tree.
    fn take_disjoint(&mut self, input: &'a BranchInput, changes: BTreeMap<String, Entry>) {
        for (path, entry) in changes {
            self.touched
                .entry(path.clone())
                .or_default()
                .push(input.task.clone());
            self.merged.insert(path, entry);
        }
        self.taken.insert(&input.task, input.commit);
        self.included.push(input);
    }

    /// The slow path: git's engine merges what is merged so far with `input`, from where
    /// the branch started; its `changes` go in, or its conflicts keep it out.
    fn merge_overlapping(
        &mut self,
        repo: &Repository,
        settings: &MergeSettings<'_>,
        (base, base_tree): (&git2::Commit<'_>, &Tree<'_>),
        input: &'a BranchInput,
        changes: &BTreeMap<String, Entry>,
    ) -> Result<(), MergeError> {
        let ours = write_tree(repo, base_tree, &self.merged)?;
        let who = signatures(repo)?;
        let ours_commit = repo.commit(
            None,
            &who.author,
            &who.committer,
            "plait: merge in progress",
            &repo.find_tree(ours)?,
            &[base],
        )?;
        repo.reference(
            &branch_ref(settings.branch),
            ours_commit,
            true,
            "plait: merge in progress",
        )?;
        // Full ref names label the conflict markers and cannot be mistaken for a tag.
        let theirs = match repo.refname_to_id(&branch_ref(&input.branch)) {
            Ok(id) if id == input.commit => branch_ref(&input.branch),
            _ => input.commit.to_string(),
        };
        let merge_base = input.start.as_ref().map_or(settings.base, |s| s.commit);
        let result = merge_tree(
            settings.workdir,
            Some(merge_base),
            &branch_ref(settings.branch),
            &theirs,
        )?;
        if result.conflicts.is_empty() {
            let result_tree = repo.find_tree(result.tree)?;
            self.merged = tree_changes(repo, base_tree, &result_tree)?;
            for path in changes.keys() {
                self.touched
                    .entry(path.clone())
                    .or_default()
                    .push(input.task.clone());
            }
            self.taken.insert(&input.task, input.commit);
            self.included.push(input);
        } else {
            self.exclude(repo, input, result);
        }
        Ok(())
    }

    /// Keeps `input` out of the merge, its conflicts recorded with the tasks that changed
    /// each path.
    fn exclude(&mut self, repo: &Repository, input: &BranchInput, result: TreeMerge) {
        for raw in result.conflicts {
            let mut tasks = self.touched.get(&raw.path).cloned().unwrap_or_default();
            if tasks.is_empty() {
                tasks = tasks_near(&self.touched, &raw.path);
            }
            tasks.push(input.task.clone());
            self.conflicts.push(Conflict {
                hunks: conflict_hunks(repo, result.tree, &raw.path),
                tasks,
                ..raw.into_conflict()
            });
        }
        self.excluded.push(input.task.clone());
    }

    /// The merged branch's commit: the base when nothing went in, the one branch that went
    /// in, the last of a line of tasks each started from the one before, else a merge
    /// commit whose parents are the base and the branches no other included branch
    /// started from.
    fn commit(
        &self,
        repo: &Repository,
        settings: &MergeSettings<'_>,
        (base, base_tree): (&git2::Commit<'_>, &Tree<'_>),
    ) -> Result<Oid, MergeError> {
        let included = &self.included;
        // The branches no other included branch started from: the merge commit's parents.
        let heads: Vec<&BranchInput> = included
            .iter()
            .copied()
            .filter(|input| {
                !included.iter().any(|other| {
                    other
                        .start
                        .as_ref()
                        .is_some_and(|s| s.from.get(&input.task) == Some(&input.commit))
                })
            })
            .collect();
        Ok(if included.is_empty() {
            settings.base
        } else if included.len() == 1 {
            // One branch merged onto its own base is that branch.
            included[0].commit
        } else {
            let tree = repo.find_tree(write_tree(repo, base_tree, &self.merged)?)?;
            match heads.as_slice() {
                // A line of tasks each started from the one before: the last is the merge.
                [head] if repo.find_commit(head.commit)?.tree_id() == tree.id() => head.commit,
                _ => {
                    let mut parents = vec![base.clone()];
                    for input in &heads {
                        parents.push(repo.find_commit(input.commit)?);
                    }
                    let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
                    let who = signatures(repo)?;
                    repo.commit(
                        None,
                        &who.author,
                        &who.committer,
                        &settings.message,
                        &tree,
                        &parents,
                    )?
                }
            }
        })
    }
}

/// Whether changing `path` meets a change already merged: the same path, a file where
/// the other has a directory, or the reverse.
fn overlaps(merged: &BTreeMap<String, Entry>, path: &str) -> bool {
    if merged.contains_key(path) {
        return true;
    }
    let below = format!("{path}/");
    if merged
        .range(below.clone()..)
        .next()
        .is_some_and(|(k, _)| k.starts_with(&below))
    {
        return true;
    }
    path.match_indices('/')
        .any(|(i, _)| merged.contains_key(&path[..i]))
}

/// The tasks that touched a path inside or around `path`.
fn tasks_near(touched: &HashMap<String, Vec<String>>, path: &str) -> Vec<String> {
    let mut tasks: Vec<String> = touched
        .iter()
        .filter(|(p, _)| p.starts_with(&format!("{path}/")) || path.starts_with(&format!("{p}/")))
        .flat_map(|(_, t)| t.iter().cloned())
        .collect();
    tasks.sort();
    tasks.dedup();
    tasks
}

/// Writes the tree `base` with `changes` applied.
pub(crate) fn write_tree(
    repo: &Repository,
    base: &Tree<'_>,
    changes: &BTreeMap<String, Entry>,
) -> Result<Oid, MergeError> {
    if changes.is_empty() {
        return Ok(base.id());
    }
    let mut update = TreeUpdateBuilder::new();
    for (path, entry) in changes {
        match entry {
            Some((oid, m)) => {
                update.upsert(path, *oid, file_mode(*m));
            }
            None => {
                update.remove(path);
            }
        }
    }
    Ok(update.create_updated(repo, base)?)
}

fn file_mode(m: u32) -> FileMode {
    match m {
        mode::EXEC => FileMode::BlobExecutable,
        mode::LINK => FileMode::Link,
        mode::GITLINK => FileMode::Commit,
        _ => FileMode::Blob,
    }
}

/// A conflict as `git merge-tree` reports it.
#[derive(Debug, Clone)]
pub struct RawConflict {
    /// The conflicted path.
    pub path: String,
    pub(crate) stages: Vec<u8>,
    pub(crate) types: Vec<String>,
    pub(crate) messages: Vec<String>,
}

impl RawConflict {
    fn kind(&self) -> String {
        let named = self
            .types
            .iter()
            .map(|t| t.trim_start_matches("CONFLICT (").trim_end_matches(')'))
            .find(|t| *t != "contents");
        match (named, self.stages.as_slice()) {
            (Some(t), _) => t.to_string(),
            (None, [2, 3]) => "add/add".to_string(),
            (None, [1, 2]) | (None, [1, 3]) => "modify/delete".to_string(),
            _ => "content".to_string(),
        }
    }

    /// The conflict without tasks or hunks, which only the caller knows.
    pub fn into_conflict(self) -> Conflict {
        Conflict {
            kind: self.kind(),
            message: self.messages.join("\n"),
            path: self.path,
            tasks: Vec::new(),
            hunks: String::new(),
        }
    }
}

/// The result of `git merge-tree --write-tree`: the tree (with markers where conflicted)
/// and the conflicts.
#[derive(Debug, Clone)]
pub struct TreeMerge {
    /// The merged tree, with conflict markers where conflicted.
    pub tree: Oid,
    /// The conflicts, one per path.
    pub conflicts: Vec<RawConflict>,
}

/// Runs `git merge-tree --write-tree` on two commit-ishes, with `base` as the merge base
/// when given.
pub fn merge_tree(
    workdir: &Path,
    base: Option<Oid>,
    ours: &str,
    theirs: &str,
) -> Result<TreeMerge, MergeError> {
    let base_arg = base.map(|b| format!("--merge-base={b}"));
    let mut args = vec!["merge-tree", "-z", "--write-tree"];
    if let Some(b) = &base_arg {
        args.push(b);
    }
    args.extend([ours, theirs]);
    let out = run_git(workdir, &args, &[1])?;
    parse_merge_tree(&out.stdout)
}

fn parse_merge_tree(stdout: &[u8]) -> Result<TreeMerge, MergeError> {
    let text = String::from_utf8_lossy(stdout);
    let mut tokens = text.split('\0');
    let bad = |what: &str| MergeError::Parse(what.to_string());
    let tree = tokens.next().ok_or_else(|| bad("no tree id"))?;
    let tree = Oid::from_str(tree.trim()).map_err(|_| bad("bad tree id"))?;
    let mut by_path: BTreeMap<String, RawConflict> = BTreeMap::new();
    for token in tokens.by_ref() {
        if token.is_empty() {
            break;
        }
        let (meta, path) = token
            .split_once('\t')
            .ok_or_else(|| bad("bad conflict entry"))?;
        let stage = meta
            .rsplit(' ')
            .next()
            .and_then(|s| s.parse::<u8>().ok())
            .ok_or_else(|| bad("bad stage"))?;
        by_path
            .entry(path.to_string())
            .or_insert_with(|| RawConflict {
                path: path.to_string(),
                stages: Vec::new(),
                types: Vec::new(),
                messages: Vec::new(),
            })
            .stages
            .push(stage);
    }
    let rest: Vec<&str> = tokens.collect();
    let mut i = 0;
    while i < rest.len() && !rest[i].is_empty() {
        let n: usize = rest[i].parse().map_err(|_| bad("bad message count"))?;
        let paths = rest
            .get(i + 1..i + 1 + n)
            .ok_or_else(|| bad("short message"))?;
        let kind = rest.get(i + 1 + n).ok_or_else(|| bad("short message"))?;
        let message = rest.get(i + 2 + n).ok_or_else(|| bad("short message"))?;
        if kind.starts_with("CONFLICT") {
            for path in paths {
                if let Some(c) = by_path.get_mut(*path) {
                    c.types.push(kind.to_string());
                    c.messages.push(message.trim_end().to_string());
                }
            }
        }
        i += 3 + n;
    }
    Ok(TreeMerge {
        tree,
        conflicts: by_path.into_values().collect(),
    })
}

/// The marked-up regions of a conflicted file in `tree`, with three lines of context.
fn conflict_hunks(repo: &Repository, tree: Oid, path: &str) -> String {
    let Ok(entry) = repo
        .find_tree(tree)
        .and_then(|t| t.get_path(Path::new(path)))
    else {
        return String::new();
    };
    let Ok(blob) = repo.find_blob(entry.id()) else {
        return String::new();
    };
    let text = String::from_utf8_lossy(blob.content());
    let lines: Vec<&str> = text.lines().collect();
    let mut keep = vec![false; lines.len()];
    let mut open: Option<usize> = None;
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("<<<<<<< ") {
            open = Some(i);
        } else if line.starts_with(">>>>>>> ") {
            if let Some(start) = open.take() {
                let from = start.saturating_sub(3);
                let to = (i + 3).min(lines.len() - 1);
                keep[from..=to].iter_mut().for_each(|k| *k = true);
            }
        }
    }
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if keep[i] {
            if i > 0 && !keep[i - 1] && !out.is_empty() {
                out.push_str("...\n");
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
