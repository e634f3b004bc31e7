//! The network wall. With `network = "off"` a process starts, where the system allows user
//! namespaces, in a network namespace of its own: a loopback device and nothing else, so no
//! TCP, UDP (DNS included) or raw packet leaves it, abstract UNIX sockets are its own, and
//! the path sockets served outside (a docker, ssh-agent or D-Bus socket, as
//! `/proc/net/unix` lists them) are covered with `/dev/null` in its mount namespace. A test
//! suite may still bind and connect on 127.0.0.1 there. The `ports` the plan names (a
//! database on loopback) are served inside by listeners the child makes before its program
//! runs and hands to plait over a socket pair; plait forwards each connection to the same
//! port on the machine's loopback, for as long as the process lives.
//!
//! Where there are no such namespaces, Landlock (ABI 4 and newer) lets TCP connect only to
//! those ports and bind none, scopes abstract UNIX sockets (ABI 6), and a seccomp filter
//! refuses every IP socket but TCP's, and `io_uring`, which would make sockets past it;
//! before ABI 4 the filter refuses every IP socket. Path sockets are then out of reach only
//! through the variables withheld from the environment.

use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::settings::NetWall;

pub(crate) mod holder;
pub(crate) mod ports;
pub(super) mod seccomp;

/// The path sockets something listens on outside, as this network namespace's
/// `/proc/net/unix` lists them, except those beneath `own`.
pub(crate) fn served_sockets(own: &[PathBuf]) -> Vec<PathBuf> {
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    const LISTENING: u32 = 0x10000; // __SO_ACCEPTCON
    let mut out = Vec::new();
    for line in table.lines().skip(1) {
        // Seven fields, then the path as it was bound, spaces and all.
        let mut rest = line.trim_start();
        let mut fields = Vec::with_capacity(7);
        while fields.len() < 7 {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            fields.push(&rest[..end]);
            rest = rest[end..].trim_start();
        }
        let (Some(flags), path) = (fields.get(3), rest) else {
            continue;
        };
        let listening = u32::from_str_radix(flags, 16).is_ok_and(|f| f & LISTENING != 0);
        let path = Path::new(path);
        if listening
            && path.is_absolute()
            && !own.iter().any(|o| path.starts_with(o))
            && !out.iter().any(|p: &PathBuf| p == path)
        {
            out.push(path.to_path_buf());
        }
    }
    out
}

/// How a sandbox's network is walled, for the observer: which connections it records as
/// refused.
#[derive(Debug)]
pub(crate) struct Watch {
    pub(crate) wall: NetWall,
    pub(crate) ports: Vec<u16>,
    /// The path sockets covered in the processes' mount namespaces.
    pub(crate) hidden: Vec<PathBuf>,
    /// The plan's key that opens the network for these processes.
    pub(crate) network_key: &'static str,
    /// Whether these processes reach their model through plait's gateway: opening the
    /// network would go around it, so no refusal proposes that.
    pub(crate) gateway: bool,
}

/// Package managers' retries, at none where the network is walled, unless the user set
/// them: a fetch that cannot succeed fails at once, with the wall's refusal beside it,
/// rather than after a minute of back-off (npm waits 70 s over two retries).
pub(crate) const NO_RETRIES: &[(&str, &str)] = &[
    ("npm_config_fetch_retries", "0"),
    ("PIP_RETRIES", "0"),
    ("CARGO_NET_RETRY", "0"),
    ("UV_HTTP_RETRIES", "0"),
    ("YARN_HTTP_RETRY", "0"),
];

/// Whether the refusal `denial` (as [`Watch::refused`] words it) is of a name lookup (a
/// connection to port 53), which programs make on their own and is no news when they
/// succeed anyway.
pub fn lookup(denial: &str) -> bool {
    denial.starts_with("connect to ")
        && denial
            .split_whitespace()
            .nth(2)
            .is_some_and(|at| at.ends_with(":53"))
}

impl Watch {
    /// What a `connect` of process `pid` to the socket address `addr` (as the process
    /// passed it) meets at the wall, in words that name the setting that would allow it;
    /// `None` when the wall lets it through, or it goes nowhere the sandbox keeps it from.
    pub(crate) fn refused(&self, pid: u32, addr: &[u8]) -> Option<String> {
        let family = i32::from(u16::from_ne_bytes([*addr.first()?, *addr.get(1)?]));
        let on = format!("{} = \"on\" allows it", self.network_key);
        match family {
            libc::AF_INET if addr.len() >= 8 => {
                let port = u16::from_be_bytes([addr[2], addr[3]]);
                let ip = std::net::Ipv4Addr::new(addr[4], addr[5], addr[6], addr[7]);
                self.inet(pid, ip.into(), port)
            }
            libc::AF_INET6 if addr.len() >= 24 => {
                let port = u16::from_be_bytes([addr[2], addr[3]]);
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&addr[8..24]);
                let ip = std::net::Ipv6Addr::from(octets);
                let ip = ip
                    .to_ipv4_mapped()
                    .map_or(std::net::IpAddr::V6(ip), std::net::IpAddr::V4);
                self.inet(pid, ip, port)
            }
            libc::AF_UNIX if addr.len() > 2 => {
                let name = &addr[2..];
                if name[0] == 0 {
                    let end = name.len();
                    let shown = format!("@{}", String::from_utf8_lossy(&name[1..end]));
                    let outside = self.wall != NetWall::Landlock || scoped_abstract();
                    (outside
                        && listening_unix(None, &shown)
                        && !listening_unix(Some(pid), &shown))
                    .then(|| {
                        format!("connect to abstract socket {shown} refused: served outside the sandbox ({on})")
                    })
                } else {
                    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
                    let path = Path::new(std::ffi::OsStr::from_bytes(&name[..end]));
                    self.hidden.iter().any(|h| h == path).then(|| {
                        let dir = path.parent().unwrap_or(path);
                        format!(
                            "connect to socket {} refused: served outside the sandbox ([sandbox] sockets = [\"{}\"] allows it)",
                            path.display(),
                            dir.display()
                        )
                    })
                }
            }
            _ => None,
        }
    }

    fn inet(&self, pid: u32, ip: std::net::IpAddr, port: u16) -> Option<String> {
        let at = std::net::SocketAddr::new(ip, port);
        let on = match self.gateway {
            true => "only plait's gateway is reachable, at $PLAIT_GATEWAY_URL, for the \
                     agent's model"
                .to_string(),
            false => format!("{} = \"on\" allows it", self.network_key),
        };
        let listed = format!("[sandbox] ports = [{port}] allows it");
        if port == 0 || (self.ports.contains(&port) && self.wall != NetWall::NoSockets) {
            return None;
        }
        match self.wall {
            NetWall::Open => None,
            NetWall::Namespace if !ip.is_loopback() => Some(format!(
                "connect to {at} refused: the network is off ({on})"
            )),
            NetWall::Namespace => (listening_tcp(None, port) && !listening_tcp(Some(pid), port))
                .then(|| format!("connect to {at} refused: served outside the sandbox ({listed})")),
            NetWall::Landlock if ip.is_loopback() => Some(format!(
                "connect to {at} refused: the network is off ({listed})"
            )),
            NetWall::Landlock | NetWall::NoSockets => Some(format!(
                "connect to {at} refused: the network is off ({on})"
            )),
        }
    }
}

