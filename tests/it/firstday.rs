//! A newcomer's first day, through the real binary: a failure names its cause where the
//! user looks (`status`, `review`, `plait log`), the conventions people expect
//! (`completions`, `run --dry-run`, `plan --check`, `review --attention | --task`), and
//! the small things (a plain Ctrl-C warning in a pipe, `-C` on a missing directory, TIME
//! without the wait for a slot).

use std::process::{Command, Stdio};
use std::time::Duration;

use plait_core::state::TaskState;

use crate::mock::{edit, MockModel, Provider, Turn};
use crate::support::fixtures::three_tasks;
use crate::support::{stderr, stdout, wait_until, Plan, TestRepo};

const CAUSE: &str = "Error: file `` does not exist";

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("lib/a.txt", "a\n"),
        ("lib/b.txt", "b\n"),
        ("lib/c.txt", "c\n"),
        ("docs/guide.md", "guide\n"),
    ])
}

/// Runs `toml` with the real binary; the run's id and what it said on stderr.
fn run(repo: &TestRepo, toml: &str) -> (String, String) {
    let path = repo.plan(toml);
    let out = repo.plait(&["run", path.to_str().unwrap(), "-j", "3"]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "plait run: {}",
        stderr(&out)
    );
    (stdout(&out).trim().to_string(), stderr(&out))
}

/// `a` fails the way the agent did, saying why on stderr; `b` and `c` succeed.
const FAILING_A: &str = "if [ \"$PLAIT_TASK\" = a ]; then echo 'reading the module'; echo; echo 'Error: file `` does not exist' >&2; exit 1; fi; echo v1 > lib/$PLAIT_TASK.txt";

#[test]
fn a_failed_task_shows_the_end_of_its_agent_log_in_status_review_and_json() {
    let repo = sample();
    let (run, summary) = run(&repo, &three_tasks(FAILING_A, ""));
    let log = repo
        .path
        .join(format!(".git/plait/runs/{run}/tasks/a/agent.log"));
    let log = log.canonicalize().unwrap_or(log);
    // The run's own summary says it first.
    assert!(summary.contains(CAUSE), "{summary}");

    let status = stdout(&repo.plait(&["status", &run]));
    assert!(
        status.contains("a failed: command exited with status 1"),
        "{status}"
    );
    assert!(status.contains(&format!("    {CAUSE}\n")), "{status}");
    assert!(status.contains("    reading the module\n"), "{status}");
    assert!(status.contains("agent.log"), "{status}");
    assert!(status.contains(&format!("plait log {run} a")), "{status}");

    let review = stdout(&repo.plait(&["review", &run]));
    let a = review.split("== b").next().unwrap();
    assert!(
        a.contains("error: command exited with status 1"),
        "{review}"
    );
    assert!(a.contains(&format!("    {CAUSE}\n")), "{review}");
    assert!(a.contains("agent.log"), "{review}");

    // The JSON keeps its shape and adds the failures.
    let json = repo.status_json(&[&run]);
    assert_eq!(json["tasks"][0]["state"], "failed");
    assert!(json["tasks"][0]["log"]
        .as_str()
        .unwrap()
        .ends_with("agent.log"));
    assert_eq!(json["attention"][0], "1 task(s) failed: a");
    let failures = json["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{json}");
    assert_eq!(failures[0]["task"], "a");
    assert_eq!(failures[0]["error"], "command exited with status 1");
    assert_eq!(
        failures[0]["tail"],
        serde_json::json!(["reading the module", CAUSE])
    );
    let logged = std::path::PathBuf::from(failures[0]["log"].as_str().unwrap());
    assert_eq!(logged.canonicalize().unwrap(), log);
}

/// Round 0 writes something the check refuses; round 1 fixes it.
const TWO_ROUNDS: &str = "echo \"agent of $PLAIT_TASK, round $PLAIT_ROUND\"; if [ \"$PLAIT_ROUND\" = 0 ]; then echo broken > lib/$PLAIT_TASK.txt; else echo fixed > lib/$PLAIT_TASK.txt; fi";

