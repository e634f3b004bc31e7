//! What a confined process may read: an allow-list, so that a credential store nobody
//! thought of is closed too. Everything not listed here, and not one of the sandbox's own
//! places, is unreadable: the rest of the home (other projects' `.env` files, `~/.ssh`,
//! `~/.aws`, `~/.config/gh`, `~/.netrc`, `~/.docker`, `~/.kube`, …), other tasks' worktrees
//! and logs, other runs' transcripts, plait's own store and config files.
//!
//! Readable:
//! - the system's read-only trees ([`SYSTEM`]), `/etc` without its secrets ([`ETC_SECRETS`]),
//!   `/proc`, `/sys` and `/dev` as the kernel scopes them (another process's `environ` is
//!   out of reach under Landlock's ptrace scoping);
//! - the toolchains and package caches under the home ([`HOME_TOOLS`]), without the files in
//!   them that hold tokens ([`HOME_SECRETS`]);
//! - what the programs on `PATH` need: each directory of `PATH` outside those trees, the
//!   package it belongs to (a `bin/` directory's parent), and the packages its links lead to
//!   (a venv's `python`, `node_modules/.bin/claude`, pipx's and uv's tools);
//! - the paths the plan adds (`[sandbox] readable`) and plait's own (the repository's git
//!   directory by git's own entries, so never its `plait/` store, and its config as a copy
//!   without credentials; plait's own program).
//!
//! Where a tool must read its config file to start and that file may hold a token (git's
//! `~/.gitconfig`, which git refuses to go on without reading; npm's `~/.npmrc`), the process
//! gets a copy without the secrets in its private temporary directory, pointed to by the
//! tool's own variable (`GIT_CONFIG_GLOBAL`, `NPM_CONFIG_USERCONFIG`).

use plait_core::sync::Locked as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The system's trees every program needs, read-only for everyone.
const SYSTEM: &[&str] = &[
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/bin",
    "/sbin",
    "/opt",
    "/nix",
    "/snap",
    "/home/linuxbrew",
    "/gnu",
    "/proc",
    "/sys",
    "/dev",
    "/run/systemd/resolve",
    "/run/current-system",
    "/var/lib/dpkg",
    "/var/lib/rpm",
];

/// The entries of `/etc` that hold secrets (and so are left out).
const ETC_SECRETS: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "ssl/private",
    "pki/tls/private",
    "ssh",
    "krb5.keytab",
    "NetworkManager/system-connections",
    "wpa_supplicant",
    "security/opasswd",
    "docker/key.json",
    "rancher",
    "kubernetes",
    "netrc",
];

/// The toolchains, package managers' homes and package caches under the home: read by
/// builds and tests (a pyenv's Python, rustup's toolchains, npm's cache, a venv's links).
pub(crate) const HOME_TOOLS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".pyenv",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".npm",
    ".node-gyp",
    ".yarn",
    ".pnpm-store",
    ".cache/pip",
    ".cache/uv",
    ".cache/pypoetry",
    ".cache/pre-commit",
    ".cache/go-build",
    ".cache/yarn",
    ".cache/pnpm",
    ".cache/node-gyp",
    ".cache/ms-playwright",
    ".cache/puppeteer",
    ".cache/deno",
    ".cache/typescript",
    ".cache/ruff",
    ".cache/mypy",
    ".cache/black",
    ".cache/bazel",
    ".cache/sccache",
    ".cache/ccache",
    ".cache/cargo",
    ".cache/node",
    ".cache/electron",
    ".cache/Cypress",
    ".cache/coursier",
    ".cache/zig",
    ".cache/hatch",
    ".cache/pdm",
    ".cache/pipenv",
    ".cache/virtualenv",
    ".cache/matplotlib",
    ".cache/fontconfig",
    ".cache/huggingface",
    ".cache/torch",
    ".cache/bazelisk",
    ".cache/golangci-lint",
    ".cache/jedi",
    ".cache/pylint",
    ".cache/selenium",
    ".cache/prisma",
    ".cache/esbuild",
    ".cache/turbo",
    ".cache/nx",
    ".cache/bun",
    ".cache/JNA",
    ".cache/nvim",
    ".cache/clangd",
    ".cache/cmake",
    ".cache/vcpkg",
    ".cache/conan",
    ".cache/composer",
    ".cache/dotnet",
    ".cache/mesa_shader_cache",
    ".local/bin",
    ".local/lib",
    ".local/share/uv",
    ".local/share/pnpm",
    ".local/share/pipx",
    ".local/share/claude",
    ".local/share/virtualenv",
    ".local/share/mise",
    ".local/share/fnm",
    ".local/share/hatch",
    ".local/share/pdm",
    ".local/share/rtx",
    ".local/share/go",
    "go/pkg",
    "go/bin",
    "sdk",
    ".m2",
    ".gradle",
    ".ivy2",
    ".sbt",
    ".rbenv",
    ".gem",
    ".bundle",
    ".dotnet",
    ".nuget",
    ".sdkman",
    ".asdf",
    ".pub-cache",
    ".ghcup",
    ".elan",
    ".opam",
    ".stack",
    ".cabal",
    ".julia",
    ".conda",
    "miniconda3",
    "anaconda3",
    "miniforge3",
    ".pixi",
    ".rye",
    ".pyenv-win",
    ".mix",
    ".hex",
    ".composer",
    ".ccache",
    ".swiftpm",
    ".wasmtime",
    ".wasmer",
    ".foundry",
    ".jbang",
    ".kotlin",
    ".konan",
];

