//! Steering a running run: what a person asks of one task while the run goes on (`plait
//! tell`, `plait stop`, the page), carried to the run's own process through its
//! directory. A request is one JSON file in `requests/`, written whole (a rename); the run
//! takes the requests in the order they were made and answers each beside it
//! (`<request>.answer.json`), which the asker waits for. Below both the use case that
//! asks (`ops::steer`) and the orchestrator that takes them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use plait_core::state::{now_ms, write_atomic, RunDir};

/// What a person asks of one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ask {
    /// Tell its agent `text`, at its next turn (or next round).
    Tell {
        /// What to tell it.
        text: String,
    },
    /// Stop it now; with `keep`, its work so far is collected and judged.
    Stop {
        /// Collect and judge its work so far instead of leaving it out.
        keep: bool,
    },
}

/// One request: the task (or attempt, `<task>~<n>`) it is for, what is asked, and by whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The task's id.
    pub task: String,
    /// What is asked.
    #[serde(flatten)]
    pub ask: Ask,
    /// Where from: `command line` or `page`.
    pub by: String,
    /// When, in milliseconds since the Unix epoch.
    pub at: u64,
}

/// The run's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// Whether it was done (a tell delivered or queued, a stop made).
    pub ok: bool,
    /// What became of it, in a sentence.
    pub message: String,
}

/// The file of the answer to the request at `request`.
fn answer_path(request: &Path) -> PathBuf {
    request.with_extension("answer.json")
}

/// Writes `request` into run `dir`'s requests; the path that names it.
pub fn submit(dir: &RunDir, request: &Request) -> std::io::Result<PathBuf> {
    let requests = dir.requests();
    std::fs::create_dir_all(&requests)?;
    // Sortable by when it was made; the process id and a count keep two apart.
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("{:015}-{}-{n}.json", now_ms(), std::process::id());
    let path = requests.join(name);
    let text = serde_json::to_vec(request).map_err(std::io::Error::other)?;
    write_atomic(&path, &text).map_err(std::io::Error::other)?;
    Ok(path)
}

/// Waits at most `limit` for the run's answer to the request at `request`; `None` when
/// none came (the request stays for the run to take).
pub async fn await_answer(request: &Path, limit: Duration) -> Option<Answer> {
    let path = answer_path(request);
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Ok(text) = std::fs::read(&path) {
            if let Ok(answer) = serde_json::from_slice(&text) {
                let _ = std::fs::remove_file(&path);
                return Some(answer);
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The requests of run `dir` not yet taken, oldest first, each with its path. A file that
/// is no request is answered so and left out.
pub fn pending(dir: &RunDir) -> Vec<(PathBuf, Request)> {
    let Ok(entries) = std::fs::read_dir(dir.requests()) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".json") && !name.ends_with(".answer.json") && !name.starts_with('.')
        })
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        match std::fs::read(&path)
            .ok()
            .and_then(|t| serde_json::from_slice::<Request>(&t).ok())
        {
            Some(request) => out.push((path, request)),
            None => answer(
                &path,
                &Answer {
                    ok: false,
                    message: "the request could not be read".to_string(),
                },
            ),
        }
    }
    out
}

/// Answers the request at `request` and takes it out of the requests.
pub fn answer(request: &Path, answer: &Answer) {
    if let Ok(text) = serde_json::to_vec(answer) {
        let _ = write_atomic(&answer_path(request), &text);
    }
    let _ = std::fs::remove_file(request);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_taken_in_order_and_answered_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir(dir.path().to_path_buf());
        let first = Request {
            task: "a".into(),
            ask: Ask::Tell {
                text: "use tracing".into(),
            },
            by: "command line".into(),
            at: 1,
        };
        let second = Request {
            task: "b".into(),
            ask: Ask::Stop { keep: true },
            ..first.clone()
        };
        let one = submit(&run, &first).unwrap();
        let two = submit(&run, &second).unwrap();
        std::fs::write(run.requests().join("0-junk.json"), "not json").unwrap();
        let taken = pending(&run);
        assert_eq!(taken.len(), 2);
        assert_eq!((taken[0].0.clone(), &taken[0].1), (one.clone(), &first));
        assert_eq!(taken[1].1, second);
        answer(
            &one,
            &Answer {
                ok: true,
                message: "told".into(),
            },
        );
        assert!(!one.exists());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let got = rt.block_on(await_answer(&one, Duration::from_millis(100)));
        assert_eq!(got.map(|a| a.message).as_deref(), Some("told"));
        assert!(rt
            .block_on(await_answer(&two, Duration::from_millis(50)))
            .is_none());
        assert!(pending(&run).iter().all(|(p, _)| p != &one));
    }
}
