//! What may pass through the gateway with the key plait holds, and which requests ask a
//! model for an answer (and so are paced and accounted).

use axum::http::Method;

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

/// Whether `method` on `path` (under the provider's base URL) is one of [`ENDPOINTS`]; the
/// refusal names them.
pub(crate) fn allowed(method: &Method, path: &str) -> Result<(), String> {
    let refuse = || {
        Err(format!(
            "plait's gateway passes on a model's answers, token counts and models only, not \
             {method} /{path}"
        ))
    };
    let path = path.trim_end_matches('/');
    // No way out of the base URL: no dot segments, escaped or not.
    let lower = path.to_ascii_lowercase();
    if path.split('/').any(|s| s == "." || s == "..")
        || lower.contains("%2e")
        || lower.contains("%2f")
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
