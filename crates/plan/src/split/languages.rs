//! Where each language keeps its modules and its tests, read from the tracked paths alone:
//! Rust crates (`Cargo.toml` and `src/`; tests in `tests/` and `benches/`), Python
//! packages and modules (tests in `tests/` or `test/`, or beside as `test_x.py`), JS/TS
//! source trees (tests beside as `x.test.ts` or in `__tests__/`, or in `tests/`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;

use super::{ancestors, is_inside};
use plait_core::git::TreeFile;

/// The languages whose modules are found; on the same directory, Rust wins over Python
/// and Python over JS/TS (the order `languages::find` adds them in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Lang {
    Rust,
    Python,
    Js,
}

/// A path a task may own: a whole directory, or one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Claim {
    pub path: String,
    pub dir: bool,
}

/// A module the code declares.
#[derive(Debug)]
pub(super) struct Node {
    pub lang: Lang,
    /// The module's main path: its directory, or its file.
    pub path: String,
    pub dir: bool,
    /// Paths that select it when the glob matches them or a directory above them.
    pub select: Vec<String>,
    /// What a task for this module owns, before its tests are added.
    pub claims: Vec<Claim>,
    /// Its path inside its project, e.g. `["net", "http"]`; the last one is its name.
    pub segments: Vec<String>,
    /// The directory of its crate's or package's manifest (`""`: the repository's root).
    pub project: String,
    /// The module it is part of.
    pub parent: Option<usize>,
    /// The root file of a crate or of a directory module: no test is named after it.
    pub root_file: bool,
}

impl Node {
    /// A module that owns its main path and is selected by it.
    pub fn new(
        lang: Lang,
        project: &str,
        path: &str,
        dir: bool,
        segments: Vec<String>,
        parent: Option<usize>,
    ) -> Node {
        Node {
            lang,
            path: path.to_string(),
            dir,
            select: vec![path.to_string()],
            claims: vec![Claim {
                path: path.to_string(),
                dir,
            }],
            segments,
            project: project.to_string(),
            parent,
            root_file: false,
        }
    }
}

/// A test file or directory, with what it takes to find the module it tests.
#[derive(Debug)]
pub(super) struct Test {
    pub lang: Lang,
    pub path: String,
    pub dir: bool,
    /// Names of the module it tests, best first; empty when it names none.
    pub names: Vec<String>,
    /// The directory where a module of that name would sit beside it.
    pub beside: Option<String>,
    /// Modules under this directory are preferred.
    pub home: String,
    pub project: String,
    /// What the file is among the tests (a directory: `Code`).
    pub kind: TestKind,
}

/// What a file among the tests is, for the plan's header: test modules first, then the
/// code they share, and data files apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum TestKind {
    /// A test module, named as its language names them: `test_x.py`, `x_test.py`,
    /// `x.test.ts`, `__tests__/x.js`, a Rust crate's `tests/x.rs` or `tests/x/main.rs`.
    Named,
    /// Other code of a known language: `conftest.py`, `tests/common/mod.rs`, helpers.
    Code,
    /// Anything else: fixtures, `tests/examples/*.toml`, snapshots.
    Data,
}

/// What `path`, a test of `lang`, is; `tree` is the test directory it was found in.
fn test_kind(lang: Lang, path: &str, tree: Option<&str>) -> TestKind {
    let name = file_name(path);
    let code =
        name.ends_with(".rs") || name.ends_with(".py") || name.ends_with(".pyi") || is_js(path);
    if !code {
        return TestKind::Data;
    }
    let named = match lang {
        Lang::Python => python_test_names(name).is_some_and(|names| !names.is_empty()),
        Lang::Js => {
            name.contains(".test.")
                || name.contains(".spec.")
                || test_dir_in(parent(path), &["__tests__"]).is_some()
        }
        Lang::Rust => tree.is_some_and(|dir| {
            let rel = &path[dir.len() + 1..];
            match rel.split_once('/') {
                None => name.ends_with(".rs"),
                Some((_, rest)) => rest == "main.rs",
            }
        }),
    };
    if named {
        TestKind::Named
    } else {
        TestKind::Code
    }
}

