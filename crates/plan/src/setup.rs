//! The plan's `[setup]` table: what a project needs besides its tracked files. A task's view
//! and a check's checkout hold the tracked files of the base; the dependencies a build or a
//! test suite reads (`node_modules/`, `.venv/`) are ignored by git and so missing there.
//! `include` names such ignored paths of the user's checkout, shared read-only; `run` names
//! commands that install them once per base, before any task; `key` the tracked files
//! whose change makes that install stale. This module reads and checks the table, and
//! says what a plan without one is likely missing.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{AgentConfig, ResolvedPlan, DEFAULT_TIMEOUT};
use plait_core::git::TreeFile;
use plait_core::globs::{within, Globs};
use plait_sandbox::sandbox::Network;

/// The `[setup]` table as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupFile {
    /// Ignored paths of the user's checkout, relative to its root, shared read-only into
    /// every view and check checkout (`"node_modules/"`, `".venv/"`, `".env"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// Shell commands run once per base, in the base layer, before any task
    /// (`"npm ci --offline"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run: Vec<String>,
    /// Gitignore-style globs of tracked files: the installed result is reused while they
    /// are unchanged (`"package-lock.json"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<String>,
    /// What the `run` commands reach over the network: `"on"` (the default) or `"off"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// How long one `run` command may run, in seconds (default: the `[checks]` timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
}

impl SetupFile {
    /// Whether the table says nothing (and is left out of a written plan).
    pub fn is_empty(&self) -> bool {
        self.include.is_empty()
            && self.run.is_empty()
            && self.key.is_empty()
            && self.network.is_none()
            && self.timeout_s.is_none()
    }
}

/// The `[setup]` table, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupSettings {
    /// Paths relative to the checkout's root, without `./` or a trailing `/`.
    pub include: Vec<String>,
    /// Commands run in the environment once its files are in place.
    pub run: Vec<String>,
    /// Globs of tracked files, as written.
    pub key: Vec<String>,
    /// What the `run` commands may reach over the network.
    pub network: Network,
    /// How long one `run` command may run.
    pub timeout: Duration,
}

