//! Culprit search, after the merged checks fail. Each branch may pass its own checks while
//! their merge fails: one task renames a function, another calls its old name. plait
//! merges subsets of the merged branches onto the base (in memory and on a scratch branch,
//! as the merge stage does) and runs the failing checks on them in the checks pool, to
//! find each minimal set of tasks that breaks them, as a merge queue splits a failing
//! batch. First the fewest tasks whose holding out makes the rest pass (split the set, hold
//! out a half; when neither half alone is enough, narrow each with the other held out;
//! tried first as the guess of a single culprit, one check run per halving),
//! then, for each culprit, the partners it needs to break the checks (Zeller and
//! Hildebrandt's minimizing delta debugging, with the culprit as context). A tree passes
//! when its checks fail no worse than the base's (each passed, or failed exactly as it does
//! on the base): a check that fails on the base alone is no task's fault; the failing merge is tested once more
//! before anyone is blamed, and one that then passes is a flaky check.
//!
//! In a run in waves a task's work was made on top of the tasks it comes after, so it is
//! never merged without them: a set tested is closed as the merge closes it (a task whose
//! inputs are held out is held out too), the search holds out the later tasks before the
//! earlier ones, a culprit whose holding out helped only because its later tasks went
//! with it hands the blame down to the fewest of them, and a partner merged in brings
//! what it comes after.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use git2::Oid;

use crate::context::Context;
use crate::merge::{self, BranchInput, MergeSettings};
use crate::review::checks::checks_at;
use crate::review::checks::CheckPool;
use plait_core::cancel::Cancel;
use plait_core::refs::branch_ref;
use plait_core::state::{CheckResult, CulpritSet, Culprits, RunState};
use plait_plan::CheckSettings;

/// Why a search could not go on.
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    /// A merge of the search failed.
    #[error("merge failed: {0}")]
    Merge(#[from] merge::MergeError),
    /// The run was interrupted during the search.
    #[error("the culprit search was interrupted")]
    Interrupted,
    /// The repository cannot be used.
    #[error(transparent)]
    Repo(#[from] plait_core::git::RepoError),
    /// A git operation failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    /// The thread running a merge panicked or was dropped.
    #[error("the culprit search's merge panicked: {0}")]
    Panicked(#[from] tokio::task::JoinError),
}

/// One step of the search, for progress displays.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Step {
    pub(crate) run: String,
    /// What was tested: `base`, or the tasks merged onto it.
    pub tested: Vec<String>,
    pub(crate) passed: bool,
    /// Check runs so far.
    pub runs: u32,
    /// One line: what the step found.
    pub detail: String,
}

/// What a search needs: the run, its repository, the checks pool and the failing checks.
pub struct Search<'a> {
    /// The repository and plait's store in it.
    pub context: &'a Context,
    /// The run whose merged checks failed.
    pub state: &'a RunState,
    /// Where the checks run.
    pub pool: &'a CheckPool,
    /// The run's check settings with `merged` cut to the commands that failed.
    pub checks: CheckSettings,
    /// Where each test's logs go (`<n>/` under it).
    pub logs: PathBuf,
    /// Fires when the run is interrupted; the search stops at once.
    pub cancel: &'a Cancel,
    /// Told each step of the search as it is taken.
    pub report: &'a (dyn Fn(Step) + Send + Sync),
}

/// A set of branches, by index into the search's inputs, in merge order.
type Set = Vec<usize>;

/// The search's memory: every tree tested and how it went.
struct Tester<'a> {
    search: &'a Search<'a>,
    /// The branches, each after every branch that comes after it (`Waves::order`).
    inputs: &'a [BranchInput],
    waves: Waves,
    base: Oid,
    runs: u32,
    known: HashMap<Set, (bool, Vec<CheckResult>, PathBuf)>,
}

/// Which of the search's branches started from which (a task with `after`), by index.
struct Waves {
    /// For each branch, the branches its start holds.
    ups: Vec<Vec<usize>>,
}

impl Waves {
    /// `inputs` in the order the search takes them: each branch before the branches its
    /// start holds (a later task holds more), otherwise as given.
    fn order(inputs: &[BranchInput]) -> Vec<BranchInput> {
        let held = |b: &BranchInput| b.start.as_ref().map_or(0, |s| s.from.len());
        let mut sorted = inputs.to_vec();
        sorted.sort_by_key(|b| std::cmp::Reverse(held(b)));
        sorted
    }

    fn of(inputs: &[BranchInput]) -> Waves {
        let index: HashMap<&str, usize> = inputs
            .iter()
            .enumerate()
            .map(|(i, b)| (b.task.as_str(), i))
            .collect();
        let ups = inputs
            .iter()
            .map(|b| {
                b.start.as_ref().map_or_else(Vec::new, |s| {
                    s.from
                        .keys()
                        .filter_map(|t| index.get(t.as_str()).copied())
                        .collect()
                })
            })
            .collect();
        Waves { ups }
    }

