//! The kernel's wall around every process plait starts for a task — agents, checks, command
//! reviewers and supervisors. Under Landlock such a process may write only its own places
//! (its worktree or check checkout, its task directory, a private temporary directory plait
//! makes for it and passes as `TMPDIR`, and a few harmless devices) plus the paths the plan
//! lists as `writable`; it reads only what the machine's toolchains need and the plan
//! allows (`reads`: an allow-list, with the home's secrets left out), and reaches the
//! network only as the plan says (`net`). plait decides the rules and builds them; a
//! short-lived thread of plait's raises them on itself (`prctl(PR_SET_NO_NEW_PRIVS)`,
//! `landlock_restrict_self`) and starts the child with `posix_spawn`, so it costs no `fork`
//! of plait (before ABI 5 the child raises them between `fork` and `exec`, with
//! async-signal-safe calls only). The rules hold for the process and everything it starts,
//! and no process can lift them.
//!
//! Without Landlock ABI 3 (Linux 6.2; before it `truncate(2)` was not covered), mode `auto`
//! runs unconfined and says so once, `required` refuses the plan, and `off` is the user's own
//! choice. A write the kernel refuses reaches the program as `EACCES`, which it may or may not
//! tell: plait records, per task, the paths the sandbox kept it from writing, from two
//! witnesses. From ABI 5 on a seccomp filter beside the walls stops every write a process
//! attempts until plait has looked at its path (`notify`: Landlock still decides); and the
//! lines of the process's log that say a write was refused are read after it ends (the only
//! witness before ABI 5, or where seccomp's listener is not available).
//!
//! Its files: `settings` (what the plan asks, what the kernel offers, how a process ends up
//! confined), `places` (where processes may write and read, and the refusals their logs
//! tell of), `rules` (the Landlock ruleset), `armed` (the walls made ready, and the spawns
//! behind them), `net` (the network's wall, with `net::ports` forwarded and the
//! `net::seccomp` filter), `view` (the whole-tree view and the entering of namespaces),
//! `caches` (the tools' caches layered over), `reads` (what every process may read), `tools`
//! (what the plan's own programs need to read) and `notify` (the seccomp observer).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod notify;

/// Where seccomp's listener is not available, no observer: the logs are the only witness.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod notify {
    pub(super) struct Observer;

    impl Observer {
        pub(super) fn start(_places: std::sync::Arc<super::Places>) -> Option<Observer> {
            None
        }

        pub(super) fn install(self) {}
    }
}

mod armed;
mod caches;
mod checkout;
mod ffi;
mod gitconfig;
mod homes;
mod limits;
mod net;
mod pids;
mod places;
mod reads;
mod rules;
mod settings;
mod tools;
mod view;

use crate::child::{Child, Spec};
use armed::Armed;
pub use net::lookup as refused_lookup;
pub use pids::lifetime;
use places::{refused, Denials, Places, DEVICES};
use plait_core::sync::Locked as _;
pub use reads::own_program as readable_program;
use rules::ruleset;
pub use rules::SandboxError;
use settings::NetWall;
pub use settings::{
    bytes, parse_bytes, support, Confinement, Limits, Network, SandboxMode, SandboxSettings,
    Support, ViewMode,
};
pub use tools::{needed_by as tools_needed_by, ToolEnv};
pub use view::net_support;
pub use view::{support as view_support, whiteout, Layer, Nested, OverlayView};

/// How a process started behind `armed` gets a PID namespace of its own, where it can:
/// before ABI 5 a network filter goes up only in a forked child, which knows no PID
/// namespace.
fn pid_ns(armed: &Armed) -> Option<pids::PidNs> {
    let how = *pids::support().as_ref().ok()?;
    (armed.abi >= 5 || armed.net_filter().is_none()).then_some(how)
}

