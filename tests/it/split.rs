//! Stage 1, `plait plan --split module:GLOB`: a task per module of the code, each owning
//! its module's tests, in plans the validator accepts as they stand.

use std::path::Path;

use plait_plan::{self as plan, split, PlanError};

use crate::support::{owned_by_task, stderr, stdout, TestRepo};

/// A crate with every kind of Rust module: file, `mod.rs`, 2018-style, crate root.
fn rust_crate() -> TestRepo {
    TestRepo::with_files(&[
        ("Cargo.toml", "[package]\nname = \"demo\"\n"),
        ("README.md", "demo\n"),
        (
            "src/lib.rs",
            "pub mod parser;\npub mod net;\npub mod util;\n",
        ),
        ("src/parser.rs", "pub fn parse() {}\n"),
        ("src/net/mod.rs", "pub mod http;\n"),
        ("src/net/http.rs", "pub fn get() {}\n"),
        ("src/util.rs", "pub mod fs;\n"),
        ("src/util/fs.rs", "pub fn read() {}\n"),
        ("tests/parser.rs", "#[test]\nfn parses() {}\n"),
        ("tests/net.rs", "#[test]\nfn connects() {}\n"),
        ("tests/common/mod.rs", "pub fn setup() {}\n"),
        ("benches/parser.rs", "fn main() {}\n"),
    ])
}

/// Splits the repository's HEAD by `spec`.
fn split_by(repo: &TestRepo, spec: &str) -> Result<split::SplitOutcome, PlanError> {
    let files = plait_core::git::flatten_tree(&repo.repo().head().unwrap().peel_to_tree().unwrap())
        .unwrap();
    let settings = split::SplitSettings {
        rule: split::SplitRule::parse(spec)?,
        template: "Tidy {path} ({id})".into(),
        goal: "g".into(),
        agent: Some(plan::AgentSpec::Exec("true".into())),
        base: None,
        first: None,
        last: None,
    };
    split::split(&files, &settings)
}

/// Each task's id and the files it owns, as the validator sees the written plan.
fn owned(repo: &TestRepo, outcome: &split::SplitOutcome) -> Vec<(String, Vec<String>)> {
    let text = plan::to_toml(&outcome.plan, "made by a test");
    let path = repo.plan(&text);
    let git = plait_core::git::open(&repo.path).unwrap();
    let parsed = plan::parse(&text, &path).unwrap();
    let resolved = plan::resolve(&git, parsed, Path::new("x"))
        .unwrap_or_else(|e| panic!("the split plan is not valid: {e}\n{text}"));
    resolved
        .tasks
        .iter()
        .map(|t| (t.id.clone(), t.owned.clone()))
        .collect()
}

fn expect(tasks: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    tasks
        .iter()
        .map(|(id, files)| {
            (
                id.to_string(),
                files.iter().map(|f| f.to_string()).collect(),
            )
        })
        .collect()
}

#[test]
fn rust_modules_own_their_tests_and_benches() {
    let repo = rust_crate();
    let outcome = split_by(&repo, "module:src/*").unwrap();
    assert_eq!(
        owned(&repo, &outcome),
        expect(&[
            ("lib", &["src/lib.rs"]),
            (
                "net",
                &["src/net/http.rs", "src/net/mod.rs", "tests/net.rs"]
            ),
            (
                "parser",
                &["benches/parser.rs", "src/parser.rs", "tests/parser.rs"],
            ),
            ("util", &["src/util.rs", "src/util/fs.rs"]),
        ])
    );
    let prompts: Vec<&str> = outcome
        .plan
        .tasks
        .iter()
        .map(|t| t.prompt.as_str())
        .collect();
    assert_eq!(
        prompts,
        [
            "Tidy src/lib.rs (lib)",
            "Tidy src/net (net)",
            "Tidy src/parser.rs (parser)",
            "Tidy src/util (util)",
        ]
    );
    assert_eq!(outcome.orphan_tests, ["tests/common/mod.rs"]);
    assert!(outcome.unowned.is_empty(), "{:?}", outcome.unowned);
}

