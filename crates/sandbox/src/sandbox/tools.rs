//! What the plan's own programs need to read. A plan names its tools by path as often as by
//! name: a venv's `ruff` under `/tmp` or a CI cache, `…/venv/bin/python -m pytest`, a
//! `node_modules/.bin` script, aider's `bin`. Each is resolved when the plan is (the first
//! word of each simple command in a command line and every absolute path in it that is a
//! program or a script, through symlinks and `#!` interpreters, `sh -c` scripts within) and
//! the package it belongs to is made readable: a venv's root (it holds `pyvenv.cfg`), a
//! conda environment (`conda-meta`), a `node_modules` tree, a toolchain's prefix (a `bin`
//! directory's parent; in the home, the `bin` directory). A script among other files (a
//! project's `run.sh`) is readable alone. So are `$VIRTUAL_ENV` and `$CONDA_PREFIX`.
//!
//! Nothing else is widened: no data a command names, never the home or a directory holding
//! it, never a hidden entry of the home that is not a toolchain's ([`reads::HOME_TOOLS`]:
//! `~/.ssh`, `~/.aws` and the like stay closed even when a command names a file in them),
//! never `/tmp` itself, and never the checkout or its git directory (a program in the
//! checkout is read through the task's own tree; its links and interpreter outside are
//! followed). Where a package would be too wide, the program's own file alone is readable.

use std::path::{Component, Path, PathBuf};

use super::reads;

/// Words of a shell line that start a command rather than name one.
const SEPARATORS: &[&str] = &[
    "&&", "||", "|", "|&", ";", "&", "(", ")", "{", "}", "!", "then", "do", "else", "elif", "if",
    "while", "until", "time",
];

/// Commands that run the command after them (their options and numbers skipped).
const WRAPPERS: &[&str] = &[
    "exec", "command", "nohup", "env", "xargs", "nice", "timeout", "stdbuf", "setsid", "ionice",
    "chrt", "taskset", "builtin",
];

/// The shells whose `-c` script is read as command lines too.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "ash"];

/// What the machine's environment tells the resolution: `PATH`, `HOME`, `VIRTUAL_ENV`,
/// `CONDA_PREFIX`, `TMPDIR`, as the processes will inherit them.
pub struct ToolEnv {
    /// The directories of `PATH`, in order.
    pub path: Vec<PathBuf>,
    /// The home, when absolute.
    pub home: Option<PathBuf>,
    /// `$VIRTUAL_ENV` and `$CONDA_PREFIX`, those set.
    pub prefixes: Vec<PathBuf>,
    /// The temporary directory's root (`$TMPDIR`, else `/tmp`).
    pub temp: PathBuf,
}

impl ToolEnv {
    /// The environment as `var` gives it.
    pub fn from(var: &dyn Fn(&str) -> Option<String>) -> ToolEnv {
        let absolute = |v: Option<String>| v.map(PathBuf::from).filter(|p| p.is_absolute());
        ToolEnv {
            path: var("PATH")
                .map(|p| std::env::split_paths(&p).collect())
                .unwrap_or_default(),
            home: absolute(var("HOME")),
            prefixes: ["VIRTUAL_ENV", "CONDA_PREFIX"]
                .iter()
                .filter_map(|v| absolute(var(v)))
                .collect(),
            temp: absolute(var("TMPDIR")).unwrap_or_else(|| PathBuf::from("/tmp")),
        }
    }
}

/// What the programs of `commands` (shell lines) and `programs` (argv words: a `{ cli }`
/// program, an agent's `bin`) need to read, beyond the machine's paths: each program's
/// package (see the module's note), each once. `checkout`: the repository's working
/// directory, whose relative program paths (`.venv/bin/pytest`) are followed but never
/// made readable themselves; `git_dir`: never readable this way either.
pub fn needed_by<'a>(
    commands: impl IntoIterator<Item = &'a str>,
    programs: impl IntoIterator<Item = &'a str>,
    checkout: Option<&Path>,
    git_dir: Option<&Path>,
    env: &ToolEnv,
) -> Vec<PathBuf> {
    let mut words: Vec<Word> = Vec::new();
    for line in commands {
        line_words(line, &mut words, 0);
    }
    words.extend(programs.into_iter().map(|p| Word::Program(p.to_string())));
    let judge = Judge {
        env,
        checkout,
        git_dir,
    };
    let mut found: Vec<PathBuf> = env
        .prefixes
        .iter()
        .filter(|p| p.is_dir() && judge.allowed(p) && !judge.too_wide(p))
        .cloned()
        .collect();
    let mut seen: Vec<PathBuf> = Vec::new();
    for word in &words {
        let start = match word {
            Word::Program(w) => judge.program(w).filter(|p| script(p)),
            Word::Path(w) => judge.expand(w).filter(|p| script(p)),
        };
        if let Some(start) = start {
            judge.follow(start, &mut seen, &mut found);
        }
    }
    found.sort();
    found.dedup();
    let all = found.clone();
    found.retain(|p| !all.iter().any(|o| o != p && p.starts_with(o)));
    found
}

