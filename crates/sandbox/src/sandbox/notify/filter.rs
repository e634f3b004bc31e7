//! What the observer's seccomp filter stops: the calls that may write, as a table (their
//! numbers, where their paths and flags are, what their names must be for the call to reach
//! the wall), and the classic BPF program built from it by a small assembler.

use std::os::fd::{FromRawFd as _, OwnedFd, RawFd};
use std::sync::OnceLock;

/// The `AUDIT_ARCH_*` value (<linux/audit.h>) of the calls the filter's numbers are for.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xc000_003e; // EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xc000_00b7; // EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE

/// Open flags that ask to write: to write, to create, to truncate.
const WRITE_FLAGS: i32 = libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC;

/// What a call's path must be for the call to get as far as the wall; otherwise it fails
/// before (`ENOENT`, `EEXIST`) and the wall refused nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Needs {
    /// The name exists (removed, renamed, truncated, opened without `O_CREAT`).
    Existing,
    /// The name does not exist yet, its directory does (made, `O_EXCL`).
    Missing,
    /// Either, as long as its directory exists (written or replaced).
    Either,
}

/// A path argument of a watched call: where the path is, and its directory fd if it has one.
#[derive(Debug, Clone, Copy)]
pub(super) struct PathArg {
    pub(super) dirfd: Option<usize>,
    pub(super) path: usize,
    /// What the name must be; for an open, from its flags instead.
    pub(super) needs: Needs,
}

const fn plain(path: usize, needs: Needs) -> PathArg {
    PathArg {
        dirfd: None,
        path,
        needs,
    }
}

const fn at(dirfd: usize, path: usize, needs: Needs) -> PathArg {
    PathArg {
        dirfd: Some(dirfd),
        path,
        needs,
    }
}

/// Where a watched call keeps the flags that say whether it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flags {
    /// Not an open: the call always writes.
    None,
    /// In argument N, which the filter tests.
    Arg(usize),
    /// In the `struct open_how` that argument N points to (`openat2`): read by the supervisor.
    OpenHow(usize),
}

/// A call the filter stops for the supervisor.
#[derive(Debug)]
pub(super) struct Watched {
    pub(super) nr: libc::c_long,
    pub(super) flags: Flags,
    pub(super) paths: &'static [PathArg],
}

const fn watch(nr: libc::c_long, flags: Flags, paths: &'static [PathArg]) -> Watched {
    Watched { nr, flags, paths }
}

use Needs::{Either, Existing, Missing};

/// The watched calls; the ones aarch64 lacks (it has only the `*at` forms) are left out there.
pub(super) const WATCHED: &[Watched] = &[
    #[cfg(target_arch = "x86_64")]
    watch(libc::SYS_open, Flags::Arg(1), &[plain(0, Either)]),
    #[cfg(target_arch = "x86_64")]
    watch(libc::SYS_creat, Flags::None, &[plain(0, Either)]),
    watch(libc::SYS_openat, Flags::Arg(2), &[at(0, 1, Either)]),
    watch(libc::SYS_openat2, Flags::OpenHow(2), &[at(0, 1, Either)]),
    #[cfg(target_arch = "x86_64")]
    watch(libc::SYS_mkdir, Flags::None, &[plain(0, Missing)]),
    watch(libc::SYS_mkdirat, Flags::None, &[at(0, 1, Missing)]),
    #[cfg(target_arch = "x86_64")]
    watch(libc::SYS_mknod, Flags::None, &[plain(0, Missing)]),
    watch(libc::SYS_mknodat, Flags::None, &[at(0, 1, Missing)]),
    #[cfg(target_arch = "x86_64")]
    watch(libc::SYS_unlink, Flags::None, &[plain(0, Existing)]),
    watch(libc::SYS_unlinkat, Flags::None, &[at(0, 1, Existing)]),
    #[cfg(target_arch = "x86_64")]
    watch(libc::SYS_rmdir, Flags::None, &[plain(0, Existing)]),
    // A rename writes both directories; a link out of a directory the process may not write
    // is refused too (Landlock's `REFER`), so both names are looked at.
    #[cfg(target_arch = "x86_64")]
    watch(
        libc::SYS_rename,
        Flags::None,
        &[plain(0, Existing), plain(1, Either)],
    ),
    #[cfg(target_arch = "x86_64")]
    watch(
        libc::SYS_renameat,
        Flags::None,
        &[at(0, 1, Existing), at(2, 3, Either)],
    ),
    watch(
        libc::SYS_renameat2,
        Flags::None,
        &[at(0, 1, Existing), at(2, 3, Either)],
    ),
    #[cfg(target_arch = "x86_64")]
    watch(
        libc::SYS_link,
        Flags::None,
        &[plain(0, Existing), plain(1, Missing)],
    ),
    watch(
        libc::SYS_linkat,
        Flags::None,
        &[at(0, 1, Existing), at(2, 3, Missing)],
    ),
    // The target of a symbolic link is any string; only the link's own name is written.
    #[cfg(target_arch = "x86_64")]
    watch(libc::SYS_symlink, Flags::None, &[plain(1, Missing)]),
    watch(libc::SYS_symlinkat, Flags::None, &[at(1, 2, Missing)]),
    watch(libc::SYS_truncate, Flags::None, &[plain(0, Existing)]),
];

