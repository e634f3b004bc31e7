//! Stage 5: checks on each task's branch (in a full checkout), command reviewers, rounds of
//! changes, checks on the merged branch, and the gate `land` obeys.

use plait_core::state::{TaskState, Verdict};
use plait_stages::land::{self, LandOutcome, LandSettings, Refusal};

use crate::support::TestRepo;

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("lib/a.txt", "a\n"),
        ("lib/b.txt", "b\n"),
        ("Makefile", "check:\n\ttest -f lib/a.txt\n"),
    ])
}

fn plan(agent: &str, extra: &str) -> String {
    format!(
        "goal = \"g\"\n[defaults]\nagent = {{ exec = '''{agent}''' }}\n{extra}\n\
         [[task]]\nid = \"a\"\nprompt = \"fix a\"\nowns = [\"lib/a.txt\"]\n\
         [[task]]\nid = \"b\"\nprompt = \"fix b\"\nowns = [\"lib/b.txt\"]\n"
    )
}

#[test]
fn a_failing_task_check_goes_back_to_the_worker_until_it_passes() {
    let repo = sample();
    // Round 0 writes `bad`; a later round, told what failed, writes `good`.
    let agent = "if [ \"$PLAIT_ROUND\" = 0 ]; then echo bad > lib/$PLAIT_TASK.txt; else printf '%s\\n' \"$PLAIT_FEEDBACK\"; echo good > lib/$PLAIT_TASK.txt; fi";
    let state = repo.run(
        &plan(
            agent,
            // A check the base passes: one it fails already sends no task back.
            "[checks]\ntask = [\"! grep -q bad lib/$PLAIT_TASK.txt && test -f Makefile\"]\n\
             [review]\nrounds = 2\n",
        ),
        2,
    );
    for id in ["a", "b"] {
        let t = state.task(id).unwrap();
        assert_eq!(t.state, TaskState::Done, "{id}: {:?}", t.error);
        assert_eq!(t.rounds, 1);
        assert!(t.checks.iter().all(|c| c.passed), "{:?}", t.checks);
        let log = std::fs::read_to_string(&t.log).unwrap();
        assert!(
            log.contains("The check `! grep -q bad"),
            "the worker was told what failed: {log}"
        );
        assert_eq!(
            repo.tree_files(&t.branch)[&format!("lib/{id}.txt")],
            "good\n"
        );
    }
    assert_eq!(state.merge.as_ref().unwrap().included, ["a", "b"]);
    assert!(plait_stages::report::attention(&state).is_empty());
    // The check checkouts are gone after the run.
    assert_eq!(
        repo.git(&["worktree", "list"])
            .lines()
            .filter(|l| l.contains("/checks/"))
            .count(),
        0
    );
}

#[test]
fn checks_that_never_pass_fail_the_task_after_the_rounds() {
    let repo = sample();
    let state = repo.run(
        &plan(
            "echo bad > lib/$PLAIT_TASK.txt",
            "[checks]\ntask = [\"if grep -q bad lib/$PLAIT_TASK.txt; then echo nope; exit 1; fi\"]\n[review]\nrounds = 1\n",
        ),
        2,
    );
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Failed);
    assert_eq!(
        a.error.as_deref(),
        Some("its checks still fail after 1 round(s) of changes")
    );
    assert_eq!(
        a.checks[0].tail.trim_end(),
        "$ if grep -q bad lib/$PLAIT_TASK.txt; then echo nope; exit 1; fi\nnope"
    );
    assert!(state.merge.as_ref().unwrap().included.is_empty());
}

