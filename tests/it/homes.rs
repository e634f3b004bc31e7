//! The agent CLIs' homes are private per sandbox: a CLI-like program standing in for each
//! known CLI writes its state directories at start (as Codex, Gemini CLI, Qwen Code,
//! opencode, Claude Code and aider do), with a new user's config, and no write is refused,
//! nothing it wrote reaches the real home, two tasks of the same CLI see their own state,
//! and the credential files planted in each real state directory stay unreadable.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use crate::support::sandbox::{home, landlock, namespaces, refused};
use crate::support::{stderr, task_json, TestRepo};

/// The stand-in: for each directory named (`home:NAME` under `$HOME`, `config:NAME`,
/// `data:NAME`, `state:NAME`, `cache:NAME` under the XDG directory, as the CLIs find
/// them), makes it and writes its session there, appends to the user's config, then checks
/// the session is its own and prints what it could read of each credential.
const CLI: &str = r#"out="$PWD/out-$PLAIT_TASK.txt"; : > "$out"
dir() { case "$1" in
  home:*) echo "$HOME/${1#home:}";;
  config:*) echo "${XDG_CONFIG_HOME:-$HOME/.config}/${1#config:}";;
  data:*) echo "${XDG_DATA_HOME:-$HOME/.local/share}/${1#data:}";;
  state:*) echo "${XDG_STATE_HOME:-$HOME/.local/state}/${1#state:}";;
  cache:*) echo "${XDG_CACHE_HOME:-$HOME/.cache}/${1#cache:}";;
esac; }
for d in "$@"; do p=$(dir "$d")
  mkdir -p "$p/sessions" && echo "$PLAIT_TASK" > "$p/sessions/now.json" && echo "$PLAIT_TASK" >> "$p/config.toml" || { echo "WRITE-REFUSED $p" >> "$out"; exit 1; }
done
sleep 1
for d in "$@"; do p=$(dir "$d")
  grep -qx "$PLAIT_TASK" "$p/sessions/now.json" || { echo "NOT-ITS-OWN $p" >> "$out"; exit 1; }
  echo "CONFIG $d: $(tr '\n' ' ' < "$p/config.toml")" >> "$out"
  for f in .credentials.json auth.json oauth_creds.json oauth-keys.env; do cat "$p/$f" >> "$out" 2>/dev/null; done
done
echo DONE >> "$out""#;

/// The tasks: each CLI's stand-in and the state directories it writes (Codex twice).
const TASKS: &[(&str, &[&str])] = &[
    ("codex-1", &["home:.codex"]),
    ("codex-2", &["home:.codex"]),
    ("gemini", &["home:.gemini"]),
    ("qwen", &["home:.qwen"]),
    (
        "opencode",
        &[
            "config:opencode",
            "data:opencode",
            "state:opencode",
            "cache:opencode",
        ],
    ),
    ("claude", &["home:.claude"]),
    ("aider", &["home:.aider"]),
];

/// The user's files in the real home: configs, and a credential in each state directory
/// that exists (Qwen Code's, opencode's config and state directories do not).
const PLANTED: &[(&str, &str)] = &[
    (".codex/config.toml", "model = \"real\"\n"),
    (".codex/auth.json", "SECRET-codex\n"),
    (".gemini/oauth_creds.json", "SECRET-gemini\n"),
    (".claude/.credentials.json", "SECRET-claude\n"),
    (".local/share/opencode/auth.json", "SECRET-opencode\n"),
    (".aider/oauth-keys.env", "SECRET-aider\n"),
];

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| !e.file_type().is_dir())
        .map(|e| {
            let name = e.path().strip_prefix(dir).unwrap().display().to_string();
            (name, fs::read(e.path()).unwrap_or_default())
        })
        .collect()
}

fn plan() -> String {
    let mut toml = String::from("goal = \"cli homes\"\n[review]\nagent = \"off\"\n");
    for (id, dirs) in TASKS {
        let mut argv = vec![
            "sh".to_string(),
            "-c".to_string(),
            CLI.to_string(),
            "cli".to_string(),
        ];
        argv.extend(dirs.iter().map(|d| d.to_string()));
        let argv: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
        let _ = write!(
            toml,
            "[[task]]\nid = \"{id}\"\nprompt = \"p\"\nowns = [\"out-{id}.txt\"]\n\
             agent = {{ cli = [{}] }}\n",
            argv.join(", ")
        );
    }
    toml
}

