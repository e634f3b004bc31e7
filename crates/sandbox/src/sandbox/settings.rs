//! What a plan asks of the walls (`[sandbox]`: mode, view, network, what is writable and
//! readable), what this system can give (Landlock's ABI, asked once), and how a process
//! under those settings ends up confined.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::view;

/// The oldest Landlock ABI plait confines with: 3 covers truncation (Linux 6.2).
pub(crate) const MIN_ABI: i32 = 3;

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
    /// Its name in the plan.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Auto => "auto",
            SandboxMode::Required => "required",
            SandboxMode::Off => "off",
        }
    }
}

/// What a task's processes may reach over the network: `[sandbox] network` for its agent,
/// `[checks] network` for checks and command reviewers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Loopback of its own, plus the plan's `ports` on the machine's loopback.
    #[default]
    Off,
    /// The network as plait has it.
    On,
    /// Off, but for the port of plait's gateway, through which an agent CLI reaches its
    /// model (the port is known when the run starts: [`SandboxSettings::through_gateway`]).
    ///
    /// [`SandboxSettings::through_gateway`]: SandboxSettings::through_gateway
    Gateway,
}

impl Network {
    /// Its name in the plan.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Off => "off",
            Network::On => "on",
            Network::Gateway => "gateway",
        }
    }

    /// Whether the wall is up: anything but `on`.
    pub fn walled(self) -> bool {
        self != Network::On
    }
}

/// How the wall holds for one sandbox's processes on this system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NetWall {
    /// No wall: `network = "on"`, or the processes run unconfined.
    Open,
    /// A network namespace of its own (loopback only; `ports` forwarded).
    Namespace,
    /// Landlock's TCP rules (connect to `ports` only) and seccomp for the rest.
    Landlock,
    /// Before Landlock ABI 4, without namespaces: seccomp refuses every IP socket.
    NoSockets,
}

impl NetWall {
    /// What holds, in a phrase for `plait status`.
    /// What holds, in a phrase for `plait status`, for processes whose network is
    /// `network` and which may reach `ports`.
    pub fn describe(&self, network: Network, ports: &[u16]) -> String {
        let ports = if ports.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = ports.iter().map(u16::to_string).collect();
            format!(", loopback port(s) {}", list.join(", "))
        };
        let off = match network {
            Network::Gateway => "network: plait's gateway only",
            _ => "network off",
        };
        match self {
            NetWall::Open if network == Network::Gateway => "network open (the kernel cannot \
                wall it and leave the gateway's port: no namespaces, Landlock before ABI 4)"
                .to_string(),
            NetWall::Open => "network open".to_string(),
            NetWall::Namespace => format!("{off} (a namespace of its own{ports})"),
            NetWall::Landlock => format!("{off} (TCP by Landlock{ports}, UDP by seccomp)"),
            NetWall::NoSockets => format!("{off} (no IP sockets, by seccomp)"),
        }
    }
}

/// What this system offers to confine processes with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock, at this ABI version (at least `MIN_ABI`).
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
    /// Whether processes are confined.
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
    /// toolchains need (see `reads`): the plan's `[sandbox] readable`.
    pub readable: Vec<PathBuf>,
    /// The repository's git directory, which every process reads as its checkouts' git
    /// does: git's own entries (never plait's store in it), and its `config` as a copy
    /// without credentials where a mount namespace can show it in the file's place.
    pub git_dir: Option<PathBuf>,
    /// Reads are left open (`[setup] run`, the user's own step): no read allow-list.
    pub read_all: bool,
    /// How much its processes may take (`[sandbox] limits`).
    pub limits: Limits,
}

/// How much a sandbox's processes may take: `[sandbox] limits = { pids = 512, memory =
/// "4G" }`. Each `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Processes and threads one command may have at once: its PID namespace's `pid_max`
    /// (Linux 6.14 and newer; the namespace's numbers start at 1 and go on from 300 once
    /// they wrap, so that is this many and up to 300 more), and `RLIMIT_NPROC`, which the
    /// kernel counts per user and user namespace and does not hold against root.
    pub pids: Option<u32>,
    /// Bytes of memory each process may allocate (`RLIMIT_DATA`: its heap and private
    /// writable mappings; a process's, not the command's together).
    pub memory: Option<u64>,
}

impl Limits {
    /// The default: 4096 processes, memory unlimited (`RLIMIT_DATA` counts what a
    /// program only reserves, and a sanitizer's shadow reserves terabytes).
    pub fn standard() -> Limits {
        Limits {
            pids: Some(4096),
            memory: None,
        }
    }

    /// How the limits hold for a process started in a PID namespace of its own
    /// (`pid_ns`) on this system, in a phrase for `plait status` and `plait doctor`.
    pub fn describe(&self, pid_ns: bool) -> String {
        let mut parts = Vec::new();
        if let Some(pids) = self.pids {
            // SAFETY: geteuid has no preconditions.
            let root = unsafe { libc::geteuid() } == 0;
            let how = match (pid_ns, root) {
                (true, true) => "the PID namespace's pid_max",
                (true, false) => "the PID namespace's pid_max and RLIMIT_NPROC",
                (false, true) => "not held: RLIMIT_NPROC binds no root",
                (false, false) => "RLIMIT_NPROC, per user",
            };
            parts.push(format!("{pids} processes ({how})"));
        }
        if let Some(memory) = self.memory {
            parts.push(format!("{} per process (RLIMIT_DATA)", bytes(memory)));
        }
        if parts.is_empty() {
            "no limits".to_string()
        } else {
            format!("limits: {}", parts.join(", "))
        }
    }
}

/// `bytes` in the plan's words: `4G`, `512M`, or a number of bytes.
pub fn bytes(bytes: u64) -> String {
    for (unit, size) in [
        ("T", 1u64 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

/// A size as the plan writes it (`"4G"`, `"512M"`, `"64K"`, `"1T"`, or bytes), in bytes.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let shift = match unit
        .trim()
        .trim_end_matches(['b', 'B'])
        .to_ascii_uppercase()
        .as_str()
    {
        "" => 0,
        "K" | "KI" => 10,
        "M" | "MI" => 20,
        "G" | "GI" => 30,
        "T" | "TI" => 40,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(1u64 << shift)
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
            git_dir: None,
            read_all: false,
            limits: Limits::standard(),
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
    pub(crate) fn net_wall(&self) -> NetWall {
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

    /// How processes under these settings are confined, in a phrase: writes, network,
    /// how what a command leaves running is stopped, and its limits.
    pub fn describe(&self) -> String {
        let confinement = self.confinement();
        match self.net_wall() {
            NetWall::Open if !confinement.is_confined() => confinement.describe(),
            wall => {
                let pid_ns = super::pids::support().is_ok();
                format!(
                    "{}, {}, leftovers: {}, {}",
                    confinement.describe(),
                    wall.describe(self.network, &self.ports),
                    super::pids::lifetime(),
                    self.limits.describe(pid_ns)
                )
            }
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
    pub(crate) fn is_confined(&self) -> bool {
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