/// Whether `node` is the root file of its package or crate (`__init__.py`, `mod.rs`,
/// `lib.rs`, `index.ts`): a task of its own when the glob splits the package.
pub(super) fn is_package_root(node: &Node) -> bool {
    node.root_file
        || (node.lang == Lang::Js && !node.dir && js_stem(file_name(&node.path)) == "index")
}

/// The modules and tests of every language found in the tree.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub nodes: Vec<Node>,
    pub tests: Vec<Test>,
}

const PYTHON_MANIFESTS: &[&str] = &["pyproject.toml", "setup.py", "setup.cfg"];
const PYTHON_TEST_DIRS: &[&str] = &["tests", "test"];
const JS_EXTENSIONS: &[&str] = &["js", "jsx", "ts", "tsx", "mjs", "cjs"];
const JS_TEST_DIRS: &[&str] = &["tests", "test"];
/// Directories whose tests are about the modules beside the directory.
const JS_BESIDE_DIRS: &[&str] = &["__tests__", "__snapshots__"];

/// Finds the modules and tests of every language: Rust first, then Python, then JS/TS.
pub(super) fn find(list: &Listing) -> Found {
    let mut found = Found::default();
    find_rust(list, &mut found);
    find_python(list, &mut found);
    find_js(list, &mut found);
    found
}

/// The tracked files, with questions about directories answered.
pub(super) struct Listing<'a> {
    files: BTreeSet<&'a str>,
}

impl<'a> Listing<'a> {
    pub fn new(files: &'a [TreeFile]) -> Listing<'a> {
        Listing {
            files: files
                .iter()
                .filter(|f| f.is_blob())
                .map(|f| f.path.as_str())
                .collect(),
        }
    }

    /// Every file, sorted.
    pub fn files(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.files.iter().copied()
    }

    fn is_file(&self, path: &str) -> bool {
        self.files.contains(path)
    }

    fn is_dir(&self, path: &str) -> bool {
        let prefix = slash(path);
        self.from(&prefix)
            .next()
            .is_some_and(|f| f.starts_with(&prefix))
    }

    /// The files under `dir` (`""`: the root), at any depth.
    fn under(&self, dir: &str) -> Vec<&'a str> {
        let prefix = slash(dir);
        self.from(&prefix)
            .take_while(|f| f.starts_with(&prefix))
            .collect()
    }

    /// The files and the directories directly inside `dir`.
    fn entries(&self, dir: &str) -> (Vec<&'a str>, Vec<String>) {
        let prefix = slash(dir);
        let (mut files, mut dirs) = (Vec::new(), Vec::<String>::new());
        for file in self.under(dir) {
            match file[prefix.len()..].split_once('/') {
                Some((sub, _)) => {
                    let sub = format!("{prefix}{sub}");
                    if dirs.last() != Some(&sub) {
                        dirs.push(sub);
                    }
                }
                None => files.push(file),
            }
        }
        (files, dirs)
    }

    fn from(&self, start: &str) -> impl Iterator<Item = &'a str> + '_ {
        self.files
            .range::<str, _>((Bound::Included(start), Bound::Unbounded))
            .copied()
    }
}

/// `dir` with a trailing slash, or nothing for the root.
fn slash(dir: &str) -> String {
    if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    }
}

fn join(dir: &str, name: &str) -> String {
    format!("{}{name}", slash(dir))
}

/// The directory holding `path` (`""`: the root).
pub(super) fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

fn file_name(path: &str) -> &str {
    path.rfind('/').map_or(path, |i| &path[i + 1..])
}

/// The file name without its last extension.
fn stem(path: &str) -> &str {
    let name = file_name(path);
    name.rfind('.').map_or(name, |i| &name[..i])
}

/// Whether `path` is a dotfile or inside a dot directory (configuration, not modules).
fn hidden(path: &str) -> bool {
    path.split('/').any(|c| c.starts_with('.'))
}

fn with(segments: &[String], name: &str) -> Vec<String> {
    let mut out = segments.to_vec();
    out.push(name.to_string());
    out
}