#[test]
fn plait_log_prints_the_agent_log_and_each_round_s_checks() {
    let repo = sample();
    let extra = "[checks]\ntask = [\"echo checking\", \"! grep -q broken lib/$PLAIT_TASK.txt\"]\n\
                 [review]\nrounds = 2\n";
    let (run, _) = run(&repo, &three_tasks(TWO_ROUNDS, extra));

    let out = repo.plait(&["log", &run, "a"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "agent of a, round 0\nagent of a, round 1\n");
    // RUN left out: the newest run's task.
    assert_eq!(
        stdout(&repo.plait(&["log", "b"])),
        "agent of b, round 0\nagent of b, round 1\n"
    );

    let checks = stdout(&repo.plait(&["log", &run, "a", "--checks"]));
    let headings: Vec<&str> = checks.lines().filter(|l| l.starts_with("== ")).collect();
    assert_eq!(headings.len(), 4, "{checks}");
    assert!(
        headings[0].starts_with("== round 0 · check 1 · `echo checking` · "),
        "{checks}"
    );
    assert!(
        headings[1].starts_with("== round 0 · check 2 · `! grep -q broken lib/$PLAIT_TASK.txt` · "),
        "{checks}"
    );
    assert!(
        headings[3].starts_with(
            "== round 1 · check 2 · `! grep -q broken lib/$PLAIT_TASK.txt` · passed · "
        ),
        "{checks}"
    );
    assert!(headings[3].ends_with("checks-1/check-2.log"), "{checks}");
    assert_eq!(checks.matches("\nchecking\n").count(), 2, "{checks}");

    // A task with no transcript says so, and prints nothing.
    let out = repo.plait(&["log", &run, "a", "--transcript"]);
    assert!(out.status.success());
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("has no model transcript"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn plait_log_names_an_unknown_run_or_task_and_lists_the_tasks() {
    let repo = sample();
    let (run, _) = run(&repo, &three_tasks("echo v1 > lib/$PLAIT_TASK.txt", ""));

    let out = repo.plait(&["log", &run, "zzz"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("run {run} has no task `zzz`")),
        "{err}"
    );
    assert!(err.contains("hint: its tasks: a, b, c"), "{err}");

    let out = repo.plait(&["log", "nosuchrun", "a"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no run `nosuchrun`"),
        "{}",
        stderr(&out)
    );

    // A run id alone is taken for a task, and the hint says how to name both.
    let out = repo.plait(&["log", &run]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("`{run}` is a run: plait log {run} TASK")),
        "{err}"
    );

    let out = repo.plait(&["log"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("needs a TASK"), "{}", stderr(&out));
    assert!(stderr(&out).contains("a, b, c"), "{}", stderr(&out));

    let out = repo.plait(&["log", &run, "a", "--checks", "--follow"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "the three views exclude each other"
    );
}

#[test]
fn plait_log_transcript_reads_a_model_agent_s_conversation() {
    const KEY: &str = "sk-test-firstday-0123456789";
    let repo = sample();
    let mock = MockModel::start(Provider::Anthropic, KEY);
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![edit::str_replace("lib/a.txt", "a", "A")]),
            Turn::Text("a is now A".into()),
        ],
    );
    let toml = Plan::on_mock(&mock.url())
        .set("providers.mock", "stream", false)
        .set("defaults", "timeout", "60s")
        .task("a")
        .prompt("Capitalise lib/a.txt")
        .owns(["lib/a.txt"])
        .to_toml();
    let state = repo.run_with_env(&toml, 1, &|name| {
        (name == "PLAIT_TEST_KEY").then(|| KEY.to_string())
    });
    assert_eq!(
        state.tasks[0].state,
        TaskState::Done,
        "{:?}",
        state.tasks[0].error
    );

    let out = repo.plait(&["log", &state.id, "a", "--transcript"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("== conversation 1\nuser:\n"), "{text}");
    assert!(text.contains("Capitalise lib/a.txt"), "{text}");
    assert!(
        text.contains("assistant calls str_replace_based_edit_tool:\n"),
        "{text}"
    );
    assert!(text.contains("\"old_str\": \"a\""), "{text}");
    assert!(
        text.contains("str_replace_based_edit_tool answers:"),
        "{text}"
    );
    assert!(text.ends_with("assistant:\n  a is now A\n"), "{text}");
    assert!(!text.contains(KEY));
}

#[test]
fn plait_log_follow_prints_a_running_task_s_log_until_the_task_ends() {
    let repo = sample();
    let go = repo.scratch.join("go");
    let agent = format!(
        "echo first line; while [ ! -e '{}' ]; do sleep 0.05; done; echo second line; echo v1 > lib/a.txt",
        go.display()
    );
    let toml = Plan::new()
        .exec_all(&agent)
        .task("a")
        .owns(["lib/a.txt"])
        .to_toml();
    let plan = repo.plan(&toml);
    let running = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan.to_str().unwrap()])
        .current_dir(&repo.path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let runs = repo.path.join(".git/plait/runs");
    let log = || -> Option<String> {
        let run = std::fs::read_dir(&runs).ok()?.next()?.ok()?.path();
        std::fs::read_to_string(run.join("tasks/a/agent.log")).ok()
    };
    wait_until("the agent's first line", || {
        log().is_some_and(|l| l.contains("first line"))
    });

    let mut follow = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["log", "a", "--follow"])
        .current_dir(&repo.path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        follow.try_wait().unwrap().is_none(),
        "--follow ended while its task was still running"
    );
    std::fs::write(&go, "").unwrap();
    wait_until("--follow to end with its task", || {
        follow.try_wait().unwrap().is_some()
    });
    let out = follow.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "first line\nsecond line\n");
    let ran = running.wait_with_output().unwrap();
    assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));

    // On a task that has ended, --follow prints its log and ends at once.
    let out = repo.plait(&["log", "a", "-f"]);
    assert_eq!(stdout(&out), "first line\nsecond line\n");
}

