//! The run's environment with real processes: one base layer per commit (tracked files,
//! `[setup]`, plait's build of the base) under every agent's view and every check, at one
//! stable path outside the checkout. A Node project whose dependencies are installed in the
//! user's checkout (`include`) or by `[setup] run`; a project without `[setup]`, where the
//! agents and the checks agree and the failure names it; a task writing into an included
//! directory; a Python virtualenv made by the setup; a cargo workspace whose agent's first
//! build is incremental from the base's.

use std::fmt::Write as _;
use std::fs;

use crate::support::sandbox::namespaces;
use crate::support::{skip, stderr, stdout, task_json, Plan, TestRepo};

/// Whether views over layers can be had here (user and mount namespaces); the tests that
/// need them say so and return where not.
fn has(program: &str) -> bool {
    let found = plait_sandbox::shell::findable(program, std::env::var("PATH").ok().as_deref());
    if !found {
        skip(format_args!("no {program} on PATH"));
    }
    found
}

const LEFT_PAD: &str = "module.exports = (s, n, c) => String(c || ' ').repeat(Math.max(0, n - String(s).length)) + s;\n";

/// A Node project whose three modules load `left-pad` and whose `npm test` checks them;
/// `dependency` is how package.json names it.
fn node_project(dependency: &str) -> TestRepo {
    let package = format!(
        "{{\"name\": \"np\", \"version\": \"1.0.0\", \"scripts\": {{\"test\": \"node test.js\"}}, \
         \"dependencies\": {{\"left-pad\": \"{dependency}\"}}}}\n"
    );
    let mut files = vec![
        (".gitignore", "node_modules/\n".to_string()),
        ("package.json", package),
        (
            "test.js",
            "for (const m of ['a', 'b', 'c']) {\n  const v = require('./src/' + m + '.js')();\n  \
             if (!/^0+[a-c]$/.test(v)) { console.error('bad', m, v); process.exit(1); }\n}\n\
             console.log('ok');\n"
                .to_string(),
        ),
    ];
    for m in ["a", "b", "c"] {
        files.push((
            Box::leak(format!("src/{m}.js").into_boxed_str()),
            format!("module.exports = () => require('left-pad')('{m}', 3, '0');\n"),
        ));
    }
    let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
    TestRepo::with_files(&files)
}

/// Installs `left-pad` into the user's checkout, as `npm install` would have.
fn install_in_checkout(repo: &TestRepo) {
    repo.write("node_modules/left-pad/index.js", LEFT_PAD);
    repo.write(
        "node_modules/left-pad/package.json",
        "{\"name\": \"left-pad\", \"version\": \"1.3.0\", \"main\": \"index.js\"}\n",
    );
}

/// A plan of three tasks, each widening its module's padding and running `npm test` in its
/// view (an exec agent through `$PLAIT_RUN_IN`, the others as agent programs that start in
/// it), with `npm test` as task and merged check, and `extra` after.
fn node_plan(extra: &str) -> String {
    let mut plan = String::from(
        "goal = \"pad more\"\n[review]\nagent = \"off\"\nrounds = 0\n\
         [checks]\ntask = [\"npm test\"]\nmerged = [\"npm test\"]\n",
    );
    for (m, agent) in [
        (
            "a",
            "{ exec = \"sed -i 's/3/4/' src/a.js && $PLAIT_RUN_IN npm test\" }",
        ),
        (
            "b",
            "{ cli = [\"sh\", \"-c\", \"sed -i 's/3/5/' src/b.js && npm test\"] }",
        ),
        (
            "c",
            "{ cli = [\"sh\", \"-c\", \"sed -i 's/3/6/' src/c.js && npm test\"] }",
        ),
    ] {
        let _ = write!(
            plan,
            "[[task]]\nid = \"{m}\"\nprompt = \"p\"\nowns = [\"src/{m}.js\"]\nagent = {agent}\n"
        );
    }
    plan.push_str(extra);
    plan
}

