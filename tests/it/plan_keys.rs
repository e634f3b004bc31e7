//! Unknown keys of a plan or config file: all of them named at once, each with its line,
//! the keys its table may hold and the one it was likely meant to be.

use crate::support::{stderr, TestRepo};

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
         (valid: agent, checkout, context, timeout, max_turns, token_budget, sandbox, after)",
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