#[test]
fn the_glob_chooses_the_depth_of_the_modules() {
    let repo = rust_crate();
    let all = split_by(&repo, "module:**").unwrap();
    assert_eq!(
        owned(&repo, &all),
        owned(&repo, &split_by(&repo, "module:src/*").unwrap()),
        "`**` takes the top-level modules, with everything below them"
    );
    assert_eq!(all.unowned, ["Cargo.toml", "README.md"]);
    for spec in ["module:.", "module:src"] {
        let ids: Vec<String> = split_by(&repo, spec)
            .unwrap()
            .plan
            .tasks
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(ids, ["lib", "net", "parser", "util"], "{spec}");
    }

    let inner = split_by(&repo, "module:src/net/*").unwrap();
    assert_eq!(
        owned(&repo, &inner),
        expect(&[
            ("net-http", &["src/net/http.rs"]),
            ("net-mod", &["src/net/mod.rs"]),
        ]),
        "tests/net.rs tests a module that is not selected as a whole"
    );
    let one = split_by(&repo, "module:src/parser.rs").unwrap();
    assert_eq!(
        owned(&repo, &one),
        expect(&[(
            "parser",
            &["benches/parser.rs", "src/parser.rs", "tests/parser.rs"]
        )])
    );
}

#[test]
fn a_workspace_splits_each_crate_by_its_own_src() {
    let repo = TestRepo::with_files(&[
        ("Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\n"),
        ("crates/core/Cargo.toml", "[package]\nname = \"core\"\n"),
        ("crates/core/src/lib.rs", "pub mod parser;\n"),
        ("crates/core/src/parser.rs", "\n"),
        ("crates/core/tests/parser.rs", "\n"),
        ("crates/cli/Cargo.toml", "[package]\nname = \"cli\"\n"),
        ("crates/cli/src/main.rs", "mod args;\n"),
        ("crates/cli/src/args.rs", "\n"),
        ("crates/cli/tests/it/main.rs", "mod args;\n"),
        ("crates/cli/tests/it/args.rs", "\n"),
    ]);
    let outcome = split_by(&repo, "module:crates/*/src/*").unwrap();
    assert_eq!(
        owned(&repo, &outcome),
        expect(&[
            (
                "cli-args",
                &["crates/cli/src/args.rs", "crates/cli/tests/it/args.rs"]
            ),
            ("cli-main", &["crates/cli/src/main.rs"]),
            ("core-lib", &["crates/core/src/lib.rs"]),
            (
                "core-parser",
                &["crates/core/src/parser.rs", "crates/core/tests/parser.rs"]
            ),
        ])
    );
    assert_eq!(outcome.orphan_tests, ["crates/cli/tests/it/main.rs"]);
    let one = split_by(&repo, "module:crates/core").unwrap();
    let ids: Vec<&str> = one.plan.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["core-lib", "core-parser"]);
    assert!(one.orphan_tests.is_empty(), "crate cli is not in the glob");
}

#[test]
fn python_packages_and_modules_own_their_tests() {
    let repo = TestRepo::with_files(&[
        ("pyproject.toml", "[project]\nname = \"shop\"\n"),
        ("shop/__init__.py", ""),
        ("shop/cart.py", "def total(): pass\n"),
        ("shop/tests/test_cart.py", "def test_total(): pass\n"),
        ("shop/tax/__init__.py", ""),
        ("shop/tax/rates.py", "RATE = 1\n"),
        ("prices.py", "def price(): pass\n"),
        ("prices_test.py", "def test_price(): pass\n"),
        ("tests/test_shop.py", "def test_shop(): pass\n"),
        (
            "tests/prices/test_rounding.py",
            "def test_rounding(): pass\n",
        ),
        ("tests/test_orphan.py", "def test_nothing(): pass\n"),
        ("tests/conftest.py", ""),
    ]);
    let outcome = split_by(&repo, "module:**").unwrap();
    assert_eq!(
        owned(&repo, &outcome),
        expect(&[
            (
                "prices",
                &[
                    "prices.py",
                    "prices_test.py",
                    "tests/prices/test_rounding.py"
                ]
            ),
            (
                "shop",
                &[
                    "shop/__init__.py",
                    "shop/cart.py",
                    "shop/tax/__init__.py",
                    "shop/tax/rates.py",
                    "shop/tests/test_cart.py",
                    "tests/test_shop.py",
                ]
            ),
        ])
    );
    // Test modules first, then the rest of the tests' code.
    assert_eq!(
        outcome.orphan_tests,
        ["tests/test_orphan.py", "tests/conftest.py"]
    );
    assert_eq!(outcome.unowned, ["pyproject.toml"]);

    let inner = split_by(&repo, "module:shop/*").unwrap();
    assert_eq!(
        owned(&repo, &inner),
        expect(&[
            ("shop-init", &["shop/__init__.py"]),
            ("shop-cart", &["shop/cart.py", "shop/tests/test_cart.py"]),
            ("shop-tax", &["shop/tax/__init__.py", "shop/tax/rates.py"]),
        ]),
        "a package's own tests/ go with the module they name; its __init__.py is a task"
    );
    assert!(inner.unowned.is_empty(), "{:?}", inner.unowned);
}

