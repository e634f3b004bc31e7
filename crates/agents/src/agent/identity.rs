//! A git identity for an agent CLI where git would find none. aider asks the git CLI
//! (`git config --get user.name`) and, finding nothing, writes a placeholder into the
//! repository's own config, which the walls refuse (it crashes); other CLIs may ask git
//! for one too. The question is put to the git CLI itself, in the agent's worktree and
//! with the environment the agent gets (`GIT_CONFIG_GLOBAL`, `GIT_CONFIG_COUNT`, ... as
//! plait inherited them), not to libgit2, which reads `~/.gitconfig` whatever
//! `GIT_CONFIG_GLOBAL` says. The identity is given through `GIT_CONFIG_*`, after any the
//! environment already holds, so it reaches only the agent's processes.

use std::path::Path;

/// `GIT_CONFIG_KEY_<n>` and `GIT_CONFIG_VALUE_<n>` for the indexes an identity may take.
const SLOTS: [(&str, &str); 10] = [
    ("GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"),
    ("GIT_CONFIG_KEY_1", "GIT_CONFIG_VALUE_1"),
    ("GIT_CONFIG_KEY_2", "GIT_CONFIG_VALUE_2"),
    ("GIT_CONFIG_KEY_3", "GIT_CONFIG_VALUE_3"),
    ("GIT_CONFIG_KEY_4", "GIT_CONFIG_VALUE_4"),
    ("GIT_CONFIG_KEY_5", "GIT_CONFIG_VALUE_5"),
    ("GIT_CONFIG_KEY_6", "GIT_CONFIG_VALUE_6"),
    ("GIT_CONFIG_KEY_7", "GIT_CONFIG_VALUE_7"),
    ("GIT_CONFIG_KEY_8", "GIT_CONFIG_VALUE_8"),
    ("GIT_CONFIG_KEY_9", "GIT_CONFIG_VALUE_9"),
];

/// The variables that give an agent started in `dir` with `env` (besides what it
/// inherits) a `user.name` and `user.email`, where the git CLI finds neither or one;
/// `inherited` is the `GIT_CONFIG_COUNT` plait inherited, if any (its entries are kept).
/// Nothing when git finds both, or cannot be asked.
pub fn identity(
    dir: &Path,
    env: &[(&'static str, String)],
    inherited: Option<usize>,
) -> Vec<(&'static str, String)> {
    let mut git = plait_core::git::git_command(dir);
    git.args(["config", "--get-regexp", r"^user\.(name|email)$"]);
    git.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    let Ok(out) = git.output() else {
        return Vec::new();
    };
    // Exit 1: none set. Anything else but 0: git could not say; leave it be.
    if !matches!(out.status.code(), Some(0 | 1)) {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let set = |key: &str| {
        text.lines().any(|line| {
            line.split_once(' ')
                .is_some_and(|(k, v)| k.eq_ignore_ascii_case(key) && !v.trim().is_empty())
        })
    };
    let missing: Vec<(&str, &str)> = [("user.name", "plait"), ("user.email", "plait@localhost")]
        .into_iter()
        .filter(|(key, _)| !set(key))
        .collect();
    let first = inherited.unwrap_or(0);
    if missing.is_empty() || first + missing.len() > SLOTS.len() {
        return Vec::new();
    }
    let mut vars = vec![("GIT_CONFIG_COUNT", (first + missing.len()).to_string())];
    for (k, (key, value)) in missing.into_iter().enumerate() {
        let (key_var, value_var) = SLOTS[first + k];
        vars.push((key_var, key.to_string()));
        vars.push((value_var, value.to_string()));
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with no identity of its own, and a global config file beside it.
    fn repo() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let init = std::process::Command::new("git")
            .args(["init", "-q"])
            .arg(&repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .unwrap();
        assert!(init.success());
        let global = dir.path().join("gitconfig");
        std::fs::write(
            &global,
            "[user]\n\tname = Someone\n\temail = someone@example.com\n",
        )
        .unwrap();
        (dir, global)
    }

    fn env(global: &str) -> Vec<(&'static str, String)> {
        vec![
            ("GIT_CONFIG_GLOBAL", global.to_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".to_string()),
        ]
    }

    #[test]
    fn git_s_own_answer_decides_with_the_agent_s_environment() {
        let (dir, global) = repo();
        let repo = dir.path().join("repo");
        // The global config the agent's git reads has one: nothing to give.
        assert!(identity(&repo, &env(&global.display().to_string()), None).is_empty());
        // With GIT_CONFIG_GLOBAL=/dev/null git finds none, whatever ~/.gitconfig holds.
        let given = identity(&repo, &env("/dev/null"), None);
        let names: Vec<&str> = given.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            names,
            [
                "GIT_CONFIG_COUNT",
                "GIT_CONFIG_KEY_0",
                "GIT_CONFIG_VALUE_0",
                "GIT_CONFIG_KEY_1",
                "GIT_CONFIG_VALUE_1"
            ]
        );
        assert_eq!(given[0].1, "2");
        // Entries the environment already holds are kept: the identity goes after them,
        // and only what is missing (here the email, since the environment names the user).
        let mut inherited = env("/dev/null");
        inherited.extend([
            ("GIT_CONFIG_COUNT", "1".to_string()),
            ("GIT_CONFIG_KEY_0", "user.name".to_string()),
            ("GIT_CONFIG_VALUE_0", "Inherited".to_string()),
        ]);
        let given = identity(&repo, &inherited, Some(1));
        assert_eq!(
            given,
            [
                ("GIT_CONFIG_COUNT", "2".to_string()),
                ("GIT_CONFIG_KEY_1", "user.email".to_string()),
                ("GIT_CONFIG_VALUE_1", "plait@localhost".to_string()),
            ]
        );
    }
}
