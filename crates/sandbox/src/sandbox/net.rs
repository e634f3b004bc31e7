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

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

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
    /// [`SandboxSettings::through_gateway`]: super::SandboxSettings::through_gateway
    Gateway,
}

impl Network {
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
pub enum NetWall {
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

/// A network namespace a child makes for itself: the `ports` to serve inside, and the path
/// sockets to cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Namespace {
    pub(crate) ports: Vec<u16>,
    pub(crate) hide: Vec<PathBuf>,
}

/// One listener the child makes: on the loopback of `family`, at `port`.
struct Listener {
    family: libc::c_int,
    addr: libc::sockaddr_storage,
    len: libc::socklen_t,
}

/// The addresses a child listens on for `port`: 127.0.0.1 and ::1, in this order (the
/// index of one is what the child sends with it).
fn listen_addresses(port: u16) -> [std::net::SocketAddr; 2] {
    [
        (std::net::Ipv4Addr::LOCALHOST, port).into(),
        (std::net::Ipv6Addr::LOCALHOST, port).into(),
    ]
}

fn sockaddr(addr: std::net::SocketAddr) -> Listener {
    // SAFETY: all-zero is a valid `sockaddr_storage`.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let (family, len) = match addr {
        std::net::SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: a `sockaddr_in` fits in a `sockaddr_storage`.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin) };
            (libc::AF_INET, size_of::<libc::sockaddr_in>())
        }
        std::net::SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: 0,
            };
            // SAFETY: a `sockaddr_in6` fits in a `sockaddr_storage`.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin6) };
            (libc::AF_INET6, size_of::<libc::sockaddr_in6>())
        }
    };
    Listener {
        family,
        addr: storage,
        len: len as libc::socklen_t,
    }
}

/// What the child needs for its network, prepared before the fork.
pub(super) struct Prepared {
    lo: [libc::c_char; libc::IFNAMSIZ],
    listeners: Vec<Listener>,
    /// The child's end of the channel to plait.
    channel: Option<OwnedFd>,
    /// Room for one `SCM_RIGHTS` control message.
    control: Vec<u64>,
}

impl Prepared {
    /// The child's part, and plait's end of the channel when there are ports to serve.
    pub(super) fn new(namespace: &Namespace) -> io::Result<(Prepared, Option<OwnedFd>)> {
        let mut lo = [0; libc::IFNAMSIZ];
        for (to, from) in lo.iter_mut().zip(b"lo") {
            *to = *from as libc::c_char;
        }
        let listeners: Vec<Listener> = namespace
            .ports
            .iter()
            .flat_map(|&port| listen_addresses(port))
            .map(sockaddr)
            .collect();
        let (channel, ours) = if listeners.is_empty() {
            (None, None)
        } else {
            let (child, parent) = socket_pair()?;
            (Some(child), Some(parent))
        };
        // SAFETY: CMSG_SPACE is arithmetic.
        let space = unsafe { libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) } as usize;
        Ok((
            Prepared {
                lo,
                listeners,
                channel,
                control: vec![0; space.div_ceil(8)],
            },
            ours,
        ))
    }

    /// In the child, inside its new network namespace: loopback up, then each listener made
    /// and sent to plait.
    ///
    /// # Safety
    /// Between fork and exec only: plain system calls, no allocation.
    pub(super) unsafe fn enter(&mut self) -> io::Result<()> {
        let fail = || Err(io::Error::last_os_error());
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return fail();
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        ifr.ifr_name = self.lo;
        if libc::ioctl(s, libc::SIOCGIFFLAGS, &mut ifr) != 0 {
            libc::close(s);
            return fail();
        }
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr) != 0 {
            libc::close(s);
            return fail();
        }
        libc::close(s);
        let Some(channel) = &self.channel else {
            return Ok(());
        };
        for (index, listener) in self.listeners.iter().enumerate() {
            let fd = libc::socket(listener.family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if fd < 0 {
                continue;
            }
            let one: libc::c_int = 1;
            let size = size_of::<libc::c_int>() as libc::socklen_t;
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&raw const one).cast(),
                size,
            );
            if listener.family == libc::AF_INET6 {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_IPV6,
                    libc::IPV6_V6ONLY,
                    (&raw const one).cast(),
                    size,
                );
            }
            // IPv6 may be off in this kernel: then only 127.0.0.1 is served.
            if libc::bind(fd, (&raw const listener.addr).cast(), listener.len) == 0
                && libc::listen(fd, 511) == 0
            {
                send_fd(channel.as_raw_fd(), fd, index as u8, &mut self.control);
            }
            libc::close(fd);
        }
        Ok(())
    }
}

