//! The project's own environment as a new user brings it, with default settings (a config
//! of the test's own, nothing `readable`): exec agents start in their view when the run
//! has a base layer, so a codemod finds `node_modules/.bin` and the venv that `[setup]
//! include` shares (`view = false` keeps the bare worktree); and inside every view the
//! user's checkout path shows the tree being worked on or judged, so a venv made in the
//! checkout, its scripts' `#!` lines and an editable install's `.pth` reach the task's
//! files, never the user's working copy.

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::support::sandbox::namespaces;
use crate::support::{skip, stderr, stdout, task_json, TestRepo};

/// An empty config directory of the test's own: a new user's settings.
fn own_config(repo: &TestRepo) -> String {
    let config = repo.scratch.join("xdg-config");
    fs::create_dir_all(&config).unwrap();
    config.display().to_string()
}

/// Every log of the newest run's tasks, for a failure's message.
fn logs(repo: &TestRepo) -> String {
    let mut all = String::new();
    let runs = repo.path.join(".git/plait/runs");
    for run in fs::read_dir(&runs).into_iter().flatten().flatten() {
        for task in fs::read_dir(run.path().join("tasks"))
            .into_iter()
            .flatten()
            .flatten()
        {
            for file in fs::read_dir(task.path()).into_iter().flatten().flatten() {
                let path = file.path();
                if path.extension().is_some_and(|e| e == "log") {
                    let text = fs::read_to_string(&path).unwrap_or_default();
                    let _ = write!(all, "== {}\n{text}\n", path.display());
                }
            }
        }
    }
    all
}

fn executable(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A Node project with `fmt` installed in the checkout's ignored `node_modules` as npm
/// installs a package's `bin`: `node_modules/.bin/fmt` a link to its script, which turns
/// `old` into `new` in the files it is given.
fn node_project() -> TestRepo {
    let repo = TestRepo::with_files(&[
        (".gitignore", "node_modules/\n"),
        (
            "package.json",
            "{\"name\": \"p\", \"version\": \"1.0.0\"}\n",
        ),
        ("a.js", "const a = 'old';\n"),
        ("b.js", "const b = 'old';\n"),
        ("c.js", "const c = 'old';\n"),
        ("d.js", "const d = 'old';\n"),
        ("e.js", "const e = 'old';\n"),
    ]);
    let modules = repo.path.join("node_modules");
    executable(
        &modules.join("fmt/bin/fmt.sh"),
        "#!/bin/sh\nfor f in \"$@\"; do sed -i 's/old/new/' \"$f\" || exit 1; done\n",
    );
    fs::write(
        modules.join("fmt/package.json"),
        "{\"name\": \"fmt\", \"version\": \"1.0.0\", \"bin\": {\"fmt\": \"bin/fmt.sh\"}}\n",
    )
    .unwrap();
    fs::create_dir_all(modules.join(".bin")).unwrap();
    std::os::unix::fs::symlink("../fmt/bin/fmt.sh", modules.join(".bin/fmt")).unwrap();
    repo
}

#[test]
fn exec_agents_run_the_projects_node_modules_bin_in_their_view() {
    if !namespaces() {
        return;
    }
    let repo = node_project();
    let npx = plait_sandbox::shell::findable("npx", std::env::var("PATH").ok().as_deref());
    let mut plan = String::from(
        "goal = \"g\"\n[review]\nagent = \"off\"\nrounds = 0\n\
         [setup]\ninclude = [\"node_modules/\"]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.js\"]\n\
         agent = { exec_each = \"node_modules/.bin/fmt {file}\" }\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"b.js\"]\n\
         agent = { exec = 'test -x node_modules/.bin/fmt && $PLAIT_RUN_IN node_modules/.bin/fmt $(cat \"$PLAIT_OWNED\")' }\n\
         [[task]]\nid = \"c\"\nprompt = \"p\"\nowns = [\"c.js\"]\n\
         sandbox = { view = false }\n\
         agent = { exec = 'test ! -e node_modules && $PLAIT_RUN_IN node_modules/.bin/fmt $(cat \"$PLAIT_OWNED\")' }\n\
         [[task]]\nid = \"d\"\nprompt = \"p\"\nowns = [\"d.js\"]\n\
         agent = { exec = 'cd \"$PLAIT_WORKTREE\" && node_modules/.bin/fmt \"$PLAIT_FILE\"' }\n",
    );
    if npx {
        plan.push_str(
            "[[task]]\nid = \"e\"\nprompt = \"p\"\nowns = [\"e.js\"]\n\
             agent = { exec_each = \"npx --no-install fmt {file}\" }\n",
        );
    } else {
        skip("no npx on PATH: its task is left out");
    }
    let plan = repo.plan(&plan);
    let config = own_config(&repo);
    let started = std::time::Instant::now();
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap()],
        &[("XDG_CONFIG_HOME", &config)],
    );
    assert!(
        out.status.success(),
        "{}\n{}\n{}",
        stdout(&out),
        stderr(&out),
        logs(&repo)
    );
    // No registry waited on (npx offline would spend a minute in its retries).
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    let ids: &[&str] = if npx {
        &["a", "b", "c", "d", "e"]
    } else {
        &["a", "b", "c", "d"]
    };
    for id in ids {
        let task = task_json(&status, id);
        assert_eq!(task["state"], "done", "{task:#}");
        let file = format!("{id}.js");
        let tree = repo.tree_files(&format!("plait/{run}/{id}"));
        assert_eq!(tree[&file], format!("const {id} = 'new';\n"), "{id}");
        // The user's working copy is left as it was.
        assert_eq!(repo.read(&file), format!("const {id} = 'old';\n"));
    }
}

