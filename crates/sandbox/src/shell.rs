//! Running a shell command the way every part of plait needs it: `sh -c` in a directory,
//! with extra environment, its output appended to a log file, a timeout, and an interrupt;
//! on either, its whole process group is killed so no grandchild keeps running. Every
//! process runs in the walls of a [`Sandbox`]. Exec agents, agent CLIs, checks and command
//! reviewers all go through here.

use std::fs::OpenOptions;
use std::path::Path;
use std::time::Duration;

use crate::child::{Child, Io, Spec};
use crate::sandbox::Sandbox;
use plait_core::cancel::Cancel;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellOutcome {
    /// It exited with this status.
    Exited(i32),
    /// Killed by a signal it did not ask for.
    Signalled,
    /// It ran past its timeout and was killed.
    TimedOut,
    /// The run was interrupted and it was killed.
    Interrupted,
    /// It could not be started; the reason.
    NotStarted(String),
    /// It failed (exited with this status, or killed by a signal: `None`) after one of its
    /// processes ran into a limit of the sandbox's, which the words name.
    OverLimit(Option<i32>, String),
}

impl ShellOutcome {
    /// One line for a person.
    pub fn describe(&self, timeout: Duration) -> String {
        match self {
            ShellOutcome::Exited(0) => "succeeded".to_string(),
            ShellOutcome::Exited(code) => format!("command exited with status {code}"),
            ShellOutcome::Signalled => "command was killed by a signal".to_string(),
            ShellOutcome::TimedOut => {
                format!("timed out after {}", humantime::format_duration(timeout))
            }
            ShellOutcome::Interrupted => "interrupted".to_string(),
            ShellOutcome::NotStarted(why) => why.clone(),
            ShellOutcome::OverLimit(code, limit) => {
                let ended = match code {
                    Some(code) => ShellOutcome::Exited(*code),
                    None => ShellOutcome::Signalled,
                };
                format!("{}: {limit}", ended.describe(timeout))
            }
        }
    }
}

/// Where and how a command runs.
pub struct Launch<'a> {
    /// Its working directory.
    pub dir: &'a Path,
    /// Extra environment.
    pub env: &'a [(&'a str, String)],
    /// Where its output is appended.
    pub log: &'a Path,
    /// How long it may run.
    pub timeout: Duration,
    /// The run's interrupt, which kills it.
    pub cancel: &'a Cancel,
    /// The walls it runs in.
    pub sandbox: &'a Sandbox,
}

/// Runs `sh -c command` as `launch` says, appending its output to the log.
pub async fn run(command: &str, launch: &Launch<'_>) -> ShellOutcome {
    let argv = ["sh".to_string(), "-c".to_string(), command.to_string()];
    run_argv(&argv, launch).await
}

/// Runs a program with its arguments (`argv[0]` found on `PATH`), like [`run`].
pub async fn run_argv(argv: &[String], launch: &Launch<'_>) -> ShellOutcome {
    let log = launch.log;
    let open = || OpenOptions::new().create(true).append(true).open(log);
    match (open(), open()) {
        (Ok(out), Ok(err)) => spawn_and_wait(argv, launch, (out, err), None, None).await,
        (Err(e), _) | (_, Err(e)) => {
            ShellOutcome::NotStarted(format!("cannot open log {}: {e}", log.display()))
        }
    }
}

/// Runs a program like [`run_argv`], but its standard output goes to `stdout` (replaced)
/// and only its standard error to the log: for programs that answer in JSON on stdout. The
/// output is returned, and appended to the log after the run so the log tells the whole story.
pub async fn run_argv_capturing(
    argv: &[String],
    launch: &Launch<'_>,
    stdout: &Path,
) -> (ShellOutcome, String) {
    run_argv_fed(argv, launch, stdout, None).await
}

/// What is written to a program's standard input while it runs, chunk by chunk; its input
/// is closed when the sender is dropped (and is empty without a feed).
pub type Feed = tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>;

