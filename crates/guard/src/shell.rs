//! The words of a `Bash` command, read the way sh reads them, so the guard judges the
//! arguments the program will receive and not the text the model wrote. Only plain words
//! pass: quoting (`'...'`, `"..."` with its backslash escapes, a backslash outside quotes)
//! is undone; anything the shell would act on itself — an operator, a redirection, an
//! expansion (`$`, backquotes, `~`, braces, zsh's `=cmd`), a comment, a `[` glob, a newline —
//! is refused. `*` and `?` stay, marked, for the caller to expand.

/// One word of a command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Word {
    /// The word as the program receives it (when it is no glob).
    pub text: String,
    /// The word as a glob pattern: `text` with the quoted `*`, `?` and `\` escaped by a
    /// backslash; `Some` only when an unquoted `*` or `?` makes it a glob.
    pub glob: Option<String>,
    /// The last character was unquoted and one after which sh expands `~` (`=`, `:`).
    tilde_may_follow: bool,
    /// The pattern so far, kept until the word turns out to be a glob.
    pattern: String,
}

impl Word {
    fn push(&mut self, c: char, quoted: bool) {
        self.text.push(c);
        if quoted && matches!(c, '*' | '?' | '\\') {
            self.pattern.push('\\');
        }
        self.pattern.push(c);
        self.tilde_may_follow = !quoted && matches!(c, '=' | ':');
    }

    fn finish(mut self) -> Word {
        if self.glob.is_some() {
            self.glob = Some(std::mem::take(&mut self.pattern));
        }
        self
    }
}

/// Characters that make sh do something other than pass a word along.
const OPERATORS: &str = ";&|<>(){}$`!";

/// Splits `command` into words, or says what in it the guard will not pass to a shell.
pub(super) fn words(command: &str) -> Result<Vec<Word>, String> {
    let mut words = Vec::new();
    let mut word: Option<Word> = None;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        let starts_word = word.is_none();
        match c {
            ' ' | '\t' => words.extend(word.take().map(Word::finish)),
            '\'' => {
                let w = word.get_or_insert_with(Word::default);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) if c.is_control() => return Err(control(c)),
                        Some(c) => w.push(c, true),
                        None => return Err("an unclosed quote".into()),
                    }
                }
            }
            '"' => double_quoted(&mut chars, word.get_or_insert_with(Word::default))?,
            '\\' => match chars.next() {
                Some(c) if !c.is_control() => word.get_or_insert_with(Word::default).push(c, true),
                Some(c) => return Err(control(c)),
                None => return Err("a backslash at the end".into()),
            },
            c if c.is_control() => return Err(control(c)),
            c if OPERATORS.contains(c) => return Err(format!("the shell operator {}", quoted(c))),
            '[' => return Err("an unquoted `[` (a glob)".into()),
            '#' if starts_word => return Err("a comment (`#`)".into()),
            '=' if starts_word => return Err("a word starting with `=`".into()),
            '~' if starts_word || word.as_ref().is_some_and(|w| w.tilde_may_follow) => {
                return Err("an unquoted `~` (the home directory)".into())
            }
            '*' | '?' => {
                let w = word.get_or_insert_with(Word::default);
                w.push(c, false);
                w.glob = Some(String::new());
            }
            c => word.get_or_insert_with(Word::default).push(c, false),
        }
    }
    words.extend(word.map(Word::finish));
    Ok(words)
}

/// The rest of a `"..."` word, after its opening quote.
fn double_quoted(chars: &mut std::str::Chars, w: &mut Word) -> Result<(), String> {
    loop {
        match chars.next() {
            Some('"') => return Ok(()),
            Some('\\') => match chars.next() {
                Some(c @ ('$' | '`' | '"' | '\\')) => w.push(c, true),
                Some(c) if c.is_control() => return Err(control(c)),
                Some(c) => {
                    w.push('\\', true);
                    w.push(c, true);
                }
                None => return Err("an unclosed quote".into()),
            },
            Some(c @ ('$' | '`')) => {
                return Err(format!("an expansion ({}) inside quotes", quoted(c)))
            }
            Some('!') => return Err("a `!` inside double quotes".into()),
            Some(c) if c.is_control() => return Err(control(c)),
            Some(c) => w.push(c, true),
            None => return Err("an unclosed quote".into()),
        }
    }
}

/// `c` in backquotes, as Markdown shows it.
fn quoted(c: char) -> String {
    if c == '`' {
        "`` ` ``".into()
    } else {
        format!("`{c}`")
    }
}

fn control(c: char) -> String {
    if c == '\n' || c == '\r' {
        "a newline (one command at a time)".into()
    } else {
        format!("the control character {c:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(command: &str) -> Vec<String> {
        words(command)
            .unwrap_or_else(|e| panic!("{command}: {e}"))
            .into_iter()
            .map(|w| w.text)
            .collect()
    }

    #[test]
    fn quoting_is_undone_as_sh_does() {
        assert_eq!(
            texts("grep -rn 'fn main' src"),
            ["grep", "-rn", "fn main", "src"]
        );
        assert_eq!(
            texts(r#"grep "a\|b \"c\" \$x \\" ."#),
            ["grep", r#"a\|b "c" $x \"#, "."]
        );
        assert_eq!(texts(r"cat a\ b 'x'y''"), ["cat", "a b", "xy"]);
        assert_eq!(texts("git  log\t-1 ''"), ["git", "log", "-1", ""]);
        assert_eq!(
            texts("git log HEAD~1 --x=y~"),
            ["git", "log", "HEAD~1", "--x=y~"]
        );
        assert_eq!(texts(""), Vec::<String>::new());
    }

    #[test]
    fn globs_are_marked_with_their_quoted_characters_escaped() {
        let w = words(r"ls src/*.rs '*'x? a").unwrap();
        assert_eq!(w[1].glob.as_deref(), Some("src/*.rs"));
        assert_eq!(w[2].text, "*x?");
        assert_eq!(w[2].glob.as_deref(), Some(r"\*x?"));
        assert_eq!(w[3].glob, None);
        assert_eq!(words("grep '*' x").unwrap()[1].glob, None);
    }

    #[test]
    fn what_the_shell_would_act_on_is_refused() {
        for bad in [
            "cat a; rm b",
            "cat a && b",
            "cat a | sh",
            "cat $(x)",
            "cat `x`",
            "cat \"$HOME\"",
            "cat \"`x`\"",
            "cat <f",
            "git log > f",
            "cat {a,b}",
            "cat ~/x",
            "cat --file=~/x",
            "cat a=~",
            "cat x:~/y",
            "cat =ls",
            "cat [ab]",
            "cat a # b",
            "cat a\nrm b",
            "cat 'a\nb'",
            "cat 'open",
            "cat \"open",
            "cat a\\",
            "! cat a",
            "cat \"!x\"",
        ] {
            assert!(words(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
