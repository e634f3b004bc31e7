//! `GET /api/runs/{run}/events`: the run's events as server-sent events while the page is
//! open. The server follows the run's `events.jsonl` (which every plait process working on
//! the run appends to) and its `state.json`: each new event line goes out under its kind
//! (`task`, `group`, `bisect`), and a change of the record (a decision, the merge, a
//! landing) as `state`, with the summary's new version and what changed in it since the
//! version this stream last told of: the run's head and the changed task rows, never the
//! whole record (a bare `state` when the tasks themselves changed, or most of them did:
//! then the page reads the summary again). The page itself never polls.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::{json, Value};

use super::cache::{self, Loaded, Stamp};
use super::summary::Summary;
use super::{blocking, ApiError, App};
use plait_core::cancel::Cancel;
use plait_core::state::Store;

/// How often the server looks at the run's files for what is new.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// What one page's stream has sent so far.
struct Follow {
    app: Arc<App>,
    store: Store,
    run: String,
    events: PathBuf,
    state: PathBuf,
    /// How far into the events file it has read.
    offset: u64,
    /// The record's last seen stamp.
    stamp: Option<Stamp>,
    /// The summary's version this stream last told of, and that summary.
    told: Option<(String, Arc<Summary>)>,
    /// Not before this is the record read again: a big record takes a while to read, and
    /// a run that saves it often must not keep the server reading it.
    next_read: Instant,
    ready: VecDeque<Event>,
    cancel: Cancel,
}

pub(super) async fn follow(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let cancel = app.cancel.clone();
    let follow = blocking(move || {
        let (_repo, store) = cache::store(&app)?;
        let loaded = cache::loaded(&app, store, &run)?;
        let id = loaded.state.id.clone();
        let dir = store.run(&id);
        let events = dir.events();
        let offset = std::fs::metadata(&events).map(|m| m.len()).unwrap_or(0);
        let mut follow = Follow {
            app: app.clone(),
            run: id,
            stamp: loaded.stamp,
            state: dir.state(),
            events,
            offset,
            told: None,
            next_read: Instant::now(),
            ready: VecDeque::new(),
            cancel,
            store: store.clone(),
        };
        // First a `state` with the version now, so a page that read the run before it
        // connected knows whether it missed a change.
        let first = follow.state_event(&loaded);
        follow.ready.push_back(first);
        Ok(follow)
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
                    let Ok(value) = serde_json::from_str::<Value>(line) else {
                        continue;
                    };
                    let kind = value["event"].as_str().unwrap_or("message").to_string();
                    self.ready
                        .push_back(Event::default().event(kind).data(line));
                }
            }
        }
        if Instant::now() < self.next_read {
            return;
        }
        let now = cache::stamp(&self.state);
        if now == self.stamp {
            return;
        }
        self.stamp = now;
        let started = Instant::now();
        let event = match self.app.records.get(&self.store, &self.run) {
            Ok(loaded) => self.state_event(&loaded),
            Err(_) => bare(&self.run, None),
        };
        self.ready.push_back(event);
        self.next_read = Instant::now() + started.elapsed() * 4;
    }

    /// The `state` event for `loaded`: its version and, when this stream told of an
    /// earlier one, what changed since.
    fn state_event(&mut self, loaded: &Loaded) -> Event {
        let summary = loaded.summary();
        let version = loaded.version();
        let told = self.told.replace((version.clone(), summary.clone()));
        let Some((since, old)) = told else {
            return bare(&self.run, Some(&version));
        };
        if since == version {
            return bare(&self.run, Some(&version));
        }
        let Some(changed) = summary.changes_since(&old) else {
            return bare(&self.run, Some(&version));
        };
        let mut head = summary.head.clone();
        head.insert("live".into(), json!(self.store.is_running(&self.run)));
        let data = json!({
            "event": "state",
            "run": self.run,
            "version": version,
            "since": since,
            "head": head,
            "tasks": changed,
        });
        Event::default().event("state").data(data.to_string())
    }
}

/// A `state` event that says only that the record is now at `version`.
fn bare(run: &str, version: Option<&str>) -> Event {
    let mut data = json!({"event": "state", "run": run});
    if let Some(version) = version {
        data["version"] = json!(version);
    }
    Event::default().event("state").data(data.to_string())
}