#[test]
fn js_modules_are_directories_and_files_at_the_globs_depth() {
    let repo = TestRepo::with_files(&[
        ("package.json", "{}\n"),
        ("src/components/Button/Button.tsx", "export {}\n"),
        ("src/components/Button/Button.test.tsx", "test()\n"),
        ("src/components/Button/index.ts", "export {}\n"),
        ("src/components/Menu.tsx", "export {}\n"),
        ("src/hooks/useToggle.ts", "export {}\n"),
        ("src/hooks/__tests__/useToggle.test.ts", "test()\n"),
        ("src/utils.ts", "export {}\n"),
        ("src/format.js", "export {}\n"),
        ("src/format.spec.js", "test()\n"),
        ("tests/utils.test.ts", "test()\n"),
        ("tests/e2e.spec.ts", "test()\n"),
    ]);
    let outcome = split_by(&repo, "module:src/*").unwrap();
    assert_eq!(
        owned(&repo, &outcome),
        expect(&[
            (
                "components",
                &[
                    "src/components/Button/Button.test.tsx",
                    "src/components/Button/Button.tsx",
                    "src/components/Button/index.ts",
                    "src/components/Menu.tsx",
                ]
            ),
            ("format", &["src/format.js", "src/format.spec.js"]),
            (
                "hooks",
                &[
                    "src/hooks/__tests__/useToggle.test.ts",
                    "src/hooks/useToggle.ts"
                ]
            ),
            ("utils", &["src/utils.ts", "tests/utils.test.ts"]),
        ])
    );
    assert_eq!(outcome.orphan_tests, ["tests/e2e.spec.ts"]);

    let inner = split_by(&repo, "module:src/components/*").unwrap();
    assert_eq!(
        owned(&repo, &inner),
        expect(&[
            (
                "components-Button",
                &[
                    "src/components/Button/Button.test.tsx",
                    "src/components/Button/Button.tsx",
                    "src/components/Button/index.ts",
                ]
            ),
            ("components-Menu", &["src/components/Menu.tsx"]),
        ])
    );
    let hooks = split_by(&repo, "module:src/hooks/*").unwrap();
    assert_eq!(
        owned(&repo, &hooks),
        expect(&[(
            "hooks-useToggle",
            &[
                "src/hooks/__tests__/useToggle.test.ts",
                "src/hooks/useToggle.ts"
            ]
        )]),
        "a test in __tests__ goes with the module beside the directory"
    );
}

#[test]
fn ids_are_valid_and_unique_and_paths_are_escaped() {
    let repo = TestRepo::with_files(&[
        ("package.json", "{}\n"),
        ("src/merged.ts", "export {}\n"),
        ("src/group-a.ts", "export {}\n"),
        ("src/utils.ts", "export {}\n"),
        ("src/utils/deep.ts", "export {}\n"),
        ("src/[odd]*.ts", "export {}\n"),
        ("src/[odd]*.test.ts", "test()\n"),
    ]);
    let outcome = split_by(&repo, "module:src/*").unwrap();
    assert_eq!(
        owned(&repo, &outcome),
        expect(&[
            ("odd", &["src/[odd]*.test.ts", "src/[odd]*.ts"]),
            ("t-group-a", &["src/group-a.ts"]),
            ("t-merged", &["src/merged.ts"]),
            ("utils", &["src/utils/deep.ts"]),
            ("utils-2", &["src/utils.ts"]),
        ])
    );
}