fn push(found: &mut Found, node: Node) -> usize {
    found.nodes.push(node);
    found.nodes.len() - 1
}

/// The directory of `path` when it is a `manifest` file.
fn manifest_dir<'p>(path: &'p str, manifest: &str) -> Option<&'p str> {
    if path == manifest {
        return Some("");
    }
    path.strip_suffix(manifest)?.strip_suffix('/')
}

/// The nearest of `projects` holding `path` (`""` when none does).
fn project_of(projects: &BTreeSet<&str>, path: &str) -> String {
    ancestors(path)
        .rev()
        .find(|d| projects.contains(d))
        .unwrap_or("")
        .to_string()
}

/// The outermost directory in `dir` (itself included) named one of `names`.
fn test_dir_in<'p>(dir: &'p str, names: &[&str]) -> Option<&'p str> {
    ancestors(dir)
        .chain([dir])
        .find(|d| names.contains(&file_name(d)))
}

/// What a test's file stem says without a `test_` prefix or a `_test(s)` or `_bench(es)`
/// suffix.
fn bare_name(stem: &str) -> Option<&str> {
    stem.strip_prefix("test_")
        .or_else(|| {
            ["_tests", "_test", "_benches", "_bench"]
                .iter()
                .find_map(|s| stem.strip_suffix(s))
        })
        .filter(|b| !b.is_empty())
}

/// The tests in a test directory such as a crate's `tests/`: each directory directly in
/// it is a test named after that directory, and each file a test named by `names`. Deeper
/// than `tests/x/y.rs`, only a name marked as a test's (`test_y.py`, `y.test.ts`) counts.
fn test_tree(
    list: &Listing,
    lang: Lang,
    dir: &str,
    project: &str,
    names: &dyn Fn(&str) -> Vec<String>,
    found: &mut Found,
) {
    let home = parent(dir);
    let test = |path: &str, is_dir: bool, names: Vec<String>| Test {
        lang,
        path: path.to_string(),
        dir: is_dir,
        names,
        beside: None,
        home: home.to_string(),
        project: project.to_string(),
        kind: match is_dir {
            true => TestKind::Code,
            false => test_kind(lang, path, Some(dir)),
        },
    };
    for sub in list.entries(dir).1 {
        found
            .tests
            .push(test(&sub, true, vec![file_name(&sub).to_string()]));
    }
    let depth = |file: &str| file[dir.len() + 1..].matches('/').count();
    for file in list.under(dir) {
        let mut names = names(file_name(file));
        if depth(file) > 1 {
            names.retain(|name| name != stem(file));
        }
        found.tests.push(test(file, false, names));
    }
}

// Rust ----------------------------------------------------------------------------------

/// Each crate's modules under its `src/`, and its tests and benches.
fn find_rust(list: &Listing, found: &mut Found) {
    let crates: Vec<&str> = list
        .files()
        .filter(|f| !hidden(f))
        .filter_map(|f| manifest_dir(f, "Cargo.toml"))
        .collect();
    for dir in crates {
        let src = join(dir, "src");
        let before = found.nodes.len();
        let roots: Vec<String> = ["lib.rs", "main.rs"]
            .iter()
            .map(|name| join(&src, name))
            .filter(|path| list.is_file(path))
            .collect();
        if let Some(first) = roots.first() {
            let segments = vec![stem(first).to_string()];
            let mut root = Node::new(Lang::Rust, dir, first, false, segments, None);
            root.claims = roots
                .iter()
                .map(|path| Claim {
                    path: path.clone(),
                    dir: false,
                })
                .collect();
            root.select = roots;
            root.root_file = true;
            push(found, root);
        }
        let krate = Crate { list, dir };
        krate.modules(&src, &[], None, &["lib.rs", "main.rs"], found);
        if found.nodes.len() > before {
            let names = |name: &str| match name.strip_suffix(".rs") {
                Some(stem) => [Some(stem), bare_name(stem)]
                    .into_iter()
                    .flatten()
                    .map(String::from)
                    .collect(),
                None => Vec::new(),
            };
            for kind in ["tests", "benches"] {
                test_tree(list, Lang::Rust, &join(dir, kind), dir, &names, found);
            }
        }
    }
}

