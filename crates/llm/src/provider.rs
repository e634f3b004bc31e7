//! Model providers as a plan names them: the built-in `anthropic` and `openai`, and
//! `[providers.NAME]` tables (kind, base URL, the environment variable holding the key,
//! model, token limit, prices). Resolved before anything is created, so a missing key is a
//! plan error, not a failure in the middle of a run.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// The Anthropic Messages API.
    Anthropic,
    /// Any OpenAI-compatible chat-completions endpoint.
    Openai,
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Per million input tokens.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
    /// Per million input tokens written to the cache (default: 1.25 times `input`).
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// Per million input tokens read from the cache (default: a tenth of `input`).
    #[serde(default)]
    pub cache_read: Option<f64>,
}

/// How hard a provider may be pushed: in flight at once, and per minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Requests in flight at once (default 32).
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// Requests per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u32>,
    /// Input tokens per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tpm: Option<u64>,
    /// Output tokens per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tpm: Option<u64>,
}

fn default_concurrency() -> usize {
    32
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            concurrency: default_concurrency(),
            rpm: None,
            input_tpm: None,
            output_tpm: None,
        }
    }
}

/// A `[providers.NAME]` table.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderFile {
    /// `anthropic` or `openai`; may be left out for a table named after a built-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ProviderKind>,
    /// The server's base URL (default: the built-in's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable that holds the API key (empty: send no key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The model to ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The most output tokens an answer may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stream responses (server-sent events); default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// The model's prices (default: plait's table, where it knows the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<Prices>,
    /// Rate limits the whole run keeps to for this provider and key; the server's limit
    /// headers tighten them further.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Anthropic: cache each agent's conversation, so every turn reads its history from the
    /// cache (default true); false caches only the shared system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_history: Option<bool>,
}

/// An API key. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps `key`.
    pub fn new(key: String) -> ApiKey {
        ApiKey(key)
    }

    /// The key itself, for the request header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// A provider ready to be called.
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    /// The provider's name in the plan (`[providers.<name>]`).
    pub name: String,
    /// Its wire format.
    pub kind: ProviderKind,
    /// Without a trailing slash; Anthropic's has no `/v1`, OpenAI-compatible ones usually do.
    pub base_url: String,
    /// The key sent with each request, if the server takes one.
    pub api_key: Option<ApiKey>,
    /// Where the key came from, for messages.
    pub key_env: String,
    /// The plan says the server takes no key (`api_key_env = ""`, a local server): an
    /// agent CLI is still given the gateway's stand-in, for clients that refuse to start
    /// without one.
    pub keyless: bool,
    /// The model asked.
    pub model: String,
    /// The most output tokens an answer may have.
    pub max_tokens: u32,
    /// Whether answers are streamed (server-sent events).
    pub stream: bool,
    /// `None`: unknown model, cost unknown.
    pub prices: Option<Prices>,
    /// The rate limits the run keeps to.
    pub limits: Limits,
    /// Anthropic: cache breakpoints on the conversation, not only the system prompt.
    pub cache_history: bool,
}

struct Builtin {
    kind: ProviderKind,
    base_env: &'static str,
    base_url: &'static str,
    key_env: &'static str,
    model: &'static str,
}

fn builtin(kind: ProviderKind) -> Builtin {
    match kind {
        ProviderKind::Anthropic => Builtin {
            kind,
            base_env: "ANTHROPIC_BASE_URL",
            base_url: "https://api.anthropic.com",
            key_env: "ANTHROPIC_API_KEY",
            model: "claude-sonnet-4-5",
        },
        ProviderKind::Openai => Builtin {
            kind,
            base_env: "OPENAI_BASE_URL",
            base_url: "https://api.openai.com/v1",
            key_env: "OPENAI_API_KEY",
            model: "gpt-4.1",
        },
    }
}

/// Whether `name` is a built-in provider.
pub fn builtin_kind(name: &str) -> Option<ProviderKind> {
    match name {
        "anthropic" => Some(ProviderKind::Anthropic),
        "openai" => Some(ProviderKind::Openai),
        _ => None,
    }
}

/// The built-in provider of `kind` as the environment gives it, for traffic plait passes
/// on rather than makes (the gateway's, for an agent CLI the plan gives no provider): its
/// base URL, and its key when one is set. Without a key the client's own credentials go
/// through: a Claude Code login's bearer.
pub fn from_env(kind: ProviderKind, env: &dyn Fn(&str) -> Option<String>) -> ProviderSettings {
    let defaults = builtin(kind);
    let name = match kind {
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Openai => "openai",
    };
    let keyed = env(defaults.key_env).is_some_and(|k| !k.trim().is_empty());
    let file = ProviderFile {
        api_key_env: (!keyed).then(String::new),
        ..ProviderFile::default()
    };
    let mut settings = resolve_provider(name, Some(&file), env).unwrap_or_else(|_| {
        // A base URL in the environment that is not one: the provider's own.
        let plain = |key: &str| (key != defaults.base_env).then(|| env(key)).flatten();
        resolve_provider(name, Some(&file), &plain).expect("the built-in provider resolves")
    });
    // No key here is a login's, not a server that takes none.
    settings.keyless = false;
    settings
}

