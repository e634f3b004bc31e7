//! The plan's `[setup]`: shown by the dry run and `plan --check`, refused with the key and
//! value at fault, taken from `.plait.toml`, written by `plait plan --split` for a
//! checkout with installed dependencies, and hinted at when a plan without one fails.

use crate::support::{stderr, stdout, TestRepo};

/// A JS project whose `node_modules/` is installed in the checkout and ignored by git.
fn installed() -> TestRepo {
    let repo = TestRepo::with_files(&[
        (".gitignore", "node_modules/\n.env\n"),
        ("package.json", "{\"name\": \"p\"}\n"),
        ("package-lock.json", "{\"lockfileVersion\": 3}\n"),
        ("src/a/index.js", "export const a = 1;\n"),
        ("src/b/index.js", "export const b = 2;\n"),
    ]);
    repo.write("node_modules/left-pad/index.js", "module.exports = 1;\n");
    repo
}

const TASK: &str =
    "[defaults]\nagent = { exec = \"echo x >> src/a/index.js\" }\n[review]\nagent = \"off\"\n\
    [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"src/a/\"]\n";

#[test]
fn the_dry_run_and_the_check_show_the_setup() {
    let repo = installed();
    let plan = repo.plan(&format!(
        "{TASK}[setup]\ninclude = [\"./node_modules/\"]\nrun = [\"true\"]\n\
         key = [\"package-lock.json\"]\nnetwork = \"off\"\ntimeout_s = 90\n"
    ));
    let block = "\nsetup (once per base, before any task):\n\
        \x20 include:  node_modules\n\
        \x20           (from your checkout, read-only in every view and check checkout)\n\
        \x20 run:      `true`\n\
        \x20           network off, 1m 30s each\n\
        \x20 key:      package-lock.json\n\
        \ntask a\n";
    let out = repo.plait(&["run", plan.to_str().unwrap(), "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(", setup: 1 included path(s), 1 run command(s)\n"),
        "{text}"
    );
    assert!(text.contains(block), "{text}");
    assert!(!repo.path.join(".git/plait").exists());

    let out = repo.plait(&["plan", "--check", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("  include:  node_modules\n") && text.contains("  run:      `true`\n"),
        "{text}"
    );
    // The setup shares node_modules: no hint about it.
    assert!(
        !stderr(&out).contains("your checkout has"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_tracked_include_is_refused_before_anything_is_made() {
    let repo = installed();
    let plan = repo.plan(&format!(
        "{TASK}[setup]\ninclude = [\"src/\", \"../elsewhere\"]\nkey = [\"yarn.lock\"]\n"
    ));
    for args in [
        vec!["run", plan.to_str().unwrap()],
        vec!["plan", "--check", plan.to_str().unwrap()],
    ] {
        let out = repo.plait(&args);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains("[setup] include: `src/` holds tracked files (such as `src/a/index.js`)"),
            "{said}"
        );
        assert!(
            said.contains("[setup] include: `../elsewhere` climbs out"),
            "{said}"
        );
        assert!(
            said.contains("[setup] key: glob `yarn.lock` matches no tracked file"),
            "{said}"
        );
    }
    assert!(!repo.path.join(".git/plait").exists());
}

#[test]
fn the_repository_config_may_hold_a_setup() {
    let repo = installed();
    repo.write(".env", "TOKEN=x\n");
    repo.write(
        ".plait.toml",
        "[setup]\ninclude = [\".env\", \"node_modules\"]\n",
    );
    let plan = repo.plan(&format!("{TASK}[setup]\nrun = [\"true\"]\n"));
    let out = repo.plait(&["plan", "--check", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(", setup: 2 included path(s), 1 run command(s)\n")
            && text.contains("  include:  .env\n            node_modules\n"),
        "{text}"
    );
    let out = repo.plait(&["config"]);
    assert!(stdout(&out).contains("[setup]"), "{}", stdout(&out));
}

#[test]
fn the_split_writes_a_setup_for_an_installed_lockfile() {
    let repo = installed();
    let out = repo.plait(&[
        "plan",
        "--split",
        "dir:src/*",
        "--prompt",
        "Fix {path}",
        "--exec",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("\n[setup]\ninclude = [\"node_modules/\"]\n"),
        "{text}"
    );
    assert!(
        stderr(&out).contains("[setup] shares node_modules/"),
        "{}",
        stderr(&out)
    );
    // What it wrote is a valid plan.
    let plan = repo.plan(&text);
    let out = repo.plait(&["plan", "--check", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Without the installed directory, no [setup].
    std::fs::remove_dir_all(repo.path.join("node_modules")).unwrap();
    let out = repo.plait(&["plan", "--split", "dir:src/*", "--prompt", "Fix {path}"]);
    assert!(!stdout(&out).contains("[setup]"), "{}", stdout(&out));
}

#[test]
fn a_plan_without_setup_is_warned_and_its_failures_get_the_hint() {
    let repo = installed();
    let plan = repo.plan(&format!(
        "{TASK}[checks]\ntask = [\"test -d node_modules/left-pad\"]\n"
    ));
    let out = repo.plait(&["plan", "--check", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hint = "your checkout has node_modules/ (ignored, so not in the tasks' views); add \
        [setup] include = [\"node_modules/\"] or a [setup] run that installs it (e.g. run = \
        [\"npm ci --offline\"])";
    assert!(
        stderr(&out).contains(&format!("warning: {hint}\n")),
        "{}",
        stderr(&out)
    );

    // The task's check fails in its checkout, which lacks node_modules: the summary and
    // `plait status` say why it may have.
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("\nhint: {hint}\n")),
        "{}",
        stderr(&out)
    );
    let out = repo.plait(&["status"]);
    assert!(
        stdout(&out).contains(&format!("\nhint: {hint}\n")),
        "{}",
        stdout(&out)
    );

    // An include that is nowhere, with nothing to make it: warned, not refused.
    let missing = repo.plan(&format!("{TASK}[setup]\ninclude = [\".venv/\"]\n"));
    let out = repo.plait(&["plan", "--check", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`.venv` does not exist in your checkout"),
        "{}",
        stderr(&out)
    );
}
