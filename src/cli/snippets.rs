//! The pages kept true: every fenced code block of README.md and the book (`docs/src/`) is
//! read as plait reads it. A ```toml block is a plan (or, when its first line is a comment
//! naming `config.toml` or `.plait.toml`, a config file) whose every key must be one plait
//! knows; each `plait ...` command of a ```sh, ```bash or ```console block (after a `$ `
//! prompt, through `&&`, `||`, `|` and `;`) must parse with the command line's own clap
//! definition; each relative link must lead to a page (and a heading) that exists. A
//! renamed flag, command, key or page fails here, naming the page and the line.

use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::Parser as _;

use super::Cli;

/// One fenced code block: its language, and each line with its 1-based line number.
struct Block {
    lang: String,
    lines: Vec<(usize, String)>,
}

/// The fenced code blocks of a Markdown text, their lines without the fence's indent (a
/// block inside a list item is indented).
fn blocks(text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<(usize, Block)> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let lang = info.split([',', ' ']).next().unwrap_or_default();
                    let block = Block {
                        lang: lang.to_string(),
                        lines: Vec::new(),
                    };
                    open = Some((indent, block));
                }
            }
            Some((fence, mut block)) => {
                if trimmed.starts_with("```") && trimmed.trim_matches('`').is_empty() {
                    found.push(block);
                } else {
                    let cut = line.len() - line.trim_start().len();
                    block
                        .lines
                        .push((n + 1, line[cut.min(fence)..].to_string()));
                    open = Some((fence, block));
                }
            }
        }
    }
    found
}

/// What the checks found in one page.
#[derive(Default)]
struct Checked {
    toml: usize,
    commands: usize,
    links: usize,
    failures: Vec<String>,
}

/// Checks every block of `text`, the page named `page` in failures.
fn check_page(page: &str, text: &str, checked: &mut Checked) {
    for block in blocks(text) {
        match block.lang.as_str() {
            "toml" => check_toml(page, &block, checked),
            "sh" | "bash" | "shell" => check_shell(page, &block, false, checked),
            "console" => check_shell(page, &block, true, checked),
            _ => {}
        }
    }
}

/// A TOML block: TOML, and every key one its table may hold.
fn check_toml(page: &str, block: &Block, checked: &mut Checked) {
    let Some(&(first, _)) = block.lines.first() else {
        return;
    };
    let text: String = block.lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    let head = block
        .lines
        .iter()
        .map(|(_, l)| l.trim())
        .find(|l| !l.is_empty());
    let config = head.is_some_and(|l| {
        l.starts_with('#') && (l.contains("config.toml") || l.contains(".plait.toml"))
    });
    checked.toml += 1;
    let what = if config { "config file" } else { "plan" };
    match plait_plan::unknown_keys(&text, config) {
        None => checked
            .failures
            .push(format!("{page}:{first}: this toml block is not TOML")),
        Some(unknown) => {
            for message in unknown {
                // "line N, column M: ..." counts from the block's first line.
                let at = message
                    .strip_prefix("line ")
                    .and_then(|rest| rest.split(',').next())
                    .and_then(|n| n.parse::<usize>().ok())
                    .map_or(first, |n| first + n - 1);
                checked
                    .failures
                    .push(format!("{page}:{at}: as a {what}, {message}"));
            }
        }
    }
}