struct Crate<'l, 'a> {
    list: &'l Listing<'a>,
    /// The directory of its `Cargo.toml`.
    dir: &'l str,
}

impl Crate<'_, '_> {
    /// The modules in `dir` (its files `skip` aside): `x.rs`; `x/` with a `mod.rs` (or a
    /// `main.rs`, as in `src/bin/x/`); `x.rs` with `x/` beside it. Other directories only
    /// group what is inside them.
    fn modules(
        &self,
        dir: &str,
        segments: &[String],
        parent: Option<usize>,
        skip: &[&str],
        found: &mut Found,
    ) {
        let (files, dirs) = self.list.entries(dir);
        for file in files {
            let name = file_name(file);
            let Some(stem) = name.strip_suffix(".rs") else {
                continue;
            };
            if skip.contains(&name) {
                continue;
            }
            let sub = join(dir, stem);
            let segments = with(segments, stem);
            if self.list.is_dir(&sub) {
                let mut node =
                    Node::new(Lang::Rust, self.dir, &sub, true, segments.clone(), parent);
                node.select.push(file.to_string());
                node.claims.push(Claim {
                    path: file.to_string(),
                    dir: false,
                });
                let i = push(found, node);
                self.modules(&sub, &segments, Some(i), &[], found);
            } else {
                push(
                    found,
                    Node::new(Lang::Rust, self.dir, file, false, segments, parent),
                );
            }
        }
        for sub in dirs {
            if self.list.is_file(&format!("{sub}.rs")) {
                continue;
            }
            let segments = with(segments, file_name(&sub));
            let root = ["mod.rs", "main.rs"]
                .into_iter()
                .find(|root| self.list.is_file(&join(&sub, root)));
            let Some(root) = root else {
                self.modules(&sub, &segments, parent, &[], found);
                continue;
            };
            let node = Node::new(Lang::Rust, self.dir, &sub, true, segments.clone(), parent);
            let i = push(found, node);
            let root_path = join(&sub, root);
            let own = with(&segments, stem(root));
            let mut own = Node::new(Lang::Rust, self.dir, &root_path, false, own, Some(i));
            own.root_file = true;
            push(found, own);
            self.modules(&sub, &segments, Some(i), &[root], found);
        }
    }
}

// Python --------------------------------------------------------------------------------

/// Packages (directories with `__init__.py` or `__init__.pyi`) and modules (`.py` files,
/// each with its `.pyi` stub beside it; a stub alone is a module too), and their tests.
fn find_python(list: &Listing, found: &mut Found) {
    let projects: BTreeSet<&str> = list
        .files()
        .filter_map(|f| PYTHON_MANIFESTS.iter().find_map(|m| manifest_dir(f, m)))
        .collect();
    let python: Vec<&str> = list
        .files()
        .filter(|f| f.ends_with(".py") && !hidden(f))
        .collect();
    let is_test = |file: &str| {
        test_dir_in(parent(file), PYTHON_TEST_DIRS).is_some()
            || python_test_names(file_name(file)).is_some()
    };
    // Modules and stubs outside the tests; a stub beside its module goes with it.
    let sources: Vec<&str> = list
        .files()
        .filter(|f| !hidden(f) && !is_test(f))
        .filter(|f| f.ends_with(".py") || (f.ends_with(".pyi") && !list.is_file(&f[..f.len() - 1])))
        .collect();
    // Sorted as directories, so a package comes before the packages inside it.
    let packages: BTreeSet<&str> = sources
        .iter()
        .filter_map(|f| {
            f.strip_suffix("/__init__.py")
                .or_else(|| f.strip_suffix("/__init__.pyi"))
        })
        .collect();
    let before = found.nodes.len();
    let mut package_nodes: HashMap<&str, usize> = HashMap::new();
    for dir in &packages {
        let node = python_node(&package_nodes, &projects, dir, true, found);
        package_nodes.insert(dir, node);
        python_init(list, dir, node, found);
    }
    for file in &sources {
        if !matches!(file_name(file), "__init__.py" | "__init__.pyi") {
            let node = python_node(&package_nodes, &projects, file, false, found);
            let stub = format!("{file}i");
            if file.ends_with(".py") && list.is_file(&stub) {
                found.nodes[node].select.push(stub.clone());
                found.nodes[node].claims.push(Claim {
                    path: stub,
                    dir: false,
                });
            }
        }
    }
    if found.nodes.len() == before {
        return;
    }
    python_tests(list, &projects, &python, found);
}