impl Default for SetupSettings {
    fn default() -> SetupSettings {
        SetupSettings {
            include: Vec::new(),
            run: Vec::new(),
            key: Vec::new(),
            network: Network::On,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl SetupSettings {
    /// Whether there is nothing to share or install: no `include` and no `run`.
    pub fn is_empty(&self) -> bool {
        self.include.is_empty() && self.run.is_empty()
    }

    /// The setup a plan already checked asks for (a run's kept plan), read without the
    /// repository: entries that would not pass the checks are left out, and the timeout is
    /// plait's default unless the table sets one.
    pub fn written(file: &SetupFile) -> SetupSettings {
        SetupSettings {
            include: file
                .include
                .iter()
                .filter_map(|p| normalize(p).ok())
                .collect(),
            run: file.run.clone(),
            key: file.key.clone(),
            network: file.network.unwrap_or(Network::On),
            timeout: file
                .timeout_s
                .filter(|&s| s > 0)
                .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
        }
    }
}

/// The `[setup]` table resolved against the base's tracked `files` (sorted by path):
/// each problem, naming the key and the value and what to do, goes to `problems`.
/// `check_timeout` is the `[checks]` timeout, the default of `timeout_s`; `path` is the
/// `PATH` the run commands' programs are looked up on.
pub(super) fn resolve_setup(
    file: &SetupFile,
    files: &[TreeFile],
    check_timeout: Duration,
    path: Option<&str>,
    problems: &mut Vec<String>,
) -> SetupSettings {
    let mut include = Vec::with_capacity(file.include.len());
    for raw in &file.include {
        match normalize(raw) {
            Err(why) => problems.push(format!("[setup] include: {why}")),
            Ok(p) => match tracked_under(files, &p) {
                Some(f) if f == p => problems.push(format!(
                    "[setup] include: `{raw}` is tracked at the base, so every view has it \
                     already; include is for ignored or untracked paths (node_modules/, .venv/): \
                     remove it"
                )),
                Some(f) => problems.push(format!(
                    "[setup] include: `{raw}` holds tracked files (such as `{f}`), which every \
                     view has already; include is for ignored or untracked paths \
                     (node_modules/, .venv/): name the ignored paths under it instead"
                )),
                None => include.push(p),
            },
        }
    }
    for cmd in &file.run {
        if cmd.trim().is_empty() {
            problems.push(
                "[setup] run: a command is empty; write the command or remove the entry"
                    .to_string(),
            );
        }
        for program in super::commands::named_programs(cmd) {
            if !plait_sandbox::shell::findable(program, path) {
                problems.push(format!(
                    "[setup] run: `{cmd}` runs `{program}`, which is not on PATH (a typo, or install it first)"
                ));
            }
        }
    }
    check_keys(&file.key, files, problems);
    let network = match file.network.unwrap_or(Network::On) {
        Network::Gateway => {
            problems.push(
                "[setup] network = \"gateway\" is for agent CLIs reaching their model; the \
                 setup's commands take \"on\" or \"off\""
                    .to_string(),
            );
            Network::On
        }
        network => network,
    };
    let timeout = match file.timeout_s {
        None => check_timeout,
        Some(0) => {
            problems.push(
                "[setup] timeout_s = 0: give how many seconds one run command may take, such as 1800"
                    .to_string(),
            );
            check_timeout
        }
        Some(s) => Duration::from_secs(s),
    };
    SetupSettings {
        include,
        run: file.run.clone(),
        key: file.key.clone(),
        network,
        timeout,
    }
}

/// Each `key` glob must compile and match a tracked file at the base.
fn check_keys(key: &[String], files: &[TreeFile], problems: &mut Vec<String>) {
    for pattern in key {
        let single = match Globs::new(std::slice::from_ref(pattern)) {
            Ok(g) => g,
            Err(e) => {
                problems.push(format!("[setup] key: {e}"));
                continue;
            }
        };
        if pattern.starts_with('!') {
            continue;
        }
        let scopes = single.scopes();
        if !within(files, &scopes).any(|i| files[i].is_blob() && single.matches(&files[i].path)) {
            problems.push(format!(
                "[setup] key: glob `{pattern}` matches no tracked file at the base; key names \
                 tracked files whose change calls for a new install, such as \"package-lock.json\""
            ));
        }
    }
}

/// Each `[setup] include` of the checkout at `workdir` with a symlink at its path or on
/// the way to it: refused, naming the link and where it leads (views share only what is in
/// the checkout itself; a link could hand them the home).
pub(super) fn check_include_links(workdir: &Path, include: &[String], problems: &mut Vec<String>) {
    for path in include {
        if let Some(link) = first_link(workdir, path) {
            problems.push(format!(
                "[setup] include: {}",
                link_words(workdir, path, &link)
            ));
        }
    }
}

/// Why the include `path` of the checkout at `workdir` could not be opened beneath it with
/// no link followed (`error`): the link on its way, named, when there is one.
pub fn include_link(workdir: &Path, path: &str, error: &std::io::Error) -> String {
    match first_link(workdir, path) {
        Some(link) => link_words(workdir, path, &link),
        None => format!("{}: {error}", workdir.join(path).display()),
    }
}

/// The first symlink at `path` of the checkout at `workdir` or on the way to it, relative
/// to the checkout's root.
fn first_link(workdir: &Path, path: &str) -> Option<String> {
    let mut rel = std::path::PathBuf::new();
    for part in path.split('/') {
        rel.push(part);
        match workdir.join(&rel).symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Some(rel.to_string_lossy().into_owned())
            }
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// The words for the include `path` refused for the symlink `link` (relative to the
/// checkout at `workdir`): where it leads, and what to do.
fn link_words(workdir: &Path, path: &str, link: &str) -> String {
    let at = workdir.join(link);
    let target = std::fs::read_link(&at)
        .map(|t| t.display().to_string())
        .unwrap_or_else(|e| format!("(unreadable: {e})"));
    let root = workdir
        .canonicalize()
        .unwrap_or_else(|_| workdir.to_path_buf());
    let resolved = at.canonicalize().ok();
    let inside = resolved
        .as_deref()
        .and_then(|r| r.strip_prefix(&root).ok())
        .filter(|r| !r.as_os_str().is_empty());
    let whence =
        match inside {
            Some(inside) => {
                format!(
            "inside your checkout; views share only what is at the path named, never through \
             a link: name `{}` instead",
            inside.join(path.strip_prefix(link).unwrap_or("").trim_start_matches('/'))
                .display()
        )
            }
            None => {
                let real = match resolved {
                    Some(r) if r != Path::new(&target) => format!(" ({})", r.display()),
                    Some(_) => String::new(),
                    None => " (nothing is there)".to_string(),
                };
                format!(
                    "which leads outside your checkout{real}; views share only what is in the \
                 checkout itself: install it in the checkout, or remove it from include"
                )
            }
        };
    if link == path {
        format!("`{path}` is a symlink to `{target}`, {whence}")
    } else {
        format!("`{path}` lies under `{link}`, a symlink to `{target}`, {whence}")
    }
}

/// An include entry as a path relative to the checkout's root: no `./`, no trailing `/`;
/// why it cannot be one otherwise.
fn normalize(raw: &str) -> Result<String, String> {
    if raw.starts_with('/') {
        return Err(format!(
            "`{raw}` is absolute; name a path of the checkout relative to its root, such as \"node_modules/\""
        ));
    }
    let parts: Vec<&str> = raw
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.contains(&"..") {
        return Err(format!(
            "`{raw}` climbs out with `..`; name a path inside the checkout, relative to its root"
        ));
    }
    match parts.first() {
        None => Err(format!(
            "`{raw}` names no path; name an ignored path of the checkout, such as \"node_modules/\""
        )),
        Some(&".git") => Err(format!(
            "`{raw}` is git's own directory, which plait never shares; remove it"
        )),
        Some(_) => Ok(parts.join("/")),
    }
}

/// The tracked file `path` is, or the first one under the directory `path`; `None` when
/// the base tracks nothing there. `files` are sorted by path bytes.
fn tracked_under<'a>(files: &'a [TreeFile], path: &str) -> Option<&'a str> {
    let exact = files.partition_point(|f| f.path.as_str() < path);
    if files.get(exact).is_some_and(|f| f.path == path) {
        return Some(&files[exact].path);
    }
    let dir = format!("{path}/");
    let first = files.partition_point(|f| f.path.as_bytes() < dir.as_bytes());
    files
        .get(first)
        .filter(|f| f.path.starts_with(&dir))
        .map(|f| f.path.as_str())
}

impl ResolvedPlan {
    /// What the user should hear about the setup before a run, against their checkout at
    /// `workdir`: included paths that are not there (when no `run` may make them), and,
    /// for a plan without a setup whose agents or checks run commands, the dependency
    /// directories its views will lack ([`missing_setup_hint`]).
    pub fn setup_warnings(&self, workdir: &Path) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.setup.run.is_empty() {
            let missing: Vec<&str> = self
                .setup
                .include
                .iter()
                .filter(|p| workdir.join(p).symlink_metadata().is_err())
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                warnings.push(format!(
                    "[setup] include: {} {} not exist in your checkout, and no [setup] run \
                     makes {}: the views will not have {}",
                    quoted_list(&missing),
                    if missing.len() == 1 { "does" } else { "do" },
                    if missing.len() == 1 { "it" } else { "them" },
                    if missing.len() == 1 { "it" } else { "them" },
                ));
            }
        }
        if self.setup.is_empty() && self.runs_commands() {
            warnings.extend(missing_setup_hint(workdir, &self.setup));
        }
        if let (false, Err(why)) = (
            self.setup.is_empty(),
            plait_sandbox::sandbox::view_support(),
        ) {
            warnings.push(format!(
                "[setup] is made into a base layer that views and checks lie over, which needs \
                 user and mount namespaces; this system allows none ({why}), so this run's \
                 agents and checks work without it, and a path naming your checkout (an \
                 editable install, a venv's scripts) reaches your working copy, not the tree \
                 being judged"
            ));
        }
        warnings
    }

