//! The `module:GLOB` rule: take the modules the code itself declares (found per language in
//! `languages`), keep those the glob selects, hand each its tests, and write `owns` globs
//! that no two tasks share.
//!
//! A module is selected when the glob matches its path, or a directory above it; a selected
//! module inside another selected one stays part of it. Every path a task owns is a *claim*
//! (a directory or a file); a file belongs to the deepest claim above it, and each task's
//! globs carve out the deeper claims of others, so the validator sees disjoint ownership.

use std::collections::{BTreeSet, HashMap, HashSet};

use globset::GlobMatcher;

use super::languages::{self, parent, Claim, Found, Lang, Listing, Node, Test, TestKind};
use super::{ancestors, is_inside, SharedNameTest};
use plait_core::git::TreeFile;
use plait_core::globs::escape;

/// Which paths a `module:` glob reaches: those it matches and everything inside them.
pub(super) enum Reach {
    All,
    Glob(GlobMatcher),
}

impl Reach {
    /// The glob as written.
    fn glob(&self) -> &str {
        match self {
            Reach::All => ".",
            Reach::Glob(m) => m.glob().glob(),
        }
    }

    fn reaches(&self, path: &str) -> bool {
        match self {
            Reach::All => true,
            Reach::Glob(m) => m.is_match(path) || ancestors(path).any(|d| m.is_match(d)),
        }
    }
}

/// One task's share: a module with its tests.
pub(super) struct Unit {
    /// The module's main path.
    pub path: String,
    /// The module's path in its project, prefixed by the project's directory name.
    pub name: String,
    pub owns: Vec<String>,
    /// Whether it is a package's root file alone (`__init__.py`, `mod.rs`, `index.ts`).
    pub root: bool,
}

/// The units of a `module:` split and the files in its reach that none owns.
pub(super) struct ModuleSplit {
    pub units: Vec<Unit>,
    /// Test code that names no module: test modules first, then the code they share.
    pub orphan_tests: Vec<String>,
    /// Data files among the tests that no task owns.
    pub orphan_data: Vec<String>,
    pub shared_name_tests: Vec<SharedNameTest>,
    pub unowned: Vec<String>,
}

/// Cuts `files` into modules with their tests; the error says why nothing was selected.
pub(super) fn split_modules(files: &[TreeFile], reach: &Reach) -> Result<ModuleSplit, String> {
    let list = Listing::new(files);
    let found = languages::find(&list);
    let selection = Selection::new(&found.nodes, reach);
    let mut claims = Claims::default();
    for &unit in &selection.units {
        for claim in &found.nodes[unit].claims {
            claims.add(claim, unit);
        }
    }
    let unpaired = assign_tests(&found, &selection, &mut claims);

    let mut owned: HashMap<usize, usize> = HashMap::new();
    let mut unowned = Vec::new();
    for file in list.files() {
        match claims.owner(file) {
            Some(unit) => *owned.entry(unit).or_default() += 1,
            None if reach.reaches(file) => unowned.push(file.to_string()),
            None => {}
        }
    }
    let kept: Vec<usize> = selection
        .units
        .iter()
        .copied()
        .filter(|u| owned.contains_key(u))
        .collect();
    if kept.is_empty() {
        return Err(nothing_selected(&found.nodes, reach.glob()));
    }
    let left = Leftovers::new(&found.nodes, &kept, &claims);
    let orphans: BTreeSet<(TestKind, &str)> = unpaired
        .orphans
        .into_iter()
        .filter(|t| left.holds(t))
        .map(|t| (t.kind, t.path.as_str()))
        .collect();
    let (orphan_data, orphan_tests): (Vec<_>, Vec<_>) = orphans
        .into_iter()
        .partition(|(kind, _)| *kind == TestKind::Data);
    let paths = |list: Vec<(TestKind, &str)>| -> Vec<String> {
        list.into_iter().map(|(_, p)| p.to_string()).collect()
    };
    let (orphan_tests, orphan_data) = (paths(orphan_tests), paths(orphan_data));
    let mut shared_name_tests: Vec<SharedNameTest> = unpaired
        .shared
        .into_iter()
        .filter(|(t, _)| left.holds(t))
        .map(|(t, modules)| SharedNameTest {
            test: t.path.clone(),
            modules: modules
                .iter()
                .map(|&i| found.nodes[i].path.clone())
                .collect(),
        })
        .collect();
    shared_name_tests.sort_by(|a, b| a.test.cmp(&b.test));
    let listed: HashSet<&String> = orphan_tests.iter().chain(&orphan_data).collect();
    unowned.retain(|f| !listed.contains(f) && !shared_name_tests.iter().any(|t| &t.test == f));

    let mut units: Vec<Unit> = kept
        .iter()
        .map(|&u| {
            let node = &found.nodes[u];
            Unit {
                path: node.path.clone(),
                name: unit_name(node),
                owns: claims.globs(u, &kept),
                root: languages::is_package_root(node),
            }
        })
        .collect();
    units.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ModuleSplit {
        units,
        orphan_tests,
        orphan_data,
        shared_name_tests,
        unowned,
    })
}

