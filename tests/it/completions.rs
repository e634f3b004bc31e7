//! Completion through the binary, as the shells' scripts ask for it: `COMPLETE=SHELL plait
//! -- WORDS` answers with the repository's run ids where a run goes and the named run's task
//! ids where a task goes; `plait completions SHELL` prints the script that asks.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::process::Command;

use crate::support::{stderr, stdout, TestRepo};

/// A run of tasks `ids`, each writing its own file, with `flags`.
fn run_of(repo: &TestRepo, ids: &[&str], flags: &[&str]) -> String {
    let mut toml =
        "goal = \"g\"\n[defaults]\nagent = { exec = 'echo v1 > $PLAIT_TASK.txt' }\n".to_string();
    for id in ids {
        let _ = writeln!(
            toml,
            "[[task]]\nid = \"{id}\"\nprompt = \"p\"\nowns = [\"{id}.txt\"]"
        );
    }
    let plan = repo.plan(&toml);
    let mut args = vec!["run", plan.to_str().unwrap()];
    args.extend(flags);
    let out = repo.plait(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out).trim().to_string()
}

/// What plait offers for the last of `words` (the command line as bash's script passes it,
/// `plait` first), run in `dir`.
fn offered(dir: &std::path::Path, words: &[&str]) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_plait"))
        .arg("--")
        .args(words)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", (words.len() - 1).to_string())
        .env("_CLAP_IFS", "\n")
        .output()
        .expect("run plait");
    assert!(out.status.success(), "{words:?}: {}", stderr(&out));
    stdout(&out).lines().map(str::to_string).collect()
}

/// [`offered`] without the flags, which clap offers beside the values of an empty word.
fn values(dir: &std::path::Path, words: &[&str]) -> BTreeSet<String> {
    let mut all = offered(dir, words);
    all.retain(|w| !w.starts_with('-'));
    all
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_run_s_place_offers_the_run_ids_and_a_task_s_place_the_named_run_s_tasks() {
    let files: Vec<(String, &str)> = ["a", "b", "x", "y", "yz"]
        .iter()
        .map(|id| (format!("{id}.txt"), "0\n"))
        .collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), *c)).collect();
    let repo = TestRepo::with_files(&files);
    let first = run_of(&repo, &["a", "b"], &[]);
    let second = run_of(&repo, &["x", "y", "yz"], &["--groups", "2"]);
    let runs = set(&[&first, &second]);
    let here = repo.path.as_path();
    for command in ["status", "review", "land", "diff", "accept", "clean"] {
        assert_eq!(values(here, &["plait", command, ""]), runs, "{command}");
    }
    // A prefix narrows them; RUN may be a prefix when a task is asked for too.
    let unique = (1..=first.len())
        .find(|&n| !second.starts_with(&first[..n]))
        .unwrap();
    let prefix = &first[..unique];
    assert_eq!(values(here, &["plait", "status", prefix]), set(&[&first]));
    assert_eq!(
        values(here, &["plait", "accept", prefix, ""]),
        set(&["a", "b"])
    );
    // Where a command takes a group, or `merged`, those too.
    let groups: Vec<String> = repo.status_json(&[&second])["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(groups.len(), 2, "{groups:?}");
    let mut tasks_and_groups = set(&["x", "y", "yz"]);
    tasks_and_groups.extend(groups.iter().cloned());
    assert_eq!(
        values(here, &["plait", "accept", &second, ""]),
        tasks_and_groups
    );
    let mut diffable = tasks_and_groups.clone();
    diffable.insert("merged".to_string());
    assert_eq!(values(here, &["plait", "diff", &second, ""]), diffable);
    assert_eq!(
        values(here, &["plait", "send-back", &second, ""]),
        set(&["x", "y", "yz"])
    );
    assert_eq!(
        values(here, &["plait", "send-back", &second, "y"]),
        set(&["y", "yz"])
    );
    assert_eq!(
        values(here, &["plait", "review", &first, "--task", ""]),
        set(&["a", "b"])
    );
    // `plait log`'s first name is a run, or a task of the newest run.
    let newest = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    assert_eq!(newest, second);
    let mut log = runs.clone();
    log.extend(set(&["x", "y", "yz"]));
    assert_eq!(values(here, &["plait", "log", ""]), log);
    assert_eq!(
        values(here, &["plait", "log", &first, ""]),
        set(&["a", "b"])
    );
    // -C names the repository; outside one, nothing is offered (and nothing fails).
    let path = repo.path.to_str().unwrap();
    assert_eq!(
        values(&repo.scratch, &["plait", "-C", path, "status", ""]),
        runs
    );
    assert_eq!(values(&repo.scratch, &["plait", "status", ""]), set(&[]));
    assert_eq!(
        values(here, &["plait", "accept", "nosuchrun", ""]),
        set(&[])
    );
}

#[test]
fn the_printed_script_asks_plait_and_static_keeps_the_old_one() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    for (shell, marker) in [
        ("bash", "complete -o nospace"),
        ("zsh", "#compdef plait"),
        ("fish", "complete --keep-order"),
        ("elvish", "edit:completion:arg-completer[plait]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = repo.plait(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("COMPLETE"), "{shell} asks plait: {script}");
        assert!(
            script.contains(&format!("\"{shell}\"")) || script.contains(&format!("={shell}")),
            "{shell}: {script}"
        );
        let fixed = stdout(&repo.plait(&["completions", shell, "--static"]));
        assert!(
            fixed.contains("status") && !fixed.contains("COMPLETE"),
            "{shell} --static: {fixed}"
        );
    }
    // `source <(COMPLETE=bash plait)` is the same script, calling back the binary it ran.
    let bin = env!("CARGO_BIN_EXE_plait");
    let out = Command::new(bin)
        .current_dir(&repo.path)
        .env("COMPLETE", "bash")
        .output()
        .unwrap();
    let script = stdout(&out);
    assert!(
        script.contains("complete -o nospace") && script.contains(bin),
        "{script}"
    );
}
