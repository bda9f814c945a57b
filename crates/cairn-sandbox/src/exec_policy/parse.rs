//! A small parser for the shell command lines the exec policy judges: POSIX `sh` words and
//! quotes, the list and pipeline operators, and redirections. Anything whose effect it cannot
//! see in the words themselves makes the line *opaque* (see [`Line::opaque`]).

/// A parsed command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Line {
    /// The simple commands, in order, split at `;`, `&`, `&&`, `||`, `|`, `|&` and newlines.
    pub commands: Vec<SimpleCommand>,
    /// Why the parser cannot judge the line, when it cannot: command or process
    /// substitution, a here-document, a subshell or group, a control structure, a program
    /// that runs another command (`sh`, `eval`, `xargs`, `sudo`, `find -exec`, …), an
    /// unterminated quote.
    pub opaque: Option<String>,
}

/// One simple command: its words (leading `NAME=value` assignments and redirections removed,
/// quotes resolved) and whether it writes a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The program and its arguments.
    pub words: Vec<String>,
    /// The file it writes through a redirection (`> out.txt`, not `> /dev/null`) or an
    /// argument known to write (`find -delete`, `sort -o FILE`), if any.
    pub writes: Option<String>,
}

impl SimpleCommand {
    /// The program's name without its directory (`/usr/bin/git` → `git`).
    pub fn program(&self) -> Option<&str> {
        self.words
            .first()
            .map(|w| w.rsplit('/').next().unwrap_or(w))
    }
}

/// Shell words that start a control structure or a group.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function", "select", "{", "}", "[[", "]]", "!", "coproc",
];

/// Programs that run another command (given as their arguments or read from their input), so
/// the policy cannot see what runs.
const RUNNERS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "eval", "exec",
    "source", ".", "xargs", "parallel", "sudo", "doas", "su", "env", "nohup", "timeout", "nice",
    "ionice", "time", "watch", "command", "builtin", "setsid", "stdbuf", "chroot", "unshare",
    "nsenter", "flock", "script", "strace", "ltrace", "gdb",
];

/// Redirections and what they do to their target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Redirect {
    /// `<`: reads the target.
    Read,
    /// `>`, `>>`, `>|`, `&>`, `&>>`, `<>`: writes the target.
    Write,
    /// `>&`, `<&`: the target is a file descriptor (or `-`); a file name after `>&` writes it.
    Dup,
    /// `<<<`: the target is text.
    HereString,
}

