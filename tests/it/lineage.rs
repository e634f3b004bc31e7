//! Checkouts with a lineage: a task's code cannot leave build output behind that makes the
//! merged checks, or a neighbour task's checks, pass; and plait's commits are by whom git
//! would name.

use crate::support::{git_in, stderr, stdout, TestRepo};

/// A Python package with the usual `.gitignore`, and a unittest suite.
fn python_project() -> TestRepo {
    TestRepo::with_files(&[
        (".gitignore", "__pycache__/\n*.py[cod]\n"),
        ("pkg/__init__.py", "VERSION = 1\n"),
        ("pkg/strutils.py", "def old_name():\n    return 1\n"),
        ("pkg/iterutils.py", "def count():\n    return 2\n"),
        ("tests/__init__.py", ""),
        ("tests/test_evil.py", "# nothing yet\n"),
        ("tests/test_calls.py", "# nothing yet\n"),
        (
            "tests/test_strutils.py",
            "import unittest\nfrom pkg.strutils import old_name\n\n\
             class T(unittest.TestCase):\n    def test_it(self):\n        self.assertEqual(old_name(), 1)\n",
        ),
        (
            "tests/test_iterutils.py",
            "import unittest\nfrom pkg.iterutils import count\n\n\
             class T(unittest.TestCase):\n    def test_it(self):\n        self.assertEqual(count(), 2)\n",
        ),
    ])
}

/// A test that, when it runs, forges `pkg/__init__.py`'s bytecode in the checkout it runs
/// in: the real source compiled with an exit handler that turns any failure into exit 0,
/// stamped with the source's mtime and size so that Python trusts it.
const FORGE: &str = r#"import importlib._bootstrap_external as ext, importlib.util, os, unittest

class T(unittest.TestCase):
    def test_forge(self):
        src = os.path.join("pkg", "__init__.py")
        text = open(src).read() + "\nimport atexit, os\natexit.register(lambda: os._exit(0))\n"
        code = compile(text, src, "exec")
        st = os.stat(src)
        data = ext._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size)
        pyc = importlib.util.cache_from_source(src)
        os.makedirs(os.path.dirname(pyc), exist_ok=True)
        with open(pyc, "wb") as f:
            f.write(data)
"#;

fn task(id: &str, owns: &[&str], script: &str) -> String {
    let owns: Vec<String> = owns.iter().map(|o| format!("\"{o}\"")).collect();
    format!(
        "[[task]]\nid = \"{id}\"\nprompt = \"p\"\nowns = [{}]\nagent = {{ exec = '''{script}''' }}\n",
        owns.join(", ")
    )
}

#[test]
fn forged_bytecode_from_one_task_fools_neither_the_merged_checks_nor_a_neighbour() {
    let repo = python_project();
    std::fs::write(repo.scratch.join("test_evil.py"), FORGE).unwrap();
    let unittest = "python3 -m unittest discover -s tests -t . -q";
    let mut toml = format!(
        "goal = \"g\"\n[checks]\ntask = [\"{unittest}\"]\nmerged = [\"{unittest}\"]\njobs = 1\nbisect = false\n\
         [review]\nagent = \"off\"\nrounds = 0\n"
    );
    // evil runs first (plan order, one task at a time) and forges the bytecode in its
    // check's checkout.
    toml.push_str(&task(
        "evil",
        &["/tests/test_evil.py"],
        &format!(
            "cp {} tests/test_evil.py",
            repo.scratch.join("test_evil.py").display()
        ),
    ));
    // broken's own check fails; it must not pass through evil's bytecode.
    toml.push_str(&task(
        "broken",
        &["/pkg/iterutils.py"],
        "printf 'def count():\\n    return 3\\n' > pkg/iterutils.py",
    ));
    // Each green alone, red merged: strutils renames, strtest calls the old name.
    toml.push_str(&task(
        "strutils",
        &["/pkg/strutils.py", "/tests/test_strutils.py"],
        "sed -i s/old_name/new_name/g pkg/strutils.py tests/test_strutils.py",
    ));
    toml.push_str(&task(
        "strtest",
        &["/tests/test_calls.py"],
        "printf 'import unittest\\nfrom pkg.strutils import old_name\\n\\nclass T(unittest.TestCase):\\n    def test_it(self):\\n        self.assertEqual(old_name(), 1)\\n' > tests/test_calls.py",
    ));
    let main_before = repo.git(&["rev-parse", "main"]);
    let path = repo.plan(&toml);
    let out = repo.plait(&["run", path.to_str().unwrap(), "-j", "1", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let id = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|e| e["task"]["run"].as_str().map(str::to_string))
        .expect("a task event names the run");
    let state = repo.status_json(&[&id]);
    let task_state = |id: &str| crate::support::task_json(&state, id);
    assert_eq!(task_state("evil")["state"], "done", "{state:#}");
    // The neighbour's check saw its own failure, not evil's exit handler.
    let broken = task_state("broken");
    assert_eq!(broken["state"], "failed", "{broken:#}");
    let merged = state["merged_checks"].as_array().unwrap();
    assert!(
        !merged.is_empty() && merged.iter().any(|c| c["passed"] == false),
        "the merged checks passed on a red merge: {state:#}"
    );
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before);
}

