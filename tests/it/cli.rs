//! The real binary end to end: exit codes, the run id on stdout, status, diff, land, clean.

use crate::support::{git_in, stderr, stdout, Plan, TestRepo};

#[test]
fn the_example_job_runs_lands_and_cleans_with_exit_code_zero() {
    let repo = TestRepo::fixture("example");
    let plan = repo.scratch.join("plait.toml");
    let out = repo.plait(&[
        "plan",
        "--split",
        "dir:src/*",
        "--prompt",
        "Replace deprecated unittest aliases in {path}",
        "--exec",
        "sed -i -e 's/assertEquals(/assertEqual(/g' -e 's/assertNotEquals(/assertNotEqual(/g' $(cat \"$PLAIT_OWNED\")",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = repo.plait(&["run", plan.to_str().unwrap(), "-j", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    assert_eq!(run.len(), 6, "stdout is the run id alone: {run:?}");
    let err = stderr(&out);
    assert!(
        err.contains("src-billing") && err.contains("merged: plait/"),
        "{err}"
    );

    let status: serde_json::Value = repo.status_json(&[&run]);
    assert_eq!(status["tasks"].as_array().unwrap().len(), 3);
    assert!(status["attention"].as_array().unwrap().is_empty());

    let diff = stdout(&repo.plait(&["diff", &run, "src-billing"]));
    assert!(
        diff.contains(
            "-        self.assertEquals(total([]), 0)\n+        self.assertEqual(total([]), 0)"
        ),
        "{diff}"
    );
    let stat = stdout(&repo.plait(&["diff", &run, "merged", "--stat"]));
    assert!(
        stat.contains("3 file(s) changed, 5 insertion(s)(+), 5 deletion(s)(-)"),
        "{stat}"
    );

    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!repo.read("src/shipping/test_rates.py").contains("Equals("));

    let out = repo.plait(&["clean", &run]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(repo.branches(), ["main"]);
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    assert!(stdout(&repo.plait(&["runs"])).contains(&format!("{run}  cleaned")));
}

#[test]
fn exit_codes_say_what_went_wrong() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let failing = repo.plan("[defaults]\nagent = { exec = 'exit 3' }\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.txt\"]\n");
    let out = repo.plait(&["run", failing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("1 task(s) failed: a"),
        "{}",
        stderr(&out)
    );

    let bad = repo.plan("[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"zzz\"]\n");
    let out = repo.plait(&["run", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: plan ") && err.contains("glob `zzz` matches no tracked file"),
        "{err}"
    );

    let out = repo.plait(&["status", "nosuchrun"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no run `nosuchrun`"));

    let elsewhere = tempfile::tempdir().unwrap();
    let out = crate::support::plait_in(elsewhere.path(), &["status"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not inside a git repository"));

    let out = repo.plait(&["run"]);
    assert_eq!(out.status.code(), Some(2), "clap usage errors exit 2");
}

#[test]
fn a_refused_plan_creates_nothing() {
    let repo = TestRepo::with_files(&[("a/x", "1\n"), ("b/y", "2\n")]);
    let overlap = repo.plan(
        "[defaults]\nagent = { exec = 'true' }\n[[task]]\nid = \"one\"\nprompt = \"p\"\nowns = [\"a/\"]\n[[task]]\nid = \"two\"\nprompt = \"p\"\nowns = [\"a/x\", \"b/\"]\n",
    );
    let out = repo.plait(&["run", overlap.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("tasks `one` and `two` both own 1 file: a/x"),
        "{}",
        stderr(&out)
    );
    assert_eq!(repo.branches(), ["main"]);
    assert!(!repo.path.join(".git/plait/runs").exists());
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

#[test]
fn clean_refuses_to_lose_work_until_forced() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("notes.md", "n\n")]);
    let plan = repo.plan(
        "[defaults]\nagent = { exec = 'echo a2 > a.txt; echo mine > notes.md' }\ncontext = [\"notes.md\"]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.txt\"]\n",
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "a violation needs attention");
    let run = stdout(&out).trim().to_string();

    let out = repo.plait(&["clean", &run]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("task a") && err.contains("uncommitted changes: notes.md"),
        "{err}"
    );
    assert!(
        err.contains(&format!("branch plait/{run}/a")) && err.contains("on no other branch"),
        "{err}"
    );
    assert_eq!(repo.branches().len(), 3, "nothing was removed");
    let state = repo.path.join(format!(".git/plait/runs/{run}/state.json"));
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    let wt = std::path::PathBuf::from(state["tasks"][0]["worktree"].as_str().unwrap());
    // Outside the user's checkout: under the user's cache.
    assert!(!wt.starts_with(&repo.path), "{}", wt.display());
    assert!(
        wt.starts_with(std::env::var("XDG_CACHE_HOME").unwrap()),
        "{}",
        wt.display()
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("notes.md")).unwrap(),
        "mine\n"
    );
    assert!(git_in(&wt, &["status", "--porcelain"]).contains("notes.md"));
    // A split index (the user's `core.splitIndex`) plait cannot read itself: git is asked.
    git_in(&wt, &["update-index", "--split-index"]);
    let out = repo.plait(&["clean", &run]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("uncommitted changes: notes.md"),
        "{}",
        stderr(&out)
    );

    let out = repo.plait(&["clean", &run, "--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains(&format!("deleted branch plait/{run}/a (was "))
            && said.contains("not landed; restore with: git branch"),
        "{said}"
    );
    assert!(!wt.exists());
    assert_eq!(repo.branches(), ["main"]);
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    assert_eq!(
        repo.read("notes.md"),
        "n\n",
        "the user's own files are untouched"
    );
}

#[test]
fn clean_keeps_a_branch_the_user_checked_out() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let plan = repo.plan(
        &Plan::new()
            .exec_all("echo changed > \"$PLAIT_FILE\"")
            .task("a")
            .owns(["a.txt"])
            .task("b")
            .owns(["b.txt"])
            .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    let elsewhere = repo.scratch.join("look");
    let merged = format!("plait/{run}/merged");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        elsewhere.to_str().unwrap(),
        &merged,
    ]);

    let out = repo.plait(&["clean", &run, "--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("kept branch {merged}: it is checked out at")),
        "{err}"
    );
    let mut branches = repo.branches();
    branches.sort();
    assert_eq!(branches, ["main".to_string(), merged]);
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("a.txt")).unwrap(),
        "changed\n"
    );
}

#[test]
fn the_run_summary_shows_failures_violations_and_conflicts() {
    let repo = TestRepo::with_files(&[
        ("shared/a-1", "1\n"),
        ("shared/2-b", "2\n"),
        ("lib/a.py", "a\n"),
        ("lib/b.py", "b\n"),
        ("lib/c.py", "c\n"),
        ("README.md", "r\n"),
    ]);
    let plan = repo.plan(
        &Plan::new()
            .goal("Show every kind of trouble")
            .task("a")
            .owns(["/lib/a.py", "/shared/a-*"])
            .exec("echo A > shared/a-b; echo a2 > lib/a.py")
            .task("b")
            .owns(["/lib/b.py", "/shared/*-b"])
            .exec("echo B > shared/a-b; echo b2 > lib/b.py; echo mine > README.md")
            .task("c")
            .owns(["/lib/c.py"])
            .exec("echo failing >&2; exit 4")
            .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap(), "-j", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let run = stdout(&out).trim().to_string();
    let text = stdout(&repo.plait(&["status", &run]));
    insta::with_settings!({filters => vec![
        (run.as_str(), "[RUN]"),
        (r"\b[0-9a-f]{8}\b", "[HASH]"),
        (r"(?m) +\d+(\.\d)?s( {2}|$)", " [TIME]${2}"),
        (r"/\S+/\.git/plait", "[GITDIR]/plait"),
        (r"/\S+/plait/repo-\[HASH\]", "[WORKTREES]"),
        (r"Landlock ABI \d+", "Landlock ABI [N]"),
        (r"network off \([^)]*\)", "network off ([HOW])"),
        (r"leftovers: [^(,]*(\([^)]*\))?", "leftovers: [LIFETIME]"),
        (r"limits: [^(,]*(\([^)]*\))?", "limits: [LIMITS]"),
        (r"(?m)^environment: .*$", "environment: [ENVIRONMENT]"),
    ]}, {
        insta::assert_snapshot!(text);
    });
}

#[test]
fn run_json_writes_one_event_per_line() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let plan = repo.plan(
        &Plan::new()
            .exec_all("echo x >> $PLAIT_TASK.txt")
            .task("a")
            .owns(["a.txt"])
            .task("b")
            .owns(["b.txt"])
            .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let events: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let last = events.last().unwrap();
    assert_eq!(last["event"], "finished");
    assert_eq!(last["phase"], "finished");
    assert_eq!(last["merge"]["included"], serde_json::json!(["a", "b"]));
    let done: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "task" && e["task"]["state"] == "done")
        .map(|e| e["task"]["task"].as_str().unwrap())
        .collect();
    assert_eq!(done.len(), 2);
    let mut states: Vec<&str> = events
        .iter()
        .filter(|e| e["task"]["task"] == "a")
        .map(|e| e["task"]["state"].as_str().unwrap())
        .collect();
    states.dedup();
    assert_eq!(states, ["preparing", "running", "collecting", "done"]);
}

#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    // `plait diff RUN merged | head -1`: the reader goes away while plait still writes.
    let repo = TestRepo::with_files(&[("src/big.txt", "old\n")]);
    let plan = repo.plan(
        &Plan::new()
            .goal("Grow")
            .exec_all("seq 1 200000 > src/big.txt")
            .review_off()
            .task("big")
            .owns(["src/"])
            .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    for args in [
        vec!["diff", &run, "merged"],
        vec!["diff", &run, "big"],
        vec!["review", &run],
    ] {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_plait"))
            .args(&args)
            .current_dir(&repo.path)
            .env("NO_COLOR", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "{args:?} printed nothing");
        // The reader is dropped here: plait's next writes meet a closed pipe.
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}

#[test]
fn a_damaged_run_record_is_named_and_never_panics() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let plan = repo.plan(
        &Plan::new()
            .goal("g")
            .exec_all("echo x >> a.txt")
            .review_off()
            .task("a")
            .owns(["a.txt"])
            .to_toml(),
    );
    let first = stdout(&repo.plait(&["run", plan.to_str().unwrap()]))
        .trim()
        .to_string();
    let second = stdout(&repo.plait(&["run", plan.to_str().unwrap()]))
        .trim()
        .to_string();
    let record = repo
        .path
        .join(format!(".git/plait/runs/{first}/state.json"));
    // Ids cut in the middle of a character, where plait shows the first 8 of them.
    let mut state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    for key in ["commit", "branch"] {
        state["tasks"][0][key] = serde_json::json!("€€€€€€€€€€");
    }
    state["base"] = serde_json::json!("€€€€€€€€€€");
    state["merge"]["commit"] = serde_json::json!("€€€€€€€€€€");
    state["landed"] = serde_json::json!([{
        "branch": "main", "from": "€€€€€€€€€€", "to": "€€€€€€€€€€", "fast_forward": true, "at": 1
    }]);
    std::fs::write(&record, state.to_string()).unwrap();
    let out = repo.plait(&["status", &first]);
    assert!(
        out.status.success(),
        "the record still reads: {}",
        stderr(&out)
    );
    for args in [
        vec!["status", first.as_str()],
        vec!["status", first.as_str(), "--json"],
        vec!["review", first.as_str()],
        vec!["diff", first.as_str(), "a"],
        vec!["clean", first.as_str(), "--force"],
        vec!["runs"],
    ] {
        let out = repo.plait(&args);
        assert!(
            !stderr(&out).contains("panicked") && out.status.code() != Some(101),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // Not JSON at all: every command that reads it names the file; `runs` lists the rest.
    std::fs::write(&record, "{\"id\": garbage").unwrap();
    let out = repo.plait(&["status", &first]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains(&record.display().to_string()) && stderr(&out).contains("damaged"),
        "{}",
        stderr(&out)
    );
    let out = repo.plait(&["runs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&second), "{}", stdout(&out));
    assert!(stderr(&out).contains("damaged"), "{}", stderr(&out));
}