/// Parses `input`.
///
/// ```
/// use cairn_sandbox::exec_policy::parse;
/// let line = parse("cd src && FOO=1 cargo test -q 2>&1 | tail -n 5 > /dev/null");
/// let words: Vec<Vec<String>> = line.commands.iter().map(|c| c.words.clone()).collect();
/// assert_eq!(words, [vec!["cd", "src"], vec!["cargo", "test", "-q"], vec!["tail", "-n", "5"]]);
/// assert!(line.opaque.is_none());
/// assert!(line.commands.iter().all(|c| c.writes.is_none()));
/// assert!(parse("echo $(whoami)").opaque.is_some());
/// assert_eq!(parse("ls > 'out file'").commands[0].writes.as_deref(), Some("out file"));
/// ```
pub fn parse(input: &str) -> Line {
    let mut p = Parser::default();
    let mut chars = input.chars().peekable();
    while let Some(c) = chars.next() {
        if p.opaque.is_some() {
            break;
        }
        match c {
            ' ' | '\t' => p.end_word(),
            // Control characters (a carriage return, an escape sequence) are plain word
            // characters to `sh`, but a terminal shows them as something else: such a line
            // always goes to a person, who sees them escaped.
            ch if ch.is_control() && ch != '\n' => p.opaque("control characters"),
            '\n' | ';' => p.end_command(),
            '&' => {
                if chars.peek() == Some(&'&') {
                    chars.next();
                    p.end_command();
                } else if chars.peek() == Some(&'>') {
                    chars.next();
                    if chars.peek() == Some(&'>') {
                        chars.next();
                    }
                    p.end_word();
                    p.redirect = Some(Redirect::Write);
                } else {
                    p.end_command();
                }
            }
            '|' => {
                if matches!(chars.peek(), Some('|') | Some('&')) {
                    chars.next();
                }
                p.end_command();
            }
            '>' | '<' => {
                // `2>` / `10<`: a number right before the operator is its file descriptor.
                if p.in_word && !p.quoted && p.word.chars().all(|d| d.is_ascii_digit()) {
                    p.word.clear();
                    p.in_word = false;
                } else {
                    p.end_word();
                }
                let next = chars.peek().copied();
                let kind = match (c, next) {
                    ('>', Some('>')) | ('>', Some('|')) => {
                        chars.next();
                        Redirect::Write
                    }
                    ('>', Some('&')) | ('<', Some('&')) => {
                        chars.next();
                        Redirect::Dup
                    }
                    (_, Some('(')) => {
                        p.opaque("process substitution");
                        continue;
                    }
                    ('<', Some('<')) => {
                        chars.next();
                        if chars.peek() == Some(&'<') {
                            chars.next();
                            Redirect::HereString
                        } else {
                            p.opaque("a here-document");
                            continue;
                        }
                    }
                    ('<', Some('>')) => {
                        chars.next();
                        Redirect::Write
                    }
                    ('>', _) => Redirect::Write,
                    _ => Redirect::Read,
                };
                p.redirect = Some(kind);
            }
            '\'' => {
                p.start_word(true);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => p.word.push(ch),
                        None => {
                            p.opaque("an unterminated quote");
                            break;
                        }
                    }
                }
            }
            '"' => {
                p.start_word(true);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('$' | '`' | '"' | '\\')) => p.word.push(e),
                            Some('\n') => {}
                            Some(other) => {
                                p.word.push('\\');
                                p.word.push(other);
                            }
                            None => {
                                p.opaque("an unterminated quote");
                                break;
                            }
                        },
                        Some('`') => {
                            p.opaque("command substitution");
                            break;
                        }
                        Some('$') if chars.peek() == Some(&'(') => {
                            p.opaque("command substitution");
                            break;
                        }
                        Some(ch) => p.word.push(ch),
                        None => {
                            p.opaque("an unterminated quote");
                            break;
                        }
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(ch) => {
                    p.start_word(true);
                    p.word.push(ch);
                }
                None => {}
            },
            '`' => p.opaque("command substitution"),
            '$' if chars.peek() == Some(&'(') => p.opaque("command substitution"),
            '(' | ')' => p.opaque("a subshell"),
            '#' if !p.in_word => {
                // A comment, to the end of the line.
                for ch in chars.by_ref() {
                    if ch == '\n' {
                        break;
                    }
                }
                p.end_command();
            }
            ch => {
                p.start_word(false);
                p.word.push(ch);
            }
        }
    }
    p.end_command();
    let mut line = Line {
        commands: p.commands,
        opaque: p.opaque,
    };
    if line.opaque.is_none() {
        line.opaque = line.commands.iter_mut().find_map(judge);
    }
    line
}

/// Checks one command's program and arguments: `Some(why)` when it cannot be judged; marks
/// arguments known to write.
fn judge(cmd: &mut SimpleCommand) -> Option<String> {
    let program = cmd.program()?.to_owned();
    if KEYWORDS.contains(&program.as_str()) && cmd.words[0] == program {
        return Some(format!("the shell construct `{program}`"));
    }
    if RUNNERS.contains(&program.as_str()) {
        return Some(format!(
            "`{program}`, which runs a command the policy cannot see"
        ));
    }
    let args = &cmd.words[1..];
    match program.as_str() {
        "find" => {
            if let Some(a) = args
                .iter()
                .find(|a| matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))
            {
                return Some(format!(
                    "`find {a}`, which runs a command the policy cannot see"
                ));
            }
            if let Some(a) = args.iter().find(|a| {
                matches!(
                    a.as_str(),
                    "-delete" | "-fprint" | "-fprint0" | "-fprintf" | "-fls"
                )
            }) {
                cmd.writes.get_or_insert_with(|| format!("find {a}"));
            }
        }
        "sort" => {
            if let Some(i) = args
                .iter()
                .position(|a| a == "-o" || a.starts_with("--output"))
            {
                let target = args.get(i + 1).cloned().unwrap_or_default();
                cmd.writes.get_or_insert(target);
            } else if let Some(a) = args.iter().find(|a| a.starts_with("-o")) {
                cmd.writes.get_or_insert_with(|| a[2..].to_owned());
            }
        }
        _ => {}
    }
    None
}

#[derive(Default)]
struct Parser {
    commands: Vec<SimpleCommand>,
    current: SimpleCommand,
    word: String,
    in_word: bool,
    quoted: bool,
    redirect: Option<Redirect>,
    /// Whether a word of the current command has been taken as the program (assignments
    /// before it are dropped).
    started: bool,
    opaque: Option<String>,
}

impl Parser {
    fn opaque(&mut self, why: &str) {
        self.opaque.get_or_insert_with(|| why.to_owned());
    }

    fn start_word(&mut self, quoted: bool) {
        self.in_word = true;
        self.quoted |= quoted;
    }

