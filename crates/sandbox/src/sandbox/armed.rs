//! A sandbox's walls made ready (its private temporary directory, its ruleset, the
//! observer's places, the network's wall), and the two ways a process starts behind them:
//! straight, or entered into a view or network namespace of its own.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::net::ports::Namespace;
use super::net::seccomp;
use super::places::Places;
use super::rules::{read_access, restrict, ruleset, write_access};
use super::settings::NetWall;
use super::{caches, ffi, net, notify, reads, view};
use crate::child::{self, Child, Spec};
use plait_core::sync::Locked as _;

/// A sandbox's walls, ready to start processes behind.
#[derive(Debug)]
pub(crate) struct Armed {
    pub(super) abi: i32,
    pub(super) ruleset: std::os::fd::OwnedFd,
    pub(super) tmp: tempfile::TempDir,
    /// The tools' caches its processes write through layers of the sandbox's own, when
    /// they start in a view; the layers are in `_cache_root`, which goes with the sandbox.
    pub(super) caches: Vec<view::CacheLayer>,
    pub(super) _cache_root: Option<caches::LayerRoot>,
    pub(super) places: Arc<Places>,
    /// What the ruleset was built from, for a view's ruleset of its own per process: the
    /// places written, and those read (`None`: reads are not walled).
    pub(super) rule_paths: Vec<PathBuf>,
    pub(super) read_paths: Option<Vec<PathBuf>>,
    /// The places whose served sockets the processes may reach (theirs, `[sandbox] sockets`).
    pub(super) reachable: Vec<PathBuf>,
    /// The packages of the programs started by path since (see [`Armed::read_program`]).
    pub(super) programs: Mutex<Vec<PathBuf>>,
    /// Copies of config files without their secrets, each with the variable naming it.
    pub(super) configs: Vec<(&'static str, PathBuf)>,
    /// Files shown in other files' place in each process's mount namespace (read-only):
    /// the copy of the repository's config without its credentials, at the config's path.
    pub(super) binds: Vec<(PathBuf, PathBuf)>,
    /// How the processes read the repository's config, when they read its git directory.
    pub(super) git_config: Option<super::gitconfig::RepoConfig>,
    /// How the network is walled.
    pub(super) wall: NetWall,
    /// The network namespace each process makes for itself, when that is the wall.
    pub(super) namespace: Option<Namespace>,
    /// That namespace made once and held for every process (`net::holder`), where it
    /// could be.
    pub(super) held: Option<super::net::holder::Held>,
    /// The loopback ports they may reach (Landlock's TCP rules, where that is the wall).
    pub(super) ports: Vec<u16>,
}

impl Armed {
    /// Starts `spec` where `entry` says (a view, a network namespace), behind walls of its
    /// own raised in the child after its mounts: in a view, the ruleset made afresh, for the
    /// child adds the worktree's rule to it. The child is cloned sharing plait's memory
    /// (`crate::child::spawn_entering`), so plait is not forked. From ABI 5 the observer's
    /// filter goes up on a short-lived thread of plait's that then clones the child, which
    /// inherits it; the thread raises no walls itself, for the child must still enter its
    /// namespaces. `pass` is kept open across the exec. Also returns the channel on which
    /// the child sent the listeners of its `ports`.
    pub(super) async fn spawn_entered(
        &self,
        mut spec: Spec,
        entry: view::Entry<'_>,
        pass: Option<std::os::fd::RawFd>,
    ) -> std::io::Result<(Child, Option<std::os::fd::OwnedFd>)> {
        self.set_env(&mut spec);
        let reads = self.read_paths.as_ref().map(|read| {
            let mut read = read.clone();
            read.extend(self.programs.locked().iter().cloned());
            read
        });
        // The child adds rules of its own (the view, its own `/proc`) to a ruleset made
        // for it alone.
        let fresh = entry.view.is_some() || (entry.pid.is_some() && self.read_paths.is_some());
        let ruleset = if fresh {
            ruleset(self.abi, &self.rule_paths, reads.as_deref(), self.tcp())
                .map_err(std::io::Error::other)?
        } else {
            self.ruleset.try_clone()?
        };
        let read = if self.read_paths.is_some() {
            read_access(self.abi)
        } else {
            0
        };
        let walls = view::Walls {
            ruleset,
            access: write_access(self.abi) | read,
            proc_access: read,
            // No controlling terminal: a command that opens `/dev/tty` to ask something
            // (a password prompt) is told there is none, rather than stopped by SIGTTIN as
            // a background process group of plait's terminal would be.
            session: true,
        };
        let cwd = spec.cwd.clone();
        let (mut entering, channel) = view::entering(entry, Some(&cwd), Some(walls))?;
        let works = entering.take_works();
        let started = self.start_entering(entering, spec, pass).await;
        let mut child = started.and_then(Child::from_cloned);
        match &mut child {
            Ok(child) => child.remove_when_ended(works),
            Err(_) => view::remove_works(&works),
        }
        Ok((child?, channel))
    }