/// A shell block: each `plait` command on its lines parses. In a console block only the
/// lines after a `$ ` prompt are commands (the rest is their output).
fn check_shell(page: &str, block: &Block, console: bool, checked: &mut Checked) {
    let mut joined: Vec<(usize, String)> = Vec::new();
    let mut continued = false;
    for (n, line) in &block.lines {
        let line = line.trim_end();
        let (body, more) = match line.strip_suffix('\\') {
            Some(body) => (body, true),
            None => (line, false),
        };
        if continued {
            if let Some((_, text)) = joined.last_mut() {
                text.push(' ');
                text.push_str(body);
            }
        } else {
            let command = body.trim_start().strip_prefix("$ ");
            match (command, console) {
                (Some(command), _) => joined.push((*n, command.to_string())),
                (None, false) => joined.push((*n, body.to_string())),
                (None, true) => {}
            }
        }
        continued = more;
    }
    for (n, line) in joined {
        let Some(words) = shlex::split(&line) else {
            if line.contains("plait ") {
                checked.failures.push(format!(
                    "{page}:{n}: cannot split as the shell does: {line}"
                ));
            }
            continue;
        };
        for argv in commands(&words) {
            checked.commands += 1;
            if let Err(err) = Cli::try_parse_from(&argv) {
                let benign = [
                    ErrorKind::DisplayHelp,
                    ErrorKind::DisplayVersion,
                    ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand,
                ];
                if !benign.contains(&err.kind()) {
                    let first = err.to_string();
                    let first = first.lines().next().unwrap_or_default().to_string();
                    checked
                        .failures
                        .push(format!("{page}:{n}: `{}`: {first}", argv.join(" ")));
                }
            }
        }
    }
}

/// The argv of each `plait` command among a line's words: the line cut at `&&`, `||`, `|`,
/// `;` and `&`, a command's leading `NAME=value` words and its redirections left out, and
/// a synopsis's brackets (`plait status [RUN] [--json]`) taken off.
fn commands(words: &[String]) -> Vec<Vec<String>> {
    let mut segments: Vec<Vec<String>> = vec![Vec::new()];
    for word in words {
        match word.as_str() {
            "&&" | "||" | "|" | ";" | "&" => segments.push(Vec::new()),
            _ => {
                let (word, ends) = match word.strip_suffix(';') {
                    Some(word) => (word, true),
                    None => (word.as_str(), false),
                };
                if let Some(last) = segments.last_mut() {
                    last.push(word.to_string());
                }
                if ends {
                    segments.push(Vec::new());
                }
            }
        }
    }
    let assignment = |w: &str| {
        w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    let mut found = Vec::new();
    for segment in segments {
        let start = segment.iter().take_while(|w| assignment(w)).count();
        if segment.get(start).map(String::as_str) != Some("plait") {
            continue;
        }
        let mut argv = Vec::new();
        let mut words = segment[start..].iter();
        while let Some(word) = words.next() {
            if matches!(word.as_str(), ">" | ">>" | "<" | "2>" | "&>" | "2>>") {
                words.next();
                continue;
            }
            if word.starts_with('>') || word.starts_with('<') || word.starts_with("2>") {
                continue;
            }
            let word = word.strip_prefix('[').unwrap_or(word);
            let word = word.strip_suffix(']').unwrap_or(word);
            argv.push(word.to_string());
        }
        found.push(argv);
    }
    found
}

/// The anchors of a page's headings, as mdBook makes them: the heading's text without its
/// markup, lower case, spaces as `-`, nothing but letters, digits, `-` and `_`.
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !fenced) else {
            continue;
        };
        let heading = heading.trim_start_matches('#').trim();
        let mut plain = String::new();
        let mut rest = heading;
        // A link's text stays, its target goes.
        while let Some(open) = rest.find("](") {
            plain.push_str(&rest[..open]);
            rest = rest[open..]
                .find(')')
                .map_or("", |close| &rest[open + close + 1..]);
        }
        plain.push_str(rest);
        let id: String = plain
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        found.push(id);
    }
    found
}