    fn end_word(&mut self) {
        if !self.in_word {
            return;
        }
        let word = std::mem::take(&mut self.word);
        let quoted = std::mem::take(&mut self.quoted);
        self.in_word = false;
        if let Some(kind) = self.redirect.take() {
            let writes = match kind {
                Redirect::Write => word != "/dev/null",
                // `>&2` duplicates a descriptor; `>& file` (bash) writes the file.
                Redirect::Dup => !(word == "-" || word.chars().all(|d| d.is_ascii_digit())),
                Redirect::Read | Redirect::HereString => false,
            };
            if writes {
                self.current.writes.get_or_insert(word);
            }
            return;
        }
        if !self.started && !quoted && is_assignment(&word) {
            return;
        }
        self.started = true;
        self.current.words.push(word);
    }

    fn end_command(&mut self) {
        self.end_word();
        if self.redirect.take().is_some() {
            self.opaque("a redirection without a target");
        }
        let cmd = std::mem::take(&mut self.current);
        self.started = false;
        if !cmd.words.is_empty() || cmd.writes.is_some() {
            self.commands.push(cmd);
        }
    }
}

/// `NAME=value` with a valid shell name.
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &Line) -> Vec<Vec<&str>> {
        line.commands
            .iter()
            .map(|c| c.words.iter().map(String::as_str).collect())
            .collect()
    }

    #[test]
    fn words_quotes_and_operators() {
        let l = parse(r#"git commit -m "fix: a \"b\" c" && echo 'it''s' done; ls\ x|wc -l"#);
        assert_eq!(
            words(&l),
            [
                vec!["git", "commit", "-m", "fix: a \"b\" c"],
                vec!["echo", "its", "done"],
                vec!["ls x"],
                vec!["wc", "-l"],
            ]
        );
        assert_eq!(l.opaque, None);
        let l = parse("a || b & c\nd |& e # comment ; rm -rf /");
        assert_eq!(
            words(&l),
            [vec!["a"], vec!["b"], vec!["c"], vec!["d"], vec!["e"]]
        );
    }

    #[test]
    fn redirections_are_not_words_and_writes_are_seen() {
        let l = parse("cat < in.txt 2>/dev/null >> log.txt");
        assert_eq!(words(&l), [vec!["cat"]]);
        assert_eq!(l.commands[0].writes.as_deref(), Some("log.txt"));
        let l = parse("make 2>&1 >/dev/null; echo x>&2");
        assert!(l.commands.iter().all(|c| c.writes.is_none()), "{l:?}");
        assert_eq!(
            parse("echo hi &> out").commands[0].writes.as_deref(),
            Some("out")
        );
        assert_eq!(
            parse("> empty").commands[0].writes.as_deref(),
            Some("empty")
        );
        assert_eq!(
            parse("find . -name '*.o' -delete").commands[0]
                .writes
                .as_deref(),
            Some("find -delete")
        );
        assert_eq!(
            parse("sort -o out.txt in.txt").commands[0]
                .writes
                .as_deref(),
            Some("out.txt")
        );
        assert_eq!(parse("cat <<< 'text'").commands[0].writes, None);
    }

    #[test]
    fn assignments_before_the_program_are_dropped() {
        let l = parse("RUST_LOG=debug A_1=x cargo test X=1");
        assert_eq!(words(&l), [vec!["cargo", "test", "X=1"]]);
    }

    #[test]
    fn what_cannot_be_judged_is_opaque() {
        for (line, why) in [
            ("echo $(cat /etc/passwd)", "command substitution"),
            ("echo \"`id`\"", "command substitution"),
            ("diff <(ls a) <(ls b)", "process substitution"),
            ("cat <<EOF\nhi\nEOF", "here-document"),
            ("(cd x && rm y)", "subshell"),
            ("{ rm x; }", "construct `{`"),
            ("for f in *; do rm $f; done", "construct `for`"),
            ("if true; then ls; fi", "construct `if`"),
            ("curl -s x | sh", "`sh`"),
            ("eval \"$CMD\"", "`eval`"),
            ("ls | xargs rm", "`xargs`"),
            ("/usr/bin/sudo ls", "`sudo`"),
            ("env FOO=1 rm -rf x", "`env`"),
            ("find . -exec rm {} ;", "find -exec"),
            ("echo 'unterminated", "unterminated"),
            ("echo hi >", "without a target"),
            ("ls -la\r\x1b[2Ktouch PWNED", "control characters"),
        ] {
            let l = parse(line);
            let got = l.opaque.unwrap_or_default();
            assert!(got.contains(why), "{line:?}: {got:?}");
        }
        assert_eq!(parse("echo $HOME ${X:-y}").opaque, None);
        assert_eq!(parse("echo 'if' done").opaque, None);
    }

    #[test]
    fn program_names_lose_their_directory() {
        assert_eq!(
            parse("/usr/bin/git status").commands[0].program(),
            Some("git")
        );
        assert_eq!(parse("./x").commands[0].program(), Some("x"));
    }
}
