//! The guard's judgement of a `Bash` command, an allowlist: the command is read into words
//! as sh reads them ([`super::shell`]), its program (for git, its subcommand) must be one of
//! [`super::programs`], and each word is resolved as that program resolves it — `--` ends
//! the options, a long option may be any unique prefix of one the program knows (an exact
//! name wins), `--name=value` or `--name value`, short options bundle (`-abc`) and the first
//! that takes an argument takes the rest of the word or the next one, `-NUM` counts — and
//! must come out as an allowed option. Operands and file arguments must then pass the read
//! confinement, a glob through each file it can match. Anything else is refused, with what.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::programs::{Arg, Operands, Opt, Program, Syntax, GIT, GIT_GLOBAL, PROGRAMS};
use super::shell::{self, Word};
use super::{read_verdict, GuardFile, Verdict};

/// Why a command is refused.
#[derive(Debug)]
enum Refusal {
    /// Not on the allowlist; the reason follows the general refusal.
    Command(String),
    /// It reads outside the repository ([`read_verdict`]'s own answer).
    Read(Verdict),
}

impl From<String> for Refusal {
    fn from(reason: String) -> Self {
        Refusal::Command(reason)
    }
}

/// Whether a shell command is one of the read-only commands an agent may run.
pub(super) fn command_verdict(guard: &GuardFile, cwd: &Path, command: &str) -> Verdict {
    match judge(guard, cwd, command) {
        Ok(()) => Verdict::Allow,
        Err(Refusal::Read(verdict)) => verdict,
        Err(Refusal::Command(reason)) => {
            let names =
                |programs: &[Program]| -> Vec<&str> { programs.iter().map(|p| p.name).collect() };
            Verdict::Deny(format!(
                "plait: `{command}` is refused. Agents here may run only read-only commands, with no \
shell operators: git {}, and {}. Edit files with the edit tools; the project's checks run after \
you finish. Refused: {reason}.",
                names(GIT).join("/"),
                names(PROGRAMS).join(", ")
            ))
        }
    }
}

fn judge(guard: &GuardFile, cwd: &Path, command: &str) -> Result<(), Refusal> {
    let words = shell::words(command)?;
    let Some((first, args)) = words.split_first() else {
        return Err(String::from("no command").into());
    };
    let (program, args) = program(first, args)?;
    let parsed = parse(program, args)?;
    read(guard, cwd, ".")?;
    for file in &parsed.files {
        read(guard, cwd, file)?;
    }
    let skip_pattern = program.operands == Operands::PatternThenPaths && !parsed.pattern_given;
    for (i, operand) in parsed.operands.iter().enumerate() {
        if program.operands == Operands::TailPaths && operand.text.starts_with('+') {
            return Err(format!("tail's old `{}` form", operand.text).into());
        }
        match &operand.glob {
            Some(pattern) => glob_verdict(guard, cwd, pattern, &operand.text)?,
            None if i == 0 && skip_pattern => {}
            None => read(guard, cwd, &operand.text)?,
        }
    }
    Ok(())
}

/// The program `first` names and the words it parses: for git, its subcommand's, after the
/// few global options allowed.
fn program<'a>(first: &Word, args: &'a [Word]) -> Result<(&'static Program, &'a [Word]), String> {
    let name = first.text.as_str();
    if first.glob.is_some() {
        return Err(format!("a glob (`{name}`) as the program"));
    }
    if name != "git" {
        if name.contains('=') {
            return Err(format!("`{name}`: an environment assignment"));
        }
        let program = PROGRAMS.iter().find(|p| p.name == name);
        return program
            .map(|p| (p, args))
            .ok_or_else(|| format!("`{name}` is not one of them"));
    }
    let mut rest = args;
    while let Some((word, tail)) = rest.split_first() {
        if !word.text.starts_with('-') {
            break;
        }
        if word.glob.is_some() || !GIT_GLOBAL.contains(&word.text.as_str()) {
            return Err(format!(
                "git's option `{}` before the subcommand (only {} are allowed there)",
                word.text,
                GIT_GLOBAL.join(", ")
            ));
        }
        rest = tail;
    }
    let Some((sub, tail)) = rest.split_first() else {
        return Err("git without a subcommand".into());
    };
    GIT.iter()
        .find(|p| sub.glob.is_none() && p.name == sub.text)
        .map(|p| (p, tail))
        .ok_or_else(|| format!("`git {}` is not one of them", sub.text))
}

