//! The kernel's walls, with real processes: exec agents and checks that try to write into a
//! neighbour's worktree, the user's checkout, the git directory, `$HOME` and `/tmp` are
//! refused by Landlock and nothing there changes; `writable` lets a cache path through; a
//! refusal the tool keeps quiet about is recorded all the same (the seccomp observer, from
//! Landlock ABI 5), and a task that writes thousands of files inside records none and runs as
//! it would; `required` on a system without Landlock (made so with a seccomp filter that
//! answers `ENOSYS`, as an old kernel does) is a plan error before anything is created.

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::sandbox::{deny_calls, home, landlock, landlock_abi, refused};
use crate::support::{init, stderr, stdout, task_json, Plan, TestRepo};

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("a/f.txt", "a\n"),
        ("b/f.txt", "b\n"),
        ("README.md", "readme\n"),
    ])
}

/// A plan of one task, `a`, owning `a/`, whose agent runs `exec`.
fn one_task(exec: &str) -> Plan {
    Plan::new().task("a").owns(["/a/"]).exec(exec)
}

/// The real binary with `home` as its `HOME`.
fn plait(repo: &TestRepo, args: &[&str], home: &Path) -> Output {
    repo.plait_env(args, &[("HOME", home.to_str().unwrap())])
}

#[test]
fn an_agent_cannot_write_outside_its_task_even_into_a_running_neighbour() {
    if !landlock() {
        return;
    }
    let repo = sample();
    let home = home(&repo);
    let user = repo.path.display().to_string();
    let scratch = repo.scratch.display().to_string();
    let tmp_file = format!("/tmp/plait-sandbox-test-{}", std::process::id());
    // `a` waits until `b` runs, then tries every place it must not write, then says so in
    // its own file; `b` waits for that before it edits and ends, so its collect comes after
    // every attempt.
    let attacker = format!(
        r#"n=0; until [ -e ../b/b/started ]; do sleep 0.05; n=$((n+1)); [ $n -gt 400 ] && exit 9; done
echo evil > ../b/b/f.txt
echo evil > ../b/b/new.txt
echo evil > {user}/b/f.txt
echo evil > {user}/a/f.txt
touch {user}/.git/refs/heads/evil
echo evil >> {user}/.git/config
echo evil > "$HOME/evil"
echo evil > {scratch}/evil
echo evil > {tmp_file}
echo private > "$TMPDIR/ok" && cat "$TMPDIR/ok"
echo a2 > a/f.txt
touch a/attempted
exit 0"#
    );
    let victim = r#"touch b/started
n=0; until [ -e ../a/a/attempted ]; do sleep 0.05; n=$((n+1)); [ $n -gt 400 ] && exit 9; done
rm b/started
echo b2 > b/f.txt"#;
    let plan = repo.plan(
        &Plan::new()
            .set("defaults", "timeout", "60s")
            .task("a")
            .prompt("attack")
            .owns(["/a/"])
            .exec(&attacker)
            .task("b")
            .prompt("work")
            .owns(["/b/"])
            .exec(victim)
            .to_toml(),
    );
    let config_before = fs::read_to_string(repo.path.join(".git/config")).unwrap();
    let out = plait(&repo, &["run", plan.to_str().unwrap(), "-j", "2"], &home);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();

    // Nothing outside the tasks changed.
    assert_eq!(repo.read("a/f.txt"), "a\n");
    assert_eq!(repo.read("b/f.txt"), "b\n");
    assert!(!repo.path.join(".git/refs/heads/evil").exists());
    // plait itself turns on per-worktree config once (its worktrees are sparse checkouts,
    // as `git sparse-checkout` does); nothing else in the config may change.
    let config_after = fs::read_to_string(repo.path.join(".git/config")).unwrap();
    assert_eq!(
        crate::support::without_worktree_config(&config_after),
        config_before
    );
    assert!(!home.join("evil").exists());
    assert!(!repo.scratch.join("evil").exists());
    let escaped = Path::new(&tmp_file).exists();
    let _ = fs::remove_file(&tmp_file);
    assert!(!escaped, "{tmp_file} was written");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");

    // The neighbour's branch holds only its own edit; the attacker's only its own.
    let b = repo.tree_files(&format!("plait/{run}/b"));
    assert_eq!(b["b/f.txt"], "b2\n");
    assert!(!b.contains_key("b/new.txt"), "{b:?}");
    let a = repo.tree_files(&format!("plait/{run}/a"));
    assert_eq!(a["a/f.txt"], "a2\n");

    let status = repo.status_json(&[&run]);
    for id in ["a", "b"] {
        let t = task_json(&status, id);
        assert_eq!(t["state"], "done", "{t}");
        assert_eq!(t["sandbox"]["confined"], true, "{t}");
        assert!(t["violations"].as_array().unwrap().is_empty(), "{t}");
    }
    let refused = refused(task_json(&status, "a"));
    for path in [
        format!("{user}/b/f.txt"),
        format!("{user}/.git/config"),
        format!("{}/evil", home.display()),
        tmp_file.clone(),
    ] {
        assert!(
            refused
                .iter()
                .any(|r| r == &format!("write to {path} refused")),
            "{path} not in {refused:?}"
        );
    }
    let log = fs::read_to_string(
        repo.path
            .join(format!(".git/plait/runs/{run}/tasks/a/agent.log")),
    )
    .unwrap();
    assert!(
        log.contains("private"),
        "the private TMPDIR is writable: {log}"
    );
    let text = stdout(&repo.plait(&["status", &run]));
    assert!(text.contains("2 task(s) confined"), "{text}");
    assert!(text.contains("the sandbox refused a"), "{text}");
}

