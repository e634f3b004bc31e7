//! The provider's key never goes back to the agent: a provider (or a proxy before it) that
//! echoes the request's headers, in its own headers or in an error's body, would hand the
//! real key to the process plait keeps it from. Answers' headers lose every credential
//! header and any value holding a secret; bodies have each secret's bytes replaced as they
//! stream, a secret split across two chunks included.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue};

/// What a secret is replaced with.
const REDACTED: &[u8] = b"[redacted by plait]";

/// Headers that carry credentials, never passed back whatever they hold.
const CREDENTIALS: &[&str] = &[
    "x-api-key",
    "authorization",
    "proxy-authorization",
    "x-goog-api-key",
    "api-key",
];

/// The secrets of one request (the provider's key, a login's bearer), and the bytes of
/// an answer held back while they may be the start of one.
pub(crate) struct Redactor {
    secrets: Vec<Vec<u8>>,
    held: Vec<u8>,
}

impl Redactor {
    /// A redactor of `secrets` (empty ones, and those too short to be a key, ignored).
    pub(crate) fn new(secrets: impl IntoIterator<Item = String>) -> Redactor {
        Redactor {
            secrets: secrets
                .into_iter()
                .filter(|s| s.len() >= 8)
                .map(String::into_bytes)
                .collect(),
            held: Vec::new(),
        }
    }

    /// `headers` with no credential header, and any value holding a secret replaced.
    pub(crate) fn headers(&self, headers: HeaderMap) -> HeaderMap {
        let mut out = HeaderMap::new();
        for (name, value) in &headers {
            if CREDENTIALS.contains(&name.as_str()) {
                continue;
            }
            let value = if self.holds(value.as_bytes()) {
                HeaderValue::from_static("[redacted by plait]")
            } else {
                value.clone()
            };
            out.append(HeaderName::clone(name), value);
        }
        out
    }

    /// Whether `bytes` hold one of the secrets.
    fn holds(&self, bytes: &[u8]) -> bool {
        self.secrets.iter().any(|s| find(bytes, s).is_some())
    }

    /// A whole body with every secret replaced.
    pub(crate) fn whole(&self, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(body.len());
        self.replace_into(body, &mut out);
        out
    }

    /// The next chunk of a streamed body, its secrets replaced; the end of it that could
    /// begin a secret is held back for the next chunk (or [`Redactor::finish`]).
    pub(crate) fn chunk(&mut self, chunk: Bytes) -> Bytes {
        if self.secrets.is_empty() {
            return chunk;
        }
        let mut data = std::mem::take(&mut self.held);
        data.extend_from_slice(&chunk);
        let mut out = Vec::with_capacity(data.len());
        let kept = self.replace_into(&data, &mut out);
        // Of what is left after the last whole secret, hold back the longest end that is
        // the start of a secret.
        let tail = &out[kept..];
        let hold = self
            .secrets
            .iter()
            .map(|s| partial_end(tail, s))
            .max()
            .unwrap_or(0);
        self.held = out.split_off(out.len() - hold);
        Bytes::from(out)
    }

    /// What was held back at the end of the body.
    pub(crate) fn finish(&mut self) -> Bytes {
        Bytes::from(std::mem::take(&mut self.held))
    }

    /// Appends `data` to `out` with every secret replaced; returns where in `out` the
    /// bytes after the last replacement begin.
    fn replace_into(&self, data: &[u8], out: &mut Vec<u8>) -> usize {
        let mut rest = data;
        let mut after = out.len();
        loop {
            let first = self
                .secrets
                .iter()
                .filter_map(|s| find(rest, s).map(|at| (at, s.len())))
                .min();
            let Some((at, len)) = first else {
                out.extend_from_slice(rest);
                return after;
            };
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(REDACTED);
            after = out.len();
            rest = &rest[at + len..];
        }
    }
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The length of the longest end of `data` that is a proper start of `secret`.
fn partial_end(data: &[u8], secret: &[u8]) -> usize {
    let most = data.len().min(secret.len() - 1);
    (1..=most)
        .rev()
        .find(|&n| data[data.len() - n..] == secret[..n])
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_split_across_chunks_is_replaced_and_nothing_else_is_held() {
        let key = "sk-ant-real-key-0123456789";
        let text = format!("{{\"echo\": \"x-api-key: {key}\", \"again\": \"{key}\"}}\n\n");
        for cut in 1..text.len() {
            let mut r = Redactor::new([key.to_string()]);
            let (a, b) = text.as_bytes().split_at(cut);
            let mut out = r.chunk(Bytes::copy_from_slice(a)).to_vec();
            out.extend_from_slice(&r.chunk(Bytes::copy_from_slice(b)));
            out.extend_from_slice(&r.finish());
            let out = String::from_utf8(out).unwrap();
            assert!(!out.contains(key), "cut at {cut}: {out}");
            assert_eq!(out.matches("[redacted by plait]").count(), 2, "{out}");
        }
        // A chunk that ends as an event does is passed on whole at once.
        let mut r = Redactor::new([key.to_string()]);
        let event = Bytes::from_static(b"event: ping\ndata: {}\n\n");
        assert_eq!(r.chunk(event.clone()), event);
        // Its first bytes alone are held until the next chunk says what they are.
        assert_eq!(&r.chunk(Bytes::from_static(b"a sk-ant"))[..], b"a ");
        assert_eq!(&r.chunk(Bytes::from_static(b"!"))[..], b"sk-ant!");
    }

    #[test]
    fn credential_headers_and_values_holding_the_key_are_dropped_or_replaced() {
        let r = Redactor::new(["sk-real-0123456789".to_string()]);
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("sk-real-0123456789"));
        h.insert("authorization", HeaderValue::from_static("Bearer x"));
        h.insert("x-goog-api-key", HeaderValue::from_static("g"));
        h.insert(
            "x-echo",
            HeaderValue::from_static("key=sk-real-0123456789;"),
        );
        h.insert("request-id", HeaderValue::from_static("req_1"));
        let out = r.headers(h);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out["x-echo"], "[redacted by plait]");
        assert_eq!(out["request-id"], "req_1");
    }
}
