//! `plait review` as a person reads it: a summary table first, then the diffs through the
//! user's pager on a terminal (`--no-pager`, `--stat`); "checks not reached" for a task that
//! ended before its checks; and `plait log --checks` saying how every round's checks ended.

use std::fmt::Write as _;
use std::process::Command;

use crate::support::{stderr, stdout, TestRepo};

fn sample() -> TestRepo {
    TestRepo::with_files(&[("lib/a.txt", "a\n"), ("lib/b.txt", "b\n")])
}

/// A plan of tasks `a` and `b`, each owning `lib/<id>.txt`, all running `agent`.
fn plan(agent: &str, extra: &str) -> String {
    let mut plan = format!(
        "goal = \"g\"\n[defaults]\nagent = {{ exec = '''{agent}''' }}\n\
         [review]\nagent = \"off\"\n{extra}\n"
    );
    for id in ["a", "b"] {
        let _ = writeln!(
            plan,
            "[[task]]\nid = \"{id}\"\nprompt = \"fix {id}\"\nowns = [\"lib/{id}.txt\"]"
        );
    }
    plan
}

/// Runs `toml` with the real binary; the run's id.
fn run(repo: &TestRepo, toml: &str) -> String {
    let path = repo.plan(toml);
    let out = repo.plait(&["run", path.to_str().unwrap(), "-j", "2"]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "plait run: {}",
        stderr(&out)
    );
    stdout(&out).trim().to_string()
}

/// `a` fails before its checks; `b` writes two lines over one and passes one check of two.
fn a_fails_b_changes(repo: &TestRepo) -> String {
    let agent = "if [ \"$PLAIT_TASK\" = a ]; then exit 1; fi; printf 'one\\ntwo\\n' > lib/b.txt";
    let extra = "rounds = 0\n[checks]\ntask = [\"true\", \"false\"]\n";
    run(repo, &plan(agent, extra))
}

#[test]
fn the_summary_table_comes_first_and_stat_prints_it_alone() {
    let repo = sample();
    let run = a_fails_b_changes(&repo);
    let out = repo.plait(&["review", &run, "--stat"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        rows,
        [
            vec!["TASK", "STATE", "VERDICT", "CHECKS", "FILES", "+", "-"],
            vec![
                "a",
                "failed",
                "not reviewed",
                "not reached",
                "0",
                "+0",
                "-0"
            ],
            vec!["b", "done", "not reviewed", "1/2", "1", "+2", "-1"],
        ],
        "{table}"
    );

    // Not on a terminal: the table, a blank line, then every task's part as before.
    let whole = stdout(&repo.plait(&["review", &run]));
    let rest = whole
        .strip_prefix(&format!("{table}\n"))
        .unwrap_or_else(|| panic!("{whole}"));
    assert!(
        rest.starts_with("== a · failed · not reviewed · checks not reached · "),
        "{rest}"
    );
    assert!(
        rest.contains("== b · done · not reviewed · checks 1/2 passed · "),
        "{rest}"
    );
    assert!(rest.contains("+one\n+two\n"), "{rest}");
    // `--no-pager` changes nothing off a terminal, and a pager set is not used there.
    let called = repo.path.join("pager-called");
    let pager = format!("touch {}; cat", called.display());
    let no_pager = repo.plait_env(&["review", &run, "--no-pager"], &[("GIT_PAGER", &pager)]);
    assert_eq!(stdout(&no_pager), whole);
    let piped = repo.plait_env(&["review", &run], &[("GIT_PAGER", &pager)]);
    assert_eq!(stdout(&piped), whole);
    assert!(!called.exists(), "the pager ran off a terminal");
}

#[test]
fn on_a_terminal_review_goes_through_the_users_pager() {
    let repo = sample();
    let run = a_fails_b_changes(&repo);
    let paged = repo.path.join("paged.txt");
    let pager = repo.path.join("pager.sh");
    std::fs::write(
        &pager,
        format!("echo \"LESS=$LESS\" > {0}; cat >> {0}\n", paged.display()),
    )
    .unwrap();
    let review = |extra: &str| {
        let command = format!("{} review {run}{extra}", env!("CARGO_BIN_EXE_plait"));
        Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .current_dir(&repo.path)
            .env("NO_COLOR", "1")
            .env("GIT_PAGER", format!("sh {}", pager.display()))
            .env_remove("LESS")
            .output()
            .expect("script runs")
    };
    let out = review("");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&paged).expect("the pager was called");
    assert!(text.starts_with("LESS=FRX\nTASK "), "{text}");
    assert!(
        text.contains("== b · done · not reviewed · checks 1/2 passed"),
        "{text}"
    );
    assert!(!stdout(&out).contains("== b"), "{}", stdout(&out));

    std::fs::remove_file(&paged).unwrap();
    let out = review(" --no-pager");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!paged.exists(), "--no-pager still paged");
    assert!(stdout(&out).contains("== b · done"), "{}", stdout(&out));
}

#[test]
fn log_checks_says_how_every_rounds_checks_ended() {
    let repo = sample();
    // Round 0 leaves `broken`, which makes the second check hang past its timeout; round 1
    // fixes it.
    let agent = "if [ \"$PLAIT_ROUND\" = 0 ]; then echo broken > lib/$PLAIT_TASK.txt; else echo fixed > lib/$PLAIT_TASK.txt; fi";
    let extra = "rounds = 1\n[checks]\ntimeout = \"1s\"\n\
                 task = [\"echo checking\", \"if grep -q broken lib/$PLAIT_TASK.txt; then sleep 30; fi\"]\n";
    let run = run(&repo, &plan(agent, extra));
    let out = repo.plait(&["log", &run, "a", "--checks"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let checks = stdout(&out);
    let outcomes: Vec<&str> = checks
        .lines()
        .filter(|l| l.starts_with("== "))
        .map(|l| l.rsplit_once(" · ").unwrap().0)
        .map(|l| l.rsplit_once(" · ").unwrap().1)
        .collect();
    assert_eq!(
        outcomes,
        [
            "(outcome not recorded)",
            "timed out after 1s",
            "passed",
            "passed"
        ],
        "{checks}"
    );
}
