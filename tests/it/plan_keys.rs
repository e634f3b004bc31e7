//! Unknown keys of a plan or config file: all of them named at once, each with its line,
//! the keys its table may hold and the one it was likely meant to be. And, from the same
//! round of first-day fixes, what `plait resume` says of the tasks it takes up.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::{stderr, stdout, wait_until, TestRepo};

#[test]
fn a_plan_with_three_unknown_keys_names_all_three_with_their_lines() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    let path = repo.plan(
        "goal = \"g\"\n\
         [defaults]\n\
         agent = { exec = \"true\" }\n\
         timout = \"5m\"\n\
         [checks]\n\
         merge = [\"true\"]\n\
         [[task]]\n\
         id = \"a\"\n\
         prompt = \"p\"\n\
         owns = [\"/a.txt\"]\n\
         frobnicate = 1\n",
    );
    let out = repo.plait(&["plan", "--check", path.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("plait.toml"), "the file is named: {err}");
    assert!(err.contains("3 unknown fields"), "{err}");
    for line in [
        "line 4, column 1: unknown field `timout` in [defaults], did you mean `timeout`? \
         (valid: agent, checkout, context, timeout, max_turns, token_budget, expect_changes, sandbox, after, attempts, agents)",
        "line 6, column 1: unknown field `merge` in [checks], did you mean `merged`? \
         (valid: task, merged, jobs, timeout, bisect, rework, network, base)",
        "line 11, column 1: unknown field `frobnicate` in [[task]] (valid: id, prompt, owns,",
    ] {
        assert!(err.contains(line), "{line}\n---\n{err}");
    }
    // One line each, in the order of the file.
    let at = |key: &str| err.find(&format!("`{key}`")).unwrap();
    assert!(at("timout") < at("merge") && at("merge") < at("frobnicate"));
}

#[test]
fn a_config_file_with_two_unknown_keys_names_both() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    repo.write(
        ".plait.toml",
        "[checks]\ntask = [\"true\"]\n\n[review]\nround = 1\n[sandbox]\nwriteable = [\"~/.cache\"]\n",
    );
    let path = repo.plan(
        "goal = \"g\"\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/a.txt\"]\n\
         agent = { exec = \"true\" }\n",
    );
    let out = repo.plait(&["plan", "--check", path.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(".plait.toml"),
        "the config file is named: {err}"
    );
    assert!(err.contains("2 unknown fields"), "{err}");
    assert!(
        err.contains(
            "line 5, column 1: unknown field `round` in [review], did you mean `rounds`? \
             (valid: agent, rounds)"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "line 7, column 1: unknown field `writeable` in [sandbox], did you mean `writable`?"
        ),
        "{err}"
    );
}

/// An agent that writes `partial` and sleeps until `go` exists, then writes `done`.
fn waiting_agent(go: &Path) -> String {
    format!(
        "if [ -e {go} ]; then echo done >> pkg/$PLAIT_TASK/mod.py; \
         else echo partial >> pkg/$PLAIT_TASK/mod.py; sleep 120; fi",
        go = go.display()
    )
}

#[test]
fn resume_says_once_which_tasks_it_takes_up_and_nothing_of_their_interruption() {
    let repo = TestRepo::with_files(&[
        ("pkg/m0/mod.py", "v = 0\n"),
        ("pkg/m1/mod.py", "v = 1\n"),
        ("pkg/m2/mod.py", "v = 2\n"),
    ]);
    let marks = tempfile::tempdir().unwrap();
    let go = marks.path().join("go");
    let mut plan = format!(
        "goal = \"g\"\n[defaults]\nagent = {{ exec = '''{}''' }}\n",
        waiting_agent(&go)
    );
    for i in 0..3 {
        let _ = writeln!(
            plan,
            "[[task]]\nid = \"m{i}\"\nprompt = \"p\"\nowns = [\"/pkg/m{i}/\"]"
        );
    }
    let plan = repo.plan(&plan);
    crate::support::init();
    let child = Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(["run", plan.to_str().unwrap(), "-j", "2"])
        .current_dir(&repo.path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Two agents have written their work so far; the third task waits for a slot.
    wait_until("two agents wrote their work so far", || {
        let out = repo.plait(&["status", "--json"]);
        let Ok(status) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
            return false;
        };
        let running: Vec<&serde_json::Value> = status["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["state"] == "running")
            .collect();
        running.len() == 2
            && running.iter().all(|t| {
                let id = t["id"].as_str().unwrap();
                let file =
                    Path::new(t["worktree"].as_str().unwrap()).join(format!("pkg/{id}/mod.py"));
                std::fs::read_to_string(file).is_ok_and(|c| c.ends_with("partial\n"))
            })
    });
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    let state = repo.status_json(&[&run]);
    let ids = |wanted: &str| -> Vec<String> {
        state["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["state"] == wanted)
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (interrupted, pending) = (ids("interrupted"), ids("pending"));
    assert_eq!((interrupted.len(), pending.len()), (2, 1), "{state:#}");

    std::fs::write(&go, "").unwrap();
    // On a terminal (the live display, where the noise was) when `script` can give one.
    let resume = format!("{} resume {run} -j 2", env!("CARGO_BIN_EXE_plait"));
    let out = match Command::new("script")
        .args(["-qec", &resume, "/dev/null"])
        .current_dir(&repo.path)
        .env("NO_COLOR", "1")
        .output()
    {
        Ok(out) => out,
        Err(_) => repo.plait(&["resume", &run, "-j", "2"]),
    };
    let said = format!("{}{}", stdout(&out), stderr(&out)).replace('\r', "\n");
    assert_eq!(out.status.code(), Some(0), "{said}");
    let line = format!(
        "resuming run {run}, 2 at a time: {} go on from their worktrees; {} starts",
        interrupted.join(", "),
        pending[0]
    );
    assert_eq!(said.matches("resuming run").count(), 1, "{said}");
    assert!(said.contains(&line), "{line}\n---\n{said}");
    assert!(!said.contains("interrupted:"), "{said}");
    let after = repo.status_json(&[&run]);
    assert!(
        after["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "done"),
        "{after:#}"
    );
}