/// The walls of the processes started for one purpose (a task's agent, its checks in one
/// slot, a reviewer): what they may write, and the writes the walls refused them.
#[derive(Debug)]
pub struct Sandbox {
    settings: SandboxSettings,
    /// The processes' own places: worktree or checkout, task directory.
    own: Vec<PathBuf>,
    /// The private temporary directory and the kernel's ruleset, made at the first spawn and
    /// shared by every process of this sandbox; the directory goes with the sandbox.
    armed: OnceLock<Result<Armed, SandboxError>>,
    denials: Arc<Denials>,
    /// The whole-tree view every process starts in, when the task has one.
    view: Option<OverlayView>,
    /// The user's checkout as its processes see it in the view, made at the first spawn.
    checkout: OnceLock<Option<checkout::Checkout>>,
    /// The forwarders of the `ports` of its processes' network namespaces.
    forwards: Mutex<Vec<tokio::task::AbortHandle>>,
    /// A descriptor every process it starts inherits (the agent's end of the way into
    /// its view, `crate::forward`); close-on-exec for every other process.
    pass: Option<Arc<std::os::fd::OwnedFd>>,
    /// Whether its processes, started in no view, still get the agent CLIs' homes each
    /// over a layer of its own (an agent CLI in a role: a reviewer, a judge).
    cli_homes: bool,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for task in self
            .forwards
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}

impl Sandbox {
    /// The settings the walls were built from.
    pub fn settings(&self) -> &SandboxSettings {
        &self.settings
    }

    /// Walls that let processes write `own` and what `settings` allow.
    pub fn new(settings: &SandboxSettings, own: Vec<PathBuf>) -> Sandbox {
        Sandbox {
            settings: settings.clone(),
            own,
            armed: OnceLock::new(),
            denials: Arc::default(),
            view: None,
            checkout: OnceLock::new(),
            forwards: Mutex::default(),
            pass: None,
            cli_homes: false,
        }
    }

    /// The same walls, with the agent CLIs' homes (`~/.codex`, `~/.gemini`, …) each over a
    /// layer of the sandbox's own where its processes start in no view, as they are in a
    /// view: for an agent CLI in a role (a reviewer, a judge, a supervisor).
    pub fn with_cli_homes(mut self) -> Sandbox {
        self.cli_homes = true;
        self
    }

    /// The same walls, with every process started holding `fd` open across its `exec`.
    pub fn passing(mut self, fd: Arc<std::os::fd::OwnedFd>) -> Sandbox {
        self.pass = Some(fd);
        self
    }

    /// The same walls, with every process started inside `view` (see `view`).
    pub fn with_view(mut self, view: Option<OverlayView>) -> Sandbox {
        self.view = view;
        self
    }

    /// Whether each process it starts is the first of a PID namespace of its own (so
    /// nothing it starts outlives it).
    pub fn own_pid_ns(&self) -> bool {
        matches!(self.confinement(), Confinement::Landlock(abi)
            if pids::support().is_ok() && (abi >= 5 || self.settings.net_wall() == NetWall::Namespace || self.settings.net_wall() == NetWall::Open))
    }

