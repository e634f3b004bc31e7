//! `plait doctor`: a self-test of the walls on this machine, run as plait runs a task's
//! command. It says which Landlock ABI, namespaces and seccomp hold here, then starts plait
//! itself behind the walls of a task (a private place of its own, the network off) to try,
//! one at a time: a write outside its places, a read of a file planted in the home, a TCP
//! connection and a UDP datagram to listeners plait holds on 127.0.0.1, a connection to a
//! UNIX socket served outside, and a signal to a process outside. Each attempt is judged
//! from outside (did the file appear, did the listener hear anything, is the process still
//! alive), not by what the probe believes.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use plait_core::cancel::Cancel;
use plait_sandbox::sandbox::{Sandbox, SandboxSettings};
use plait_sandbox::shell::{self, Launch, ShellOutcome};

mod deputy;

/// What the walls are made of here, and how each attempt went.
#[derive(Debug, Serialize)]
pub struct DoctorReport {
    /// `Landlock ABI N`, or why there is no Landlock.
    pub landlock: String,
    /// Whether user and mount namespaces (views over layers) are allowed, or why not.
    pub views: Result<(), String>,
    /// Whether a network namespace per process is allowed, or why not.
    pub network_namespace: Result<(), String>,
    /// How a task's network is walled here, in words.
    pub walls: String,
    /// How git behind the walls reads a repository's `.git/config` that holds credentials,
    /// in words: a copy without them in the file's place, or not at all (and why).
    pub git_config: String,
    /// Each attempt, in the order made.
    pub probes: Vec<Probe>,
}

/// One attempt from inside the walls.
#[derive(Debug, Serialize)]
pub struct Probe {
    /// What was tried.
    pub what: &'static str,
    /// Whether the walls refused it.
    pub refused: bool,
    /// What happened, when it was not refused (or could not be tried).
    pub detail: String,
}

impl DoctorReport {
    /// Whether every attempt was refused.
    pub fn holds(&self) -> bool {
        self.probes.iter().all(|p| p.refused)
    }
}

/// What the self-test is asked.
pub struct DoctorRequest<'a> {
    /// plait's own program, started behind the walls as the probe (`plait doctor --probe
    /// KIND TARGET`).
    pub program: &'a Path,
    /// The user's home, where a secret is planted for the read attempt.
    pub home: Option<PathBuf>,
}

/// Runs the self-test (see the module's doc).
pub async fn doctor(request: DoctorRequest<'_>) -> Result<DoctorReport, super::OpsError> {
    run(request.program, request.home)
        .await
        .map_err(super::OpsError::Doctor)
}

async fn run(plait: &Path, home: Option<PathBuf>) -> Result<DoctorReport, String> {
    let landlock = match plait_sandbox::sandbox::support() {
        plait_sandbox::sandbox::Support::Landlock(abi) => format!("ABI {abi}"),
        plait_sandbox::sandbox::Support::Missing(why) => format!("missing: {why}"),
    };
    let place = tempfile::Builder::new()
        .prefix("plait-doctor-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let own = place.path().join("own");
    let outside = place.path().join("outside");
    for dir in [&own, &outside] {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let planted = Planted::new(home)?;
    let settings = SandboxSettings {
        temp_root: std::env::temp_dir(),
        ..SandboxSettings::default()
    };
    let prober = Prober {
        plait,
        sandbox: Sandbox::new(&settings, vec![own.clone()]),
        log: place.path().join("probe.log"),
        own,
        cancel: Cancel::new().1,
    };
    let mut probes = file_probes(&prober, &outside, &planted).await;
    let (repository, git_config) =
        repository_probes(plait, &settings, place.path(), &prober.own).await?;
    probes.extend(repository);
    probes.extend(network_probes(&prober, &outside).await?);
    probes.push(signal_probe(&prober).await?);
    probes.push(leftover_probe(&prober).await);
    probes.extend(deputy::probes(plait, &settings, place.path(), &prober.own).await?);
    Ok(DoctorReport {
        landlock,
        views: plait_sandbox::sandbox::view_support().clone(),
        network_namespace: plait_sandbox::sandbox::net_support().clone(),
        walls: settings.describe(),
        git_config,
        probes,
    })
}

/// plait's own probe, started behind a task's walls (a private place of its own, the
/// network off).
struct Prober<'a> {
    plait: &'a Path,
    sandbox: Sandbox,
    log: PathBuf,
    own: PathBuf,
    cancel: Cancel,
}

impl Prober<'_> {
    /// Has the probe attempt `kind` on `target`: how it ended, and what it said.
    async fn attempt(&self, kind: &str, target: String) -> (ShellOutcome, String) {
        let argv = vec![
            self.plait.display().to_string(),
            "doctor".to_string(),
            "--probe".to_string(),
            kind.to_string(),
            target,
        ];
        let _ = std::fs::write(&self.log, "");
        let launch = Launch {
            dir: &self.own,
            env: &[],
            log: &self.log,
            timeout: Duration::from_secs(10),
            cancel: &self.cancel,
            sandbox: &self.sandbox,
        };
        let outcome = shell::run_argv(&argv, &launch).await;
        let said = std::fs::read_to_string(&self.log).unwrap_or_default();
        (outcome, said.trim().to_string())
    }
}

