//! The kernel's wall around every process plait starts for a task — agents, checks, command
//! reviewers and supervisors. Under Landlock such a process may write only its own places
//! (its worktree or check checkout, its task directory, a private temporary directory plait
//! makes for it and passes as `TMPDIR`, and a few harmless devices) plus the paths the plan
//! lists as `writable`; reads, execution and the network stay as they were. plait decides
//! the rules and builds them; a short-lived thread of plait's raises them on itself
//! (`prctl(PR_SET_NO_NEW_PRIVS)`, `landlock_restrict_self`) and starts the child with
//! `posix_spawn`, so it costs no `fork` of plait (before ABI 5 the child raises them between
//! `fork` and `exec`, with async-signal-safe calls only). The rules hold for the process and
//! everything it starts, and no process can lift them.
//!
//! Without Landlock ABI 3 (Linux 6.2; before it `truncate(2)` was not covered), mode `auto`
//! runs unconfined and says so once, `required` refuses the plan, and `off` is the user's own
//! choice. A write the kernel refuses reaches the program as `EACCES`, which it may or may not
//! tell: plait records, per task, the paths the sandbox kept it from writing, from two
//! witnesses. From ABI 5 on a seccomp filter beside the walls stops every write a process
//! attempts until plait has looked at its path ([`notify`]: Landlock still decides); and the
//! lines of the process's log that say a write was refused are read after it ends (the only
//! witness before ABI 5, or where seccomp's listener is not available).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

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

mod net;
mod reads;
mod view;
pub use net::{NetWall, Network};
pub use reads::{git_dir as readable_git_dir, own_program as readable_program};
pub use view::net_support;
mod caches;
pub use view::{support as view_support, whiteout, CacheLayer, Layer, Nested, OverlayView};

/// The oldest Landlock ABI plait confines with: 3 covers truncation (Linux 6.2).
pub const MIN_ABI: i32 = 3;

/// Devices every process may write (and `ioctl`), as `/dev/null` is written everywhere.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Why a sandbox's walls could not be prepared; the process is then not started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot make a private temporary directory in {dir}: {source}")]
    TempDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[cfg(target_os = "linux")]
    #[error("cannot build the Landlock rules: {0}")]
    Rules(#[from] landlock::RulesetError),
    #[error("the kernel made no Landlock ruleset")]
    NoRuleset,
}

/// How plait confines a task's processes: `[sandbox] mode` in the plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Confined where the kernel can; otherwise unconfined, with one warning.
    #[default]
    Auto,
    /// Confined, or the plan is refused.
    Required,
    /// Unconfined: the user's explicit choice.
    Off,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Auto => "auto",
            SandboxMode::Required => "required",
            SandboxMode::Off => "off",
        }
    }
}

/// What this system offers to confine processes with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock, at this ABI version (at least [`MIN_ABI`]).
    Landlock(i32),
    /// Nothing plait can use; why, for a person.
    Missing(String),
}

/// What this system supports, asked of the kernel once per process.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(probe)
}

#[cfg(target_os = "linux")]
fn probe() -> Support {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute, size 0 and only the VERSION flag, the call creates
    // nothing and returns the ABI version (or -1 with errno).
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi < 0 {
        let error = std::io::Error::last_os_error();
        return Support::Missing(match error.raw_os_error() {
            Some(libc::ENOSYS) => {
                "this kernel has no Landlock (it needs Linux 6.2 or newer, built with CONFIG_SECURITY_LANDLOCK)"
                    .to_string()
            }
            Some(libc::EOPNOTSUPP) => {
                "Landlock is built into this kernel but not enabled (add `landlock` to the `lsm=` boot parameter)"
                    .to_string()
            }
            _ => format!("asking the kernel for Landlock failed: {error}"),
        });
    }
    let abi = abi as i32;
    if abi < MIN_ABI {
        return Support::Missing(format!(
            "this kernel's Landlock is ABI {abi}; plait needs ABI {MIN_ABI} (Linux 6.2 or newer) to confine writes fully"
        ));
    }
    Support::Landlock(abi)
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Support {
    Support::Missing("plait confines processes with Landlock, which only Linux has".to_string())
}

/// How a task's whole-tree view is made: `[sandbox] view` in the plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewMode {
    /// An overlay where the system allows user and mount namespaces; else filled in.
    #[default]
    Auto,
    /// The worktree filled in with the base's other files at the first command.
    Filled,
}