#[test]
fn merged_checks_catch_what_each_task_s_checks_miss() {
    let repo = sample();
    // Each task alone is fine; together they break the rule that only one may say `new`.
    let state = repo.run(
        &plan(
            "echo new > lib/$PLAIT_TASK.txt",
            "[checks]\ntask = [\"true\"]\nmerged = [\"test $(cat lib/a.txt lib/b.txt | grep -c new) -le 1\"]\nbisect = false\n",
        ),
        2,
    );
    assert!(state
        .tasks
        .iter()
        .all(|t| t.state == TaskState::Done && t.no_failure_of_its_own()));
    assert_eq!(state.merge.as_ref().unwrap().included, ["a", "b"]);
    assert_eq!(state.merged_checks.len(), 1);
    assert!(!state.merged_checks[0].passed);
    let attention = plait_stages::report::attention(&state);
    assert!(
        attention
            .iter()
            .any(|a| a.starts_with("merged checks failed")),
        "{attention:?}"
    );
    let mut state = state;
    for partial in [false, true] {
        let settings = LandSettings {
            workdir: &repo.path,
            into: "main",
            partial,
        };
        let outcome = land::land(&repo.repo(), &mut state, &settings).unwrap();
        let LandOutcome::Refused(Refusal::Gate(why)) = outcome else {
            panic!("landed with failing merged checks (partial={partial})")
        };
        assert!(
            why.iter().any(|w| matches!(
                w,
                land::Blocker::MergedCheckFailed(_) | land::Blocker::MergedChecksFailed(_)
            )),
            "{why:?}"
        );
    }
    assert_eq!(repo.read("lib/a.txt"), "a\n");
}

#[test]
fn a_command_reviewer_approves_requests_changes_and_rejects() {
    let repo = sample();
    // a: v1 first, v2 when asked; b: rejected outright.
    let agent = "if [ \"$PLAIT_ROUND\" = 0 ]; then echo v1 > lib/$PLAIT_TASK.txt; else echo v2 > lib/$PLAIT_TASK.txt; fi";
    let reviewer = "if [ $PLAIT_TASK = b ]; then echo 'wrong approach'; exit 2; fi; \
                    if grep -q '+v1' \"$PLAIT_DIFF\"; then echo 'lib/a.txt: say v2'; exit 1; fi; exit 0";
    let state = repo.run(
        &plan(
            agent,
            &format!("[review]\nagent = {{ exec = '''{reviewer}''' }}\nrounds = 2\n"),
        ),
        2,
    );
    let a = state.task("a").unwrap();
    assert_eq!(a.state, TaskState::Done);
    assert_eq!(a.rounds, 1);
    let review = a.review.as_ref().unwrap();
    assert_eq!(
        (review.verdict, review.by.as_str(), review.round),
        (Verdict::Approve, "command", 1)
    );
    let log = std::fs::read_to_string(a.log.with_file_name("review-0.log")).unwrap();
    assert!(log.contains("say v2"), "{log}");
    let b = state.task("b").unwrap();
    assert_eq!(b.state, TaskState::Rejected);
    assert_eq!(
        b.review.as_ref().unwrap().comments[0].body,
        "wrong approach"
    );
    let merge = state.merge.as_ref().unwrap();
    assert_eq!(merge.included, ["a"]);
    assert_eq!(repo.tree_files(&merge.branch)["lib/a.txt"], "v2\n");
    assert_eq!(
        repo.tree_files(&b.branch)["lib/b.txt"],
        "v1\n",
        "a rejected branch is kept"
    );
    let attention = plait_stages::report::attention(&state);
    assert!(
        attention
            .iter()
            .any(|a| a.contains("rejected") && a.contains('b')),
        "{attention:?}"
    );
}

#[test]
fn changes_requested_past_the_last_round_leave_the_task_out() {
    let repo = sample();
    let state = repo.run(
        &plan(
            "echo v1 > lib/$PLAIT_TASK.txt",
            "[review]\nrounds = 0\nagent = { exec = \"echo never happy; exit 1\" }\n",
        ),
        2,
    );
    for t in &state.tasks {
        assert_eq!(t.state, TaskState::Done);
        assert_eq!(t.verdict(), Some(Verdict::RequestChanges));
    }
    assert!(state.merge.as_ref().unwrap().included.is_empty());
    let attention = plait_stages::report::attention(&state);
    assert!(
        attention.iter().any(|a| a.contains("not approved")),
        "{attention:?}"
    );
}

