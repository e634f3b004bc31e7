//! The diff engine: the changes between two commits' trees, file by file, as a unified
//! diff or a `--stat` summary for the terminal (`plait diff`, `plait review`, a reviewer's
//! input) and as hunks a page lays out (`serve`). Line diffs are `similar`'s, bounded by a
//! timeout so that a huge file makes a coarser diff, not a slow one.

use std::fmt::Write as _;

use git2::{Oid, Repository, Tree};
use similar::{ChangeTag, TextDiff};

use plait_core::git::tree_changes;

/// How to show a diff.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiffStyle {
    /// Whether to color it for a terminal.
    pub color: bool,
    /// Whether to show only the changed files and their line counts.
    pub stat: bool,
}

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const CYAN: &str = "\x1b[36m";
pub(super) const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// The unified diff (or `--stat` summary) between two commits' trees.
pub fn diff_text(
    repo: &Repository,
    from: Oid,
    to: Oid,
    style: DiffStyle,
) -> Result<String, git2::Error> {
    let mut out = String::new();
    let mut stats = Vec::new();
    for (path, old, new) in changed_files(repo, from, to)? {
        let counts = file_diff(&mut out, &path, old.as_deref(), new.as_deref(), style);
        stats.push((path, counts));
    }
    if style.stat {
        stat_lines(&mut out, &stats, style);
    }
    Ok(out)
}

/// Writes one file's diff (unless `style.stat`) and returns its lines added and removed,
/// `None` for a binary file; `old` or `new` is `None` where the file does not exist.
fn file_diff(
    out: &mut String,
    path: &str,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
    style: DiffStyle,
) -> Option<(usize, usize)> {
    let (old_bytes, new_bytes) = (old.unwrap_or_default(), new.unwrap_or_default());
    if is_binary(old_bytes, new_bytes) {
        if !style.stat {
            let _ = writeln!(
                out,
                "{}diff --git a/{path} b/{path}{}",
                paint(style, BOLD),
                reset(style)
            );
            let _ = writeln!(out, "Binary files differ");
        }
        return None;
    }
    let old_text = String::from_utf8_lossy(old_bytes);
    let new_text = String::from_utf8_lossy(new_bytes);
    let diff = line_diff(&old_text, &new_text);
    if !style.stat {
        file_header(out, path, old.is_some(), new.is_some(), style);
        hunk_lines(out, &diff, style);
    }
    Some(line_counts(&diff))
}

/// The lines a diff adds and removes.
fn line_counts<'a>(diff: &TextDiff<'a, 'a, '_, str>) -> (usize, usize) {
    let (mut plus, mut minus) = (0usize, 0usize);
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => plus += 1,
            ChangeTag::Delete => minus += 1,
            ChangeTag::Equal => {}
        }
    }
    (plus, minus)
}

/// A text file's `diff --git`, `---` and `+++` lines; a side where the file did not exist
/// is `/dev/null`.
fn file_header(
    out: &mut String,
    path: &str,
    old_existed: bool,
    new_existed: bool,
    style: DiffStyle,
) {
    let _ = writeln!(out, "{}diff --git a/{path} b/{path}", paint(style, BOLD));
    let _ = writeln!(
        out,
        "--- {}",
        if old_existed {
            format!("a/{path}")
        } else {
            "/dev/null".into()
        }
    );
    let _ = writeln!(
        out,
        "+++ {}{}",
        if new_existed {
            format!("b/{path}")
        } else {
            "/dev/null".into()
        },
        reset(style)
    );
}

/// A diff's hunks: each header, then its lines with three lines of context.
fn hunk_lines<'a>(out: &mut String, diff: &TextDiff<'a, 'a, '_, str>, style: DiffStyle) {
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        let _ = writeln!(
            out,
            "{}{}{}",
            paint(style, CYAN),
            hunk.header(),
            reset(style)
        );
        for change in hunk.iter_changes() {
            let (sign, color) = match change.tag() {
                ChangeTag::Insert => ('+', GREEN),
                ChangeTag::Delete => ('-', RED),
                ChangeTag::Equal => (' ', ""),
            };
            let line = change.value();
            let colored = change.tag() != ChangeTag::Equal;
            let _ = write!(
                out,
                "{}{sign}{}",
                if colored { paint(style, color) } else { "" },
                line.trim_end_matches('\n')
            );
            let _ = writeln!(out, "{}", if colored { reset(style) } else { "" });
            if change.missing_newline() {
                let _ = writeln!(out, "\\ No newline at end of file");
            }
        }
    }
}

/// The `--stat` summary: a line per file with its bar, then the totals.
fn stat_lines(out: &mut String, stats: &[(String, Option<(usize, usize)>)], style: DiffStyle) {
    let width = stats.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
    let (mut total_plus, mut total_minus) = (0, 0);
    for (path, counts) in stats {
        match counts {
            Some((plus, minus)) => {
                total_plus += plus;
                total_minus += minus;
                let bar_plus = "+".repeat((*plus).min(40));
                let bar_minus = "-".repeat((*minus).min(40));
                let _ = writeln!(
                    out,
                    " {path:<width$} | {:>4} {}{bar_plus}{}{}{bar_minus}{}",
                    plus + minus,
                    paint(style, GREEN),
                    reset(style),
                    paint(style, RED),
                    reset(style)
                );
            }
            None => {
                let _ = writeln!(out, " {path:<width$} | Bin");
            }
        }
    }
    let _ = writeln!(
        out,
        " {} file(s) changed, {total_plus} insertion(s)(+), {total_minus} deletion(s)(-)",
        stats.len()
    );
}