/// Adds the package or module at `path`, inside the nearest of `packages` above it.
fn python_node(
    packages: &HashMap<&str, usize>,
    projects: &BTreeSet<&str>,
    path: &str,
    dir: bool,
    found: &mut Found,
) -> usize {
    let name = if dir { file_name(path) } else { stem(path) };
    let above = ancestors(path).rev().find_map(|d| packages.get(d).copied());
    let segments = match above {
        Some(above) => {
            // Directories without `__init__.py` inside a package still name the module.
            let package = &found.nodes[above];
            let inner = &path[package.path.len() + 1..];
            let mut segments = package.segments.clone();
            segments.extend(
                parent(inner)
                    .split('/')
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            );
            segments.push(name.to_string());
            segments
        }
        None => vec![name.to_string()],
    };
    let project = project_of(projects, path);
    push(
        found,
        Node::new(Lang::Python, &project, path, dir, segments, above),
    )
}

/// A package's `__init__.py` (with its `.pyi` stub) as a module of its own inside the
/// package, named `init`: a glob that splits the package (`pkg/*`) gives it a task.
fn python_init(list: &Listing, dir: &str, package: usize, found: &mut Found) {
    let files: Vec<String> = ["__init__.py", "__init__.pyi"]
        .iter()
        .map(|name| join(dir, name))
        .filter(|path| list.is_file(path))
        .collect();
    let Some(first) = files.first() else {
        return;
    };
    let (segments, project) = {
        let package = &found.nodes[package];
        (with(&package.segments, "init"), package.project.clone())
    };
    let mut node = Node::new(
        Lang::Python,
        &project,
        first,
        false,
        segments,
        Some(package),
    );
    node.claims = files
        .iter()
        .map(|path| Claim {
            path: path.clone(),
            dir: false,
        })
        .collect();
    node.select = files;
    node.root_file = true;
    push(found, node);
}

/// The modules a Python test file names, best first: `test_x.py` and `x_test.py` name `x`,
/// then the private module `_x` (`tests/test_make.py` tests `_make.py`).
fn python_test_names(name: &str) -> Option<Vec<String>> {
    let stem = name.strip_suffix(".py")?;
    if stem == "conftest" {
        return Some(Vec::new());
    }
    let bare = stem
        .strip_prefix("test_")
        .or_else(|| stem.strip_suffix("_test"))
        .filter(|b| !b.is_empty())?;
    let mut names = vec![bare.to_string()];
    if !bare.starts_with('_') {
        names.push(format!("_{bare}"));
    }
    Some(names)
}

fn python_tests(list: &Listing, projects: &BTreeSet<&str>, python: &[&str], found: &mut Found) {
    let mut test_dirs = BTreeSet::new();
    for &file in python {
        if let Some(dir) = test_dir_in(parent(file), PYTHON_TEST_DIRS) {
            test_dirs.insert(dir);
        } else if let Some(names) = python_test_names(file_name(file)) {
            found.tests.push(Test {
                lang: Lang::Python,
                path: file.to_string(),
                dir: false,
                names,
                beside: Some(parent(file).to_string()),
                home: parent(file).to_string(),
                project: project_of(projects, file),
                kind: test_kind(Lang::Python, file, None),
            });
        }
    }
    let names = |name: &str| python_test_names(name).unwrap_or_default();
    for dir in test_dirs {
        let project = project_of(projects, dir);
        test_tree(list, Lang::Python, dir, &project, &names, found);
    }
}