#[test]
fn a_reviewer_command_without_a_verdict_counts_as_request_changes() {
    let repo = sample();
    let state = repo.run(
        &plan(
            "echo v1 > lib/$PLAIT_TASK.txt",
            "[review]\nrounds = 0\nagent = { exec = \"exit 7\" }\n",
        ),
        2,
    );
    let review = state.task("a").unwrap().review.clone().unwrap();
    assert_eq!(review.verdict, Verdict::RequestChanges);
    assert_eq!(
        review.note.as_deref(),
        Some("the reviewer command did not give a verdict: command exited with status 7")
    );
}

mod model {
    //! The model reviewer, against the mock model server.

    use plait_core::state::{TaskState, Verdict};
    use serde_json::json;

    use crate::mock::{edit, MockModel, Provider, ToolCall, Turn};
    use crate::support::{Plan, TestRepo};

    const KEY: &str = "sk-review-key";

    fn submit(verdict: &str, summary: &str, comments: serde_json::Value) -> Turn {
        Turn::Tools(vec![ToolCall::new(
            "submit_review",
            json!({"verdict": verdict, "summary": summary, "comments": comments}),
        )])
    }

    fn run(provider: Provider, mock: &MockModel) -> (TestRepo, plait_core::state::RunState) {
        let repo = TestRepo::with_files(&[("lib/a.py", "x = 1\n"), ("lib/b.py", "y = 1\n")]);
        let kind = if provider == Provider::Anthropic {
            "anthropic"
        } else {
            "openai"
        };
        let toml = Plan::new()
            .goal("Set everything to 2")
            .provider("mock", kind, &mock.url(), "K", "m")
            .set("defaults", "agent", "mock")
            .task("a")
            .prompt("Set x to 2")
            .owns(["lib/a.py"])
            .task("b")
            .prompt("Set y to 2")
            .owns(["lib/b.py"])
            .to_toml();
        let state = repo.run_with_env(&toml, 2, &|k| (k == "K").then(|| KEY.to_string()));
        (repo, state)
    }

    #[test]
    fn the_workers_model_reviews_requests_changes_then_approves() {
        for provider in [Provider::Anthropic, Provider::OpenAi] {
            let mock = MockModel::start(provider, KEY);
            mock.script(
                "a",
                vec![
                    Turn::Tools(vec![edit::str_replace("lib/a.py", "x = 1", "x = 3")]),
                    Turn::Text("set x".into()),
                    // Round 1, after the review asked for changes.
                    Turn::Tools(vec![edit::str_replace("lib/a.py", "x = 3", "x = 2")]),
                    Turn::Text("fixed".into()),
                ],
            );
            mock.script(
                "review:a",
                vec![
                    submit(
                        "request_changes",
                        "x must be 2",
                        json!([{"path": "lib/a.py", "line": 1, "body": "use 2, not 3"}]),
                    ),
                    submit("approve", "good", json!([])),
                ],
            );
            mock.script(
                "b",
                vec![
                    Turn::Tools(vec![edit::str_replace("lib/b.py", "y = 1", "y = 2")]),
                    Turn::Text("ok".into()),
                ],
            );
            // A malformed answer, then a rejection.
            mock.script(
                "review:b",
                vec![
                    Turn::Tools(vec![ToolCall::new(
                        "submit_review",
                        json!({"summary": "no verdict"}),
                    )]),
                    submit("reject", "deletes the module's public API", json!([])),
                ],
            );
            let (repo, state) = run(provider, &mock);
            assert_eq!(mock.problems(), Vec::<String>::new(), "{provider:?}");
            let a = state.task("a").unwrap();
            assert_eq!(
                (a.state, a.rounds),
                (TaskState::Done, 1),
                "{provider:?}: {:?}",
                a.error
            );
            assert_eq!(a.review.as_ref().unwrap().verdict, Verdict::Approve);
            assert_eq!(repo.tree_files(&a.branch)["lib/a.py"], "x = 2\n");
            // The worker's second round was told what the reviewer said.
            let round_one = mock
                .requests()
                .into_iter()
                .filter(|r| r.task.as_deref() == Some("a"))
                .nth(2)
                .unwrap();
            let text = round_one.body.to_string();
            assert!(
                text.contains("use 2, not 3") && text.contains("round 1"),
                "{text}"
            );
            // The review request carried the diff and the goal.
            let review = mock
                .requests()
                .into_iter()
                .find(|r| r.task.as_deref() == Some("review:a"))
                .unwrap();
            let body = review.body.to_string();
            assert!(
                body.contains("+x = 3") && body.contains("Set everything to 2"),
                "{body}"
            );
            let b = state.task("b").unwrap();
            assert_eq!(b.state, TaskState::Rejected);
            assert_eq!(
                b.review.as_ref().unwrap().note.as_deref(),
                Some("answered on attempt 2")
            );
            assert_eq!(state.merge.as_ref().unwrap().included, ["a"]);
            let usage = a.usage.as_ref().unwrap();
            assert_eq!(usage.turns, 6, "4 worker turns and 2 reviews: {usage:?}");
        }
    }

