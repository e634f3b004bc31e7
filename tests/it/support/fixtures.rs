//! Repositories and plans that tests in more than one file run.

use std::fmt::Write as _;

use super::{Plan, TestRepo};

/// core breaks the merged checks in its first round and mends them when sent back; a and
/// b copy its file, z theirs: whatever they started from shows in their work.
pub fn culprit_waves() -> String {
    Plan::new()
        .goal("waves")
        .set("checks", "merged", ["! grep -q broken src/a.txt src/b.txt src/z.txt src/core.txt"])
        .set("checks", "rework", 1)
        .task("core")
        .owns(["/src/core.txt"])
        .exec("if [ -n \"$PLAIT_FEEDBACK\" ]; then echo fixed > src/core.txt; else echo broken > src/core.txt; fi")
        .task("a")
        .owns(["/src/a.txt"])
        .after(["core"])
        .exec("cp src/core.txt src/a.txt")
        .task("b")
        .owns(["/src/b.txt"])
        .after(["core"])
        .exec("cp src/core.txt src/b.txt")
        .task("z")
        .owns(["/src/z.txt"])
        .after(["a", "b"])
        .exec("cat src/a.txt src/b.txt > src/z.txt")
        .to_toml()
}

pub fn culprit_waves_repo() -> TestRepo {
    TestRepo::with_files(&[
        ("src/core.txt", "core\n"),
        ("src/a.txt", "a\n"),
        ("src/b.txt", "b\n"),
        ("src/z.txt", "z\n"),
    ])
}

/// A repository of `n` directories `dNN/` with one file each, and a plan of one task per
/// directory, `tNN`, whose agent appends to its file.
pub fn wide(n: usize) -> (TestRepo, Plan) {
    let files: Vec<(String, String)> = (1..=n)
        .map(|i| (format!("d{i:02}/f.txt"), format!("file {i}\n")))
        .collect();
    let repo = TestRepo::with_owned_files(&files);
    let mut plan = Plan::new()
        .goal("Touch every file")
        .set("defaults", "timeout", "30s")
        .exec_all("echo touched >> \"$PLAIT_FILE\"");
    for i in 1..=n {
        plan = plan
            .task(&format!("t{i:02}"))
            .prompt("touch")
            .owns([format!("/d{i:02}/")]);
    }
    (repo, plan)
}

/// A plan of tasks `a`, `b`, `c`, each owning `lib/<id>.txt`, all running `agent`, with
/// `extra` TOML after the defaults.
pub fn three_tasks(agent: &str, extra: &str) -> String {
    let mut plan =
        format!("goal = \"g\"\n[defaults]\nagent = {{ exec = '''{agent}''' }}\n{extra}\n");
    for id in ["a", "b", "c"] {
        let _ = writeln!(
            plan,
            "[[task]]\nid = \"{id}\"\nprompt = \"fix {id}\"\nowns = [\"lib/{id}.txt\"]"
        );
    }
    plan
}
