//! The way into a task's view for a process that is already behind its walls: an exec
//! agent's command runs in its sparse worktree, and Landlock lets no confined process mount
//! anything, so `$PLAIT_RUN_IN CMD` (`plait run-in-view`) asks plait to start `CMD` in the
//! view for it. The agent's processes inherit one end of a socket pair (`PLAIT_VIEW_FD`);
//! a request is one message on it carrying the requester's standard input, output and error
//! and the end of a fresh stream on which it writes its working directory, arguments and
//! environment and reads the exit status back. Each command gets a fresh namespace and
//! mounts, so what the agent wrote in its worktree just before is what it sees; it runs
//! behind the same walls as the agent, and is stopped when the requester goes away.

use std::ffi::OsString;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

/// The variable that names the inherited end in the agent's processes.
pub const FD_VAR: &str = "PLAIT_VIEW_FD";

/// A command to start in the view, as its requester sent it.
#[derive(Debug)]
pub struct Request {
    /// Its working directory.
    pub cwd: PathBuf,
    /// The program and its arguments.
    pub argv: Vec<OsString>,
    /// Its environment.
    pub env: Vec<(OsString, OsString)>,
    /// Its standard input, output and error.
    pub stdio: Vec<OwnedFd>,
}

/// The two ends: plait's, and the one the agent's processes inherit.
pub struct Channel {
    /// plait's end, on which requests arrive.
    pub plait: OwnedFd,
    /// The end the agent's processes inherit (named by [`FD_VAR`]).
    pub agent: OwnedFd,
}

impl Channel {
    /// A new pair, both ends close-on-exec (the agent's end is opened for its processes
    /// alone, between fork and exec: see `Sandbox::passing`).
    pub fn new() -> io::Result<Channel> {
        let mut fds = [0; 2];
        // SAFETY: socketpair fills the two descriptors it returns.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if made != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just made and are owned here alone.
        unsafe {
            Ok(Channel {
                plait: OwnedFd::from_raw_fd(fds[0]),
                agent: OwnedFd::from_raw_fd(fds[1]),
            })
        }
    }
}