/// What an open with `flags` needs of its path to reach the wall; `None` if it does not write.
pub(super) fn open_needs(flags: i32) -> Option<Needs> {
    let writes = libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC;
    if flags & WRITE_FLAGS == 0 {
        None
    } else if flags & libc::O_CREAT == 0 {
        // `O_TMPFILE` too: its directory must exist.
        Some(Existing)
    } else if flags & writes == 0 || flags & libc::O_EXCL != 0 {
        // Creating only: an existing file opens for reading, or fails with `EEXIST`.
        Some(Missing)
    } else {
        Some(Either)
    }
}

/// Offsets in `struct seccomp_data`.
const NR_AT: u32 = 0;
const ARCH_AT: u32 = 4;

/// The offset in `struct seccomp_data` of the low 32 bits of argument `i` (flags are an `int`).
const fn arg_low(i: usize) -> u32 {
    let at = 16 + 8 * i as u32;
    if cfg!(target_endian = "little") {
        at
    } else {
        at + 4
    }
}

/// A place in the filter that jumps go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Allow,
    Notify,
    /// Where the flags in argument N are tested.
    FlagsIn(usize),
}

/// One step of the filter, before it is assembled.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// A = the 32-bit word of `seccomp_data` at this offset.
    Load(u32),
    /// Jump to the label if A == k.
    IfEqual(u32, Label),
    /// Jump to the label if A != k.
    UnlessEqual(u32, Label),
    /// Jump to the label if A & k != 0.
    IfAnyBit(u32, Label),
    /// End with this action.
    Return(u32),
    /// The place of a label (no instruction).
    Here(Label),
}

/// The filter as steps: another architecture's calls are allowed; each watched call either
/// notifies, or jumps to the test of its flags; `connect` notifies too when `connect` says
/// so; everything else is allowed.
fn program(connect: bool) -> Vec<Op> {
    let mut ops = vec![
        Op::Load(ARCH_AT),
        Op::UnlessEqual(ARCH, Label::Allow),
        Op::Load(NR_AT),
    ];
    if connect {
        ops.push(Op::IfEqual(libc::SYS_connect as u32, Label::Notify));
    }
    let mut flag_args = Vec::new();
    for call in WATCHED {
        let to = match call.flags {
            Flags::Arg(i) => {
                if !flag_args.contains(&i) {
                    flag_args.push(i);
                }
                Label::FlagsIn(i)
            }
            Flags::None | Flags::OpenHow(_) => Label::Notify,
        };
        ops.push(Op::IfEqual(call.nr as u32, to));
    }
    ops.push(Op::Return(libc::SECCOMP_RET_ALLOW));
    for i in flag_args {
        ops.extend([
            Op::Here(Label::FlagsIn(i)),
            Op::Load(arg_low(i)),
            Op::IfAnyBit(WRITE_FLAGS as u32, Label::Notify),
            Op::Return(libc::SECCOMP_RET_ALLOW),
        ]);
    }
    ops.extend([
        Op::Here(Label::Allow),
        Op::Return(libc::SECCOMP_RET_ALLOW),
        Op::Here(Label::Notify),
        Op::Return(libc::SECCOMP_RET_USER_NOTIF),
    ]);
    ops
}

