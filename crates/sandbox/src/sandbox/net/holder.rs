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
use std::path::PathBuf;
use std::sync::Mutex;

use super::ports::Namespace;
use plait_core::sync::Locked as _;

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

impl Held {
    /// Makes the namespaces for `namespace` (its `ports` served inside, its `hide` sockets
    /// covered) and holds them: a child cloned in plait's memory and descriptor table
    /// (`crate::child::clone_vfork`, no fork of plait) enters new ones as a process of the
    /// sandbox would (`view::entering`) and opens them into plait's table.
    pub(crate) fn make(namespace: &Namespace) -> io::Result<Held> {
        let entry = super::super::view::Entry {
            net: Some(namespace),
            ..Default::default()
        };
        let (mut entering, channel) = super::super::view::entering(entry, None, None)?;
        let c = |text: &str| CString::new(text).unwrap_or_default();
        let paths = [
            c("/proc/self/ns/user"),
            c("/proc/self/ns/net"),
            c("/proc/self/ns/mnt"),
        ];
        let mut opened: [RawFd; 3] = [-1; 3];
        let mut make = || -> libc::c_int {
            // SAFETY: `run` and `open` are plain system calls on data made before the clone.
            unsafe {
                if entering.run_all().is_err() {
                    return 1;
                }
                for (path, fd) in paths.iter().zip(opened.iter_mut()) {
                    *fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                    if *fd < 0 {
                        return 1;
                    }
                }
            }
            0
        };
        let (pid, _) = crate::child::clone_vfork(libc::CLONE_FILES, &mut make)?;
        let mut status = 0;
        // SAFETY: our own child, which has ended (CLONE_VFORK); reaped once.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        // SAFETY: each opened by the child into this table, owned by nothing else.
        let [user, net, mnt] =
            opened.map(|fd| (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }));
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
        self.channel.locked().take()
    }
}
