//! Runs spread over many machines in the tests: a repository with a plan of one task a
//! file, its coordinator (`plait run --store --remote`) and workers (`plait worker`), each
//! a child process in a directory of its own (its own clone), as if on other machines, with
//! a bare repository in the scratch directory as the remote.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{git_in, TestRepo};

/// A repository of `n` files `pkg/mNN.txt` and a plan with a task for each, whose agent
/// is `exec`.
pub fn project(n: usize, exec: &str) -> (TestRepo, PathBuf) {
    project_with(n, exec, "")
}

/// [`project`], the plan's tables `extra` after its defaults.
pub fn project_with(n: usize, exec: &str, extra: &str) -> (TestRepo, PathBuf) {
    let files: Vec<(String, String)> = (0..n)
        .map(|k| (format!("pkg/m{k:02}.txt"), format!("module {k}\n")))
        .collect();
    let repo = TestRepo::with_owned_files(&files);
    let mut toml =
        format!("goal = \"spread\"\n[defaults]\nagent = {{ exec = '''{exec}''' }}\n{extra}\n");
    for k in 0..n {
        let _ = writeln!(
            toml,
            "[[task]]\nid = \"m{k:02}\"\nprompt = \"Edit m{k:02}\"\nowns = [\"/pkg/m{k:02}.txt\"]"
        );
    }
    let plan = repo.plan(&toml);
    git_in(&repo.scratch, &["init", "-q", "--bare", "remote.git"]);
    (repo, plan)
}

/// A child process, killed if the test ends (or fails) with it still running.
pub struct Proc(pub Child);

impl std::ops::Deref for Proc {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Proc {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A plait process in `dir`, its output going to files in `logs` named `name`.
pub fn spawn(dir: &Path, logs: &Path, name: &str, args: &[&str]) -> Proc {
    spawn_with(dir, logs, name, args, &[])
}

pub fn spawn_with(
    dir: &Path,
    logs: &Path,
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Proc {
    let out = fs::File::create(logs.join(format!("{name}.out"))).unwrap();
    let err = fs::File::create(logs.join(format!("{name}.err"))).unwrap();
    Command::new(env!("CARGO_BIN_EXE_plait"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map(Proc)
        .expect("start plait")
}

pub fn log(logs: &Path, name: &str, which: &str) -> String {
    fs::read_to_string(logs.join(format!("{name}.{which}"))).unwrap_or_default()
}

/// The coordinator of `plan` (`-j 0`, through the scratch dir's bare remote).
pub fn coordinator(repo: &TestRepo, plan: &str, url: &str) -> Proc {
    spawn(
        &repo.path,
        &repo.scratch,
        "coordinator",
        &[
            "run",
            plan,
            "--store",
            url,
            "--remote",
            "../scratch/remote.git",
            "-j",
            "0",
        ],
    )
}

/// A worker in its own directory (its own clone), taking `jobs` tasks at a time.
pub fn worker(repo: &TestRepo, url: &str, name: &str, jobs: &str, lease: &str) -> Proc {
    worker_with(repo, url, name, jobs, lease, &[])
}

pub fn worker_with(
    repo: &TestRepo,
    url: &str,
    name: &str,
    jobs: &str,
    lease: &str,
    env: &[(&str, &str)],
) -> Proc {
    let dir = repo.scratch.join(name);
    fs::create_dir_all(&dir).unwrap();
    spawn_with(
        &dir,
        &repo.scratch,
        name,
        &[
            "worker", "--store", url, "--dir", ".", "-j", jobs, "--lease", lease,
        ],
        env,
    )
}

/// Waits at most `limit` for `child` to exit.
pub fn wait_for(child: &mut Proc, what: &str, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops a worker as Ctrl-C would, and waits for it; how many tasks it recorded.
pub fn stop(mut child: Proc, repo: &TestRepo, name: &str) -> usize {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = wait_for(&mut child, name, Duration::from_secs(30));
    let err = log(&repo.scratch, name, "err");
    assert!(status.success(), "{name}: {err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("worker: "))
        .unwrap_or_else(|| panic!("{name} printed no summary: {err}"));
    line["worker: ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}
