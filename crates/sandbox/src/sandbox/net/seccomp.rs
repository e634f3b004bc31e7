//! The seccomp filter that walls the network where no namespace can: it refuses the IP
//! sockets Landlock does not judge, and `io_uring`, which would make sockets past it.

use std::io;
use std::sync::OnceLock;

#[cfg(doc)]
use super::NetWall;

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
}