/// A word of a command line that names something to read.
#[derive(Debug, PartialEq, Eq)]
enum Word {
    /// The program of a simple command, by name or path.
    Program(String),
    /// An absolute path (or `~/…`) among its arguments.
    Path(String),
}

/// The words of the shell line `line` that name programs and paths, added to `out`;
/// `depth` bounds `sh -c` within `sh -c`.
fn line_words(line: &str, out: &mut Vec<Word>, depth: u32) {
    let tokens =
        shlex::split(line).unwrap_or_else(|| line.split_whitespace().map(str::to_string).collect());
    let mut at_start = true;
    let mut wrapped = false;
    let mut shell = false;
    let mut iter = tokens.iter().peekable();
    while let Some(raw) = iter.next() {
        let mut token = raw.as_str();
        for opener in ["$(", "`", "(", "<(", ">("] {
            if let Some(rest) = token.strip_prefix(opener) {
                token = rest;
                at_start = true;
            }
        }
        let ends = token.ends_with(';') || token.ends_with(')') || token.ends_with('`');
        let token = token.trim_end_matches([';', ')', '`']);
        if SEPARATORS.contains(&token) {
            at_start = true;
            continue;
        }
        if shell && token == "-c" {
            if let (Some(script), true) = (iter.next(), depth < 3) {
                line_words(script, out, depth + 1);
            }
            shell = false;
            continue;
        }
        if at_start {
            let assignment = token.split_once('=').is_some_and(|(name, _)| is_name(name));
            let option = wrapped && (token.starts_with('-') || token.parse::<f64>().is_ok());
            if assignment || option {
                if let Some((_, value)) = token.split_once('=') {
                    path_word(value, out);
                }
            } else if !token.is_empty() {
                out.push(Word::Program(token.to_string()));
                let name = token.rsplit('/').next().unwrap_or(token);
                wrapped = WRAPPERS.contains(&name);
                shell = SHELLS.contains(&name);
                at_start = wrapped;
            }
        } else {
            path_word(token, out);
            if let Some((_, value)) = token.split_once('=') {
                path_word(value, out);
            }
        }
        if ends {
            at_start = true;
            wrapped = false;
        }
    }
}

/// `token` as a path to read, when it is one (absolute, or under the home by `~/`).
fn path_word(token: &str, out: &mut Vec<Word>) {
    if (token.starts_with('/') && token.len() > 1) || token.starts_with("~/") {
        out.push(Word::Path(token.to_string()));
    }
}

/// Whether `name` is a shell variable's name.
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// How a program's path is found and judged.
struct Judge<'a> {
    env: &'a ToolEnv,
    checkout: Option<&'a Path>,
    git_dir: Option<&'a Path>,
}

impl Judge<'_> {
    /// The file the program word `word` runs: a path as written (relative ones from the
    /// checkout), a name found on `PATH`.
    fn program(&self, word: &str) -> Option<PathBuf> {
        if word.contains('/') {
            let path = self
                .expand(word)
                .or_else(|| Some(self.checkout?.join(word)))?;
            return path.is_file().then_some(path);
        }
        self.env
            .path
            .iter()
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(word))
            .find(|p| executable(p))
    }

    /// `word` as an absolute path (`~/` from the home); `None` for a relative one.
    fn expand(&self, word: &str) -> Option<PathBuf> {
        match word.strip_prefix("~/") {
            Some(rest) => Some(self.env.home.as_ref()?.join(rest)),
            None => Some(PathBuf::from(word)).filter(|p| p.is_absolute()),
        }
        .map(|p| normal(&p))
    }

    /// Adds to `found` what `start` needs: the package of each link on its way, of its
    /// real file, and the same for its `#!` interpreter.
    fn follow(&self, start: PathBuf, seen: &mut Vec<PathBuf>, found: &mut Vec<PathBuf>) {
        let mut queue = vec![start];
        while let Some(mut path) = queue.pop() {
            for _ in 0..16 {
                if seen.contains(&path) || seen.len() > 4_096 {
                    break;
                }
                seen.push(path.clone());
                self.add_package(&path, found);
                let Ok(target) = std::fs::read_link(&path) else {
                    if let Some(interpreter) = self.interpreter(&path) {
                        queue.push(interpreter);
                    }
                    if let Some(base) = venv_base(&path) {
                        queue.push(base);
                    }
                    break;
                };
                let parent = path.parent().unwrap_or(Path::new("/"));
                path = normal(&parent.join(target));
            }
        }
    }

    /// The `#!` interpreter of the script `path` (through `env`, on `PATH`).
    fn interpreter(&self, path: &Path) -> Option<PathBuf> {
        use std::io::Read as _;
        let mut head = [0u8; 256];
        let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
        let line = head[..n].strip_prefix(b"#!")?;
        let line = line.split(|b| *b == b'\n').next()?;
        let line = String::from_utf8_lossy(line);
        let mut words = line.split_whitespace();
        let first = words.next()?;
        if first.rsplit('/').next() == Some("env") {
            let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
            return self.program(name);
        }
        Some(PathBuf::from(first)).filter(|p| p.is_absolute())
    }

    /// Adds the package of `path` to `found`, when it may be read at all: the package, or
    /// the file alone where the package would be too wide.
    fn add_package(&self, path: &Path, found: &mut Vec<PathBuf>) {
        if !self.allowed(path) || reads::machine().iter().any(|m| path.starts_with(m)) {
            return;
        }
        let package = package_of(path, self.env.home.as_deref());
        let chosen = match package {
            Some(p) if self.allowed(&p) && !self.too_wide(&p) => p,
            _ => path.to_path_buf(),
        };
        found.push(chosen);
    }

    /// Whether `path` may be made readable at all: not in the checkout or its git
    /// directory, not a hidden entry of the home other than a toolchain's.
    fn allowed(&self, path: &Path) -> bool {
        let inside = |root: Option<&Path>| root.is_some_and(|r| path.starts_with(r));
        if inside(self.checkout) || inside(self.git_dir) {
            return false;
        }
        let Some(home) = &self.env.home else {
            return true;
        };
        let Ok(rest) = path.strip_prefix(home) else {
            return true;
        };
        let hidden = rest
            .components()
            .next()
            .is_some_and(|c| c.as_os_str().to_string_lossy().starts_with('.'));
        let tool = reads::HOME_TOOLS
            .iter()
            .any(|tool| rest.starts_with(tool) || Path::new(tool).starts_with(rest));
        let secret = reads::HOME_SECRETS.iter().any(|s| rest.starts_with(s));
        !hidden || (tool && !secret)
    }

    /// Whether `dir` is too wide to open for a program: the root or a directory just
    /// beneath it, what holds the home or the checkout, a home's `.local`, `.config` or
    /// `.cache`, the temporary directory's root.
    fn too_wide(&self, dir: &Path) -> bool {
        let shallow = dir.components().count() < 3;
        let holds = |p: Option<&Path>| p.is_some_and(|p| p.starts_with(dir));
        if shallow || holds(self.checkout) || holds(self.git_dir) {
            return true;
        }
        let home = self.env.home.as_deref().is_some_and(|h| {
            h.starts_with(dir)
                || [".local", ".config", ".cache"]
                    .iter()
                    .any(|d| dir == h.join(d))
        });
        let temp = [
            self.env.temp.as_path(),
            Path::new("/tmp"),
            Path::new("/var/tmp"),
        ]
        .iter()
        .any(|t| t.starts_with(dir));
        home || temp
    }
}