    /// `set` as the merge takes it: without the branches whose inputs are not all in it.
    fn closed(&self, set: &[usize]) -> Set {
        let mut set = set.to_vec();
        loop {
            let before = set.len();
            let have = set.clone();
            set.retain(|&i| self.ups[i].iter().all(|u| have.contains(u)));
            if set.len() == before {
                return set;
            }
        }
    }

    /// `set` with what its branches started from: merging a branch in brings its inputs.
    fn with_ups(&self, set: &[usize]) -> Set {
        let mut out = set.to_vec();
        for &i in set {
            out.extend(self.ups[i].iter().copied());
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The branches that started from branch `i` (directly or through others).
    fn downs(&self, i: usize) -> Set {
        (0..self.ups.len())
            .filter(|&k| self.ups[k].contains(&i))
            .collect()
    }
}

impl<'a> Tester<'a> {
    /// Whether the failing checks pass with `set` merged onto the base (without the
    /// branches whose inputs it lacks, as the merge does); `fresh` runs them again even
    /// when this tree was tested.
    async fn test(&mut self, set: &[usize], fresh: bool) -> Result<bool, BisectError> {
        let mut key = self.waves.closed(set);
        key.sort_unstable();
        if !fresh {
            if let Some((passed, _, _)) = self.known.get(&key) {
                return Ok(*passed);
            }
        }
        if self.search.cancel.is_cancelled() {
            return Err(BisectError::Interrupted);
        }
        let commit = self.commit_of(&key).await?;
        self.runs += 1;
        let logs = self.search.logs.join(self.runs.to_string());
        let results = checks_at(
            self.search.pool,
            self.search.state,
            commit,
            &self.search.checks,
            &logs,
            self.search.cancel,
        )
        .await;
        // A tree whose checks fail only as they do on the base is no worse than it.
        let passed = !results.iter().any(CheckResult::failed_here);
        let tested: Vec<String> = if key.is_empty() {
            vec!["base".to_string()]
        } else {
            key.iter().map(|&i| self.inputs[i].task.clone()).collect()
        };
        (self.search.report)(Step {
            run: self.search.state.id.clone(),
            detail: format!(
                "{} {}: {}",
                if fresh { "again" } else { "test" },
                if key.is_empty() {
                    "the base alone".to_string()
                } else {
                    format!("{} task(s)", key.len())
                },
                if passed { "pass" } else { "fail" }
            ),
            tested,
            passed,
            runs: self.runs,
        });
        self.known.insert(key, (passed, results, logs));
        Ok(passed)
    }

    /// The commit of `set` merged onto the base, on the scratch branch.
    async fn commit_of(&self, set: &[usize]) -> Result<Oid, BisectError> {
        if set.is_empty() {
            return Ok(self.base);
        }
        let branches: Vec<BranchInput> = set.iter().map(|&i| self.inputs[i].clone()).collect();
        let (context, base) = (self.search.context.clone(), self.base);
        let scratch = plait_core::refs::bisect_branch(&self.search.state.id);
        let outcome = tokio::task::spawn_blocking(move || {
            let git = context.repo()?;
            let settings = MergeSettings {
                workdir: context.workdir(),
                branch: &scratch,
                base,
                branches: &branches,
                message: "plait: culprit search".to_string(),
            };
            merge::merge(&git, &settings).map_err(BisectError::from)
        })
        .await??;
        Ok(Oid::from_str(&outcome.commit)?)
    }

    /// A minimal part of `x` that fails with `context` merged too, given that `context`
    /// passes and `context` with all of `x` fails.
    fn minimize<'b>(
        &'b mut self,
        x: Set,
        context: Set,
    ) -> Pin<Box<dyn Future<Output = Result<Set, BisectError>> + Send + 'b>>
    where
        'a: 'b,
    {
        Box::pin(async move {
            if x.len() <= 1 {
                return Ok(x);
            }
            let (x1, x2) = x.split_at(x.len() / 2);
            let (x1, x2) = (x1.to_vec(), x2.to_vec());
            let waves = &self.waves;
            let with = |part: &Set| -> Set {
                let set: Set = context.iter().chain(part).copied().collect();
                waves.with_ups(&set)
            };
            let (with1, with2) = (with(&x1), with(&x2));
            if !self.test(&with1, false).await? {
                return self.minimize(x1, context).await;
            }
            if !self.test(&with2, false).await? {
                return self.minimize(x2, context).await;
            }
            // Both halves pass: the fault needs something of each.
            let m1 = self.minimize(x1, with2).await?;
            let with_m1: Set = context.iter().chain(&m1).copied().collect();
            let m2 = self.minimize(x2, self.waves.with_ups(&with_m1)).await?;
            Ok(m1.into_iter().chain(m2).collect())
        })
    }

    /// The fewest of `x` whose holding out (with `out`) makes the rest of `all` pass, given
    /// that holding out `out` and all of `x` passes and holding out `out` alone fails.
    /// Holding out, not merging in, keeps what a task needs from the others: a test that
    /// calls a function another task adds is not blamed for it.
    fn hold_out<'b>(
        &'b mut self,
        all: &'b [usize],
        x: Set,
        out: Set,
    ) -> Pin<Box<dyn Future<Output = Result<Set, BisectError>> + Send + 'b>>
    where
        'a: 'b,
    {
        Box::pin(async move {
            if x.len() <= 1 {
                return Ok(x);
            }
            let (x1, x2) = x.split_at(x.len() / 2);
            let (x1, x2) = (x1.to_vec(), x2.to_vec());
            let without = |part: &Set| -> Set {
                all.iter()
                    .copied()
                    .filter(|i| !out.contains(i) && !part.contains(i))
                    .collect()
            };
            if self.test(&without(&x1), false).await? {
                return self.hold_out(all, x1, out).await;
            }
            if self.test(&without(&x2), false).await? {
                return self.hold_out(all, x2, out).await;
            }
            // Neither half alone. If nothing has passed yet, the base may be the fault: no
            // use narrowing further when it fails on its own.
            if !self.any_passed() && !self.test(&[], false).await? {
                return Ok(x);
            }
            // Something of each half must go.
            let out2: Set = out.iter().chain(&x2).copied().collect();
            let c1 = self.hold_out(all, x1, out2).await?;
            let out1: Set = out.iter().chain(&c1).copied().collect();
            let c2 = self.hold_out(all, x2, out1).await?;
            Ok(c1.into_iter().chain(c2).collect())
        })
    }