    /// Whether some process of the run runs the project's commands: a check, or an agent
    /// that runs commands (all but a model agent without a `run` tool).
    fn runs_commands(&self) -> bool {
        !self.checks.task.is_empty()
            || !self.checks.merged.is_empty()
            || self.tasks.iter().any(|t| !t.own_checks.is_empty())
            || self.tasks.iter().any(|t| match &t.agent {
                AgentConfig::Model { run, .. } => !matches!(**run, super::tools::RunCommands::Off),
                _ => true,
            })
    }
}

/// `a`, `a` and `b`, `a`, `b` and `c`, each in backquotes.
fn quoted_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The directories a project's dependencies are installed in, which git is told to ignore,
/// each with the tracked lockfiles that say what goes in it and the command that installs
/// it from each (first match wins). `target/` is a build's output, not a dependency.
const DEPENDENCY_DIRS: &[(&str, &[(&str, &str)])] = &[
    (
        "node_modules",
        &[
            ("package-lock.json", "npm ci --offline"),
            ("yarn.lock", "yarn install --frozen-lockfile --offline"),
            ("pnpm-lock.yaml", "pnpm install --frozen-lockfile --offline"),
        ],
    ),
    (
        ".venv",
        &[
            ("uv.lock", "uv sync --frozen"),
            ("poetry.lock", "poetry install --no-root"),
            (
                "requirements.txt",
                "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt",
            ),
        ],
    ),
    (
        "venv",
        &[(
            "requirements.txt",
            "python3 -m venv venv && venv/bin/pip install -r requirements.txt",
        )],
    ),
    ("vendor", &[("Gemfile.lock", "bundle install --local")]),
    (
        "vendor/bundle",
        &[("Gemfile.lock", "bundle install --local")],
    ),
    (".tox", &[]),
];

