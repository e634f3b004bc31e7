//! Per-file commands, through the real binary: `--exec-each` (`agent = { exec_each = ... }`)
//! runs once per owned file of a module task, `PLAIT_FILES` lists every owned file, and
//! `plait plan` warns when an `exec` command reads `$PLAIT_FILE` in a task that owns more.

use crate::support::{skip, stderr, stdout, TestRepo};

/// A crate whose module `parser` owns its source and its test, and whose root owns one file.
fn crate_with_tests() -> TestRepo {
    TestRepo::with_files(&[
        ("Cargo.toml", "[package]\nname = \"demo\"\n"),
        ("src/lib.rs", "pub mod parser;\n"),
        ("src/parser.rs", "pub fn parse() {}\n"),
        ("tests/parser.rs", "#[test]\nfn parses() {}\n"),
    ])
}

/// `plait plan --split SPEC --prompt ... EXTRA -o plan.toml`: the plan's path and stderr.
fn plan(repo: &TestRepo, spec: &str, extra: &[&str]) -> (String, String) {
    let path = repo.scratch.join("plan.toml");
    let path = path.to_str().unwrap().to_string();
    let mut args = vec![
        "plan",
        "--split",
        spec,
        "--prompt",
        "Tidy {path}",
        "-o",
        &path,
    ];
    args.extend_from_slice(extra);
    let out = repo.plait(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    (path, stderr(&out))
}

/// `plait run PLAN`: the run id, once it ended with `code`.
fn run(repo: &TestRepo, plan: &str, code: i32) -> String {
    let out = repo.plait(&["run", plan]);
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    stdout(&out).trim().to_string()
}

#[test]
fn exec_each_runs_the_command_on_each_owned_file() {
    let repo = crate_with_tests();
    let (path, err) = plan(
        &repo,
        "module:src/*",
        &["--exec-each", "echo \"// $PLAIT_FILE\" >> {file}"],
    );
    assert!(!err.contains("warning"), "{err}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("exec_each = 'echo \"// $PLAIT_FILE\" >> {file}'"),
        "{text}"
    );
    let run = run(&repo, &path, 0);
    let files = repo.tree_files(&format!("plait/{run}/parser"));
    assert_eq!(
        files["src/parser.rs"],
        "pub fn parse() {}\n// src/parser.rs\n"
    );
    assert_eq!(
        files["tests/parser.rs"],
        "#[test]\nfn parses() {}\n// tests/parser.rs\n"
    );
    let log = std::fs::read_to_string(
        repo.path
            .join(format!(".git/plait/runs/{run}/tasks/parser/agent.log")),
    )
    .unwrap();
    assert!(
        log.contains("plait: 2 of 2: echo \"// $PLAIT_FILE\" >> 'tests/parser.rs'"),
        "the log says which file each run was on:\n{log}"
    );
}

#[test]
fn exec_each_stops_at_the_first_file_that_fails_and_names_it() {
    let repo = crate_with_tests();
    let (path, _) = plan(
        &repo,
        "module:src/parser.rs",
        &[
            "--exec-each",
            "case {file} in src/*) exit 3;; esac; echo x >> {file}",
        ],
    );
    let run = run(&repo, &path, 1);
    let status = repo.status_json(&[&run]);
    let task = &status["tasks"][0];
    assert_eq!(task["state"], "failed", "{status:#}");
    assert_eq!(
        task["error"], "on src/parser.rs (1 of 2): command exited with status 3",
        "{status:#}"
    );
    let files = repo.tree_files(&format!("plait/{run}/parser"));
    assert_eq!(
        files["tests/parser.rs"], "#[test]\nfn parses() {}\n",
        "the files after the failing one are not run on"
    );
}

#[test]
fn plait_files_lists_the_owned_files_nul_separated() {
    let repo = crate_with_tests();
    let (path, err) = plan(
        &repo,
        "module:src/*",
        &[
            "--exec",
            "tr '\\0' '\\n' < \"$PLAIT_FILES\" | while read -r f; do echo \"// all\" >> \"$f\"; done",
        ],
    );
    assert!(!err.contains("warning"), "{err}");
    let run = run(&repo, &path, 0);
    let files = repo.tree_files(&format!("plait/{run}/parser"));
    assert!(files["src/parser.rs"].ends_with("// all\n"), "{files:?}");
    assert!(files["tests/parser.rs"].ends_with("// all\n"), "{files:?}");
    let root = repo.tree_files(&format!("plait/{run}/lib"));
    assert_eq!(root["src/lib.rs"], "pub mod parser;\n// all\n");
}

#[test]
fn plait_file_in_a_multi_file_task_is_warned_about() {
    let repo = crate_with_tests();
    let (path, err) = plan(
        &repo,
        "module:src/*",
        &["--exec", "rustfmt \"$PLAIT_FILE\""],
    );
    let warning = "warning: the exec command `rustfmt \"$PLAIT_FILE\"` reads $PLAIT_FILE, \
                   which is set only when a task owns exactly one file, but 1 task owns more \
                   than one (such as `parser`, with 2 files); run it on each file with agent = \
                   { exec_each = \"CMD {file}\" } (plait plan --exec-each)";
    assert!(err.contains(warning), "{err}");
    let out = repo.plait(&["plan", "--check", &path]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(warning), "{}", stderr(&out));

    let (_, err) = plan(&repo, "module:src/*", &["--exec", "rustfmt ${PLAIT_FILE}"]);
    assert!(err.contains("reads $PLAIT_FILE"), "{err}");
    for extra in [
        ["--exec", "rustfmt \"$PLAIT_FILE\""],
        ["--exec-each", "rustfmt \"$PLAIT_FILE\""],
    ] {
        let (_, err) = plan(&repo, "file:src/*.rs", &extra);
        assert!(!err.contains("warning"), "one file per task: {err}");
    }
    for extra in [
        ["--exec", "rustfmt $(cat \"$PLAIT_OWNED\")"],
        ["--exec-each", "rustfmt {file}"],
    ] {
        let (path, err) = plan(&repo, "module:src/*", &extra);
        assert!(!err.contains("warning"), "{extra:?}: {err}");
        let out = repo.plait(&["plan", "--check", &path]);
        assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    }
}

#[test]
fn exec_each_is_a_workers_key_and_stands_alone() {
    let repo = crate_with_tests();
    let check = |toml: &str| {
        let out = repo.plait(&["plan", "--check", repo.plan(toml).to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        stderr(&out)
    };
    let task = "[[task]]\nid = \"p\"\nprompt = \"p\"\nowns = [\"/src/parser.rs\"]\n";
    let err = check(&format!(
        "[defaults]\nagent = {{ exec = \"true\", exec_each = \"true\" }}\n{task}"
    ));
    assert!(
        err.contains("an agent table needs exactly one of `exec`, `exec_each` or `cli`"),
        "{err}"
    );
    let err = check(&format!(
        "[defaults]\nagent = {{ exec_each = \" \" }}\n{task}[review]\nagent = {{ exec_each = \"./review.sh {{file}}\" }}\n"
    ));
    assert!(
        err.contains("task `p`: the exec_each command is empty"),
        "{err}"
    );
    assert!(
        err.contains("[review]: a reviewer runs once on the whole diff, not per file"),
        "{err}"
    );
}

/// The README's rustfmt recipe on a crate whose root declares its modules and whose module
/// directory holds a file that is not Rust: the real rustfmt formats each task's `.rs` files
/// alone (the lib.rs task too, whose `mod` files it does not hold), with the repository's
/// rustfmt.toml, and `--each '*.rs'` keeps it off the LICENSE; without `--each`, `plait
/// plan` warns about the LICENSE.
#[test]
fn the_readme_rustfmt_recipe_formats_every_module_task_alone() {
    if std::process::Command::new("rustfmt")
        .arg("--version")
        .output()
        .is_err()
    {
        skip("no rustfmt on PATH");
        return;
    }
    let repo = TestRepo::with_files(&[
        (
            "Cargo.toml",
            "[package]\nname = \"demo\"\nedition = \"2021\"\n",
        ),
        ("rustfmt.toml", "hard_tabs = true\n"),
        (
            "src/lib.rs",
            "pub mod tables;\npub mod parser;\npub fn   root() {\nlet x=1;\n}\n",
        ),
        ("src/parser.rs", "pub fn   parse() {\nlet y=2;\n}\n"),
        ("src/tables/mod.rs", "pub const   T: u8 = 1;\n"),
        ("src/tables/LICENSE-DATA", "Data, Inc. terms\n"),
    ]);
    let recipe = "rustfmt --edition 2021 --emit stdout < {file} > \"$PLAIT_SCRATCH/out\" \
                  && cp \"$PLAIT_SCRATCH/out\" {file}";
    let (_, err) = plan(&repo, "module:src/*", &["--exec-each", recipe]);
    assert!(
        err.contains("warning: the exec_each command `rustfmt --edition 2021 --emit stdout")
            && err.contains(
                "and 1 owned file is not `.rs` (such as `src/tables/LICENSE-DATA` of task \
             `tables`); to run it on the `.rs` files alone, add files = [\"*.rs\"] to the \
             agent table (plait plan --each '*.rs')"
            ),
        "{err}"
    );
    let (path, err) = plan(
        &repo,
        "module:src/*",
        &["--each", "*.rs", "--exec-each", recipe],
    );
    assert!(!err.contains("warning"), "{err}");
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("files = [\"*.rs\"]"),
        "the plan keeps the filter"
    );
    let run = run(&repo, &path, 0);
    let root = repo.tree_files(&format!("plait/{run}/lib"));
    assert_eq!(
        root["src/lib.rs"],
        "pub mod parser;\npub mod tables;\npub fn root() {\n\tlet x = 1;\n}\n"
    );
    let parser = repo.tree_files(&format!("plait/{run}/parser"));
    assert_eq!(
        parser["src/parser.rs"],
        "pub fn parse() {\n\tlet y = 2;\n}\n"
    );
    let tables = repo.tree_files(&format!("plait/{run}/tables"));
    assert_eq!(tables["src/tables/mod.rs"], "pub const T: u8 = 1;\n");
    assert_eq!(tables["src/tables/LICENSE-DATA"], "Data, Inc. terms\n");
    let log = std::fs::read_to_string(
        repo.path
            .join(format!(".git/plait/runs/{run}/tasks/tables/agent.log")),
    )
    .unwrap();
    assert!(
        log.contains("plait: 1 of 2 owned file(s) match files = [\"*.rs\"]"),
        "{log}"
    );
    // The same plan without the filter fails on the LICENSE, naming it.
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("files = [\"*.rs\"]\n", "");
    std::fs::write(&path, text).unwrap();
    let out = repo.plait(&["run", &path]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let id = stdout(&out).trim().to_string();
    let status = repo.plait(&["status", &id]);
    assert!(
        stdout(&status).contains("on src/tables/LICENSE-DATA (1 of 2)"),
        "{}",
        stdout(&status)
    );
}

#[test]
fn files_goes_with_exec_each_alone() {
    let repo = crate_with_tests();
    let task = "[[task]]\nid = \"p\"\nprompt = \"x\"\nowns = [\"/src/parser.rs\"]\n";
    let path = repo.scratch.join("files.toml");
    std::fs::write(
        &path,
        format!("[defaults]\nagent = {{ exec = \"true\", files = [\"*.rs\"] }}\n{task}"),
    )
    .unwrap();
    let out = repo.plait(&["plan", "--check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`files` goes with `exec_each`"),
        "{}",
        stderr(&out)
    );
    let out = repo.plait(&["plan", "--split", "module:src/*", "--each", "*.rs"]);
    assert_eq!(out.status.code(), Some(2), "--each needs --exec-each");
}
