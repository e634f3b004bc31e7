//! Stages 3 and 6: exec agents run in their worktrees, at most `-j` at once, and a failure
//! of one task never stops the others.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use plait_core::state::{RunPhase, TaskState};

use crate::support::{printed, stdout, until_exists, wait_for_running, wait_until, Plan, TestRepo};

fn repo_with_dirs(n: usize) -> TestRepo {
    let files: Vec<(String, String)> = (0..n)
        .map(|i| (format!("pkg/m{i}/mod.py"), format!("v = {i}\n")))
        .collect();
    TestRepo::with_owned_files(&files)
}

fn dir_plan(n: usize, exec: &str, extra: &str) -> String {
    let mut toml =
        format!("goal = \"the goal\"\n[defaults]\nagent = {{ exec = '''{exec}''' }}\n{extra}\n");
    for i in 0..n {
        let _ = writeln!(
            toml,
            "[[task]]\nid = \"m{i}\"\nprompt = \"Edit m{i}\"\nowns = [\"/pkg/m{i}/\"]"
        );
    }
    toml
}

/// Starts `plait run PLAN -j 2` as a child process.
fn spawn_run(repo: &TestRepo, plan: &std::path::Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan.to_str().unwrap(), "-j", "2"])
        .current_dir(&repo.path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn the_agent_gets_its_task_in_the_environment_and_its_output_is_logged() {
    let repo = TestRepo::with_files(&[("pkg/one.py", "1\n"), ("pkg/two.py", "2\n")]);
    let toml = Plan::new()
        .goal("the goal")
        .exec_all("env | grep ^PLAIT_ | sort; cat \"$PLAIT_OWNED\"; echo oops >&2")
        .task("one")
        .prompt("Do one")
        .owns(["pkg/one.py"])
        .task("two")
        .prompt("Do two")
        .owns(["pkg/two.py"])
        .to_toml();
    let state = repo.run(&toml, 2);
    let one = state.task("one").unwrap();
    let log = fs::read_to_string(&one.log).unwrap();
    for line in [
        "PLAIT_TASK=one".to_string(),
        "PLAIT_GOAL=the goal".to_string(),
        "PLAIT_PROMPT=Do one".to_string(),
        format!("PLAIT_BASE={}", state.base),
        format!("PLAIT_RUN={}", state.id),
        "PLAIT_FILE=pkg/one.py".to_string(),
        format!("PLAIT_WORKTREE={}", one.worktree.display()),
        "pkg/one.py".to_string(),
        "oops".to_string(),
    ] {
        assert!(
            log.lines().any(|l| l == line),
            "missing {line:?} in log:\n{log}"
        );
    }
    assert!(log.contains("PLAIT_OWNED="), "{log}");
}

#[test]
fn at_most_jobs_agents_run_at_once_and_all_finish() {
    let repo = repo_with_dirs(6);
    let marks = tempfile::tempdir().unwrap();
    // Each agent says in its log that it started, waits until the test lets it go (a file
    // of its name, which it only looks for), and says it ends. The test sees how many run
    // at once: those that started and have not ended. It lets one go when two run, after a
    // while longer for a third to show up if plait started one too many, so that every
    // agent but the last overlaps another however slowly it starts.
    let exec = format!(
        "echo start $PLAIT_TASK; {wait}; echo end $PLAIT_TASK; echo done >> pkg/$PLAIT_TASK/mod.py",
        wait = until_exists(&marks.path().join("go.$PLAIT_TASK"))
    );
    let plan = dir_plan(6, &exec, "");
    let logs = repo.path.join(".git/plait/runs");
    let mut max_seen = 0;
    let state = std::thread::scope(|s| {
        s.spawn(|| {
            // Two at once are waited for 30 s at most in all, so that a plait that never
            // runs two at once ends its run and fails the assertions below.
            let deadline = Instant::now() + Duration::from_secs(30);
            for left in (1..=6).rev() {
                while running_agents(&logs).len() < left.min(2) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                // This only lets a wrong plait be caught; a right one passes however slow.
                std::thread::sleep(Duration::from_millis(300));
                let running = running_agents(&logs);
                max_seen = max_seen.max(running.len());
                let Some(first) = running.first() else { break };
                fs::write(marks.path().join(format!("go.{first}")), "").unwrap();
                wait_until("the agent let go ends", || {
                    !running_agents(&logs).contains(first)
                });
            }
            for i in 0..6 {
                let _ = fs::write(marks.path().join(format!("go.m{i}")), "");
            }
        });
        repo.run(&plan, 2)
    });
    assert!(
        state.tasks.iter().all(|t| t.state == TaskState::Done),
        "{:?}",
        state.tasks
    );
    assert!(max_seen <= 2, "saw {max_seen} agents at once with -j 2");
    assert!(max_seen == 2, "two agents should overlap with -j 2");
    assert_eq!(state.merge.as_ref().unwrap().included.len(), 6);
}

/// The tasks whose agents said in their logs (under `logs`) that they started and not yet
/// that they end.
fn running_agents(logs: &Path) -> Vec<String> {
    let ended = printed(logs, "end ");
    printed(logs, "start ")
        .into_iter()
        .map(|line| line["start ".len()..].to_string())
        .filter(|task| !ended.contains(&format!("end {task}")))
        .collect()
}

#[test]
fn a_failing_task_does_not_stop_the_others_and_keeps_its_worktree() {
    let repo = repo_with_dirs(3);
    let exec = "echo changed >> pkg/$PLAIT_TASK/mod.py; if [ $PLAIT_TASK = m1 ]; then echo broken >&2; exit 7; fi";
    let state = repo.run(&dir_plan(3, exec, ""), 3);
    let failed = state.task("m1").unwrap();
    assert_eq!(failed.state, TaskState::Failed);
    assert_eq!(failed.exit_code, Some(7));
    assert_eq!(
        failed.error.as_deref(),
        Some("command exited with status 7")
    );
    assert!(
        failed.worktree.join("pkg/m1/mod.py").is_file(),
        "failed worktree kept"
    );
    assert!(fs::read_to_string(&failed.log).unwrap().contains("broken"));
    assert_eq!(state.task("m0").unwrap().state, TaskState::Done);
    assert_eq!(state.task("m2").unwrap().state, TaskState::Done);
    let merge = state.merge.as_ref().unwrap();
    assert_eq!(merge.included, ["m0", "m2"]);
    let merged = repo.tree_files(&merge.branch);
    assert_eq!(merged["pkg/m1/mod.py"], "v = 1\n");
    assert_eq!(merged["pkg/m0/mod.py"], "v = 0\nchanged\n");
}

#[test]
fn a_timeout_kills_the_agent_and_its_children() {
    let repo = repo_with_dirs(1);
    let marks = tempfile::tempdir().unwrap();
    let after = marks.path().join("after");
    // The grandchild says `outlived` in the task's log once the test says the run is over,
    // if it is still alive.
    let exec = format!("({}; echo outlived) & sleep 120", until_exists(&after));
    let extra = "timeout = \"500ms\"";
    let started = Instant::now();
    let state = repo.run(&dir_plan(1, &exec, extra), 1);
    assert!(started.elapsed() < Duration::from_secs(30));
    let task = state.task("m0").unwrap();
    assert_eq!(task.state, TaskState::Failed);
    assert!(
        task.error
            .as_deref()
            .unwrap()
            .starts_with("timed out after 500ms"),
        "{:?}",
        task.error
    );
    fs::write(&after, "").unwrap();
    wait_until("the agent's processes are gone", || {
        processes_of(&repo, &state.id).is_empty()
    });
    assert!(
        repo.printed("outlived").is_empty(),
        "a grandchild outlived the timeout"
    );
}

#[test]
fn the_state_is_readable_from_another_process_while_the_run_goes_on() {
    let repo = repo_with_dirs(2);
    let gate = tempfile::tempdir().unwrap();
    let open = gate.path().join("open");
    let exec = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; echo x >> pkg/$PLAIT_TASK/mod.py",
        open.display()
    );
    let plan = repo.plan(&dir_plan(2, &exec, ""));
    let child = spawn_run(&repo, &plan);
    // Both agents are running, as seen by `plait status --json` from another process.
    let live = wait_for_running(&repo, 2);
    assert_eq!(live["phase"], "running");
    // A second run is refused while this one holds the lock.
    let second = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(second.status.code(), Some(2));
    assert!(
        crate::support::stderr(&second).contains("is in progress"),
        "{}",
        crate::support::stderr(&second)
    );

    fs::write(&open, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let run = stdout(&out).trim().to_string();
    let state: serde_json::Value = repo.status_json(&[&run]);
    assert_eq!(state["phase"], "finished");
    assert_eq!(state["merge"]["included"].as_array().unwrap().len(), 2);
    let _ = RunPhase::Finished;
}

#[test]
fn a_stale_lock_from_a_dead_process_is_taken_over() {
    let repo = repo_with_dirs(1);
    let lock_dir = repo.path.join(".git/plait");
    fs::create_dir_all(&lock_dir).unwrap();
    // PID 2^22+1 is above Linux's pid_max default and is never alive.
    fs::write(lock_dir.join("lock"), "4194305 0dead0\n").unwrap();
    let state = repo.run(&dir_plan(1, "echo y >> pkg/m0/mod.py", ""), 1);
    assert_eq!(state.task("m0").unwrap().state, TaskState::Done);
    assert!(
        !lock_dir.join("lock").exists(),
        "lock released after the run"
    );
}

#[test]
fn ctrl_c_stops_the_agents_and_saves_the_run_as_interrupted() {
    let repo = repo_with_dirs(3);
    let marks = tempfile::tempdir().unwrap();
    let after = marks.path().join("after");
    // Each agent starts a child that says `outlived` in its log once the test says the run
    // is over, if it is still alive, and then says it has started it.
    let exec = format!(
        "({}; echo outlived) & echo forked $PLAIT_TASK; sleep 120",
        until_exists(&after),
    );
    let plan = repo.plan(&dir_plan(3, &exec, ""));
    let child = spawn_run(&repo, &plan);
    wait_for_running(&repo, 2);
    wait_until("both running agents started their child", || {
        repo.printed("forked ").len() == 2
    });
    let started = Instant::now();
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        crate::support::stderr(&out)
    );
    let json: serde_json::Value = repo.status_json(&[]);
    assert_eq!(json["phase"], "interrupted");
    let mut states: Vec<(&str, &str)> = json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["state"].as_str().unwrap(),
                t["error"].as_str().unwrap_or(""),
            )
        })
        .collect();
    states.sort();
    assert_eq!(
        states,
        [
            ("interrupted", "interrupted"),
            ("interrupted", "interrupted"),
            ("pending", "")
        ]
    );
    assert!(!repo.path.join(".git/plait/lock").exists(), "lock released");
    fs::write(&after, "").unwrap();
    let run = json["id"].as_str().unwrap();
    wait_until("the agents' processes are gone", || {
        processes_of(&repo, run).is_empty()
    });
    assert!(
        repo.printed("outlived").is_empty(),
        "an agent's child outlived the interrupt"
    );
}

