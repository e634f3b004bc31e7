//! Gitignore-style globs for `owns` and `context`: the same rules as a `.gitignore`
//! (a pattern without a slash matches at any depth, a leading `/` anchors it, a trailing
//! `/` takes a whole directory, `!` excludes), matched against repository-relative paths.

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// Why a list of globs does not compile; it names the pattern at fault.
#[derive(Debug, thiserror::Error)]
pub enum GlobError {
    #[error("an empty glob matches nothing")]
    Empty,
    #[error("glob `{pattern}` is not valid: {source}")]
    Invalid {
        pattern: String,
        source: ignore::Error,
    },
    #[error("globs {patterns:?} are not valid: {source}")]
    Set {
        patterns: Vec<String>,
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
