//! The probes of `plait doctor` that try to turn plait itself, as a hostile task would: a
//! process behind a task's walls swaps the file plait's editor tool edits with a link to a
//! file outside; a check plants links in its layer and its git directory before plait
//! writes the layer's next round; a task sends paths that climb out of the provider's API
//! through its gateway lease. The walls allow each of these moves (they are the task's own
//! files and its own port); what must hold is plait's code. Each is judged from outside:
//! the outside file's bytes, what the outside directory holds, what the provider heard.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{judge, Probe, Prober, SECRET};
use plait_agents::agent::model::tools::{ToolOutcome, Workspace};
use plait_core::globs::Globs;
use plait_sandbox::sandbox::{Sandbox, SandboxSettings};
use plait_sandbox::shell::ShellOutcome;

mod traversal;

/// The owned file the editor probe edits, and the link it is swapped with.
const OWNED: &str = "owned.txt";
const SWAP: &str = ".owned.txt.swap";
/// How many editor calls plait makes while the probe swaps.
const CALLS: usize = 200;

/// The probes of this module, in order; `own` is the place the main probe may write.
pub(super) async fn probes(
    plait: &Path,
    settings: &SandboxSettings,
    place: &Path,
    own: &Path,
) -> Result<Vec<Probe>, String> {
    let editor = editor_probe(plait, settings, place, own).await?;
    let layer = layer_probe(plait, settings, place).await?;
    let gateway = traversal::gateway_probe(plait, settings, place, own).await?;
    Ok(vec![editor, layer, gateway])
}

/// The probe's side of this module's kinds (`None`: not one of them).
pub(super) fn probe(kind: &str, target: &str) -> Option<Result<String, String>> {
    match kind {
        "flip" => Some(flip(Path::new(target))),
        "plant" => Some(plant(target)),
        "traverse" => Some(traversal::traverse(target)),
        _ => None,
    }
}

fn made(path: &Path) -> impl FnOnce(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// What a directory holds, each path with its bytes (a link's: its target; `None`: a
/// directory): a directory of plait's own the probe cannot write, so read by path.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut seen = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(at) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let bytes = if meta.is_dir() {
                todo.push(path.clone());
                None
            } else if meta.file_type().is_symlink() {
                std::fs::read_link(&path)
                    .ok()
                    .map(|t| t.into_os_string().into_encoded_bytes())
            } else {
                std::fs::read(&path).ok()
            };
            seen.insert(path, bytes);
        }
    }
    seen
}

