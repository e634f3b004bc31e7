//! The PostgreSQL server the store's tests use: the one `PLAIT_TEST_PG_URL` names (`.ci/run`
//! starts one), or a throwaway cluster started here from the machine's PostgreSQL (as the
//! `postgres` user when run as root), and a fresh database on it for each test; without
//! one, the test says it is skipped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

use plait_store::pg;
use tokio_postgres::Config;

use super::{runtime, skip};

#[path = "../../../benches/common/cluster.rs"]
mod cluster;

/// The server's base URL (database `postgres`), or why there is none.
static SERVER: LazyLock<Result<String, String>> =
    LazyLock::new(|| cluster::start("PLAIT_TEST_PG_URL"));

/// A fresh database on the server for one test, or `None` (skipped, said so).
pub fn database(rt: &tokio::runtime::Runtime) -> Option<Config> {
    let base = match &*SERVER {
        Ok(url) => url.clone(),
        Err(why) => {
            skip(format_args!("no PostgreSQL server ({why})"));
            return None;
        }
    };
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "plait_t{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let admin = pg::config(&base, &|_| None).unwrap();
    rt.block_on(async {
        let (client, conn) = admin.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
    });
    let mut config = admin;
    config.dbname(&name);
    Some(config)
}

/// The URL of a fresh database for one test, or `None` (skipped, said so).
pub fn database_url() -> Option<String> {
    let config = database(&runtime())?;
    let base = SERVER.as_ref().ok()?;
    let (root, _) = base.rsplit_once('/')?;
    Some(format!("{root}/{}", config.get_dbname()?))
}