#[test]
fn view_false_is_for_agents_plait_starts_a_command_for_and_other_values_are_named() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    let model = repo.plan(
        "goal = \"g\"\n[review]\nagent = \"off\"\n\
         [providers.m]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n\
         api_key_env = \"PLAIT_TEST_KEY\"\nmodel = \"claude-sonnet-4-5\"\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.txt\"]\nagent = \"m\"\n\
         sandbox = { view = false }\n",
    );
    let out = repo.plait_env(
        &["run", "--dry-run", model.to_str().unwrap()],
        &[("PLAIT_TEST_KEY", "k")],
    );
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(
        text.contains(
            "task `a`: sandbox view = false keeps an exec or { cli } agent's own command"
        ),
        "{text}"
    );
    let bare = repo.plan(
        "goal = \"g\"\n[review]\nagent = \"off\"\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"a.txt\"]\nagent = { exec = \"true\" }\n\
         sandbox = { view = \"bare\" }\n",
    );
    let out = repo.plait(&["run", "--dry-run", bare.to_str().unwrap()]);
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(
        text.contains("view = \"bare\" is not a view")
            && text.contains("\"auto\" (the default), \"filled\", or false"),
        "{text}"
    );
}

/// A Python project whose venv was made in the user's checkout (its `pyvenv.cfg` and its
/// scripts' `#!` lines name the checkout) with the project installed editable (a `.pth`
/// naming `<checkout>/src`, as pip writes it), and a script `pkgcheck` that compares the
/// `VALUE` it imports with the one in the working directory's `src/pkg/__init__.py`.
fn python_project() -> Option<TestRepo> {
    let repo = TestRepo::with_files(&[
        (".gitignore", ".venv/\n__pycache__/\n"),
        ("compare.py", COMPARE),
        ("src/pkg/__init__.py", "VALUE = \"old\"\n"),
        ("setup.cfg", "[metadata]\nname = pkg\n"),
    ]);
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip", ".venv"])
        .current_dir(&repo.path)
        .output();
    if !made.is_ok_and(|o| o.status.success()) {
        skip("python3 -m venv cannot make a venv here");
        return None;
    }
    let lib = fs::read_dir(repo.path.join(".venv/lib"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python"))
        .unwrap()
        .path()
        .join("site-packages");
    fs::write(
        lib.join("__editable__.pkg-1.0.pth"),
        format!("{}\n", repo.path.join("src").display()),
    )
    .unwrap();
    let python = repo.path.join(".venv/bin/python");
    executable(
        &repo.path.join(".venv/bin/pkgcheck"),
        &format!(
            "#!{}\nimport runpy\nrunpy.run_path('compare.py')\n",
            python.display()
        ),
    );
    Some(repo)
}

/// Exits 1 naming both when the imported `pkg.VALUE` is not the working directory's.
const COMPARE: &str = "import sys, pkg\n\
    here = open('src/pkg/__init__.py').read().split('\"')[1]\n\
    sys.exit(0 if pkg.VALUE == here else 'imported %r from %s, the tree holds %r' \
    % (pkg.VALUE, pkg.__file__, here))\n";

#[test]
fn a_venv_made_in_the_checkout_and_its_editable_install_see_the_tasks_tree() {
    if !namespaces() {
        return;
    }
    let Some(repo) = python_project() else {
        return;
    };
    let check = ".venv/bin/python compare.py && .venv/bin/pkgcheck && git log -1 --format=%s";
    let check_toml = format!("{check:?}");
    let agent = format!(
        "{:?}",
        format!("sed -i 's/old/new/' src/pkg/__init__.py && {check}")
    );
    let plan = repo.plan(&format!(
        "goal = \"g\"\n[review]\nagent = \"off\"\nrounds = 0\n\
         [setup]\ninclude = [\".venv/\"]\n\
         [checks]\ntask = [{check_toml}]\nmerged = [{check_toml}]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"src/pkg/__init__.py\"]\n\
         agent = {{ exec = {agent} }}\n"
    ));
    let config = own_config(&repo);
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap()],
        &[("XDG_CONFIG_HOME", &config)],
    );
    assert!(
        out.status.success(),
        "{}\n{}\n{}",
        stdout(&out),
        stderr(&out),
        logs(&repo)
    );
    let status = repo.status_json(&[]);
    let task = task_json(&status, "a");
    assert_eq!(task["state"], "done", "{task:#}");
    assert!(
        task["checks"]
            .as_array()
            .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c["passed"] == true)),
        "{task:#}"
    );
    assert!(
        status["merged_checks"]
            .as_array()
            .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c["passed"] == true)),
        "{:#}",
        status["merged_checks"]
    );
    // Nothing the walls refused: plait's own making ready of the checkout is not a refusal.
    let refused = task["sandbox"]["refused"].to_string();
    assert!(!refused.contains("plait-checkout"), "{refused}");
    // The user's working copy is untouched: its module, and no byte code written in it.
    assert_eq!(repo.read("src/pkg/__init__.py"), "VALUE = \"old\"\n");
    assert!(!repo.path.join("src/pkg/__pycache__").exists());
}

