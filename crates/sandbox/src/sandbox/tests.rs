//! The walls tried on this machine's kernel: both ways of spawning, the observer, the
//! network's walls.

use super::settings::MIN_ABI;
use super::*;
use crate::child::Io;

#[test]
fn the_probe_agrees_with_the_kernel() {
    // This machine's kernel may or may not have Landlock; the probe must say which
    // without failing, and `off` is never confined.
    let _ = support();
    let off = SandboxSettings {
        mode: SandboxMode::Off,
        ..SandboxSettings::default()
    };
    assert_eq!(off.confinement(), Confinement::Off);
}

/// Both ways of raising the walls (a spawning thread from ABI 5 on, `pre_exec` in a
/// forked child before) confine the child and give it a process group of its own, and
/// before ABI 5 a session of its own too.
#[cfg(target_os = "linux")]
#[test]
fn both_ways_of_spawning_confine_the_child() {
    let Support::Landlock(newest) = support().clone() else {
        eprintln!("skipped: no Landlock here");
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for abi in [MIN_ABI, 4, newest].into_iter().filter(|a| *a <= newest) {
        let root = tempfile::tempdir().unwrap();
        let own = root.path().join("own");
        std::fs::create_dir(&own).unwrap();
        let settings = SandboxSettings {
            mode: SandboxMode::Auto,
            view: ViewMode::Auto,
            writable: Vec::new(),
            temp_root: root.path().to_path_buf(),
            ..SandboxSettings::default()
        };
        let sandbox = Sandbox::new(&settings, vec![own.clone()]);
        let armed = sandbox.prepare(abi).unwrap();
        let cmd = Spec::new("sh", root.path())
            .args([
                "-c",
                "echo in > own/ok; echo out > outside; echo tmp > \"$TMPDIR/t\" && echo tmp-ok; \
                 read -r stat < /proc/self/stat; set -- $stat; echo \"$1 $5 $6\"",
            ])
            .stdio(Io::Null, Io::Piped, Io::Null);
        let out = runtime
            .block_on(async { armed.spawn(cmd).await.unwrap().wait_with_output().await })
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("tmp-ok"), "ABI {abi}: {text}");
        let ids: Vec<&str> = lines.next().unwrap().split(' ').collect();
        // pid, process group, session of the shell itself (`read` is a builtin).
        assert_eq!(
            ids[0], ids[1],
            "ABI {abi}: a process group of its own: {text}"
        );
        if abi < 5 {
            assert_eq!(ids[0], ids[2], "ABI {abi}: a session of its own: {text}");
        }
        assert!(own.join("ok").exists(), "ABI {abi}");
        assert!(!root.path().join("outside").exists(), "ABI {abi}");
    }
}