// JS/TS ---------------------------------------------------------------------------------

/// Per `package.json` (or the repository's root), the modules under `src/` if it has
/// any source there, else under the package's directory; and their tests.
fn find_js(list: &Listing, found: &mut Found) {
    let projects: BTreeSet<&str> = list
        .files()
        .filter_map(|f| manifest_dir(f, "package.json"))
        .collect();
    let mut by_project: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for file in list.files() {
        let wanted = is_js(file) || test_dir_in(parent(file), JS_BESIDE_DIRS).is_some();
        if wanted && !hidden(file) && !file.split('/').any(|c| c == "node_modules") {
            by_project
                .entry(project_of(&projects, file))
                .or_default()
                .push(file);
        }
    }
    for (project, files) in &by_project {
        js_project(list, project, files, found);
    }
}

fn is_js(path: &str) -> bool {
    let name = file_name(path);
    name.rfind('.')
        .is_some_and(|i| JS_EXTENSIONS.contains(&&name[i + 1..]))
}

fn is_js_test(path: &str) -> bool {
    let name = file_name(path);
    name.contains(".test.")
        || name.contains(".spec.")
        || test_dir_in(parent(path), JS_TEST_DIRS).is_some()
        || test_dir_in(parent(path), JS_BESIDE_DIRS).is_some()
}

/// The module a JS test file names: `x.test.ts`, `x.spec.js`, `x.ts` and
/// `x.test.ts.snap` all name `x`.
fn js_test_name(name: &str) -> String {
    let cut = [".test.", ".spec."].iter().find_map(|m| name.find(m));
    match cut {
        Some(i) => name[..i].to_string(),
        None => js_stem(name).to_string(),
    }
}

/// The module name of a JS file: without its extension, `.d.ts` included.
fn js_stem(name: &str) -> &str {
    let stem = stem(name);
    stem.strip_suffix(".d").unwrap_or(stem)
}

fn js_project(list: &Listing, project: &str, files: &[&str], found: &mut Found) {
    let src = join(project, "src");
    let root = if files.iter().any(|f| is_inside(f, &src)) {
        src
    } else {
        project.to_string()
    };
    let before = found.nodes.len();
    let mut dir_nodes: HashMap<String, usize> = HashMap::new();
    for &file in files {
        if !is_js(file) || is_js_test(file) || !is_inside(file, &root) {
            continue;
        }
        let rel = &file[slash(&root).len()..];
        let (mut parent, mut segments) = (None, Vec::new());
        for (i, _) in rel.match_indices('/') {
            segments.push(file_name(&rel[..i]).to_string());
            let dir = join(&root, &rel[..i]);
            let node = match dir_nodes.get(&dir) {
                Some(&node) => node,
                None => {
                    let node = Node::new(Lang::Js, project, &dir, true, segments.clone(), parent);
                    let node = push(found, node);
                    dir_nodes.insert(dir, node);
                    node
                }
            };
            parent = Some(node);
        }
        segments.push(js_stem(file_name(file)).to_string());
        push(
            found,
            Node::new(Lang::Js, project, file, false, segments, parent),
        );
    }
    if found.nodes.len() == before {
        return;
    }
    let mut test_dirs = BTreeSet::new();
    for &file in files.iter().filter(|f| is_js_test(f)) {
        if let Some(dir) = test_dir_in(parent(file), JS_TEST_DIRS) {
            test_dirs.insert(dir);
            continue;
        }
        let mut beside = parent(file);
        while JS_BESIDE_DIRS.contains(&file_name(beside)) {
            beside = parent(beside);
        }
        found.tests.push(Test {
            lang: Lang::Js,
            path: file.to_string(),
            dir: false,
            names: vec![js_test_name(file_name(file))],
            beside: Some(beside.to_string()),
            home: beside.to_string(),
            project: project.to_string(),
            kind: test_kind(Lang::Js, file, None),
        });
    }
    let names = |name: &str| vec![js_test_name(name)];
    for dir in test_dirs {
        test_tree(list, Lang::Js, dir, project, &names, found);
    }
}
