//! Whose failure is it: a failing check's output reduced to what stays the same from one run
//! to the next, so that a task's failure can be told from the base's own.
//!
//! Where the output is a known test runner's (pytest, unittest and Django, cargo test, go
//! test, jest, vitest), a failure is the set of failing tests, each with its message. Else it
//! is the whole output with run-to-run noise taken out: colours, durations, timestamps,
//! temporary and plait's own paths, addresses, process ids, line and column numbers.
//!
//! A task's failure is no worse than the base's when it is the same, or when it says nothing
//! the base's did not: a runner's failing tests all among the base's, with the same messages;
//! any other output's lines all among the base's lines (numbers aside, so that a linter's
//! "Found 49 errors" after a task fixed one is not news). Then the task made nothing worse;
//! any other failure (another message, other tests, more tests, a new line) is its own.

use std::sync::LazyLock;

use regex::Regex;
use sha2::{Digest as _, Sha256};

/// At most this much of a log's end is read: a runner's summary is at its end.
const READ: u64 = 4 << 20;

/// At most this many failing tests are kept of one check.
const KEPT: usize = 200;

/// At most this many lines of other output are kept, each as a digest.
const LINES: usize = 5000;

/// What a failing check's output says failed: each failing test with its message (`runner`
/// set), or a digest of the whole output with the noise taken out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    /// The runner whose failing tests these are (`pytest`, `cargo test`, …), if one was
    /// recognised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// The failing tests, each `name: message`, sorted; or, with no runner, one line: the
    /// digest of the quieted output.
    pub lines: Vec<String>,
    /// With no runner: a short digest of each line of the quieted output with its numbers
    /// masked, sorted and unique (none when there were more than [`LINES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub each: Vec<String>,
}

impl Failure {
    /// The failure the log at `path` tells of (plait's own file, written from the check's
    /// output); one that cannot be read is a failure of its own, the same as no other.
    pub fn of_log(path: &std::path::Path) -> Failure {
        Failure::read(path).unwrap_or_else(|e| Failure {
            runner: None,
            lines: vec![format!("its output could not be read: {e}")],
            each: Vec::new(),
        })
    }

    fn read(path: &std::path::Path) -> std::io::Result<Failure> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        let mut file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        if len > READ {
            file.seek(SeekFrom::Start(len - READ))?;
        }
        let mut bytes = Vec::new();
        file.take(READ).read_to_end(&mut bytes)?;
        Ok(Failure::of(&String::from_utf8_lossy(&bytes)))
    }

    /// The failure `output` tells of.
    pub(crate) fn of(output: &str) -> Failure {
        let plain = ANSI.replace_all(output, "");
        for (runner, read) in RUNNERS {
            let mut lines = read(&plain);
            if !lines.is_empty() {
                lines.sort();
                lines.dedup();
                lines.truncate(KEPT);
                return Failure {
                    runner: Some(runner.to_string()),
                    lines,
                    each: Vec::new(),
                };
            }
        }
        let mut digest = Sha256::new();
        let mut each = Vec::new();
        for line in plain.lines() {
            let quieted = quiet(line);
            let quieted = quieted.trim_end();
            digest.update(quieted.as_bytes());
            digest.update(b"\n");
            if !quieted.trim().is_empty() {
                let masked = DIGITS.replace_all(quieted, "<n>");
                each.push(
                    plait_core::hex::lower(&Sha256::digest(masked.as_bytes()))[..16].to_string(),
                );
            }
        }
        each.sort();
        each.dedup();
        if each.len() > LINES {
            each.clear();
        }
        Failure {
            runner: None,
            lines: vec![format!(
                "output {}",
                plait_core::hex::lower(&digest.finalize())
            )],
            each,
        }
    }

    /// Whether `self` (a task's failure of a check) is no worse than `base` (the same
    /// check's on the base): the same, or saying nothing the base's did not (see the
    /// module's doc).
    pub fn no_worse_than(&self, base: &Failure) -> bool {
        if self == base {
            return true;
        }
        match (&self.runner, &base.runner) {
            (Some(mine), Some(theirs)) => {
                mine == theirs && self.lines.iter().all(|l| base.lines.contains(l))
            }
            (None, None) => {
                !self.each.is_empty()
                    && self.each.iter().all(|l| base.each.binary_search(l).is_ok())
            }
            _ => false,
        }
    }

    /// What `self` (a task's) has that `base` has not: its failing tests the base does not
    /// fail so (all of them when either is not a runner's).
    pub fn beyond<'a>(&'a self, base: &Failure) -> Vec<&'a str> {
        if self.runner.is_none() || self.runner != base.runner {
            return Vec::new();
        }
        self.lines
            .iter()
            .filter(|l| !base.lines.contains(l))
            .map(String::as_str)
            .collect()
    }
}