    /// Clones the child that enters as `entering` says and runs `spec`, on a short-lived
    /// thread that holds the observer's filter from ABI 5.
    async fn start_entering(
        &self,
        entering: view::Entering,
        spec: Spec,
        pass: Option<std::os::fd::RawFd>,
    ) -> std::io::Result<child::Started> {
        let start = move |entering: &mut view::Entering, spec: Spec| {
            let group = !entering.session();
            let pid_ns = entering.pid_ns();
            // SAFETY: `run` makes only async-signal-safe calls on what it holds.
            child::spawn_entering(spec, pass, group, pid_ns, &mut |stage| unsafe {
                entering.run(stage)
            })
        };
        if self.abi < 5 {
            let mut entering = entering;
            return start(&mut entering, spec);
        }
        let places = self.places.clone();
        let filter = self.net_filter();
        let (sent, received) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("plait-sandbox".to_string())
            .stack_size(256 * 1024)
            .spawn(move || {
                let mut entering = entering;
                let observer = notify::Observer::start(places);
                // SAFETY: a plain system call; the filter needs no new privileges.
                let quiet = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0;
                // The network's filter where no namespace walls it (a PID namespace without
                // a user namespace, as root): the child inherits it, and makes no socket
                // before its program.
                if let Some(code) = filter {
                    // SAFETY: a plain system call on a filter that outlives it.
                    if let Err(e) = unsafe { seccomp::install(code) } {
                        let _ = sent.send(Err(e));
                        return;
                    }
                }
                if let (Some(observer), true) = (observer, quiet) {
                    observer.install();
                }
                let _ = sent.send(start(&mut entering, spec));
            })?;
        received
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the sandbox's spawning thread died")))
    }

    /// Starts `cmd` behind the walls, before the program runs: no new privileges, the
    /// ruleset, and a process group (or, before ABI 5, a session) of its own.
    ///
    /// From ABI 5 on, the ruleset also covers `ioctl` on devices, so a confined process cannot
    /// push input into a terminal (`TIOCSTI`) even without a session of its own; there the
    /// walls go up on a short-lived thread of plait's, which the kernel's rules bind, and the
    /// child starts from it through `posix_spawn` (`vfork`): no copy of plait's page tables,
    /// and no copy-on-write faults in plait afterwards. The same thread installs the
    /// observer's seccomp filter after the walls ([`notify`]; a spawn goes on without it when
    /// the kernel refuses it), with its supervisor started before either.
    ///
    /// Older kernels fork, and the child starts its own session and raises the walls itself
    /// between fork and exec. There is no observer then: the filter's listener would be born
    /// in the child, with no way back to plait short of passing it over a socket between fork
    /// and exec, so only the processes' logs tell what was refused.
    pub async fn spawn(&self, mut spec: Spec) -> std::io::Result<Child> {
        use std::os::fd::AsRawFd as _;
        self.set_env(&mut spec);
        let mut cmd = spec.command();
        if self.abi < 5 {
            let fd = self.ruleset.as_raw_fd();
            // SAFETY: the closure runs between fork and exec; it makes only async-signal-safe
            // system calls and allocates nothing. The ruleset fd stays open in the parent
            // until the spawn returns, so the child's copy is valid; it is close-on-exec.
            let filter = self.net_filter();
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setsid() < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    restrict(fd)?;
                    match filter {
                        Some(code) => seccomp::install(code),
                        None => Ok(()),
                    }
                });
            }
            return cmd.spawn().map(Child::from_tokio);
        }
        cmd.process_group(0);
        // The thread holds a copy of the ruleset fd of its own, whatever becomes of `self`.
        let ruleset = self.ruleset.try_clone()?;
        let places = self.places.clone();
        let filter = self.net_filter();
        let runtime = tokio::runtime::Handle::current();
        let (sent, received) = tokio::sync::oneshot::channel();
        // The thread is bound by the rules and the filter once it has raised them, and ends
        // right after the spawn: no other work of plait's ever runs on it.
        std::thread::Builder::new()
            .name("plait-sandbox".to_string())
            // It only builds the command's arguments and calls `posix_spawn`.
            .stack_size(256 * 1024)
            .spawn(move || {
                // Started first, the supervisor is bound by neither the walls nor the filter.
                let observer = notify::Observer::start(places);
                let spawned = restrict(ruleset.as_raw_fd()).and_then(|()| {
                    if let Some(code) = filter {
                        // SAFETY: a plain system call on a filter that outlives it.
                        unsafe { seccomp::install(code)? };
                    }
                    if let Some(observer) = observer {
                        observer.install();
                    }
                    let _entered = runtime.enter();
                    cmd.spawn()
                });
                let _ = sent.send(spawned);
            })?;
        received
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the sandbox's spawning thread died")))
            .map(Child::from_tokio)
    }
}

