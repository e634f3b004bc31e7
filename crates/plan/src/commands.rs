//! The programs a check command line runs, where they can be known before it runs: a check
//! whose program is not on PATH (`pytset` for `pytest`) would fail in every round and send
//! every agent back for nothing, so the plan refuses it; one that still fails so at run
//! time is the plan's fault, not the agent's.

/// Words a shell runs itself, or that open a compound command: their "program" is not a
/// file to find.
const SHELL_WORDS: &[&str] = &[
    ".", ":", "[", "[[", "]]", "done", "esac", "fi", "}", "alias", "bg", "break", "case", "cd",
    "command", "continue", "echo", "eval", "exec", "exit", "export", "false", "fg", "for",
    "getopts", "hash", "jobs", "kill", "local", "printf", "pwd", "read", "readonly", "return",
    "set", "shift", "source", "test", "times", "trap", "true", "type", "ulimit", "umask",
    "unalias", "unset", "wait", "{", "(",
];

/// Words that come before a command's program: the program is the next word.
const LEADING_WORDS: &[&str] = &[
    "!", "do", "elif", "else", "if", "then", "time", "until", "while",
];

/// The programs `command` runs by name (not by path), as far as a plain reading of it can
/// tell: the first word of each part between `&&`, `||`, `;` and `|`, after any `NAME=value`
/// assignments. Nothing for a line with quotes, expansions or subshells, which only a shell
/// can read.
pub(crate) fn named_programs(command: &str) -> Vec<&str> {
    if command.contains(['\'', '"', '`', '$', '(', ')', '\\', '\n']) {
        return Vec::new();
    }
    let mut programs = Vec::new();
    for part in command.split(['&', '|', ';']) {
        let first = part
            .split_whitespace()
            .find(|w| !is_assignment(w) && !w.contains(['<', '>']) && !LEADING_WORDS.contains(w));
        let Some(word) = first else { continue };
        if word.contains('/')
            || SHELL_WORDS.contains(&word)
            || word.chars().all(|c| c.is_ascii_digit())
        {
            continue;
        }
        programs.push(word);
    }
    programs
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// Whether a check's output says the shell could not find the program `command` names
/// first: exit 127 with `NAME: not found` (dash) or `NAME: command not found` (bash).
pub fn program_not_found(command: &str, exit_code: Option<i32>, output: &str) -> Option<String> {
    if exit_code != Some(127) {
        return None;
    }
    named_programs(command).into_iter().find_map(|program| {
        let said = [
            format!("{program}: not found"),
            format!("{program}: command not found"),
        ];
        said.iter()
            .any(|s| output.contains(s.as_str()))
            .then(|| program.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_of_plain_lines_and_none_of_what_only_a_shell_reads() {
        assert_eq!(named_programs("pytset -q"), ["pytset"]);
        assert_eq!(
            named_programs("RUST_LOG=x cargo check && cargo test | tee log; make"),
            ["cargo", "cargo", "tee", "make"]
        );
        assert_eq!(named_programs("cd sub && npm test"), ["npm"]);
        assert_eq!(named_programs("./run.sh && sh tests/run.sh"), ["sh"]);
        assert!(named_programs("for t in a b; do x; done").contains(&"x"));
        assert!(named_programs("echo \"$X\" | y").is_empty());
        assert!(named_programs("test -f a 2>/dev/null").is_empty());
    }

    #[test]
    fn not_found_is_told_from_a_failing_test() {
        let dash = "$ pytset -q\nsh: 1: pytset: not found\n";
        assert_eq!(
            program_not_found("pytset -q", Some(127), dash).as_deref(),
            Some("pytset")
        );
        assert_eq!(program_not_found("pytset -q", Some(1), dash), None);
        // A program the tested code calls is the code's business.
        let inner = "$ sh tests/run.sh\ntests/run.sh: 3: frob: not found\n";
        assert_eq!(program_not_found("sh tests/run.sh", Some(127), inner), None);
    }
}