/// The live processes of `repo`'s run `run`: their environment names the run and a
/// worktree in the repository (a run id is made of the second the run started, so another
/// test's run may have the same one). A zombie has no environment left and is not counted.
fn processes_of(repo: &TestRepo, run: &str) -> Vec<u32> {
    use std::os::unix::ffi::OsStrExt as _;
    let mark = format!("PLAIT_RUN={run}");
    let cache = PathBuf::from(std::env::var("XDG_CACHE_HOME").unwrap());
    let worktrees =
        plait_trees::workspace::default_root(&cache, &git2::Repository::open(&repo.path).unwrap());
    let roots = [
        repo.path.clone(),
        repo.path.canonicalize().unwrap(),
        worktrees,
    ];
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let environ = fs::read(e.path().join("environ")).ok()?;
            let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
            let in_repo = vars.iter().any(|v| {
                v.strip_prefix(b"PLAIT_WORKTREE=").is_some_and(|w| {
                    let w = Path::new(std::ffi::OsStr::from_bytes(w));
                    roots.iter().any(|r| w.starts_with(r))
                })
            });
            (in_repo && vars.contains(&mark.as_bytes())).then_some(pid)
        })
        .collect()
}

/// An agent that writes `partial` and sleeps two minutes (longer than any test waits for
/// anything) unless `go` exists; then it writes `done`.
fn waiting_agent(go: &Path) -> String {
    format!(
        "if [ -e {go} ]; then echo done >> pkg/$PLAIT_TASK/mod.py; else echo partial >> pkg/$PLAIT_TASK/mod.py; sleep 120; fi",
        go = go.display()
    )
}

