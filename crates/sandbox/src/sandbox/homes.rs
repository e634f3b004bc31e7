//! The agent CLIs' own homes: the state directories Claude Code, Codex, Gemini CLI, Qwen
//! Code, opencode and aider write under the home as they start (settings, sessions,
//! history, logs). Refused, a CLI cannot start; shared, one task's session would be the
//! next one's. So they are layered as the tools' caches are (`super::caches`): a process
//! that starts in a view sees each one through an overlay whose upper layer is its
//! sandbox's own, the user's directory below it read-only (an empty one where the user
//! has none: plait makes the directory, and nothing else, in the real home, for a mount
//! needs a place), and the files in it that hold a login or a key ([`CliHome::secrets`])
//! hidden by whiteouts in that layer, whether they exist yet or not. A CLI's login stays
//! where it is, in plait (the gateway's stand-in for Claude Code's).

use std::path::{Path, PathBuf};

/// One agent CLI's state directory: where it lies, and the names in it that hold a login
/// or a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CliHome {
    pub dir: PathBuf,
    pub secrets: &'static [&'static str],
}

/// Where a state directory lies: under the home, or under an XDG base directory (its
/// variable and its default under the home).
enum Base {
    Home,
    Xdg(&'static str, &'static str),
}

/// The known CLIs' state directories, and the files in each that hold credentials.
const KNOWN: &[(Base, &str, &[&str])] = &[
    (Base::Home, ".claude", &[".credentials.json"]),
    (Base::Home, ".codex", &["auth.json", ".credentials.json"]),
    (
        Base::Home,
        ".gemini",
        &[
            "oauth_creds.json",
            "google_accounts.json",
            "mcp-oauth-tokens.json",
            ".env",
        ],
    ),
    (Base::Home, ".qwen", &["oauth_creds.json", ".env"]),
    (Base::Home, ".aider", &["oauth-keys.env"]),
    (
        Base::Xdg("XDG_CONFIG_HOME", ".config"),
        "opencode",
        &[".env"],
    ),
    (
        Base::Xdg("XDG_DATA_HOME", ".local/share"),
        "opencode",
        &["auth.json", "mcp-auth.json"],
    ),
    (Base::Xdg("XDG_STATE_HOME", ".local/state"), "opencode", &[]),
    (Base::Xdg("XDG_CACHE_HOME", ".cache"), "opencode", &[]),
];

/// Variables that move a CLI's whole state directory, with the entry of [`KNOWN`] whose
/// credentials it holds.
const MOVED: &[(&str, usize)] = &[("CODEX_HOME", 1)];

/// The known CLIs' state directories on this machine, for the home `home` and the
/// variables `var` gives (each absolute, as the CLIs take them), whether they exist or not.
pub(crate) fn known(home: &Path, var: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<CliHome> {
    let mut out: Vec<CliHome> = KNOWN
        .iter()
        .map(|(base, name, secrets)| {
            let root = match base {
                Base::Home => home.to_path_buf(),
                Base::Xdg(variable, default) => var(variable)
                    .filter(|p| p.is_absolute())
                    .unwrap_or_else(|| home.join(default)),
            };
            CliHome {
                dir: root.join(name),
                secrets,
            }
        })
        .collect();
    for (variable, entry) in MOVED {
        if let Some(dir) = var(variable).filter(|p| p.is_absolute()) {
            out.push(CliHome {
                dir,
                secrets: KNOWN[*entry].2,
            });
        }
    }
    out
}

/// [`known`] for this process's home and environment; nothing without a home.
pub(crate) fn of_this_machine() -> Vec<CliHome> {
    let Some(home) = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
    else {
        return Vec::new();
    };
    known(&home, &|name| std::env::var_os(name).map(PathBuf::from))
}

/// Makes, empty and private, each of `homes` the user has none of, where its parent can be
/// had, so that a layer can be mounted there.
pub(crate) fn make_missing(homes: &[CliHome]) {
    use std::os::unix::fs::DirBuilderExt as _;
    for home in homes {
        if std::fs::symlink_metadata(&home.dir).is_ok() {
            continue;
        }
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&home.dir);
    }
}