/// Resolves provider `name` from its table (if any) and the environment; the error says
/// what to set.
pub fn resolve_provider(
    name: &str,
    file: Option<&ProviderFile>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ProviderSettings, String> {
    let empty = ProviderFile::default();
    let file = file.unwrap_or(&empty);
    let kind = match (file.kind, builtin_kind(name)) {
        (Some(kind), _) | (None, Some(kind)) => kind,
        (None, None) => {
            return Err(format!(
                "provider `{name}` needs `kind = \"anthropic\"` or `kind = \"openai\"` in [providers.{name}]"
            ))
        }
    };
    let defaults = builtin(kind);
    let base_url = file
        .base_url
        .clone()
        .or_else(|| env(defaults.base_env).filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| defaults.base_url.to_string());
    let base_url = base_url.trim().trim_end_matches('/').to_string();
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(format!(
            "provider `{name}`: base URL `{base_url}` must start with http:// or https://"
        ));
    }
    let key_env = file
        .api_key_env
        .clone()
        .unwrap_or_else(|| defaults.key_env.to_string());
    let api_key = if key_env.is_empty() {
        None
    } else {
        match env(&key_env).filter(|k| !k.trim().is_empty()) {
            Some(key) => Some(ApiKey::new(key.trim().to_string())),
            None => {
                return Err(format!(
                    "provider `{name}` needs an API key: set the environment variable {key_env}"
                ))
            }
        }
    };
    let model = file
        .model
        .clone()
        .unwrap_or_else(|| defaults.model.to_string());
    let max_tokens = file.max_tokens.unwrap_or(8192);
    if max_tokens == 0 {
        return Err(format!("provider `{name}`: max_tokens must be above 0"));
    }
    Ok(ProviderSettings {
        name: name.to_string(),
        kind: defaults.kind,
        base_url,
        api_key,
        keyless: key_env.is_empty(),
        key_env,
        prices: file.prices.or_else(|| default_prices(&model)),
        model,
        max_tokens,
        stream: file.stream.unwrap_or(true),
        limits: file.limits.unwrap_or_default(),
        cache_history: file.cache_history.unwrap_or(true),
    })
}

/// Published prices of current models, USD per million tokens, matched by the longest
/// prefix of the model name (a `vendor/` prefix, as OpenRouter writes, is ignored).
pub fn default_prices(model: &str) -> Option<Prices> {
    const fn p(
        input: f64,
        output: f64,
        cache_write: Option<f64>,
        cache_read: Option<f64>,
    ) -> Prices {
        Prices {
            input,
            output,
            cache_write,
            cache_read,
        }
    }
    const TABLE: &[(&str, Prices)] = &[
        ("claude-opus-4", p(15.0, 75.0, Some(18.75), Some(1.5))),
        ("claude-sonnet-4", p(3.0, 15.0, Some(3.75), Some(0.3))),
        ("claude-3-7-sonnet", p(3.0, 15.0, Some(3.75), Some(0.3))),
        ("claude-3-5-sonnet", p(3.0, 15.0, Some(3.75), Some(0.3))),
        ("claude-haiku-4", p(1.0, 5.0, Some(1.25), Some(0.1))),
        ("claude-3-5-haiku", p(0.8, 4.0, Some(1.0), Some(0.08))),
        ("gpt-5-nano", p(0.05, 0.4, None, Some(0.005))),
        ("gpt-5-mini", p(0.25, 2.0, None, Some(0.025))),
        ("gpt-5", p(1.25, 10.0, None, Some(0.125))),
        ("gpt-4.1-nano", p(0.1, 0.4, None, Some(0.025))),
        ("gpt-4.1-mini", p(0.4, 1.6, None, Some(0.1))),
        ("gpt-4.1", p(2.0, 8.0, None, Some(0.5))),
        ("gpt-4o-mini", p(0.15, 0.6, None, Some(0.075))),
        ("gpt-4o", p(2.5, 10.0, None, Some(1.25))),
        ("o4-mini", p(1.1, 4.4, None, Some(0.275))),
        ("o3", p(2.0, 8.0, None, Some(0.5))),
    ];
    let name = model.rsplit('/').next().unwrap_or(model);
    TABLE
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, prices)| *prices)
}