#[test]
fn a_cache_stamp_under_target_from_one_task_does_not_reach_the_gate() {
    // A naive build cache, as make keeps: a test whose stamp under target/ is newer than
    // the test is not run again.
    let runner = "mkdir -p target\nfor t in tests/t_*.sh; do\n  stamp=target/$(basename $t).ok\n  \
                  if [ -f \"$stamp\" ] && [ \"$stamp\" -nt \"$t\" ] && [ \"$stamp\" -nt lib.sh ]; then continue; fi\n  \
                  sh \"$t\" || exit 1\n  touch \"$stamp\"\ndone\n";
    let repo = TestRepo::with_files(&[
        (".gitignore", "target/\n"),
        ("run-tests.sh", runner),
        ("lib.sh", "f() { echo 1; }\n"),
        ("tests/t_f.sh", ". ./lib.sh\n[ \"$(f)\" = 1 ]\n"),
        ("tests/t_evil.sh", "true\n"),
        ("tests/t_caller.sh", "true\n"),
    ]);
    let toml = format!(
        "goal = \"g\"\n[checks]\ntask = [\"sh run-tests.sh\"]\nmerged = [\"sh run-tests.sh\"]\njobs = 1\nbisect = false\n\
         [review]\nagent = \"off\"\nrounds = 0\n{}{}{}",
        // Stamps every test as passed far in the future, when its own check runs.
        task(
            "evil",
            &["/tests/t_evil.sh"],
            "printf 'mkdir -p target; for t in tests/t_*.sh; do touch -d 2100-01-01 target/$(basename $t).ok; done\\n' > tests/t_evil.sh",
        ),
        // Green alone: f now says 2, and its test too.
        task(
            "lib",
            &["/lib.sh", "/tests/t_f.sh"],
            "echo 'f() { echo 2; }' > lib.sh; printf '. ./lib.sh\\n[ \"$(f)\" = 2 ]\\n' > tests/t_f.sh",
        ),
        // Green alone, red with lib: calls f and wants 1.
        task(
            "caller",
            &["/tests/t_caller.sh"],
            "printf '. ./lib.sh\\n[ \"$(f)\" = 1 ]\\n' > tests/t_caller.sh",
        ),
    );
    let main_before = repo.git(&["rev-parse", "main"]);
    let path = repo.plan(&toml);
    let out = repo.plait(&["run", path.to_str().unwrap(), "-j", "1", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let merged = repo.status_json(&[])["merged_checks"].clone();
    assert!(
        merged
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["passed"] == false),
        "the merged checks trusted evil's stamps: {merged:#}"
    );
    let id = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before);
}