/// The sandbox settings of a task (or of the run, for merged checks and supervisors),
/// resolved from the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    /// How the task's whole-tree view is made.
    pub view: ViewMode,
    /// Absolute paths the plan lets every process write, besides its own places.
    pub writable: Vec<PathBuf>,
    /// Where private temporary directories are made (the `TMPDIR` plait was started with).
    pub temp_root: PathBuf,
    /// What the processes may reach over the network.
    pub network: Network,
    /// Ports on the machine's loopback they may still connect to when the network is off.
    pub ports: Vec<u16>,
    /// UNIX sockets served outside, at or beneath these paths, they may still connect to.
    pub sockets: Vec<PathBuf>,
    /// Variables the plan passes although they point at sockets or hold credentials.
    pub keep_env: Vec<String>,
    /// Variables withheld whatever the network: the keys of the plan's providers, which
    /// plait (and its gateway) use in the processes' place.
    pub withhold: Vec<String>,
    /// The plan's key that sets `network`, for the words of a refusal: `[sandbox] network`
    /// for an agent's processes, `[checks] network` for checks and reviewers.
    pub network_key: &'static str,
    /// Paths every process may read besides its own places and what the machine's
    /// toolchains need (see [`reads`]): the plan's `[sandbox] readable`, the repository's
    /// git directory without plait's store.
    pub readable: Vec<PathBuf>,
    /// Reads are left open (`[setup] run`, the user's own step): no read allow-list.
    pub read_all: bool,
}

impl Default for SandboxSettings {
    fn default() -> SandboxSettings {
        SandboxSettings {
            mode: SandboxMode::Auto,
            view: ViewMode::Auto,
            writable: Vec::new(),
            temp_root: PathBuf::from("/tmp"),
            network: Network::Off,
            ports: Vec::new(),
            sockets: Vec::new(),
            keep_env: Vec::new(),
            withhold: Vec::new(),
            network_key: "[sandbox] network",
            readable: Vec::new(),
            read_all: false,
        }
    }
}

impl SandboxSettings {
    /// How processes under these settings run on this system.
    pub fn confinement(&self) -> Confinement {
        match (self.mode, support()) {
            (SandboxMode::Off, _) => Confinement::Off,
            (_, Support::Landlock(abi)) => Confinement::Landlock(*abi),
            (_, Support::Missing(why)) => Confinement::Unsupported(why.clone()),
        }
    }

    /// The same settings with the network `network` (checks and reviewers have their own).
    pub fn with_network(&self, network: Network) -> SandboxSettings {
        SandboxSettings {
            network,
            ..self.clone()
        }
    }

    /// The same settings with the gateway's `port` open when the network is `gateway`.
    pub fn through_gateway(&self, port: u16) -> SandboxSettings {
        let mut settings = self.clone();
        if settings.network == Network::Gateway && !settings.ports.contains(&port) {
            settings.ports.push(port);
        }
        settings
    }

    /// The same settings for checks and reviewers, whose network `[checks] network` sets.
    pub fn for_checks(&self, network: Network) -> SandboxSettings {
        SandboxSettings {
            network,
            network_key: "[checks] network",
            ..self.clone()
        }
    }

    /// How the network wall holds for processes under these settings on this system.
    pub fn net_wall(&self) -> NetWall {
        match (self.network, self.confinement()) {
            (Network::On, _) | (_, Confinement::Off | Confinement::Unsupported(_)) => NetWall::Open,
            (Network::Off | Network::Gateway, Confinement::Landlock(abi)) => {
                if view::net_support().is_ok() {
                    NetWall::Namespace
                } else if abi >= 4 {
                    NetWall::Landlock
                } else if self.network == Network::Gateway {
                    // No wall that leaves one port: the agent must reach its model.
                    NetWall::Open
                } else {
                    NetWall::NoSockets
                }
            }
        }
    }

