//! Secrets stay out: reads are an allow-list. Credentials planted under a temporary home are
//! read by an exec agent, a task check and a merged check; none reaches a branch or a log,
//! each refusal is reported, a `readable` path is readable, and tools get their config
//! without its tokens.

use std::fs;
use std::path::Path;

use crate::support::agents::{self, real_claude};
use crate::support::sandbox::{
    landlock, landlock_abi, plait_without_namespaces, plait_without_namespaces_env,
};
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
    assert_eq!(probes.len(), 12, "{report:#}");
    for probe in probes {
        assert_eq!(probe["refused"], true, "{probe}");
    }
    assert!(report["landlock"].as_str().unwrap().starts_with("ABI "));
    assert!(
        report["git_config"]
            .as_str()
            .unwrap()
            .starts_with("a copy without its credentials"),
        "{report:#}"
    );
    let text = stdout(&repo.plait(&["doctor"]));
    assert!(
        text.lines()
            .any(|l| l.starts_with("read of a file planted in the home  ")
                && l.ends_with(" refused")),
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
    for what in [
        "write outside",
        "read of a file",
        "read of a token",
        "read of plait's store",
        "TCP",
        "UDP",
        "signal",
    ] {
        assert_eq!(refused(what), true, "{what}: {report:#}");
    }
    assert!(
        report["git_config"]
            .as_str()
            .unwrap()
            .starts_with("not at all"),
        "{report:#}"
    );
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

/// A user config of the test's own, empty: the tests' own (which lets every task read the
/// tests' directories, the repository among them) would widen the wall tried here.
fn own_config(repo: &TestRepo) -> String {
    let config = repo.scratch.join("xdg-config");
    fs::create_dir_all(&config).unwrap();
    config.display().to_string()
}

/// What a remote's URL and `actions/checkout`'s header hold in the tests' `.git/config`.
const REPO_TOKENS: &[&str] = &["SECRET-url-token", "SECRET-extraheader"];

/// A token in the repository's remote URL and an `http.extraHeader`, as a CI clone has.
fn plant_repository_tokens(repo: &TestRepo) {
    repo.git(&[
        "remote",
        "add",
        "origin",
        "https://x-access-token:SECRET-url-token@github.com/o/r.git",
    ]);
    repo.git(&[
        "config",
        "http.https://github.com/.extraheader",
        "AUTHORIZATION: basic SECRET-extraheader",
    ]);
}

/// A plan whose exec agent and task check try plait's store and the repository's config
/// and use git: the agent writes all it sees into its owned `a.txt`; the check (`check.sh`,
/// tracked) fails naming what it could read, or a git command that failed.
fn repository_plan(repo: &TestRepo) -> String {
    let git = repo.path.join(".git");
    let g = git.display();
    let agent = format!(
        "(cat {g}/config; find {g}/plait -type f | head -n 40 | xargs cat; ls {g}/plait; \
         echo GIT-STATUS; git status --short; echo GIT-LOG; git log --oneline -1; \
         echo GIT-DIFF; git diff --stat; echo REMOTE; git config remote.origin.url; \
         echo OWNED; cat \"$PLAIT_OWNED\"; echo FILES; tr '\\0' '\\n' < \"$PLAIT_FILES\") > a.txt 2>&1"
    );
    format!(
        "goal = \"GOAL-MARKER-5e1\"\n[review]\nagent = \"off\"\n\
         [checks]\ntask = [\"sh check.sh\"]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.txt\"]\nagent = {{ exec = {agent:?} }}\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"b.txt\"]\n\
         agent = {{ exec = \"echo b-LOG-MARKER; echo b > b.txt\" }}\n"
    )
}

/// The tracked check of [`repository_plan`]: fails saying what it read or what failed.
fn repository_check(git: &Path) -> String {
    let g = git.display();
    format!(
        "set -u\n\
         if cat {g}/plait/runs/*/state.json 2>/dev/null | grep -q GOAL-MARKER; then echo STORE-READ; exit 1; fi\n\
         if ls {g}/plait >/dev/null 2>&1; then echo STORE-LISTED; exit 1; fi\n\
         if grep -q SECRET {g}/config 2>/dev/null; then echo CONFIG-TOKEN-READ; exit 1; fi\n\
         git status >/dev/null || {{ echo GIT-STATUS-FAILED; exit 1; }}\n\
         git log --oneline -1 >/dev/null || {{ echo GIT-LOG-FAILED; exit 1; }}\n\
         git diff --stat >/dev/null || {{ echo GIT-DIFF-FAILED; exit 1; }}\n"
    )
}

/// A first run in a fresh clone (no `.git/plait` before it) and a second one: neither an
/// exec agent nor a task check reads plait's store (the run's record, another task's log)
/// or the token in the repository's `.git/config`, and git works for both.
#[test]
fn a_fresh_clones_first_and_second_runs_read_neither_the_store_nor_the_repositorys_token() {
    if !landlock() || !crate::support::sandbox::namespaces() {
        return;
    }
    let repo = TestRepo::empty();
    repo.write("a.txt", "a\n");
    repo.write("b.txt", "b\n");
    repo.write("check.sh", &repository_check(&repo.path.join(".git")));
    repo.commit_all("base");
    plant_repository_tokens(&repo);
    let plan = repo.plan(&repository_plan(&repo));
    let base = repo.git(&["log", "-1", "--format=%h %s"]);
    for round in ["first", "second"] {
        assert_eq!(
            repo.path.join(".git/plait").exists(),
            round == "second",
            "{round} run"
        );
        let config = own_config(&repo);
        let out = repo.plait_env(
            &["run", plan.to_str().unwrap()],
            &[("XDG_CONFIG_HOME", &config)],
        );
        let status = repo.status_json(&[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{round}: {}\n{status:#}",
            stderr(&out)
        );
        let run = status["id"].as_str().unwrap().to_string();
        let written = repo.tree_files(&format!("plait/{run}/a"))["a.txt"].clone();
        for marker in ["GOAL-MARKER", "b-LOG-MARKER", "runs"] {
            assert!(
                !written.contains(marker),
                "{round}: {marker} read:\n{written}"
            );
        }
        for token in REPO_TOKENS {
            assert!(
                !written.contains(token),
                "{round}: {token} read:\n{written}"
            );
            repo.assert_not_written(token);
        }
        // git works: the worktree's change, the base's commit, the remote less its token.
        assert!(
            written.contains("GIT-STATUS\n M a.txt"),
            "{round}:\n{written}"
        );
        assert!(
            written.contains(&format!("GIT-LOG\n{}", base.trim())),
            "{round}:\n{written}"
        );
        assert!(
            written.contains("GIT-DIFF\n a.txt | "),
            "{round}:\n{written}"
        );
        assert!(
            written.contains("REMOTE\nhttps://github.com/o/r.git"),
            "{round}:\n{written}"
        );
        assert!(written.contains("Permission denied"), "{round}:\n{written}");
        // What plait wrote for the agent to read is its own, on every run.
        assert!(
            written.contains("OWNED\na.txt\nFILES\na.txt"),
            "{round}:\n{written}"
        );
        // The check saw neither and git worked for it (it fails naming what it read).
        let a = task_json(&status, "a");
        assert_eq!(a["state"], "done", "{status:#}");
        assert_eq!(a["checks"][0]["passed"], true, "{status:#}");
    }
    // plait's own git still reads the real config.
    assert!(repo
        .git(&["config", "remote.origin.url"])
        .contains("SECRET-url-token"));
}

/// Where no mount namespace can show a copy of the config, the token stays unreadable all
/// the same, and the task's record says why git there cannot read the config.
#[test]
fn without_namespaces_the_repositorys_token_stays_unreadable_and_the_record_says_why() {
    if !landlock() {
        return;
    }
    let repo = TestRepo::with_files(&[("a.txt", "a\n")]);
    plant_repository_tokens(&repo);
    let g = repo.path.join(".git");
    let agent = format!(
        "(cat {g}/config; ls {g}/plait; git config remote.origin.url) > a.txt 2>&1; true",
        g = g.display()
    );
    let plan = repo.plan(&format!(
        "goal = \"GOAL-MARKER-5e1\"\n[review]\nagent = \"off\"\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.txt\"]\nagent = {{ exec = {agent:?} }}\n"
    ));
    let out = plait_without_namespaces_env(
        &repo,
        &["run", plan.to_str().unwrap()],
        &[("XDG_CONFIG_HOME", own_config(&repo))],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap().to_string();
    let written = repo.tree_files(&format!("plait/{run}/a"))["a.txt"].clone();
    for token in REPO_TOKENS {
        assert!(!written.contains(token), "{token} read:\n{written}");
    }
    assert!(!written.contains("runs"), "{written}");
    let refused = task_json(&status, "a")["sandbox"]["refused"].to_string();
    assert!(
        refused.contains("read of the repository's config refused")
            && refused.contains("allows no mount namespace"),
        "{refused}"
    );
}

/// A checkout whose ignored `deps` and `vendor/lib` are symlinks to a directory outside
/// (planted with a secret), and whose `tools/bin` is a real directory: the directory outside.
fn checkout_with_linked_includes(repo: &TestRepo) -> std::path::PathBuf {
    let outside = repo.scratch.join("home-dir");
    fs::create_dir_all(outside.join("pkg")).unwrap();
    fs::write(outside.join("secret.txt"), "SECRET-home\n").unwrap();
    fs::write(outside.join("pkg/secret.txt"), "SECRET-home\n").unwrap();
    fs::create_dir_all(repo.path.join("vendor")).unwrap();
    std::os::unix::fs::symlink(&outside, repo.path.join("deps")).unwrap();
    std::os::unix::fs::symlink(&outside, repo.path.join("vendor/lib")).unwrap();
    fs::create_dir_all(repo.path.join("tools/bin")).unwrap();
    fs::write(repo.path.join("tools/bin/tool"), "tool\n").unwrap();
    outside
}

fn include_plan(include: &str) -> String {
    format!(
        "goal = \"g\"\n[review]\nagent = \"off\"\n[setup]\ninclude = [{include}]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.txt\"]\n\
         agent = {{ exec = \"$PLAIT_RUN_IN cat deps/secret.txt vendor/lib/pkg/secret.txt > a.txt 2>&1; true\" }}\n"
    )
}

/// A `[setup] include` that is a symlink out of the checkout, or lies under one, is refused
/// when the plan is read (exit 2), naming the link and where it leads; nothing is made.
#[test]
fn an_include_through_a_symlink_out_of_the_checkout_is_refused_naming_the_link() {
    let repo = TestRepo::with_files(&[(".gitignore", "deps\nvendor/\ntools/\n"), ("a.txt", "a\n")]);
    let outside = checkout_with_linked_includes(&repo);
    let plan = repo.plan(&include_plan(
        "\"deps/\", \"vendor/lib/pkg\", \"tools/bin\"",
    ));
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    for words in [
        format!("`deps` is a symlink to `{}`", outside.display()),
        format!(
            "`vendor/lib/pkg` lies under `vendor/lib`, a symlink to `{}`",
            outside.display()
        ),
        "which leads outside your checkout".to_string(),
    ] {
        assert!(said.contains(&words), "{words} in:\n{said}");
    }
    assert!(
        !said.contains("tools/bin"),
        "a real directory is fine:\n{said}"
    );
    assert!(!repo.path.join(".git/plait/runs").exists(), "{said}");
    assert!(repo.branches().iter().all(|b| !b.starts_with("plait/")));
}

/// A directory a plan includes, swapped for a symlink out of the checkout after the plan
/// was read: the environment opens it beneath the checkout with no link followed, and the
/// run stops naming the link; no agent sees the directory outside.
#[test]
fn an_include_swapped_for_a_symlink_after_the_plan_is_refused_when_it_is_mounted() {
    if !crate::support::sandbox::namespaces() {
        return;
    }
    use plait_run::orchestrator::{self, RunSettings};
    let repo = TestRepo::with_files(&[(".gitignore", "deps\n"), ("a.txt", "a\n")]);
    let outside = repo.scratch.join("home-dir");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "SECRET-home\n").unwrap();
    fs::create_dir_all(repo.path.join("deps")).unwrap();
    fs::write(repo.path.join("deps/secret.txt"), "in the checkout\n").unwrap();
    let toml = include_plan("\"deps\"");
    let plan_path = repo.plan(&toml);
    let git = plait_core::git::open(&repo.path).unwrap();
    let parsed = plait_plan::parse(&toml, &plan_path).unwrap();
    let resolved = plait_plan::resolve_with_env(&git, parsed, &plan_path, &|_| None).unwrap();
    // The swap, after the plan was read.
    fs::remove_dir_all(repo.path.join("deps")).unwrap();
    std::os::unix::fs::symlink(&outside, repo.path.join("deps")).unwrap();
    let settings = RunSettings {
        store: None,
        remote: None,
        context: plait_stages::context::Context::from_repo(
            git,
            &repo.path,
            plait_stages::context::process_env(),
            std::path::PathBuf::from(env!("CARGO_BIN_EXE_plait")),
        ),
        plan: std::sync::Arc::new(resolved),
        plan_path,
        plan_text: toml.clone(),
        jobs: 1,
        worktree_root: None,
        max_cost: None,
        groups: None,
    };
    let prepared = orchestrator::prepare(settings).unwrap();
    let ran = crate::support::runtime().block_on(orchestrator::execute(
        prepared,
        None,
        plait_core::cancel::Cancel::new().1,
    ));
    let said = match ran {
        Err(e) => format!("{e:#}"),
        Ok(state) => format!("{state:?}"),
    };
    assert!(
        said.contains(&format!("`deps` is a symlink to `{}`", outside.display())),
        "{said}"
    );
    for branch in repo.branches() {
        for text in repo.tree_files(&branch).values() {
            assert!(!text.contains("SECRET-home"), "{branch}");
        }
    }
}