#[test]
fn agent_clis_write_their_homes_in_layers_of_their_own_and_never_read_the_real_credentials() {
    if !landlock() || !namespaces() {
        return;
    }
    let outs: Vec<(String, &str)> = TASKS
        .iter()
        .map(|(id, _)| (format!("out-{id}.txt"), "\n"))
        .collect();
    let outs: Vec<(&str, &str)> = outs.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    let repo = TestRepo::with_files(&outs);
    let home = home(&repo);
    for (path, text) in PLANTED {
        let path = home.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    let before = files(&home);
    let config = repo.scratch.join("xdg-config");
    fs::create_dir_all(&config).unwrap();
    let plan = repo.plan(&plan());
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap(), "-j", "8"],
        &[
            ("HOME", home.to_str().unwrap()),
            ("XDG_CONFIG_HOME", config.to_str().unwrap()),
        ],
    );
    assert!(
        repo.path.join(".git/plait/runs").is_dir(),
        "{}",
        stderr(&out)
    );
    let status = repo.status_json(&[]);
    let run = status["id"].as_str().unwrap();
    for (id, _) in TASKS {
        let task = task_json(&status, id);
        assert_eq!(task["state"], "done", "{id}: {}\n{task}", stderr(&out));
        let refusals = refused(task);
        assert!(refusals.is_empty(), "{id}: {refusals:?}");
        let written = &repo.tree_files(&format!("plait/{run}/{id}"))[&format!("out-{id}.txt")];
        assert!(written.ends_with("DONE\n"), "{id}: {written}");
        assert!(
            !written.contains("SECRET"),
            "{id} read a credential: {written}"
        );
        // Its layer is over the user's directory: their config is there to read, its own
        // writes on top.
        if id.starts_with("codex") {
            assert!(
                written.contains(&format!("CONFIG home:.codex: model = \"real\" {id} ")),
                "{id}: {written}"
            );
        } else {
            assert!(written.contains(&format!(": {id} \n")), "{id}: {written}");
        }
    }
    // The real home holds what the user put there, and nothing the CLIs wrote.
    assert_eq!(files(&home), before);
    // Where the user had no state directory, plait made an empty one to mount over.
    for made in [".qwen", ".local/state/opencode"] {
        let dir = home.join(made);
        assert!(dir.is_dir(), "{made}");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0, "{made}");
    }
}

/// An agent CLI in a role (a reviewer), whose processes start in no view, gets the same:
/// it writes its home in a layer of its own, reads none of the real credentials, and
/// leaves the real home as it was.
#[test]
fn an_agent_cli_reviewing_writes_its_home_in_a_layer_of_its_own() {
    if !landlock() || !namespaces() {
        return;
    }
    let repo = TestRepo::with_files(&[("src/a/x.txt", "hi\n")]);
    let home = home(&repo);
    for (path, text) in PLANTED {
        let path = home.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    let before = files(&home);
    let config = repo.scratch.join("xdg-config");
    fs::create_dir_all(&config).unwrap();
    // Codex's stand-in as the reviewer: its session written, the user's config read, the
    // credential tried; the verdict approves only when all of that went as it should.
    let reviewer = r#"mkdir -p "$HOME/.codex/sessions" && echo review > "$HOME/.codex/sessions/now.json" && grep -q real "$HOME/.codex/config.toml" && ! cat "$HOME/.codex/auth.json" && echo '{"verdict": "approve", "summary": "fine"}'"#;
    let toml = format!(
        "goal = \"g\"\n[defaults]\nagent = {{ exec = \"echo hello > src/a/x.txt\" }}\n\
         [review]\nrounds = 0\nagent = {{ cli = [\"sh\", \"-c\", {reviewer:?}], answer = \"json\" }}\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"src/a/\"]\n"
    );
    let plan = repo.plan(&toml);
    let out = repo.plait_env(
        &["run", plan.to_str().unwrap()],
        &[
            ("HOME", home.to_str().unwrap()),
            ("XDG_CONFIG_HOME", config.to_str().unwrap()),
        ],
    );
    assert!(
        repo.path.join(".git/plait/runs").is_dir(),
        "{}",
        stderr(&out)
    );
    let status = repo.status_json(&[]);
    let a = task_json(&status, "a");
    assert_eq!(a["review"]["verdict"], "approve", "{a}\n{}", stderr(&out));
    assert_eq!(files(&home), before);
}
