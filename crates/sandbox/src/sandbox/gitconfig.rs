//! git's config files as a confined process's git reads them. The repository's
//! `.git/config` and the user's `~/.gitconfig` hold credentials git does not need to read a
//! repository or to start: a token in a remote's URL (`https://user:TOKEN@host/…`), an
//! `http.extraHeader` as `actions/checkout` writes it, a credential helper's settings, files
//! included from elsewhere. A process gets a copy without them.
//!
//! The file is read by git itself (`git config --file F --list -z`, includes not followed),
//! so the copy is what git makes of the file, whatever its quoting, continuation lines or
//! comments; the entries are written back one by one, each value quoted.

use plait_core::sync::Locked as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A config file's text without its credentials, and whether anything was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sanitized {
    pub(crate) text: String,
    /// Whether an entry was left out or a URL's user and password taken from a value: when
    /// not, the file itself may be read as it is.
    pub(crate) changed: bool,
}

/// The config file at `path` without its credentials; `None` when git cannot read it
/// (missing, or not a config file git accepts).
pub(crate) fn without_secrets(path: &Path) -> Option<Sanitized> {
    /// The last file read, by its identity and size and time: every sandbox of a run reads
    /// the same repository's config.
    type Seen = Option<((u64, u64, i64, i64, u64), Sanitized)>;
    static LAST: Mutex<Seen> = Mutex::new(None);
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    let id = (
        meta.dev(),
        meta.ino(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.size(),
    );
    if let Some((seen, sanitized)) = &*LAST.locked() {
        if *seen == id {
            return Some(sanitized.clone());
        }
    }
    let out = std::process::Command::new("git")
        .args(["config", "--no-includes", "--list", "-z", "--file"])
        .arg(path)
        .current_dir("/")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_COMMON_DIR")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let sanitized = from_listing(&String::from_utf8_lossy(&out.stdout));
    *LAST.locked() = Some((id, sanitized.clone()));
    Some(sanitized)
}

/// The config `git config --list -z` listed (`key\nvalue` or `key` alone, each ended by
/// NUL), written again without its credentials.
pub(crate) fn from_listing(listing: &str) -> Sanitized {
    let mut text = String::new();
    let mut changed = false;
    let mut header: Option<String> = None;
    for entry in listing.split('\0').filter(|e| !e.is_empty()) {
        let (key, value) = match entry.split_once('\n') {
            Some((key, value)) => (key, Some(value)),
            None => (entry, None),
        };
        let Some((section, subsection, name)) = split_key(key) else {
            changed = true;
            continue;
        };
        if secret(section, subsection, name) {
            changed = true;
            continue;
        }
        let value = value.map(|v| {
            let stripped = strip_userinfo(v);
            changed |= stripped != v;
            stripped
        });
        let this = match subsection {
            Some(sub) => format!("[{section} \"{}\"]\n", escape(sub)),
            None => format!("[{section}]\n"),
        };
        if header.as_deref() != Some(this.as_str()) {
            text.push_str(&this);
            header = Some(this);
        }
        text.push('\t');
        text.push_str(name);
        if let Some(value) = value {
            text.push_str(" = \"");
            text.push_str(&escape(&value));
            text.push('"');
        }
        text.push('\n');
    }
    Sanitized { text, changed }
}

/// How a sandbox's processes read the repository's `.git/config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RepoConfig {
    /// It holds no credential: read as it is.
    Plain(PathBuf),
    /// A copy without its credentials (`copy`, in the sandbox's private temporary
    /// directory), mounted at `target` (the file's own path) in each process's mount
    /// namespace; the file itself is not readable.
    Copy {
        /// The copy.
        copy: PathBuf,
        /// The repository's config file.
        target: PathBuf,
    },
    /// Not readable at all, and why: git cannot read it either (so nothing is lost), or it
    /// holds credentials and no mount namespace can show a copy in its place here.
    Hidden(String),
}

impl RepoConfig {
    /// How git behind the walls reads the repository's config, in words.
    pub(crate) fn describe(&self) -> String {
        match self {
            RepoConfig::Plain(_) => "as it is (it holds no credential)".to_string(),
            RepoConfig::Copy { .. } => {
                "a copy without its credentials, in the file's place in each process's mount \
                 namespace"
                    .to_string()
            }
            RepoConfig::Hidden(why) => format!("not at all: {why}"),
        }
    }
}

/// How the processes of a sandbox whose private temporary directory is `tmp` read the
/// config of the git directory `git_dir`; `namespaces` whether they can start in a mount
/// namespace of their own.
pub(crate) fn repo_config(git_dir: &Path, tmp: &Path, namespaces: bool) -> RepoConfig {
    let target = git_dir.join("config");
    let target = target.canonicalize().unwrap_or(target);
    let Some(sanitized) = without_secrets(&target) else {
        return RepoConfig::Hidden(format!("git cannot read {}", target.display()));
    };
    if !sanitized.changed {
        return RepoConfig::Plain(target);
    }
    if !namespaces {
        return RepoConfig::Hidden(format!(
            "{} holds credentials and this system allows no mount namespace to show a copy \
             without them in its place, so git behind the walls cannot read the repository's \
             config",
            target.display()
        ));
    }
    let copy = tmp.join("repository-gitconfig");
    match std::fs::write(&copy, sanitized.text) {
        Ok(()) => RepoConfig::Copy { copy, target },
        Err(e) => RepoConfig::Hidden(format!("cannot write {}: {e}", copy.display())),
    }
}