#[test]
fn a_module_of_another_language_inside_a_selected_one_stays_in_it() {
    let repo = TestRepo::with_files(&[
        ("shop/__init__.py", ""),
        ("shop/static/app.js", "run()\n"),
        ("shop/static/app.test.js", "test()\n"),
        ("tools/build.js", "build()\n"),
    ]);
    let outcome = split_by(&repo, "module:**").unwrap();
    assert_eq!(
        owned(&repo, &outcome),
        expect(&[
            (
                "shop",
                &[
                    "shop/__init__.py",
                    "shop/static/app.js",
                    "shop/static/app.test.js"
                ]
            ),
            ("tools", &["tools/build.js"]),
        ])
    );
}

#[test]
fn a_glob_that_selects_no_module_is_named() {
    let repo = rust_crate();
    let err = split_by(&repo, "module:lib/*").unwrap_err().to_string();
    assert!(
        err.contains("bad split rule `module:lib/*`: the glob `lib/*` selects none of the modules")
            && err.contains("src/parser.rs"),
        "{err}"
    );
    let plain = TestRepo::with_files(&[("README.md", "r\n"), ("notes/a.txt", "a\n")]);
    let err = split_by(&plain, "module:**").unwrap_err().to_string();
    assert!(err.contains("no module was found"), "{err}");
}