    /// The descriptor its processes inherit, if any.
    pub fn passed_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd as _;
        self.pass.as_ref().map(|fd| fd.as_raw_fd())
    }

    /// The view its processes start in, if any.
    pub fn view(&self) -> Option<&OverlayView> {
        self.view.as_ref()
    }

    /// How the user's checkout (`[SandboxSettings::checkout]`) is shown in the view: at
    /// its path, as the view; `None` without a view or a checkout, or where it cannot be.
    fn checkout(&self) -> Option<&checkout::Checkout> {
        self.checkout
            .get_or_init(|| {
                let (view, path) = (self.view.as_ref()?, self.settings.checkout.as_ref()?);
                checkout::Checkout::for_view(path, view.mounted_at(), &self.settings.temp_root)
            })
            .as_ref()
    }

    /// Starts `spec` inside the walls, and inside the view when there is one. `armed` is
    /// what [`Sandbox::arm`] gave.
    pub(crate) async fn spawn(&self, armed: Option<&Armed>, spec: Spec) -> std::io::Result<Child> {
        use std::os::fd::AsRawFd as _;
        let pass = self.pass.as_ref().map(|fd| fd.as_raw_fd());
        if let Some(armed) = armed {
            armed.read_program(spec.program(), &spec.cwd);
        }
        let Some(armed) = armed else {
            return match &self.view {
                Some(view) => {
                    let entry = view::Entry {
                        view: Some(view),
                        checkout: self.checkout(),
                        ..view::Entry::default()
                    };
                    let cwd = spec.cwd.clone();
                    let (mut entering, _) = view::entering(entry, Some(&cwd), None)?;
                    let works = entering.take_works();
                    // SAFETY: `run` makes only async-signal-safe calls on what it holds.
                    let started = crate::child::spawn_entering(
                        spec,
                        pass,
                        true,
                        false,
                        &mut |stage| unsafe { entering.run(stage) },
                    );
                    let mut child = started.and_then(Child::from_cloned);
                    match &mut child {
                        Ok(child) => child.remove_when_ended(works),
                        Err(_) => view::remove_works(&works),
                    }
                    child
                }
                None => {
                    let mut cmd = spec.command();
                    cmd.process_group(0);
                    if let Some(raw) = pass {
                        // SAFETY: one fcntl on a descriptor the parent keeps open until the
                        // spawn returns; async-signal-safe, no allocation.
                        unsafe {
                            cmd.pre_exec(move || {
                                libc::fcntl(raw, libc::F_SETFD, 0);
                                Ok(())
                            });
                        }
                    }
                    cmd.spawn().map(Child::from_tokio)
                }
            };
        };
        let pid = pid_ns(armed);
        if armed.namespace.is_none()
            && self.view.is_none()
            && armed.binds.is_empty()
            && armed.caches.is_empty()
            && pid.is_none()
        {
            if pass.is_some() {
                // Kept open across the exec: only a clone can do that behind the walls.
                let entry = view::Entry::default();
                return armed
                    .spawn_entered(spec, entry, pass)
                    .await
                    .map(|(child, _)| child);
            }
            return armed.spawn(spec).await;
        }
        // A socket served since the walls were made (a database started meanwhile) is
        // covered too: the listening sockets are read again for each process (and, in the
        // sandbox's held namespaces, those not covered there yet are covered in its own).
        let held = armed.held.as_ref();
        let namespace = armed.namespace.as_ref().map(|n| {
            let mut hide = net::served_sockets(&armed.reachable);
            if let Some(held) = held {
                hide.retain(|p| !held.hidden.contains(p));
            }
            net::ports::Namespace {
                ports: n.ports.clone(),
                hide,
            }
        });
        let entry = view::Entry {
            view: self.view.as_ref(),
            caches: &armed.caches,
            binds: &armed.binds,
            net: namespace.as_ref(),
            joined: held.map(net::holder::Held::fds),
            pid,
            limits: self.settings.limits,
            checkout: self.checkout(),
        };
        let (child, channel) = armed.spawn_entered(spec, entry, pass).await?;
        // The listeners of the `ports`: the child's own, served while it lives, or the held
        // namespaces', served from the first spawn for as long as the sandbox lives.
        let listeners = match (channel, child.id()) {
            (Some(channel), Some(pid)) => Some((channel, Some(pid))),
            _ => held.and_then(|h| h.take_channel()).map(|c| (c, None)),
        };
        if let Some((channel, pid)) = listeners {
            let ports = &armed.namespace.as_ref().map_or(&[][..], |n| &n.ports[..]);
            let started = net::ports::forward(&channel, pid, ports);
            let mut forwards = self.forwards.locked();
            forwards.retain(|task| !task.is_finished());
            forwards.extend(started);
        }
        Ok(child)
    }

    /// The variables of plait's environment its processes do not get: the plan's provider
    /// keys (`withhold`), and where the network is walled, those that point at sockets
    /// served outside or hold credentials, unless the plan keeps them.
    pub(crate) fn withheld_env(&self) -> Vec<std::ffi::OsString> {
        let walled = self.settings.net_wall() != NetWall::Open;
        let kept = |n: &str| self.settings.keep_env.iter().any(|k| k == n);
        std::env::vars_os()
            .map(|(name, _)| name)
            .filter(|name| {
                name.to_str().is_some_and(|n| {
                    self.settings.withhold.iter().any(|w| w == n)
                        || (walled && net::withheld(n) && !kept(n))
                })
            })
            .collect()
    }

    /// No walls at all (plait's own git commands, and tests).
    pub fn none() -> Sandbox {
        Sandbox::new(
            &SandboxSettings {
                mode: SandboxMode::Off,
                ..SandboxSettings::default()
            },
            Vec::new(),
        )
    }

    /// How its processes read the repository's `.git/config`, in words, once its walls are
    /// made (at its first process); `None` before, or when they read no git directory.
    pub fn git_config(&self) -> Option<String> {
        let armed = self.armed.get()?.as_ref().ok()?;
        armed
            .git_config
            .as_ref()
            .map(gitconfig::RepoConfig::describe)
    }

    /// How its processes run on this system.
    pub fn confinement(&self) -> Confinement {
        self.settings.confinement()
    }

    /// The writes the kernel refused, as far as the observer and the processes' logs tell,
    /// oldest first.
    pub fn denials(&self) -> Vec<String> {
        self.denials.list()
    }

    /// The walls its processes start behind: the private temporary directory and the
    /// kernel's ruleset, prepared once. `None` when they run unconfined.
    pub(crate) fn arm(&self) -> Result<Option<&Armed>, &SandboxError> {
        let Confinement::Landlock(abi) = self.confinement() else {
            return Ok(None);
        };
        match self.armed.get_or_init(|| self.prepare(abi)) {
            Ok(armed) => Ok(Some(armed)),
            Err(why) => Err(why),
        }
    }

    fn prepare(&self, abi: i32) -> Result<Armed, SandboxError> {
        self.prepare_walled(abi, self.settings.net_wall())
    }

    fn prepare_walled(&self, abi: i32, wall: NetWall) -> Result<Armed, SandboxError> {
        let tmp = tempfile::Builder::new()
            .prefix("plait-")
            .tempdir_in(&self.settings.temp_root)
            .map_err(|source| SandboxError::TempDir {
                dir: self.settings.temp_root.clone(),
                source,
            })?;
        let mut paths = self.written(tmp.path());
        let (cache_root, caches) = match &self.view {
            Some(view) => {
                let mut keep: Vec<&Path> = view.paths();
                keep.extend(paths.iter().map(PathBuf::as_path));
                caches::layers(&self.settings.temp_root, &keep, !self.settings.read_all)
            }
            None if self.cli_homes && view::support().is_ok() => {
                let keep: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
                caches::cli_layers(&self.settings.temp_root, &keep, !self.settings.read_all)
            }
            None => (None, Vec::new()),
        };
        let mut read_paths = self.read_paths();
        let git_config = self.read_git_dir(tmp.path(), read_paths.as_mut());
        let binds = match &git_config {
            Some(gitconfig::RepoConfig::Copy { copy, target }) => {
                vec![(copy.clone(), target.clone())]
            }
            _ => Vec::new(),
        };
        let mut places = self.places(&paths, &caches, read_paths.as_deref());
        let configs = match &read_paths {
            Some(_) => reads::config_copies(tmp.path()),
            None => Vec::new(),
        };
        let reachable: Vec<PathBuf> = (places.roots.iter())
            .chain(&self.settings.sockets)
            .cloned()
            .collect();
        places.net = self.watch(&wall, &reachable);
        let places = Arc::new(places);
        paths.extend(DEVICES.iter().map(PathBuf::from));
        let rule_paths = self.rule_paths(paths);
        let tcp = (wall == NetWall::Landlock).then_some(&self.settings.ports[..]);
        let ruleset = ruleset(abi, &rule_paths, read_paths.as_deref(), tcp)?;
        // The sockets to cover are read again for each process (see `Sandbox::spawn`).
        let namespace = (wall == NetWall::Namespace).then(|| net::ports::Namespace {
            ports: self.settings.ports.clone(),
            hide: Vec::new(),
        });
        // Made once for every process of the sandbox; where that fails, each process makes
        // its own.
        let held = namespace.as_ref().and_then(|n| {
            let hidden = places
                .net
                .as_ref()
                .map_or_else(Vec::new, |w| w.hidden.clone());
            let wanted = net::ports::Namespace {
                ports: n.ports.clone(),
                hide: hidden,
            };
            net::holder::Held::make(&wanted).ok()
        });
        Ok(Armed {
            abi,
            ruleset,
            tmp,
            caches,
            _cache_root: cache_root,
            places,
            rule_paths,
            read_paths,
            programs: Mutex::default(),
            reachable,
            configs,
            binds,
            git_config,
            wall,
            namespace,
            held,
            ports: self.settings.ports.clone(),
        })
    }

    /// Where every process of the sandbox may write: its own places, the private
    /// temporary directory `tmp`, and the plan's `writable` (made when missing).
    fn written(&self, tmp: &Path) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self.own.clone();
        paths.push(tmp.to_path_buf());
        for path in &self.settings.writable {
            // A cache directory the plan names may not exist yet; the process could not make
            // it under a read-only parent, so plait does.
            if !path.exists() {
                let _ = std::fs::create_dir_all(path);
            }
            paths.push(path.clone());
        }
        paths
    }

    /// Where reads are walled, what may be read besides the machine's paths (opened once
    /// per process, see `reads::machine_opened`): plait's own programs, the plan's
    /// `readable` and what the plan's programs need. `None`: reads are left open.
    fn read_paths(&self) -> Option<Vec<PathBuf>> {
        (!self.settings.read_all).then(|| {
            let mut read = reads::own_programs();
            read.extend(self.settings.readable.iter().cloned());
            read.extend(self.settings.tools.iter().cloned());
            read
        })
    }

    /// How the processes read the repository's git directory, when there is one and reads
    /// are walled: git's own entries of it added to `read`, and its config as it holds no
    /// credential, else as a copy without them (in `tmp`) shown in its place, else not at
    /// all (see `gitconfig::repo_config`).
    fn read_git_dir(
        &self,
        tmp: &Path,
        read: Option<&mut Vec<PathBuf>>,
    ) -> Option<gitconfig::RepoConfig> {
        let (read, git_dir) = (read?, self.settings.git_dir.as_ref()?);
        read.extend(reads::git_dir(git_dir));
        let config = gitconfig::repo_config(git_dir, tmp, view::support().is_ok());
        match &config {
            gitconfig::RepoConfig::Plain(path) => read.push(path.clone()),
            gitconfig::RepoConfig::Copy { copy, .. } => read.push(copy.clone()),
            // Said in the task's record, as a refused read is: git there cannot start.
            gitconfig::RepoConfig::Hidden(why) => self.denials.add([format!(
                "read of the repository's config refused: {why}; take the credentials out \
                 of it (a credential helper rather than a token in a URL; actions/checkout \
                 with persist-credentials: false), or allow user namespaces"
            )]),
        }
        Some(config)
    }

    /// The places the observer judges the processes' calls against: the `written` paths,
    /// the view and the `caches` (whose rules the child opens, after its mounts), and what
    /// may be read (`read_paths` with the machine's paths).
    fn places(
        &self,
        written: &[PathBuf],
        caches: &[view::CacheLayer],
        read_paths: Option<&[PathBuf]>,
    ) -> Places {
        let mut seen = written.to_vec();
        if let Some(view) = &self.view {
            seen.push(view.target.clone());
            seen.extend(view.aliases.iter().cloned());
            if let Some(checkout) = self.checkout() {
                // The tmpfs each child makes ready there before its walls go up.
                seen.push(checkout.mask().to_path_buf());
                seen.extend(checkout.writable(view.root_names()));
            }
        }
        seen.extend(caches.iter().map(|c| c.dir.clone()));
        let mut places = Places::new(seen, self.denials.clone());
        places.reads = read_paths.map(|read| {
            let mut all = reads::machine_resolved().to_vec();
            all.extend(read.iter().cloned());
            all.extend(read.iter().filter_map(|p| p.canonicalize().ok()));
            all
        });
        places
    }

    /// What the observer is to know of the network's `wall`, when there is one: in a
    /// namespace, the sockets served outside (those beneath `reachable` aside) are hidden.
    fn watch(&self, wall: &NetWall, reachable: &[PathBuf]) -> Option<net::Watch> {
        let hide = match wall {
            NetWall::Namespace => net::served_sockets(reachable),
            _ => Vec::new(),
        };
        (*wall != NetWall::Open).then(|| net::Watch {
            wall: wall.clone(),
            ports: self.settings.ports.clone(),
            hidden: hide,
            network_key: self.settings.network_key,
            gateway: self.settings.network == Network::Gateway,
        })
    }

    /// The paths the ruleset lets the processes write: inside a view the worktree's rule
    /// is opened by the child, after its mount.
    fn rule_paths(&self, paths: Vec<PathBuf>) -> Vec<PathBuf> {
        match &self.view {
            Some(view) => paths
                .into_iter()
                .filter(|p| *p != view.target && !view.aliases.contains(p))
                .collect(),
            None => paths,
        }
    }

    /// Reads the output a process wrote under `armed` in `cwd` (`text`) for writes the
    /// kernel refused, and keeps the paths outside its places.
    pub(crate) fn note_denials(&self, armed: &Armed, cwd: &Path, text: &str) {
        let found = refused(
            text,
            cwd,
            |path| armed.places.may_read(path),
            |path| armed.places.may_write(path),
        );
        self.denials.add(found);
    }
}

#[cfg(test)]
mod tests;