#[test]
fn a_failing_agent_is_told_what_the_sandbox_refused() {
    if !landlock() {
        return;
    }
    let repo = sample();
    let home = home(&repo);
    let plan = repo.plan(&one_task("mkdir -p \"$HOME/.cache/tool\" && echo x > a/f.txt").to_toml());
    let out = plait(&repo, &["run", plan.to_str().unwrap()], &home);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "failed");
    let error = a["error"].as_str().unwrap();
    assert!(
        error.contains("the sandbox refused it")
            && error.contains(&format!("{}/.cache", home.display()))
            && error.contains("[sandbox] writable"),
        "{error}"
    );
}

#[test]
fn writable_lets_a_cache_path_through_and_nothing_else() {
    if !landlock() {
        return;
    }
    let repo = sample();
    let home = home(&repo);
    let plan = repo.plan(
        &Plan::new()
            .set("defaults.sandbox", "writable", ["~/.cache/tool"])
            .task("a")
            .owns(["/a/"])
            .exec("echo cached > \"$HOME/.cache/tool/blob\" && echo x > a/f.txt; echo no > \"$HOME/.cache/other\"; true")
            .to_toml(),
    );
    let out = plait(&repo, &["run", plan.to_str().unwrap()], &home);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        fs::read_to_string(home.join(".cache/tool/blob")).unwrap(),
        "cached\n"
    );
    assert!(!home.join(".cache/other").exists());
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(
        refused(a),
        [format!("write to {}/.cache/other refused", home.display())]
    );
}

