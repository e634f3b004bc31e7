//! What one command of a sandbox may take (`[sandbox] limits`), and sizes in the plan's
//! words: kept apart from the rest of the settings so the view that applies them in the
//! child needs nothing else of them.

/// How much a sandbox's processes may take: `[sandbox] limits = { pids = 512, memory =
/// "4G" }`. Each `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Processes and threads one command may have at once: its PID namespace's `pid_max`
    /// (Linux 6.14 and newer; the namespace's numbers start at 1 and go on from 300 once
    /// they wrap, so that is this many and up to 300 more), and `RLIMIT_NPROC`, which the
    /// kernel counts per user and user namespace and does not hold against root.
    pub pids: Option<u32>,
    /// Bytes of memory each process may allocate (`RLIMIT_DATA`: its heap and private
    /// writable mappings; a process's, not the command's together).
    pub memory: Option<u64>,
}

impl Limits {
    /// The default: 4096 processes, memory unlimited (`RLIMIT_DATA` counts what a
    /// program only reserves, and a sanitizer's shadow reserves terabytes).
    pub fn standard() -> Limits {
        Limits {
            pids: Some(4096),
            memory: None,
        }
    }

    /// How the limits hold for a process started in a PID namespace of its own
    /// (`pid_ns`) on this system, in a phrase for `plait status` and `plait doctor`.
    pub fn describe(&self, pid_ns: bool) -> String {
        let mut parts = Vec::new();
        if let Some(pids) = self.pids {
            // SAFETY: geteuid has no preconditions.
            let root = unsafe { libc::geteuid() } == 0;
            let how = match (pid_ns, root) {
                (true, true) => "the PID namespace's pid_max",
                (true, false) => "the PID namespace's pid_max and RLIMIT_NPROC",
                (false, true) => "not held: RLIMIT_NPROC binds no root",
                (false, false) => "RLIMIT_NPROC, per user",
            };
            parts.push(format!("{pids} processes ({how})"));
        }
        if let Some(memory) = self.memory {
            parts.push(format!("{} per process (RLIMIT_DATA)", bytes(memory)));
        }
        if parts.is_empty() {
            "no limits".to_string()
        } else {
            format!("limits: {}", parts.join(", "))
        }
    }
}

/// `bytes` in the plan's words: `4G`, `512M`, or a number of bytes.
pub fn bytes(bytes: u64) -> String {
    for (unit, size) in [
        ("T", 1u64 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

/// A size as the plan writes it (`"4G"`, `"512M"`, `"64K"`, `"1T"`, or bytes), in bytes.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let shift = match unit
        .trim()
        .trim_end_matches(['b', 'B'])
        .to_ascii_uppercase()
        .as_str()
    {
        "" => 0,
        "K" | "KI" => 10,
        "M" | "MI" => 20,
        "G" | "GI" => 30,
        "T" | "TI" => 40,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}