#[test]
fn completions_are_printed_for_every_shell_clap_knows() {
    let repo = sample();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef plait"),
        ("fish", "complete -c plait"),
        ("elvish", "edit:completion:arg-completer[plait]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = repo.plait(&["completions", shell, "--static"]);
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(script.contains(marker), "{shell}: {script}");
        for command in [
            "run",
            "status",
            "log",
            "completions",
            "dry-run",
            "attention",
        ] {
            assert!(script.contains(command), "{shell} lacks {command}");
        }
    }
    let out = repo.plait(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

/// What a run would leave in the repository: refs, worktrees, config, plait's directory.
fn footprint(repo: &TestRepo) -> (String, String, String, bool) {
    (
        repo.git(&["for-each-ref"]),
        repo.git(&["worktree", "list", "--porcelain"]),
        std::fs::read_to_string(repo.path.join(".git/config")).unwrap(),
        repo.path.join(".git/plait").exists(),
    )
}

#[test]
fn run_dry_run_shows_tasks_files_cones_agents_and_checks_and_creates_nothing() {
    let repo = sample();
    let before = footprint(&repo);
    assert!(!before.3);
    let toml = Plan::new()
        .goal("Fix the library")
        .exec_all("echo v1 > lib/$PLAIT_TASK.txt")
        .set("checks", "task", ["test -s lib/$PLAIT_TASK.txt"])
        .set("checks", "merged", ["true"])
        .task("a")
        .prompt("fix a")
        .owns(["lib/a.txt"])
        .with("context", ["docs/*.md"])
        .task("rest")
        .prompt("fix the rest")
        .owns(["lib/b.txt", "lib/c.txt"])
        .to_toml();
    let plan = repo.plan(&toml);
    let out = repo.plait(&["run", plan.to_str().unwrap(), "--dry-run", "-j", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("goal: Fix the library\nplan: 2 task(s) owning 3 file(s), base main ("),
        "{text}"
    );
    let a = text.split("\ntask rest\n").next().unwrap();
    assert!(a.contains("\ntask a\n  prompt:   fix a\n  agent:    exec `echo v1 > lib/$PLAIT_TASK.txt`\n  review:   off\n"), "{text}");
    assert!(
        a.contains("  owns:     lib/a.txt\n  context:  docs/guide.md\n"),
        "{text}"
    );
    assert!(a.contains("  cone:     / (its own files)\n            docs/ (its own files)\n            lib/ (its own files)\n"), "{text}");
    assert!(
        text.contains("  owns:     lib/b.txt\n            lib/c.txt\n"),
        "{text}"
    );
    assert!(
        text.contains("task checks:   `test -s lib/$PLAIT_TASK.txt`\nmerged checks: `true`\n"),
        "{text}"
    );
    assert!(text.contains("groups: none\n"), "{text}");
    assert!(text.contains("run: 2 task(s) at a time"), "{text}");
    assert!(
        stderr(&out).contains("nothing was created"),
        "{}",
        stderr(&out)
    );
    assert_eq!(footprint(&repo), before, "a dry run created something");

    let bad = repo.plan(&Plan::new().task("a").owns(["zzz"]).to_toml());
    let out = repo.plait(&["run", bad.to_str().unwrap(), "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("glob `zzz` matches no tracked file"),
        "{}",
        stderr(&out)
    );
    assert_eq!(footprint(&repo), before);
}

#[test]
fn plan_check_validates_a_plan_alone_as_run_would() {
    let repo = sample();
    let good = repo.plan(&three_tasks("true", "[checks]\nmerged = [\"true\"]\n"));
    let out = repo.plait(&["plan", "--check", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = stdout(&out);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.contains("plait.toml: valid: 3 task(s) owning 3 file(s), base main (")
            && line.contains("0 task check(s), 1 merged check(s)"),
        "{line}"
    );

    let bad = repo.plan(
        &Plan::new()
            .task("a")
            .owns(["zzz"])
            .task("a")
            .prompt("q")
            .owns(["lib/a.txt"])
            .to_toml(),
    );
    let checked = repo.plait(&["plan", "--check", bad.to_str().unwrap()]);
    assert_eq!(checked.status.code(), Some(2));
    let ran = repo.plait(&["run", bad.to_str().unwrap()]);
    assert_eq!(ran.status.code(), Some(2));
    assert_eq!(
        stderr(&checked),
        stderr(&ran),
        "the same messages as plait run"
    );
    assert!(stderr(&checked).contains("zzz"), "{}", stderr(&checked));
    assert!(!repo.path.join(".git/plait").exists());
}

#[test]
fn review_attention_and_task_show_only_what_they_select() {
    let repo = sample();
    // a fails, b is clean, c writes a file it does not own (a violation).
    let agent = "case $PLAIT_TASK in a) exit 1;; c) echo x > stray.txt;; esac; echo v1 > lib/$PLAIT_TASK.txt";
    let (run, _) = run(&repo, &three_tasks(agent, ""));
    let headings = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["review", run.as_str()];
        all.extend_from_slice(args);
        let out = repo.plait(&all);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
            .lines()
            .filter_map(|l| l.strip_prefix("== "))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    };
    assert_eq!(headings(&[]), ["a", "b", "c"]);
    assert_eq!(headings(&["--attention"]), ["a", "c"]);
    assert_eq!(headings(&["--task", "b"]), ["b"]);
    assert_eq!(headings(&["--task", "c", "--task", "b"]), ["b", "c"]);
    assert_eq!(headings(&["--attention", "--task", "b"]), ["a", "b", "c"]);

    let out = repo.plait(&["review", &run, "--task", "zzz"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("run ") && stderr(&out).contains("has no task `zzz`"));
    assert!(
        stderr(&out).contains("hint: its tasks: a, b, c"),
        "{}",
        stderr(&out)
    );

    let clean = sample();
    let (run, _) = self::run(&clean, &three_tasks("echo v1 > lib/$PLAIT_TASK.txt", ""));
    let out = clean.plait(&["review", &run, "--attention"]);
    assert!(out.status.success());
    assert_eq!(stdout(&out), "");
    assert!(stderr(&out).contains("nothing in run"), "{}", stderr(&out));
}

#[test]
fn the_ctrl_c_warning_in_a_pipe_has_no_colours_and_no_timestamp() {
    let repo = sample();
    let toml = Plan::new()
        .exec_all("sleep 30")
        .task("a")
        .owns(["lib/a.txt"])
        .to_toml();
    let plan = repo.plan(&toml);
    let child = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan.to_str().unwrap()])
        .current_dir(&repo.path)
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let runs = repo.path.join(".git/plait/runs");
    wait_until("the task to be running", || {
        std::fs::read_dir(&runs)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| std::fs::read_to_string(e.ok()?.path().join("state.json")).ok())
            .is_some_and(|s| s.contains("\"running\"") && s.contains("\"sandbox\""))
    });
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let err = stderr(&out);
    let warning = err
        .lines()
        .find(|l| l.contains("interrupted: stopping the agents"))
        .unwrap_or_else(|| panic!("no warning: {err}"));
    assert_eq!(
        warning,
        "warning: interrupted: stopping the agents; press Ctrl-C again to exit at once"
    );
    assert!(!err.contains('\x1b'), "colours in a pipe: {err:?}");
}

#[test]
fn dash_c_on_a_missing_directory_says_so() {
    let repo = sample();
    let missing = repo.scratch.join("nonexistent");
    let out = repo.plait(&["-C", missing.to_str().unwrap(), "status"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("the directory does not exist"), "{err}");
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    assert!(!err.contains("git repository"), "{err}");

    let file = repo.path.join("lib/a.txt");
    let out = repo.plait(&["-C", file.to_str().unwrap(), "status"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not a directory"), "{}", stderr(&out));
}

#[test]
fn time_does_not_count_the_wait_for_a_slot() {
    let repo = sample();
    // One slot, three tasks of a second each: the last waits two seconds for its slot.
    let (run, _) = {
        let path = repo.plan(&three_tasks("sleep 1; echo v1 > lib/$PLAIT_TASK.txt", ""));
        let out = repo.plait(&["run", path.to_str().unwrap(), "-j", "1"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        (stdout(&out).trim().to_string(), ())
    };
    let json = repo.status_json(&[&run]);
    for task in json["tasks"].as_array().unwrap() {
        let took = task["finished_at"].as_u64().unwrap() - task["started_at"].as_u64().unwrap();
        assert!(
            (1000..1900).contains(&took),
            "task {} took {took} ms by its record",
            task["id"]
        );
    }
}