/// What a command's words come to once its options are resolved.
#[derive(Debug, Default)]
struct Parsed<'a> {
    operands: Vec<&'a Word>,
    /// What must pass the read confinement besides the operands: arguments of
    /// [`Arg::File`] options and, in a [`Syntax::GitChain`] command, every argument in a
    /// word of its own (were a table wrong about an option's argument, git would take that
    /// word for a revision or a path: `git diff` compares two paths outside the repository).
    files: Vec<&'a str>,
    /// An option gave the pattern (`-e`, `-f`), so the first operand is a file.
    pattern_given: bool,
}

/// Resolves every word of `words` as `program` does, refusing the first that is not an
/// allowed option or its argument.
fn parse<'a>(program: &Program, words: &'a [Word]) -> Result<Parsed<'a>, String> {
    let mut parsed = Parsed::default();
    let mut words = words.iter();
    let mut options_end = false;
    while let Some(word) = words.next() {
        let text = word.text.as_str();
        if options_end || !text.starts_with('-') || text == "-" {
            parsed.operands.push(word);
            continue;
        }
        if word.glob.is_some() {
            return Err(format!("`{text}`: an unquoted `*` or `?` in an option"));
        }
        if text == "--" || (program.syntax.is_git() && text == "--end-of-options") {
            options_end = true;
            continue;
        }
        let (opt, attached) = match text.strip_prefix("--") {
            Some(name) => resolve_long(program, name)?,
            None => match resolve_short(program, &text[1..])? {
                Some(found) => found,
                None => continue,
            },
        };
        let value = match (opt.arg, attached) {
            (Arg::Flag, None) | (Arg::MaybeValue, _) => continue,
            (Arg::Flag, Some(_)) => return Err(format!("`{text}`: the option takes no value")),
            (_, Some(value)) => value,
            (_, None) => {
                let value = next_value(program, text, words.next())?;
                if program.syntax == Syntax::GitChain && opt.arg != Arg::File {
                    parsed.files.push(value);
                }
                value
            }
        };
        if matches!(opt.arg, Arg::File | Arg::Pattern) {
            parsed.pattern_given = true;
        }
        if opt.arg == Arg::File {
            parsed.files.push(value);
        }
    }
    Ok(parsed)
}

/// The word after option `option` as its argument.
fn next_value<'a>(
    program: &Program,
    option: &str,
    next: Option<&'a Word>,
) -> Result<&'a str, String> {
    let next = next.ok_or_else(|| format!("`{option}` wants a value"))?;
    if next.glob.is_some() {
        return Err(format!(
            "`{option} {}`: an unquoted `*` or `?` in an option's value",
            next.text
        ));
    }
    if program.syntax == Syntax::GitChain && next.text.starts_with('-') {
        return Err(format!(
            "`{option} {}`: a value starting with `-` must be attached (`{option}=...`, `-X...`)",
            next.text
        ));
    }
    Ok(&next.text)
}

/// Resolves a long option (`name` is what follows `--`, with any `=value`) as the program
/// does: an exact name, or a prefix of exactly one of every long option it knows.
fn resolve_long<'a>(
    program: &Program,
    word: &'a str,
) -> Result<(&'static Opt, Option<&'a str>), String> {
    let (name, value) = match word.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (word, None),
    };
    let mut known: BTreeSet<String> = program.known_long().map(String::from).collect();
    if program.syntax.is_git() {
        // parse-options accepts `--no-NAME` for `--NAME` and `--NAME` for `--no-NAME`
        // unless an option forbids it; counting every such spelling only makes more
        // prefixes ambiguous.
        let turned: Vec<String> = known
            .iter()
            .map(|k| {
                k.strip_prefix("no-")
                    .map_or_else(|| format!("no-{k}"), String::from)
            })
            .collect();
        known.extend(turned);
    }
    let shown = program_name(program);
    let resolved = if known.contains(name) {
        name
    } else if program.syntax.abbreviates() && !name.is_empty() {
        let mut matches = known.iter().filter(|k| k.starts_with(name));
        match (matches.next(), matches.next()) {
            (Some(one), None) => one.as_str(),
            (Some(a), Some(b)) => {
                return Err(format!(
                    "`--{name}` is ambiguous for {shown} (`--{a}`, `--{b}`, …)"
                ))
            }
            (None, _) => return Err(format!("`--{name}` is no option of {shown}")),
        }
    } else {
        return Err(format!(
            "`--{name}` is no option the guard allows for {shown}"
        ));
    };
    let opt = program.long(resolved).ok_or_else(|| {
        if resolved == name {
            format!("`--{name}` is no option the guard allows for {shown}")
        } else {
            format!("`--{name}` means `--{resolved}`, which the guard does not allow for {shown}")
        }
    })?;
    Ok((opt, value))
}