    /// How processes under these settings are confined, writes and network, in a phrase.
    pub fn describe(&self) -> String {
        let confinement = self.confinement();
        match self.net_wall() {
            NetWall::Open if !confinement.is_confined() => confinement.describe(),
            wall => format!(
                "{}, {}",
                confinement.describe(),
                wall.describe(self.network, &self.ports)
            ),
        }
    }
}

/// How a process ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Under Landlock at this ABI.
    Landlock(i32),
    /// Unconfined: the plan said `mode = "off"`.
    Off,
    /// Unconfined: the system cannot confine (mode `auto`); why.
    Unsupported(String),
}

impl Confinement {
    pub fn is_confined(&self) -> bool {
        matches!(self, Confinement::Landlock(_))
    }

    /// One phrase for a person: `Landlock ABI 7`, `off in the plan`, ….
    pub fn describe(&self) -> String {
        match self {
            Confinement::Landlock(abi) => format!("Landlock ABI {abi}"),
            Confinement::Off => "off in the plan".to_string(),
            Confinement::Unsupported(why) => format!("unconfined: {why}"),
        }
    }
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
    /// The forwarders of the `ports` of its processes' network namespaces.
    forwards: Mutex<Vec<tokio::task::AbortHandle>>,
    /// A descriptor every process it starts inherits (the agent's end of the way into
    /// its view, `crate::forward`); close-on-exec for every other process.
    pass: Option<Arc<std::os::fd::OwnedFd>>,
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

/// At most this many refused writes are kept per sandbox.
const MAX_DENIALS: usize = 10;

/// The refused writes of a sandbox's processes, as `write to PATH refused`, oldest first,
/// each once, at most [`MAX_DENIALS`].
#[derive(Debug, Default)]
struct Denials(Mutex<Vec<String>>);

impl Denials {
    fn add(&self, found: impl IntoIterator<Item = String>) {
        let mut denials = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for denial in found {
            if denials.len() < MAX_DENIALS && !denials.contains(&denial) {
                denials.push(denial);
            }
        }
    }

    fn list(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Where an armed sandbox's processes may write, and the record of what they were refused:
/// what the observers of its processes share with the sandbox.
#[derive(Debug)]
pub(crate) struct Places {
    /// The own places, the private temporary directory and `writable`, each also with its
    /// links resolved (as the kernel names a working directory) when that differs.
    roots: Vec<PathBuf>,
    /// Where they may read besides `roots` (`None`: everywhere).
    reads: Option<Vec<PathBuf>>,
    denials: Arc<Denials>,
    /// How the network is walled, for the observer to record refused connections; `None`
    /// when it is open.
    net: Option<net::Watch>,
}

impl Places {
    fn new(roots: Vec<PathBuf>, denials: Arc<Denials>) -> Places {
        let mut all = Vec::with_capacity(roots.len() * 2);
        for root in roots {
            let real = root.canonicalize().ok().filter(|real| *real != root);
            all.push(root);
            all.extend(real);
        }
        Places {
            roots: all,
            reads: None,
            denials,
            net: None,
        }
    }

    /// Whether `path` lies where every process of the sandbox may read.
    fn may_read(&self, path: &Path) -> bool {
        match &self.reads {
            None => true,
            Some(reads) => self
                .roots
                .iter()
                .chain(reads)
                .any(|root| path.starts_with(root)),
        }
    }

    /// Whether `path` lies in one of the places every process of the sandbox may write.
    fn may_write(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| path.starts_with(root))
            || DEVICES.iter().any(|d| path == Path::new(d))
    }

    /// Keeps a write to `path`, outside the places, that the walls refused. The
    /// controlling terminal is not kept: programs open it to write at start-up (a Python
    /// build probing it, for one) and go on without it, so it would stand in every task's
    /// record and say nothing (it is still refused).
    fn record(&self, path: &Path) {
        if path == Path::new("/dev/tty") {
            return;
        }
        // A view's child maps its user and group before the walls go up (see [`view`]).
        if path.starts_with("/proc")
            && path
                .file_name()
                .is_some_and(|n| n == "uid_map" || n == "gid_map" || n == "setgroups")
        {
            return;
        }
        self.denials
            .add([format!("write to {} refused", path.display())]);
    }

    /// Keeps a connection the network wall refused, in words that name what would allow it.
    fn record_connect(&self, what: String) {
        self.denials.add([what]);
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
            forwards: Mutex::default(),
            pass: None,
        }
    }