    #[test]
    fn the_reviewer_s_cost_counts_against_the_run_budget() {
        let mock = MockModel::start(Provider::Anthropic, KEY);
        mock.script(
            "a",
            vec![
                Turn::Tools(vec![edit::str_replace("lib/a.py", "x = 1", "x = 2")]),
                Turn::Text("done".into()),
            ],
        );
        mock.script("b", vec![Turn::Text("nothing".into())]);
        mock.script(
            "review:a",
            vec![submit("request_changes", "again", json!([]))],
        );
        let repo = TestRepo::with_files(&[("lib/a.py", "x = 1\n"), ("lib/b.py", "y = 1\n")]);
        // Two worker turns spend $0.0012, under the $0.0015 budget; the review's $0.0006
        // takes the run past it, so round 1 does not start.
        repo.max_cost.set(Some(0.0015));
        let toml = Plan::new()
            .goal("g")
            .provider("mock", "anthropic", &mock.url(), "K", "claude-sonnet-4-5")
            .set("defaults", "agent", "mock")
            .task("a")
            .prompt("Set x to 2")
            .owns(["lib/a.py"])
            .to_toml();
        let state = repo.run_with_env(&toml, 1, &|k| (k == "K").then(|| KEY.to_string()));
        let a = state.task("a").unwrap();
        assert_eq!(a.state, TaskState::Stopped, "{:?}", a.error);
        assert_eq!(mock.count("review:a"), 1);
        assert_eq!(mock.count("a"), 2, "round 1 never started");
        assert!((a.usage.as_ref().unwrap().cost_usd.unwrap() - 0.0018).abs() < 1e-9);
    }

    #[test]
    fn a_reviewer_that_never_answers_properly_counts_as_request_changes() {
        let mock = MockModel::start(Provider::Anthropic, KEY);
        mock.script(
            "a",
            vec![
                Turn::Tools(vec![edit::str_replace("lib/a.py", "x = 1", "x = 2")]),
                Turn::Text("done".into()),
            ],
        );
        mock.script("review:a", vec![Turn::Text("looks fine to me".into()); 3]);
        mock.script("b", vec![Turn::Text("nothing".into())]);
        let (_repo, state) = run(Provider::Anthropic, &mock);
        let a = state.task("a").unwrap();
        let review = a.review.as_ref().unwrap();
        assert_eq!(review.verdict, Verdict::RequestChanges);
        assert_eq!(
            review.note.as_deref(),
            Some("counted as request_changes: the answer did not call submit_review")
        );
        assert_eq!(
            mock.count("review:a"),
            3 * 3,
            "three reviews of three attempts, one per round"
        );
    }
}