/// Resolves `bundle`, the letters after `-`: the option among them that takes an argument,
/// with the rest of the word, if one does. `-NUM` is a count where the program has one.
fn resolve_short<'a>(
    program: &Program,
    bundle: &'a str,
) -> Result<Option<(&'static Opt, Option<&'a str>)>, String> {
    if program.numeric && bundle.chars().all(|c| c.is_ascii_digit()) {
        return Ok(None);
    }
    for (at, c) in bundle.char_indices() {
        let opt = program.short(c).ok_or_else(|| {
            format!(
                "`-{c}` is no option the guard allows for {}",
                program_name(program)
            )
        })?;
        let rest = &bundle[at + c.len_utf8()..];
        if opt.arg != Arg::Flag {
            return Ok(Some((opt, (!rest.is_empty()).then_some(rest))));
        }
        if program.syntax == Syntax::Exact && !rest.is_empty() {
            return Err(format!(
                "`-{bundle}`: {} takes one option a word",
                program_name(program)
            ));
        }
    }
    Ok(None)
}

fn program_name(program: &Program) -> String {
    if program.syntax.is_git() {
        format!("git {}", program.name)
    } else {
        program.name.to_string()
    }
}

fn read(guard: &GuardFile, cwd: &Path, path: &str) -> Result<(), Refusal> {
    match read_verdict(guard, cwd, path) {
        Verdict::Allow => Ok(()),
        refused => Err(Refusal::Read(refused)),
    }
}

/// How many files a glob may match before the guard gives up judging it.
const MAX_GLOB_MATCHES: usize = 2000;

/// Whether the files a glob operand can expand to may be read. The shell replaces it by
/// the paths it matches (or leaves it as it is when none does), so each must pass the read
/// confinement — a match may be a symbolic link out — and none may start with `-`, which
/// the program would take for an option. This expansion matches at least what sh's does
/// (`*` matches dot files here too); `**`, which zsh and bash's globstar expand through
/// every directory, is refused.
fn glob_verdict(guard: &GuardFile, cwd: &Path, pattern: &str, text: &str) -> Result<(), Refusal> {
    if pattern.contains("**") {
        return Err(format!("`{text}`: `**` in a glob").into());
    }
    read(guard, cwd, text)?;
    let mut paths = vec![PathBuf::from(if pattern.starts_with('/') {
        "/"
    } else {
        ""
    })];
    for part in pattern.split('/').filter(|p| !p.is_empty()) {
        let part = compile(part);
        let mut next = Vec::new();
        for base in &paths {
            if part.iter().all(|p| matches!(p, Pat::Char(_))) {
                let literal: String = part
                    .iter()
                    .map(|p| if let Pat::Char(c) = p { *c } else { '?' })
                    .collect();
                next.push(base.join(literal));
                continue;
            }
            let Ok(entries) = std::fs::read_dir(cwd.join(base)) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if matches!(part.first(), Some(Pat::Char('.'))) {
                names.extend([".".into(), "..".into()]);
            }
            let chars = |n: &String| n.chars().collect::<Vec<_>>();
            next.extend(
                names
                    .iter()
                    .filter(|n| matches(&part, &chars(n)))
                    .map(|n| base.join(n)),
            );
        }
        if next.len() > MAX_GLOB_MATCHES {
            return Err(format!("`{text}` matches too many files").into());
        }
        paths = next;
    }
    for path in paths {
        let matched = path.to_string_lossy();
        if matched.starts_with('-') {
            return Err(
                format!("`{text}` matches `{matched}`, which would pass for an option").into(),
            );
        }
        read(guard, cwd, &matched)?;
    }
    Ok(())
}

/// One character of a glob pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pat {
    Char(char),
    /// `*`
    Any,
    /// `?`
    One,
}

/// One path component of a pattern from [`Word::glob`] (quoted characters escaped).
fn compile(part: &str) -> Vec<Pat> {
    let mut out = Vec::new();
    let mut chars = part.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '\\' => Pat::Char(chars.next().unwrap_or('\\')),
            '*' => Pat::Any,
            '?' => Pat::One,
            c => Pat::Char(c),
        });
    }
    out
}

/// Whether `name` matches `pattern` (`*` any characters, `?` one).
fn matches(pattern: &[Pat], name: &[char]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(Pat::One) => (p, n) = (p + 1, n + 1),
            Some(Pat::Char(c)) if *c == name[n] => (p, n) = (p + 1, n + 1),
            Some(Pat::Any) => {
                star = Some((p, n));
                p += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    (p, n) = (sp + 1, sn + 1);
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|x| *x == Pat::Any)
}

#[cfg(test)]
mod tests;
