//! Plans written with a builder, for the tests that are not about the plan's TOML itself
//! (those keep their text): the keys a test sets, in a line each, and the TOML plait reads.
//!
//! ```ignore
//! let toml = Plan::new()
//!     .goal("g")
//!     .mock("anthropic", &mock.url(), "claude-sonnet-4-5")
//!     .review_off()
//!     .set("defaults", "agent", "mock")
//!     .task("a").owns(["/lib/a.py"]).exec("echo 1 > lib/a.py")
//!     .to_toml();
//! ```
//!
//! Top-level keys come first, then the tables in the order they were first set, then the
//! tasks; a task's methods apply to the task added last.

use std::fmt::Write as _;

/// A plan being written.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    top: Vec<(String, String)>,
    tables: Vec<(String, Vec<(String, String)>)>,
    tasks: Vec<Vec<(String, String)>>,
}

impl Plan {
    pub fn new() -> Plan {
        Plan::default()
    }

    /// The plan most model-agent tests start from: goal `g`, the mock model server at `url`
    /// as `[providers.mock]` (Claude Sonnet 4.5, `max_tokens` 1024) the agent of every
    /// task, no reviewer; no tasks yet.
    pub fn on_mock(url: &str) -> Plan {
        Plan::new()
            .goal("g")
            .mock("anthropic", url, "claude-sonnet-4-5")
            .set("providers.mock", "max_tokens", 1024)
            .review_off()
            .set("defaults", "agent", "mock")
    }

    /// The run's `goal`.
    pub fn goal(self, goal: &str) -> Plan {
        self.set("", "goal", goal)
    }

    /// Sets `key` of the table `table` (`"defaults"`, `"providers.mock"`; `""` for the
    /// top level) to `value`, in place of what it was.
    pub fn set(mut self, table: &str, key: &str, value: impl Toml) -> Plan {
        let value = value.toml();
        let entries = if table.is_empty() {
            &mut self.top
        } else {
            match self.tables.iter().position(|(name, _)| name == table) {
                Some(i) => &mut self.tables[i].1,
                None => {
                    self.tables.push((table.to_string(), Vec::new()));
                    &mut self.tables.last_mut().unwrap().1
                }
            }
        };
        put(entries, key, value);
        self
    }

    /// `[review] agent = "off"`: no reviewer.
    pub fn review_off(self) -> Plan {
        self.set("review", "agent", "off")
    }

    /// `[defaults] agent = { exec = command }`: every task's agent runs `command`.
    pub fn exec_all(self, command: &str) -> Plan {
        self.set(
            "defaults",
            "agent",
            Raw(&format!("{{ exec = {} }}", command.toml())),
        )
    }

    /// `[providers.mock]` for the suite's mock model server at `url`: its `kind`
    /// (`anthropic`, `openai`), its key in `PLAIT_TEST_KEY`, and `model`.
    pub fn mock(self, kind: &str, url: &str, model: &str) -> Plan {
        self.provider("mock", kind, url, "PLAIT_TEST_KEY", model)
    }

    /// `[providers.<name>]`: `kind`, `base_url`, `api_key_env` and `model`.
    pub fn provider(self, name: &str, kind: &str, url: &str, key_env: &str, model: &str) -> Plan {
        let table = format!("providers.{name}");
        self.set(&table, "kind", kind)
            .set(&table, "base_url", url)
            .set(&table, "api_key_env", key_env)
            .set(&table, "model", model)
    }

    /// A task `id`, whose prompt is `p` until [`prompt`](Self::prompt) says otherwise; the
    /// task methods that follow apply to it.
    pub fn task(mut self, id: &str) -> Plan {
        self.tasks.push(vec![
            ("id".into(), id.toml()),
            ("prompt".into(), "p".toml()),
        ]);
        self
    }

    /// The last task's `prompt`.
    pub fn prompt(self, prompt: &str) -> Plan {
        self.with("prompt", prompt)
    }

    /// The paths the last task `owns`.
    pub fn owns(self, paths: impl Toml) -> Plan {
        self.with("owns", paths)
    }

    /// The tasks the last task comes `after`.
    pub fn after(self, ids: impl Toml) -> Plan {
        self.with("after", ids)
    }