    /// The same walls, with every process started holding `fd` open across its `exec`.
    pub fn passing(mut self, fd: Arc<std::os::fd::OwnedFd>) -> Sandbox {
        self.pass = Some(fd);
        self
    }

    /// The same walls, with every process started inside `view` (see [`view`]).
    pub fn with_view(mut self, view: Option<OverlayView>) -> Sandbox {
        self.view = view;
        self
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

    /// Starts `cmd` (its working directory `cwd`) inside the walls, and inside the view when
    /// there is one. `armed` is what [`Sandbox::arm`] gave.
    pub(crate) async fn spawn(
        &self,
        armed: Option<&Armed>,
        mut cmd: tokio::process::Command,
        cwd: &Path,
    ) -> std::io::Result<tokio::process::Child> {
        if let Some(fd) = &self.pass {
            use std::os::fd::AsRawFd as _;
            let raw = fd.as_raw_fd();
            // SAFETY: one fcntl on a descriptor the parent keeps open until the spawn returns;
            // async-signal-safe, no allocation.
            unsafe {
                cmd.pre_exec(move || {
                    libc::fcntl(raw, libc::F_SETFD, 0);
                    Ok(())
                });
            }
        }
        if let Some(armed) = armed {
            armed.read_program(&cmd, cwd);
        }
        let Some(armed) = armed else {
            return match &self.view {
                Some(view) => {
                    let entry = view::Entry {
                        view: Some(view),
                        ..view::Entry::default()
                    };
                    view::prepare(&mut cmd, entry, Some(cwd), None)?;
                    cmd.spawn()
                }
                None => {
                    cmd.process_group(0);
                    cmd.spawn()
                }
            };
        };
        if armed.namespace.is_none() && self.view.is_none() {
            return armed.spawn(cmd).await;
        }
        // A socket served since the walls were made (a database started meanwhile) is
        // covered too: the listening sockets are read again for each process.
        let namespace = armed.namespace.as_ref().map(|n| net::Namespace {
            ports: n.ports.clone(),
            hide: net::served_sockets(&armed.reachable),
        });
        let entry = view::Entry {
            view: self.view.as_ref(),
            caches: &armed.caches,
            net: namespace.as_ref(),
        };
        let (child, channel) = armed.spawn_entered(cmd, entry, cwd).await?;
        if let (Some(channel), Some(pid)) = (channel, child.id()) {
            let ports = &armed.namespace.as_ref().map_or(&[][..], |n| &n.ports[..]);
            let started = net::forward(&channel, pid, ports);
            let mut forwards = self.forwards.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut paths: Vec<PathBuf> = self.own.clone();
        paths.push(tmp.path().to_path_buf());
        for path in &self.settings.writable {
            // A cache directory the plan names may not exist yet; the process could not make
            // it under a read-only parent, so plait does.
            if !path.exists() {
                let _ = std::fs::create_dir_all(path);
            }
            paths.push(path.clone());
        }
        let (cache_root, caches) = match &self.view {
            Some(view) => {
                let mut keep: Vec<&Path> = view.paths();
                keep.extend(paths.iter().map(PathBuf::as_path));
                caches::layers(&self.settings.temp_root, &keep, !self.settings.read_all)
            }
            None => (None, Vec::new()),
        };
        // The observer takes the view and the caches for places of the processes' own;
        // their rules are opened by the child, after its mounts.
        let mut seen = paths.clone();
        if let Some(view) = &self.view {
            seen.push(view.target.clone());
            seen.extend(view.aliases.iter().cloned());
        }
        seen.extend(caches.iter().map(|c| c.dir.clone()));
        let mut places = Places::new(seen, self.denials.clone());
        // Where reads are walled: the machine's paths (opened once per process, see
        // `reads::machine_opened`) and these.
        let read_paths: Option<Vec<PathBuf>> = (!self.settings.read_all).then(|| {
            let mut read = reads::own_programs();
            read.extend(self.settings.readable.iter().cloned());
            read
        });
        places.reads = read_paths.as_ref().map(|read| {
            let mut all = reads::machine_resolved().to_vec();
            all.extend(read.iter().cloned());
            all.extend(read.iter().filter_map(|p| p.canonicalize().ok()));
            all
        });
        let configs = match &read_paths {
            Some(_) => reads::config_copies(tmp.path()),
            None => Vec::new(),
        };
        let reachable: Vec<PathBuf> = (places.roots.iter())
            .chain(&self.settings.sockets)
            .cloned()
            .collect();
        let hide = match wall {
            NetWall::Namespace => net::served_sockets(&reachable),
            _ => Vec::new(),
        };
        places.net = (wall != NetWall::Open).then(|| net::Watch {
            wall: wall.clone(),
            ports: self.settings.ports.clone(),
            hidden: hide,
            network_key: self.settings.network_key,
        });
        let places = Arc::new(places);
        paths.extend(DEVICES.iter().map(PathBuf::from));
        // Inside a view the worktree's rule is opened by the child, after its mount.
        let rule_paths: Vec<PathBuf> = match &self.view {
            Some(view) => paths
                .into_iter()
                .filter(|p| *p != view.target && !view.aliases.contains(p))
                .collect(),
            None => paths,
        };
        let tcp = (wall == NetWall::Landlock).then_some(&self.settings.ports[..]);
        let ruleset = ruleset(abi, &rule_paths, read_paths.as_deref(), tcp)?;
        // The sockets to cover are read again for each process (see `Sandbox::spawn`).
        let namespace = (wall == NetWall::Namespace).then(|| net::Namespace {
            ports: self.settings.ports.clone(),
            hide: Vec::new(),
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
            wall,
            namespace,
        })
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

/// A sandbox's walls, ready to start processes behind.
#[derive(Debug)]
pub(crate) struct Armed {
    abi: i32,
    ruleset: std::os::fd::OwnedFd,
    tmp: tempfile::TempDir,
    /// The tools' caches its processes write through layers of the sandbox's own, when
    /// they start in a view; the layers are in `_cache_root`, which goes with the sandbox.
    caches: Vec<view::CacheLayer>,
    _cache_root: Option<caches::LayerRoot>,
    places: Arc<Places>,
    /// What the ruleset was built from, for a view's ruleset of its own per process: the
    /// places written, and those read (`None`: reads are not walled).
    rule_paths: Vec<PathBuf>,
    read_paths: Option<Vec<PathBuf>>,
    /// The places whose served sockets the processes may reach (theirs, `[sandbox] sockets`).
    reachable: Vec<PathBuf>,
    /// The packages of the programs started by path since (see [`Armed::read_program`]).
    programs: Mutex<Vec<PathBuf>>,
    /// Copies of config files without their secrets, each with the variable naming it.
    configs: Vec<(&'static str, PathBuf)>,
    /// How the network is walled.
    wall: NetWall,
    /// The network namespace each process makes for itself, when that is the wall.
    namespace: Option<net::Namespace>,
}

impl Armed {
    /// Starts `cmd` where `entry` says (a view, a network namespace), behind walls of its
    /// own raised in the child after its mounts: in a view, the ruleset made afresh, for the
    /// child adds the worktree's rule to it. From ABI 5 the observer's filter goes up on a
    /// short-lived thread of plait's that then forks the child, which inherits it; the
    /// thread raises no walls itself, for the child must still make its namespaces. Also
    /// returns the channel on which the child sent the listeners of its `ports`.
    async fn spawn_entered(
        &self,
        mut cmd: tokio::process::Command,
        entry: view::Entry<'_>,
        cwd: &Path,
    ) -> std::io::Result<(tokio::process::Child, Option<std::os::fd::OwnedFd>)> {
        self.set_env(&mut cmd);
        let reads = self.read_paths.as_ref().map(|read| {
            let mut read = read.clone();
            read.extend(
                self.programs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .cloned(),
            );
            read
        });
        let ruleset = match entry.view {
            Some(_) => ruleset(self.abi, &self.rule_paths, reads.as_deref(), None)
                .map_err(std::io::Error::other)?,
            None => self.ruleset.try_clone()?,
        };
        let walls = view::Walls {
            ruleset,
            access: write_access(self.abi)
                | if self.read_paths.is_some() {
                    read_access(self.abi)
                } else {
                    0
                },
            // No controlling terminal: a command that opens `/dev/tty` to ask something
            // (a password prompt) is told there is none, rather than stopped by SIGTTIN as
            // a background process group of plait's terminal would be.
            session: true,
        };
        let channel = view::prepare(&mut cmd, entry, Some(cwd), Some(walls))?;
        if self.abi < 5 {
            return Ok((cmd.spawn()?, channel));
        }
        let places = self.places.clone();
        let runtime = tokio::runtime::Handle::current();
        let (sent, received) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("plait-sandbox".to_string())
            .stack_size(256 * 1024)
            .spawn(move || {
                let observer = notify::Observer::start(places);
                // SAFETY: a plain system call; the filter needs no new privileges.
                let quiet = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0;
                if let (Some(observer), true) = (observer, quiet) {
                    observer.install();
                }
                let _entered = runtime.enter();
                let _ = sent.send(cmd.spawn());
            })?;
        let child = received
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the sandbox's spawning thread died")))?;
        Ok((child, channel))
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
    pub async fn spawn(
        &self,
        mut cmd: tokio::process::Command,
    ) -> std::io::Result<tokio::process::Child> {
        use std::os::fd::AsRawFd as _;
        self.set_env(&mut cmd);
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
                        Some(code) => net::install(code),
                        None => Ok(()),
                    }
                });
            }
            return cmd.spawn();
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
                        unsafe { net::install(code)? };
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
    }
}

impl Armed {
    /// Where reads are walled, lets the program `cmd` names by its path (an agent's `bin`, a
    /// script) be read and run, and the package it belongs to, when no rule does yet.
    fn read_program(&self, cmd: &tokio::process::Command, cwd: &Path) {
        let Some(reads) = &self.places.reads else {
            return;
        };
        let program = Path::new(cmd.as_std().get_program());
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
        let mut programs = self.programs.lock().unwrap_or_else(|e| e.into_inner());
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
            unsafe { view::add_rule(self.ruleset.as_raw_fd(), &path, read_access(self.abi)) };
        if added.is_ok() {
            programs.push(package);
        }
    }

    /// The private temporary directory as `TMPDIR`, and the config copies without secrets
    /// where the command does not name its own.
    fn set_env(&self, cmd: &mut tokio::process::Command) {
        for var in ["TMPDIR", "TMP", "TEMP"] {
            cmd.env(var, self.tmp.path());
        }
        let named: Vec<std::ffi::OsString> = cmd
            .as_std()
            .get_envs()
            .map(|(k, _)| k.to_os_string())
            .collect();
        for (var, path) in &self.configs {
            if !named.iter().any(|k| k == var) {
                cmd.env(var, path);
            }
        }
    }

    /// The seccomp filter that walls the network where Landlock alone must (no namespace).
    fn net_filter(&self) -> Option<&'static [libc::sock_filter]> {
        match self.wall {
            NetWall::Landlock => Some(net::filter(true)),
            NetWall::NoSockets => Some(net::filter(false)),
            NetWall::Open | NetWall::Namespace => None,
        }
    }
}

#[cfg(target_os = "linux")]
fn restrict(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: plain system calls on a valid ruleset fd; no memory is passed.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn restrict(_fd: std::os::fd::RawFd) -> std::io::Result<()> {
    Err(std::io::Error::other("Landlock is Linux's"))
}

/// The kernel ruleset that lets a process write beneath `paths` only (files among them:
/// only those files), and signal no process outside its own sandbox (ABI 6 and newer).
/// With `tcp` (ABI 4 and newer), TCP connects only to those ports and binds none, and from
/// ABI 6 abstract UNIX sockets outside the sandbox are out of reach.
#[cfg(target_os = "linux")]
fn ruleset(
    abi: i32,
    paths: &[PathBuf],
    reads: Option<&[PathBuf]>,
    tcp: Option<&[u16]>,
) -> Result<std::os::fd::OwnedFd, SandboxError> {
    use landlock::{
        path_beneath_rules, Access as _, AccessFs, AccessNet, CompatLevel, Compatible, NetPort,
        Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
    };
    let version = ABI::from(abi);
    let read = AccessFs::from_read(version);
    // Where reads are walled, the own places are read and written; elsewhere only read.
    let write = match reads {
        Some(_) => AccessFs::from_write(version) | read,
        None => AccessFs::from_write(version),
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(write)?;
    let tcp = tcp.filter(|_| abi >= 4);
    if tcp.is_some() {
        ruleset = ruleset.handle_access(AccessNet::from_all(version))?;
    }
    if abi >= 6 {
        ruleset = ruleset.scope(Scope::Signal)?;
        if tcp.is_some() {
            ruleset = ruleset.scope(Scope::AbstractUnixSocket)?;
        }
    }
    let mut created = ruleset
        .create()?
        .add_rules(path_beneath_rules(paths, write))?;
    if let Some(extra) = reads {
        let file = landlock::AccessFs::from_file(version) & read;
        for (fd, is_file) in reads::machine_opened() {
            let access = if *is_file { file } else { read };
            created = created.add_rule(landlock::PathBeneath::new(fd, access))?;
        }
        created = created.add_rules(path_beneath_rules(extra, read))?;
    }
    for &port in tcp.unwrap_or_default() {
        created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
    }
    let fd: Option<std::os::fd::OwnedFd> = created.into();
    fd.ok_or(SandboxError::NoRuleset)
}

/// The write rights a directory rule grants at `abi`, as the kernel's bits.
#[cfg(target_os = "linux")]
fn write_access(abi: i32) -> u64 {
    landlock::AccessFs::from_write(landlock::ABI::from(abi)).bits()
}

#[cfg(not(target_os = "linux"))]
fn write_access(_abi: i32) -> u64 {
    0
}

/// The read rights (read, list, execute) at `abi`, as the kernel's bits.
#[cfg(target_os = "linux")]
fn read_access(abi: i32) -> u64 {
    landlock::AccessFs::from_read(landlock::ABI::from(abi)).bits()
}

#[cfg(not(target_os = "linux"))]
fn read_access(_abi: i32) -> u64 {
    0
}

#[cfg(not(target_os = "linux"))]
fn ruleset(
    _abi: i32,
    _paths: &[PathBuf],
    _reads: Option<&[PathBuf]>,
    _tcp: Option<&[u16]>,
) -> Result<std::os::fd::OwnedFd, SandboxError> {
    Err(SandboxError::NoRuleset)
}

/// Phrases with which programs report a refused write (`EACCES`, `EPERM`, `EXDEV`).
const REFUSALS: &[&str] = &[
    "permission denied",
    "operation not permitted",
    "eacces",
    "eperm",
    "invalid cross-device link",
];

/// The refused reads and writes `text` tells of: for each line that reports one, the paths
/// it names (relative ones from `cwd`) that `readable` says the process may not read, as
/// `read of PATH refused (…)`, or else that `writable` says it may not write, as
/// `write to PATH refused`.
fn refused(
    text: &str,
    cwd: &Path,
    readable: impl Fn(&Path) -> bool,
    writable: impl Fn(&Path) -> bool,
) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let lower = line.to_ascii_lowercase();
        if !REFUSALS.iter().any(|r| lower.contains(r)) {
            continue;
        }
        for path in paths_in(line, cwd) {
            let denial = if !readable(&path) {
                if reads::habit(&path) {
                    // Read by habit (a shell's rc file, git's or npm's config): no news.
                    continue;
                }
                format!(
                    "read of {} refused (allow it with [sandbox] readable)",
                    path.display()
                )
            } else if !writable(&path) {
                format!("write to {} refused", path.display())
            } else {
                continue;
            };
            if !found.contains(&denial) {
                found.push(denial);
            }
        }
    }
    found
}

/// [`refused`] where every path is readable: the refused writes alone.
#[cfg(test)]
fn refused_writes(text: &str, cwd: &Path, allowed: impl Fn(&Path) -> bool) -> Vec<String> {
    refused(text, cwd, |_| true, allowed)
}

/// The paths written in a line of output, quoted or not: words that start with `/`, or hold
/// one and are not URLs (those are taken from `cwd`), without `.` and `..`.
fn paths_in(line: &str, cwd: &Path) -> Vec<PathBuf> {
    let stops = |c: char| c.is_whitespace() || "'\"`,;()[]{}<>=‘’“”«»".contains(c);
    line.split(stops)
        .map(|word| word.trim_end_matches([':', '.']))
        .filter(|word| word.len() > 1 && word.contains('/') && !word.contains("://"))
        .map(|word| lexical(&cwd.join(word)))
        .collect()
}

/// `path` without `.` and `..`, taken as written (a `..` after a link is not followed).
fn lexical(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                normal.pop();
            }
            std::path::Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal
}

impl From<&Confinement> for plait_core::state::SandboxRecord {
    /// The record of how a task's processes were confined, nothing refused yet.
    fn from(confinement: &Confinement) -> Self {
        plait_core::state::SandboxRecord {
            confined: confinement.is_confined(),
            how: confinement.describe(),
            refused: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_writes_name_the_paths_outside() {
        let log = "touch: cannot touch '/home/u/x': Permission denied\n\
                   mkdir: cannot create directory ‘/home/u/.cache’: Permission denied\n\
                   sh: 1: cannot create /srv/wt/ok.txt: Permission denied\n\
                   PermissionError: [Errno 13] Permission denied: '/root/.cache/pip/y'\n\
                   Error: EACCES: permission denied, open '/var/tmp/z'\n\
                   ssh: Permission denied (publickey).\n\
                   plain line with /etc/passwd\n";
        let cwd = Path::new("/srv/wt");
        let found = refused_writes(log, cwd, |p| p.starts_with("/srv/wt"));
        assert_eq!(
            found,
            [
                "write to /home/u/x refused",
                "write to /home/u/.cache refused",
                "write to /root/.cache/pip/y refused",
                "write to /var/tmp/z refused",
            ]
        );
        assert_eq!(
            paths_in(
                "mv: cannot move 'a/b' to '../n/y': Invalid cross-device link (see https://x.y/z)",
                cwd
            ),
            [PathBuf::from("/srv/wt/a/b"), PathBuf::from("/srv/n/y")]
        );
    }

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
            let mut cmd = tokio::process::Command::new("sh");
            cmd.arg("-c")
                .arg(
                    "echo in > own/ok; echo out > outside; echo tmp > \"$TMPDIR/t\" && echo tmp-ok; \
                     read -r stat < /proc/self/stat; set -- $stat; echo \"$1 $5 $6\"",
                )
                .current_dir(root.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null());
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
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .current_dir(root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
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
            let mut cmd = tokio::process::Command::new("python3");
            cmd.arg("-c")
                .arg(&script)
                .current_dir(&root)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let out = runtime
                .block_on(async {
                    let child = sandbox.spawn(Some(&armed), cmd, &root).await.unwrap();
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
}