/// A pair of connected datagram sockets, both close-on-exec.
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just made both, and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sends `fd` over `channel` with one byte, `tag`. Async-signal-safe.
unsafe fn send_fd(channel: RawFd, fd: RawFd, tag: u8, control: &mut [u64]) {
    let mut byte = tag;
    let mut iov = libc::iovec {
        iov_base: (&raw mut byte).cast(),
        iov_len: 1,
    };
    let space = libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize;
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let cmsg = libc::CMSG_FIRSTHDR(&msg);
    if cmsg.is_null() {
        return;
    }
    (*cmsg).cmsg_level = libc::SOL_SOCKET;
    (*cmsg).cmsg_type = libc::SCM_RIGHTS;
    (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd);
    libc::sendmsg(channel, &msg, 0);
}

/// The listeners a started child sent on `channel`, each with its tag.
fn received(channel: &OwnedFd) -> Vec<(u8, OwnedFd)> {
    let mut out = Vec::new();
    // SAFETY: CMSG_SPACE is arithmetic.
    let space = unsafe { libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    loop {
        let mut byte = 0u8;
        let mut iov = libc::iovec {
            iov_base: (&raw mut byte).cast(),
            iov_len: 1,
        };
        // SAFETY: all-zero is a valid `msghdr`; its buffers are set below and outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: `msg` describes valid buffers.
        let n = unsafe {
            libc::recvmsg(
                channel.as_raw_fd(),
                &mut msg,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            )
        };
        if n <= 0 {
            return out;
        }
        // SAFETY: the kernel filled `msg`'s control buffer; the header is checked before
        // its data is read.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            if !cmsg.is_null()
                && (*cmsg).cmsg_level == libc::SOL_SOCKET
                && (*cmsg).cmsg_type == libc::SCM_RIGHTS
            {
                let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                out.push((byte, OwnedFd::from_raw_fd(fd)));
            }
        }
    }
}

/// Serves the listeners child `pid` sent on `channel` for `ports`: each connection inside
/// goes to the same port on the machine's loopback (from `::1`, to `::1` and else to
/// 127.0.0.1), until the child has ended. Returns the tasks, to be stopped with the sandbox.
pub(crate) fn forward(channel: &OwnedFd, pid: u32, ports: &[u16]) -> Vec<tokio::task::AbortHandle> {
    let listeners = received(channel);
    if listeners.is_empty() {
        return Vec::new();
    }
    // SAFETY: a plain system call; the pid is our child's, not yet reaped.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: the kernel just made it.
    let ended = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) });
    let mut tasks = Vec::new();
    for (tag, fd) in listeners {
        let index = usize::from(tag);
        let Some(&port) = ports.get(index / 2) else {
            continue;
        };
        let std_listener = std::net::TcpListener::from(fd);
        if std_listener.set_nonblocking(true).is_err() {
            continue;
        }
        let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) else {
            continue;
        };
        let targets: Vec<std::net::SocketAddr> = if index % 2 == 1 {
            listen_addresses(port).into_iter().rev().collect()
        } else {
            vec![listen_addresses(port)[0]]
        };
        let ended = ended.as_ref().and_then(|fd| fd.try_clone().ok());
        let task = tokio::spawn(async move {
            let exited = async {
                // SAFETY: the `AsyncFd` owns the descriptor, which stays open and the same
                // while it lives.
                let watched = ended.and_then(|fd| unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        fd,
                        tokio::io::Interest::READABLE,
                    )
                    .ok()
                });
                match watched {
                    Some(fd) => {
                        let _ = fd.readable().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(exited);
            loop {
                tokio::select! {
                    () = &mut exited => return,
                    accepted = listener.accept() => {
                        let Ok((mut inside, _)) = accepted else { continue };
                        let targets = targets.clone();
                        tokio::spawn(async move {
                            for target in targets {
                                if let Ok(mut outside) = tokio::net::TcpStream::connect(target).await {
                                    let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
                                    return;
                                }
                            }
                        });
                    }
                }
            }
        });
        tasks.push(task.abort_handle());
    }
    tasks
}

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
        let on = format!("{} = \"on\" allows it", self.network_key);
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
    matches!(super::support(), super::Support::Landlock(abi) if *abi >= 6)
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

/// The seccomp filter of [`NetWall::Landlock`] (TCP left to Landlock) or
/// [`NetWall::NoSockets`] (no IP socket at all): `socket(2)` of another kind in `AF_INET`
/// or `AF_INET6`, any `AF_PACKET` socket and `io_uring_setup` fail with `EACCES`
/// (`io_uring`'s with `ENOSYS`, so a program falls back to plain calls); calls of another
/// architecture or ABI (x32) are refused too, since their numbers are not these.
pub(crate) fn filter(tcp: bool) -> &'static [libc::sock_filter] {
    static TCP: OnceLock<Vec<libc::sock_filter>> = OnceLock::new();
    static NONE: OnceLock<Vec<libc::sock_filter>> = OnceLock::new();
    let cell = if tcp { &TCP } else { &NONE };
    cell.get_or_init(|| program(tcp))
}

#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xc000_00b7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARCH: u32 = 0;

