//! Gitignore-style globs for `owns` and `context`: the same rules as a `.gitignore`
//! (a pattern without a slash matches at any depth, a leading `/` anchors it, a trailing
//! `/` takes a whole directory, `!` excludes), matched against repository-relative paths.

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// Why a list of globs does not compile; it names the pattern at fault.
#[derive(Debug, thiserror::Error)]
pub enum GlobError {
    /// No glob was given.
    #[error("an empty glob matches nothing")]
    Empty,
    /// One glob cannot be read.
    #[error("glob `{pattern}` is not valid: {source}")]
    Invalid {
        /// The glob as written.
        pattern: String,
        /// Why it cannot be read.
        source: ignore::Error,
    },
    /// The globs, each valid alone, cannot be built into one set.
    #[error("globs {patterns:?} are not valid: {source}")]
    Set {
        /// The globs as written.
        patterns: Vec<String>,
        /// Why they cannot be built.
        source: ignore::Error,
    },
}

/// A compiled list of gitignore-style patterns.
#[derive(Debug, Clone)]
pub struct Globs {
    patterns: Vec<String>,
    matcher: Gitignore,
}

impl Globs {
    /// Compiles `patterns`; the error names the pattern at fault.
    pub fn new(patterns: &[String]) -> Result<Globs, GlobError> {
        let mut builder = GitignoreBuilder::new(".");
        for pattern in patterns {
            if pattern.trim().is_empty() {
                return Err(GlobError::Empty);
            }
            builder
                .add_line(None, pattern)
                .map_err(|source| GlobError::Invalid {
                    pattern: pattern.clone(),
                    source,
                })?;
        }
        let matcher = builder.build().map_err(|source| GlobError::Set {
            patterns: patterns.to_vec(),
            source,
        })?;
        Ok(Globs {
            patterns: patterns.to_vec(),
            matcher,
        })
    }

    /// An empty list, which matches nothing.
    pub fn empty() -> Globs {
        Globs {
            patterns: Vec::new(),
            matcher: Gitignore::empty(),
        }
    }

    /// Whether the file at `path` (relative, slash-separated) is matched, by itself or
    /// through one of its directories.
    pub fn matches(&self, path: &str) -> bool {
        !self.patterns.is_empty()
            && self
                .matcher
                .matched_path_or_any_parents(path, false)
                .is_ignore()
    }

    /// The patterns as written.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Where the files these globs match can be: per positive pattern, its reach.
    pub fn reaches(&self) -> Vec<Reach> {
        self.patterns.iter().filter_map(|p| reach(p)).collect()
    }

    /// Prefixes of every matched path (`""`: the whole repository), none a prefix of
    /// another: [`Reach::scope`] of each positive pattern.
    pub fn scopes(&self) -> Vec<String> {
        let mut dirs: Vec<String> = self.reaches().into_iter().map(|r| r.scope()).collect();
        dirs.sort();
        dirs.dedup();
        let mut kept: Vec<String> = Vec::new();
        for dir in dirs {
            // Sorted, so a directory comes right after the one holding it, if any.
            if !kept.last().is_some_and(|k| dir.starts_with(k.as_str())) {
                kept.push(dir);
            }
        }
        kept
    }
}

/// Where one positive pattern can match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// A literal path from the root: that file, or that directory and all below it.
    Path(String),
    /// Anything under this directory (`""`: anywhere), with a trailing `/`.
    Under(String),
}

impl Reach {
    /// A prefix of every path it matches: the literal path (the file, or the directory's
    /// paths below it), or the directory with a trailing `/` (`""` for the root).
    pub fn scope(&self) -> String {
        match self {
            Reach::Path(path) => path.clone(),
            Reach::Under(dir) => dir.clone(),
        }
    }
}

