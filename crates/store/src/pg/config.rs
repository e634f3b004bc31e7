//! A store's address: its URL (or `key=value` string) completed from libpq's variables,
//! the server named in messages without its password, and a connection opened to it.

use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::{Client, Config, NoTls};

use super::PgError;

/// Parses a store URL, filling what it leaves out from libpq's variables (`env` looks them
/// up).
pub fn config(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, PgError> {
    let mut config = Config::from_str(url).map_err(|e| PgError::BadUrl {
        url: redact(url),
        reason: e.to_string(),
    })?;
    if config.get_hosts().is_empty() {
        config.host(env("PGHOST").as_deref().unwrap_or("localhost"));
    }
    if config.get_ports().is_empty() {
        if let Some(port) = env("PGPORT").and_then(|p| p.parse().ok()) {
            config.port(port);
        }
    }
    if config.get_user().is_none() {
        if let Some(user) = env("PGUSER").or_else(|| env("USER")) {
            config.user(user);
        }
    }
    if config.get_password().is_none() {
        if let Some(password) = env("PGPASSWORD") {
            config.password(password);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(db) = env("PGDATABASE") {
            config.dbname(db);
        }
    }
    Ok(config)
}

/// A URL with its password, if any, replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url
            .split_whitespace()
            .map(|kv| {
                if kv.starts_with("password=") {
                    "password=***"
                } else {
                    kv
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
    };
    match rest.split_once('@') {
        Some((auth, host)) => match auth.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// The server a config names, for messages: hosts, ports, database, user; no password.
pub(super) fn server(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
    format!(
        "{}{} (database {}, user {})",
        hosts.join(","),
        if ports.is_empty() {
            String::new()
        } else {
            format!(":{}", ports.join(","))
        },
        config.get_dbname().unwrap_or("(default)"),
        config.get_user().unwrap_or("(default)")
    )
}

/// Opens a connection, waiting at most `timeout`; the error names the server.
pub(super) async fn open(
    config: &Config,
    timeout: Duration,
) -> Result<
    (
        Client,
        tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
    ),
    PgError,
> {
    let mut config = config.clone();
    config.connect_timeout(timeout);
    config
        .connect(NoTls)
        .await
        .map_err(|source| PgError::Connect {
            server: server(&config),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("postgres://plait:s3cret@db.example:5432/plait"),
            "postgres://plait:***@db.example:5432/plait"
        );
        assert_eq!(
            redact("host=db user=plait password=s3cret dbname=x"),
            "host=db user=plait password=*** dbname=x"
        );
        let env = |k: &str| (k == "PGPASSWORD").then(|| "s3cret".to_string());
        let c = config("postgres://plait@db.example/plait", &env).unwrap();
        assert_eq!(c.get_password(), Some(&b"s3cret"[..]));
        assert!(!server(&c).contains("s3cret"));
        let err = config("postgres://plait:s3cret@db:notaport/x", &|_| None).unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }
}
