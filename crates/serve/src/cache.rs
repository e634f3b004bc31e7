//! The runs' records as last read, shared by every request and every page's event stream:
//! a record is parsed again only when its `state.json` changed (modification time, size,
//! file), and what the API makes of it (the summary, each JSON body plain and gzipped) is
//! made once per version of the record. A 10,000-task record takes a few hundred
//! milliseconds to parse and as long to serialize, so a page that reloads, and each open
//! page that follows the run, must not pay that again. Every read of a record goes through
//! here: [`store`] opens the repository's, [`loaded`] finds a run and takes its record.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};

use super::summary::Summary;
use super::{ApiError, App};
use plait_core::state::{RunState, StateError, Store};
use plait_core::sync::Locked as _;
use plait_stages::context::Repo;

/// How many runs' records are kept; the least recently used goes first.
const KEPT: usize = 4;

/// Which version of a record a file holds: its modification time, size and inode (a save
/// renames a new file into place).
pub(super) type Stamp = (SystemTime, u64, u64);

/// The stamp of the file at `path`, if it exists.
pub(super) fn stamp(path: &std::path::Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len(), meta.ino()))
}

/// One version of a run's record and what was made of it.
pub(super) struct Loaded {
    pub stamp: Option<Stamp>,
    pub state: RunState,
    summary: OnceLock<Arc<Summary>>,
    /// The JSON bodies made from this version, by what they are and whether the run was
    /// live when they were made.
    bodies: Mutex<HashMap<(&'static str, bool), Arc<Body>>>,
}

impl Loaded {
    /// This version's name, as the summary and the `state` events say it.
    pub fn version(&self) -> String {
        match self.stamp {
            Some((modified, len, inode)) => {
                let ns = modified
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                format!("{ns:x}-{len:x}-{inode:x}")
            }
            None => "none".to_string(),
        }
    }

    /// The run page's summary of this version.
    pub fn summary(&self) -> Arc<Summary> {
        self.summary
            .get_or_init(|| Arc::new(Summary::of(&self.state)))
            .clone()
    }

    /// The body `kind` for `live`, made by `make` the first time it is asked for.
    pub fn body(
        &self,
        kind: &'static str,
        live: bool,
        make: impl FnOnce() -> Result<Vec<u8>, ApiError>,
    ) -> Result<Arc<Body>, ApiError> {
        let mut bodies = self.bodies.locked();
        if let Some(body) = bodies.get(&(kind, live)) {
            return Ok(body.clone());
        }
        let body = Arc::new(Body::new(make()?));
        bodies.insert((kind, live), body.clone());
        Ok(body)
    }
}

/// A run's place in [`Records`]: its record once read. Its lock is held while the record
/// is read, so two requests for a changed record read it once.
type Slot = Arc<Mutex<Option<Arc<Loaded>>>>;

/// The records of the runs asked for lately.
#[derive(Default)]
pub(super) struct Records {
    /// Each run's slot, with when it was last used.
    runs: Mutex<HashMap<String, (u64, Slot)>>,
    clock: std::sync::atomic::AtomicU64,
}

impl Records {
    /// Run `id`'s record as its `state.json` holds it now.
    pub fn get(&self, store: &Store, id: &str) -> Result<Arc<Loaded>, ApiError> {
        let slot = self.slot(id);
        let mut slot = slot.locked();
        let now = stamp(&store.run(id).state());
        if let Some(loaded) = slot.as_ref() {
            if loaded.stamp.is_some() && loaded.stamp == now {
                return Ok(loaded.clone());
            }
        }
        // Stamped before reading: if the file changes meanwhile, the next look reads it
        // again.
        let state = store
            .load(id)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let loaded = Arc::new(Loaded {
            stamp: now,
            state,
            summary: OnceLock::new(),
            bodies: Mutex::new(HashMap::new()),
        });
        *slot = Some(loaded.clone());
        Ok(loaded)
    }

