//! A sandbox's network namespace made once, for every process it starts (`network =
//! "off"`): a short-lived child of plait's makes a user, network and mount namespace, brings
//! its loopback up, makes the listeners of the plan's `ports` and sends them to plait,
//! covers the path sockets served outside with `/dev/null`, and waits; plait opens the three
//! namespaces (`/proc/<pid>/ns/…`), which live on while it holds them, and kills the child. Each process the sandbox starts then joins them between fork and exec (`setns`, a
//! few microseconds) instead of making and tearing down a network namespace of its own:
//! the kernel's work on a network namespace, about a millisecond of CPU, is done once per
//! sandbox. The processes of one sandbox share its loopback; another sandbox's, and the
//! machine's, stay out of reach (joining them needs a capability none of them has).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;
use std::sync::Mutex;

use super::ports::{self, Namespace};

/// The namespaces one sandbox's processes join, held open by plait.
#[derive(Debug)]
pub(crate) struct Held {
    user: OwnedFd,
    net: OwnedFd,
    mnt: OwnedFd,
    /// The path sockets covered in its mount namespace.
    pub(crate) hidden: Vec<PathBuf>,
    /// plait's end of the channel the listeners of the `ports` came on, until the first
    /// spawn takes it to forward them.
    channel: Mutex<Option<OwnedFd>>,
}

fn c_path(path: &std::path::Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("a path holds NUL"))
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just made both, and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes `bytes` to the file at `path` in one call. Async-signal-safe.
unsafe fn write_file(path: &CString, bytes: &[u8]) -> bool {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return false;
    }
    let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    libc::close(fd);
    n == bytes.len() as isize
}

/// What the holding child does, prepared before the fork.
struct Child {
    net: ports::Prepared,
    hide: Vec<CString>,
    devnull: CString,
    root: CString,
    setgroups: CString,
    uid_map: CString,
    gid_map: CString,
    uid_line: Vec<u8>,
    gid_line: Vec<u8>,
}

impl Child {
    /// In the child: the namespaces, its loopback and listeners, the sockets covered; then
    /// a byte on `ready`, and a wait to be killed. Never returns. (Not a pipe's end: a child
    /// forked meanwhile by another thread of plait holds copies of the pipes' ends.)
    ///
    /// # Safety
    /// After fork only: plain system calls, no allocation.
    unsafe fn hold(&mut self, ready: RawFd) -> ! {
        let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWNS;
        let made = libc::unshare(flags) == 0
            && write_file(&self.setgroups, b"deny\n")
            && write_file(&self.uid_map, &self.uid_line)
            && write_file(&self.gid_map, &self.gid_line)
            // Nothing mounted here reaches the namespace the mount tree was copied from.
            && libc::mount(
                std::ptr::null(),
                self.root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
            && self.net.enter().is_ok();
        if !made {
            libc::_exit(1);
        }
        // A socket gone meanwhile, or where this namespace cannot mount, is left as it is.
        for socket in &self.hide {
            libc::mount(
                self.devnull.as_ptr(),
                socket.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            );
        }
        let byte = 1u8;
        libc::write(ready, (&raw const byte).cast(), 1);
        libc::close(ready);
        // Until plait has opened the namespaces and kills it.
        loop {
            libc::pause();
        }
    }
}

impl Held {
    /// Makes the namespaces for `namespace` (its `ports` served inside, its `hide` sockets
    /// covered) and holds them.
    pub(crate) fn make(namespace: &Namespace) -> io::Result<Held> {
        // SAFETY: getuid and getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let (net, channel) = ports::Prepared::new(namespace)?;
        let mut child = Child {
            net,
            hide: namespace
                .hide
                .iter()
                .map(|p| c_path(p))
                .collect::<io::Result<_>>()?,
            devnull: CString::new("/dev/null").unwrap_or_default(),
            root: CString::new("/").unwrap_or_default(),
            setgroups: CString::new("/proc/self/setgroups").unwrap_or_default(),
            uid_map: CString::new("/proc/self/uid_map").unwrap_or_default(),
            gid_map: CString::new("/proc/self/gid_map").unwrap_or_default(),
            uid_line: format!("{uid} {uid} 1\n").into_bytes(),
            gid_line: format!("{gid} {gid} 1\n").into_bytes(),
        };
        let (ready_r, ready_w) = pipe()?;
        // SAFETY: the child makes only async-signal-safe system calls on data prepared
        // above, and ends with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: in the child, which closes the end it does not use and holds.
            unsafe {
                libc::close(ready_r.as_raw_fd());
                child.hold(ready_w.as_raw_fd())
            }
        }
        drop(ready_w);
        let mut byte = 0u8;
        let got = loop {
            // SAFETY: one byte into a byte of ours.
            let n = unsafe { libc::read(ready_r.as_raw_fd(), (&raw mut byte).cast(), 1) };
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break n;
            }
        };
        let opened = if got == 1 {
            let open = |kind: &str| -> io::Result<OwnedFd> {
                let path = c_path(&PathBuf::from(format!("/proc/{pid}/ns/{kind}")))?;
                // SAFETY: a plain system call on a NUL-terminated path.
                let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: the kernel just made it.
                Ok(unsafe { OwnedFd::from_raw_fd(fd) })
            };
            (|| Ok::<_, io::Error>((open("user")?, open("net")?, open("mnt")?)))()
        } else {
            Err(io::Error::other(
                "the child making the sandbox's network namespace ended before it was made",
            ))
        };
        let mut status = 0;
        // SAFETY: our own child, killed and waited for once.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, &mut status, 0);
        }
        let (user, net, mnt) = opened?;
        Ok(Held {
            user,
            net,
            mnt,
            hidden: namespace.hide.clone(),
            channel: Mutex::new(channel),
        })
    }

    /// The namespaces to join, in the order they are joined: user, network, mount.
    pub(crate) fn fds(&self) -> [RawFd; 3] {
        [
            self.user.as_raw_fd(),
            self.net.as_raw_fd(),
            self.mnt.as_raw_fd(),
        ]
    }

    /// The channel of the listeners of the `ports`, the first time it is asked for.
    pub(crate) fn take_channel(&self) -> Option<OwnedFd> {
        self.channel
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}
