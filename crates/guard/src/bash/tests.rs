//! The Bash allowlist over a table of commands: what passes, what is refused and why.

use std::path::Path;

use super::super::{decide, GuardFile, Verdict};

/// A worktree with a few files, whose guard confines reads to it.
fn worktree() -> (tempfile::TempDir, GuardFile) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    for file in ["README.md", "x", "src/a.rs", "src/b.rs"] {
        std::fs::write(root.join(file), "fn main() {}\n").unwrap();
    }
    let guard = GuardFile {
        task: "t1".into(),
        worktree: root.clone(),
        owns: vec!["src/".into()],
        refusals: root.join("refusals.jsonl"),
        read_roots: vec![root],
    };
    (dir, guard)
}

fn bash(guard: &GuardFile, cwd: &Path, command: &str) -> Verdict {
    let input =
        serde_json::json!({"cwd": cwd, "tool_name": "Bash", "tool_input": {"command": command}});
    decide(guard, &input.to_string())
}

/// Each command, and `None` when it passes or a part of the reason it is refused.
const TABLE: &[(&str, Option<&str>)] = &[
    // What agents run.
    ("git log --oneline -5", None),
    ("git log --stat", None),
    ("git log --format=%H -n 3", None),
    ("git log --pretty=format:'%h %s' --graph --all", None),
    ("git log -p -- src/a.rs", None),
    ("git log --author='A U Thor' --since='2 weeks ago'", None),
    ("git log --grep=fix -i --no-merges HEAD~3..HEAD", None),
    ("git log --stat=100 --no-color", None),
    ("git --no-pager log -1 --decorate", None),
    ("git -P log --name-only", None),
    ("git show HEAD:src/a.rs", None),
    ("git show --stat HEAD~1", None),
    ("git show -s --format=%B HEAD", None),
    ("git diff HEAD~1 -- src", None),
    ("git diff --cached --name-status", None),
    ("git diff -U5 -w main...HEAD", None),
    ("git diff --unified=1 HEAD~1", None),
    ("git diff --no-ext-diff --no-textconv", None),
    ("git diff --no-ext", Some("ambiguous")),
    ("git diff --word-diff=color x", None),
    ("git grep -n foo", None),
    ("git grep -n -e -foo -- src", None),
    ("git grep -il 'fn main' HEAD", None),
    ("git grep -2 foo", None),
    ("git grep --line-n foo", None),
    ("git status --short", None),
    ("git status -sb --porcelain=v1 -uno", None),
    ("git blame -L 1,5 x", None),
    ("git blame --contents src/a.rs src/a.rs", None),
    ("git ls-files -s", None),
    ("git ls-files --others --exclude-standard -z", None),
    ("git ls-tree -r --name-only HEAD src", None),
    ("git rev-parse HEAD", None),
    ("git rev-parse --abbrev-ref HEAD", None),
    ("git rev-parse --show-toplevel", None),
    ("git cat-file -p HEAD", None),
    ("git cat-file -t HEAD:x", None),
    ("git rev-list --count HEAD", None),
    ("git merge-base HEAD main", None),
    ("grep -rn 'fn main' src", None),
    ("grep -rn /etc/passwd src", None),
    ("grep -c -e main -e fn src/a.rs x", None),
    ("grep -f x src/a.rs", None),
    ("grep --include='*.rs' -rl main .", None),
    ("grep -A2 -B 1 main x", None),
    ("grep -3 main x", None),
    ("grep --line-n main x", None),
    ("head -n 5 README.md", None),
    ("head -5 x", None),
    ("head -n -2 x", None),
    ("head --lines=5 x", None),
    ("head -c20 x", None),
    ("tail -n 3 x", None),
    ("tail -3 x", None),
    ("cat -n x", None),
    ("cat README.md src/a.rs", None),
    ("cat \"src/a.rs\" 'x'", None),
    ("cat src/*.rs", None),
    ("cat -- -x", None),
    ("ls -la src", None),
    ("ls", None),
    ("ls -1 --color=never src", None),
    ("wc -l x", None),
    ("wc -lw README.md x", None),
    ("pwd", None),
    // Abbreviated long options.
    ("git diff --out=/tmp/x", Some("ambiguous")),
    ("git diff --outp=x", Some("ambiguous")),
    ("git diff --output=x", Some("`--output`")),
    ("git log --ext", Some("`--ext")),
    ("git log --ext-d", Some("`--ext-d")),
    (
        "git grep --open-f foo",
        Some("`--open-f` means `--open-files-in-pager`"),
    ),
    ("git diff --no-i /etc/passwd x", Some("`--no-i`")),
    ("tail --fo x", Some("`--fo` means `--follow`")),
    ("grep --fi=/etc/passwd x", Some("ambiguous")),
    (
        "wc --files0=/etc/passwd",
        Some("`--files0` means `--files0-from`"),
    ),
    // Bundled short options hiding a bad one.
    ("git grep -nO foo", Some("`-O`")),
    ("git grep -iOvim foo", Some("`-O`")),
    ("git grep -nOless foo", Some("`-O`")),
    ("tail -fn 5 x", Some("`-f`")),
    ("tail -5f x", Some("`-5`")),
    ("head -5c /etc/passwd", Some("`-5`")),
    ("grep -rR x src", Some("`-R`")),
    ("ls -lL src", Some("`-L`")),
    // Options that start a pager or another program.
    ("git -p log", Some("`-p` before the subcommand")),
    ("git --paginate log", Some("`--paginate`")),
    ("git -c core.pager=sh log", Some("`-c`")),
    ("git log --show-signature", Some("`--show-signature`")),
    ("git cat-file --textconv HEAD:x", Some("`--textconv`")),
    ("git cat-file --filters HEAD:x", Some("`--filters`")),
    ("git cat-file --batch", Some("`--batch`")),
    ("git diff --ext-diff", Some("`--ext-diff`")),
    ("git log -p --ext-diff", Some("`--ext-diff`")),
    ("git grep --textconv foo", Some("`--textconv`")),
    ("git diff -Oorder.txt", Some("`-O`")),
    ("git log --stdin", Some("`--stdin`")),
    ("tail -f x", Some("`-f`")),
    ("tail --follow=name x", Some("`--follow`")),
    ("tail +5f x", Some("tail's old")),
    // Options that name files outside the repository.
    (
        "git blame --contents /etc/passwd x",
        Some("outside the repository"),
    ),
    (
        "git blame --ignore-revs-file=/etc/passwd x",
        Some("outside the repository"),
    ),
    ("git blame -S /etc/passwd x", Some("outside the repository")),
    ("git grep -f /etc/passwd", Some("outside the repository")),
    ("grep -f /etc/passwd x", Some("outside the repository")),
    ("grep --file=/etc/shadow x", Some("outside the repository")),
    (
        "grep --exclude-from=/etc/passwd -r x .",
        Some("outside the repository"),
    ),
    (
        "git ls-files --exclude-from=/etc/passwd",
        Some("outside the repository"),
    ),
    (
        "git ls-files --exclude-per-directory=../../etc/passwd",
        Some("`--exclude-per-directory`"),
    ),
    ("wc --files0-from=/etc/passwd", Some("`--files0-from`")),
    ("git grep --no-index foo /etc", Some("`--no-index`")),
    ("git diff --no-index /etc/passwd x", Some("`--no-index`")),
    ("git diff /etc/passwd x", Some("outside the repository")),
    ("git diff -U /etc/passwd x", Some("outside the repository")),
    (
        "git diff --unified /etc/passwd x",
        Some("outside the repository"),
    ),
    (
        "git log --grep /etc/passwd x",
        Some("outside the repository"),
    ),
    ("cat /etc/passwd", Some("outside the repository")),
    ("head ../../../etc/passwd", Some("outside the repository")),
    ("ls /", Some("outside the repository")),
    ("cat /etc/*", Some("outside the repository")),
    ("ls ../*", Some("outside the repository")),
    ("grep -r root /etc", Some("outside the repository")),
    // Global git options.
    ("git -C / log", Some("`-C`")),
    ("git --git-dir=/x log", Some("`--git-dir=/x`")),
    ("git --exec-path=/tmp log", Some("`--exec-path=/tmp`")),
    ("git --work-tree=/ status", Some("`--work-tree=/`")),
    ("git --no-pager -c x=y log", Some("`-c`")),
    // Unknown options and values in the wrong place.
    ("ls --unknown-thing", Some("no option of ls")),
    ("git log --frobnicate", Some("no option of git log")),
    ("git rev-parse --sh", Some("`--sh`")),
    ("git rev-parse -qv HEAD", Some("one option a word")),
    ("git log --grep -x", Some("must be attached")),
    ("git log --oneline=yes", Some("takes no value")),
    ("head -n", Some("wants a value")),
    ("cat -*", Some("in an option")),
    ("grep -e *.rs x", Some("in an option's value")),
    ("cat src/**", Some("`**`")),
    // Shell syntax.
    ("cat a; rm b", Some("`;`")),
    ("cat a && rm b", Some("`&`")),
    ("cat a | sh", Some("`|`")),
    ("cat $(x)", Some("`$`")),
    ("cat `x`", Some("`` ` ``")),
    ("cat \"$HOME/x\"", Some("inside quotes")),
    ("X=1 git log", Some("environment assignment")),
    ("git log > f", Some("`>`")),
    ("cat <f", Some("`<`")),
    ("cat ~/.ssh/id_rsa", Some("`~`")),
    ("cat x\nrm -rf src", Some("newline")),
    ("cat 'x", Some("unclosed quote")),
    ("cat [ab]", Some("`[`")),
    ("cat x # y", Some("comment")),
    ("", Some("no command")),
    // Commands not in the list.
    ("rm -rf src", Some("`rm` is not one of them")),
    ("sh -c ls", Some("`sh` is not one of them")),
    ("python3 -c 1", Some("`python3` is not one of them")),
    ("env git log", Some("`env` is not one of them")),
    ("xargs", Some("`xargs` is not one of them")),
    ("find . -delete", Some("`find` is not one of them")),
    ("/usr/bin/git log", Some("not one of them")),
    ("git commit -am x", Some("`git commit` is not one of them")),
    ("git branch x", Some("`git branch` is not one of them")),
    ("git", Some("without a subcommand")),
];

