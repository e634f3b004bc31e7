//! Secrets stay out: reads are an allow-list. Credentials planted under a temporary home are
//! read by an exec agent, a task check and a merged check; none reaches a branch or a log,
//! each refusal is reported, a `readable` path is readable, and tools get their config
//! without its tokens.

use std::fs;
use std::path::Path;

use crate::support::agents::{self, real_claude};
use crate::support::sandbox::{landlock, landlock_abi, plait_without_namespaces};
use crate::support::{stderr, stdout, task_json, TestRepo};

/// Each planted credential: its path under the home and the secret it holds.
const PLANTED: &[(&str, &str)] = &[
    (".ssh/id_ed25519", "SECRET-ssh-key"),
    (".aws/credentials", "SECRET-aws"),
    (".config/gh/hosts.yml", "SECRET-gh"),
    (".git-credentials", "SECRET-git-credentials"),
    (".netrc", "SECRET-netrc"),
    (".docker/config.json", "SECRET-docker"),
    (".kube/config", "SECRET-kube"),
    (".pypirc", "SECRET-pypirc"),
    (".config/gcloud/credentials.db", "SECRET-gcloud"),
    ("other-project/.env", "SECRET-other-env"),
    (".cargo/credentials.toml", "SECRET-cargo"),
];

fn plant(home: &Path) {
    for (path, secret) in PLANTED {
        let file = home.join(path);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(&file, format!("{secret}\n")).unwrap();
    }
    // A toolchain beside the cargo token, which stays readable.
    fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    fs::write(home.join(".cargo/bin/tool-marker"), "TOOLCHAIN-OK\n").unwrap();
    fs::write(
        home.join(".npmrc"),
        "registry=https://registry.example/\n//registry.example/:_authToken=SECRET-npm\n",
    )
    .unwrap();
    fs::create_dir_all(home.join("data")).unwrap();
    fs::write(home.join("data/fixture.txt"), "DATA-OK\n").unwrap();
}

/// A shell script that tries every planted file, printing what it can read.
fn read_all(home: &Path) -> String {
    PLANTED
        .iter()
        .map(|(path, _)| format!("cat {}/{path} 2>&1; ", home.display()))
        .collect::<String>()
}