/// The reach of one gitignore-style pattern; `None` for a negation or a comment, which
/// match nothing by themselves.
fn reach(pattern: &str) -> Option<Reach> {
    if pattern.starts_with('!') || pattern.starts_with('#') {
        return None;
    }
    let trimmed = pattern.trim_end();
    let body = trimmed.strip_suffix('/').unwrap_or(trimmed);
    let rooted = body.strip_prefix('/');
    let rest = rooted.unwrap_or(body);
    // Without a separator at the start or in the middle a pattern matches at any depth.
    if rooted.is_none() && !rest.contains('/') {
        return Some(Reach::Under(String::new()));
    }
    // The literal part: up to the first wildcard, escapes taken as the characters they
    // stand for.
    let mut literal = String::with_capacity(rest.len());
    let mut chars = rest.chars();
    let mut wild = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped) => literal.push(escaped),
                None => break,
            },
            '*' | '?' | '[' | ']' | '{' | '}' => {
                wild = true;
                break;
            }
            _ => literal.push(c),
        }
    }
    if !wild && !literal.is_empty() {
        return Some(Reach::Path(literal));
    }
    // `dir/**` and `dir/*`-like patterns: the literal directories before the first wildcard.
    Some(Reach::Under(match literal.rfind('/') {
        Some(i) => literal[..=i].to_string(),
        None => String::new(),
    }))
}

/// The indices of the `files` (sorted by path bytes) whose paths start with any of
/// `scopes` (from [`Globs::scopes`]), in order: a binary search per scope, not a pass over
/// every file.
pub fn within<'a, T: AsRef<str>>(
    files: &'a [T],
    scopes: &'a [String],
) -> impl Iterator<Item = usize> + 'a {
    scopes.iter().flat_map(move |scope| {
        let start = files.partition_point(|f| f.as_ref().as_bytes() < scope.as_bytes());
        let len = files[start..].partition_point(|f| f.as_ref().starts_with(scope.as_str()));
        start..start + len
    })
}

/// Escapes a literal path so it can stand in a gitignore-style glob.
pub fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1);
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '!' | '#' | '{' | '}') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn globs(patterns: &[&str]) -> Globs {
        Globs::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_pattern_reaches_its_literal_directories() {
        let cases = [
            ("/src/a/**", Some(Reach::Under("src/a/".into()))),
            ("/src/a/", Some(Reach::Path("src/a".into()))),
            ("/src/a.rs", Some(Reach::Path("src/a.rs".into()))),
            ("src/a.rs", Some(Reach::Path("src/a.rs".into()))),
            ("src/*/x.rs", Some(Reach::Under("src/".into()))),
            ("/src/a*.rs", Some(Reach::Under("src/".into()))),
            ("*.rs", Some(Reach::Under(String::new()))),
            ("docs/", Some(Reach::Under(String::new()))),
            ("**/x.rs", Some(Reach::Under(String::new()))),
            ("/s\\*rc/x", Some(Reach::Path("s*rc/x".into()))),
            ("/we#ird\\[1\\]/", Some(Reach::Path("we#ird[1]".into()))),
            ("/a\\[b/c*", Some(Reach::Under("a[b/".into()))),
            ("!/src/a/b.rs", None),
        ];
        for (pattern, want) in cases {
            assert_eq!(reach(pattern), want, "{pattern}");
        }
    }

    #[test]
    fn scopes_cover_every_match_and_within_finds_them() {
        let files = [
            "README.md",
            "src/a.rs",
            "src/a/x.rs",
            "src/a/y/z.rs",
            "src/ab.rs",
            "src/b/x.rs",
            "tests/a.rs",
        ];
        for patterns in [
            &["/src/a/**"][..],
            &["/src/a"],
            &["/src/a*.rs", "/tests/**"],
            &["*.rs", "!/src/b/**"],
            &["src/**/x.rs"],
            &["/src/a/", "/src/a/y/"],
        ] {
            let g = globs(patterns);
            let scopes = g.scopes();
            let found: Vec<usize> = within(&files, &scopes).collect();
            let all: Vec<usize> = (0..files.len()).filter(|&i| g.matches(files[i])).collect();
            assert!(
                all.iter().all(|i| found.contains(i)),
                "{patterns:?}: scopes {scopes:?} miss some of {all:?}"
            );
        }
        assert_eq!(globs(&["/src/a/", "/src/a/y/"]).scopes(), ["src/a"]);
        assert_eq!(
            globs(&["/src/a.rs", "/src/b/**"]).scopes(),
            ["src/a.rs", "src/b/"]
        );
        let under: Vec<usize> = within(&files, &["src/a/".to_string()]).collect();
        assert_eq!(under, vec![2, 3]);
    }
}