/// [`run_argv_capturing`], its standard input fed from `feed` while it runs.
pub async fn run_argv_fed(
    argv: &[String],
    launch: &Launch<'_>,
    stdout: &Path,
    feed: Option<Feed>,
) -> (ShellOutcome, String) {
    let log = launch.log;
    let out = std::fs::File::create(stdout);
    let err = OpenOptions::new().create(true).append(true).open(log);
    let outcome = match (out, err) {
        (Ok(out), Ok(err)) => spawn_and_wait(argv, launch, (out, err), Some(stdout), feed).await,
        (Err(e), _) => {
            return (
                ShellOutcome::NotStarted(format!("cannot create {}: {e}", stdout.display())),
                String::new(),
            )
        }
        (_, Err(e)) => {
            return (
                ShellOutcome::NotStarted(format!("cannot open log {}: {e}", log.display())),
                String::new(),
            )
        }
    };
    let text = std::fs::read_to_string(stdout).unwrap_or_default();
    if !text.is_empty() {
        use std::io::Write as _;
        if let Ok(mut file) = OpenOptions::new().append(true).open(log) {
            let program = argv.first().map_or("", String::as_str);
            let _ = writeln!(file, "--- stdout of {program} ---\n{}", text.trim_end());
        }
    }
    (outcome, text)
}

/// Whether `program` can be run: a path to an executable file, or a name found in one of
/// the `path` directories.
pub fn findable(program: &str, path: Option<&str>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        // Relative paths are relative to the worktree, which does not exist yet.
        return !program.starts_with('/') || executable(std::path::Path::new(program));
    }
    path.unwrap_or("")
        .split(':')
        .filter(|d| !d.is_empty())
        .any(|dir| executable(&std::path::Path::new(dir).join(program)))
}

/// Starts the program in its sandbox and waits for it; then reads what it wrote to the log
/// (and to `stdout`, when that is kept apart) for writes the sandbox refused.
async fn spawn_and_wait(
    argv: &[String],
    launch: &Launch<'_>,
    (out, err): (std::fs::File, std::fs::File),
    stdout: Option<&Path>,
    feed: Option<Feed>,
) -> ShellOutcome {
    let Some((program, args)) = argv.split_first() else {
        return ShellOutcome::NotStarted("the command is empty".to_string());
    };
    let armed = match launch.sandbox.arm() {
        Ok(armed) => armed,
        Err(why) => return ShellOutcome::NotStarted(format!("cannot confine {program}: {why}")),
    };
    let log_start = std::fs::metadata(launch.log).map_or(0, |m| m.len());
    let input = if feed.is_some() { Io::Piped } else { Io::Null };
    let mut spec = Spec::new(program, launch.dir)
        .args(args)
        .stdio(input, out.into(), err.into());
    for var in plait_core::git::REDIRECTING_VARS {
        spec.env_remove(var);
    }
    for var in launch.sandbox.withheld_env() {
        spec.env_remove(var);
    }
    for (key, value) in launch.env {
        spec.env(key, value);
    }
    // The walls (and a view) give the child a process group (or session) of its own.
    let mut spawned = launch.sandbox.spawn(armed, spec).await;
    let mut feeding = None;
    if let (Ok(child), Some(mut feed)) = (&mut spawned, feed) {
        if let Some(mut input) = child.stdin.take() {
            feeding = Some(tokio::spawn(async move {
                use tokio::io::AsyncWriteExt as _;
                while let Some(chunk) = feed.recv().await {
                    if input.write_all(&chunk).await.is_err() || input.flush().await.is_err() {
                        break;
                    }
                }
                // Dropped: the program's input ends.
            }));
        }
    }
    let outcome = wait(spawned, program, launch).await;
    if let Some(feeding) = feeding {
        // The program has ended: whoever feeds it is told so (its sender closes).
        feeding.abort();
    }
    let failed = matches!(outcome, ShellOutcome::Exited(code) if code != 0)
        || outcome == ShellOutcome::Signalled;
    if armed.is_some() || failed {
        let mut text = read_from(launch.log, log_start);
        if let Some(stdout) = stdout {
            text.push_str(&read_from(stdout, 0));
        }
        if let Some(armed) = &armed {
            launch.sandbox.note_denials(armed, launch.dir, &text);
        }
        let limit = failed.then(|| limit_hit(&launch.sandbox.settings().limits, &text));
        if let Some(limit) = limit.flatten() {
            let code = match outcome {
                ShellOutcome::Exited(code) => Some(code),
                _ => None,
            };
            return ShellOutcome::OverLimit(code, limit);
        }
    }
    outcome
}