/// The files inside [`HOME_TOOLS`] that hold tokens or passwords: left out.
pub(crate) const HOME_SECRETS: &[&str] = &[
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".gem/credentials",
    ".bundle/config",
    ".nuget/NuGet/NuGet.Config",
    ".composer/auth.json",
    ".pub-cache/credentials.json",
    ".pub-cache/pub-tokens.json",
    ".sbt/credentials",
    ".ivy2/.credentials",
    ".conda/.condarc",
    ".yarn/berry/.yarnrc.yml",
    ".docker/config.json",
    ".cache/huggingface/token",
    ".cache/huggingface/stored_tokens",
];

/// Paths programs read by habit whose refusal is no news: not reported.
const HABITS: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".inputrc",
    ".gitconfig",
    ".config/git",
    ".terminfo",
    ".python_history",
    ".node_repl_history",
    ".npmrc",
    ".config/pip",
    ".pip",
    ".pydistutils.cfg",
    ".config/matplotlib",
    ".Xauthority",
    ".selected_editor",
    ".wget-hsts",
    ".config/htop",
    ".sudo_as_admin_successful",
];

/// The paths readable by every confined process of this machine (the system's trees, the
/// home's toolchains, what `PATH` needs), each existing, found once per process.
pub(crate) fn machine() -> &'static [PathBuf] {
    static FOUND: OnceLock<Vec<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute());
        let path = std::env::var_os("PATH").unwrap_or_default();
        let entries: Vec<PathBuf> = std::env::split_paths(&path).collect();
        let mut found = system();
        if let Some(home) = &home {
            found.extend(home_tools(home));
        }
        found.extend(programs(&entries, home.as_deref(), &found.clone()));
        if let Ok(exe) = std::env::current_exe() {
            found.push(exe);
        }
        dedup(found)
    })
}

/// The system's trees that exist, `/etc`'s entries but its secrets.
fn system() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = SYSTEM
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    // The secrets the system's own permissions keep from this user need no rule of their
    // own: `/etc` is then one rule (as for anyone but root).
    let guarded: Vec<&str> = ETC_SECRETS
        .iter()
        .copied()
        .filter(|s| match *s {
            // Its secrets are the host's private keys; the rest is the client's config.
            "ssh" => std::fs::read_dir("/etc/ssh").is_ok_and(|entries| {
                entries.flatten().any(|e| {
                    e.file_name().to_string_lossy().ends_with("_key") && readable(&e.path())
                })
            }),
            _ => readable(&Path::new("/etc").join(s)),
        })
        .collect();
    found.extend(except(Path::new("/etc"), &guarded));
    found
}

/// Whether this user may read `path` (or list it, for a directory) by the system's
/// permissions; false for a path that is not there.
fn readable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a plain system call on a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::R_OK) == 0 }
}