/// Runs `script` with `sh -c` in `root` behind the newest walls of a sandbox owning
/// `root/own`, its output thrown away; returns what the sandbox recorded.
#[cfg(target_os = "linux")]
fn observed(root: &Path, script: &str) -> Vec<String> {
    let Support::Landlock(abi) = support().clone() else {
        unreachable!("checked by the caller")
    };
    let settings = SandboxSettings {
        mode: SandboxMode::Auto,
        view: ViewMode::Auto,
        writable: Vec::new(),
        temp_root: root.to_path_buf(),
        ..SandboxSettings::default()
    };
    let sandbox = Sandbox::new(&settings, vec![root.join("own")]);
    let armed = sandbox.prepare(abi).unwrap();
    let cmd = Spec::new("sh", root).args(["-c", script]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let status = runtime
        .block_on(async { armed.spawn(cmd).await.unwrap().wait().await })
        .unwrap();
    assert!(status.success(), "{script}");
    sandbox.denials()
}

/// From ABI 5 on the observer records refused writes the program never mentions, and
/// only those: nothing for writes inside, nor for calls that fail before the wall.
#[cfg(target_os = "linux")]
#[test]
fn the_observer_records_silent_refusals_only() {
    if !matches!(support(), Support::Landlock(abi) if *abi >= 5) {
        eprintln!("skipped: the observer needs Landlock ABI 5");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("own/sub")).unwrap();
    std::fs::create_dir_all(root.join("out/there")).unwrap();
    std::os::unix::fs::symlink(root.join("own"), root.join("link")).unwrap();
    let inside = "echo a > own/a; mkdir -p own/sub/deeper; mv own/a own/sub/b; \
                  ln -s b own/sub/c; rm own/sub/c; echo t > \"$TMPDIR/t\"; \
                  echo l > link/l; echo n > /dev/null; echo s > /dev/stdout; \
                  cat own/sub/b /etc/hostname > /dev/null; true";
    assert_eq!(observed(&root, inside), Vec::<String>::new());
    assert!(root.join("own/l").exists());
    let outside = "mkdir -p out/there/new 2>/dev/null; echo x > out/file 2>/dev/null; \
                   cd own/sub && mkdir ../../out/up 2>/dev/null; \
                   rm ../../out/missing 2>/dev/null; true";
    let refused = |p: &str| format!("write to {} refused", root.join(p).display());
    assert_eq!(
        observed(&root, outside),
        [
            refused("out/there/new"),
            refused("out/file"),
            refused("out/up")
        ]
    );
}

/// With the network off, a process reaches its own loopback and the plan's ports, and
/// nothing served outside: no TCP listener, no UDP socket, no path or abstract UNIX
/// socket; in a namespace of its own, and (where there is none) by Landlock and seccomp.
#[cfg(target_os = "linux")]
#[test]
fn network_off_reaches_its_own_loopback_and_the_ports_only() {
    use std::io::Write as _;
    use std::os::linux::net::SocketAddrExt as _;
    let Support::Landlock(abi) = support().clone() else {
        eprintln!("skipped: no Landlock here");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("own")).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open_port = open.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in open.incoming().flatten() {
            let mut stream = stream;
            let _ = stream.write_all(b"pong");
        }
    });
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let path = root.join("served.sock");
    let _unix = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let abstract_name = format!("plait-test-{}", std::process::id());
    let address =
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
    let _abstract = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
    let script = format!(
        r#"
import socket
def tcp(port):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
    except OSError as e:
        return "refused"
    try:
        return "open:" + s.recv(4).decode()
    except OSError as e:
        return "open"
def unix(name):
    try:
        socket.socket(socket.AF_UNIX).connect(name)
        return "open"
    except OSError:
        return "refused"
def udp():
    try:
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {udp}))
        return "sent"
    except OSError:
        return "refused"
def own():
    try:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.create_connection(server.getsockname(), timeout=2)
        return "open"
    except OSError:
        return "refused"
print(tcp({closed}), tcp({open_port}), unix("{path}"), unix("\0{abstract_name}"), udp(), own())
"#,
        udp = udp.local_addr().unwrap().port(),
        closed = closed.local_addr().unwrap().port(),
        path = path.display(),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut walls = vec![NetWall::Namespace];
    if abi >= 6 {
        walls.push(NetWall::Landlock);
    }
    for wall in walls {
        if wall == NetWall::Namespace && view::net_support().is_err() {
            eprintln!("skipped: no network namespaces here");
            continue;
        }
        let settings = SandboxSettings {
            temp_root: root.clone(),
            ports: vec![open_port],
            ..SandboxSettings::default()
        };
        let sandbox = Sandbox::new(&settings, vec![root.join("own")]);
        let armed = sandbox.prepare_walled(abi, wall.clone()).unwrap();
        let cmd =
            Spec::new("python3", &root)
                .args(["-c", &script])
                .stdio(Io::Null, Io::Piped, Io::Piped);
        let out = runtime
            .block_on(async {
                let child = sandbox.spawn(Some(&armed), cmd).await.unwrap();
                child.wait_with_output().await
            })
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let expected = match wall {
            // Its own loopback works in a namespace; Landlock binds nothing.
            NetWall::Namespace => "refused open:pong refused refused sent open",
            _ => "refused open:pong open refused refused refused",
        };
        assert_eq!(
            text.trim(),
            expected,
            "{wall:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut buf = [0u8; 8];
        assert!(udp.recv(&mut buf).is_err(), "{wall:?}: a datagram got out");
    }
}