#[test]
fn the_binary_writes_a_module_plan_that_runs() {
    let repo = rust_crate();
    let plan = repo.scratch.join("plan.toml");
    let out = repo.plait(&[
        "plan",
        "--split",
        "module:src/*",
        "--prompt",
        "Tidy {path}",
        "--exec",
        "true",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("1 test(s) name no module"),
        "{}",
        stderr(&out)
    );
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(
        text.starts_with("# plait plan, made by --split 'module:src/*'\n# 4 task(s);"),
        "{text}"
    );
    assert!(
        text.contains("# Tests that name no module; no task owns them:\n#   tests/common/mod.rs\n"),
        "{text}"
    );
    let out = repo.plait(&["run", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = stdout(&out).trim().to_string();
    let status = repo.status_json(&[&run]);
    assert_eq!(status["tasks"].as_array().unwrap().len(), 4);

    let out = repo.plait(&["plan", "--split", "module:nothing/*", "--prompt", "p"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the glob `nothing/*` selects none"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_modules_test_directory_leaves_out_the_modules_inside_it() {
    let repo = TestRepo::with_files(&[
        ("Cargo.toml", "[package]\nname = \"demo\"\n"),
        ("src/lib.rs", "mod fixtures;\n"),
        ("src/fixtures.rs", "\n"),
        ("tests/fixtures/data.txt", "d\n"),
        (
            "tests/fixtures/inner/Cargo.toml",
            "[package]\nname = \"inner\"\n",
        ),
        ("tests/fixtures/inner/src/lib.rs", "mod parse;\n"),
        ("tests/fixtures/inner/src/parse.rs", "\n"),
        (".github/scripts/check.js", "run()\n"),
    ]);
    let outcome = split_by(&repo, "module:**").unwrap();
    assert_eq!(
        owned(&repo, &outcome),
        expect(&[
            (
                "fixtures",
                &[
                    "src/fixtures.rs",
                    "tests/fixtures/data.txt",
                    "tests/fixtures/inner/Cargo.toml",
                ]
            ),
            ("lib", &["src/lib.rs"]),
            ("inner-lib", &["tests/fixtures/inner/src/lib.rs"]),
            ("inner-parse", &["tests/fixtures/inner/src/parse.rs"]),
        ])
    );
    assert_eq!(
        outcome.plan.tasks[0].owns,
        [
            "/src/fixtures.rs",
            "/tests/fixtures/",
            "!/tests/fixtures/inner/src/lib.rs",
            "!/tests/fixtures/inner/src/parse.rs",
        ]
    );
    assert_eq!(
        outcome.unowned,
        [".github/scripts/check.js", "Cargo.toml"],
        "dot directories hold no modules"
    );
}

/// Runs `plait plan --split SPEC` in `repo`; returns the plan's text and stderr.
fn plan_by_binary(repo: &TestRepo, spec: &str) -> (String, String) {
    let out = repo.plait(&[
        "plan",
        "--split",
        spec,
        "--prompt",
        "Tidy {path}",
        "--exec",
        "true",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    (stdout(&out), stderr(&out))
}

/// The lines of the plan's header under `title`, without their `#   `.
fn header_list(text: &str, title: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| *l != format!("# {title}"))
        .skip(1)
        .map_while(|l| l.strip_prefix("#   "))
        .map(String::from)
        .collect()
}

const NO_MODULE: &str = "Tests that name no module; no task owns them:";
const SHARED: &str = "Tests named after two or more selected modules; no task owns them:";
const UNOWNED: &str = "Files the glob reaches that no task owns:";

#[test]
fn python_private_modules_take_their_tests_and_stubs() {
    let repo = TestRepo::fixture("attrs-layout");
    let (text, err) = plan_by_binary(&repo, "module:src/attr/*");
    assert_eq!(
        owned_by_task(&repo, &text),
        expect(&[
            (
                "attr-init",
                &["src/attr/__init__.py", "src/attr/__init__.pyi"]
            ),
            (
                "attr-_funcs",
                &["src/attr/_funcs.py", "tests/test_funcs.py"]
            ),
            (
                "attr-_make",
                &[
                    "src/attr/_make.py",
                    "src/attr/_make.pyi",
                    "tests/test_make.py"
                ]
            ),
            ("attr-_typing_compat", &["src/attr/_typing_compat.pyi"]),
            (
                "attr-converters",
                &[
                    "src/attr/converters.py",
                    "src/attr/converters.pyi",
                    "tests/test_converters.py"
                ]
            ),
        ]),
        "test_make names _make; converters is paired with the selected module, though \
         src/attrs/converters.py has the same name; a stub goes with its module, or alone \
         is one\n{text}"
    );
    assert_eq!(
        header_list(&text, NO_MODULE),
        ["tests/conftest.py", "tests/utils.py"],
        "{text}"
    );
    assert!(header_list(&text, SHARED).is_empty(), "{text}");
    assert_eq!(
        header_list(&text, UNOWNED),
        ["src/attr/py.typed"],
        "the package's stub goes the way of its __init__.py, a task of its own\n{text}"
    );
    assert!(err.contains("2 test(s) name no module"), "{err}");
}

#[test]
fn a_test_named_after_two_selected_modules_says_so() {
    let repo = TestRepo::fixture("attrs-layout");
    let (text, err) = plan_by_binary(&repo, "module:src/*");
    assert_eq!(
        owned_by_task(&repo, &text),
        expect(&[
            (
                "attr",
                &[
                    "src/attr/__init__.py",
                    "src/attr/__init__.pyi",
                    "src/attr/_funcs.py",
                    "src/attr/_make.py",
                    "src/attr/_make.pyi",
                    "src/attr/_typing_compat.pyi",
                    "src/attr/converters.py",
                    "src/attr/converters.pyi",
                    "src/attr/py.typed",
                    "tests/test_funcs.py",
                    "tests/test_make.py",
                ]
            ),
            (
                "attrs",
                &[
                    "src/attrs/__init__.py",
                    "src/attrs/__init__.pyi",
                    "src/attrs/converters.py"
                ]
            ),
        ])
    );
    assert_eq!(
        header_list(&text, SHARED),
        ["tests/test_converters.py (named after src/attr/converters.py and src/attrs/converters.py)"],
        "{text}"
    );
    assert_eq!(
        header_list(&text, NO_MODULE),
        ["tests/conftest.py", "tests/utils.py"],
        "test_converters.py names a module, two in fact\n{text}"
    );
    assert!(
        err.contains("1 test(s) are named after two or more selected modules"),
        "{err}"
    );

    let outcome = split_by(&repo, "module:src/*").unwrap();
    assert_eq!(
        outcome.shared_name_tests,
        [split::SharedNameTest {
            test: "tests/test_converters.py".into(),
            modules: vec![
                "src/attr/converters.py".into(),
                "src/attrs/converters.py".into(),
            ],
        }]
    );
}