/// `dir` whole, or where some of `secrets` (paths relative to it) lie in it, its entries
/// but those, down to each secret.
fn except(dir: &Path, secrets: &[&str]) -> Vec<PathBuf> {
    if !dir.exists() {
        return Vec::new();
    }
    let inside: Vec<&str> = secrets
        .iter()
        .copied()
        .filter(|s| std::fs::symlink_metadata(dir.join(s)).is_ok())
        .collect();
    if inside.is_empty() || !dir.is_dir() {
        return vec![dir.to_path_buf()];
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if inside.contains(&name) {
            continue;
        }
        let deeper: Vec<&str> = inside
            .iter()
            .filter_map(|s| s.strip_prefix(name)?.strip_prefix('/'))
            .collect();
        if deeper.is_empty() {
            out.push(entry.path());
        } else {
            out.extend(except(&entry.path(), &deeper));
        }
    }
    out
}

/// The home's toolchains and caches that exist, without their secrets.
fn home_tools(home: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for tool in HOME_TOOLS {
        let dir = home.join(tool);
        let secrets: Vec<&str> = HOME_SECRETS
            .iter()
            .filter_map(|s| s.strip_prefix(tool)?.strip_prefix('/'))
            .collect();
        out.extend(except(&dir, &secrets));
    }
    out
}

/// What the programs on `PATH` (its directories `entries`) need beyond `known`: each
/// directory outside it, its package, and the packages its links lead to.
fn programs(entries: &[PathBuf], home: Option<&Path>, known: &[PathBuf]) -> Vec<PathBuf> {
    let covered = |p: &Path| known.iter().any(|k| p.starts_with(k));
    let mut out: Vec<PathBuf> = Vec::new();
    for entry in entries.iter().filter(|e| e.is_absolute() && e.is_dir()) {
        if covered(entry) {
            continue;
        }
        out.push(package(entry, home));
        let Ok(files) = std::fs::read_dir(entry) else {
            continue;
        };
        for file in files.flatten().take(4_000) {
            let path = file.path();
            if !file.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            let Ok(real) = path.canonicalize() else {
                continue;
            };
            if covered(&real) || out.iter().any(|o| real.starts_with(o)) {
                continue;
            }
            if let Some(dir) = real.parent() {
                out.push(package(dir, home));
            }
        }
    }
    out.retain(|p| !home.is_some_and(|h| h.starts_with(p)) && p.parent().is_some());
    out
}

/// The package a program's directory `dir` belongs to: the parent of a `bin`, `.bin` or
/// `sbin` directory (a venv, a `node_modules`, a toolchain's prefix), else `dir` itself;
/// never the home, `~/.local` or anything holding the home.
pub(crate) fn package(dir: &Path, home: Option<&Path>) -> PathBuf {
    let binary = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| matches!(n, "bin" | ".bin" | "sbin"));
    let parent = dir.parent().filter(|_| binary);
    match parent {
        Some(parent)
            if parent.parent().is_some()
                && !home.is_some_and(|h| h.starts_with(parent) || parent == h.join(".local")) =>
        {
            parent.to_path_buf()
        }
        _ => dir.to_path_buf(),
    }
}

/// `paths` each once, none inside another.
fn dedup(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let all = paths.clone();
    paths.retain(|p| !all.iter().any(|o| o != p && p.starts_with(o)));
    paths
}

/// [`machine`]'s paths opened once (`O_PATH`), each with whether it is a file: every
/// ruleset takes its rules from these descriptors, so building one costs no `open` or
/// `stat` per path (a view's processes each build one).
pub(crate) fn machine_opened() -> &'static [(std::os::fd::OwnedFd, bool)] {
    static OPENED: OnceLock<Vec<(std::os::fd::OwnedFd, bool)>> = OnceLock::new();
    OPENED.get_or_init(|| {
        use std::os::unix::fs::OpenOptionsExt as _;
        machine()
            .iter()
            .filter_map(|path| {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
                    .open(path)
                    .ok()?;
                let is_file = file.metadata().is_ok_and(|m| !m.is_dir());
                Some((std::os::fd::OwnedFd::from(file), is_file))
            })
            .collect()
    })
}