/// Classic BPF for `ops`: every jump goes forward, at most 255 instructions.
fn assemble(ops: &[Op]) -> Vec<libc::sock_filter> {
    let mut places = Vec::new();
    let mut count = 0usize;
    for op in ops {
        match op {
            Op::Here(label) => places.push((*label, count)),
            _ => count += 1,
        }
    }
    let offset = |label: Label, pc: usize| -> u8 {
        let (_, target) = places
            .iter()
            .find(|(l, _)| *l == label)
            .expect("every label of the filter is placed");
        let ahead = target
            .checked_sub(pc + 1)
            .expect("the filter jumps forward only");
        u8::try_from(ahead).expect("the filter's jumps are short")
    };
    let jump = libc::BPF_JMP | libc::BPF_K;
    let mut code = Vec::with_capacity(count);
    for op in ops {
        let pc = code.len();
        let (op, jt, jf, k) = match *op {
            Op::Load(at) => (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, at),
            Op::IfEqual(k, to) => (jump | libc::BPF_JEQ, offset(to, pc), 0, k),
            Op::UnlessEqual(k, to) => (jump | libc::BPF_JEQ, 0, offset(to, pc), k),
            Op::IfAnyBit(k, to) => (jump | libc::BPF_JSET, offset(to, pc), 0, k),
            Op::Return(action) => (libc::BPF_RET | libc::BPF_K, 0, 0, action),
            Op::Here(_) => continue,
        };
        code.push(libc::sock_filter {
            code: op as u16,
            jt,
            jf,
            k,
        });
    }
    code
}

/// The assembled filter, built once; with `connect`, it stops connections too.
pub(super) fn filter(connect: bool) -> &'static [libc::sock_filter] {
    static FILTER: OnceLock<Vec<libc::sock_filter>> = OnceLock::new();
    static CONNECT: OnceLock<Vec<libc::sock_filter>> = OnceLock::new();
    let cell = if connect { &CONNECT } else { &FILTER };
    cell.get_or_init(|| assemble(&program(connect)))
}