/// A write outside the probe's places, and a read of the file planted in the home.
async fn file_probes(prober: &Prober<'_>, outside: &Path, planted: &Planted) -> Vec<Probe> {
    let target = outside.join("written");
    let (outcome, said) = prober.attempt("write", target.display().to_string()).await;
    let write = judge(
        "write outside its places",
        &outcome,
        &said,
        !target.exists(),
    );
    let (outcome, said) = prober
        .attempt("read", planted.file.display().to_string())
        .await;
    let read_it = said.contains(SECRET);
    let read = judge(
        "read of a file planted in the home",
        &outcome,
        &said,
        !read_it,
    );
    vec![write, read]
}

/// A read of a repository's `.git/config` holding a token (in a remote's URL and an
/// `http.extraHeader`, as `actions/checkout` writes it) and of a file in plait's store, by a
/// task's processes that read the repository's git directory: each judged by whether the
/// token or the file's secret came out. Also how git there reads that config.
async fn repository_probes(
    plait: &Path,
    settings: &SandboxSettings,
    place: &Path,
    own: &Path,
) -> Result<(Vec<Probe>, String), String> {
    let repo = place.join("repo");
    let git = repo.join(".git");
    let made = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(&repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !made.status.success() {
        return Err(format!(
            "git init {}: {}",
            repo.display(),
            String::from_utf8_lossy(&made.stderr).trim()
        ));
    }
    let config = git.join("config");
    let text =
        std::fs::read_to_string(&config).map_err(|e| format!("{}: {e}", config.display()))?;
    let planted = format!(
        "{text}[remote \"origin\"]\n\turl = https://x-access-token:{SECRET}@github.com/o/r\n\
         [http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic {SECRET}\n"
    );
    let store = git.join("plait").join("state.json");
    for (file, text) in [(&config, planted.as_str()), (&store, SECRET)] {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    let walls = SandboxSettings {
        git_dir: Some(git.clone()),
        ..settings.clone()
    };
    let prober = Prober {
        plait,
        sandbox: Sandbox::new(&walls, vec![own.to_path_buf()]),
        log: place.join("repository.log"),
        own: own.to_path_buf(),
        cancel: Cancel::new().1,
    };
    let mut probes = Vec::new();
    for (what, file) in [
        ("read of a token in the repository's .git/config", &config),
        ("read of plait's store in the git directory", &store),
    ] {
        let (outcome, said) = prober.attempt("read", file.display().to_string()).await;
        let read_it = said.contains(SECRET);
        probes.push(judge(what, &outcome, &said.replace(SECRET, "…"), !read_it));
    }
    let how = prober
        .sandbox
        .git_config()
        .unwrap_or_else(|| "not found out: the probes did not start".to_string());
    Ok((probes, how))
}

/// A TCP connection and a UDP datagram to listeners on 127.0.0.1, and a connection to a
/// UNIX socket served outside: each judged by whether the listener heard anything.
async fn network_probes(prober: &Prober<'_>, outside: &Path) -> Result<Vec<Probe>, String> {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    tcp.set_nonblocking(true).map_err(|e| e.to_string())?;
    let addr = tcp.local_addr().map_err(|e| e.to_string())?;
    let (outcome, said) = prober.attempt("tcp", addr.to_string()).await;
    let heard = tcp.accept().is_ok();
    let tcp = judge(
        "TCP connection to 127.0.0.1 outside",
        &outcome,
        &said,
        !heard,
    );

    let udp = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .map_err(|e| e.to_string())?;
    let addr = udp.local_addr().map_err(|e| e.to_string())?;
    let (outcome, said) = prober.attempt("udp", addr.to_string()).await;
    let heard = udp.recv(&mut [0u8; 64]).is_ok();
    let udp = judge("UDP datagram to 127.0.0.1 outside", &outcome, &said, !heard);

    let socket = outside.join("served.sock");
    let unix = std::os::unix::net::UnixListener::bind(&socket).map_err(|e| e.to_string())?;
    unix.set_nonblocking(true).map_err(|e| e.to_string())?;
    let (outcome, said) = prober.attempt("unix", socket.display().to_string()).await;
    let heard = unix.accept().is_ok();
    let unix = judge("UNIX socket served outside", &outcome, &said, !heard);
    Ok(vec![tcp, udp, unix])
}

/// A signal to a process outside, judged by whether the process still lives.
async fn signal_probe(prober: &Prober<'_>) -> Result<Probe, String> {
    let mut victim = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .map_err(|e| format!("cannot start `sleep` to signal: {e}"))?;
    let (outcome, said) = prober.attempt("signal", victim.id().to_string()).await;
    std::thread::sleep(Duration::from_millis(100));
    let alive = matches!(victim.try_wait(), Ok(None));
    let _ = victim.kill();
    let _ = victim.wait();
    Ok(judge("signal to a process outside", &outcome, &said, alive))
}

/// A process the probe leaves behind in a session of its own, writing to a file of the
/// probe's place as long as it lives (at most 5 s): judged by whether the file still grows
/// once the probe has ended.
async fn leftover_probe(prober: &Prober<'_>) -> Probe {
    let file = prober.own.join("leftover");
    let (outcome, said) = prober.attempt("leftover", file.display().to_string()).await;
    let size = || std::fs::metadata(&file).map_or(0, |m| m.len());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = size();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let gone = before > 0 && size() == before;
    judge("a process left after its command", &outcome, &said, gone)
}

/// What the secret planted in the home says.
const SECRET: &str = "plait-doctor-planted-secret";

/// A file planted in the home for the read attempt, removed with this value.
struct Planted {
    dir: PathBuf,
    file: PathBuf,
}

impl Planted {
    fn new(home: Option<PathBuf>) -> Result<Planted, String> {
        let home = home
            .filter(|h| h.is_absolute() && h.is_dir())
            .ok_or("HOME is not set to a directory")?;
        let dir = home.join(format!(".plait-doctor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let file = dir.join("credentials");
        std::fs::write(&file, SECRET).map_err(|e| format!("{}: {e}", file.display()))?;
        Ok(Planted { dir, file })
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An attempt judged from outside: `refused` when what it tried did not happen.
fn judge(what: &'static str, outcome: &ShellOutcome, said: &str, refused: bool) -> Probe {
    let detail = match outcome {
        ShellOutcome::NotStarted(why) => format!("the probe could not start: {why}"),
        _ if refused => String::new(),
        _ => format!(
            "it went through ({})",
            said.lines().last().unwrap_or("no output")
        ),
    };
    Probe {
        what,
        refused: refused && !matches!(outcome, ShellOutcome::NotStarted(_)),
        detail,
    }
}

/// The probe itself, behind the walls: tries `kind` on `target` and says how it went
/// (exit 0: done, 1: refused). What it says is only a witness; plait judges from outside.
pub fn probe(kind: &str, target: &str) -> Result<String, String> {
    use std::io::Write as _;
    let e = |e: std::io::Error| e.to_string();
    match kind {
        "write" => std::fs::write(target, "x")
            .map(|()| "written".into())
            .map_err(e),
        "read" => {
            let mut text = String::new();
            std::fs::File::open(target)
                .and_then(|mut f| f.read_to_string(&mut text))
                .map_err(e)?;
            Ok(text)
        }
        "tcp" => {
            let addr = target
                .parse()
                .map_err(|_| format!("not an address: {target}"))?;
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
                .map(|_| "connected".into())
                .map_err(e)
        }
        "udp" => {
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").map_err(e)?;
            socket
                .send_to(b"plait-doctor", target)
                .map(|_| "sent".into())
                .map_err(e)
        }
        "unix" => std::os::unix::net::UnixStream::connect(target)
            .and_then(|mut s| s.write_all(b"plait-doctor"))
            .map(|()| "connected".into())
            .map_err(e),
        "signal" => {
            let pid: i32 = target.parse().map_err(|_| format!("not a pid: {target}"))?;
            // SAFETY: a plain system call.
            if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
                Ok("signalled".into())
            } else {
                Err(std::io::Error::last_os_error().to_string())
            }
        }
        "leftover" => {
            use std::os::unix::process::CommandExt as _;
            let mut writer = std::process::Command::new("sh");
            writer
                .args([
                    "-c",
                    "i=0; while [ $i -lt 100 ]; do echo x >> \"$0\"; sleep 0.05; i=$((i+1)); done",
                    target,
                ])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            // SAFETY: one async-signal-safe call between fork and exec.
            unsafe {
                writer.pre_exec(|| {
                    libc::setsid();
                    Ok(())
                });
            }
            writer.spawn().map_err(e)?;
            let file = std::path::Path::new(target);
            while std::fs::metadata(file).map_or(0, |m| m.len()) == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok("left a process writing".into())
        }
        other => deputy::probe(other, target).unwrap_or(Err(format!("no probe `{other}`"))),
    }
}