/// One dependency directory found in a checkout, ignored by git.
struct FoundDir {
    dir: &'static str,
    /// The command that installs it, when its lockfile is tracked.
    install: Option<&'static str>,
    /// Whether its lockfile is tracked.
    locked: bool,
}

/// The dependency directories of [`DEPENDENCY_DIRS`] at the root of the checkout at
/// `workdir` (of `repo`) that git ignores, each with its install command when `tracked`
/// says the base tracks its lockfile. A directory inside one found already is not named
/// again.
fn ignored_dependency_dirs(
    repo: &git2::Repository,
    workdir: &Path,
    tracked: &dyn Fn(&str) -> bool,
) -> Vec<FoundDir> {
    let mut found: Vec<FoundDir> = Vec::new();
    for &(dir, locks) in DEPENDENCY_DIRS {
        if found
            .iter()
            .any(|f| dir.starts_with(&format!("{}/", f.dir)))
            || !workdir.join(dir).is_dir()
            || !repo.status_should_ignore(Path::new(dir)).unwrap_or(false)
        {
            continue;
        }
        let lock = locks.iter().find(|(lock, _)| tracked(lock));
        found.push(FoundDir {
            dir,
            install: lock.map(|(_, cmd)| *cmd),
            locked: lock.is_some(),
        });
    }
    found
}