/// Installs `code` on the calling thread (which has no new privileges) and returns its
/// listener.
pub(super) fn install(code: &[libc::sock_filter]) -> std::io::Result<OwnedFd> {
    let program = libc::sock_fprog {
        len: u16::try_from(code.len()).map_err(std::io::Error::other)?,
        filter: code.as_ptr().cast_mut(),
    };
    // SAFETY: `program` points at `code`, which outlives the call; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &program as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just made this fd (close-on-exec) and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a classic BPF program the way the kernel does, for the instructions the filter
    /// uses.
    fn run(code: &[libc::sock_filter], data: &libc::seccomp_data) -> u32 {
        // SAFETY: `seccomp_data` is plain data; read as 32-bit words as the kernel does.
        let words: &[u32] = unsafe {
            std::slice::from_raw_parts(
                (data as *const libc::seccomp_data).cast(),
                size_of::<libc::seccomp_data>() / 4,
            )
        };
        let (mut pc, mut a) = (0usize, 0u32);
        loop {
            let op = code[pc];
            let taken = |yes: bool| pc + 1 + usize::from(if yes { op.jt } else { op.jf });
            pc = match u32::from(op.code) {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    a = words[op.k as usize / 4];
                    pc + 1
                }
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => taken(a == op.k),
                c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => taken(a & op.k != 0),
                c if c == libc::BPF_RET | libc::BPF_K => return op.k,
                c => panic!("unexpected instruction {c:#x}"),
            };
        }
    }

    fn call(arch: u32, nr: libc::c_long, args: [u64; 6]) -> libc::seccomp_data {
        libc::seccomp_data {
            nr: nr as i32,
            arch,
            instruction_pointer: 0,
            args,
        }
    }

    #[test]
    fn the_filter_stops_writes_only() {
        let code = filter(false);
        let at = |nr, flags: i32| call(ARCH, nr, [0, 0, flags as u64, 0, 0, 0]);
        let connect = at(libc::SYS_connect, 0);
        assert_eq!(run(filter(true), &connect), libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(run(code, &connect), libc::SECCOMP_RET_ALLOW);
        assert!(code.len() < 64, "{} instructions", code.len());
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        for (data, expected, what) in [
            (at(libc::SYS_openat, libc::O_RDONLY), allow, "reading"),
            (
                at(libc::SYS_openat, libc::O_RDONLY | libc::O_CLOEXEC),
                allow,
                "reading",
            ),
            (at(libc::SYS_openat, libc::O_WRONLY), notify, "writing"),
            (at(libc::SYS_openat, libc::O_RDWR), notify, "read-write"),
            (
                at(libc::SYS_openat, libc::O_CREAT | libc::O_EXCL),
                notify,
                "creating",
            ),
            (at(libc::SYS_openat, libc::O_TRUNC), notify, "truncating"),
            (
                at(libc::SYS_openat2, 0),
                notify,
                "openat2 keeps its flags in memory",
            ),
            (at(libc::SYS_mkdirat, 0), notify, "mkdirat"),
            (at(libc::SYS_unlinkat, 0), notify, "unlinkat"),
            (at(libc::SYS_renameat2, 0), notify, "renameat2"),
            (at(libc::SYS_symlinkat, 0), notify, "symlinkat"),
            (at(libc::SYS_truncate, 0), notify, "truncate"),
            (at(libc::SYS_read, libc::O_WRONLY), allow, "read"),
            (
                at(libc::SYS_fchmodat, 0),
                allow,
                "chmod: Landlock allows it",
            ),
            (
                call(0x4000_0003, libc::SYS_openat, [0, 0, 1, 0, 0, 0]),
                allow,
                "another architecture",
            ),
        ] {
            assert_eq!(run(code, &data), expected, "{what}");
        }
        // The high half of the flags argument is not the flags.
        let high = call(ARCH, libc::SYS_openat, [0, 0, 1 << 32, 0, 0, 0]);
        assert_eq!(run(code, &high), allow);
        #[cfg(target_arch = "x86_64")]
        {
            let open = |flags: u64| call(ARCH, libc::SYS_open, [0, flags, 0, 0, 0, 0]);
            assert_eq!(run(code, &open(0)), allow);
            assert_eq!(run(code, &open(libc::O_WRONLY as u64)), notify);
            assert_eq!(run(code, &at(libc::SYS_mkdir, 0)), notify);
            assert_eq!(run(code, &at(libc::SYS_creat, 0)), notify);
        }
    }

    #[test]
    fn what_an_open_needs_to_reach_the_wall() {
        assert_eq!(open_needs(libc::O_RDONLY), None);
        assert_eq!(open_needs(libc::O_WRONLY), Some(Existing));
        assert_eq!(open_needs(libc::O_TMPFILE | libc::O_WRONLY), Some(Existing));
        assert_eq!(open_needs(libc::O_CREAT), Some(Missing));
        assert_eq!(
            open_needs(libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY),
            Some(Missing)
        );
        assert_eq!(
            open_needs(libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC),
            Some(Either)
        );
    }
}
