//! Stage 1: plans are refused, with the fault named, before anything is created.

use std::path::Path;

use plait_plan::{self as plan, split, PlanError};

use crate::support::{stderr, TestRepo};

fn sample() -> TestRepo {
    TestRepo::with_files(&[
        ("lib/a/mod.py", "a = 1\n"),
        ("lib/a/util.py", "u = 1\n"),
        ("lib/b/mod.py", "b = 1\n"),
        ("lib/b/deep/x.py", "x = 1\n"),
        ("docs/guide.md", "guide\n"),
        (".gitignore", "*.pyc\n"),
    ])
}

fn problems(repo: &TestRepo, toml: &str) -> Vec<String> {
    let path = repo.plan(toml);
    let git = plait_core::git::open(&repo.path).unwrap();
    let parsed = match plan::parse(toml, &path) {
        Ok(p) => p,
        Err(e) => return vec![e.to_string()],
    };
    match plan::resolve(&git, parsed, &path) {
        Ok(_) => Vec::new(),
        Err(PlanError::Invalid { problems, .. }) => problems,
        Err(e) => vec![e.to_string()],
    }
}

const AGENT: &str = "[defaults]\nagent = { exec = \"true\" }\n";

#[test]
fn a_valid_plan_lists_each_tasks_owned_files() {
    let repo = sample();
    let toml = format!(
        "goal = \"g\"\n{AGENT}\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"lib/a/**\"]\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"/lib/b/\", \"!deep/\"]\ncontext = [\"docs/*.md\"]\n"
    );
    let path = repo.plan(&toml);
    let git = plait_core::git::open(&repo.path).unwrap();
    let resolved = plan::resolve(&git, plan::parse(&toml, &path).unwrap(), &path).unwrap();
    assert_eq!(resolved.tasks[0].owned, ["lib/a/mod.py", "lib/a/util.py"]);
    assert_eq!(
        resolved.tasks[1].owned,
        ["lib/b/mod.py"],
        "`!deep/` excludes lib/b/deep"
    );
    assert!(resolved.tasks[1].checks_out("docs/guide.md"));
    assert!(resolved.tasks[1].checks_out(".gitignore"));
    assert!(!resolved.tasks[1].checks_out("lib/a/mod.py"));
    assert_eq!(resolved.base_name, "main");
}

#[test]
fn unknown_keys_are_refused_with_their_name_and_line() {
    let repo = sample();
    let errs = problems(
        &repo,
        &format!(
            "{AGENT}\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"lib/a/\"]\nowner = \"me\"\n"
        ),
    );
    assert_eq!(errs.len(), 1);
    assert!(errs[0].contains("unknown field `owner`"), "{errs:?}");
    assert!(errs[0].contains("line 8"), "{errs:?}");
    let errs = problems(&repo, "goall = \"x\"\n");
    assert!(errs[0].contains("unknown field `goall`"), "{errs:?}");
    let errs = problems(
        &repo,
        "[defaults]\nagent = { exec = \"x\", shell = \"bash\" }\n",
    );
    assert!(errs[0].contains("unknown field `shell`"), "{errs:?}");
}

#[test]
fn bad_and_duplicate_ids_are_refused() {
    let repo = sample();
    for (id, why) in [
        ("has space", "may only hold"),
        ("-dash", "must start with"),
        ("merged", "reserved"),
        ("x.lock", "`.lock`"),
        ("a..b", "`..`"),
        ("", "is empty"),
    ] {
        let errs = problems(
            &repo,
            &format!("{AGENT}\n[[task]]\nid = \"{id}\"\nprompt = \"p\"\nowns = [\"lib/a/\"]\n"),
        );
        assert!(errs.iter().any(|e| e.contains(why)), "id {id:?}: {errs:?}");
    }
    let errs = problems(
        &repo,
        &format!("{AGENT}\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"lib/a/\"]\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"lib/b/\"]\n"),
    );
    assert_eq!(errs, ["task id `a` is used twice"]);
    let errs = problems(
        &repo,
        &format!("{AGENT}\n[[task]]\nid = \"Api\"\nprompt = \"p\"\nowns = [\"lib/a/\"]\n[[task]]\nid = \"api\"\nprompt = \"p\"\nowns = [\"lib/b/\"]\n"),
    );
    assert!(errs[0].contains("differ only in case"), "{errs:?}");
}

#[test]
fn a_glob_matching_no_tracked_file_is_named() {
    let repo = sample();
    let errs = problems(&repo, &format!("{AGENT}\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"lib/a/\", \"src/**\"]\ncontext = [\"nothing/*\"]\n"));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].contains("task `a` owns: glob `src/**` matches no tracked file"),
        "{errs:?}"
    );
    assert!(
        errs[1].contains("task `a` context: glob `nothing/*`"),
        "{errs:?}"
    );
}

#[test]
fn overlapping_ownership_names_the_files_and_both_tasks() {
    let repo = sample();
    let errs = problems(
        &repo,
        &format!("{AGENT}\n[[task]]\nid = \"py\"\nprompt = \"p\"\nowns = [\"*.py\"]\n[[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"lib/b/\"]\n"),
    );
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("tasks `py` and `b` both own 2 files: lib/b/deep/x.py, lib/b/mod.py"),
        "{errs:?}"
    );
}

#[test]
fn missing_agent_empty_prompt_and_bad_timeout_are_refused() {
    let repo = sample();
    let errs = problems(
        &repo,
        "[[task]]\nid = \"a\"\nprompt = \" \"\nowns = [\"lib/a/\"]\ntimeout = \"soon\"\n",
    );
    assert!(errs.iter().any(|e| e.contains("has no agent")), "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("empty prompt")), "{errs:?}");
    assert!(
        errs.iter().any(|e| e.contains("timeout `soon`")),
        "{errs:?}"
    );
    let errs = problems(&repo, "");
    assert!(errs.iter().any(|e| e.contains("no [[task]]")), "{errs:?}");
}

#[test]
fn a_missing_base_is_refused() {
    let repo = sample();
    let errs = problems(&repo, &format!("base = \"release\"\n{AGENT}\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"lib/a/\"]\n"));
    assert!(
        errs[0].contains("base `release` is not a branch or commit"),
        "{errs:?}"
    );
}

#[test]
fn the_base_may_be_a_branch_or_a_commit() {
    let repo = sample();
    let first = repo.git(&["rev-parse", "HEAD"]);
    repo.write("lib/a/new.py", "n\n");
    repo.commit_all("second");
    for base in [first.as_str(), "main~1"] {
        let toml = format!("base = \"{base}\"\n{AGENT}\n[[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"lib/a/\"]\n");
        let path = repo.plan(&toml);
        let git = plait_core::git::open(&repo.path).unwrap();
        let resolved = plan::resolve(&git, plan::parse(&toml, &path).unwrap(), &path).unwrap();
        assert_eq!(resolved.base.to_string(), first);
        assert_eq!(resolved.tasks[0].owned, ["lib/a/mod.py", "lib/a/util.py"]);
    }
}

#[test]
fn repositories_plait_cannot_use_are_refused() {
    let plain = tempfile::tempdir().unwrap();
    crate::support::init();
    let err = plait_core::git::open(plain.path()).err().unwrap();
    assert!(
        err.to_string().contains("is not inside a git repository"),
        "{err}"
    );

    let empty = TestRepo::empty();
    let err = plait_core::git::open(&empty.path).err().unwrap();
    assert!(err.to_string().contains("has no commits yet"), "{err}");

    let bare = tempfile::tempdir().unwrap();
    crate::support::git_in(bare.path(), &["init", "-q", "--bare"]);
    let err = plait_core::git::open(bare.path()).err().unwrap();
    assert!(err.to_string().contains("bare repository"), "{err}");
}

#[test]
fn split_by_directory_gives_nested_directories_their_own_task() {
    let repo = sample();
    let files = plait_core::git::flatten_tree(&repo.repo().head().unwrap().peel_to_tree().unwrap())
        .unwrap();
    let settings = split::SplitSettings {
        rule: split::SplitRule::parse("dir:lib/**").unwrap(),
        template: "Fix {path} ({id})".into(),
        goal: "g".into(),
        agent: Some(plan::AgentSpec::Exec("true".into())),
        base: None,
        first: None,
        last: None,
    };
    let plan_file = split::split(&files, &settings).unwrap().plan;
    let ids: Vec<&str> = plan_file.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["lib-a", "lib-b", "lib-b-deep"]);
    assert_eq!(plan_file.tasks[1].owns, ["/lib/b/", "!/lib/b/deep/"]);
    assert_eq!(plan_file.tasks[2].prompt, "Fix lib/b/deep (lib-b-deep)");
    // The written plan is valid as it stands.
    let text = plan::to_toml(&plan_file, "made by a test");
    let path = repo.plan(&text);
    let git = plait_core::git::open(&repo.path).unwrap();
    let resolved = plan::resolve(&git, plan::parse(&text, &path).unwrap(), Path::new("x")).unwrap();
    assert_eq!(resolved.tasks[1].owned, ["lib/b/mod.py"]);
    assert_eq!(resolved.tasks[2].owned, ["lib/b/deep/x.py"]);
}

#[test]
fn split_by_file_escapes_glob_characters_in_paths() {
    let repo = TestRepo::with_files(&[
        ("src/[weird]*.py", "w\n"),
        ("src/plain.py", "p\n"),
        ("src/x/no.py", "n\n"),
    ]);
    let files = plait_core::git::flatten_tree(&repo.repo().head().unwrap().peel_to_tree().unwrap())
        .unwrap();
    let settings = split::SplitSettings {
        rule: split::SplitRule::parse("file:src/*.py").unwrap(),
        template: "Format {path}".into(),
        goal: "g".into(),
        agent: Some(plan::AgentSpec::Exec("true".into())),
        base: None,
        first: None,
        last: None,
    };
    let plan_file = split::split(&files, &settings).unwrap().plan;
    assert_eq!(plan_file.tasks.len(), 2, "`*` does not cross directories");
    let text = plan::to_toml(&plan_file, "x");
    let path = repo.plan(&text);
    let git = plait_core::git::open(&repo.path).unwrap();
    let resolved = plan::resolve(&git, plan::parse(&text, &path).unwrap(), &path).unwrap();
    assert_eq!(resolved.tasks[0].owned, ["src/[weird]*.py"]);
    assert_eq!(resolved.tasks[0].single_file(), Some("src/[weird]*.py"));
    assert_eq!(resolved.tasks[1].owned, ["src/plain.py"]);
}

#[test]
fn bad_split_rules_are_refused() {
    for (spec, why) in [
        ("src/*", "dir:GLOB, file:GLOB or module:GLOB"),
        ("mod:src", "`dir`, `file` or `module`"),
        ("module:", "empty"),
        ("dir:", "empty"),
    ] {
        let err = split::SplitRule::parse(spec).unwrap_err().to_string();
        assert!(err.contains(why), "{spec}: {err}");
    }
}

#[test]
fn after_is_validated_before_anything_exists() {
    let repo = TestRepo::with_files(&[
        ("src/core.rs", "c\n"),
        ("src/a.rs", "a\n"),
        ("README.md", "r\n"),
    ]);
    // Expand/contract: core-drop owns core-add's file again, after the callers.
    let ok = repo.plan(
        "[defaults]\nagent = { exec = \"true\" }\n\
         [[task]]\nid = \"core-add\"\nprompt = \"p\"\nowns = [\"/src/core.rs\"]\n\
         [[task]]\nid = \"callers\"\nprompt = \"p\"\nowns = [\"/src/a.rs\"]\nafter = [\"core-add\"]\n\
         [[task]]\nid = \"core-drop\"\nprompt = \"p\"\nowns = [\"/src/core.rs\"]\nafter = [\"call*\"]\n",
    );
    let out = repo.plait(&["run", ok.to_str().unwrap(), "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bad = repo.plan(
        "[defaults]\nagent = { exec = \"true\" }\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/src/core.rs\"]\nafter = [\"c\"]\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"/src/a.rs\"]\nafter = [\"a\", \"nobody\"]\n\
         [[task]]\nid = \"c\"\nprompt = \"p\"\nowns = [\"/README.md\"]\nafter = [\"b\"]\n",
    );
    let out = repo.plait(&["run", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("after `nobody` names no other task"), "{err}");
    let unordered = repo.plan(
        "[defaults]\nagent = { exec = \"true\" }\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/src/core.rs\"]\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"/src/a.rs\"]\nafter = [\"a\"]\n\
         [[task]]\nid = \"c\"\nprompt = \"p\"\nowns = [\"/src/core.rs\"]\nafter = [\"b\"]\n\
         [[task]]\nid = \"d\"\nprompt = \"p\"\nowns = [\"/src/core.rs\"]\nafter = [\"a\"]\n",
    );
    let out = repo.plait(&["run", unordered.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    // c and d both come after a, but neither after the other.
    assert!(
        err.contains("tasks `c` and `d` both own 1 file: src/core.rs"),
        "{err}"
    );
    assert!(!err.contains("tasks `a` and"), "{err}");
    assert!(repo.branches().iter().all(|b| !b.starts_with("plait/")));
    let cycle = repo.plan(
        "[defaults]\nagent = { exec = \"true\" }\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/src/core.rs\"]\nafter = [\"b\"]\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"/src/a.rs\"]\nafter = [\"a\"]\n",
    );
    let out = repo.plait(&["run", cycle.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("in a circle: "), "{}", stderr(&out));
    // A typo in `[defaults] after` is one problem, not one per task.
    let typo = repo.plan(
        "[defaults]\nagent = { exec = \"true\" }\nafter = [\"setpu\"]\n\
         [[task]]\nid = \"setup\"\nprompt = \"p\"\nowns = [\"/src/core.rs\"]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/src/a.rs\"]\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"/README.md\"]\n",
    );
    let out = repo.plait(&["run", typo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(
        err.matches("[defaults] after `setpu` names no task of the plan")
            .count(),
        1,
        "{err}"
    );
    let itself = repo.plan(
        "[defaults]\nagent = { exec = \"true\" }\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/src/a.rs\"]\nafter = [\"a\"]\n",
    );
    let out = repo.plait(&["run", itself.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("task `a`: after `a` names only the task itself"),
        "{}",
        stderr(&out)
    );
    // `[defaults] after` holds for every task but the one it names; `after = []` opts out.
    let defaults = repo.plan(
        "[defaults]\nagent = { exec = \"true\" }\nafter = [\"setup\"]\n\
         [[task]]\nid = \"setup\"\nprompt = \"p\"\nowns = [\"/src/core.rs\"]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/src/a.rs\"]\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"/README.md\"]\nafter = []\n",
    );
    let out = repo.plait(&["run", defaults.to_str().unwrap(), "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = crate::support::stdout(&out) + &stderr(&out);
    assert!(text.contains("waves: 2 (2 → 1 task(s);"), "{text}");
    assert_eq!(text.matches("after:    setup (").count(), 1, "{text}");
}