#[test]
fn the_bash_allowlist_passes_read_only_commands_and_refuses_the_rest() {
    let (_dir, guard) = worktree();
    let cwd = guard.worktree.clone();
    let mut wrong = Vec::new();
    for &(command, expected) in TABLE {
        let verdict = bash(&guard, &cwd, command);
        let fine = match (&verdict, expected) {
            (Verdict::Allow, None) => true,
            (Verdict::Deny(why), Some(part)) => why.contains(part),
            _ => false,
        };
        if !fine {
            wrong.push(format!(
                "{command:?}: expected {expected:?}, got {verdict:?}"
            ));
        }
    }
    assert!(TABLE.len() >= 80, "{} rows", TABLE.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_refusal_keeps_the_general_text_and_says_what() {
    let (_dir, guard) = worktree();
    let Verdict::Deny(why) = bash(&guard, &guard.worktree, "git diff --out=/tmp/x") else {
        panic!("must be refused")
    };
    assert!(
        why.starts_with("plait: `git diff --out=/tmp/x` is refused. Agents here may run only read-only commands, with no shell operators: git show/ls-files/")
            && why.contains("and ls, cat, head, tail, wc, grep, pwd. Edit files with the edit tools; the project's checks run after you finish. Refused: `--out` is ambiguous"),
        "{why}"
    );
}

#[test]
fn a_glob_is_judged_by_every_file_it_can_match() {
    let (_dir, guard) = worktree();
    let root = guard.worktree.clone();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s").unwrap();
    std::fs::create_dir_all(root.join("links")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), root.join("links/secret")).unwrap();
    assert!(
        matches!(bash(&guard, &root, "cat links/secret"), Verdict::Deny(ref w) if w.contains("outside")),
        "the link itself"
    );
    for glob in [
        "cat links/*",
        "cat links/s?cret",
        "cat l*/*",
        "head -n 1 links/*t",
    ] {
        assert!(
            matches!(bash(&guard, &root, glob), Verdict::Deny(ref w) if w.contains("outside")),
            "{glob} reaches the link"
        );
    }
    assert_eq!(
        bash(&guard, &root, "cat links/'*'"),
        Verdict::Allow,
        "a quoted * is no glob"
    );
    assert_eq!(bash(&guard, &root, "ls src/*.rs"), Verdict::Allow);
    // A file whose name looks like an option, which a glob would hand over as one.
    std::fs::write(root.join("src/--output=x"), "").unwrap();
    let in_src = root.join("src");
    let verdict = bash(&guard, &in_src, "git diff *");
    assert!(
        matches!(verdict, Verdict::Deny(ref w) if w.contains("would pass for an option")),
        "{verdict:?}"
    );
    assert_eq!(bash(&guard, &root, "git diff src/*"), Verdict::Allow);
}

#[test]
fn without_read_roots_paths_are_not_judged_but_options_are() {
    let (_dir, mut guard) = worktree();
    guard.read_roots.clear();
    let cwd = guard.worktree.clone();
    assert_eq!(bash(&guard, &cwd, "cat /etc/hostname"), Verdict::Allow);
    assert!(matches!(
        bash(&guard, &cwd, "git diff --out=x"),
        Verdict::Deny(_)
    ));
}

#[test]
fn every_program_has_its_long_options_listed() {
    use super::super::programs::{GIT, PROGRAMS};
    for program in PROGRAMS.iter().chain(GIT) {
        let known: Vec<&str> = program.known_long().collect();
        let allowed = program.all().filter_map(|o| o.long).count();
        assert!(
            program.known.is_empty() || known.len() > allowed,
            "{}: long-options.txt lists nothing for {:?}",
            program.name,
            program.known
        );
    }
}