/// `section.subsection.name` (the subsection may hold dots) in its three parts.
fn split_key(key: &str) -> Option<(&str, Option<&str>, &str)> {
    let (section, rest) = key.split_once('.')?;
    match rest.rsplit_once('.') {
        Some((subsection, name)) => Some((section, Some(subsection), name)),
        None => Some((section, None, rest)),
    }
}

/// Whether the entry holds or fetches a credential, or leads to a file that may: credential
/// helpers and their settings, HTTP headers, includes, URL rewrites whose base carries a
/// user, passwords and tokens by their names.
fn secret(section: &str, subsection: Option<&str>, name: &str) -> bool {
    let section = section.to_ascii_lowercase();
    let name = name.to_ascii_lowercase();
    matches!(section.as_str(), "credential" | "include" | "includeif")
        || name == "extraheader"
        || (section == "url" && subsection.is_some_and(has_userinfo))
        || (section == "http" && matches!(name.as_str(), "cookiefile" | "proxyauthmethod"))
        || name.contains("password")
        || name.contains("token")
        || name == "smtppass"
        || name == "signingkey"
}

/// Whether `value` is a URL with a user (and maybe a password) before its host.
fn has_userinfo(value: &str) -> bool {
    strip_userinfo(value) != value
}

/// `value` without the user and password of the URL it is (`https://user:tok@host/p` →
/// `https://host/p`); an SSH URL's user alone (`ssh://git@host/`) is its login, kept.
fn strip_userinfo(value: &str) -> String {
    let Some((scheme, rest)) = value.split_once("://") else {
        return value.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return value.to_string();
    };
    let userinfo = &authority[..at];
    let ssh = scheme.to_ascii_lowercase().contains("ssh");
    if ssh && !userinfo.contains(':') {
        return value.to_string();
    }
    format!("{scheme}://{}", &rest[at + 1..])
}

/// `text` quoted as a config value or subsection: backslash, quote, newline and tab escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRETS: &str = "[core]\n\trepositoryformatversion = 1\n\tbare\n\
        [extensions]\n\tworktreeConfig = true\n\
        [remote \"origin\"]\n\turl = https://x-access-token:SECRET-url@github.com/o/r.git\n\
        \tpushurl = \"https://SECRET-push@host/p\"\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\
        [remote \"ssh\"]\n\turl = ssh://git@host/r.git\n\
        [http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic SECRET-header\n\
        [http]\n\tpostBuffer = 1024\n\textraHeader = \"Authorization: Bearer SECRET-plain\"\n\
        [credential \"https://host\"]\n\thelper = store --file /SECRET-helper\n\
        [include]\n\tpath = ../SECRET-include\n\
        [includeIf \"gitdir:/x/\"]\n\tpath = /SECRET-includeif\n\
        [url \"https://SECRET-rewrite@github.com/\"]\n\tinsteadOf = https://github.com/\n\
        [url \"https://mirror/\"]\n\tinsteadOf = https://u:SECRET-insteadof@github.com/\n\
        [user]\n\tname = A \\\"quoted\\\" \\\\ name\n";

    fn sanitized(text: &str) -> (Sanitized, String) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config");
        std::fs::write(&file, text).unwrap();
        let sanitized = without_secrets(&file).expect("git reads the file");
        // What git makes of the copy.
        let copy = dir.path().join("copy");
        std::fs::write(&copy, &sanitized.text).unwrap();
        let out = std::process::Command::new("git")
            .args(["config", "--list", "--file"])
            .arg(&copy)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", sanitized.text);
        (sanitized, String::from_utf8(out.stdout).unwrap())
    }

    #[test]
    fn a_repository_config_keeps_no_credential_and_git_reads_the_rest() {
        let (sanitized, listed) = sanitized(SECRETS);
        assert!(sanitized.changed);
        assert!(!listed.contains("SECRET"), "{listed}");
        for kept in [
            "core.repositoryformatversion=1",
            "core.bare\n",
            "extensions.worktreeconfig=true",
            "remote.origin.url=https://github.com/o/r.git",
            "remote.origin.pushurl=https://host/p",
            "remote.origin.fetch=+refs/heads/*:refs/remotes/origin/*",
            "remote.ssh.url=ssh://git@host/r.git",
            "http.postbuffer=1024",
            "url.https://mirror/.insteadof=https://github.com/",
            "user.name=A \"quoted\" \\ name",
        ] {
            assert!(listed.contains(kept), "{kept} in {listed}");
        }
    }

    #[test]
    fn a_config_without_credentials_is_unchanged() {
        let (sanitized, listed) =
            sanitized("[core]\n\tbare = false\n[remote \"o\"]\n\turl = git@host:o/r.git\n");
        assert!(!sanitized.changed, "{}", sanitized.text);
        assert_eq!(listed, "core.bare=false\nremote.o.url=git@host:o/r.git\n");
    }

    #[test]
    fn userinfo_goes_from_urls_of_every_scheme_but_an_ssh_login() {
        assert_eq!(strip_userinfo("https://a:b@h/p@q"), "https://h/p@q");
        assert_eq!(strip_userinfo("http://tok@h"), "http://h");
        assert_eq!(strip_userinfo("ssh://u:pw@h/r"), "ssh://h/r");
        assert_eq!(strip_userinfo("ssh://git@h/r"), "ssh://git@h/r");
        assert_eq!(strip_userinfo("git@h:r"), "git@h:r");
        assert_eq!(strip_userinfo("plain words"), "plain words");
    }
}