/// What to tell a user whose tasks failed and whose plan's setup leaves out dependency
/// directories of their checkout at `workdir` (`node_modules/`, `.venv/`, `venv/`,
/// `vendor/bundle/`, `vendor/`, `.tox/`, each only when git ignores it): those directories,
/// the `include` that shares them and a `run` that installs them when their lockfile is
/// tracked. `None` when there are none, when `include` lists them (or a path above or
/// inside them), or when `setup` has `run` commands (they may install them).
pub fn missing_setup_hint(workdir: &Path, setup: &SetupSettings) -> Option<String> {
    if !setup.run.is_empty() {
        return None;
    }
    let repo = git2::Repository::open(workdir).ok()?;
    let head = repo.head().ok().and_then(|h| h.peel_to_tree().ok());
    let tracked = |path: &str| {
        head.as_ref()
            .is_some_and(|t| t.get_path(Path::new(path)).is_ok())
    };
    let covers = |dir: &str| {
        setup.include.iter().any(|i| {
            i == dir || dir.starts_with(&format!("{i}/")) || i.starts_with(&format!("{dir}/"))
        })
    };
    let found: Vec<FoundDir> = ignored_dependency_dirs(&repo, workdir, &tracked)
        .into_iter()
        .filter(|f| !covers(f.dir))
        .collect();
    if found.is_empty() {
        return None;
    }
    let dirs: Vec<String> = found.iter().map(|f| format!("{}/", f.dir)).collect();
    let names: Vec<&str> = dirs.iter().map(String::as_str).collect();
    let listed = plain_list(&names);
    let include: Vec<String> = dirs.iter().map(|d| format!("\"{d}\"")).collect();
    let mut installs: Vec<String> = Vec::new();
    for cmd in found.iter().filter_map(|f| f.install) {
        let quoted = format!("\"{cmd}\"");
        if !installs.contains(&quoted) {
            installs.push(quoted);
        }
    }
    let them = if found.len() == 1 { "it" } else { "them" };
    let example = if installs.is_empty() {
        String::new()
    } else {
        format!(" (e.g. run = [{}])", installs.join(", "))
    };
    Some(format!(
        "your checkout has {listed} (ignored, so not in the tasks' views); add [setup] \
         include = [{}] or a [setup] run that installs {them}{example}",
        include.join(", ")
    ))
}