/// Whether Landlock keeps abstract UNIX sockets outside the sandbox out of reach here.
fn scoped_abstract() -> bool {
    matches!(super::settings::support(), super::settings::Support::Landlock(abi) if *abi >= 6)
}

/// Whether a TCP socket listens at `port` in the network namespace of process `pid` (or
/// plait's own).
fn listening_tcp(pid: Option<u32>, port: u16) -> bool {
    const LISTEN: &str = "0A";
    let base = pid.map_or_else(|| "/proc/self".to_string(), |p| format!("/proc/{p}"));
    ["tcp", "tcp6"].iter().any(|table| {
        let Ok(text) = std::fs::read_to_string(format!("{base}/net/{table}")) else {
            return false;
        };
        text.lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields
                .get(1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            local_port == Some(port) && fields.get(3) == Some(&LISTEN)
        })
    })
}

/// Whether a UNIX socket named `shown` (as `/proc/net/unix` shows it) listens in the
/// network namespace of process `pid` (or plait's own).
fn listening_unix(pid: Option<u32>, shown: &str) -> bool {
    const LISTENING: u32 = 0x10000;
    let base = pid.map_or_else(|| "/proc/self".to_string(), |p| format!("/proc/{p}"));
    let Ok(text) = std::fs::read_to_string(format!("{base}/net/unix")) else {
        return false;
    };
    text.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(7) == Some(&shown)
            && fields
                .get(3)
                .and_then(|f| u32::from_str_radix(f, 16).ok())
                .is_some_and(|f| f & LISTENING != 0)
    })
}

/// Variables that point at sockets served outside, withheld from processes whose network
/// is walled unless the plan names them (`[sandbox] keep_env`).
const SOCKET_VARS: &[&str] = &[
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DOCKER_HOST",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
];

/// Ends of names that hold credentials, withheld likewise.
const SECRET_ENDS: &[&str] = &[
    "_API_KEY",
    "_APIKEY",
    "_TOKEN",
    "_SECRET",
    "_SECRET_KEY",
    "_SECRET_ACCESS_KEY",
    "_PASSWORD",
    "_PASSWD",
    "_CREDENTIALS",
];

/// Whole names that hold credentials.
const SECRET_NAMES: &[&str] = &["PGPASSWORD", "MYSQL_PWD", "NETRC"];

/// Whether a variable of plait's environment is withheld from a walled process.
pub(crate) fn withheld(name: &str) -> bool {
    if name.starts_with("PLAIT_") {
        return false;
    }
    let upper = name.to_ascii_uppercase();
    SOCKET_VARS.contains(&upper.as_str())
        || SECRET_NAMES.contains(&upper.as_str())
        || SECRET_ENDS.iter().any(|end| upper.ends_with(end))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_socket_variables_are_withheld() {
        for name in [
            "SSH_AUTH_SOCK",
            "DOCKER_HOST",
            "DBUS_SESSION_BUS_ADDRESS",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "PGPASSWORD",
            "npm_config__auth_token",
        ] {
            assert!(withheld(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "PLAIT_TOKEN",
            "TOKENIZERS_PARALLELISM",
            "CARGO_HOME",
        ] {
            assert!(!withheld(name), "{name}");
        }
    }

    #[test]
    fn served_sockets_are_the_listening_path_sockets_outside() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.sock");
        let own = dir.path().join("own");
        std::fs::create_dir(&own).unwrap();
        let inside = own.join("inside.sock");
        let _a = std::os::unix::net::UnixListener::bind(&outside).unwrap();
        let _b = std::os::unix::net::UnixListener::bind(&inside).unwrap();
        let spaced = dir.path().join("my sockets");
        std::fs::create_dir(&spaced).unwrap();
        let spaced = spaced.join("a b.sock");
        let _c = std::os::unix::net::UnixListener::bind(&spaced).unwrap();
        let found = served_sockets(std::slice::from_ref(&own));
        assert!(found.contains(&outside), "{found:?}");
        assert!(found.contains(&spaced), "{found:?}");
        assert!(!found.contains(&inside), "{found:?}");
    }
}
