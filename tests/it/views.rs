//! A task's whole-tree view for the commands its agent runs, with agents that are plain
//! processes: the whole repository at the base with the task's edits in place — for a
//! `{ cli }` agent an overlay over the run's base layer it starts in where the kernel
//! allows it, for an exec agent (which starts in its sparse worktree) the same overlay
//! that `$PLAIT_RUN_IN` has plait start its command in, else (and with `[sandbox] view =
//! "filled"`) the worktree filled in by `$PLAIT_RUN_IN`; writes and deletions of files not
//! owned are violations that reach no branch; and `plait clean` takes the views'
//! directories away.

use std::fs;

use crate::support::{skip, stderr, stdout, TestRepo};

const HELPER: &str = "VALUE = 41\n";

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        (".gitignore", "target/\n"),
        ("lib/helper.py", HELPER),
        ("src/a/x.txt", "hi\n"),
        ("src/b/y.txt", "yo\n"),
        ("README.md", "readme\n"),
    ])
}

/// How a test's agents run: `kind` "exec" (`{ exec = CMD }`) or "cli" (`{ cli = ["sh",
/// "-c", CMD] }`), with `extra` TOML.
#[derive(Clone, Copy, Debug)]
struct Mode {
    kind: &'static str,
    extra: &'static str,
}

impl Mode {
    /// Whether this mode's processes start in an overlay view here.
    fn overlay(self) -> bool {
        self.extra.is_empty() && plait_sandbox::sandbox::view_support().is_ok()
    }

    fn agent(self, command: &str) -> String {
        match self.kind {
            "exec" => format!("{{ exec = '''{command}''' }}"),
            _ => format!("{{ cli = [\"sh\", \"-c\", '''{command}'''] }}"),
        }
    }
}

const FILLED: &str = "[defaults.sandbox]\nview = \"filled\"\n";
const MODES: [Mode; 3] = [
    Mode {
        kind: "exec",
        extra: "",
    },
    Mode {
        kind: "cli",
        extra: "",
    },
    Mode {
        kind: "cli",
        extra: FILLED,
    },
];

/// A plan of tasks a and b, their agents running `a` and `b` as `mode` says, with `extra`
/// after them; an agent that changes nothing is no concern of these tests.
fn plan(mode: Mode, a: &str, b: &str, extra: &str) -> String {
    format!(
        "goal = \"g\"\n[review]\nagent = \"off\"\nrounds = 2\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"src/a/\"]\nagent = {}\nexpect_changes = false\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"src/b/\"]\nagent = {}\nexpect_changes = false\n\
         {}{extra}",
        mode.agent(a),
        mode.agent(b),
        mode.extra
    )
}

/// The agent's command, reading files it does not own, as a build or a test would,
/// through `$PLAIT_RUN_IN` (which only runs it where the agent is in an overlay).
const READS: &str = "$PLAIT_RUN_IN sh -c 'test -f src/b/y.txt && test -f README.md && \
     cat lib/helper.py > src/a/seen.txt && ls lib src >> src/a/seen.txt && echo \"$PLAIT_VIEW\" > src/a/view.txt'";

#[test]
fn an_agent_sees_the_whole_tree_with_its_edits_in_either_kind_of_view() {
    for mode in MODES {
        let repo = sample();
        let a = format!(
            "echo hello > src/a/x.txt && {READS} && $PLAIT_RUN_IN grep -qx hello src/a/x.txt"
        );
        let toml = plan(mode, &a, "true", "");
        let out = repo.plait(&["run", repo.plan(&toml).to_str().unwrap()]);
        assert!(out.status.success(), "{mode:?}: {}", stderr(&out));
        let status = repo.status_json(&[]);
        let run = status["id"].as_str().unwrap();
        let task = &status["tasks"][0];
        assert_eq!(task["state"], "done", "{mode:?}: {task}");
        assert_eq!(
            task["violations"].as_array().unwrap().len(),
            0,
            "{mode:?}: {task}"
        );
        let branch = repo.tree_files(&format!("plait/{run}/a"));
        assert_eq!(branch["src/a/x.txt"], "hello\n");
        assert_eq!(
            branch["src/a/seen.txt"],
            format!("{HELPER}lib:\nhelper.py\n\nsrc:\na\nb\n")
        );
        let expected = if mode.overlay() {
            "overlay\n"
        } else {
            "filled\n"
        };
        assert_eq!(branch["src/a/view.txt"], expected, "{mode:?}");
        // Only what the task owns and changed is on its branch; nothing of the view's.
        let changed = repo.git(&["diff", "--name-only", "main", &format!("plait/{run}/a")]);
        assert_eq!(
            changed, "src/a/seen.txt\nsrc/a/view.txt\nsrc/a/x.txt",
            "{mode:?}"
        );
        assert_eq!(
            repo.git(&["status", "--porcelain"]),
            "",
            "{mode:?}: the checkout is untouched"
        );
    }
}

