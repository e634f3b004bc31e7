//! What may pass through the gateway with the key plait holds, and which requests ask a
//! model for an answer (and so are paced and accounted). A request's target is read
//! strictly here, before anything else looks at it: decoded once, and refused unless what
//! it names is plainly one of the endpoints, so that what is checked is exactly what the
//! provider is sent (no `\` an URL parser would take for `/`, no dot segment it would
//! resolve, no escape it would decode again).

use axum::http::{Method, Uri};

/// The largest request body the gateway takes (a long conversation with images).
pub(crate) const MAX_BODY: usize = 64 << 20;

/// The endpoints an agent may reach with the key plait holds: a model's answers, their
/// token counts, the list of models and a `HEAD` of the base URL; not the rest of what the key may do (files,
/// batches, fine-tuning, an organization's administration).
const ENDPOINTS: &[(&str, &[&str])] = &[
    (
        "POST",
        &[
            "messages",
            "messages/count_tokens",
            "chat/completions",
            "responses",
            "completions",
            "embeddings",
        ],
    ),
    ("GET", &["models", "models/*"]),
    // Claude Code's check that the server is there.
    ("HEAD", &[""]),
];

/// A request's target as the gateway reads it: the lease's token when the path carries
/// one (`/t/<token>/…`), the path under the provider's base URL (decoded, its segments
/// plain), and the query as it came.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) token: Option<String>,
    pub(crate) rest: String,
    pub(crate) query: Option<String>,
}

impl Target {
    /// The path and query to append to the provider's base URL.
    pub(crate) fn path_and_query(&self) -> String {
        match &self.query {
            Some(query) => format!("{}?{query}", self.rest),
            None => self.rest.clone(),
        }
    }
}

/// Reads `uri` as a request's target, refusing (with what was refused) anything but a
/// plain path: an absolute-form target, a backslash or control byte raw or escaped, an
/// escaped separator or escape (`%2f`, `%252e`), an empty or dot segment in any spelling.
pub(crate) fn target(uri: &Uri) -> Result<Target, String> {
    if uri.scheme().is_some() || uri.authority().is_some() {
        return Err(format!(
            "plait's gateway takes a path, not an absolute URL ({uri})"
        ));
    }
    let path = decode(uri.path())?;
    let mut segments: Vec<&str> = path.strip_prefix('/').unwrap_or(&path).split('/').collect();
    // One trailing slash is a client's spelling of the same path; any other empty
    // segment (`//`) is refused below.
    if segments.len() > 1 && segments.last() == Some(&"") {
        segments.pop();
    }
    if segments == [""] {
        segments.clear();
    }
    for segment in &segments {
        if segment.is_empty() {
            return Err(format!("an empty path segment (`//`) in {}", uri.path()));
        }
        if segment.bytes().all(|b| b == b'.') {
            return Err(format!("a dot segment (`{segment}`) in {}", uri.path()));
        }
    }
    let (token, rest) = match segments.as_slice() {
        ["t", token, rest @ ..] => (Some((*token).to_string()), rest),
        rest => (None, rest),
    };
    if let Some(query) = uri.query() {
        if let Some(odd) = query
            .bytes()
            .find(|b| !b.is_ascii_graphic() || matches!(b, b'\\' | b'#'))
        {
            return Err(format!(
                "a byte 0x{odd:02x} in the query of {} (refused)",
                uri.path()
            ));
        }
    }
    Ok(Target {
        token,
        rest: rest.join("/"),
        query: uri.query().map(str::to_string),
    })
}

/// `path` percent-decoded once, refusing every byte but the plain ones a path to a model's
/// endpoint is made of (letters, digits, `-._~:@+` and `/`), whether raw or escaped; an
/// escaped `/` or `%` (an escape meant to be decoded again) is refused too.
fn decode(path: &str) -> Result<String, String> {
    let plain = |b: u8| {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'@' | b'+')
    };
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(byte) = hex else {
                return Err(format!("a broken escape (`%`) in {path}"));
            };
            if !plain(byte) {
                return Err(format!(
                    "an escaped byte `%{:02X}` ({}) in {path}",
                    byte,
                    describe(byte)
                ));
            }
            out.push(char::from(byte));
            i += 3;
        } else if plain(b) || b == b'/' {
            out.push(char::from(b));
            i += 1;
        } else {
            return Err(format!("a byte 0x{b:02x} ({}) in {path}", describe(b)));
        }
    }
    Ok(out)
}

/// What an odd byte is, in a word for the refusal.
fn describe(b: u8) -> &'static str {
    match b {
        b'\\' => "a backslash",
        b'/' => "a separator",
        b'%' => "an escape",
        0 => "NUL",
        b if b.is_ascii_control() => "a control byte",
        b if !b.is_ascii() => "not ASCII",
        _ => "not part of a model endpoint's path",
    }
}

/// Whether `method` on `path` (under the provider's base URL, as [`target`] reads it) is
/// one of [`ENDPOINTS`]; the refusal names them.
pub(crate) fn allowed(method: &Method, path: &str) -> Result<(), String> {
    let refuse = || {
        Err(format!(
            "plait's gateway passes on a model's answers, token counts and models only, not \
             {method} /{path}"
        ))
    };
    let path = path.trim_end_matches('/');
    // What `target` refuses, refused again for a caller that did not read it there.
    let lower = path.to_ascii_lowercase();
    if path.split('/').any(|s| s == "." || s == "..") || lower.contains('%') || lower.contains('\\')
    {
        return refuse();
    }
    // Anthropic's paths start with `v1/`; an OpenAI-compatible base URL holds it already.
    let path = path.strip_prefix("v1/").unwrap_or(path);
    let fits = |pattern: &str| match pattern.strip_suffix("/*") {
        Some(dir) => path
            .strip_prefix(dir)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|id| !id.is_empty() && !id.contains('/')),
        None => path == pattern,
    };
    let known = ENDPOINTS
        .iter()
        .any(|(m, patterns)| method.as_str() == *m && patterns.iter().any(|p| fits(p)));
    if known {
        Ok(())
    } else {
        refuse()
    }
}

/// Whether `method` on `path` asks for an answer (and so is paced and accounted).
pub(crate) fn answers(method: &Method, path: &str) -> bool {
    let path = path.trim_end_matches('/');
    method == Method::POST
        && ["messages", "chat/completions", "responses", "completions"]
            .iter()
            .any(|end| path == *end || path.ends_with(&format!("/{end}")))
}