type Reader = fn(&str) -> Vec<String>;

/// The runners recognised, most specific first.
const RUNNERS: &[(&str, Reader)] = &[
    ("pytest", pytest),
    ("cargo test", cargo_test),
    ("go test", go_test),
    ("unittest", unittest),
    ("vitest", vitest),
    ("jest", jest),
];

static DIGITS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+").unwrap());

static ANSI: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07").unwrap());

/// Noise, each with what it becomes.
static NOISE: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // Timestamps, then clock times.
        (
            r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?",
            "<when>",
        ),
        (r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<when>"),
        // Temporary paths and plait's own places.
        (
            r#"(?:/tmp|/var/tmp|/dev/shm|/private/var/folders)/[^\s'"`:,)\]]*"#,
            "<tmp>",
        ),
        (
            r#"/[^\s'"`:,)\]]*(?:/\.git/plait/|/plait-|/\.plait/)[^\s'"`:,)\]]*"#,
            "<plait>",
        ),
        // Addresses and long hexadecimal ids (commits, hashes).
        (r"\b0x[0-9a-fA-F]+\b", "<addr>"),
        (r"\b[0-9a-f]{12,}\b", "<hex>"),
        // Process ids.
        (r"(?i)\bpid[ =:]*\d+", "pid <n>"),
        // Durations: `0.12s`, `3 ms`, `(12ms)`, `in 1.5 seconds`.
        (
            r"\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds?|m|min|minutes?|h)\b",
            "<time>",
        ),
        // Line and column numbers.
        (r"\bline \d+", "line <n>"),
        (r":\d+(?::\d+)?\b", ":<n>"),
    ]
    .into_iter()
    .map(|(re, to)| (Regex::new(re).unwrap(), to))
    .collect()
});

/// `line` with the noise taken out.
fn quiet(line: &str) -> String {
    let mut line = line.to_string();
    for (re, to) in NOISE.iter() {
        if re.is_match(&line) {
            line = re.replace_all(&line, *to).into_owned();
        }
    }
    line
}

/// pytest's short summary: `FAILED tests/test_x.py::test_y - AssertionError: …`.
fn pytest(out: &str) -> Vec<String> {
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(FAILED|ERROR) (\S+::\S+|\S+\.py)(?: - (.*))?$").unwrap());
    out.lines()
        .filter_map(|l| LINE.captures(l.trim_end()))
        .map(|c| {
            let message = c.get(3).map_or("", |m| m.as_str());
            format!("{} {}: {}", &c[1], &c[2], quiet(message))
        })
        .collect()
}

/// cargo test's `test name ... FAILED` lines, each with its `---- name stdout ----` block.
fn cargo_test(out: &str) -> Vec<String> {
    static FAILED: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^test (\S+) \.\.\. FAILED$").unwrap());
    static BLOCK: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^---- (\S+) stdout ----$").unwrap());
    let lines: Vec<&str> = out.lines().map(str::trim_end).collect();
    let mut failed: Vec<String> = Vec::new();
    for line in &lines {
        if let Some(c) = FAILED.captures(line) {
            failed.push(c[1].to_string());
        }
    }
    failed
        .iter()
        .map(|name| {
            let start = lines
                .iter()
                .position(|l| BLOCK.captures(l).is_some_and(|c| &c[1] == name.as_str()));
            let message: Vec<String> = start
                .map(|i| {
                    lines[i + 1..]
                        .iter()
                        .take_while(|l| !l.starts_with("---- ") && !l.starts_with("failures:"))
                        .filter(|l| !l.is_empty() && !l.starts_with("note: "))
                        .map(|l| quiet(&panic_location_out(l.trim())))
                        .collect()
                })
                .unwrap_or_default();
            format!("{name}: {}", message.join(" / "))
        })
        .collect()
}