fn program(tcp: bool) -> Vec<libc::sock_filter> {
    const LD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const AND: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let low = |i: u32| {
        let at = 16 + 8 * i;
        if cfg!(target_endian = "little") {
            at
        } else {
            at + 4
        }
    };
    let allow = libc::SECCOMP_RET_ALLOW;
    let deny = libc::SECCOMP_RET_ERRNO | libc::EACCES as u32;
    let nosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    // Jumps count the instructions they skip; the layout below is fixed, each offset
    // written out.
    let mut code = vec![
        /* 0 */ op(LD, 0, 0, 4),
        /* 1 */ op(JEQ, 1, 0, ARCH),
        /* 2 */ op(RET, 0, 0, nosys),
        /* 3 */ op(LD, 0, 0, 0),
        /* 4 */ op(JGE, 0, 1, 0x4000_0000),
        /* 5 */ op(RET, 0, 0, nosys),
        /* 6 */ op(JEQ, 0, 1, libc::SYS_io_uring_setup as u32),
        /* 7 */ op(RET, 0, 0, nosys),
        /* 8 */ op(JEQ, 1, 0, libc::SYS_socket as u32),
        /* 9 */ op(RET, 0, 0, allow),
        /* 10 */ op(LD, 0, 0, low(0)),
        /* 11 */ op(JEQ, 4, 0, libc::AF_INET as u32),
        /* 12 */ op(JEQ, 3, 0, libc::AF_INET6 as u32),
        /* 13 */ op(JEQ, 1, 0, libc::AF_PACKET as u32),
        /* 14 */ op(RET, 0, 0, allow),
        /* 15 */ op(RET, 0, 0, deny),
    ];
    if tcp {
        code.extend([
            /* 16 */ op(LD, 0, 0, low(1)),
            /* 17 */ op(AND, 0, 0, 0xf),
            /* 18 */ op(JEQ, 1, 0, libc::SOCK_STREAM as u32),
            /* 19 */ op(RET, 0, 0, deny),
            /* 20 */ op(LD, 0, 0, low(2)),
            // Only TCP itself: MPTCP and others are not Landlock's to judge.
            /* 21 */
            op(JEQ, 2, 0, 0),
            /* 22 */ op(JEQ, 1, 0, libc::IPPROTO_TCP as u32),
            /* 23 */ op(RET, 0, 0, deny),
            /* 24 */ op(RET, 0, 0, allow),
        ]);
    } else {
        code.push(op(RET, 0, 0, deny));
    }
    code
}

/// Installs `code` on the calling thread, which has no new privileges. Async-signal-safe.
pub(crate) unsafe fn install(code: &[libc::sock_filter]) -> io::Result<()> {
    let program = libc::sock_fprog {
        len: code.len() as u16,
        filter: code.as_ptr().cast_mut(),
    };
    if libc::syscall(
        libc::SYS_seccomp,
        libc::SECCOMP_SET_MODE_FILTER,
        0,
        &raw const program,
    ) != 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The filter refuses UDP, raw and packet sockets and `io_uring`, and lets TCP (and
    /// UNIX sockets) through; without TCP, every IP socket is refused.
    #[test]
    fn the_filter_leaves_tcp_to_landlock_and_refuses_the_rest() {
        for tcp in [true, false] {
            let results = std::thread::spawn(move || {
                // SAFETY: plain system calls on this thread only.
                unsafe {
                    assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
                    install(filter(tcp)).unwrap();
                    let try_socket = |domain, kind, protocol| {
                        let fd = libc::socket(domain, kind, protocol);
                        if fd >= 0 {
                            libc::close(fd);
                            Ok(())
                        } else {
                            Err(io::Error::last_os_error().raw_os_error())
                        }
                    };
                    let uring =
                        libc::syscall(libc::SYS_io_uring_setup, 1, std::ptr::null_mut::<u8>());
                    let uring = (uring < 0).then(|| io::Error::last_os_error().raw_os_error());
                    [
                        try_socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0),
                        try_socket(libc::AF_INET6, libc::SOCK_STREAM, libc::IPPROTO_TCP),
                        try_socket(libc::AF_INET, libc::SOCK_DGRAM, 0),
                        try_socket(libc::AF_INET6, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0),
                        try_socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
                        try_socket(libc::AF_INET, libc::SOCK_STREAM, 262), // MPTCP
                        try_socket(libc::AF_PACKET, libc::SOCK_RAW, 0),
                        try_socket(libc::AF_UNIX, libc::SOCK_STREAM, 0),
                        try_socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0),
                        uring.map_or(Ok(()), Err),
                    ]
                }
            })
            .join()
            .unwrap();
            let refused = Err(Some(libc::EACCES));
            let tcp_result = if tcp { Ok(()) } else { refused };
            assert_eq!(
                results,
                [
                    tcp_result,
                    tcp_result,
                    refused,
                    refused,
                    refused,
                    refused,
                    refused,
                    Ok(()),
                    Ok(()),
                    Err(Some(libc::ENOSYS)),
                ],
                "tcp: {tcp}"
            );
        }
    }

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