/// Waits until every task `status` shows running has written `partial` in its worktree.
fn wait_for_partial(status: &serde_json::Value) {
    for t in status["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["state"] == "running")
    {
        let file = Path::new(t["worktree"].as_str().unwrap())
            .join(format!("pkg/{}/mod.py", t["id"].as_str().unwrap()));
        wait_until(&format!("{} wrote partial", file.display()), || {
            fs::read_to_string(&file).is_ok_and(|c| c.ends_with("partial\n"))
        });
    }
}

#[test]
fn an_interrupted_run_keeps_its_work_and_resume_finishes_it() {
    let repo = repo_with_dirs(3);
    let marks = tempfile::tempdir().unwrap();
    let go = marks.path().join("go");
    let plan = repo.plan(&dir_plan(3, &waiting_agent(&go), ""));
    let child = spawn_run(&repo, &plan);
    // Both running agents have written their work so far.
    wait_for_partial(&wait_for_running(&repo, 2));
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let run = stdout(&out).trim().to_string();
    let state: serde_json::Value = repo.status_json(&[&run]);
    let mut states: Vec<&str> = state["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    states.sort();
    assert_eq!(states, ["interrupted", "interrupted", "pending"]);
    // The work so far is committed on the interrupted tasks' branches, not merged.
    for t in state["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["state"] == "interrupted")
    {
        let branch = t["branch"].as_str().unwrap();
        let id = t["id"].as_str().unwrap();
        let file = repo.tree_files(branch)[&format!("pkg/{id}/mod.py")].clone();
        assert!(file.ends_with("partial\n"), "{file}");
        assert!(repo
            .git(&["log", "-1", "--format=%s", branch])
            .ends_with("work in progress (interrupted)"));
    }
    assert!(state["merge"].is_null());

    fs::write(&go, "").unwrap();
    let out = repo.plait(&["resume", &run]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::stderr(&out)
    );
    let state: serde_json::Value = repo.status_json(&[&run]);
    assert_eq!(state["phase"], "finished");
    assert!(
        state["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "done"),
        "{state}"
    );
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    let contents: Vec<String> = (0..3)
        .map(|i| merged[&format!("pkg/m{i}/mod.py")].clone())
        .collect();
    assert!(
        contents
            .iter()
            .filter(|c| c.contains("partial\ndone"))
            .count()
            == 2,
        "{contents:?}"
    );
    assert!(
        contents.iter().filter(|c| !c.contains("partial")).count() == 1,
        "{contents:?}"
    );
    let out = repo.plait(&["resume", &run]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a finished run has nothing to resume"
    );
}

#[test]
fn a_killed_run_is_finished_by_resume_without_losing_committed_work() {
    let repo = repo_with_dirs(3);
    let marks = tempfile::tempdir().unwrap();
    let go = marks.path().join("go");
    // m0 finishes at once; the others wait.
    let agent = format!(
        "if [ $PLAIT_TASK = m0 ]; then echo quick >> pkg/m0/mod.py; exit 0; fi; {}",
        waiting_agent(&go)
    );
    let plan = repo.plan(&dir_plan(3, &agent, ""));
    let mut child = spawn_run(&repo, &plan);
    // m0 done and committed, m1 and m2 waiting (m0 and m1 may be running together first).
    let mut before = serde_json::Value::Null;
    wait_until("m0 committed while m1 and m2 run", || {
        before = wait_for_running(&repo, 2);
        let m0 = &before["tasks"][0];
        assert!(
            m0["state"] == "running" || m0["state"] == "done",
            "m0, first in the plan, starts first and ends done: {before:#}"
        );
        m0["commit"].is_string()
    });
    let run = before["id"].as_str().unwrap().to_string();
    let m0 = before["tasks"][0]["commit"].as_str().unwrap().to_string();
    child.kill().unwrap();
    let _ = child.wait();

    let status = repo.plait(&["status", &run]);
    assert!(
        stdout(&status).contains("interrupted (its plait process is gone)"),
        "{}",
        stdout(&status)
    );
    // The agents of the killed plait are still sleeping in their worktrees.
    wait_until("the agents outlived plait", || {
        !processes_of(&repo, &run).is_empty()
    });
    fs::write(&go, "").unwrap();
    let out = repo.plait(&["resume", &run]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::stderr(&out)
    );
    let after: serde_json::Value = repo.status_json(&[&run]);
    assert_eq!(
        after["tasks"][0]["commit"].as_str(),
        Some(m0.as_str()),
        "committed work is kept as it was"
    );
    // Killed, they are gone soon; left alone, they would sleep for two minutes.
    wait_until("resume stops the old agents", || {
        processes_of(&repo, &run).is_empty()
    });
    assert!(
        after["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "done"),
        "{after}"
    );
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    assert_eq!(merged["pkg/m0/mod.py"], "v = 0\nquick\n");
    assert!(
        merged["pkg/m1/mod.py"].ends_with("done\n") && merged["pkg/m2/mod.py"].ends_with("done\n")
    );
    for i in 1..3 {
        assert_eq!(
            git_status(&repo, &after["tasks"][i]["worktree"]),
            "",
            "worktree {i} is usable and clean"
        );
    }
}

fn git_status(_repo: &TestRepo, worktree: &serde_json::Value) -> String {
    crate::support::git_in(
        std::path::Path::new(worktree.as_str().unwrap()),
        &["status", "--porcelain"],
    )
}

#[test]
fn a_cli_agent_gets_its_arguments_with_placeholders_filled_in() {
    let repo = TestRepo::with_files(&[("pkg/one.py", "1\n"), ("pkg/two.py", "2\n")]);
    let toml = "goal = \"the goal\"\n[defaults]\n\
        agent = { cli = [\"sh\", \"-c\", 'printf \"<%s>\\n\" \"$@\"; echo changed >> \"$2\"', \"fake-agent\", \"{task}\", \"{file}\", \"{prompt}\", \"{goal}\"] }\n\
        [[task]]\nid = \"one\"\nprompt = \"Do one\"\nowns = [\"pkg/one.py\"]\n";
    let state = repo.run_with_env(toml, 1, &|k| std::env::var(k).ok());
    let one = state.task("one").unwrap();
    assert_eq!(one.state, TaskState::Done, "{:?}", one.error);
    let log = fs::read_to_string(&one.log).unwrap();
    assert_eq!(log, "<one>\n<pkg/one.py>\n<Do one>\n<the goal>\n");
    assert_eq!(repo.tree_files(&one.branch)["pkg/one.py"], "1\nchanged\n");

    let missing = "[defaults]\nagent = { cli = [\"no-such-agent-program\", \"{prompt}\"] }\n\
        [[task]]\nid = \"one\"\nprompt = \"p\"\nowns = [\"pkg/one.py\"]\n";
    let path = repo.plan(missing);
    let git = plait_core::git::open(&repo.path).unwrap();
    let err = plait_plan::resolve_with_env(
        &git,
        plait_plan::parse(missing, &path).unwrap(),
        &path,
        &|k| std::env::var(k).ok(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("the agent program `no-such-agent-program` is not on PATH"),
        "{err}"
    );
}

/// A plait killed after it made a task's branch or worktree and before its record said so
/// leaves them behind a task still pending: resume makes them again instead of failing the
/// task ("branch … already exists").
#[test]
fn resume_remakes_a_branch_and_worktree_a_killed_plait_left_before_its_record() {
    let repo = repo_with_dirs(4);
    let marks = tempfile::tempdir().unwrap();
    let go = marks.path().join("go");
    let plan = repo.plan(&dir_plan(4, &waiting_agent(&go), ""));
    let mut child = spawn_run(&repo, &plan);
    // Two run (`-j 2`), two wait.
    let before = wait_for_running(&repo, 2);
    child.kill().unwrap();
    let _ = child.wait();
    let run = before["id"].as_str().unwrap().to_string();
    let pending: Vec<&serde_json::Value> = before["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["state"] == "pending")
        .collect();
    assert_eq!(pending.len(), 2, "{before:#}");
    // What the killed plait had made of them: one's branch, the other's worktree.
    let branch = pending[0]["branch"].as_str().unwrap();
    repo.git(&["branch", branch, "main"]);
    let worktree = Path::new(pending[1]["worktree"].as_str().unwrap());
    fs::create_dir_all(worktree.join("pkg")).unwrap();
    fs::write(worktree.join("pkg/half.py"), "half\n").unwrap();
    fs::write(&go, "").unwrap();
    let out = repo.plait(&["resume", &run]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::stderr(&out)
    );
    let after = repo.status_json(&[&run]);
    for t in after["tasks"].as_array().unwrap() {
        assert_eq!(t["state"], "done", "{t:#}");
    }
    let merged = repo.tree_files(&format!("plait/{run}/merged"));
    for i in 0..4 {
        assert!(
            merged[&format!("pkg/m{i}/mod.py")].ends_with("done\n"),
            "{merged:?}"
        );
    }
    assert!(!merged.contains_key("pkg/half.py"));
}