    /// [`Tester::hold_out`] for the common case of culprits in one half at each split:
    /// when holding out the first half does not help, the second is taken without a test
    /// of its own. One check run per halving; the caller verifies the answer and falls
    /// back to the full search when the guess was wrong.
    fn hold_out_guess<'b>(
        &'b mut self,
        all: &'b [usize],
        x: Set,
    ) -> Pin<Box<dyn Future<Output = Result<Set, BisectError>> + Send + 'b>>
    where
        'a: 'b,
    {
        Box::pin(async move {
            if x.len() <= 1 {
                return Ok(x);
            }
            let (x1, x2) = x.split_at(x.len() / 2);
            let (x1, x2) = (x1.to_vec(), x2.to_vec());
            let without: Set = all.iter().copied().filter(|i| !x1.contains(i)).collect();
            if self.test(&without, false).await? {
                self.hold_out_guess(all, x1).await
            } else {
                self.hold_out_guess(all, x2).await
            }
        })
    }

    /// The checks that failed on the tree of `set`, its logs and the end of the failing
    /// output, if it was tested.
    fn failing(&self, set: &[usize]) -> Option<(Vec<String>, PathBuf, String)> {
        let mut key = self.waves.closed(set);
        key.sort_unstable();
        self.known.get(&key).map(|(_, results, logs)| {
            let failed: Vec<&CheckResult> = results.iter().filter(|c| c.failed_here()).collect();
            let tail: Vec<&str> = failed.iter().map(|c| c.tail.trim_end()).collect();
            (
                failed.iter().map(|c| c.command.clone()).collect(),
                logs.clone(),
                tail.join("\n"),
            )
        })
    }

    /// Whether any tree tested so far passed.
    fn any_passed(&self) -> bool {
        self.known.values().any(|(passed, _, _)| *passed)
    }
}

/// Finds the culprit sets among `inputs` (the branches of a merge whose checks failed).
pub async fn find(search: &Search<'_>, inputs: &[BranchInput]) -> Result<Culprits, BisectError> {
    let base = Oid::from_str(&search.state.base)?;
    let inputs = Waves::order(inputs);
    let mut tester = Tester {
        search,
        waves: Waves::of(&inputs),
        inputs: &inputs,
        base,
        runs: 0,
        known: HashMap::new(),
    };
    let outcome = hunt(&mut tester).await;
    if let Ok(repo) = search.context.repo() {
        if let Ok(mut r) = repo.find_reference(&branch_ref(&plait_core::refs::bisect_branch(
            &search.state.id,
        ))) {
            let _ = r.delete();
        }
    }
    let mut culprits = match outcome {
        Ok(culprits) => culprits,
        Err(_) if search.cancel.is_cancelled() => Culprits {
            stopped: true,
            ..Culprits::default()
        },
        Err(e) => return Err(e),
    };
    culprits.runs = tester.runs;
    Ok(culprits)
}

