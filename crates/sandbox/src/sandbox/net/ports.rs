//! The plan's `ports` inside a network namespace of the child's own: listeners the child
//! makes on its loopback before its program runs and hands to plait over a socket pair,
//! and plait's forwarding of each connection to the same port on the machine's loopback.

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::path::PathBuf;

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
pub(crate) struct Prepared {
    lo: [libc::c_char; libc::IFNAMSIZ],
    listeners: Vec<Listener>,
    /// The child's end of the channel to plait.
    channel: Option<OwnedFd>,
    /// Room for one `SCM_RIGHTS` control message.
    control: Vec<u64>,
}

impl Prepared {
    /// The child's part, and plait's end of the channel when there are ports to serve.
    pub(crate) fn new(namespace: &Namespace) -> io::Result<(Prepared, Option<OwnedFd>)> {
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
    pub(crate) unsafe fn enter(&mut self) -> io::Result<()> {
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

/// Serves the listeners sent on `channel` for `ports`: each connection inside goes to the
/// same port on the machine's loopback (from `::1`, to `::1` and else to 127.0.0.1), until
/// child `pid` has ended (the child that made them in a namespace of its own), or, without
/// one, until stopped (a sandbox's namespaces, held for all its processes). Returns the
/// tasks, to be stopped with the sandbox.
pub(crate) fn forward(
    channel: &OwnedFd,
    pid: Option<u32>,
    ports: &[u16],
) -> Vec<tokio::task::AbortHandle> {
    let listeners = received(channel);
    if listeners.is_empty() {
        return Vec::new();
    }
    let ended = pid.and_then(|pid| {
        // SAFETY: a plain system call; the pid is our child's, not yet reaped.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        // SAFETY: the kernel just made it.
        (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) })
    });
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
