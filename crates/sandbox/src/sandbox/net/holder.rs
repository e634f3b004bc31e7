//! A sandbox's network namespace made once, for every process it starts (`network =
//! "off"`): a short-lived child of plait's (cloned in its memory and descriptor table, not
//! forked) makes a user, network and mount namespace, brings its loopback up, makes the
//! listeners of the plan's `ports` and sends them to plait, covers the path sockets served
//! outside with `/dev/null`, opens the three namespaces (`/proc/self/ns/…`) into plait's
//! table and ends; they live on while plait holds them. Each process the sandbox starts then joins them between fork and exec (`setns`, a
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

/// What the child making the namespaces does, prepared before the clone.
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
    /// `/proc/self/ns/` of the user, network and mount namespaces, and the descriptors the
    /// child opens them at (in plait's table, which it shares).
    ns: [CString; 3],
    opened: [RawFd; 3],
}

impl Child {
    /// In the child: the namespaces, its loopback and listeners, the sockets covered, the
    /// three namespaces opened into plait's table. 0 when all went well.
    ///
    /// # Safety
    /// In a child cloned for it only: plain system calls, no allocation.
    unsafe fn make(&mut self) -> libc::c_int {
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
            return 1;
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
        for (path, fd) in self.ns.iter().zip(self.opened.iter_mut()) {
            *fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if *fd < 0 {
                return 1;
            }
        }
        0
    }
}

impl Held {
    /// Makes the namespaces for `namespace` (its `ports` served inside, its `hide` sockets
    /// covered) and holds them: a child cloned in plait's memory and descriptor table
    /// (`crate::child::clone_vfork`, no fork of plait) makes them and opens them for plait.
    pub(crate) fn make(namespace: &Namespace) -> io::Result<Held> {
        // SAFETY: getuid and getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let (net, channel) = ports::Prepared::new(namespace)?;
        let c = |text: &str| CString::new(text).unwrap_or_default();
        let mut child = Child {
            net,
            hide: namespace
                .hide
                .iter()
                .map(|p| c_path(p))
                .collect::<io::Result<_>>()?,
            devnull: c("/dev/null"),
            root: c("/"),
            setgroups: c("/proc/self/setgroups"),
            uid_map: c("/proc/self/uid_map"),
            gid_map: c("/proc/self/gid_map"),
            uid_line: format!("{uid} {uid} 1\n").into_bytes(),
            gid_line: format!("{gid} {gid} 1\n").into_bytes(),
            ns: [
                c("/proc/self/ns/user"),
                c("/proc/self/ns/net"),
                c("/proc/self/ns/mnt"),
            ],
            opened: [-1; 3],
        };
        // SAFETY: `make` makes only async-signal-safe calls on what it holds.
        let (pid, _) =
            crate::child::clone_vfork(libc::CLONE_FILES, &mut || unsafe { child.make() })?;
        let mut status = 0;
        // SAFETY: our own child, which has ended (CLONE_VFORK); reaped once.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        // SAFETY: each opened by the child into this table, owned by nothing else.
        let [user, net, mnt] = child
            .opened
            .map(|fd| (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }));
        let made = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        match (made, user, net, mnt) {
            (true, Some(user), Some(net), Some(mnt)) => Ok(Held {
                user,
                net,
                mnt,
                hidden: namespace.hide.clone(),
                channel: Mutex::new(channel),
            }),
            _ => Err(io::Error::other(
                "the child making the sandbox's network namespace could not make it",
            )),
        }
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