/// Asserts that every task of the newest run is done, its merged check passed, and no
/// process was refused a write under the home's npm cache.
fn assert_all_green(repo: &TestRepo) -> serde_json::Value {
    let status = repo.status_json(&[]);
    for id in ["a", "b", "c"] {
        let task = task_json(&status, id);
        assert_eq!(task["state"], "done", "{task:#}");
        let refused = task["sandbox"]["refused"].to_string();
        assert!(!refused.contains(".npm"), "{id}: {refused}");
    }
    assert!(
        status["merged_checks"]
            .as_array()
            .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c["passed"] == true)),
        "{:#}",
        status["merged_checks"]
    );
    status
}

#[test]
fn included_dependencies_reach_every_agent_and_check_and_the_run_lands() {
    if !namespaces() || !has("npm") {
        return;
    }
    let repo = node_project("1.3.0");
    install_in_checkout(&repo);
    let plan = repo.plan(&node_plan("[setup]\ninclude = [\"node_modules/\"]\n"));
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let status = assert_all_green(&repo);
    let env = &status["environment"];
    assert!(
        env["layer"]
            .as_str()
            .unwrap()
            .contains("sharing node_modules"),
        "{env:#}"
    );
    // The views and checks are mounted outside the checkout.
    assert!(!env["layer"]
        .as_str()
        .unwrap()
        .contains(repo.path.to_str().unwrap()));
    let run = status["id"].as_str().unwrap().to_string();
    let out = repo.plait(&["land", &run, "--into", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        repo.read("src/b.js"),
        "module.exports = () => require('left-pad')('b', 5, '0');\n"
    );
    assert_eq!(repo.read("node_modules/left-pad/index.js"), LEFT_PAD);
}

#[test]
fn a_setup_run_installs_once_into_the_base_layer_and_leaves_the_checkout_alone() {
    if !namespaces() || !has("npm") {
        return;
    }
    let repo = node_project("file:vendor/left-pad");
    repo.write("vendor/left-pad/index.js", LEFT_PAD);
    repo.write(
        "vendor/left-pad/package.json",
        "{\"name\": \"left-pad\", \"version\": \"1.3.0\", \"main\": \"index.js\"}\n",
    );
    // A lockfile, as `npm install` writes it, made in a copy so the checkout stays bare.
    let copy = repo.scratch.join("lock");
    fs::create_dir_all(&copy).unwrap();
    fs::copy(repo.path.join("package.json"), copy.join("package.json")).unwrap();
    let vendor = copy.join("vendor/left-pad");
    fs::create_dir_all(&vendor).unwrap();
    fs::write(vendor.join("index.js"), LEFT_PAD).unwrap();
    fs::copy(
        repo.path.join("vendor/left-pad/package.json"),
        vendor.join("package.json"),
    )
    .unwrap();
    let made = std::process::Command::new("npm")
        .args(["install", "--offline", "--no-audit", "--no-fund"])
        .current_dir(&copy)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    fs::copy(
        copy.join("package-lock.json"),
        repo.path.join("package-lock.json"),
    )
    .unwrap();
    repo.commit_all("lock");
    let plan = repo.plan(&node_plan(
        "[setup]\nrun = [\"npm ci --offline --no-audit --no-fund\"]\n",
    ));
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let status = assert_all_green(&repo);
    assert_eq!(
        status["environment"]["setup"],
        serde_json::json!(["npm ci --offline --no-audit --no-fund"])
    );
    assert!(!repo.path.join("node_modules").exists());
    let run = status["id"].as_str().unwrap().to_string();
    let log = repo.plait(&["log", &run, "--setup"]);
    assert!(
        stdout(&log).contains("--- setup: ") && stdout(&log).contains("npm ci"),
        "{}",
        stdout(&log)
    );

    // A second run on the same base keeps the installed layer: no setup runs again.
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = assert_all_green(&repo);
    assert!(
        status["environment"]["setup"].is_null(),
        "{:#}",
        status["environment"]
    );
    assert!(
        stdout(&repo.plait(&["status"])).contains("kept from an earlier run"),
        "{}",
        stdout(&repo.plait(&["status"]))
    );
}

#[test]
fn without_setup_agents_and_checks_agree_and_the_failure_names_setup() {
    if !namespaces() || !has("npm") {
        return;
    }
    let repo = node_project("1.3.0");
    install_in_checkout(&repo);
    let plan = repo.plan(&node_plan(""));
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    // The agents' `npm test` fails as the check would: nothing walks up into the
    // checkout's node_modules.
    for id in ["a", "b", "c"] {
        let task = task_json(&status, id);
        assert_eq!(task["state"], "failed", "{task:#}");
    }
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("[setup] include = [\"node_modules/\"]"),
        "{text}"
    );
    // The merged check at the base failed too, where plait built it.
    assert!(
        status["environment"]["failed_at_base"]
            .to_string()
            .contains("npm test"),
        "{:#}",
        status["environment"]
    );
}