async fn hunt(tester: &mut Tester<'_>) -> Result<Culprits, BisectError> {
    let mut culprits = Culprits::default();
    let all: Set = (0..tester.inputs.len()).collect();
    // Run again before anyone is blamed: a pass now is a flaky check.
    if tester.test(&all, true).await? {
        culprits.flaky = tester.search.checks.merged.clone();
        return Ok(culprits);
    }
    // First the guess that one task is to blame, checked by testing the rest; when the
    // rest still fails, the full search (with every result so far remembered).
    let mut out = tester.hold_out_guess(&all, all.clone()).await?;
    let guessed: Set = all.iter().copied().filter(|i| !out.contains(i)).collect();
    if !tester.test(&guessed, false).await? {
        // Nothing has passed: the base may be at fault, and then there is nothing to find.
        if !tester.any_passed() && !tester.test(&[], false).await? {
            culprits.base_fails = tester.failing(&[]).map(|f| f.0).unwrap_or_default();
            return Ok(culprits);
        }
        out = tester.hold_out(&all, all.clone(), Vec::new()).await?;
    }
    let out = hand_down(tester, &all, out).await?;
    let held = tester.held_with(&out);
    let rest: Set = all.iter().copied().filter(|i| !held.contains(i)).collect();
    // The rest must pass; with nothing left that is the base alone, tested only when no
    // tree passed so far (a tree that passes proves the base is not the fault).
    if (!tester.any_passed() || rest.is_empty()) && !tester.test(&[], false).await? {
        culprits.base_fails = tester.failing(&[]).map(|f| f.0).unwrap_or_default();
        return Ok(culprits);
    }
    if !tester.test(&rest, false).await? {
        // Holding the culprits out did not help after all: the checks are not steady.
        culprits.flaky = tester.search.checks.merged.clone();
        return Ok(culprits);
    }
    for &c in &out {
        // Alone, or with partners from the rest: the fewest it needs to break the checks.
        let alone = tester.waves.with_ups(&[c]);
        let partners = if !tester.test(&alone, false).await? {
            Vec::new()
        } else {
            let with_rest: Set = std::iter::once(c).chain(rest.iter().copied()).collect();
            if tester.test(&with_rest, false).await? {
                Vec::new()
            } else {
                tester.minimize(rest.clone(), vec![c]).await?
            }
        };
        let tree: Set = std::iter::once(c).chain(partners.iter().copied()).collect();
        let tree = tester.waves.with_ups(&tree);
        let (checks, logs, tail) = tester
            .failing(&tree)
            .or_else(|| tester.failing(&all))
            .unwrap_or_default();
        culprits.sets.push(CulpritSet {
            tasks: vec![tester.inputs[c].task.clone()],
            partners: partners
                .iter()
                .map(|&i| tester.inputs[i].task.clone())
                .collect(),
            checks,
            logs,
            tail,
        });
    }
    Ok(culprits)
}

/// The culprits `out` with the blame handed down: a culprit whose holding out helped only
/// because the tasks that come after it went out with it is put back, and the fewest of
/// those tasks are held out in its place.
async fn hand_down(tester: &mut Tester<'_>, all: &Set, mut out: Set) -> Result<Set, BisectError> {
    'again: loop {
        for &c in &out {
            let downs: Set = tester
                .waves
                .downs(c)
                .into_iter()
                .filter(|d| !out.contains(d))
                .collect();
            if downs.is_empty() {
                continue;
            }
            let others: Set = out.iter().copied().filter(|&k| k != c).collect();
            // The culprit back in, what comes after it still out.
            let without_downs = tester.without(all, &others, &downs);
            if !tester.test(&without_downs, false).await? {
                continue;
            }
            let without_others = tester.without(all, &others, &[]);
            let blamed = if tester.test(&without_others, false).await? {
                Vec::new()
            } else {
                tester.hold_out(all, downs, others.clone()).await?
            };
            out = others.into_iter().chain(blamed).collect();
            continue 'again;
        }
        return Ok(out);
    }
}

impl Tester<'_> {
    /// `all` without `out` and `part`, before the merge closes it.
    fn without(&self, all: &[usize], out: &[usize], part: &[usize]) -> Set {
        all.iter()
            .copied()
            .filter(|i| !out.contains(i) && !part.contains(i))
            .collect()
    }

    /// The branches that holding out `out` keeps out of the merge: `out` and every
    /// branch that started from one of them.
    fn held_with(&self, out: &[usize]) -> Set {
        let all: Set = (0..self.inputs.len()).collect();
        let kept = self.waves.closed(&self.without(&all, out, &[]));
        all.into_iter().filter(|i| !kept.contains(i)).collect()
    }
}

/// The run's check settings cut to `failing` commands, for the search.
pub fn failing_only(checks: &CheckSettings, failing: &[String]) -> CheckSettings {
    CheckSettings {
        merged: failing.to_vec(),
        ..checks.clone()
    }
}
