//! Stage 1, `plait plan --split module:DIR/*` on a Python package laid out as tomlkit is:
//! the package's `__init__.py` gets a task of its own, and the plan's header lists the
//! unowned test modules before it counts the data files among the tests.

use crate::support::{owned_by_task, stderr, TestRepo};

/// A package with two modules, tests that name one of them and one that names none, and
/// 50 data files under `tests/examples/`.
fn tomlkit_like() -> TestRepo {
    let mut files: Vec<(String, String)> = [
        ("pyproject.toml", "[project]\nname = \"pkg\"\n"),
        ("pkg/__init__.py", "from pkg.a import A\n"),
        ("pkg/__init__.pyi", "A: int\n"),
        ("pkg/a.py", "A = 1\n"),
        ("pkg/b.py", "B = 2\n"),
        ("tests/__init__.py", ""),
        ("tests/conftest.py", ""),
        ("tests/test_a.py", "def test_a(): pass\n"),
        ("tests/test_build.py", "def test_build(): pass\n"),
        ("tests/util.py", "def load(): pass\n"),
    ]
    .iter()
    .map(|(p, c)| (p.to_string(), c.to_string()))
    .collect();
    for i in 0..50 {
        files.push((
            format!("tests/examples/ex{i:02}.toml"),
            format!("a = {i}\n"),
        ));
    }
    files.push(("tests/examples/json/ex.json".into(), "{}\n".into()));
    TestRepo::with_owned_files(&files)
}

/// Writes the plan for `spec` through the binary; returns its text and stderr.
fn plan(repo: &TestRepo, spec: &str) -> (String, String) {
    let path = repo.scratch.join("plan.toml");
    let out = repo.plait(&[
        "plan",
        "--split",
        spec,
        "--prompt",
        "Tidy {path}",
        "--exec",
        "true",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    (std::fs::read_to_string(&path).unwrap(), stderr(&out))
}

/// The header's lines, without their `# `.
fn header(text: &str) -> Vec<&str> {
    text.lines().map_while(|l| l.strip_prefix("# ")).collect()
}

#[test]
fn a_split_package_gives_its_init_a_task_and_the_header_puts_test_modules_first() {
    let repo = tomlkit_like();
    let (text, err) = plan(&repo, "module:pkg/*");
    let tasks = owned_by_task(&repo, &text);
    let ids: Vec<&str> = tasks.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["pkg-init", "pkg-a", "pkg-b"], "{text}");
    assert_eq!(
        tasks[0].1,
        ["pkg/__init__.py", "pkg/__init__.pyi"],
        "the package's root, stub included, is a task of its own\n{text}"
    );
    assert_eq!(tasks[1].1, ["pkg/a.py", "tests/test_a.py"], "{text}");

    let header = header(&text);
    let at = |line: &str| {
        header
            .iter()
            .position(|l| *l == line)
            .unwrap_or_else(|| panic!("no `{line}` in the header:\n{text}"))
    };
    let roots = at("Package roots, each a task of its own (the glob splits their packages):");
    assert_eq!(
        header[roots + 1],
        "  pkg/__init__.py: task pkg-init",
        "{text}"
    );
    let tests = at("Tests that name no module; no task owns them:");
    assert_eq!(
        header[tests + 1..tests + 5],
        [
            "  tests/test_build.py",
            "  tests/__init__.py",
            "  tests/conftest.py",
            "  tests/util.py"
        ],
        "the test module comes first, then the code the tests share\n{text}"
    );
    assert_eq!(
        header[tests + 5],
        "51 data file(s) among the tests (not code); no task owns them: \
         tests/examples/*.toml (50), tests/examples/json/*.json (1)",
        "the data files are counted apart, in one line\n{text}"
    );
    assert!(
        !text.contains("ex00.toml"),
        "no data file is listed by name\n{text}"
    );
    assert!(
        !header
            .iter()
            .any(|l| l.contains("__init__.py") && l.contains("no task owns")),
        "{text}"
    );
    assert!(err.contains("4 test(s) name no module"), "{err}");
    assert!(
        err.contains("51 data file(s) among the tests go to no task"),
        "{err}"
    );
}

#[test]
fn a_package_named_whole_is_one_task_with_its_init() {
    let repo = tomlkit_like();
    let (text, _) = plan(&repo, "module:pkg");
    let tasks = owned_by_task(&repo, &text);
    assert_eq!(tasks.len(), 1, "{text}");
    assert_eq!(tasks[0].0, "pkg");
    assert!(
        tasks[0].1.contains(&"pkg/__init__.py".to_string()),
        "{text}"
    );
    assert!(
        !text.contains("Package roots"),
        "no root is a task of its own\n{text}"
    );
}