impl Armed {
    /// Where reads are walled, lets the program `cmd` names by its path (an agent's `bin`, a
    /// script) be read and run, and the package it belongs to, when no rule does yet.
    pub(super) fn read_program(&self, program: &std::ffi::OsStr, cwd: &Path) {
        let Some(reads) = &self.places.reads else {
            return;
        };
        let program = Path::new(program);
        if !program.as_os_str().as_encoded_bytes().contains(&b'/') {
            return;
        }
        let Ok(real) = cwd.join(program).canonicalize() else {
            return;
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let Some(package) = real
            .parent()
            .map(|dir| reads::package(dir, home.as_deref()))
        else {
            return;
        };
        let mut programs = self.programs.locked();
        let covered = |p: &Path| {
            reads
                .iter()
                .chain(programs.iter())
                .chain(&self.places.roots)
                .any(|r| p.starts_with(r))
        };
        if covered(&real) {
            return;
        }
        use std::os::fd::AsRawFd as _;
        use std::os::unix::ffi::OsStrExt as _;
        let Ok(path) = std::ffi::CString::new(package.as_os_str().as_bytes()) else {
            return;
        };
        // SAFETY: plain system calls on a NUL-terminated path and a ruleset this owns.
        let added =
            unsafe { ffi::add_rule(self.ruleset.as_raw_fd(), &path, read_access(self.abi)) };
        if added.is_ok() {
            programs.push(package);
        }
    }

    /// The private temporary directory as `TMPDIR`, and the config copies without secrets
    /// where the command does not name its own.
    pub(super) fn set_env(&self, spec: &mut Spec) {
        for var in ["TMPDIR", "TMP", "TEMP"] {
            spec.env(var, self.tmp.path());
        }
        let named: Vec<std::ffi::OsString> = spec.env.iter().map(|(k, _)| k.clone()).collect();
        for (var, path) in &self.configs {
            if !named.iter().any(|k| k == var) {
                spec.env(*var, path);
            }
        }
        if self.wall != NetWall::Open {
            for (var, value) in net::NO_RETRIES {
                if !named.iter().any(|k| k == var) && std::env::var_os(var).is_none() {
                    spec.env(*var, value);
                }
            }
        }
    }

    /// The ports Landlock's TCP rules let through, where they wall the network.
    pub(super) fn tcp(&self) -> Option<&[u16]> {
        (self.wall == NetWall::Landlock).then_some(&self.ports[..])
    }

    /// The seccomp filter that walls the network where Landlock alone must (no namespace).
    pub(super) fn net_filter(&self) -> Option<&'static [libc::sock_filter]> {
        match self.wall {
            NetWall::Landlock => Some(seccomp::filter(true)),
            NetWall::NoSockets => Some(seccomp::filter(false)),
            NetWall::Open | NetWall::Namespace => None,
        }
    }
}