/// The attack on the checkout's entries: an agent whose own command runs beside its view
/// (`view = false`) swaps a directory at its worktree's root with a link to a directory
/// outside (`renameat2(RENAME_EXCHANGE)` in a loop) while 200 commands started in its view
/// read through the checkout's path. A bind that followed the link would show the
/// directory outside at the checkout, with the entry's rule on it: none does.
#[test]
fn a_link_swapped_in_at_the_views_root_never_shows_outside_at_the_checkout() {
    if !namespaces()
        || !plait_sandbox::shell::findable("python3", std::env::var("PATH").ok().as_deref())
    {
        return;
    }
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    let outside = repo.scratch.join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "SECRET-outside\n").unwrap();
    let flip = "import ctypes, os, time\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         end = time.time() + 60\n\
         while time.time() < end and not os.path.exists('stop'):\n    \
         libc.renameat2(-100, b'd', -100, b'e', 2)\n";
    let checkout = repo.path.display().to_string();
    let agent = format!(
        "mkdir d && echo mine > d/secret.txt && ln -s {out} e && printf %s {flip} > flip.py && \
         {{ python3 flip.py & }} && \
         for i in $(seq 200); do $PLAIT_RUN_IN cat {checkout}/d/secret.txt {checkout}/e/secret.txt 2>/dev/null; done > a.txt; \
         touch stop; wait; rm -rf d e flip.py stop; grep -c mine a.txt",
        out = outside.display(),
        flip = shell_quote(flip),
    );
    let plan = repo.plan(&format!(
        "goal = \"g\"\n[review]\nagent = \"off\"\nrounds = 0\n\
         [checks]\ntask = [\"true\"]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.txt\"]\n\
         sandbox = {{ view = false }}\nagent = {{ exec = {agent:?} }}\n"
    ));
    let config = own_config(&repo);
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap()],
        &[("XDG_CONFIG_HOME", &config)],
    );
    assert!(
        out.status.success(),
        "{}\n{}\n{}",
        stdout(&out),
        stderr(&out),
        logs(&repo)
    );
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    let read = repo.tree_files(&format!("plait/{run}/a"))["a.txt"].clone();
    assert!(!read.contains("SECRET"), "{read}");
    // The directory was read through the checkout while it stood there.
    assert!(read.contains("mine"), "{read}\n{}", logs(&repo));
}

/// `text` in single quotes for `sh`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The README's `cargo fmt` recipe as an exec agent over a base layer: it runs in the view
/// as written, and formats the task's file alone.
#[test]
fn cargo_fmt_as_an_exec_agent_formats_the_tasks_file_in_its_view() {
    let path = std::env::var("PATH").ok();
    if !namespaces()
        || !plait_sandbox::shell::findable("cargo", path.as_deref())
        || !plait_sandbox::shell::findable("rustfmt", path.as_deref())
    {
        return;
    }
    let formatted = "pub fn b() -> u32 {\n    2\n}\n";
    let repo = TestRepo::with_files(&[
        (
            "Cargo.toml",
            "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "pub fn a()->u32{1}\n"),
        ("src/b.rs", formatted),
    ]);
    let plan = repo.plan(
        "goal = \"g\"\n[review]\nagent = \"off\"\nrounds = 0\n\
         [checks]\ntask = [\"test -f Cargo.toml\"]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"src/a.rs\"]\nagent = { exec = \"cargo fmt\" }\n",
    );
    let config = own_config(&repo);
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap()],
        &[("XDG_CONFIG_HOME", &config)],
    );
    assert!(
        out.status.success(),
        "{}\n{}\n{}",
        stdout(&out),
        stderr(&out),
        logs(&repo)
    );
    let status = repo.status_json(&[]);
    assert_eq!(task_json(&status, "a")["state"], "done");
    let run = status["id"].as_str().unwrap().to_string();
    let tree = repo.tree_files(&format!("plait/{run}/a"));
    assert_eq!(tree["src/a.rs"], "pub fn a() -> u32 {\n    1\n}\n");
    assert_eq!(repo.read("src/a.rs"), "pub fn a()->u32{1}\n");
}