/// `a`, `a and b`, `a, b and c`.
fn plain_list(items: &[&str]) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The `[setup]` a written plan (a split's, the manager's) should hold for the checkout at
/// `workdir` whose base tracks `files` (sorted by path): the dependency directories there
/// that git ignores and whose lockfile is tracked (`node_modules/` beside a
/// `package-lock.json`), included. `None` when there are none.
pub fn suggested_setup(workdir: &Path, files: &[TreeFile]) -> Option<SetupFile> {
    let repo = git2::Repository::open(workdir).ok()?;
    let tracked = |path: &str| tracked_under(files, path) == Some(path);
    let include: Vec<String> = ignored_dependency_dirs(&repo, workdir, &tracked)
        .into_iter()
        .filter(|f| f.locked && tracked_under(files, f.dir).is_none())
        .map(|f| format!("{}/", f.dir))
        .collect();
    (!include.is_empty()).then(|| SetupFile {
        include,
        ..SetupFile::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(paths: &[&str]) -> Vec<TreeFile> {
        let mut files: Vec<TreeFile> = paths
            .iter()
            .map(|p| TreeFile {
                path: p.to_string(),
                mode: 0o100644,
                oid: git2::Oid::ZERO_SHA1,
            })
            .collect();
        files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        files
    }

    fn resolved(toml: &str, files: &[TreeFile]) -> (SetupSettings, Vec<String>) {
        let file: SetupFile = toml::from_str(toml).unwrap();
        let mut problems = Vec::new();
        let settings = resolve_setup(
            &file,
            files,
            Duration::from_secs(600),
            Some("/bin:/usr/bin"),
            &mut problems,
        );
        (settings, problems)
    }

    /// A checkout with `tracked` committed, `.gitignore` ignoring `ignored`, and the
    /// directories `dirs` made (untracked).
    fn checkout(tracked: &[&str], ignored: &str, dirs: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        std::fs::write(dir.path().join(".gitignore"), ignored).unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new(".gitignore")).unwrap();
        for path in tracked {
            std::fs::write(dir.path().join(path), "x\n").unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let who = git2::Signature::new("t", "t@example.com", &git2::Time::new(0, 0)).unwrap();
        repo.commit(Some("HEAD"), &who, &who, "base", &tree, &[])
            .unwrap();
        for d in dirs {
            std::fs::create_dir_all(dir.path().join(d).join("pkg")).unwrap();
            std::fs::write(dir.path().join(d).join("pkg/file"), "x\n").unwrap();
        }
        dir
    }

    #[test]
    fn includes_are_made_relative_and_plain() {
        let (settings, problems) = resolved(
            "include = [\"./node_modules/\", \".venv\", \"a//b/./c/\", \".env\"]\n",
            &tree(&["package.json"]),
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(settings.include, ["node_modules", ".venv", "a/b/c", ".env"]);
        assert_eq!(settings.network, Network::On);
        assert_eq!(settings.timeout, Duration::from_secs(600));
        assert!(!settings.is_empty());
        assert!(SetupSettings::default().is_empty());
        assert_eq!(SetupSettings::default().network, Network::On);
    }

    #[test]
    fn bad_includes_are_refused_naming_the_key_and_the_value() {
        let files = tree(&["src/a.js", "package.json"]);
        let (_, problems) = resolved(
            "include = [\"/abs\", \"../up\", \"a/../b\", \"\", \"./\", \".git\", \".git/hooks\", \
             \"src\", \"package.json\", \"node_modules/\"]\n",
            &files,
        );
        assert_eq!(problems.len(), 9, "{problems:#?}");
        assert!(problems.iter().all(|p| p.starts_with("[setup] include: ")));
        assert!(
            problems[0].contains("`/abs` is absolute"),
            "{}",
            problems[0]
        );
        assert!(problems[1].contains("`../up`") && problems[1].contains(".."));
        assert!(problems[3].contains("names no path"), "{}", problems[3]);
        assert!(problems[5].contains("git's own"), "{}", problems[5]);
        assert!(problems[6].contains("`.git/hooks`"), "{}", problems[6]);
        assert!(
            problems[7].contains("`src`") && problems[7].contains("src/a.js"),
            "{}",
            problems[7]
        );
        assert!(
            problems[8].contains("`package.json` is tracked"),
            "{}",
            problems[8]
        );
    }

    #[test]
    fn keys_must_match_tracked_files_and_runs_must_say_something() {
        let files = tree(&["package-lock.json", "web/yarn.lock"]);
        let (settings, problems) = resolved(
            "run = [\"true\"]\nkey = [\"package-lock.json\", \"yarn.lock\", \"!x\"]\nnetwork = \"off\"\ntimeout_s = 90\n",
            &files,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(settings.key, ["package-lock.json", "yarn.lock", "!x"]);
        assert_eq!(settings.network, Network::Off);
        assert_eq!(settings.timeout, Duration::from_secs(90));
        let (_, problems) = resolved(
            "run = [\"  \", \"no-such-program-here --x\"]\nkey = [\"Cargo.lock\"]\nnetwork = \"gateway\"\ntimeout_s = 0\n",
            &files,
        );
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(problems[0].starts_with("[setup] run: a command is empty"));
        assert!(
            problems[1].contains("`no-such-program-here`"),
            "{}",
            problems[1]
        );
        assert!(
            problems[2].starts_with("[setup] key: glob `Cargo.lock` matches no tracked file"),
            "{}",
            problems[2]
        );
        assert!(problems[3].contains("gateway"));
        assert!(problems[4].contains("timeout_s"));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = toml::from_str::<SetupFile>("includes = []\n").unwrap_err();
        assert!(
            err.to_string().contains("unknown field `includes`"),
            "{err}"
        );
        assert!(SetupFile::default().is_empty());
    }

    #[test]
    fn the_hint_names_ignored_dependency_dirs_and_how_to_install_them() {
        let dir = checkout(
            &["package-lock.json", "uv.lock"],
            "node_modules/\n.venv/\ntarget/\nvendor/\n.tox/\n",
            &["node_modules", ".venv", "target"],
        );
        let hint = missing_setup_hint(dir.path(), &SetupSettings::default()).unwrap();
        assert_eq!(
            hint,
            "your checkout has node_modules/ and .venv/ (ignored, so not in the tasks' views); \
             add [setup] include = [\"node_modules/\", \".venv/\"] or a [setup] run that \
             installs them (e.g. run = [\"npm ci --offline\", \"uv sync --frozen\"])"
        );
        // Listed in include: not named again.
        let partly = SetupSettings {
            include: vec!["node_modules".to_string()],
            ..SetupSettings::default()
        };
        let hint = missing_setup_hint(dir.path(), &partly).unwrap();
        assert!(
            hint.starts_with("your checkout has .venv/ (ignored")
                && hint.contains("include = [\".venv/\"]")
                && hint.contains("installs it (e.g. run = [\"uv sync --frozen\"])"),
            "{hint}"
        );
        let both = SetupSettings {
            include: vec!["node_modules".to_string(), ".venv".to_string()],
            ..SetupSettings::default()
        };
        assert_eq!(missing_setup_hint(dir.path(), &both), None);
        // A run may install them.
        let run = SetupSettings {
            run: vec!["make deps".to_string()],
            ..SetupSettings::default()
        };
        assert_eq!(missing_setup_hint(dir.path(), &run), None);
    }

    #[test]
    fn the_hint_leaves_out_what_git_does_not_ignore_and_offers_no_command_without_a_lockfile() {
        // vendor/ is not ignored (Go's vendoring, say); .tox/ is, with no lockfile.
        let dir = checkout(&["go.mod"], ".tox/\n", &["vendor", ".tox"]);
        let hint = missing_setup_hint(dir.path(), &SetupSettings::default()).unwrap();
        assert_eq!(
            hint,
            "your checkout has .tox/ (ignored, so not in the tasks' views); add [setup] \
             include = [\".tox/\"] or a [setup] run that installs it"
        );
        let clean = checkout(&["package-lock.json"], "node_modules/\n", &[]);
        assert_eq!(
            missing_setup_hint(clean.path(), &SetupSettings::default()),
            None
        );
    }

    #[test]
    fn an_ignored_vendor_is_named_once_with_the_bundle_inside() {
        let dir = checkout(
            &["Gemfile.lock", "requirements.txt"],
            "/vendor/\nvenv/\n",
            &["vendor/bundle", "venv"],
        );
        let hint = missing_setup_hint(dir.path(), &SetupSettings::default()).unwrap();
        assert!(
            hint.starts_with("your checkout has venv/ and vendor/ (ignored"),
            "{hint}"
        );
        assert!(
            hint.contains("python3 -m venv venv && venv/bin/pip install -r requirements.txt")
                && hint.contains("bundle install --local"),
            "{hint}"
        );
    }

    #[test]
    fn a_written_plan_includes_installed_dirs_whose_lockfile_is_tracked() {
        let dir = checkout(
            &["package-lock.json"],
            "node_modules/\n.venv/\n",
            &["node_modules", ".venv"],
        );
        let files = tree(&[".gitignore", "package-lock.json"]);
        let setup = suggested_setup(dir.path(), &files).unwrap();
        assert_eq!(setup.include, ["node_modules/"]);
        assert!(setup.run.is_empty() && setup.key.is_empty());
        let none = checkout(&["package.json"], "node_modules/\n", &["node_modules"]);
        let files = tree(&[".gitignore", "package.json"]);
        assert_eq!(suggested_setup(none.path(), &files), None);
    }

    #[test]
    fn an_include_through_a_link_is_refused_naming_it_and_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("real/pkg")).unwrap();
        std::fs::create_dir_all(work.join("plain")).unwrap();
        std::os::unix::fs::symlink("real", work.join("inside")).unwrap();
        std::os::unix::fs::symlink("/nowhere/at/all", work.join("dangling")).unwrap();
        let include: Vec<String> = ["inside/pkg", "dangling", "plain", "missing/x"]
            .map(String::from)
            .to_vec();
        let mut problems = Vec::new();
        check_include_links(&work, &include, &mut problems);
        assert_eq!(
            problems,
            [
                "[setup] include: `inside/pkg` lies under `inside`, a symlink to `real`, inside \
                 your checkout; views share only what is at the path named, never through a \
                 link: name `real/pkg` instead",
                "[setup] include: `dangling` is a symlink to `/nowhere/at/all`, which leads \
                 outside your checkout (nothing is there); views share only what is in the \
                 checkout itself: install it in the checkout, or remove it from include",
            ]
        );
    }
}
