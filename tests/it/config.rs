//! The user config and the repository config: defaults merged under the plan, the plan
//! winning, shown by `plait config`.

use crate::support::{stderr, stdout, TestRepo};

const PLAN: &str = "goal = \"g\"\n[review]\nagent = \"off\"\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/a.txt\"]\nagent = { exec = \"echo more >> a.txt\" }\n";

#[test]
fn config_files_give_a_plan_defaults_and_the_plan_wins() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    let home = repo.scratch.join("xdg");
    std::fs::create_dir_all(home.join("plait")).unwrap();
    std::fs::write(
        home.join("plait/config.toml"),
        "[checks]\ntask = [\"test -f a.txt\"]\nmerged = [\"false\"]\n",
    )
    .unwrap();
    // The repository's config over the user's.
    repo.write(
        ".plait.toml",
        "[checks]\nmerged = [\"grep -q more a.txt\"]\n",
    );
    let env = [("XDG_CONFIG_HOME", home.to_str().unwrap())];
    let out = repo.plait_env(&["config"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(
        shown.contains("config.toml") && shown.contains(".plait.toml"),
        "{shown}"
    );
    assert!(
        shown.contains("grep -q more a.txt") && !shown.contains("false"),
        "{shown}"
    );

    let path = repo.plan(PLAN);
    let out = repo.plait_env(&["run", path.to_str().unwrap()], &env);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let state = repo.status_json(&[]);
    assert_eq!(state["tasks"][0]["checks"][0]["command"], "test -f a.txt");
    assert_eq!(state["merged_checks"][0]["command"], "grep -q more a.txt");
    // The run keeps the merged plan.
    let id = state["id"].as_str().unwrap();
    let kept =
        std::fs::read_to_string(repo.path.join(format!(".git/plait/runs/{id}/plan.toml"))).unwrap();
    assert!(kept.contains("test -f a.txt"), "{kept}");

    // The plan's own [checks] merged replaces theirs whole.
    let path = repo.plan(&PLAN.replace("[review]", "[checks]\nmerged = [\"true\"]\n[review]"));
    let out = repo.plait_env(&["run", path.to_str().unwrap()], &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let state = repo.status_json(&[]);
    assert_eq!(state["merged_checks"][0]["command"], "true");
    assert_eq!(state["tasks"][0]["checks"][0]["command"], "test -f a.txt");
}

#[test]
fn a_config_file_with_a_key_it_may_not_hold_is_refused_naming_it() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    repo.write(".plait.toml", "goal = \"not here\"\n");
    let path = repo.plan(PLAN);
    let out = repo.plait(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("config") && said.contains(".plait.toml"),
        "{said}"
    );
    assert!(!repo.path.join(".git/plait/runs").exists());
    let out = repo.plait(&["plan", "--check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