#[test]
fn writes_and_deletions_of_files_not_owned_in_the_view_are_violations_on_no_branch() {
    for mode in MODES {
        let repo = sample();
        // Also the shared checkout under the overlay itself, by its own path.
        let a = format!(
            "$PLAIT_RUN_IN sh -c 'echo hello > src/a/x.txt && echo VALUE = 0 > lib/helper.py && \
             rm README.md && echo taken > src/b/y.txt; for f in {}/.git/plait/envs/*/tree/lib/helper.py; \
             do echo VALUE = 1 > \"$f\"; done; true'",
            repo.path.display()
        );
        let out = repo.plait(&[
            "run",
            repo.plan(&plan(mode, &a, "echo hey > src/b/y.txt", ""))
                .to_str()
                .unwrap(),
        ]);
        let status = repo.status_json(&[]);
        let run = status["id"].as_str().unwrap().to_string();
        let a = &status["tasks"][0];
        let mut violations: Vec<&str> = a["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["path"].as_str().unwrap())
            .collect();
        violations.sort();
        assert_eq!(
            violations,
            ["README.md", "lib/helper.py", "src/b/y.txt"],
            "{mode:?}: {a}\n{}",
            stderr(&out)
        );
        for branch in repo.branches() {
            let files = repo.tree_files(&branch);
            assert_eq!(files["lib/helper.py"], HELPER, "{mode:?}: {branch}");
            assert_eq!(files["README.md"], "readme\n", "{mode:?}: {branch}");
        }
        let b = repo.tree_files(&format!("plait/{run}/b"));
        assert_eq!(
            b["src/b/y.txt"], "hey\n",
            "{mode:?}: the neighbour's own work stands"
        );
        assert_eq!(repo.read("lib/helper.py"), HELPER, "{mode:?}");
        let views = fs::read_dir(repo.path.join(".git/plait/envs"));
        let mut shared_seen = 0;
        for entry in views.into_iter().flatten().flatten() {
            let shared = entry.path().join("tree/lib/helper.py");
            if shared.exists() {
                let text = fs::read_to_string(&shared).unwrap();
                assert_eq!(text, HELPER, "{mode:?}: {}", shared.display());
                shared_seen += 1;
            }
        }
        // The base layer is made wherever layers can be had, for the checks too.
        let layered = plait_sandbox::sandbox::view_support().is_ok();
        assert_eq!(shared_seen, usize::from(layered), "{mode:?}");
        assert_eq!(
            repo.git(&["status", "--porcelain"]),
            "",
            "{mode:?}: the checkout is untouched"
        );
    }
}

#[test]
fn build_output_in_the_view_is_kept_for_the_next_round_and_committed_nowhere() {
    for mode in MODES {
        let repo = sample();
        // Round 0 builds and fails its check; round 1 finds its own build output.
        let a = "$PLAIT_RUN_IN sh -c 'mkdir -p target && echo \"round $PLAIT_ROUND\" >> target/built && \
                 cp target/built src/a/x.txt'";
        let check = r#"test "$(tail -n 1 src/a/x.txt)" != "round 0""#;
        let extra = format!("[checks]\ntask = ['''{check}''']\n");
        let toml = plan(mode, a, "true", &extra);
        let out = repo.plait(&["run", repo.plan(&toml).to_str().unwrap()]);
        let status = repo.status_json(&[]);
        let task = &status["tasks"][0];
        assert!(out.status.success(), "{mode:?}: {}\n{task}", stderr(&out));
        let run = status["id"].as_str().unwrap();
        let branch = repo.tree_files(&format!("plait/{run}/a"));
        assert_eq!(
            branch["src/a/x.txt"], "round 0\nround 1\n",
            "{mode:?}: {task}"
        );
        assert!(!branch.keys().any(|p| p.starts_with("target")), "{mode:?}");
    }
}

#[test]
fn clean_removes_a_runs_view_directories_and_clean_seed_the_bases_checkouts() {
    let repo = sample();
    let cli = Mode {
        kind: "cli",
        extra: "",
    };
    let out = repo.plait(&[
        "run",
        repo.plan(&plan(cli, READS, "true", "")).to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    let worktree = std::path::PathBuf::from(status["tasks"][0]["worktree"].as_str().unwrap());
    let views = repo.path.join(".git/plait/envs");
    let overlay = cli.overlay();
    let work = plait_trees::workspace::view::work_dir(&worktree);
    if overlay {
        assert!(work.is_dir(), "{}", work.display());
        assert_eq!(
            fs::read_dir(&views)
                .unwrap()
                .flatten()
                .filter(|e| e.path().is_dir())
                .count(),
            1
        );
    }
    let out = repo.plait(&["clean", &run, "--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!work.exists(), "{}", work.display());
    assert!(!worktree.exists());
    let out = repo.plait(&["clean", "--seed"]);
    assert!(out.status.success(), "{}", stderr(&out));
    if overlay {
        assert!(
            stdout(&out).contains("removed 1 base layer(s)"),
            "{}",
            stdout(&out)
        );
    }
    let left = fs::read_dir(&views)
        .map(|d| d.flatten().filter(|e| e.path().is_dir()).count())
        .unwrap_or(0);
    assert_eq!(left, 0);
}

/// A plait killed mid-round leaves the task's view as it was: the resumed round starts in
/// the same overlay (or filled-in worktree) and finds the build output the killed one left.
#[test]
fn a_resumed_task_keeps_its_view_and_build_output_after_a_crash() {
    for mode in [MODES[1], MODES[2]] {
        let repo = sample();
        let a = "$PLAIT_RUN_IN sh -c 'mkdir -p target && echo run >> target/log && \
                 if [ -f target/first ]; then cp target/log src/a/x.txt && test -f README.md && echo seen >> src/a/x.txt; \
                 else touch target/first && echo started > src/a/started && sleep 60; fi'";
        let plan_path = repo.plan(&plan(mode, a, "true", ""));
        crate::support::init();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_plait"))
            .args(["run", plan_path.to_str().unwrap(), "-j", "2"])
            .current_dir(&repo.path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let status = crate::support::wait_for_running(&repo, 1);
        let run = status["id"].as_str().unwrap().to_string();
        let task = status["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == "a")
            .unwrap();
        let worktree = std::path::PathBuf::from(task["worktree"].as_str().unwrap());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !worktree.join("src/a/started").exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "{mode:?}: the agent never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let out = repo.plait(&["resume", &run]);
        assert!(out.status.success(), "{mode:?}: {}", stderr(&out));
        let branch = repo.tree_files(&format!("plait/{run}/a"));
        assert_eq!(branch["src/a/x.txt"], "run\nrun\nseen\n", "{mode:?}");
        assert!(!branch.keys().any(|p| p.starts_with("target")), "{mode:?}");
    }
}

/// The marker that says a worktree was filled in lies in the scratch, where the agent
/// writes: one an agent in an overlay writes itself does not make collect take the base's
/// files, which its worktree never holds, for deletions.
#[test]
fn a_filled_marker_written_in_an_overlay_means_nothing() {
    let cli = MODES[1];
    if !cli.overlay() {
        skip("no overlay views here");
        return;
    }
    let repo = sample();
    let a = "touch \"$PLAIT_SCRATCH/.view-filled\" && echo hello > src/a/x.txt";
    let out = repo.plait(&[
        "run",
        repo.plan(&plan(cli, a, "true", "")).to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let task = &status["tasks"][0];
    assert_eq!(task["violations"], serde_json::json!([]), "{task}");
    assert_eq!(task["state"], "done", "{task}");
}

/// A process the task left behind swaps a directory of its worktree with a link to the
/// home (`renameat2(RENAME_EXCHANGE)` in a loop) while `f` runs, `times` times; the
/// directory's path in the worktree, and the home's as it was.
fn against_a_flipper(
    worktree: &std::path::Path,
    dir: &str,
    home: &std::path::Path,
    times: usize,
    mut f: impl FnMut(usize),
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let swap = worktree.join(format!("{dir}.swap"));
    std::os::unix::fs::symlink(home.join("dir"), &swap).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, real) = (stop.clone(), worktree.join(dir));
        std::thread::spawn(move || {
            let (a, b) = (
                std::ffi::CString::new(real.as_os_str().as_encoded_bytes()).unwrap(),
                std::ffi::CString::new(swap.as_os_str().as_encoded_bytes()).unwrap(),
            );
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: renameat2 on two NUL-terminated paths.
                unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    );
                }
            }
        })
    };
    for i in 0..times {
        f(i);
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
}

/// Filling a worktree in writes the base's files beneath a handle of it: a link the task
/// put where a directory is (still, or swapped in and out by a process it left behind)
/// leads nowhere, and the files behind it are never written.
#[test]
fn filling_in_a_view_writes_nothing_through_a_link_the_task_planted() {
    let repo = sample();
    let (home, before) = crate::environment::home_with_targets(&repo);
    let git = git2::Repository::open(&repo.path).unwrap();
    let tree = git.head().unwrap().peel_to_tree().unwrap();
    let files = plait_core::git::flatten_tree(&tree).unwrap();
    let worktree = repo.scratch.join("worktree");
    fs::create_dir_all(worktree.join("src")).unwrap();
    // Planted once and left: `lib` a link to a directory in the home, `README.md` a link
    // to a file there.
    std::os::unix::fs::symlink(home.join("dir"), worktree.join("lib")).unwrap();
    std::os::unix::fs::symlink(home.join("victim"), worktree.join("README.md")).unwrap();
    let owned = |p: &str| p.starts_with("src/a/");
    plait_trees::workspace::view::materialize(&git, &files, &owned, &worktree).unwrap();
    assert_eq!(crate::environment::snapshot(&home), before);
    assert_eq!(
        fs::read_to_string(worktree.join("src/b/y.txt")).unwrap(),
        "yo\n"
    );
    // Swapped in and out while plait fills the worktree in, 200 times.
    fs::create_dir_all(worktree.join("src/b")).unwrap();
    against_a_flipper(&worktree, "src/b", &home, 200, |_| {
        let _ = fs::remove_file(worktree.join("src/b/y.txt"));
        let _ = plait_trees::workspace::view::materialize(&git, &files, &owned, &worktree);
    });
    assert_eq!(crate::environment::snapshot(&home), before);
}

/// Removing a tree a task wrote removes it whole, directories it locked up (mode 000)
/// included, and nothing outside: a link to a directory in the home, still or swapped in
/// and out of the tree by a process the task left behind, is removed and never followed
/// or opened up.
#[test]
fn removing_a_tree_changes_nothing_behind_its_links() {
    use std::os::unix::fs::PermissionsExt as _;
    let repo = sample();
    let (home, _) = crate::environment::home_with_targets(&repo);
    fs::set_permissions(home.join("dir"), fs::Permissions::from_mode(0o750)).unwrap();
    let before = crate::environment::snapshot(&home);
    let root = repo.scratch.join("trees");
    for i in 0..200 {
        let tree = root.join(format!("t{i}"));
        fs::create_dir_all(tree.join("locked/deeper")).unwrap();
        fs::write(tree.join("locked/deeper/f"), "f").unwrap();
        std::os::unix::fs::symlink(home.join("dir"), tree.join("locked/out")).unwrap();
        std::os::unix::fs::symlink(&home, tree.join("home")).unwrap();
        fs::set_permissions(
            tree.join("locked/deeper"),
            fs::Permissions::from_mode(0o000),
        )
        .unwrap();
        fs::set_permissions(tree.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
        fs::create_dir_all(tree.join("flip")).unwrap();
        against_a_flipper(&tree, "flip", &home, 1, |_| {
            plait_trees::environment::remove_tree(&tree)
        });
        let _ = fs::remove_file(tree.join("flip.swap"));
        plait_trees::environment::remove_tree(&tree);
        assert!(!tree.exists(), "{}", tree.display());
        assert_eq!(crate::environment::snapshot(&home), before, "after {i}");
    }
}

/// `plait clean --force` removes a worktree whose task left directories locked up and links
/// to the home in it, and changes nothing in the home, permissions included.
#[test]
fn clean_removes_a_locked_up_worktree_and_nothing_behind_its_links() {
    use std::os::unix::fs::PermissionsExt as _;
    let repo = sample();
    let (home, _) = crate::environment::home_with_targets(&repo);
    fs::set_permissions(home.join("dir"), fs::Permissions::from_mode(0o750)).unwrap();
    let before = crate::environment::snapshot(&home);
    let cli = MODES[1];
    let a = format!(
        "echo hello > src/a/x.txt && mkdir -p target/locked/deeper && echo f > target/locked/deeper/f \
         && ln -s {home}/dir target/out && ln -s {home} target/locked/home \
         && chmod 000 target/locked/deeper target/locked",
        home = home.display()
    );
    // Whether the run finishes with a worktree it cannot read is no matter here.
    let _ = repo.plait(&[
        "run",
        repo.plan(&plan(cli, &a, "true", "")).to_str().unwrap(),
    ]);
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    let worktree = std::path::PathBuf::from(status["tasks"][0]["worktree"].as_str().unwrap());
    assert!(
        fs::symlink_metadata(worktree.join("target/locked")).is_ok(),
        "{}",
        status["tasks"][0]
    );
    let out = repo.plait(&["clean", &run, "--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!worktree.exists(), "{}", worktree.display());
    assert_eq!(crate::environment::snapshot(&home), before);
}

/// Forty `$PLAIT_RUN_IN` commands of one agent at once all start in its view and all
/// write there (they once failed to start now and then: "Invalid argument"), run
/// several times.
#[test]
fn forty_commands_at_once_in_one_view_all_start() {
    let mode = MODES[0];
    if !mode.overlay() {
        skip("no overlay views here");
        return;
    }
    let agent = "for i in $(seq 1 40); do \
         ( $PLAIT_RUN_IN sh -c \"echo \\$0 > src/a/r\\$0.txt\" $i 2>> src/a/errors.txt \
           || echo \"$i: $?\" >> src/a/failed.txt ) & \
         done; wait";
    for rep in 0..4 {
        let repo = sample();
        let toml = plan(mode, agent, "true", "");
        let out = repo.plait(&["run", repo.plan(&toml).to_str().unwrap()]);
        assert!(out.status.success(), "rep {rep}: {}", stderr(&out));
        let run = repo.status_json(&[])["id"].as_str().unwrap().to_string();
        let branch = repo.tree_files(&format!("plait/{run}/a"));
        let failed = branch.get("src/a/failed.txt").cloned().unwrap_or_default();
        let errors = branch.get("src/a/errors.txt").cloned().unwrap_or_default();
        assert_eq!(failed, "", "rep {rep}: {errors}");
        for i in 1..=40 {
            assert_eq!(
                branch.get(&format!("src/a/r{i}.txt")).map(String::as_str),
                Some(format!("{i}\n").as_str()),
                "rep {rep}: {errors}"
            );
        }
    }
}