#[test]
fn nothing_a_task_runs_reads_the_homes_credentials_and_what_it_may_read_it_reads() {
    if !landlock() {
        return;
    }
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    plant(home);
    let h = home.display();
    let agent = format!(
        "{}cat {h}/.cargo/bin/tool-marker {h}/data/fixture.txt 2>&1; \
         cat \"$NPM_CONFIG_USERCONFIG\" 2>&1; ls {h} 2>&1; true",
        read_all(home)
    );
    let check = format!("{}true", read_all(home));
    let toml = format!(
        "goal = \"g\"\n[review]\nagent = \"off\"\n\
         [defaults.sandbox]\nreadable = [\"~/data\"]\n\
         [checks]\ntask = [{check:?}]\nmerged = [{check:?}]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.txt\"]\n\
         agent = {{ exec = {:?} }}\n",
        format!("({agent}) >> a.txt")
    );
    let plan = repo.plan(&toml);
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap()],
        &[("HOME", home.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    let written = repo.tree_files(&format!("plait/{run}/a"))["a.txt"].clone();
    // What it may read, it read: a toolchain, a `readable` path, npm's config less its token.
    for allowed in [
        "TOOLCHAIN-OK",
        "DATA-OK",
        "registry=https://registry.example/",
    ] {
        assert!(
            written.contains(allowed),
            "{allowed} missing from:\n{written}"
        );
    }
    // No credential reached the branch, the merged branch, or any log or record.
    for (path, secret) in PLANTED.iter().chain(&[(".npmrc", "SECRET-npm")]) {
        assert!(!written.contains(secret), "{path} was read:\n{written}");
        repo.assert_not_written(secret);
        let merged = repo.tree_files(&format!("plait/{run}/merged"));
        assert!(merged.values().all(|t| !t.contains(secret)), "{path}");
    }
    assert!(written.contains("Permission denied"), "{written}");
    // Each refusal is said, with the setting that would allow it.
    let a = task_json(&status, "a");
    let refused = a["sandbox"]["refused"].to_string();
    assert!(
        refused.contains(&format!(
            "read of {h}/.aws/credentials refused (allow it with [sandbox] readable)"
        )),
        "{a:#}"
    );
    let text = stdout(&repo.plait(&["status", &run]));
    assert!(text.contains("read of"), "{text}");
}

/// `plait doctor` tries each wall from behind a task's walls and says how it went, true to
/// what a task gets: here every attempt refused; without namespaces too (Landlock and
/// seccomp hold the network then), each line saying what holds.
#[test]
fn doctor_tries_every_wall_and_says_each_is_refused() {
    if landlock_abi(6, "the signal wall").is_none() {
        return;
    }
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    let out = repo.plait(&["doctor", "--json"]);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    let probes = report["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 7, "{report:#}");
    for probe in probes {
        assert_eq!(probe["refused"], true, "{probe}");
    }
    assert!(report["landlock"].as_str().unwrap().starts_with("ABI "));
    let text = stdout(&repo.plait(&["doctor"]));
    assert!(
        text.contains("read of a file planted in the home   refused"),
        "{text}"
    );

    let out = plait_without_namespaces(&repo, &["doctor", "--json"]);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert!(report["network_namespace"]["Err"].is_string(), "{report:#}");
    let refused = |what: &str| {
        report["probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["what"].as_str().unwrap().starts_with(what))
            .unwrap()["refused"]
            .clone()
    };
    for what in ["write outside", "read of a file", "TCP", "UDP", "signal"] {
        assert_eq!(refused(what), true, "{what}: {report:#}");
    }
    // Without a PID namespace, what holds of a command's leftovers is said as it is.
    let walls = report["walls"].as_str().unwrap();
    assert!(
        walls.contains("leftovers: only those in the command's process group are killed"),
        "{walls}"
    );
}

/// The real Claude Code on a login, told to read every planted credential with its Bash
/// and its Read tool: none reaches the model (no request the server received holds one),
/// the task's branch or any log; the login's own token reaches the server only as the
/// bearer the gateway sends, never in a body, and the CLI's directory holds a stand-in.
#[test]
fn real_claude_code_on_a_login_reads_no_credential_with_bash_or_read() {
    let Some(claude) = real_claude() else { return };
    if !landlock() {
        return;
    }
    use crate::mock::{claude_tools, MockModel, Turn};
    let repo = agents::sample();
    let home = agents::login_home();
    plant(home.path());
    let key = agents::KEY;
    let mock = MockModel::start_claude_code(key);
    let h = home.path().display().to_string();
    let mut turns = vec![
        Turn::Tools(vec![claude_tools::bash(&format!(
            "{}true",
            read_all(home.path())
        ))]),
        Turn::Tools(vec![claude_tools::bash(&format!(
            "cat {h}/.claude/.credentials.json; cat \"$CLAUDE_CONFIG_DIR/.credentials.json\"; true"
        ))]),
    ];
    for (path, _) in PLANTED.iter().take(1) {
        turns.push(Turn::Tools(vec![claude_tools::read(&format!(
            "{h}/{path}"
        ))]));
    }
    turns.push(Turn::Tools(vec![claude_tools::read("src/a/x.txt")]));
    turns.push(Turn::Tools(vec![claude_tools::edit(
        "src/a/x.txt",
        "hi",
        "hello",
    )]));
    turns.push(Turn::Text("Done.".into()));
    mock.script("a", turns);
    mock.script(
        "b",
        claude_tools::read_and_edit("src/b/y.txt", "yo", "hey", "Done."),
    );
    let plan = repo.plan(&agents::claude_on_its_own(&claude).to_toml());
    let out = agents::plait_on_login(
        &repo,
        &["run", plan.to_str().unwrap(), "-j", "2"],
        home.path(),
        &mock.url(),
        &[],
    );
    assert!(
        out.status.success(),
        "{}\n{:#?}",
        stderr(&out),
        mock.problems()
    );
    let requests = mock.requests();
    assert!(requests.len() >= 6, "{}", requests.len());
    for request in &requests {
        let body = request.body.to_string();
        for (path, secret) in PLANTED {
            assert!(!body.contains(secret), "{path} reached the model: {body}");
        }
        assert!(
            !body.contains(key),
            "the login's token reached the model in a body"
        );
        assert_eq!(request.headers["authorization"], format!("Bearer {key}"));
    }
    // The agent saw its reads refused, and said so to the model.
    let told: String = requests.iter().map(|r| r.body.to_string()).collect();
    assert!(told.contains("Permission denied"), "{told}");
    for (_, secret) in PLANTED {
        repo.assert_not_written(secret);
    }
    repo.assert_not_written(key);
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    assert_eq!(
        repo.tree_files(&format!("plait/{run}/a"))["src/a/x.txt"],
        "hello\n"
    );
}