/// One file of a diff, in a shape a page can lay out (unified or side by side).
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileDiff {
    pub(crate) path: String,
    /// `added`, `modified` or `deleted`.
    pub kind: &'static str,
    pub(crate) binary: bool,
    pub(crate) added: usize,
    pub(crate) removed: usize,
    /// Many changed lines: shown folded.
    pub large: bool,
    pub(crate) hunks: Vec<Hunk>,
}

/// A hunk of a [`FileDiff`], with three lines of context.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Hunk {
    pub(crate) header: String,
    pub(crate) lines: Vec<HunkLine>,
}

/// A line of a [`Hunk`]: `op` is ` `, `+` or `-`; its numbers on either side.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct HunkLine {
    pub(crate) op: char,
    pub(crate) old: Option<usize>,
    pub(crate) new: Option<usize>,
    pub(crate) text: String,
}

/// Changed lines past which a file's diff is folded.
const LARGE_DIFF: usize = 400;

/// The diff between two commits' trees, file by file.
pub fn file_diffs(repo: &Repository, from: Oid, to: Oid) -> Result<Vec<FileDiff>, git2::Error> {
    let changes = changed_files(repo, from, to)?;
    Ok(changes
        .into_iter()
        .map(|(path, old, new)| file_diff_of(path, old.as_deref(), new.as_deref()))
        .collect())
}

/// One file's [`FileDiff`] from its content on either side (`None` where it does not
/// exist).
pub(crate) fn file_diff_of(path: String, old: Option<&[u8]>, new: Option<&[u8]>) -> FileDiff {
    let kind = match (&old, &new) {
        (None, _) => "added",
        (_, None) => "deleted",
        _ => "modified",
    };
    let (old, new) = (old.unwrap_or_default(), new.unwrap_or_default());
    let mut file = FileDiff {
        path,
        kind,
        binary: is_binary(old, new),
        added: 0,
        removed: 0,
        large: false,
        hunks: Vec::new(),
    };
    if file.binary {
        return file;
    }
    let old_text = String::from_utf8_lossy(old);
    let new_text = String::from_utf8_lossy(new);
    let diff = line_diff(&old_text, &new_text);
    (file.added, file.removed) = line_counts(&diff);
    file.large = file.added + file.removed > LARGE_DIFF;
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        let lines = hunk
            .iter_changes()
            .map(|c| HunkLine {
                op: match c.tag() {
                    ChangeTag::Insert => '+',
                    ChangeTag::Delete => '-',
                    ChangeTag::Equal => ' ',
                },
                old: c.old_index().map(|i| i + 1),
                new: c.new_index().map(|i| i + 1),
                text: c.value().trim_end_matches(['\n', '\r']).to_string(),
            })
            .collect();
        file.hunks.push(Hunk {
            header: hunk.header().to_string(),
            lines,
        });
    }
    file
}

/// Each path that differs between two commits' trees, with its content on either side
/// (`None` where it does not exist).
type Changed = (String, Option<Vec<u8>>, Option<Vec<u8>>);

fn changed_files(repo: &Repository, from: Oid, to: Oid) -> Result<Vec<Changed>, git2::Error> {
    let from_tree = repo.find_commit(from)?.tree()?;
    let to_tree = repo.find_commit(to)?.tree()?;
    let changes = tree_changes(repo, &from_tree, &to_tree)
        .map_err(|e| git2::Error::from_str(&e.to_string()))?;
    changes
        .into_keys()
        .map(|path| {
            let old = blob_text(repo, &from_tree, &path)?;
            let new = blob_text(repo, &to_tree, &path)?;
            Ok((path, old, new))
        })
        .collect()
}

/// Whether either side of a file's change is binary (holds a NUL byte), as git judges.
fn is_binary(old: &[u8], new: &[u8]) -> bool {
    old.contains(&0) || new.contains(&0)
}

/// The line diff of two texts. Past the timeout the diff is coarser, not slower: a file of
/// 200,000 new lines against one old line would otherwise take minutes (Myers is
/// O((N+M)·D)).
fn line_diff<'a>(old: &'a str, new: &'a str) -> TextDiff<'a, 'a, 'a, str> {
    TextDiff::configure()
        .timeout(std::time::Duration::from_millis(500))
        .diff_lines(old, new)
}

/// `code` when the style has colour, else nothing.
pub(super) fn paint(style: DiffStyle, code: &'static str) -> &'static str {
    if style.color {
        code
    } else {
        ""
    }
}

/// The code that ends a colour, when the style has colour.
pub(super) fn reset(style: DiffStyle) -> &'static str {
    paint(style, RESET)
}

/// The content of `path` in `tree`: `None` where it does not exist, empty where it is not
/// a blob (a submodule).
fn blob_text(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
) -> Result<Option<Vec<u8>>, git2::Error> {
    match tree.get_path(std::path::Path::new(path)) {
        Ok(entry) => match entry.to_object(repo)?.into_blob() {
            Ok(blob) => Ok(Some(blob.content().to_vec())),
            Err(_) => Ok(Some(Vec::new())),
        },
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