/// The package the file `path` belongs to: the nearest venv (`pyvenv.cfg`) or conda
/// environment (`conda-meta/`) holding it, else the outermost `node_modules` holding it,
/// else, for a file in a `bin` directory, the toolchain's prefix (its parent; in the home,
/// the `bin` directory alone, as a project's `bin/` has its `.env` beside it). `None`: the
/// file alone (a script among a project's files).
fn package_of(path: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let dir = path.parent()?;
    let mut node_modules = None;
    for ancestor in dir.ancestors().take(12) {
        if home.is_some_and(|h| ancestor == h) || ancestor.parent().is_none() {
            break;
        }
        if ancestor.join("pyvenv.cfg").is_file() || ancestor.join("conda-meta").is_dir() {
            return Some(ancestor.to_path_buf());
        }
        if ancestor.file_name().is_some_and(|n| n == "node_modules") {
            node_modules = Some(ancestor.to_path_buf());
        }
    }
    if node_modules.is_some() {
        return node_modules;
    }
    let binary = dir
        .file_name()
        .is_some_and(|n| n == "bin" || n == ".bin" || n == "sbin");
    match home {
        _ if !binary => None,
        Some(home) if dir.starts_with(home) => Some(dir.to_path_buf()),
        _ => Some(reads::package(dir, home)),
    }
}

/// Whether the argument `path` is a program or a script to read (rather than data): a file
/// that may be run or starts with `#!`, or has a script's extension; never a hidden file
/// (`.env`, `.netrc`).
fn script(path: &Path) -> bool {
    const SCRIPTS: &[&str] = &[
        "py", "pyc", "js", "mjs", "cjs", "ts", "mts", "sh", "bash", "rb", "pl", "php", "lua",
        "jar", "r", "R", "tcl", "awk", "sed",
    ];
    let hidden = path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'));
    let extension = path
        .extension()
        .is_some_and(|e| SCRIPTS.iter().any(|s| e == *s));
    !hidden && path.is_file() && (extension || executable(path) || shebang(path))
}

/// Whether the file at `path` starts with `#!`.
fn shebang(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"#!")
}

/// Where a venv's `python` (the file `path`, in a venv's `bin`) comes from when it is a copy
/// rather than a link: `home` of its `pyvenv.cfg`, joined with the file's name.
fn venv_base(path: &Path) -> Option<PathBuf> {
    let bin = path.parent()?;
    let config = std::fs::read_to_string(bin.parent()?.join("pyvenv.cfg")).ok()?;
    let home = config.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })?;
    let name = path.file_name()?;
    Some(home.join(name)).filter(|p| p.is_absolute() && p.exists())
}

/// Whether `path` is a file this user may run.
fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `path` with `.` and `..` taken out by name (no link followed).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests;