/// A panic's header without where it panicked (a task may move the line).
fn panic_location_out(line: &str) -> String {
    static AT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(thread '[^']*') panicked at [^\s:]+(?::\d+){0,2}:?").unwrap()
    });
    AT.replace(line, "$1 panicked").into_owned()
}

/// go test's `--- FAIL: TestName`, each with its `file.go:12: message` lines: beneath it, or
/// (`-v`) between its `=== RUN` line and it.
fn go_test(out: &str) -> Vec<String> {
    static FAIL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s*--- FAIL: (\S+)").unwrap());
    static SAID: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s+\S+\.go:\d+: (.*)$").unwrap());
    let lines: Vec<&str> = out.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = FAIL.captures(line) else {
            continue;
        };
        let run = format!("=== RUN   {}", &c[1]);
        let before = lines[..i]
            .iter()
            .rposition(|l| l.trim_end() == run)
            .map_or(&[][..], |start| &lines[start + 1..i]);
        let said: Vec<String> = before
            .iter()
            .filter_map(|l| SAID.captures(l).map(|m| quiet(&m[1])))
            .chain(
                lines[i + 1..]
                    .iter()
                    .map_while(|l| SAID.captures(l).map(|m| quiet(&m[1]))),
            )
            .collect();
        found.push(format!("{}: {}", &c[1], said.join(" / ")));
    }
    found
}

/// unittest's (and Django's) `FAIL: test_x (module.Class)` blocks, each with the last line
/// of its traceback.
fn unittest(out: &str) -> Vec<String> {
    static HEAD: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(FAIL|ERROR): (\S+) \(([^)]*)\)").unwrap());
    let lines: Vec<&str> = out.lines().map(str::trim_end).collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = HEAD.captures(line) else {
            continue;
        };
        let block: Vec<&str> = lines[i + 1..]
            .iter()
            .skip_while(|l| l.starts_with("---") || l.is_empty())
            .take_while(|l| !l.starts_with("------") && !l.starts_with("======"))
            .copied()
            .collect();
        let message = block.iter().rev().find(|l| !l.trim().is_empty());
        found.push(format!(
            "{} {} ({}): {}",
            &c[1],
            &c[2],
            &c[3],
            quiet(message.map_or("", |m| m.trim()))
        ));
    }
    found
}

/// vitest's `FAIL  file > suite > test` lines, each with the error beneath it.
fn vitest(out: &str) -> Vec<String> {
    static FAIL: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\s*FAIL\s+(\S+.* > .+?)\s*$").unwrap());
    static ERROR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s*(\w*Error\b.*)$").unwrap());
    let lines: Vec<&str> = out.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(c) = FAIL.captures(line) {
            let error = lines[i + 1..]
                .iter()
                .take(5)
                .find_map(|l| ERROR.captures(l).map(|m| quiet(&m[1])));
            found.push(format!("{}: {}", quiet(&c[1]), error.unwrap_or_default()));
        }
    }
    found
}

/// jest's `● suite › test` headings, each with the first line of its message.
fn jest(out: &str) -> Vec<String> {
    static TITLE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s*● (.+)$").unwrap());
    let lines: Vec<&str> = out.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = TITLE.captures(line) else {
            continue;
        };
        // `● Test suite failed to run` and its kin name no test but are one failure all the
        // same.
        let message = lines[i + 1..]
            .iter()
            .map(|l| l.trim())
            .find(|l| !l.is_empty())
            .map(quiet)
            .unwrap_or_default();
        found.push(format!("{}: {message}", quiet(c[1].trim())));
    }
    found
}

#[cfg(test)]
mod tests;