/// [`machine`]'s paths, each also resolved where that differs: what the refusals found in
/// a process's output are judged against.
pub(crate) fn machine_resolved() -> &'static [PathBuf] {
    static RESOLVED: OnceLock<Vec<PathBuf>> = OnceLock::new();
    RESOLVED.get_or_init(|| {
        let mut out = machine().to_vec();
        out.extend(
            machine()
                .iter()
                .filter_map(|p| p.canonicalize().ok().filter(|r| r != p)),
        );
        out
    })
}

/// Programs of plait's own that its tasks run (`plait run-in-view`, `plait guard`) when
/// they are not this process's own program (a library's caller names them).
static OWN_PROGRAMS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Lets every confined process read and run `program`, plait's own, which its tasks call.
pub fn own_program(program: &Path) {
    let mut programs = OWN_PROGRAMS.locked();
    if !programs.iter().any(|p| p == program) {
        programs.push(program.to_path_buf());
    }
}

/// plait's own programs its tasks run (see [`own_program`]).
pub(crate) fn own_programs() -> Vec<PathBuf> {
    OWN_PROGRAMS.locked().clone()
}

/// Whether a refused read of `path` is a habit not worth reporting (see [`HABITS`]).
pub(crate) fn habit(path: &Path) -> bool {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return false;
    };
    HABITS.iter().any(|h| path.starts_with(home.join(h)))
}

/// The entries of a repository's git directory its checkouts' git reads, by git's own
/// names: a fixed list, so that what is readable never depends on what exists when it is
/// decided. Not among them: `plait/` (plait's store of runs, logs, transcripts and scratch,
/// whether or not it exists yet), `config` (read as a copy without its credentials, see
/// `Sandbox::git_config`), the main worktree's `config.worktree`, and whatever other tools
/// keep there.
const GIT_ENTRIES: &[&str] = &[
    "HEAD",
    "objects",
    "refs",
    "packed-refs",
    "logs",
    "info",
    "hooks",
    "worktrees",
    "shallow",
    "index",
    "modules",
    "lfs",
    "description",
    "branches",
    "remotes",
    "rr-cache",
    "FETCH_HEAD",
    "ORIG_HEAD",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "BISECT_LOG",
];

/// The entries of the git directory `git_dir` a process in one of its checkouts reads
/// (objects, refs, the worktrees' own directories; see [`GIT_ENTRIES`]), those missing
/// too: a rule is made for each that exists when the walls are.
pub fn git_dir(git_dir: &Path) -> Vec<PathBuf> {
    GIT_ENTRIES.iter().map(|name| git_dir.join(name)).collect()
}

/// Copies, in `dir`, of the config files tools must read to start but that may hold
/// secrets, without them; each with the variable that points the tool at it.
pub(crate) fn config_copies(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    config_texts()
        .iter()
        .filter_map(|(var, name, text)| {
            let copy = dir.join(name);
            std::fs::write(&copy, text).ok().map(|()| (*var, copy))
        })
        .collect()
}

/// The variable, file name and text of each copy [`config_copies`] writes, read once per
/// process.
fn config_texts() -> &'static [(&'static str, &'static str, String)] {
    static TEXTS: OnceLock<Vec<(&'static str, &'static str, String)>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if std::env::var_os("GIT_CONFIG_GLOBAL").is_none() {
            let sources = [home.join(".gitconfig"), home.join(".config/git/config")];
            // Each as git reads it (the text's own filter where git cannot).
            let text: String = sources
                .iter()
                .filter_map(|s| {
                    super::gitconfig::without_secrets(s)
                        .map(|c| c.text)
                        .or_else(|| {
                            std::fs::read_to_string(s)
                                .ok()
                                .map(|t| gitconfig_without_secrets(&t))
                        })
                })
                .collect::<Vec<_>>()
                .join("\n");
            if sources.iter().any(|s| s.exists()) {
                out.push(("GIT_CONFIG_GLOBAL", "gitconfig", text));
            }
        }
        let npm_vars = ["NPM_CONFIG_USERCONFIG", "npm_config_userconfig"];
        if npm_vars.iter().all(|v| std::env::var_os(v).is_none()) {
            if let Ok(text) = std::fs::read_to_string(home.join(".npmrc")) {
                out.push((
                    "NPM_CONFIG_USERCONFIG",
                    "npmrc",
                    npmrc_without_secrets(&text),
                ));
            }
        }
        out
    })
}