/// Which unpaired tests the header lists: those no other language's module took, in the
/// projects the split is about.
struct Leftovers<'a> {
    touched: HashSet<(Lang, &'a str)>,
    claims: &'a Claims,
}

impl<'a> Leftovers<'a> {
    fn new(nodes: &'a [Node], kept: &[usize], claims: &'a Claims) -> Leftovers<'a> {
        let touched = kept
            .iter()
            .map(|&u| (nodes[u].lang, nodes[u].project.as_str()))
            .collect();
        Leftovers { touched, claims }
    }

    fn holds(&self, test: &Test) -> bool {
        self.touched.contains(&(test.lang, test.project.as_str()))
            && self.claims.owner(&test.path).is_none()
    }
}

/// What task ids are made from: `net/http`, or `core/net/http` in the crate `crates/core`.
fn unit_name(node: &Node) -> String {
    let name = node.segments.join("/");
    match node.project.rsplit('/').next() {
        Some(project) if !project.is_empty() => format!("{project}/{name}"),
        _ => name,
    }
}

fn nothing_selected(nodes: &[Node], glob: &str) -> String {
    if nodes.is_empty() {
        return "no module was found at the base: no Rust crate (Cargo.toml and src/), \
                Python package or module, or JS/TS source file"
            .to_string();
    }
    let top: BTreeSet<&str> = nodes
        .iter()
        .filter(|n| n.parent.is_none())
        .map(|n| n.path.as_str())
        .collect();
    let shown: Vec<&str> = top.iter().take(6).copied().collect();
    format!(
        "the glob `{glob}` selects none of the modules found (such as {}{}); a module is \
         selected when the glob matches its path or a directory above it, e.g. \
         'module:src/*' or 'module:**'",
        shown.join(", "),
        if top.len() > shown.len() { ", ..." } else { "" }
    )
}

/// The selected modules: one unit per top-most selected module.
struct Selection {
    /// Per module, the unit it is part of.
    unit_of: Vec<Option<usize>>,
    /// The units, in the order of the modules.
    units: Vec<usize>,
}

impl Selection {
    fn new(nodes: &[Node], reach: &Reach) -> Selection {
        let picked: Vec<bool> = nodes
            .iter()
            .map(|n| n.select.iter().any(|p| reach.reaches(p)))
            .collect();
        let mut unit_of: Vec<Option<usize>> = (0..nodes.len())
            .map(|i| {
                let (mut top, mut at) = (None, Some(i));
                while let Some(node) = at {
                    if picked[node] {
                        top = Some(node);
                    }
                    at = nodes[node].parent;
                }
                top
            })
            .collect();
        // A unit inside another's directory (another language's or another project's
        // module) joins it; on the same directory, the first found wins.
        let mut dirs: HashMap<&str, usize> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if unit_of[i] == Some(i) && node.dir {
                dirs.entry(node.path.as_str()).or_insert(i);
            }
        }
        let host = |unit: usize| {
            let path = nodes[unit].path.as_str();
            ancestors(path)
                .chain([path])
                .find_map(|d| dirs.get(d).copied().filter(|&other| other != unit))
        };
        let mut joins: HashMap<usize, usize> = HashMap::new();
        for (i, unit) in unit_of.iter().enumerate() {
            if *unit == Some(i) {
                let mut top = i;
                // Each step goes to a shallower directory or an earlier module: it ends.
                for _ in 0..nodes.len() {
                    match host(top) {
                        Some(other) => top = other,
                        None => break,
                    }
                }
                if top != i {
                    joins.insert(i, top);
                }
            }
        }
        for unit in unit_of.iter_mut().flatten() {
            if let Some(&host) = joins.get(unit) {
                *unit = host;
            }
        }
        let units = (0..nodes.len())
            .filter(|&i| unit_of[i] == Some(i))
            .collect();
        Selection { unit_of, units }
    }
}

/// Every path some unit owns; the first claim on a path wins.
#[derive(Default)]
struct Claims {
    list: Vec<(Claim, usize)>,
    by_path: HashMap<String, (bool, usize)>,
}

impl Claims {
    fn add(&mut self, claim: &Claim, unit: usize) {
        if !self.by_path.contains_key(&claim.path) {
            self.by_path.insert(claim.path.clone(), (claim.dir, unit));
            self.list.push((claim.clone(), unit));
        }
    }

    /// The unit owning `path`: the one with the deepest claim on it or on a directory above.
    fn owner(&self, path: &str) -> Option<usize> {
        if let Some(&(_, unit)) = self.by_path.get(path) {
            return Some(unit);
        }
        ancestors(path)
            .rev()
            .find_map(|d| match self.by_path.get(d) {
                Some(&(true, unit)) => Some(unit),
                _ => None,
            })
    }