/// What a failed command's output (`text`) tells of a limit of the sandbox's it ran into,
/// in words naming it: a fork refused (`EAGAIN`), an allocation refused (`ENOMEM`, a
/// runtime's "out of memory").
fn limit_hit(limits: &crate::sandbox::Limits, text: &str) -> Option<String> {
    const FORK: &[&str] = &[
        "Resource temporarily unavailable",
        "Cannot fork",
        "can't fork",
        "fork failed",
        "fork: retry",
        "pthread_create failed",
    ];
    const MEMORY: &[&str] = &[
        "MemoryError",
        "out of memory",
        "Out of memory",
        "Cannot allocate memory",
        "memory allocation of",
        "bad_alloc",
    ];
    let said = |phrases: &[&str]| phrases.iter().any(|p| text.contains(p));
    if let (Some(pids), true) = (limits.pids, said(FORK)) {
        return Some(format!(
            "a process could not be started: the sandbox allows {pids} processes at \
             once ([sandbox] limits = {{ pids = {pids} }})"
        ));
    }
    if let (Some(memory), true) = (limits.memory, said(MEMORY)) {
        let memory = crate::sandbox::bytes(memory);
        return Some(format!(
            "a process ran out of memory: the sandbox allows {memory} per process \
             ([sandbox] limits = {{ memory = \"{memory}\" }})"
        ));
    }
    None
}

async fn wait(spawned: std::io::Result<Child>, program: &str, launch: &Launch<'_>) -> ShellOutcome {
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return ShellOutcome::NotStarted(format!("cannot start {program}: {e}")),
    };
    let pid = child.id();
    let stop = |child_pid: Option<u32>| {
        if let Some(pid) = child_pid {
            kill_group(pid);
        }
    };
    tokio::select! {
        waited = tokio::time::timeout(launch.timeout, child.wait()) => match waited {
            Ok(Ok(status)) => {
                // In a PID namespace of its own its leftovers are gone with it; without one,
                // those still in its process group go now (it is the group's leader, reaped
                // just now: the group lives on only in them).
                if !launch.sandbox.own_pid_ns() {
                    stop(pid);
                }
                match status.code() {
                    Some(code) => ShellOutcome::Exited(code),
                    None => ShellOutcome::Signalled,
                }
            }
            Ok(Err(e)) => ShellOutcome::NotStarted(format!("waiting for the command failed: {e}")),
            Err(_) => {
                stop(pid);
                let _ = child.wait().await;
                ShellOutcome::TimedOut
            }
        },
        _ = launch.cancel.cancelled() => {
            stop(pid);
            let _ = child.wait().await;
            ShellOutcome::Interrupted
        }
    }
}