/// With the network off, a sandbox's processes share the network namespace it made once
/// (`net::holder`); another sandbox's is another, plait's is neither, and no process can
/// join plait's or the other sandbox's (`setns`), nor reach a path socket served after the
/// sandbox was made.
#[cfg(target_os = "linux")]
#[test]
fn a_sandboxs_processes_share_its_network_namespace_and_none_can_leave_it() {
    let Support::Landlock(abi) = support().clone() else {
        eprintln!("skipped: no Landlock here");
        return;
    };
    if view::net_support().is_err() {
        eprintln!("skipped: no network namespaces here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("own")).unwrap();
    // Reads left open too: then the namespaces can be opened, and joining is what fails.
    for read_all in [false, true] {
        one_namespace_per_sandbox(abi, &root, read_all);
    }
}

fn one_namespace_per_sandbox(abi: i32, root: &Path, read_all: bool) {
    let root = root.to_path_buf();
    let settings = SandboxSettings {
        temp_root: root.clone(),
        read_all,
        ..SandboxSettings::default()
    };
    let (a, b) = (
        Sandbox::new(&settings, vec![root.join("own")]),
        Sandbox::new(&settings, vec![root.join("own")]),
    );
    let armed_a = a.prepare_walled(abi, NetWall::Namespace).unwrap();
    let armed_b = b.prepare_walled(abi, NetWall::Namespace).unwrap();
    let held_b = armed_b.held.as_ref().expect("the namespaces held");
    assert!(armed_a.held.is_some());
    // Served after the sandbox was made: covered in the process's own mount namespace.
    let late = root.join(format!("late-{read_all}.sock"));
    let _late = std::os::unix::net::UnixListener::bind(&late).unwrap();
    let script = r#"
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def join(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return "open-refused"
    return "joined" if libc.setns(fd, 0x40000000) == 0 else "setns-refused"
def unix(name):
    try:
        socket.socket(socket.AF_UNIX).connect(name)
        return "open"
    except OSError:
        return "refused"
print(os.readlink("/proc/self/ns/net"), join(sys.argv[1]), join(sys.argv[2]), unix(sys.argv[3]))
"#;
    let plait_net = format!("/proc/{}/ns/net", std::process::id());
    let other = format!("/proc/{}/fd/{}", std::process::id(), held_b.fds()[1]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = |sandbox: &Sandbox, armed: &Armed| -> String {
        let cmd = Spec::new("python3", &root)
            .args(["-c", script, &plait_net, &other, late.to_str().unwrap()])
            .stdio(Io::Null, Io::Piped, Io::Piped);
        let out = runtime
            .block_on(async {
                let child = sandbox.spawn(Some(armed), cmd).await.unwrap();
                child.wait_with_output().await
            })
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let (first, second, in_b) = (run(&a, &armed_a), run(&a, &armed_a), run(&b, &armed_b));
    let ns = |line: &str| line.split(' ').next().unwrap().to_string();
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert_eq!(ns(&first), ns(&second), "one namespace for the sandbox");
    assert_ne!(ns(&first), ns(&in_b), "another for another sandbox");
    assert_ne!(ns(&first), ours.display().to_string());
    for line in [&first, &second] {
        let rest: Vec<&str> = line.split(' ').skip(1).collect();
        assert!(!rest[0].ends_with("joined"), "joined plait's: {line}");
        assert!(
            !rest[1].ends_with("joined"),
            "joined another sandbox's: {line}"
        );
        assert_eq!(rest[2], "refused", "reached a socket served later: {line}");
    }
}

/// A program that cannot be started in a namespace is refused as `exec` refuses it (the
/// child is cloned, not forked: its error comes back through plait's memory), and the
/// child's standard streams are those asked for.
#[cfg(target_os = "linux")]
#[test]
fn a_cloned_child_reports_what_exec_refused_and_gets_its_streams() {
    let Support::Landlock(abi) = support().clone() else {
        eprintln!("skipped: no Landlock here");
        return;
    };
    if view::net_support().is_err() {
        eprintln!("skipped: no network namespaces here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("own")).unwrap();
    let script = root.join("own").join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let settings = SandboxSettings {
        temp_root: root.clone(),
        ..SandboxSettings::default()
    };
    let sandbox = Sandbox::new(&settings, vec![root.join("own")]);
    let armed = sandbox.prepare_walled(abi, NetWall::Namespace).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let missing = Spec::new("plait-no-such-program", &root);
        let err = sandbox.spawn(Some(&armed), missing).await.err().unwrap();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
        let denied = Spec::new(&script, &root);
        let err = sandbox.spawn(Some(&armed), denied).await.err().unwrap();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
        let mut cat = Spec::new("sh", &root)
            .args([
                "-c",
                "read line; echo \"got $line\"; echo \"$FOO\" >&2; exit 3",
            ])
            .stdio(Io::Piped, Io::Piped, Io::Piped);
        cat.env("FOO", "bar");
        let mut child = sandbox.spawn(Some(&armed), cat).await.unwrap();
        use tokio::io::AsyncWriteExt as _;
        let mut input = child.stdin.take().unwrap();
        input.write_all(b"hello\n").await.unwrap();
        drop(input);
        let out = child.wait_with_output().await.unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "got hello\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "bar\n");
    });
}

/// A repository whose config holds a token in its remote's URL and an `http.extraHeader`
/// (as `actions/checkout` writes them), a file in plait's store, and a linked worktree
/// (`root/wt`, branch `task`): the worktree.
#[cfg(target_os = "linux")]
fn repository_with_secrets(root: &Path) -> PathBuf {
    let repo = root.join("repo");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    std::fs::create_dir_all(&repo).unwrap();
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&["add", "a.txt"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "first commit",
    ]);
    git(&[
        "remote",
        "add",
        "origin",
        "https://x-access-token:SECRET-url@github.com/o/r",
    ]);
    git(&[
        "config",
        "http.https://github.com/.extraheader",
        "AUTHORIZATION: basic SECRET-header",
    ]);
    let store = repo.join(".git/plait/runs/r");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(store.join("state.json"), "SECRET-store\n").unwrap();
    git(&["worktree", "add", "-q", "../wt", "-b", "task"]);
    root.join("wt")
}

/// Runs `script` in `repo` behind the walls of `settings` (owning `repo`): its output.
#[cfg(target_os = "linux")]
fn run_in(repo: &Path, settings: &SandboxSettings, script: &str) -> String {
    let Support::Landlock(abi) = support().clone() else {
        unreachable!("checked by the caller")
    };
    let sandbox = Sandbox::new(settings, vec![repo.to_path_buf()]);
    let armed = sandbox.prepare(abi).unwrap();
    let mut cmd = Spec::new("sh", repo)
        .args(["-c", script])
        .stdio(Io::Null, Io::Piped, Io::Piped);
    cmd.env("GIT_CONFIG_GLOBAL", "/dev/null");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = runtime
        .block_on(async {
            sandbox
                .spawn(Some(&armed), cmd)
                .await
                .unwrap()
                .wait_with_output()
                .await
        })
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// git behind the walls reads the repository's config without its credentials and never
/// plait's store, with the network open (a mount namespace for the copy alone) and off.
#[cfg(target_os = "linux")]
#[test]
fn git_behind_the_walls_reads_the_repository_without_its_credentials() {
    if !matches!(support(), Support::Landlock(_)) || view::support().is_err() {
        eprintln!("skipped: needs Landlock and mount namespaces");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let wt = repository_with_secrets(root.path());
    let repo = root.path().join("repo");
    let script = "cat ../repo/.git/config; cat ../repo/.git/plait/runs/r/state.json; \
                  ls ../repo/.git/plait; ls ../repo/.git; echo change >> a.txt; \
                  git status --short; git log --oneline; git config remote.origin.url; \
                  git config --get-regexp 'http.*' ; echo done";
    for network in [Network::On, Network::Off] {
        let settings = SandboxSettings {
            temp_root: root.path().to_path_buf(),
            git_dir: Some(repo.join(".git")),
            network,
            ..SandboxSettings::default()
        };
        let out = run_in(&wt, &settings, script);
        assert!(!out.contains("SECRET"), "{network:?}: {out}");
        assert!(out.contains("first commit"), "{network:?}: {out}");
        assert!(out.contains(" M a.txt"), "{network:?}: {out}");
        assert!(
            out.contains("https://github.com/o/r\n"),
            "{network:?}: {out}"
        );
        assert!(out.contains("done"), "{network:?}: {out}");
        eprintln!("{out}");
    }
    // plait itself still reads the real file.
    let real = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    assert!(real.contains("SECRET-url"));
}

/// A script that starts one leftover of every kind, each appending to a file of its own
/// beneath `own` every 20 ms for as long as it lives, and ends when they have all written.
const LEFTOVERS: &str = r#"
loop='while :; do echo x >> "$0"; sleep 0.02; done'
sh -c "$loop" "$OWN/bg" &
setsid sh -c "$loop" "$OWN/setsid" &
sh -c 'sh -c "$1" "$2" & exit 0' double "$loop" "$OWN/double"
env -i /bin/sh -c "$loop" "$OWN/cleared" &
(cd / && exec sh -c "$loop" "$OWN/root") &
for f in bg setsid double cleared root; do
  while ! test -s "$OWN/$f"; do sleep 0.01; done
done
"#;

/// Whether the files the leftovers write still grow.
fn still_written(own: &Path) -> Vec<&'static str> {
    let sizes = |own: &Path| -> Vec<u64> {
        ["bg", "setsid", "double", "cleared", "root"]
            .iter()
            .map(|f| std::fs::metadata(own.join(f)).map_or(0, |m| m.len()))
            .collect()
    };
    // Dying takes the kernel a moment; the writers' sleeps are 20 ms.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let before = sizes(own);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let after = sizes(own);
    ["bg", "setsid", "double", "cleared", "root"]
        .into_iter()
        .zip(before.iter().zip(&after))
        .filter(|(_, (b, a))| a != b)
        .map(|(name, _)| name)
        .collect()
}

/// Runs `script` under `shell::run` in a sandbox (`network`) owning `root/own`, with `OWN`
/// naming it; how it ended.
fn run_leftovers(
    root: &Path,
    network: Network,
    script: &str,
    timeout_ms: u64,
) -> crate::shell::ShellOutcome {
    let settings = SandboxSettings {
        temp_root: root.to_path_buf(),
        network,
        ..SandboxSettings::default()
    };
    run_for(root, settings, script, timeout_ms)
}

/// Runs `script` under `shell::run` in a sandbox of `settings` owning `root/own`, with
/// `OWN` naming it, its output in `root/log`; how it ended.
fn run_for(
    root: &Path,
    settings: SandboxSettings,
    script: &str,
    timeout_ms: u64,
) -> crate::shell::ShellOutcome {
    let own = root.join("own");
    let sandbox = Sandbox::new(&settings, vec![own.clone()]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_fire, cancel) = plait_core::cancel::Cancel::new();
    let env = [("OWN", own.display().to_string())];
    let log = root.join("log");
    let launch = crate::shell::Launch {
        dir: root,
        env: &env,
        log: &log,
        timeout: std::time::Duration::from_millis(timeout_ms),
        cancel: &cancel,
        sandbox: &sandbox,
    };
    runtime.block_on(crate::shell::run(script, &launch))
}

/// Nothing a command started outlives it: a background job, a `setsid` child, a double
/// fork, one with a cleared environment and one that left for `/`, with the network off
/// (the sandbox's held namespaces) and on (no network namespace); its exit status passes
/// through.
#[cfg(target_os = "linux")]
#[test]
fn a_commands_leftovers_die_with_it() {
    if !matches!(support(), Support::Landlock(_)) || pids::support().is_err() {
        eprintln!("skipped: no Landlock or no PID namespaces here");
        return;
    }
    for network in [Network::Off, Network::On] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let own = root.join("own");
        std::fs::create_dir(&own).unwrap();
        let script = format!("{LEFTOVERS}\nexit 7");
        let outcome = run_leftovers(&root, network, &script, 20_000);
        let log = std::fs::read_to_string(root.join("log")).unwrap_or_default();
        assert_eq!(
            outcome,
            crate::shell::ShellOutcome::Exited(7),
            "{network:?}: {log}"
        );
        assert_eq!(still_written(&own), Vec::<&str>::new(), "{network:?}");
    }
}

/// A command that runs past its timeout is killed with everything it started, though its
/// first process, the PID namespace's init, takes no signal it has no handler for from
/// inside.
#[cfg(target_os = "linux")]
#[test]
fn a_timed_out_command_is_killed_with_its_leftovers() {
    if !matches!(support(), Support::Landlock(_)) || pids::support().is_err() {
        eprintln!("skipped: no Landlock or no PID namespaces here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let own = root.join("own");
    std::fs::create_dir(&own).unwrap();
    let script = format!("trap '' TERM INT; {LEFTOVERS}\nkill -TERM $$; sleep 1000");
    let outcome = run_leftovers(&root, Network::Off, &script, 1_500);
    assert_eq!(outcome, crate::shell::ShellOutcome::TimedOut);
    assert_eq!(still_written(&own), Vec::<&str>::new());
}

/// From inside, plait's process is not there: its `cmdline` cannot be read, and the
/// command is the first process of what it sees.
#[cfg(target_os = "linux")]
#[test]
fn other_processes_are_not_in_a_commands_proc() {
    if !matches!(support(), Support::Landlock(_)) || pids::support().is_err() {
        eprintln!("skipped: no Landlock or no PID namespaces here");
        return;
    }
    for network in [Network::Off, Network::On] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("own")).unwrap();
        let script = format!(
            "if cat /proc/{}/cmdline; then exit 1; fi; test \"$$\" = 1 || exit 2; \
             grep -q . /proc/self/status || exit 3; ls /proc | grep -c '^[0-9]' > own/count",
            std::process::id()
        );
        let outcome = run_leftovers(&root, network, &script, 20_000);
        let log = std::fs::read_to_string(root.join("log")).unwrap_or_default();
        assert_eq!(
            outcome,
            crate::shell::ShellOutcome::Exited(0),
            "{network:?}: {log}"
        );
        let count = std::fs::read_to_string(root.join("own/count")).unwrap();
        // `sh` itself, and `ls` (or `grep`) of the pipe.
        assert!(
            count.trim().parse::<u32>().unwrap() <= 3,
            "{network:?}: {count}"
        );
    }
}

/// A command that starts processes until the kernel refuses one fails, its log naming
/// the sandbox's limit, and it got no more than the limit allows (and the 300 the PID
/// namespace's numbering adds before it wraps); and a process that allocates past the
/// memory limit fails naming it.
#[cfg(target_os = "linux")]
#[test]
fn a_command_past_its_limits_fails_naming_them() {
    if !matches!(support(), Support::Landlock(_)) || pids::support().is_err() {
        eprintln!("skipped: no Landlock or no PID namespaces here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("own")).unwrap();
    let settings = |limits| SandboxSettings {
        temp_root: root.clone(),
        limits,
        ..SandboxSettings::default()
    };
    let pids = Limits {
        pids: Some(64),
        memory: None,
    };
    let flood =
        "i=0; while [ $i -lt 5000 ]; do sleep 100 & i=$((i+1)); echo $i > \"$OWN/started\"; done";
    let outcome = run_for(&root, settings(pids), flood, 20_000);
    let log = std::fs::read_to_string(root.join("log")).unwrap();
    let said = outcome.describe(std::time::Duration::ZERO);
    assert!(
        matches!(outcome, crate::shell::ShellOutcome::OverLimit(Some(c), _) if c != 0),
        "{outcome:?}: {log}"
    );
    assert!(
        said.contains("the sandbox allows 64 processes at once"),
        "{said}"
    );
    let started: u32 = std::fs::read_to_string(root.join("own/started"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!((64..=364).contains(&started), "{started}");
    let memory = Limits {
        pids: None,
        memory: Some(256 << 20),
    };
    std::fs::write(root.join("log"), "").unwrap();
    let hog = "/usr/bin/python3 -c 'b = bytearray(1 << 30)' && echo allocated > \"$OWN/hog\"";
    let outcome = run_for(&root, settings(memory), hog, 20_000);
    let log = std::fs::read_to_string(root.join("log")).unwrap();
    let said = outcome.describe(std::time::Duration::ZERO);
    assert!(
        matches!(outcome, crate::shell::ShellOutcome::OverLimit(Some(1), _)),
        "{outcome:?}: {log}"
    );
    assert!(log.contains("MemoryError"), "{log}");
    assert!(
        said.contains("the sandbox allows 256M per process"),
        "{said}"
    );
    assert!(!root.join("own/hog").exists());
}

/// A directory a view shares from the checkout, swapped for a symlink to a directory
/// outside after plait found it: the view's mount of it is refused (`ELOOP`), never the
/// directory outside shown; the directory plait found is shown.
#[cfg(target_os = "linux")]
#[test]
fn a_shared_directory_swapped_for_a_link_is_refused_at_its_mount() {
    use std::os::unix::fs::MetadataExt as _;
    if !matches!(support(), Support::Landlock(_)) || view::support().is_err() {
        eprintln!("skipped: needs Landlock and mount namespaces");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let at = |p: &str| root.path().join(p);
    for d in [
        "lower/deps",
        "upper",
        "work",
        "target",
        "checkout/deps",
        "home",
    ] {
        std::fs::create_dir_all(at(d)).unwrap();
    }
    std::fs::write(at("checkout/deps/f"), "in the checkout\n").unwrap();
    std::fs::write(at("home/f"), "SECRET-home\n").unwrap();
    let found = std::fs::metadata(at("checkout/deps")).unwrap();
    let mut view =
        OverlayView::of_worktree(at("target"), vec![at("lower")], at("upper"), at("work"));
    view.nested = vec![Nested {
        path: PathBuf::from("deps"),
        source: at("checkout/deps"),
        layer: None,
        identity: Some((found.dev(), found.ino())),
    }];
    let settings = SandboxSettings {
        temp_root: root.path().to_path_buf(),
        ..SandboxSettings::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cat = |view: &OverlayView| {
        let sandbox = Sandbox::new(&settings, vec![at("upper")]).with_view(Some(view.clone()));
        let armed = sandbox.arm().unwrap();
        let cmd =
            Spec::new("cat", at("upper"))
                .args(["deps/f"])
                .stdio(Io::Null, Io::Piped, Io::Null);
        runtime.block_on(async {
            match sandbox.spawn(armed, cmd).await {
                Ok(child) => Ok(String::from_utf8_lossy(
                    &child.wait_with_output().await.unwrap().stdout,
                )
                .into_owned()),
                Err(e) => Err(e),
            }
        })
    };
    assert_eq!(cat(&view).unwrap(), "in the checkout\n");
    std::fs::rename(at("checkout/deps"), at("checkout/was-deps")).unwrap();
    std::os::unix::fs::symlink(at("home"), at("checkout/deps")).unwrap();
    let refused = cat(&view).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::ELOOP), "{refused}");
    // Without the identity, the link would have been followed: what the check stops.
    view.nested[0].identity = None;
    assert_eq!(cat(&view).unwrap(), "SECRET-home\n");
}