    /// The last task's agent: `{ exec = command }`.
    pub fn exec(self, command: &str) -> Plan {
        self.with("agent", Raw(&format!("{{ exec = {} }}", command.toml())))
    }

    /// Sets `key` of the last task to `value`.
    pub fn with(mut self, key: &str, value: impl Toml) -> Plan {
        let task = self.tasks.last_mut().expect("a task first: .task(id)");
        put(task, key, value.toml());
        self
    }

    /// The plan as TOML.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        for (key, value) in &self.top {
            let _ = writeln!(out, "{key} = {value}");
        }
        for (name, entries) in &self.tables {
            let _ = writeln!(out, "[{name}]");
            for (key, value) in entries {
                let _ = writeln!(out, "{key} = {value}");
            }
        }
        for task in &self.tasks {
            out.push_str("[[task]]\n");
            for (key, value) in task {
                let _ = writeln!(out, "{key} = {value}");
            }
        }
        out
    }
}

fn put(entries: &mut Vec<(String, String)>, key: &str, value: String) {
    match entries.iter_mut().find(|(k, _)| k == key) {
        Some(entry) => entry.1 = value,
        None => entries.push((key.to_string(), value)),
    }
}

/// A value as TOML writes it.
pub trait Toml {
    fn toml(&self) -> String;
}

/// TOML written out as it is: an inline table, say (`{ exec = 'true' }`).
pub struct Raw<'a>(pub &'a str);

impl Toml for Raw<'_> {
    fn toml(&self) -> String {
        self.0.to_string()
    }
}

impl Toml for str {
    fn toml(&self) -> String {
        let mut out = String::from("\"");
        for c in self.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => {
                    let _ = write!(out, "\\u{:04X}", c as u32);
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
}

impl<T: Toml + ?Sized> Toml for &T {
    fn toml(&self) -> String {
        (**self).toml()
    }
}

impl Toml for String {
    fn toml(&self) -> String {
        self.as_str().toml()
    }
}

impl<T: Toml> Toml for [T] {
    fn toml(&self) -> String {
        let items: Vec<String> = self.iter().map(Toml::toml).collect();
        format!("[{}]", items.join(", "))
    }
}

impl<T: Toml, const N: usize> Toml for [T; N] {
    fn toml(&self) -> String {
        self.as_slice().toml()
    }
}

impl<T: Toml> Toml for Vec<T> {
    fn toml(&self) -> String {
        self.as_slice().toml()
    }
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Toml for $t {
            fn toml(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
plain!(bool, i32, i64, u32, u64, usize, f64);

#[test]
fn a_plan_is_written_as_the_toml_it_stands_for() {
    let toml = Plan::new()
        .goal("g")
        .mock("anthropic", "http://127.0.0.1:9", "claude-sonnet-4-5")
        .set("providers.mock", "max_tokens", 1024)
        .review_off()
        .set("defaults", "agent", "mock")
        .task("a")
        .owns(["/lib/a.py"])
        .task("b")
        .prompt("say \"hi\"\\")
        .owns(["/lib/b.py", "/lib/c/"])
        .after(["a"])
        .exec("echo 1 > lib/b.py")
        .with("expect_changes", false)
        .to_toml();
    assert_eq!(
        toml,
        "goal = \"g\"\n\
         [providers.mock]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n\
         api_key_env = \"PLAIT_TEST_KEY\"\nmodel = \"claude-sonnet-4-5\"\nmax_tokens = 1024\n\
         [review]\nagent = \"off\"\n\
         [defaults]\nagent = \"mock\"\n\
         [[task]]\nid = \"a\"\nprompt = \"p\"\nowns = [\"/lib/a.py\"]\n\
         [[task]]\nid = \"b\"\nprompt = \"say \\\"hi\\\"\\\\\"\nowns = [\"/lib/b.py\", \"/lib/c/\"]\n\
         after = [\"a\"]\nagent = { exec = \"echo 1 > lib/b.py\" }\nexpect_changes = false\n"
    );
    // And plait reads it.
    let plan = plait_plan::parse(&toml, std::path::Path::new("plait.toml")).unwrap();
    let ids: Vec<&str> = plan.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!((plan.goal.as_str(), ids), ("g", vec!["a", "b"]));
    assert_eq!(plan.tasks[1].prompt, "say \"hi\"\\");
}