#[test]
fn a_task_writing_an_included_directory_writes_only_its_own_layer() {
    if !namespaces() || !has("node") {
        return;
    }
    let repo = node_project("1.3.0");
    install_in_checkout(&repo);
    let check = "grep -q repeat node_modules/left-pad/index.js && node test.js";
    let plan = format!(
        "goal = \"g\"\n[review]\nagent = \"off\"\nrounds = 0\n\
         [checks]\ntask = [\"{check}\"]\nmerged = [\"{check}\"]\n\
         [setup]\ninclude = [\"node_modules/\"]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"src/a.js\"]\n\
         agent = {{ cli = [\"sh\", \"-c\", \"echo 'module.exports = () => 42' > node_modules/left-pad/index.js && grep -q 42 node_modules/left-pad/index.js && sed -i 's/3/4/' src/a.js\"] }}\n\
         [[task]]\nid = \"b\"\nprompt = \"p\"\nowns = [\"src/b.js\"]\nafter = [\"a\"]\n\
         agent = {{ cli = [\"sh\", \"-c\", \"grep -q repeat node_modules/left-pad/index.js && sed -i 's/3/5/' src/b.js\"] }}\n"
    );
    let out = repo.plait(&["run", repo.plan(&plan).to_str().unwrap()]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let status = repo.status_json(&[]);
    for id in ["a", "b"] {
        let task = task_json(&status, id);
        assert_eq!(task["state"], "done", "{task:#}");
        assert_eq!(task["violations"].as_array().unwrap().len(), 0, "{task:#}");
    }
    assert_eq!(repo.read("node_modules/left-pad/index.js"), LEFT_PAD);
}

#[test]
fn a_python_virtualenv_made_by_the_setup_serves_agents_and_checks() {
    if !namespaces() || !has("python3") {
        return;
    }
    let repo = TestRepo::with_files(&[
        (".gitignore", ".venv/\n"),
        ("requirements.txt", "\n"),
        ("app/__init__.py", ""),
        ("app/a.py", "def a():\n    return 1\n"),
        (
            "tests/test_a.py",
            "import sys, unittest\nfrom app.a import a\n\n\
             class T(unittest.TestCase):\n    def test(self):\n        \
             self.assertTrue(sys.prefix.endswith('.venv'), sys.prefix)\n        \
             self.assertEqual(a(), 2)\n",
        ),
        ("tests/__init__.py", ""),
    ]);
    let test = ".venv/bin/python -m unittest -q";
    let plan = Plan::new()
        .goal("g")
        .review_off()
        .set("review", "rounds", 0)
        .set("checks", "task", [test])
        .set("checks", "merged", [test])
        .set("setup", "run", ["python3 -m venv --without-pip .venv"])
        .task("a")
        .owns(["app/a.py"])
        .exec(&format!("sed -i 's/1/2/' app/a.py && $PLAIT_RUN_IN {test}"))
        .to_toml();
    let out = repo.plait(&["run", repo.plan(&plan).to_str().unwrap()]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let status = repo.status_json(&[]);
    assert_eq!(task_json(&status, "a")["state"], "done");
    assert!(!repo.path.join(".venv").exists());
}

#[test]
fn an_agents_first_cargo_build_is_incremental_from_the_base_layer() {
    if !namespaces() || !has("cargo") {
        return;
    }
    let repo = TestRepo::with_files(&[
        (".gitignore", "target/\n"),
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\"core\", \"app\"]\nresolver = \"2\"\n",
        ),
        (
            "core/Cargo.toml",
            "[package]\nname = \"core-lib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("core/src/lib.rs", "pub fn one() -> u32 { 1 }\n"),
        (
            "app/Cargo.toml",
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
             [dependencies]\ncore-lib = { path = \"../core\" }\n",
        ),
        (
            "app/src/lib.rs",
            "pub fn two() -> u32 { core_lib::one() + 1 }\n",
        ),
    ]);
    // The agent edits its crate and builds; what cargo compiled is kept on its branch.
    let agent = "sed -i 's/+ 1/+ 2/' app/src/lib.rs && cargo check --offline 2> app/built.txt";
    let plan = format!(
        "goal = \"g\"\n[review]\nagent = \"off\"\nrounds = 0\n\
         [checks]\ntask = [\"cargo check --offline\"]\n\
         [[task]]\nid = \"app\"\nprompt = \"p\"\nowns = [\"app/\"]\n\
         agent = {{ cli = [\"sh\", \"-c\", \"{agent}\"] }}\n"
    );
    let out = repo.plait(&["run", repo.plan(&plan).to_str().unwrap()]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap();
    let built = &repo.tree_files(&format!("plait/{run}/app"))["app/built.txt"];
    assert!(built.contains("Checking app"), "{built}");
    assert!(!built.contains("Checking core-lib"), "{built}");
}

/// The real Claude Code in the Node project: its plain `npm test` (Bash) finds the included
/// dependencies in its view, fails on the base, passes after its edit; the task's check
/// passes too, and nothing is refused under the home's npm cache.
#[test]
fn real_claude_codes_npm_test_finds_the_included_dependencies() {
    use crate::mock::{claude_tools, MockModel, Turn};
    use crate::support::agents::{real_claude, run_real, KEY};
    if !namespaces() || !has("npm") {
        return;
    }
    let Some(claude) = real_claude() else { return };
    let repo = node_project("1.3.0");
    install_in_checkout(&repo);
    let test = "npm test 2>&1; echo \"exit=$?\"; node -e \"console.log(require('./src/a.js')())\"";
    let mock = MockModel::start_claude_code(KEY);
    mock.script(
        "a",
        vec![
            Turn::Tools(vec![claude_tools::bash(test)]),
            Turn::Tools(vec![claude_tools::read("src/a.js")]),
            Turn::Tools(vec![claude_tools::edit("src/a.js", "'a', 3", "'a', 4")]),
            Turn::Tools(vec![claude_tools::bash(test)]),
            Turn::Text("Padded.".into()),
        ],
    );
    let toml = Plan::new()
        .goal("pad")
        .set("defaults", "agent", "claude-code")
        .set("defaults", "timeout", "60s")
        .set("defaults", "max_turns", 8)
        .review_off()
        .set("checks", "task", ["npm test"])
        .set("setup", "include", ["node_modules/"])
        .set("agents.claude-code", "bin", claude.display().to_string())
        .set("agents.claude-code", "provider", "mock")
        .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
        .task("a")
        .prompt("Pad a to four")
        .owns(["src/a.js"])
        .to_toml();
    let out = run_real(&repo, &toml);
    assert!(mock.problems().is_empty(), "{:#?}", mock.problems());
    let results = mock.tool_results("a");
    let texts: Vec<&str> = results.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(results.len(), 4, "{}\n{texts:#?}", stderr(&out));
    // `npm test` found left-pad in the view, before and after the edit, which it sees.
    assert!(
        texts[0].contains("exit=0") && texts[0].ends_with("\n00a"),
        "{}",
        texts[0]
    );
    assert!(
        texts[3].contains("exit=0") && texts[3].ends_with("\n000a"),
        "{texts:#?}"
    );
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a:#}\n{}", stderr(&out));
    assert!(
        !a["sandbox"]["refused"].to_string().contains(".npm"),
        "{a:#}"
    );
}

/// A `[setup] run` command that fails stops the run before any task starts: exit 1, the
/// command and its log named, no task branch made, the run's record saying why; `plait
/// resume` tries it again once what it needs is there.
#[test]
fn a_failing_setup_stops_the_run_before_any_task_and_resume_tries_it_again() {
    if !namespaces() {
        return;
    }
    let repo = TestRepo::with_files(&[(".gitignore", "ready\n"), ("a.txt", "a\n")]);
    let marker = repo.scratch.join("ready");
    let plan = format!(
        "goal = \"g\"\n[review]\nagent = \"off\"\n\
         [setup]\nrun = [\"echo installing; test -f {}\"]\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"a.txt\"]\nagent = {{ exec = \"echo b > a.txt\" }}\n",
        marker.display()
    );
    let out = repo.plait(&["run", repo.plan(&plan).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("[setup] run `echo installing; test -f")
            && err.contains("failed (command exited with status 1)")
            && err.contains("setup/setup-1.log"),
        "{err}"
    );
    assert_eq!(repo.branches(), ["main"]);
    let status = repo.status_json(&[]);
    assert!(
        status["environment"]["layer"]
            .as_str()
            .unwrap()
            .starts_with("not made: [setup] run"),
        "{:#}",
        status["environment"]
    );
    assert_eq!(task_json(&status, "a")["state"], "pending");
    let log = stdout(&repo.plait(&["log", "--setup"]));
    assert!(log.contains("installing"), "{log}");

    fs::write(&marker, "").unwrap();
    let run = status["id"].as_str().unwrap().to_string();
    let out = repo.plait(&["resume", &run]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = repo.status_json(&[]);
    assert_eq!(task_json(&status, "a")["state"], "done", "{status:#}");
}

/// Where no user namespace can be made, no base layer is: the checks copy a seed checkout,
/// `plait status` says so, and a plan with `[setup]` is warned that it goes without.
#[test]
fn without_namespaces_the_run_says_it_copies_and_that_the_setup_is_left_out() {
    if !namespaces() {
        return;
    }
    let repo = TestRepo::with_files(&[(".gitignore", "node_modules/\n"), ("a.txt", "a\n")]);
    repo.write("node_modules/dep/index.js", "module.exports = 1;\n");
    let plan = repo.plan(
        &Plan::new()
            .goal("g")
            .review_off()
            .set("checks", "task", ["test -f a.txt"])
            .set("setup", "include", ["node_modules/"])
            .task("a")
            .owns(["a.txt"])
            .exec("echo b > a.txt")
            .to_toml(),
    );
    let out =
        crate::support::sandbox::plait_without_namespaces(&repo, &["run", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[setup] is made into a base layer")
            && stderr(&out).contains("this run's agents and checks work without it")
            && stderr(&out).contains("a path naming your checkout (an editable install, a venv's scripts) reaches your working copy"),
        "{}",
        stderr(&out)
    );
    let status = repo.status_json(&[]);
    assert_eq!(task_json(&status, "a")["state"], "done");
    assert!(
        status["environment"]["layer"]
            .as_str()
            .unwrap()
            .starts_with("none: copies"),
        "{:#}",
        status["environment"]
    );
    assert!(!repo.path.join(".git/plait/envs").exists());
}

/// git in a check's layer sees the commit checked out: `HEAD` the task's commit, nothing
/// modified, the task's change in `git diff` against the base; the layer's git directory is
/// the check's to write (a refreshed index), as a checkout's is.
#[test]
fn git_in_a_checks_layer_sees_the_commit_checked_out() {
    if !namespaces() {
        return;
    }
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("gone.txt", "g\n")]);
    let check = "test \"$(git rev-parse HEAD)\" = \"$PLAIT_COMMIT\" \
                 && test -z \"$(git status --porcelain --untracked-files=no)\" \
                 && touch \"$(git rev-parse --git-dir)/probe\" \
                 && { test \"$PLAIT_COMMIT\" = \"$PLAIT_BASE\" || test \"$(git diff --name-only $PLAIT_BASE HEAD | tr '\\n' ' ')\" = 'a.txt gone.txt '; }";
    let plan = Plan::new()
        .goal("g")
        .review_off()
        .set("checks", "task", [check])
        .set("checks", "merged", [check])
        .task("a")
        .owns(["a.txt", "gone.txt"])
        .exec("echo A > a.txt && rm gone.txt")
        .to_toml();
    let out = repo.plait(&["run", repo.plan(&plan).to_str().unwrap()]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["state"], "done", "{a:#}");
    assert_eq!(a["checks"][0]["passed"], true, "{a:#}");
    assert!(
        status["environment"]["failed_at_base"].is_null(),
        "{status:#}"
    );
}

/// Every name under `dir` with its mode and what it holds (a file's bytes, a link's
/// target), without following a link: what a test compares to find a write, a new file, a
/// removal or a changed permission outside the trees plait writes.
pub(crate) fn snapshot(
    dir: &std::path::Path,
) -> std::collections::BTreeMap<String, (u32, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::PermissionsExt as _;
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        let meta = fs::symlink_metadata(&at).unwrap();
        let held = if meta.file_type().is_symlink() {
            fs::read_link(&at).unwrap().as_os_str().as_bytes().to_vec()
        } else if meta.is_dir() {
            let mut names: Vec<_> = fs::read_dir(&at)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            names.sort();
            stack.extend(names);
            Vec::new()
        } else {
            fs::read(&at).unwrap()
        };
        let rel = at.strip_prefix(dir).unwrap().display().to_string();
        out.insert(rel, (meta.permissions().mode(), held));
    }
    out
}

/// A home with a file a link could aim plait's writes at and a directory whose file a
/// link could aim its clearing at; what it holds.
pub(crate) fn home_with_targets(
    repo: &TestRepo,
) -> (
    std::path::PathBuf,
    std::collections::BTreeMap<String, (u32, Vec<u8>)>,
) {
    let home = crate::support::sandbox::home(repo);
    fs::write(home.join("victim"), "mine\n").unwrap();
    fs::create_dir_all(home.join("dir")).unwrap();
    fs::write(home.join("dir/x"), "theirs\n").unwrap();
    let before = snapshot(&home);
    (home, before)
}

/// A check that plants links in its layer — its git directory's `HEAD`, `commondir` and
/// `index` made links to the home (one to a file there, the others to names not there),
/// and a directory of the task's files made a link to a directory in the home — gets
/// plait to write, create or remove nothing outside at the task's next round, and that
/// round's check finds git working in the layer.
#[test]
fn links_a_check_plants_in_its_layer_lead_plait_nowhere_at_the_next_round() {
    if !namespaces() {
        return;
    }
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("deep/keep", "k\n")]);
    let (home, before) = home_with_targets(&repo);
    let home_text = home.display().to_string();
    let plant = format!(
        "gd=$(git rev-parse --absolute-git-dir) && rm -f \"$gd/HEAD\" \"$gd/commondir\" \"$gd/index\" \
         && ln -s {home_text}/victim \"$gd/HEAD\" && ln -s {home_text}/new \"$gd/commondir\" \
         && ln -s {home_text}/index \"$gd/index\" && rm -rf deep/sub && ln -s {home_text}/dir deep/sub && echo planted"
    );
    let check = format!(
        "if grep -qx 'round 0' a.txt; then {plant}; exit 1; fi; \
         test \"$(git rev-parse HEAD)\" = \"$PLAIT_COMMIT\" \
         && test -z \"$(git status --porcelain --untracked-files=no)\" \
         && grep -qx 'round 1' deep/sub/x/f"
    );
    let plan = Plan::new()
        .goal("g")
        .review_off()
        .set("review", "rounds", 2)
        .set("checks", "task", [check.as_str()])
        .task("a")
        .owns(["a.txt", "deep/"])
        .exec(
            "mkdir -p deep/sub/x && echo \"round $PLAIT_ROUND\" > deep/sub/x/f \
             && echo \"round $PLAIT_ROUND\" > a.txt",
        )
        .to_toml();
    let out = repo.plait(&["run", repo.plan(&plan).to_str().unwrap()]);
    assert_eq!(
        snapshot(&home),
        before,
        "the home is as it was: {}",
        stderr(&out)
    );
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert_eq!(a["state"], "done", "{a:#}");
    assert_eq!(a["checks"][0]["passed"], true, "{a:#}");
    let run = status["id"].as_str().unwrap();
    let branch = repo.tree_files(&format!("plait/{run}/a"));
    assert_eq!(branch["a.txt"], "round 1\n", "{a:#}");
    // The first round's check did plant them.
    let log = a["checks"][0]["log"]
        .as_str()
        .unwrap()
        .replace("checks-1", "checks-0");
    let first = fs::read_to_string(&log).unwrap();
    assert!(first.contains("planted"), "{log}: {first}");
}