fn encode(cwd: &std::path::Path, argv: &[OsString], env: &[(OsString, OsString)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut field = |bytes: &[u8]| {
        out.extend_from_slice(bytes);
        out.push(0);
    };
    field(cwd.as_os_str().as_bytes());
    field(argv.len().to_string().as_bytes());
    for arg in argv {
        field(arg.as_bytes());
    }
    for (name, value) in env {
        let mut pair = name.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        field(&pair);
    }
    out
}

/// A request's working directory, arguments and environment.
type Decoded = (PathBuf, Vec<OsString>, Vec<(OsString, OsString)>);

fn decode(bytes: &[u8]) -> Option<Decoded> {
    let mut fields = bytes.split(|&b| b == 0);
    let cwd = PathBuf::from(OsString::from_vec(fields.next()?.to_vec()));
    let argc: usize = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    let mut argv = Vec::with_capacity(argc);
    for _ in 0..argc {
        argv.push(OsString::from_vec(fields.next()?.to_vec()));
    }
    let mut env = Vec::new();
    for pair in fields.filter(|f| !f.is_empty()) {
        let at = pair.iter().position(|&b| b == b'=')?;
        env.push((
            OsString::from_vec(pair[..at].to_vec()),
            OsString::from_vec(pair[at + 1..].to_vec()),
        ));
    }
    Some((cwd, argv, env))
}

/// Asks plait, over the inherited end `fd`, to run `argv` in the view from `cwd` with `env`
/// and this process's standard streams; returns its exit status (128 + the signal when a
/// signal ended it), or why plait could not run it.
pub fn request(
    fd: RawFd,
    cwd: &std::path::Path,
    argv: &[OsString],
    env: &[(OsString, OsString)],
) -> io::Result<Result<i32, String>> {
    let (mut ours, theirs) = UnixStream::pair()?;
    send_fds(fd, &[theirs.as_raw_fd(), 0, 1, 2])?;
    drop(theirs);
    let bytes = encode(cwd, argv, env);
    ours.write_all(&(bytes.len() as u64).to_le_bytes())?;
    ours.write_all(&bytes)?;
    let mut answer = String::new();
    ours.read_to_string(&mut answer)?;
    Ok(match answer.trim().parse::<i32>() {
        Ok(code) => Ok(code),
        Err(_) if answer.is_empty() => Err("plait ended before the command did".to_string()),
        Err(_) => Err(answer.trim().to_string()),
    })
}

fn send_fds(socket: RawFd, fds: &[RawFd]) -> io::Result<()> {
    let payload = [b'r'];
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let bytes = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE is a size computation.
    let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: the message points at live buffers of the sizes it states; the control
    // buffer has room for one header and `fds`.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(io::Error::other("no room for the descriptors"));
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(bytes) as _;
        std::ptr::copy_nonoverlapping(
            fds.as_ptr().cast::<u8>(),
            libc::CMSG_DATA(cmsg),
            bytes as usize,
        );
        if libc::sendmsg(socket, &msg, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One message's descriptors (close-on-exec), or `None` at the end of the channel.
fn recv_fds(socket: RawFd) -> io::Result<Option<Vec<OwnedFd>>> {
    let mut payload = [0u8; 16];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    // SAFETY: as in `send_fds`, for at most eight descriptors.
    unsafe {
        let space = libc::CMSG_SPACE((8 * std::mem::size_of::<RawFd>()) as u32) as usize;
        let mut control = vec![0u8; space];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let n = libc::recvmsg(
            socket,
            &mut msg,
            libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
        );
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(None);
        }
        let mut fds = Vec::new();
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        Ok(Some(fds))
    }
}

/// Serves the requests that arrive on plait's end `socket` until every agent end is closed
/// (or the returned task is aborted): each runs `run`, which answers with an exit status or
/// why the command could not start, while its requester is still there.
pub fn serve<F, Fut>(socket: OwnedFd, run: F) -> io::Result<tokio::task::JoinHandle<()>>
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<i32, String>> + Send + 'static,
{
    // SAFETY: the `AsyncFd` owns the descriptor, which stays open and the same while it
    // lives.
    let ready = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(socket, tokio::io::Interest::READABLE)?
    };
    let run = std::sync::Arc::new(run);
    Ok(tokio::spawn(async move {
        loop {
            let Ok(mut guard) = ready.readable().await else {
                return;
            };
            let received = match guard.try_io(|inner| recv_fds(inner.get_ref().as_raw_fd())) {
                Ok(Ok(Some(fds))) => fds,
                Ok(Ok(None)) | Ok(Err(_)) => return,
                Err(_would_block) => continue,
            };
            let run = run.clone();
            tokio::spawn(async move {
                let _ = answer(received, &*run).await;
            });
        }
    }))
}

async fn answer<F, Fut>(mut fds: Vec<OwnedFd>, run: &F) -> io::Result<()>
where
    F: Fn(Request) -> Fut,
    Fut: std::future::Future<Output = Result<i32, String>>,
{
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    if fds.len() != 4 {
        return Ok(());
    }
    let stdio = fds.split_off(1);
    let reply = std::os::unix::net::UnixStream::from(fds.remove(0));
    reply.set_nonblocking(true)?;
    let mut reply = tokio::net::UnixStream::from_std(reply)?;
    let mut len = [0u8; 8];
    reply.read_exact(&mut len).await?;
    let len = u64::from_le_bytes(len);
    if len > 16 << 20 {
        reply.write_all(b"a request too large").await?;
        return Ok(());
    }
    let mut bytes = vec![0u8; len as usize];
    reply.read_exact(&mut bytes).await?;
    let Some((cwd, argv, env)) = decode(&bytes) else {
        reply.write_all(b"a request plait cannot read").await?;
        return Ok(());
    };
    let request = Request {
        cwd,
        argv,
        env,
        stdio,
    };
    // The requester going away (killed, timed out) stops the command.
    let mut gone = [0u8; 1];
    let outcome = tokio::select! {
        outcome = run(request) => outcome,
        _ = reply.read(&mut gone) => return Ok(()),
    };
    let text = match outcome {
        Ok(code) => code.to_string(),
        Err(why) => why,
    };
    reply.write_all(text.as_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_as_written() {
        let argv = vec![OsString::from("npm"), OsString::from("te st")];
        let env = vec![(OsString::from("A"), OsString::from("b=c"))];
        let bytes = encode(std::path::Path::new("/w/t"), &argv, &env);
        let (cwd, a, e) = decode(&bytes).unwrap();
        assert_eq!(cwd, PathBuf::from("/w/t"));
        assert_eq!(a, argv);
        assert_eq!(e, env);
    }
}
