//! Stage 8: landing moves the target only when the run is clean, by fast-forward or by a
//! merge commit, and never overwrites the user's uncommitted work.

use plait_core::state::RunState;
use plait_stages::land::{self, LandOutcome, LandSettings, Refusal};

use crate::support::TestRepo;

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("lib/a.py", "a\n"),
        ("lib/b.py", "b\n"),
        ("README.md", "readme\n"),
    ])
}

const PLAN: &str = "[defaults]\nagent = { exec = 'echo changed >> lib/$PLAIT_TASK.py' }\n\
    [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"lib/a.py\"]\n\
    [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"lib/b.py\"]\n";

fn land(repo: &TestRepo, state: &mut RunState, into: &str, partial: bool) -> LandOutcome {
    let git = repo.repo();
    let settings = LandSettings {
        workdir: &repo.path,
        into,
        partial,
    };
    land::land(&git, state, &settings).unwrap()
}

#[test]
fn an_unmoved_checked_out_target_is_fast_forwarded_with_its_worktree() {
    let repo = sample();
    let mut state = repo.run(PLAN, 2);
    let merged = repo.git(&["rev-parse", &state.merged_branch()]);
    // Uncommitted work elsewhere survives the landing.
    repo.write("README.md", "my notes\n");
    let LandOutcome::Landed(record) = land(&repo, &mut state, "main", false) else {
        panic!("not landed")
    };
    assert!(record.fast_forward);
    assert_eq!(repo.git(&["rev-parse", "main"]), merged);
    assert_eq!(repo.read("lib/a.py"), "a\nchanged\n");
    assert_eq!(repo.read("README.md"), "my notes\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), "M README.md");
    assert!(matches!(
        land(&repo, &mut state, "main", false),
        LandOutcome::AlreadyLanded { .. }
    ));
}

#[test]
fn a_moved_target_gets_a_merge_commit_after_a_clean_merge() {
    let repo = sample();
    let mut state = repo.run(PLAN, 2);
    repo.write("README.md", "moved on\n");
    let moved = repo.commit_all("meanwhile");
    let LandOutcome::Landed(record) = land(&repo, &mut state, "main", false) else {
        panic!("not landed")
    };
    assert!(!record.fast_forward);
    assert_eq!(record.from, moved);
    let parents = repo.git(&["rev-list", "--parents", "-n", "1", "main"]);
    let merged = repo.git(&["rev-parse", &state.merged_branch()]);
    assert_eq!(parents, format!("{} {moved} {merged}", record.to));
    let files = repo.tree_files("main");
    assert_eq!(files["README.md"], "moved on\n");
    assert_eq!(files["lib/b.py"], "b\nchanged\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
}

#[test]
fn a_moved_target_that_conflicts_is_refused_and_left_alone() {
    let repo = sample();
    let mut state = repo.run(PLAN, 2);
    repo.write("lib/a.py", "a\nmine\n");
    let moved = repo.commit_all("conflicting");
    let LandOutcome::Refused(Refusal::Conflicts(conflicts)) =
        land(&repo, &mut state, "main", false)
    else {
        panic!("not refused")
    };
    assert_eq!(conflicts.len(), 1);
    assert_eq!(
        (conflicts[0].path.as_str(), conflicts[0].kind.as_str()),
        ("lib/a.py", "content")
    );
    assert_eq!(conflicts[0].tasks, ["a"]);
    assert_eq!(repo.git(&["rev-parse", "main"]), moved);
    assert!(state.landed.is_empty());
}

#[test]
fn uncommitted_changes_in_paths_the_landing_changes_stop_it() {
    let repo = sample();
    let mut state = repo.run(PLAN, 2);
    let before = repo.git(&["rev-parse", "main"]);
    repo.write("lib/a.py", "my own edit\n");
    let LandOutcome::Refused(Refusal::Dirty { paths, .. }) = land(&repo, &mut state, "main", false)
    else {
        panic!("not refused")
    };
    assert_eq!(paths, ["lib/a.py"]);
    assert_eq!(repo.git(&["rev-parse", "main"]), before);
    assert_eq!(repo.read("lib/a.py"), "my own edit\n");
}

#[test]
fn a_branch_that_is_not_checked_out_is_moved_by_compare_and_swap() {
    let repo = sample();
    repo.git(&["branch", "release"]);
    let mut state = repo.run(PLAN, 2);
    let LandOutcome::Landed(record) = land(&repo, &mut state, "release", false) else {
        panic!("not landed")
    };
    assert!(record.fast_forward);
    assert_eq!(
        repo.git(&["rev-parse", "release"]),
        repo.git(&["rev-parse", &state.merged_branch()])
    );
    assert_eq!(
        repo.read("lib/a.py"),
        "a\n",
        "the checked-out main is untouched"
    );
}

#[test]
fn the_gate_refuses_a_run_that_needs_attention_unless_partial() {
    let repo = sample();
    let plan = PLAN.replace(
        "owns = [\"lib/b.py\"]",
        "owns = [\"lib/b.py\"]\nagent = { exec = 'echo x >> lib/b.py; echo stray > README.md' }",
    );
    let mut state = repo.run(&plan, 2);
    let LandOutcome::Refused(Refusal::Gate(why)) = land(&repo, &mut state, "main", false) else {
        panic!("not refused")
    };
    assert!(
        why.iter().any(|w| matches!(
            w,
            plait_stages::land::Blocker::Tasks { trouble: plait_stages::land::Trouble::Violations, tasks }
                if tasks == &["b"]
        )),
        "{why:?}"
    );
    let LandOutcome::Landed(_) = land(&repo, &mut state, "main", true) else {
        panic!("--partial did not land")
    };
    assert_eq!(
        repo.read("README.md"),
        "readme\n",
        "the violation is not landed"
    );
    // Nor is the task's owned change: a task with violations is out of the merge (and so
    // of --partial) until a person accepts it.
    assert_eq!(repo.read("lib/b.py"), "b\n");
}