#[test]
fn a_person_overrules_the_reviewer_and_land_merges_again() {
    let repo = sample();
    let plan = repo.plan(&plan(
        "echo v1 > lib/$PLAIT_TASK.txt",
        "[review]\nagent = { exec = 'if [ $PLAIT_TASK = b ]; then echo too bold; exit 2; fi' }\n\
         [checks]\nmerged = [\"cat lib/a.txt lib/b.txt\"]\n",
    ));
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "b was rejected: {}",
        crate::support::stderr(&out)
    );
    let run = crate::support::stdout(&out).trim().to_string();

    let review = crate::support::stdout(&repo.plait(&["review", &run]));
    assert!(
        review.contains("== b · rejected · reject (by the command reviewer)"),
        "{review}"
    );
    assert!(
        review.contains("too bold") && review.contains("+v1"),
        "{review}"
    );

    let refused = repo.plait(&["land", &run, "--into", "main"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(crate::support::stderr(&refused).contains("rejected"));

    let out = repo.plait(&["accept", &run, "b"]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    assert!(crate::support::stderr(&out).contains("merging again"));
    assert_eq!(
        (repo.read("lib/a.txt"), repo.read("lib/b.txt")),
        ("v1\n".to_string(), "v1\n".to_string())
    );
    let status: serde_json::Value = repo.status_json(&[&run]);
    assert_eq!(status["merge"]["included"], serde_json::json!(["a", "b"]));
    assert_eq!(status["merged_checks"][0]["passed"], true);
    assert_eq!(status["tasks"][1]["decision"]["verdict"], "approve");
}

#[test]
fn rejecting_by_hand_leaves_a_task_out_and_the_rest_lands() {
    let repo = sample();
    let plan = repo.plan(&plan("echo v1 > lib/$PLAIT_TASK.txt", ""));
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let run = crate::support::stdout(&out).trim().to_string();
    assert!(repo.plait(&["reject", &run, "a"]).status.success());
    // A person's reject is a decision: the rest lands without --partial.
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    assert_eq!(
        (repo.read("lib/a.txt"), repo.read("lib/b.txt")),
        ("a\n".to_string(), "v1\n".to_string())
    );
}

/// A command reviewer reads the task's directory (its diff, the worker's log) but writes
/// only a place of its own in it: it cannot rewrite the worker's log, the owned list or
/// anything plait hands the worker's next round.
#[test]
fn a_reviewer_reads_the_tasks_directory_but_changes_nothing_of_the_workers() {
    let repo = sample();
    let reviewer = "d=$(dirname \"$PLAIT_DIFF\"); grep -q lib \"$PLAIT_DIFF\" || exit 1; \
                    echo forged >> \"$d/agent.log\"; echo forged >> \"$d/owned.txt\"; \
                    echo mine > \"$d/roles/note.txt\" || exit 1; exit 0";
    let state = repo.run(
        &plan(
            "echo v1 > lib/$PLAIT_TASK.txt",
            &format!("[review]\nrounds = 0\nagent = {{ exec = '''{reviewer}''' }}\n"),
        ),
        2,
    );
    for t in &state.tasks {
        assert_eq!(t.verdict(), Some(Verdict::Approve), "{:?}", t.review);
        let dir = t.log.parent().unwrap();
        let log = std::fs::read_to_string(&t.log).unwrap_or_default();
        assert!(!log.contains("forged"), "{log}");
        let owned = std::fs::read_to_string(dir.join("owned.txt")).unwrap_or_default();
        assert!(!owned.contains("forged"), "{owned}");
        assert_eq!(
            std::fs::read_to_string(dir.join("roles/note.txt")).unwrap(),
            "mine\n"
        );
    }
}
