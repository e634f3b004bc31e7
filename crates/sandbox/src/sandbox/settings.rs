//! What a plan asks of the walls (`[sandbox]`: mode, view, network, what is writable and
//! readable), what this system can give (Landlock's ABI, asked once), and how a process
//! under those settings ends up confined.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use super::limits::{bytes, parse_bytes, Limits};
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

/// How a task's whole-tree view is made: `[sandbox] view` in the plan (`"auto"`,
/// `"filled"`, or `false`; `true` is `"auto"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ViewMode {
    /// An overlay where the system allows user and mount namespaces; else filled in.
    #[default]
    Auto,
    /// The worktree filled in with the base's other files at the first command.
    Filled,
    /// No view for the agent's own command (`view = false`): an exec or `{ cli }` agent
    /// starts in its sparse worktree and reaches the view through `$PLAIT_RUN_IN` alone.
    Off,
}

impl ViewMode {
    /// Its value in the plan, as TOML writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ViewMode::Auto => "\"auto\"",
            ViewMode::Filled => "\"filled\"",
            ViewMode::Off => "false",
        }
    }
}

impl Serialize for ViewMode {
    fn serialize<S: serde::Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        match self {
            ViewMode::Auto => out.serialize_str("auto"),
            ViewMode::Filled => out.serialize_str("filled"),
            ViewMode::Off => out.serialize_bool(false),
        }
    }
}

impl<'de> Deserialize<'de> for ViewMode {
    fn deserialize<D: serde::Deserializer<'de>>(from: D) -> Result<ViewMode, D::Error> {
        from.deserialize_any(ViewModeVisitor)
    }
}

/// Reads `view`: one of two strings, or a boolean.
struct ViewModeVisitor;

impl serde::de::Visitor<'_> for ViewModeVisitor {
    type Value = ViewMode;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(
            "\"auto\" (the default), \"filled\", or false (an exec or { cli } agent's own \
             command in its sparse worktree)",
        )
    }

    fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<ViewMode, E> {
        Ok(if on { ViewMode::Auto } else { ViewMode::Off })
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<ViewMode, E> {
        match value {
            "auto" => Ok(ViewMode::Auto),
            "filled" => Ok(ViewMode::Filled),
            other => Err(E::custom(format_args!(
                "view = \"{other}\" is not a view: say \"auto\" (the default), \"filled\", \
                 or false (an exec or {{ cli }} agent's own command in its sparse worktree)"
            ))),
        }
    }
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
    /// What the plan's own programs need to read (their venvs, `node_modules`, toolchains'
    /// prefixes; see `tools`), found when the plan is.
    pub tools: Vec<PathBuf>,
    /// The repository's git directory, which every process reads as its checkouts' git
    /// does: git's own entries (never plait's store in it), and its `config` as a copy
    /// without credentials where a mount namespace can show it in the file's place.
    pub git_dir: Option<PathBuf>,
    /// Reads are left open (`[setup] run`, the user's own step): no read allow-list.
    pub read_all: bool,
    /// The user's checkout (the repository's working directory): inside a view its path
    /// shows the view, so that what names the checkout (an editable install, a venv's
    /// scripts) reaches the tree being worked on or judged, never the user's working copy.
    pub checkout: Option<PathBuf>,
    /// How much its processes may take (`[sandbox] limits`).
    pub limits: Limits,
    /// The port of the task's own lease of the gateway, among `ports` (`through_gateway`):
    /// one per task, so not said where the walls are described.
    pub gateway_port: Option<u16>,
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
            tools: Vec::new(),
            git_dir: None,
            read_all: false,
            checkout: None,
            limits: Limits::standard(),
            gateway_port: None,
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
            settings.gateway_port = Some(port);
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
