use super::*;

fn words(line: &str) -> Vec<Word> {
    let mut out = Vec::new();
    line_words(line, &mut out, 0);
    out
}

fn program(w: &str) -> Word {
    Word::Program(w.to_string())
}

fn path(w: &str) -> Word {
    Word::Path(w.to_string())
}

#[test]
fn a_line_names_the_program_of_each_simple_command_and_its_absolute_paths() {
    assert_eq!(
        words(r#"A=1 /v/bin/ruff format -q "$PLAIT_FILE" && timeout 5 node x.js --config=/etc/z"#),
        vec![
            program("/v/bin/ruff"),
            program("timeout"),
            program("node"),
            path("/etc/z"),
        ]
    );
    assert_eq!(
        words(r#"sh -c 'npx prettier --write {file}; ~/t/fix.sh' | $(cat "$PLAIT_OWNED")"#),
        vec![
            program("sh"),
            program("npx"),
            program("~/t/fix.sh"),
            program("cat"),
        ]
    );
    assert_eq!(
        words("cd sub; env -i X=/opt/y ./run.sh /data/in.csv"),
        vec![
            program("cd"),
            program("env"),
            path("/opt/y"),
            program("./run.sh"),
            path("/data/in.csv"),
        ]
    );
    // A line the shell would refuse is read word by word.
    assert_eq!(words("/x/bin/tool 'open"), vec![program("/x/bin/tool")]);
}

/// A file at `path` holding `text`, executable.
fn script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

struct Machine {
    _dir: tempfile::TempDir,
    root: PathBuf,
    env: ToolEnv,
}

/// A home, a checkout, a base Python outside both, a venv under the temporary directory
/// and one in the checkout, a `node_modules`, tools in the home.
fn machine() -> Machine {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let home = root.join("home/u");
    let base = root.join("pythons/3.11");
    script(&base.join("bin/python3.11"), "\x7fELF");
    // A venv under the temporary directory: its python a link to the base one.
    let venv = root.join("tmp/ci/venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        format!("home = {}\n", base.join("bin").display()),
    )
    .unwrap();
    std::os::unix::fs::symlink(base.join("bin/python3.11"), venv.join("bin/python")).unwrap();
    script(
        &venv.join("bin/ruff"),
        &format!("#!{}\nimport ruff\n", venv.join("bin/python").display()),
    );
    // A venv in the checkout whose scripts name the checkout's path.
    let checkout = root.join("work/proj");
    let inner = checkout.join(".venv");
    std::fs::create_dir_all(inner.join("bin")).unwrap();
    std::fs::write(inner.join("pyvenv.cfg"), "home = /nowhere\n").unwrap();
    std::os::unix::fs::symlink(base.join("bin/python3.11"), inner.join("bin/python")).unwrap();
    script(
        &inner.join("bin/pytest"),
        &format!("#!{}\n", inner.join("bin/python").display()),
    );
    // A node_modules whose .bin links into a package, its script run by `env node`.
    let modules = root.join("cache/js/node_modules");
    script(
        &modules.join("prettier/bin/prettier.cjs"),
        "#!/usr/bin/env node\n",
    );
    std::fs::create_dir_all(modules.join(".bin")).unwrap();
    std::os::unix::fs::symlink(
        "../prettier/bin/prettier.cjs",
        modules.join(".bin/prettier"),
    )
    .unwrap();
    script(&root.join("nodes/22/bin/node"), "\x7fELF");
    // Tools in the home: one in a directory of tools, one loose, one among the secrets.
    script(&home.join("tools/bin/fix"), "#!/bin/sh\n");
    script(&home.join("loose.sh"), "#!/bin/sh\n");
    script(&home.join(".ssh/sneak.sh"), "#!/bin/sh\n");
    std::fs::write(home.join(".ssh/id_rsa"), "KEY").unwrap();
    // A project of the user's: a script beside its secrets and its data.
    script(&home.join("other/run.sh"), "#!/bin/sh\n");
    std::fs::write(home.join("other/.env"), "TOKEN=x").unwrap();
    std::fs::write(home.join("other/data.csv"), "1,2").unwrap();
    let env = ToolEnv {
        path: vec![root.join("nodes/22/bin"), PathBuf::from("/usr/bin")],
        home: Some(home),
        prefixes: Vec::new(),
        temp: root.join("tmp"),
    };
    Machine {
        _dir: dir,
        root,
        env,
    }
}

#[test]
fn a_venv_tool_by_path_brings_its_venv_and_the_python_it_links_to() {
    let m = machine();
    let line = format!(
        "{}/tmp/ci/venv/bin/ruff format -q \"$PLAIT_FILE\"",
        m.root.display()
    );
    let found = needed_by([line.as_str()], [], None, None, &m.env);
    assert_eq!(
        found,
        vec![m.root.join("pythons/3.11"), m.root.join("tmp/ci/venv")]
    );
}

#[test]
fn a_node_modules_script_brings_its_tree_and_its_interpreter_found_on_path() {
    let m = machine();
    let line = format!(
        "{}/cache/js/node_modules/.bin/prettier --write {{file}}",
        m.root.display()
    );
    let found = needed_by([line.as_str()], [], None, None, &m.env);
    assert_eq!(
        found,
        vec![
            m.root.join("cache/js/node_modules"),
            m.root.join("nodes/22")
        ]
    );
}

#[test]
fn a_checkout_program_is_followed_outside_but_the_checkout_stays_closed() {
    let m = machine();
    let checkout = m.root.join("work/proj");
    let found = needed_by(
        [".venv/bin/pytest -q tests"],
        [],
        Some(&checkout),
        Some(&checkout.join(".git")),
        &m.env,
    );
    assert_eq!(found, vec![m.root.join("pythons/3.11")]);
    // A program whose package would hold the checkout: the file alone.
    script(&m.root.join("work/bin/tool"), "#!/bin/sh\n");
    let line = format!("{}/work/bin/tool", m.root.display());
    let found = needed_by([line.as_str()], [], Some(&checkout), None, &m.env);
    assert_eq!(found, vec![m.root.join("work/bin/tool")]);
}

#[test]
fn the_home_opens_only_for_a_tools_package_never_for_its_hidden_entries() {
    let m = machine();
    let found = needed_by(
        [
            "~/tools/bin/fix {file}",
            "~/loose.sh",
            "~/.ssh/sneak.sh && cat ~/.ssh/id_rsa",
            "~/other/run.sh ~/other/.env ~/other/data.csv",
            "python3 ~/other/run.sh",
            "/etc/shadow; ~/other/data.csv",
        ],
        [],
        None,
        None,
        &m.env,
    );
    let home = m.env.home.clone().unwrap();
    assert_eq!(
        found,
        vec![
            home.join("loose.sh"),
            home.join("other/run.sh"),
            home.join("tools/bin"),
        ],
        "a project's script alone: never its .env, nor data it names"
    );
}

#[test]
fn programs_by_argv_and_the_active_environments_are_read() {
    let mut m = machine();
    m.env.prefixes = vec![m.root.join("tmp/ci/venv"), m.env.home.clone().unwrap()];
    let bin = format!("{}/cache/js/node_modules/.bin/prettier", m.root.display());
    let found = needed_by([], [bin.as_str()], None, None, &m.env);
    assert_eq!(
        found,
        vec![
            m.root.join("cache/js/node_modules"),
            m.root.join("nodes/22"),
            m.root.join("tmp/ci/venv"),
        ],
        "the home as $VIRTUAL_ENV is too wide"
    );
}