#[test]
fn a_refusal_the_tool_keeps_quiet_about_is_recorded() {
    // Landlock 5: plait spawns from a thread of its own and installs the seccomp observer
    // there.
    if landlock_abi(5, "the observer").is_none() {
        return;
    }
    let repo = sample();
    let home = home(&repo);
    let out = repo.scratch.join("out");
    fs::create_dir_all(out.join("existing")).unwrap();
    // Every refusal's message goes to /dev/null, as ruff's "Failed to create temporary file"
    // names neither the path nor EACCES; `mkdir -p` meets existing directories on its way,
    // which nothing refused; a relative path is taken from the working directory.
    let agent = format!(
        r#"echo x > a/f.txt
mkdir "$HOME/.ruff_cache" 2>/dev/null
mkdir -p {out}/existing/new 2>/dev/null
{{ echo quiet > {out}/file; }} 2>/dev/null
ln -s f.txt {out}/link 2>/dev/null
(cd {out}/existing && touch ../relative) 2>/dev/null
exit 1"#,
        out = out.display()
    );
    let plan = repo.plan(&one_task(&agent).to_toml());
    let run = plait(&repo, &["run", plan.to_str().unwrap()], &home);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    assert!(!out.join("file").exists());
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "failed", "{a}");
    let log = fs::read_to_string(a["log"].as_str().unwrap()).unwrap();
    assert!(
        !log.to_lowercase().contains("denied"),
        "the tool said nothing: {log}"
    );
    let expected: Vec<String> = [
        home.join(".ruff_cache"),
        out.join("existing/new"),
        out.join("file"),
        out.join("link"),
        out.join("relative"),
    ]
    .iter()
    .map(|p| format!("write to {} refused", p.display()))
    .collect();
    assert_eq!(refused(a), expected, "{a}");
    let error = a["error"].as_str().unwrap();
    assert!(
        error.contains("the sandbox refused it") && error.contains(&expected[0]),
        "{error}"
    );
    let text = stdout(&repo.plait(&["status"]));
    assert!(text.contains("the sandbox refused a"), "{text}");
}

#[test]
fn a_task_writing_thousands_of_files_inside_records_nothing_and_runs_as_it_would() {
    if !landlock() {
        return;
    }
    let repo = sample();
    let home = home(&repo);
    // Files made, written, read back, renamed, linked and removed in the worktree, in its
    // temporary directory and /dev/null, by absolute paths and relative ones, and a
    // `mkdir -p` from the root down.
    let agent = r#"set -e
mkdir -p "$PWD/a/many/deep/er"
i=0
while [ $i -lt 3000 ]; do echo "$i" > a/many/$i; i=$((i+1)); done
sum=0
for f in a/many/[0-9]*; do read -r n < "$f"; sum=$((sum+n)); done
mv a/many/0 a/many/deep/zero && ln a/many/deep/zero a/many/hard && ln -s zero a/many/deep/soft
tmp=$(mktemp) && echo t > "$tmp" && rm "$tmp"
echo discarded > /dev/null
rm -r a/many
echo "$sum" > a/f.txt"#;
    let plan = repo.plan(&one_task(agent).to_toml());
    let out = plait(&repo, &["run", plan.to_str().unwrap()], &home);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    let status = repo.status_json(&[&run]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(refused(a), Vec::<String>::new(), "{a}");
    let tree = repo.tree_files(&format!("plait/{run}/a"));
    assert_eq!(tree["a/f.txt"], format!("{}\n", (0..3000).sum::<u32>()));
    assert!(!tree.keys().any(|k| k.starts_with("a/many")), "{tree:?}");
}

#[test]
fn a_check_running_agent_written_code_is_confined_to_its_checkout() {
    if !landlock() {
        return;
    }
    let repo = sample();
    let home = home(&repo);
    let user = repo.path.display().to_string();
    // The agent writes a "test" that builds into its checkout (fine) and then tries the
    // user's checkout (which shows the check's own tree) and $HOME.
    let evil = format!(
        "set -e\\nmkdir -p build && echo built > build/out\\necho evil > {user}/README.md\\necho evil > \\\"$HOME/evil\\\"\\n"
    );
    let plan = repo.plan(
        &Plan::new()
            .set("checks", "task", ["test ! -f a/test.sh || sh a/test.sh"])
            .set("review", "rounds", 0)
            .task("a")
            .owns(["/a/"])
            .exec(&format!("printf \"{evil}\" > a/test.sh"))
            .to_toml(),
    );
    let out = plait(&repo, &["run", plan.to_str().unwrap()], &home);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(repo.read("README.md"), "readme\n");
    assert!(!home.join("evil").exists());
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "failed", "{a}");
    let check = &a["checks"][0];
    assert_eq!(check["passed"], false, "{check}");
    assert!(
        check["tail"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{check}"
    );
    // The user's checkout path shows the check's own tree (its write landed there, in
    // the tree being judged); the home's write is refused.
    assert_eq!(
        check["refused"][0],
        format!("write to {}/evil refused", home.display()),
        "{check}"
    );
}

#[test]
fn a_replaced_git_link_is_put_back_and_fails_the_task() {
    let repo = sample();
    let plan = repo.plan(
        &one_task("echo x > a/f.txt && rm .git && echo \"gitdir: /nowhere\" > .git").to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "failed");
    assert!(
        a["error"].as_str().unwrap().contains("plait put it back"),
        "{a}"
    );
    let worktree = PathBuf::from(a["worktree"].as_str().unwrap());
    // git can read the worktree again.
    assert_eq!(
        crate::support::git_in(&worktree, &["status", "--porcelain"]),
        "M a/f.txt"
    );
}

#[test]
fn mode_off_runs_unconfined_and_says_so() {
    let repo = sample();
    let home = home(&repo);
    let plan = repo.plan(
        &one_task("echo outside > \"$HOME/written\" && echo x > a/f.txt")
            .set("defaults.sandbox", "mode", "off")
            .to_toml(),
    );
    let out = plait(&repo, &["run", plan.to_str().unwrap()], &home);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(home.join("written").exists());
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["sandbox"]["confined"], false);
    assert_eq!(a["sandbox"]["how"], "off in the plan");
    let text = stdout(&repo.plait(&["status"]));
    assert!(text.contains("sandbox: off in the plan: a"), "{text}");
}