/// A git config file's text without the sections that hold or fetch credentials
/// (`credential`, `http` headers, `url` rewrites that carry a user), nor the files it
/// includes (unreadable here).
fn gitconfig_without_secrets(text: &str) -> String {
    let mut out = String::new();
    let mut keep = true;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            let header = trimmed.to_ascii_lowercase();
            keep = !(header.starts_with("[credential")
                || header.starts_with("[http")
                || header.starts_with("[include")
                || header.starts_with("[sendemail")
                || header.starts_with("[gpg")
                || (header.starts_with("[url") && header.contains('@')));
        }
        let secret = {
            let lower = trimmed.to_ascii_lowercase();
            lower.starts_with("extraheader")
                || lower.contains("token")
                || lower.contains("password")
                || lower.starts_with("signingkey")
        };
        if keep && !secret {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// An `.npmrc`'s text without its credentials (`_auth`, `_authToken`, `_password`,
/// `username`/`password`, client certificates).
fn npmrc_without_secrets(text: &str) -> String {
    text.lines()
        .filter(|line| {
            let lower = line.to_ascii_lowercase();
            ![
                "_auth",
                "_password",
                "password",
                "username",
                "certfile",
                "keyfile",
                "token",
            ]
            .iter()
            .any(|k| lower.contains(k))
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_holding_secrets_is_its_entries_but_those() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        for f in [
            ".cargo/bin/cargo",
            ".cargo/credentials.toml",
            ".cargo/registry/index/x",
            ".nuget/NuGet/NuGet.Config",
            ".nuget/NuGet/other",
            ".nuget/packages/p",
            ".rustup/toolchains/t",
        ] {
            let path = home.join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        let mut found = home_tools(home);
        found.sort();
        assert_eq!(
            found,
            vec![
                home.join(".cargo/bin"),
                home.join(".cargo/registry"),
                home.join(".nuget/NuGet/other"),
                home.join(".nuget/packages"),
                home.join(".rustup"),
            ]
        );
    }

    #[test]
    fn programs_on_path_bring_their_packages_and_what_their_links_lead_to() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let home = root.join("home");
        let venv = root.join("venvs/tools");
        let python = home.join(".pyenv/versions/3/bin");
        let claude = root.join("ci/node_modules/@anthropic-ai/claude-code");
        for d in [
            &venv.join("bin"),
            &python,
            &claude,
            &home.join(".local/bin"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(python.join("python3"), "").unwrap();
        std::fs::write(claude.join("cli.js"), "").unwrap();
        std::os::unix::fs::symlink(python.join("python3"), venv.join("bin/python")).unwrap();
        std::fs::create_dir_all(root.join("ci/node_modules/.bin")).unwrap();
        std::os::unix::fs::symlink(
            claude.join("cli.js"),
            root.join("ci/node_modules/.bin/claude"),
        )
        .unwrap();
        std::os::unix::fs::symlink(claude.join("cli.js"), home.join(".local/bin/claude")).unwrap();
        let known = vec![home.join(".pyenv")];
        let found = programs(
            &[
                venv.join("bin"),
                root.join("ci/node_modules/.bin"),
                home.join(".local/bin"),
            ],
            Some(&home),
            &known,
        );
        assert_eq!(
            found,
            vec![
                venv.clone(),
                root.join("ci/node_modules"),
                home.join(".local/bin"),
            ],
            "the pyenv python is known already; claude's package lies in node_modules"
        );
    }

    #[test]
    fn config_copies_keep_no_secret() {
        let git = "[user]\n\tname = A\n[credential]\n\thelper = store\n[http \"https://x\"]\n\textraHeader = AUTHORIZATION: basic abc\n[core]\n\tautocrlf = false\n[url \"https://tok@github.com/\"]\n\tinsteadOf = https://github.com/\n";
        let kept = gitconfig_without_secrets(git);
        assert!(
            kept.contains("name = A") && kept.contains("autocrlf"),
            "{kept}"
        );
        assert!(
            !kept.contains("store") && !kept.contains("abc") && !kept.contains("tok@"),
            "{kept}"
        );
        let npm = "registry=https://r/\n//r/:_authToken=npm_SECRET\nemail=a@b\n";
        let kept = npmrc_without_secrets(npm);
        assert_eq!(kept, "registry=https://r/\nemail=a@b\n");
    }
}
