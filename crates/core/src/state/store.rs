//! The file store of a repository's runs (`<git-common-dir>/plait`): run ids, `state.json`
//! written atomically (temp file, fsync, rename) so a reader in another terminal, or a
//! crash, never sees half a file, and the repository lock that keeps two runs from working
//! on one repository at once.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::dirs::RunDir;
use super::now_ms;
use super::run::RunState;

/// 2024-01-01T00:00:00Z, the zero of run ids.
const RUN_ID_EPOCH: u64 = 1_704_067_200;

/// Why a run's state cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// No run has this id.
    #[error("no run `{run}` in this repository; `plait runs` lists them")]
    UnknownRun {
        /// The id asked for.
        run: String,
    },
    /// More than one run starts with this prefix.
    #[error("run id `{run}` is ambiguous: it matches {matches}")]
    Ambiguous {
        /// The prefix asked for.
        run: String,
        /// The runs it matches, joined by commas.
        matches: String,
    },
    /// No run was ever started here.
    #[error("this repository has no plait runs yet")]
    NoRuns,
    /// Another plait process holds the repository's lock.
    #[error("run {run} is in progress (plait process {pid}); wait for it to finish")]
    Locked {
        /// The run it works on.
        run: String,
        /// Its process id.
        pid: u32,
    },
    /// A file of the store could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A file of the store is not what plait wrote.
    #[error("{path} is damaged: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The directories of one repository's plait state.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// The store under `plait_dir` (`<git-common-dir>/plait`).
    pub fn new(plait_dir: PathBuf) -> Store {
        Store { root: plait_dir }
    }

    /// The directory that holds every run's directory.
    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }

    /// Where the checkouts of bases that tasks' views lie over are kept between runs.
    pub fn views_dir(&self) -> PathBuf {
        self.root.join("views")
    }

    /// Where the base layers are kept between runs: per commit its tracked files, what
    /// `[setup]` made, and plait's own build of it.
    pub fn envs_dir(&self) -> PathBuf {
        self.root.join("envs")
    }

    /// Where the checks' seed is kept between runs: plait's own build of a base.
    pub fn seed_dir(&self) -> PathBuf {
        self.root.join("seed")
    }

    /// Run `run`'s directory.
    pub fn run_dir(&self, run: &str) -> PathBuf {
        self.runs_dir().join(run)
    }

    /// The paths under run `run`'s directory.
    pub fn run(&self, run: &str) -> RunDir {
        RunDir(self.run_dir(run))
    }

    /// The directory of task `task` of run `run`.
    pub fn task_dir(&self, run: &str, task: &str) -> PathBuf {
        self.run(run).task(task).0
    }

    fn state_path(&self, run: &str) -> PathBuf {
        self.run(run).state()
    }

    /// Makes a new, short, sortable run id and its directory: the seconds since 2024-01-01
    /// UTC in six base-36 digits (sortable until 2093).
    pub fn create_run(&self) -> Result<String, StateError> {
        let runs = self.runs_dir();
        fs::create_dir_all(&runs).map_err(io_err(&runs))?;
        let mut secs = (now_ms() / 1000).saturating_sub(RUN_ID_EPOCH);
        loop {
            let id = base36(secs);
            let dir = self.run_dir(&id);
            match fs::create_dir(&dir) {
                Ok(()) => return Ok(id),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => secs += 1,
                Err(e) => return Err(io_err(&dir)(e)),
            }
        }
    }

    /// Writes the run's state atomically.
    pub fn save(&self, state: &RunState) -> Result<(), StateError> {
        let bytes = serde_json::to_vec_pretty(state).map_err(|e| StateError::Corrupt {
            path: self.state_path(&state.id),
            message: e.to_string(),
        })?;
        write_atomic(&self.state_path(&state.id), &bytes)
    }

    /// Reads a run's state.
    pub fn load(&self, run: &str) -> Result<RunState, StateError> {
        let path = self.state_path(run);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StateError::UnknownRun {
                    run: run.to_string(),
                })
            }
            Err(e) => return Err(io_err(&path)(e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| StateError::Corrupt {
            path,
            message: e.to_string(),
        })
    }

    /// Every run id with a state file, oldest first.
    pub fn list(&self) -> Result<Vec<String>, StateError> {
        let runs = self.runs_dir();
        let entries = match fs::read_dir(&runs) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&runs)(e)),
        };
        let mut ids: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("state.json").is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// Finds a run by id or unique prefix; `None` means the newest.
    pub fn find(&self, run: Option<&str>) -> Result<String, StateError> {
        let ids = self.list()?;
        let Some(want) = run else {
            return ids.last().cloned().ok_or(StateError::NoRuns);
        };
        if ids.iter().any(|id| id == want) {
            return Ok(want.to_string());
        }
        let matches: Vec<&String> = ids.iter().filter(|id| id.starts_with(want)).collect();
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(StateError::UnknownRun {
                run: want.to_string(),
            }),
            many => Err(StateError::Ambiguous {
                run: want.to_string(),
                matches: many
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Takes the repository's run lock; a lock left by a dead process is taken over.
    pub fn lock(&self) -> Result<RunLock, StateError> {
        let run = "-";
        fs::create_dir_all(&self.root).map_err(io_err(&self.root))?;
        let path = self.root.join("lock");
        for _ in 0..3 {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => {
                    let body = format!("{} {}\n", std::process::id(), run);
                    file.write_all(body.as_bytes()).map_err(io_err(&path))?;
                    return Ok(RunLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if let Some((pid, holder)) = self.lock_holder() {
                        return Err(StateError::Locked { run: holder, pid });
                    }
                    // The holder is gone: the lock is stale.
                    match fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(io_err(&path)(e)),
                    }
                }
                Err(e) => return Err(io_err(&path)(e)),
            }
        }
        Err(StateError::Locked {
            run: "another run".to_string(),
            pid: 0,
        })
    }

    /// Whether run `run`'s plait process is running now (it holds the lock).
    pub fn is_running(&self, run: &str) -> bool {
        self.lock_holder().is_some_and(|(_, holder)| holder == run)
    }

    /// The live process holding the lock and its run, if any.
    pub fn lock_holder(&self) -> Option<(u32, String)> {
        let text = fs::read_to_string(self.root.join("lock")).ok()?;
        let (pid, run) = text.trim().split_once(' ')?;
        let pid: u32 = pid.parse().ok()?;
        process_alive(pid).then(|| (pid, run.to_string()))
    }
}

/// The repository lock; released when dropped.
#[derive(Debug)]
pub struct RunLock {
    path: PathBuf,
}

impl RunLock {
    /// Records which run holds the lock.
    pub fn set_run(&self, run: &str) -> Result<(), StateError> {
        write_atomic(
            &self.path,
            format!("{} {}\n", std::process::id(), run).as_bytes(),
        )
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

fn process_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid as i32, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Writes `bytes` to `path` through a synced temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_err(dir))?;
    tmp.write_all(bytes).map_err(io_err(path))?;
    tmp.as_file().sync_all().map_err(io_err(path))?;
    tmp.persist(path).map_err(|e| io_err(path)(e.error))?;
    Ok(())
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = vec![b'0'; 6];
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(n % 36) as usize];
        n /= 36;
    }
    String::from_utf8(out).unwrap_or_default()
}