/// How the outside directory changed between two snapshots, in words (`None`: it did not).
fn outside_changed(
    before: &BTreeMap<PathBuf, Option<Vec<u8>>>,
    after: &BTreeMap<PathBuf, Option<Vec<u8>>>,
) -> Option<String> {
    let changed: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .map(|path| path.display().to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    (!changed.is_empty()).then(|| format!("changed outside: {}", changed.join(", ")))
}

/// What the editor calls met, judged from outside.
#[derive(Debug, Default)]
struct EditorSeen {
    /// Calls whose answer held the outside file's secret.
    leaked: usize,
    /// Calls that met the link the probe swapped in.
    links: usize,
}

/// The verdict on the editor race: refused when the outside was left as it was and no
/// answer held its secret; not tried when no call met a swapped link.
fn editor_verdict(seen: &EditorSeen, outside: Option<String>) -> (bool, String) {
    if let Some(changed) = outside {
        return (false, format!("it went through ({changed})"));
    }
    if seen.leaked > 0 {
        return (
            false,
            format!(
                "it went through ({} answers held the outside file)",
                seen.leaked
            ),
        );
    }
    if seen.links == 0 {
        return (
            false,
            format!("not tried: no call of {CALLS} met the probe's swapped link"),
        );
    }
    (true, String::new())
}

/// A leftover process behind the walls swaps the owned file of a worktree with a link to a
/// file outside while plait's editor tool makes 200 calls there.
async fn editor_probe(
    plait: &Path,
    settings: &SandboxSettings,
    place: &Path,
    own: &Path,
) -> Result<Probe, String> {
    const WHAT: &str = "a swapped link against plait's editor tool";
    let worktree = own.join("editor");
    let src = worktree.join("src");
    let outside = place.join("outside-editor");
    let secret = outside.join("id_rsa");
    for dir in [&src, &outside] {
        std::fs::create_dir_all(dir).map_err(made(dir))?;
    }
    std::fs::write(&secret, SECRET).map_err(made(&secret))?;
    std::fs::write(src.join(OWNED), "one\ntwo\n").map_err(made(&src))?;
    std::os::unix::fs::symlink(&secret, src.join(SWAP)).map_err(made(&src))?;
    let before = snapshot(&outside);
    let prober = Prober {
        plait,
        sandbox: Sandbox::new(settings, vec![own.to_path_buf()]),
        log: place.join("editor.log"),
        own: own.to_path_buf(),
        cancel: plait_core::cancel::Cancel::new().1,
    };
    let owns = Globs::new(&["/src/".to_string()]).map_err(|e| e.to_string())?;
    let workspace = Workspace::new(
        worktree.clone(),
        place.join("no-repo"),
        Arc::new(Vec::new()),
        owns,
    );
    let edits = tokio::task::spawn_blocking({
        let src = src.clone();
        move || edit_while_swapped(&workspace, &src)
    });
    let ((outcome, said), seen) =
        tokio::join!(prober.attempt("flip", src.display().to_string()), edits);
    let seen = seen.map_err(|e| format!("the editor calls failed: {e}"))?;
    let (refused, detail) = editor_verdict(&seen, outside_changed(&before, &snapshot(&outside)));
    Ok(verdict(
        judge(WHAT, &outcome, &said, refused),
        &outcome,
        detail,
    ))
}

/// Waits for the probe's first swap, makes the editor calls, then tells the probe to stop.
fn edit_while_swapped(workspace: &Workspace, src: &Path) -> EditorSeen {
    let began = Instant::now();
    while !std::fs::symlink_metadata(src.join(OWNED)).is_ok_and(|m| m.is_symlink())
        && std::fs::symlink_metadata(src.join(SWAP)).is_ok_and(|m| m.is_symlink())
        && began.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut seen = EditorSeen::default();
    for i in 0..CALLS {
        let out = editor_call(workspace, i);
        if out.content.contains(SECRET) {
            seen.leaked += 1;
        }
        if out.content.contains("symlink") {
            seen.links += 1;
        }
    }
    let _ = std::fs::write(src.join("stop"), "");
    seen
}

/// The `i`th of the editor calls: a create, a replacement, an insert, a view or a search.
fn editor_call(workspace: &Workspace, i: usize) -> ToolOutcome {
    let path = format!("src/{OWNED}");
    let input: Value = match i % 5 {
        0 => json!({"command": "create", "path": path, "file_text": format!("one\ntwo {i}\n")}),
        1 => json!({"command": "str_replace", "path": path, "old_str": "one", "new_str": "one"}),
        2 => {
            json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": format!("line {i}")})
        }
        3 => json!({"command": "view", "path": path}),
        _ => return workspace.run("search", &Ok(json!({"pattern": "."}))),
    };
    workspace.run(plait_llm::anthropic::EDITOR, &Ok(input))
}

/// The probe of the editor race: in `dir`, swaps the owned file with the link beside it
/// (`renameat2(RENAME_EXCHANGE)`) until `dir/stop` appears or 8 seconds pass, planting the
/// link again whenever plait's write replaced it.
fn flip(dir: &Path) -> Result<String, String> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt as _;
    let c = |s: &[u8]| CString::new(s).map_err(|_| format!("a NUL in {}", dir.display()));
    let (cdir, owned, swap) = (
        c(dir.as_os_str().as_bytes())?,
        c(OWNED.as_bytes())?,
        c(SWAP.as_bytes())?,
    );
    let target = std::fs::read_link(dir.join(SWAP)).map_err(made(dir))?;
    let target = c(target.as_os_str().as_bytes())?;
    let started = Instant::now();
    let mut swaps = 0u64;
    // SAFETY: plain system calls on C strings that outlive them; the fd is closed at the end.
    unsafe {
        let fd = libc::open(cdir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
        if fd < 0 {
            return Err(format!(
                "{}: {}",
                dir.display(),
                std::io::Error::last_os_error()
            ));
        }
        let is_file = |name: &CString| {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstatat(fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFREG
        };
        while !dir.join("stop").exists() && started.elapsed() < Duration::from_secs(8) {
            if is_file(&owned) && is_file(&swap) {
                // plait replaced the link with a file: plant it again.
                libc::unlinkat(fd, swap.as_ptr(), 0);
            }
            libc::symlinkat(target.as_ptr(), fd, swap.as_ptr());
            let exchanged =
                libc::renameat2(fd, owned.as_ptr(), fd, swap.as_ptr(), libc::RENAME_EXCHANGE);
            if exchanged == 0 {
                swaps += 1;
            }
        }
        libc::close(fd);
    }
    Ok(format!("{swaps} swaps"))
}

/// A check plants links in its layer and its git directory; plait then writes the layer's
/// next round over them (a new git directory, the changed files, the clearing of what stood
/// in their way) and finally removes the layer.
async fn layer_probe(
    plait: &Path,
    settings: &SandboxSettings,
    place: &Path,
) -> Result<Probe, String> {
    const WHAT: &str = "links a check planted in its layer and git directory";
    let outside = place.join("outside-layer");
    std::fs::create_dir_all(outside.join("dir/c.txt")).map_err(made(&outside))?;
    std::fs::write(outside.join("victim"), SECRET).map_err(made(&outside))?;
    std::fs::write(outside.join("dir/a.txt"), "theirs\n").map_err(made(&outside))?;
    let (repo, from, to) = layer_repo(&place.join("layer-repo"))?;
    let base_index = repo.path().join("index");
    let layer = plait_trees::environment::LayerDir(place.join("layer"));
    let failed = |e: plait_trees::environment::LayerError| e.to_string();
    layer.make(0).map_err(failed)?;
    let first = layer.new_git_dir().map_err(failed)?;
    plait_trees::environment::git_dir(&repo, &first, from, &base_index, &BTreeMap::new())
        .map_err(failed)?;
    let before = snapshot(&outside);
    let prober = Prober {
        plait,
        sandbox: Sandbox::new(settings, vec![layer.upper(), first.root().to_path_buf()]),
        log: place.join("layer.log"),
        own: layer.upper(),
        cancel: plait_core::cancel::Cancel::new().1,
    };
    let target = [&outside, first.root(), &layer.upper()].map(|p| p.display().to_string());
    let (outcome, said) = prober.attempt("plant", target.join("\n")).await;
    let is_link = |p: PathBuf| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_symlink());
    let planted = is_link(first.root().join("HEAD"))
        && is_link(first.root().join("commondir"))
        && is_link(layer.upper().join("dir"));
    // The next round, as plait writes it, then the layer's removal.
    let round = (|| {
        let changes = plait_trees::environment::changes(&repo, from, to)?;
        let next = layer.new_git_dir()?;
        plait_trees::environment::git_dir(&repo, &next, to, &base_index, &changes)?;
        plait_trees::environment::apply(&repo, &layer.open_upper()?, &changes, &|_| false)
    })();
    layer.remove();
    let changed = outside_changed(&before, &snapshot(&outside));
    let refused = planted && changed.is_none();
    let detail = match changed {
        Some(changed) => format!("it went through ({changed})"),
        None => format!("not tried: the probe could not plant its links ({said})"),
    };
    let mut probe = verdict(judge(WHAT, &outcome, &said, refused), &outcome, detail);
    if let (true, Err(e)) = (probe.refused, round) {
        // Nothing got out, but the round did not go as far as plait's would.
        probe.detail = format!("plait's next round stopped over the links: {e}");
    }
    Ok(probe)
}

/// `probe` with `detail` as what happened, when it was not refused and the probe started.
fn verdict(mut probe: Probe, outcome: &ShellOutcome, detail: String) -> Probe {
    if !probe.refused && !matches!(outcome, ShellOutcome::NotStarted(_)) {
        probe.detail = detail;
    }
    probe
}

/// A repository with two commits: `a.txt` and `dir/c.txt`, then both changed.
fn layer_repo(dir: &Path) -> Result<(git2::Repository, git2::Oid, git2::Oid), String> {
    let g = |e: git2::Error| format!("{}: {}", dir.display(), e.message());
    let repo = git2::Repository::init(dir).map_err(g)?;
    let signature = git2::Signature::now("plait doctor", "doctor@plait.invalid").map_err(g)?;
    let mut parent = None;
    let mut commits = Vec::new();
    for (a, c) in [("a\n", "c\n"), ("A\n", "C\n")] {
        let mut index = repo.index().map_err(g)?;
        for (path, text) in [("a.txt", a), ("dir/c.txt", c)] {
            let entry = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: 0o100644,
                uid: 0,
                gid: 0,
                file_size: 0,
                id: git2::Oid::ZERO_SHA1,
                flags: 0,
                flags_extended: 0,
                path: path.as_bytes().to_vec(),
            };
            index.add_frombuffer(&entry, text.as_bytes()).map_err(g)?;
        }
        // The first commit's index stays as the base layer's.
        if parent.is_none() {
            index.write().map_err(g)?;
        }
        let tree = repo.find_tree(index.write_tree().map_err(g)?).map_err(g)?;
        let parents: Vec<git2::Commit> = parent
            .and_then(|p| repo.find_commit(p).ok())
            .into_iter()
            .collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        let oid = repo
            .commit(None, &signature, &signature, "doctor", &tree, &refs)
            .map_err(g)?;
        parent = Some(oid);
        commits.push(oid);
    }
    Ok((repo, commits[0], commits[1]))
}

/// The probe of the layer: plants links to the outside directory (`target`'s first line) in
/// the layer's upper directory (its third) (a directory of a changed path, a changed file) and as its git
/// directory's (its second) `HEAD`, `index` and `commondir` (that one to a path that does not exist).
fn plant(target: &str) -> Result<String, String> {
    let e = |p: &Path| {
        let p = p.to_path_buf();
        move |e: std::io::Error| format!("{}: {e}", p.display())
    };
    let mut paths = target.lines().map(PathBuf::from);
    let (Some(outside), Some(git), Some(upper)) = (paths.next(), paths.next(), paths.next()) else {
        return Err(format!(
            "not OUTSIDE, GIT and UPPER on lines of their own: {target}"
        ));
    };
    let links = [
        (outside.join("victim"), git.join("HEAD")),
        (outside.join("victim"), git.join("index")),
        (outside.join("new"), git.join("commondir")),
        (outside.join("dir"), upper.join("dir")),
        (outside.join("victim"), upper.join("a.txt")),
    ];
    for (target, link) in &links {
        let _ = std::fs::remove_file(link);
        std::os::unix::fs::symlink(target, link).map_err(e(link))?;
    }
    Ok(format!("planted {} links", links.len()))
}

#[cfg(test)]
mod tests;