/// Runs a command another process asked for through the way into a view
/// ([`crate::forward`]): its arguments, working directory and environment as asked, its
/// standard streams the requester's, inside `sandbox` (and its view). Its exit status
/// (128 and the signal's number when a signal ended it), or why it could not start;
/// dropped, it stops the command's process group.
pub async fn run_request(
    request: crate::forward::Request,
    sandbox: &crate::sandbox::Sandbox,
    timeout: Duration,
    cancel: &Cancel,
) -> Result<i32, String> {
    let crate::forward::Request {
        cwd,
        argv,
        env,
        mut stdio,
    } = request;
    let Some((program, args)) = argv.split_first() else {
        return Err("plait run-in-view: no command".to_string());
    };
    let armed = sandbox
        .arm()
        .map_err(|why| format!("cannot confine {}: {why}", program.to_string_lossy()))?;
    if stdio.len() != 3 {
        return Err("plait run-in-view: no standard streams".to_string());
    }
    let io = |fd: Option<std::os::fd::OwnedFd>| fd.map_or(Io::Null, Io::Fd);
    let (err, out, input) = (io(stdio.pop()), io(stdio.pop()), io(stdio.pop()));
    let mut spec = Spec::new(program, &cwd).args(args).stdio(input, out, err);
    spec.env_clear();
    for (key, value) in env {
        spec.env(key, value);
    }
    spec.env_remove(crate::forward::FD_VAR);
    spec.env("PLAIT_VIEW", "overlay");
    for var in sandbox.withheld_env() {
        spec.env_remove(var);
    }
    let mut child = sandbox
        .spawn(armed, spec)
        .await
        .map_err(|e| format!("cannot start {}: {e}", program.to_string_lossy()))?;
    struct Group(Option<u32>);
    impl Drop for Group {
        fn drop(&mut self) {
            if let Some(pid) = self.0 {
                kill_group(pid);
            }
        }
    }
    let _group = Group(child.id());
    let status = tokio::select! {
        waited = tokio::time::timeout(timeout, child.wait()) => match waited {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => return Err(format!("waiting for the command failed: {e}")),
            Err(_) => return Err(format!("the command ran out of its {}s", timeout.as_secs())),
        },
        _ = cancel.cancelled() => return Err("the run was interrupted".to_string()),
    };
    use std::os::unix::process::ExitStatusExt as _;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// What a file holds from byte `start` on, at most the last 64 KiB of it.
fn read_from(path: &Path, start: u64) -> String {
    use std::io::{Read as _, Seek as _, SeekFrom};
    const MAX: u64 = 64 * 1024;
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let from = start.max(len.saturating_sub(MAX));
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_ok() {
        let _ = file.take(MAX).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Stops the agents a dead plait process of run `run` left running, with their process
/// groups: the processes whose environment says `PLAIT_RUN=<run>` and whose
/// `PLAIT_WORKTREE` is one of the run's `worktrees` and also their working directory, as
/// plait starts agents (run ids of two repositories may be equal; worktree paths are not;
/// and a shell where someone exported those variables by hand does not sit in that worktree,
/// as a rule). Reads `/proc`; elsewhere it finds nothing. Returns how many process groups it
/// stopped. Call it only while no agent of that run is running in this process.
pub fn stop_leftovers(run: &str, worktrees: &[std::path::PathBuf]) -> usize {
    let worktrees: Vec<std::path::PathBuf> = worktrees
        .iter()
        .filter_map(|w| w.canonicalize().ok())
        .collect();
    if worktrees.is_empty() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mark = format!("PLAIT_RUN={run}");
    // SAFETY: getpgid(0) asks for our own process group; no preconditions.
    let my_group = unsafe { libc::getpgid(0) };
    let mut groups = std::collections::BTreeSet::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        if !vars.contains(&mark.as_bytes()) {
            continue;
        }
        let worktree = vars
            .iter()
            .find_map(|v| v.strip_prefix(b"PLAIT_WORKTREE="))
            .map(|w| std::path::PathBuf::from(String::from_utf8_lossy(w).into_owned()));
        let cwd = std::fs::read_link(entry.path().join("cwd")).ok();
        let at_work = match (worktree, cwd) {
            (Some(w), Some(c)) => w
                .canonicalize()
                .is_ok_and(|w| w == c && worktrees.contains(&w)),
            _ => false,
        };
        if !at_work {
            continue;
        }
        // SAFETY: getpgid has no preconditions; a pid that is gone gives -1.
        let group = unsafe { libc::getpgid(pid) };
        if group > 0 && group != my_group {
            groups.insert(group);
        }
    }
    for &group in &groups {
        kill_group(group as u32);
    }
    groups.len()
}

fn kill_group(pid: u32) {
    // SAFETY: signalling the process group the child leads; it was created by us.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

/// The last `lines` lines of a log file, at most `max` bytes.
pub fn tail(log: &Path, lines: usize, max: usize) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    let mut out = all[start..].join("\n");
    if out.len() > max {
        let cut = out.len() - max;
        let cut = (cut..out.len())
            .find(|&i| out.is_char_boundary(i))
            .unwrap_or(out.len());
        out = format!("...{}", &out[cut..]);
    }
    out
}