/// Hides the credentials of every CLI home that is `dir` or lies in it (all of `homes`
/// resolved, as `dir` is) from a process that sees `dir` through an overlay whose upper
/// layer is `upper`: a whiteout for each, made whether the user's file exists or not (a
/// login made later is hidden too). Returns the homes inside `dir` (not `dir` itself),
/// made in `upper` where the user has none, for rules of their own; `None` when a
/// credential could not be hidden (the directory must then stay out of reach).
pub(crate) fn hide_credentials(
    dir: &Path,
    upper: &Path,
    homes: &[CliHome],
) -> Option<Vec<PathBuf>> {
    let mut inside = Vec::new();
    for home in homes {
        let real = home.dir.canonicalize().unwrap_or_else(|_| home.dir.clone());
        let Ok(relative) = real.strip_prefix(dir) else {
            continue;
        };
        let layer = upper.join(relative);
        if std::fs::create_dir_all(&layer).is_err() {
            return None;
        }
        for secret in home.secrets {
            let hidden = layer.join(secret);
            if std::fs::symlink_metadata(&hidden).is_ok() {
                continue;
            }
            super::view::whiteout(&hidden).ok()?;
        }
        if !relative.as_os_str().is_empty() {
            inside.push(real);
        }
    }
    Some(inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_known_homes_follow_the_xdg_variables_and_codex_home() {
        let home = Path::new("/h");
        let none = known(home, &|_| None);
        let dirs: Vec<&Path> = none.iter().map(|h| h.dir.as_path()).collect();
        for dir in [
            "/h/.claude",
            "/h/.codex",
            "/h/.gemini",
            "/h/.qwen",
            "/h/.aider",
            "/h/.config/opencode",
            "/h/.local/share/opencode",
            "/h/.local/state/opencode",
            "/h/.cache/opencode",
        ] {
            assert!(dirs.contains(&Path::new(dir)), "{dir}: {dirs:?}");
        }
        let moved = known(home, &|name| match name {
            "XDG_DATA_HOME" => Some(PathBuf::from("/d")),
            "XDG_CONFIG_HOME" => Some(PathBuf::from("relative")),
            "CODEX_HOME" => Some(PathBuf::from("/c")),
            _ => None,
        });
        let find = |dir: &str| moved.iter().find(|h| h.dir == Path::new(dir));
        assert_eq!(
            find("/d/opencode").map(|h| h.secrets),
            Some(&["auth.json", "mcp-auth.json"][..])
        );
        assert!(
            find("/h/.config/opencode").is_some(),
            "a relative one is not taken"
        );
        assert_eq!(
            find("/c").map(|h| h.secrets),
            find("/h/.codex").map(|h| h.secrets)
        );
    }

    #[test]
    fn credentials_are_hidden_by_whiteouts_whether_they_exist_or_not() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let share = root.join("share");
        std::fs::create_dir_all(share.join("opencode")).unwrap();
        std::fs::write(share.join("opencode/auth.json"), "token").unwrap();
        let upper = root.join("upper");
        std::fs::create_dir_all(&upper).unwrap();
        let homes = vec![
            CliHome {
                dir: share.join("opencode"),
                secrets: &["auth.json", "mcp-auth.json"],
            },
            CliHome {
                dir: root.join("elsewhere/.codex"),
                secrets: &["auth.json"],
            },
        ];
        let inside = hide_credentials(&share, &upper, &homes).unwrap();
        assert_eq!(inside, vec![share.join("opencode")]);
        use std::os::unix::fs::FileTypeExt as _;
        for name in ["auth.json", "mcp-auth.json"] {
            let meta = std::fs::symlink_metadata(upper.join("opencode").join(name)).unwrap();
            assert!(meta.file_type().is_char_device(), "{name}");
        }
        assert!(!upper.join("elsewhere").exists());
        // The home itself as the layer's directory: hidden at the layer's root.
        let upper = root.join("upper2");
        let inside = hide_credentials(&share.join("opencode"), &upper, &homes).unwrap();
        assert!(inside.is_empty());
        assert!(std::fs::symlink_metadata(upper.join("auth.json")).is_ok());
    }
}