    fn slot(&self, id: &str) -> Slot {
        let tick = self
            .clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut runs = self.runs.locked();
        if let Some((used, slot)) = runs.get_mut(id) {
            *used = tick;
            return slot.clone();
        }
        if runs.len() >= KEPT {
            let oldest = runs
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                runs.remove(&oldest);
            }
        }
        let slot = Arc::new(Mutex::new(None));
        runs.insert(id.to_string(), (tick, slot.clone()));
        slot
    }
}

/// A JSON body, and the same gzipped once a client asks for it so.
pub(super) struct Body {
    plain: Bytes,
    gzipped: OnceLock<Option<Bytes>>,
}

impl Body {
    pub fn new(plain: Vec<u8>) -> Body {
        Body {
            plain: Bytes::from(plain),
            gzipped: OnceLock::new(),
        }
    }

    fn gzipped(&self) -> Option<&Bytes> {
        self.gzipped
            .get_or_init(|| {
                // The fastest level: JSON still shrinks about tenfold.
                let mut encoder = flate2::write::GzEncoder::new(
                    Vec::with_capacity(self.plain.len() / 8),
                    flate2::Compression::fast(),
                );
                encoder.write_all(&self.plain).ok()?;
                encoder.finish().ok().map(Bytes::from)
            })
            .as_ref()
    }

    /// The body as the response to a request with `headers`: gzipped when it accepts that.
    pub fn respond(&self, headers: &HeaderMap) -> Response {
        let json = HeaderValue::from_static("application/json");
        let vary = HeaderValue::from_static("accept-encoding");
        if accepts_gzip(headers) {
            if let Some(zipped) = self.gzipped() {
                return (
                    [
                        (header::CONTENT_TYPE, json),
                        (header::CONTENT_ENCODING, HeaderValue::from_static("gzip")),
                        (header::VARY, vary),
                    ],
                    zipped.clone(),
                )
                    .into_response();
            }
        }
        (
            [(header::CONTENT_TYPE, json), (header::VARY, vary)],
            self.plain.clone(),
        )
            .into_response()
    }
}

/// Whether a request's `Accept-Encoding` takes gzip.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00"));
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// The repository's plait store.
pub(super) fn store(app: &App) -> Result<(Repo<'_>, &Store), ApiError> {
    let context = &app.settings.context;
    let repo = context
        .repo()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok((repo, context.store()))
}

/// The id of the run `run` names (a unique prefix will do).
pub(super) fn find(store: &Store, run: &str) -> Result<String, ApiError> {
    store.find(Some(run)).map_err(|e| match e {
        StateError::NoRuns | StateError::UnknownRun { .. } | StateError::Ambiguous { .. } => {
            ApiError::not_found(e.to_string())
        }
        other => ApiError::internal(other.to_string()),
    })
}

/// The run `run` names and its record, as its `state.json` holds it now.
pub(super) fn loaded(app: &App, store: &Store, run: &str) -> Result<Arc<Loaded>, ApiError> {
    let id = find(store, run)?;
    app.records.get(store, &id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_sent_only_to_clients_that_take_it() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(v));
            accepts_gzip(&h)
        };
        assert!(with("gzip, deflate, br"));
        assert!(with("br;q=1.0, GZIP;q=0.5"));
        assert!(!with("gzip;q=0, br"));
        assert!(!with("identity"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn a_body_is_gzipped_once_and_reads_back_whole() {
        use std::io::Read as _;
        let text = br#"{"tasks":[1,2,3]}"#.repeat(1000);
        let body = Body::new(text.clone());
        let zipped = body.gzipped().unwrap().to_vec();
        assert!(zipped.len() < text.len() / 10, "{}", zipped.len());
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&zipped[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, text);
        assert_eq!(
            body.gzipped().unwrap().as_ptr(),
            body.gzipped().unwrap().as_ptr()
        );
    }
}