/// Each relative link of a page (`[text](other.md#anchor)`) leads to a file that exists,
/// and its anchor to a heading there.
fn check_links(root: &Path, path: &Path, page: &str, text: &str, checked: &mut Checked) {
    let dir = path.parent().unwrap_or(root);
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(open) = rest.find("](") {
            rest = &rest[open + 2..];
            let Some(close) = rest.find(')') else {
                break;
            };
            let target = &rest[..close];
            rest = &rest[close..];
            if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                continue;
            }
            checked.links += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let file = if file.is_empty() {
                path.to_path_buf()
            } else {
                dir.join(file)
            };
            let fail = |why: &str| format!("{page}:{}: link `{target}`: {why}", n + 1);
            if !file.exists() {
                checked.failures.push(fail("no such file"));
                continue;
            }
            let is_page = file.extension().is_some_and(|e| e == "md");
            if anchor.is_empty() || !is_page {
                continue;
            }
            let there = std::fs::read_to_string(&file).unwrap_or_default();
            if !anchors(&there).iter().any(|a| a == anchor) {
                checked.failures.push(fail("no such heading"));
            }
        }
    }
}

/// README.md and every page of the book, as paths relative to the repository's root.
fn pages(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    let mut found = vec![root.join("README.md")];
    walk(&root.join("docs/src"), &mut found);
    found.sort();
    found
}

#[test]
fn every_snippet_of_the_readme_and_the_book_is_one_plait_reads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = Checked::default();
    let pages = pages(root);
    for path in &pages {
        let text = std::fs::read_to_string(path).expect("a page");
        let page = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        check_page(&page, &text, &mut checked);
        check_links(root, path, &page, &text, &mut checked);
    }
    eprintln!(
        "{} pages: {} toml blocks, {} plait commands, {} links checked",
        pages.len(),
        checked.toml,
        checked.commands,
        checked.links
    );
    assert!(
        checked.failures.is_empty(),
        "{} snippet(s) plait does not read:\n{}",
        checked.failures.len(),
        checked.failures.join("\n")
    );
    // The book is where it should be: a move that lost it would check nothing.
    assert!(pages.len() > 10, "{pages:?}");
    assert!(checked.toml >= 15 && checked.commands >= 40);
}

#[test]
fn anchors_are_made_as_mdbook_makes_them() {
    let page = "# Glossary\n\n## Walls (the sandbox)\n\n```sh\n# not a heading\n```\n\n\
                ## `[setup]`: what a project needs\n### See [Waves](waves.md) too\n";
    assert_eq!(
        anchors(page),
        [
            "glossary",
            "walls-the-sandbox",
            "setup-what-a-project-needs",
            "see-waves-too"
        ]
    );
}

#[test]
fn a_renamed_flag_command_or_key_fails_with_its_page_and_line() {
    let page = "intro\n\n```sh\n$ plait run plait.toml -j 8 && plait status [RUN] [--json]\n\
                plait land RUN --onto main   # a flag that is not\n\
                FOO=1 plait frobnicate | less\n```\n\n   ```toml\n   [[task]]\n   id = \"a\"\n   \
                owns = [\"/a\"]\n   timout = \"5m\"\n   ```\n\n```toml\n# ~/.config/plait/config.toml\n\
                [sandbox]\nwritable = [\"~/.cargo\"]\n```\n\n```toml\n[sandbox]\nlimits = {}\n```\n\n\
                ```console\n$ plait diff RUN TASK --stat \\\n    --from-base\nplait nonsense in the output\n```\n";
    let mut checked = Checked::default();
    check_page("page.md", page, &mut checked);
    assert_eq!((checked.toml, checked.commands), (3, 5));
    let failures = checked.failures.join("\n");
    assert_eq!(checked.failures.len(), 4, "{failures}");
    assert!(
        failures.contains("page.md:5: `plait land RUN --onto main`"),
        "{failures}"
    );
    assert!(
        failures.contains("page.md:6: `plait frobnicate`"),
        "{failures}"
    );
    assert!(
        failures.contains("page.md:13: as a plan, line 4, column 1: unknown field `timout`"),
        "{failures}"
    );
    assert!(
        failures.contains("page.md:23: as a plan, line 1, "),
        "{failures}"
    );
    assert!(
        failures.contains("unknown field `sandbox` at the top level"),
        "{failures}"
    );
}
