//! `GET /api/runs/{run}/events`: the run's events as server-sent events while the page is
//! open. The server follows the run's `events.jsonl` (which every plait process working on
//! the run appends to) and its `state.json`: each new event line goes out under its kind
//! (`task`, `group`, `bisect`), and a change of the record (a decision, the merge, a
//! landing) as `state`. The page itself never polls.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{Path as UrlPath, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;

use super::{blocking, data, ApiError, App};
use crate::cancel::Cancel;

/// How often the server looks at the run's files for what is new.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// What one page's stream has sent so far.
struct Follow {
    run: String,
    events: PathBuf,
    state: PathBuf,
    /// How far into the events file it has read.
    offset: u64,
    /// The record's last seen modification time and size.
    stamp: Option<(SystemTime, u64)>,
    ready: VecDeque<Event>,
    cancel: Cancel,
}

pub(super) async fn follow(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let cancel = app.cancel.clone();
    let follow = blocking(move || {
        let (_repo, store) = data::store(&app)?;
        let state = data::load(&store, &run)?;
        let dir = store.run_dir(&state.id);
        let events = dir.join(crate::orchestrator::EVENTS_FILE);
        let offset = std::fs::metadata(&events).map(|m| m.len()).unwrap_or(0);
        let state_path = dir.join("state.json");
        let mut ready = VecDeque::new();
        // First a `state`, so a page that read the run before it connected catches up.
        ready.push_back(state_event(&state.id));
        Ok(Follow {
            run: state.id,
            stamp: stamp(&state_path),
            events,
            state: state_path,
            offset,
            ready,
            cancel,
        })
    })
    .await?;
    let stream = futures_util::stream::unfold(follow, |mut follow| async move {
        loop {
            if let Some(event) = follow.ready.pop_front() {
                return Some((Ok(event), follow));
            }
            tokio::select! {
                _ = tokio::time::sleep(LOOK_EVERY) => {}
                // The server is stopping: the stream ends, so the shutdown need not wait.
                _ = follow.cancel.cancelled() => return None,
            }
            follow = tokio::task::spawn_blocking(move || {
                follow.look();
                follow
            })
            .await
            .ok()?;
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

impl Follow {
    /// Queues the events appended since the last look, then a `state` if the record
    /// changed.
    fn look(&mut self) {
        if let Ok(mut file) = std::fs::File::open(&self.events) {
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            if len < self.offset {
                self.offset = 0;
            }
            let mut bytes = Vec::new();
            if len > self.offset
                && file.seek(SeekFrom::Start(self.offset)).is_ok()
                && file.read_to_end(&mut bytes).is_ok()
            {
                // Only whole lines: a line being written is read next time.
                let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                self.offset += whole as u64;
                for line in String::from_utf8_lossy(&bytes[..whole]).lines() {
                    let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
                        continue;
                    };
                    let kind = value["event"].as_str().unwrap_or("message").to_string();
                    self.ready
                        .push_back(Event::default().event(kind).data(line));
                }
            }
        }
        let now = stamp(&self.state);
        if now != self.stamp {
            self.stamp = now;
            self.ready.push_back(state_event(&self.run));
        }
    }
}

fn stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn state_event(run: &str) -> Event {
    Event::default()
        .event("state")
        .data(serde_json::json!({"event": "state", "run": run}).to_string())
}