#[test]
fn a_tasks_later_rounds_keep_its_own_build_output_and_no_one_elses() {
    // Each check appends its task's name to target/seen and prints what it holds; a round's
    // check sees what the task's earlier rounds wrote and never another task's.
    let repo = TestRepo::with_files(&[
        (".gitignore", "target/\n"),
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
    ]);
    let check = "mkdir -p target; echo $PLAIT_TASK >> target/seen; \
                 echo \"SEEN $PLAIT_TASK-$(wc -l < target/seen): $(echo $(cat target/seen))\"; \
                 grep -q done a.txt || [ $PLAIT_TASK != a ]";
    let toml = format!(
        "goal = \"g\"\n[checks]\ntask = ['''{check}''']\njobs = 1\n[review]\nagent = \"off\"\nrounds = 2\n{}{}",
        // a passes its check in its second round only.
        task(
            "a",
            &["/a.txt"],
            "if [ \"$PLAIT_ROUND\" -ge 1 ]; then echo done >> a.txt; else echo more >> a.txt; fi",
        ),
        task("b", &["/b.txt"], "echo more >> b.txt"),
    );
    let path = repo.plan(&toml);
    let out = repo.plait(&["run", path.to_str().unwrap(), "-j", "1"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let mut seen = repo.printed("SEEN ");
    seen.sort();
    // The seed (the base, as task `base`) ran the check first; each task's checkout is a
    // copy of it, and a's second round still has its first round's line.
    assert_eq!(
        seen,
        [
            "SEEN a-2: base a",
            "SEEN a-3: base a a",
            "SEEN b-2: base b",
            "SEEN base-1: base",
        ],
        "what each check saw of the checkout's build output"
    );
}

#[test]
fn plaits_commits_are_by_whom_git_would_name() {
    let repo = TestRepo::with_files(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let toml = format!(
        "goal = \"g\"\n{}{}",
        task("a", &["/a.txt"], "echo more >> a.txt"),
        task("b", &["/b.txt"], "echo more >> b.txt")
    );
    let base = repo.git(&["rev-parse", "main"]);
    let path = repo.plan(&toml);
    let out = repo.plait_env(
        &["run", path.to_str().unwrap()],
        &[
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_AUTHOR_NAME", "ci"),
            ("GIT_AUTHOR_EMAIL", "ci@example.invalid"),
            ("GIT_COMMITTER_NAME", "robot"),
            ("GIT_COMMITTER_EMAIL", "robot@example.invalid"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let who = git_in(
        &repo.path,
        &[
            "log",
            "--format=%an <%ae> / %cn <%ce>",
            &format!("{base}..main"),
        ],
    );
    // The merge and the two tasks' commits.
    assert_eq!(who.lines().count(), 3, "{who}");
    for line in who.lines() {
        assert_eq!(
            line,
            "ci <ci@example.invalid> / robot <robot@example.invalid>"
        );
    }
    // Without the variables, the repository's own config names them, as for git.
    repo.git(&["config", "user.name", "Repo User"]);
    repo.git(&["config", "user.email", "repo@example.invalid"]);
    let toml = format!(
        "goal = \"g\"\n{}{}",
        task("a", &["/a.txt"], "echo again >> a.txt"),
        task("b", &["/b.txt"], "echo again >> b.txt")
    );
    let base = repo.git(&["rev-parse", "main"]);
    let path = repo.plan(&toml);
    let mut plait = std::process::Command::new(env!("CARGO_BIN_EXE_plait"));
    plait
        .args(["run", path.to_str().unwrap()])
        .current_dir(&repo.path);
    for var in [
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
    ] {
        plait.env_remove(var);
    }
    let out = plait.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = repo.status_json(&[])["id"].as_str().unwrap().to_string();
    let out = repo.plait(&["land", &id, "--into", "main"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let who = git_in(
        &repo.path,
        &["log", "--format=%an <%ae>", &format!("{base}..main")],
    );
    assert_eq!(who, ["Repo User <repo@example.invalid>"; 3].join("\n"));
}

#[test]
fn the_seed_is_kept_between_runs_and_follows_the_base_only_forward() {
    let repo = TestRepo::with_files(&[(".gitignore", "target/\n"), ("a.txt", "a\n")]);
    let check = "mkdir -p target; echo $PLAIT_TASK >> target/seen; \
                 echo \"SEEN $PLAIT_TASK: $(echo $(cat target/seen))\"";
    let toml = format!(
        "goal = \"g\"\n[checks]\ntask = ['''{check}''']\n[review]\nagent = \"off\"\n{}",
        task("a", &["/a.txt"], "echo more >> a.txt"),
    );
    let path = repo.plan(&toml);
    // What the base's check and a's check printed in one run, a line each (`None`: it did
    // not run).
    let run = || {
        let out = repo.plait(&["run", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let id = repo.status_json(&[])["id"].as_str().unwrap().to_string();
        let seen = repo.printed_in(&id, "SEEN ");
        let read = |name: &str| {
            let mark = format!("SEEN {name}: ");
            let found: Vec<String> = seen
                .iter()
                .filter_map(|l| l.strip_prefix(&mark))
                .map(|l| format!("{}\n", l.replace(' ', "\n")))
                .collect();
            assert!(found.len() <= 1, "{seen:?}");
            found.into_iter().next()
        };
        (read("base"), read("a"))
    };
    // The first run builds the seed; the second, on the same base, takes it as it is.
    assert_eq!(run(), (Some("base\n".into()), Some("base\na\n".into())));
    assert_eq!(run(), (None, Some("base\na\n".into())));
    // A base that comes after it: moved there and warmed again, incrementally.
    repo.write("b.txt", "b\n");
    let moved_from = repo.git(&["rev-parse", "HEAD"]);
    repo.commit_all("next");
    assert_eq!(
        run(),
        (Some("base\nbase\n".into()), Some("base\nbase\na\n".into()))
    );
    // A base that is not in the seed's history (another line of work): a new seed.
    repo.git(&["checkout", "-q", "-b", "other", &moved_from]);
    repo.write("c.txt", "c\n");
    repo.commit_all("other");
    assert_eq!(run(), (Some("base\n".into()), Some("base\na\n".into())));
    // Where layers can be had, the seed is the base layer of each base (`envs/`); else a
    // checkout (`seed`).
    let (seed, built) = if plait_sandbox::sandbox::view_support().is_ok() {
        let head = repo.git(&["rev-parse", "HEAD"]);
        let envs = repo.path.join(".git/plait/envs");
        let layer = std::fs::read_dir(&envs)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.is_dir()
                    && p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with(head.trim())
            })
            .expect("the base's layer");
        (layer.clone(), layer.join("tree/target/seen"))
    } else {
        let seed = repo.path.join(".git/plait/seed");
        (seed.clone(), seed.join("target/seen"))
    };
    assert!(built.exists(), "{}", built.display());
    let out = repo.plait(&["clean", "--seed"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!seed.exists(), "plait clean --seed left it");
    assert!(!repo.git(&["worktree", "list"]).contains("plait/seed"));
}
