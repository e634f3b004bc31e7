//! A throwaway PostgreSQL cluster for the store's tests and benchmark: from the machine's
//! PostgreSQL (Debian's `/usr/lib/postgresql/*/bin`), on 127.0.0.1 on a free port, run as
//! the `postgres` user when this runs as root (PostgreSQL refuses root), with a watchdog
//! that stops it when this process ends.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// The URL (database `postgres`) of the server `var` names, or of a throwaway one started
/// here and stopped when this process ends; or why there is none.
pub fn start(var: &str) -> Result<String, String> {
    if let Ok(url) = std::env::var(var) {
        return Ok(url);
    }
    let bin = bin_dir().ok_or("no PostgreSQL under /usr/lib/postgresql")?;
    let dir = tempfile::Builder::new()
        .prefix("plait-pg-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    let root = unsafe { libc::geteuid() } == 0;
    let as_pg = |program: &str| {
        let mut cmd = if root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin.join(program));
            c
        } else {
            Command::new(bin.join(program))
        };
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        cmd
    };
    if root {
        Command::new("chown")
            .args(["postgres", &dir.display().to_string()])
            .status()
            .map_err(|e| e.to_string())?;
    }
    let data = dir.join("data");
    let ok = as_pg("initdb")
        .args([
            "-D",
            &data.display().to_string(),
            "-A",
            "trust",
            "-U",
            "plait",
        ])
        .status()
        .map_err(|e| e.to_string())?;
    if !ok.success() {
        return Err("initdb failed".into());
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let options = format!(
        "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off",
        dir.display()
    );
    let ok = as_pg("pg_ctl")
        .args([
            "-D",
            &data.display().to_string(),
            "-o",
            &options,
            "-w",
            "start",
        ])
        .arg("-l")
        .arg(dir.join("log"))
        .status()
        .map_err(|e| e.to_string())?;
    if !ok.success() {
        return Err("pg_ctl start failed".into());
    }
    // Stops the server when this test process ends.
    let stop = format!(
        "while kill -0 {} 2>/dev/null; do sleep 0.5; done; {} {} -D {} -m immediate stop >/dev/null 2>&1; rm -rf {}",
        std::process::id(),
        if root { "runuser -u postgres --" } else { "" },
        bin.join("pg_ctl").display(),
        data.display(),
        dir.display()
    );
    Command::new("sh")
        .args(["-c", &stop])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    Ok(format!("postgres://plait@127.0.0.1:{port}/postgres"))
}