    /// The `owns` globs of `unit`: its claims, then the deeper claims of the other `kept`
    /// units it must leave out.
    fn globs(&self, unit: usize, kept: &[usize]) -> Vec<String> {
        let glob = |c: &Claim| format!("/{}{}", escape(&c.path), if c.dir { "/" } else { "" });
        let mine: Vec<&Claim> = self
            .list
            .iter()
            .filter(|(_, u)| *u == unit)
            .map(|(c, _)| c)
            .collect();
        let mut owns: Vec<String> = mine.iter().map(|c| glob(c)).collect();
        let mut holes: Vec<String> = self
            .list
            .iter()
            .filter(|(c, u)| {
                *u != unit
                    && kept.contains(u)
                    && mine.iter().any(|m| m.dir && is_inside(&c.path, &m.path))
            })
            .map(|(c, _)| format!("!{}", glob(c)))
            .collect();
        holes.sort();
        owns.extend(holes);
        owns
    }
}

/// The tests no unit took: those that name no module, and those named after selected
/// modules in different units (with those modules).
struct Unpaired<'a> {
    orphans: Vec<&'a Test>,
    shared: Vec<(&'a Test, Vec<usize>)>,
}

/// Gives each test not already inside a unit's directory to the unit of the module it
/// names; returns the tests it could not give to any.
fn assign_tests<'a>(found: &'a Found, selection: &Selection, claims: &mut Claims) -> Unpaired<'a> {
    let index = NameIndex::new(&found.nodes);
    let mut unpaired = Unpaired {
        orphans: Vec::new(),
        shared: Vec::new(),
    };
    // A test directory that names a module takes its files along; otherwise each file
    // is looked at on its own.
    let (dirs, files): (Vec<&Test>, Vec<&Test>) = found.tests.iter().partition(|t| t.dir);
    for test in dirs.into_iter().chain(files) {
        if claims.owner(&test.path).is_some() {
            continue;
        }
        match index.target(test, &found.nodes, &selection.unit_of) {
            Pairing::Unit(unit) => {
                let claim = Claim {
                    path: test.path.clone(),
                    dir: test.dir,
                };
                claims.add(&claim, unit);
            }
            Pairing::Unselected => {}
            Pairing::Shared(modules) if !test.dir => unpaired.shared.push((test, modules)),
            Pairing::Nothing if !test.dir => unpaired.orphans.push(test),
            Pairing::Shared(_) | Pairing::Nothing => {}
        }
    }
    unpaired
}

/// Where a test's name sends it.
enum Pairing {
    /// To the unit holding the module it names.
    Unit(usize),
    /// Nowhere: the module it names is in no selected unit.
    Unselected,
    /// Nowhere: selected modules in different units share its name, equally near it.
    Shared(Vec<usize>),
    /// Nowhere: it names no module.
    Nothing,
}

/// Modules by language and name, for finding the one a test names.
struct NameIndex<'a> {
    by_name: HashMap<(Lang, &'a str), Vec<usize>>,
}

impl<'a> NameIndex<'a> {
    fn new(nodes: &'a [Node]) -> NameIndex<'a> {
        let mut by_name: HashMap<(Lang, &str), Vec<usize>> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if let (false, Some(name)) = (node.root_file, node.segments.last()) {
                by_name.entry((node.lang, name)).or_default().push(i);
            }
        }
        NameIndex { by_name }
    }

    fn named<'s>(&'s self, test: &Test, name: &'s str) -> &'s [usize] {
        self.by_name
            .get(&(test.lang, name))
            .map_or(&[], Vec::as_slice)
    }

    /// The unit of the module `test` tests: one of any of its names beside it; else, for
    /// its first name with modules in its project, the shallowest selected one among the
    /// nearest (those under the test's home if any are, else all).
    fn target(&self, test: &Test, nodes: &[Node], unit_of: &[Option<usize>]) -> Pairing {
        let unit = |i: usize| unit_of[i].map_or(Pairing::Unselected, Pairing::Unit);
        if let Some(beside) = &test.beside {
            let near = test.names.iter().find_map(|name| {
                self.named(test, name)
                    .iter()
                    .filter(|&&i| parent(&nodes[i].path) == beside)
                    .min_by_key(|&&i| nodes[i].dir)
            });
            if let Some(&i) = near {
                return unit(i);
            }
        }
        for name in &test.names {
            let mut ours: Vec<usize> = self
                .named(test, name)
                .iter()
                .copied()
                .filter(|&i| nodes[i].project == test.project)
                .collect();
            if ours.is_empty() {
                continue;
            }
            let home = |i: &usize| {
                let path = &nodes[*i].path;
                *path == test.home || is_inside(path, &test.home)
            };
            if ours.iter().any(home) {
                ours.retain(home);
            }
            ours.retain(|&i| unit_of[i].is_some());
            let Some(depth) = ours.iter().map(|&i| nodes[i].segments.len()).min() else {
                return Pairing::Unselected;
            };
            ours.retain(|&i| nodes[i].segments.len() == depth);
            let units: BTreeSet<usize> = ours.iter().filter_map(|&i| unit_of[i]).collect();
            return match units.into_iter().collect::<Vec<_>>().as_slice() {
                [one] => Pairing::Unit(*one),
                _ => {
                    ours.sort_by(|&a, &b| nodes[a].path.cmp(&nodes[b].path));
                    Pairing::Shared(ours)
                }
            };
        }
        Pairing::Nothing
    }
}