#[test]
fn bad_sandbox_tables_are_plan_errors() {
    let repo = sample();
    let plan = repo.plan(
        "[defaults]\nsandbox = { writable = [\"relative/dir\"], mode = \"auto\" }\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/a/\"]\nagent = { exec = 'true' }\n\
         sandbox = { mode = \"sometimes\" }\n",
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("sometimes"), "{}", stderr(&out));
    let plan = repo.plan(
        "[defaults]\nsandbox = { writable = [\"relative/dir\"] }\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/a/\"]\nagent = { exec = 'true' }\n",
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("writable path `relative/dir` must be absolute or start with `~/`"),
        "{}",
        stderr(&out)
    );
    assert!(!repo.path.join(".git/plait/runs").exists());
    let plan = repo.plan(
        "[defaults]\nsandbox = { limits = { pids = 0, memory = \"lots\" } }\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/a/\"]\nagent = { exec = 'true' }\n\
         sandbox = { limits = { memory = 4096, files = 3 } }\n",
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let said = stderr(&out);
    assert!(said.contains("files"), "{said}");
    let plan = repo.plan(
        "[defaults]\nsandbox = { limits = { pids = 0, memory = \"lots\" } }\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/a/\"]\nagent = { exec = 'true' }\n\
         sandbox = { limits = { memory = 4096 } }\n",
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let said = stderr(&out);
    for problem in [
        "limits: pids = 0 is not a number of processes",
        "limits: memory = \"lots\" is not a size",
        "limits: memory = 4096 is less than 1M",
    ] {
        assert!(said.contains(problem), "{problem}: {said}");
    }
}

/// Runs the real `plait` binary with the Landlock system calls answering `ENOSYS`, as on a
/// kernel without Landlock.
fn plait_without_landlock(repo: &TestRepo, args: &[&str]) -> Output {
    init();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plait"));
    cmd.args(args).current_dir(&repo.path).env("NO_COLOR", "1");
    // SAFETY: the closure runs between fork and exec and only makes system calls on data
    // prepared before the fork.
    unsafe {
        cmd.pre_exec(deny_landlock);
    }
    cmd.output().expect("run plait")
}

/// Makes `landlock_create_ruleset`, `landlock_add_rule` and `landlock_restrict_self`
/// (444–446 on every architecture) fail with `ENOSYS`.
fn deny_landlock() -> std::io::Result<()> {
    deny_calls(&[444, 445, 446], libc::ENOSYS)
}

#[test]
fn required_without_landlock_is_a_plan_error_and_auto_warns() {
    let repo = sample();
    let plan = repo.plan(
        &one_task("echo x > a/f.txt")
            .set("defaults.sandbox", "mode", "required")
            .to_toml(),
    );
    let out = plait_without_landlock(&repo, &["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("sandbox mode \"required\"") && err.contains("no Landlock"),
        "{err}"
    );
    assert!(
        !repo.path.join(".git/plait/runs").exists(),
        "nothing created"
    );
    assert_eq!(repo.branches(), ["main"]);

    let plan = repo.plan(&one_task("echo x > a/f.txt").to_toml());
    let out = plait_without_landlock(&repo, &["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches("warning: the sandbox is not available").count(),
        1,
        "{err}"
    );
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done");
    assert_eq!(a["sandbox"]["confined"], false);
    assert!(
        a["sandbox"]["how"]
            .as_str()
            .unwrap()
            .starts_with("unconfined: "),
        "{a}"
    );
}

#[test]
fn an_agent_cannot_signal_plait() {
    if landlock_abi(6, "signal scoping").is_none() {
        return;
    }
    let repo = sample();
    // A process outside by its id: this test's, plait's parent (in a PID namespace of the
    // agent's own, plait has no id to name, and `$PPID` is 0, the agent's own group).
    let plan = repo.plan(
        &one_task(&format!(
            "kill -TERM {} 2>/dev/null && echo reached > a/f.txt || echo scoped > a/f.txt",
            std::process::id()
        ))
        .to_toml(),
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    assert_eq!(
        repo.tree_files(&format!("plait/{run}/a"))["a/f.txt"],
        "scoped\n"
    );
}

/// A task that starts processes until the kernel refuses one, and one whose process
/// allocates past its memory, each fail naming their limit; a task beside them finishes;
/// and a leftover of the run's agents is gone once the run ends.
#[test]
fn a_fork_flood_and_a_memory_hog_fail_naming_their_limits_and_a_sibling_finishes() {
    if !landlock() {
        return;
    }
    if !plait_sandbox::sandbox::lifetime().starts_with("killed with each command") {
        crate::support::skip("no PID namespaces here");
        return;
    }
    let repo = sample();
    // The leftover of `fine` says `tick` in the task's log while it lives; the agent waits
    // for its first tick (a file in their private temporary directory) before it ends.
    let toml = "goal = \"g\"\n[review]\nagent = \"off\"\n\
         [[task]]\nid = \"flood\"\nprompt = \"p\"\nowns = [\"a/\"]\n\
         agent = { exec = '''i=0; while [ $i -lt 5000 ]; do sleep 100 & i=$((i+1)); done; echo x > a/f.txt''' }\n\
         sandbox = { limits = { pids = 64 } }\n\
         [[task]]\nid = \"hog\"\nprompt = \"p\"\nowns = [\"b/\"]\n\
         agent = { exec = '''/usr/bin/python3 -c 'b = bytearray(1 << 30)' && echo x > b/f.txt''' }\n\
         sandbox = { limits = { memory = \"256M\" } }\n\
         [[task]]\nid = \"fine\"\nprompt = \"p\"\nowns = [\"README.md\"]\n\
         agent = { exec = '''t=${TMPDIR:-/tmp}/ticked; setsid sh -c 'while :; do echo tick; : > \"$0\"; sleep 0.02; done' $t & while ! test -e $t; do sleep 0.01; done; echo ok > README.md''' }\n";
    let plan = repo.plan(toml);
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let flood = task_json(&status, "flood");
    assert_eq!(flood["state"], "failed", "{flood}");
    let error = flood["error"].as_str().unwrap();
    assert!(
        error.contains("the sandbox allows 64 processes at once"),
        "{error}"
    );
    let hog = task_json(&status, "hog");
    assert_eq!(hog["state"], "failed", "{hog}");
    let error = hog["error"].as_str().unwrap();
    assert!(
        error.contains("the sandbox allows 256M per process"),
        "{error}"
    );
    let fine = task_json(&status, "fine");
    assert_eq!(fine["state"], "done", "{fine}");
    let log = fine["log"].as_str().unwrap().to_string();
    let size = || {
        let text = fs::read_to_string(&log).unwrap_or_default();
        text.lines().filter(|l| *l == "tick").count()
    };
    let before = size();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let after = size();
    assert!(
        before > 0 && after == before,
        "the leftover still writes: {before} then {after}: {fine}"
    );
}
