//! Shell text → every simple command and redirection it can run, found with
//! tree-sitter-bash. Splitting on `;`, `&&` or `|` by hand misses `$( )`,
//! backticks, newlines, process substitution and compound statements; the
//! parse tree has them all, so every `command` node reachable is reported.

use tree_sitter::{Node, Parser};

use crate::rules::Access;
use crate::word::{Word, evaluate, text_of};

/// Something in a script that the engine judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// A simple command: its words (program first, leading `VAR=x`
    /// assignments left out) and, when it reads a here-string or here-doc,
    /// that text (so `bash <<< "…"` can be judged like `bash -c "…"`).
    Command {
        words: Vec<Word>,
        stdin: Option<Word>,
    },
    /// A redirection to or from a file.
    Redirect { access: Access, target: Word },
    /// `NAME=value`, before a command, alone, or after `export`/`local`.
    Assign { name: String, value: Word },
    /// `name() { …; }`: from here on `name` runs the body, whatever
    /// program or builtin has that name. `text` is the definition.
    Function { name: Word, text: String },
    /// Something that could not be parsed or understood.
    Unparsed { text: String, why: String },
}

/// Parses `script` and lists its items in source order.
pub(crate) fn parse(script: &str) -> Vec<Item> {
    let mut parser = Parser::new();
    if let Err(error) = parser.set_language(&tree_sitter_bash::LANGUAGE.into()) {
        return vec![unparsed(
            script,
            &format!("the bash grammar failed to load: {error}"),
        )];
    }
    let Some(tree) = parser.parse(script, None) else {
        return vec![unparsed(script, "the parser gave up")];
    };
    let mut walker = Walker {
        source: script,
        items: Vec::new(),
        depth: 0,
    };
    walker.walk(tree.root_node());
    walker.items
}

fn unparsed(text: &str, why: &str) -> Item {
    Item::Unparsed {
        text: text.trim().to_string(),
        why: why.to_string(),
    }
}

/// Deeper than any command a person or model writes; the walk is
/// recursive, so a pathological `$($($(…)))` must not exhaust the stack.
const MAX_NESTING: usize = 256;

struct Walker<'s> {
    source: &'s str,
    items: Vec<Item>,
    depth: usize,
}

impl Walker<'_> {
    fn walk(&mut self, node: Node<'_>) {
        if self.depth >= MAX_NESTING {
            self.items.push(unparsed(
                text_of(node, self.source),
                "the command is nested too deeply to judge",
            ));
            return;
        }
        self.depth += 1;
        self.visit(node);
        self.depth -= 1;
    }

    fn visit(&mut self, node: Node<'_>) {
        if node.is_error() || node.is_missing() {
            // Error recovery produces plausible-looking but wrong nodes
            // inside an ERROR, so nothing in it is trusted: it asks. Well
            // formed commands outside it are still judged, so a deny
            // elsewhere in the script still wins.
            let text = text_of(node, self.source);
            let why = if node.is_missing() {
                format!("the command is incomplete (missing `{}`)", node.kind())
            } else {
                "the command does not parse as bash".to_string()
            };
            self.items.push(unparsed(text, &why));
            return;
        }
        match node.kind() {
            "comment" => {}
            "command" => self.command(node, None),
            "redirected_statement" => self.redirected_statement(node),
            "function_definition" => {
                if let Some(name) = node.child_by_field_name("name") {
                    self.items.push(Item::Function {
                        name: evaluate(name, self.source),
                        text: text_of(node, self.source).trim().to_string(),
                    });
                }
                // The body runs when the function is called: its commands
                // are judged like any others.
                self.walk_children(node);
            }
            "file_redirect" => self.file_redirect(node),
            "variable_assignment" => {
                if let Some(name) = node.child_by_field_name("name") {
                    let name = text_of(name, self.source).to_string();
                    let value = node
                        .child_by_field_name("value")
                        .map_or_else(|| Word::literal(""), |v| evaluate(v, self.source));
                    self.items.push(Item::Assign { name, value });
                }
                self.walk_children(node);
            }
            _ => self.walk_children(node),
        }
    }

    fn walk_children(&mut self, node: Node<'_>) {
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        for child in children {
            // Anonymous tokens (`;`, `|`, keywords) carry nothing to judge,
            // but a MISSING token (an unclosed `if`) must still ask.
            if child.is_named() || child.is_missing() {
                self.walk(child);
            }
        }
    }

    /// A statement with redirections. A here-string or here-doc feeding a
    /// simple command is handed to it as `stdin`.
    fn redirected_statement(&mut self, node: Node<'_>) {
        let mut cursor = node.walk();
        let redirects: Vec<Node<'_>> = node
            .children_by_field_name("redirect", &mut cursor)
            .collect();
        let stdin = redirects.iter().find_map(|r| self.stdin_text(*r));
        match node.child_by_field_name("body") {
            Some(body) if body.kind() == "command" => self.command(body, stdin),
            Some(body) => self.walk(body),
            None => {}
        }
        let mut cursor = node.walk();
        let others: Vec<Node<'_>> = node
            .named_children(&mut cursor)
            .filter(|child| Some(*child) != node.child_by_field_name("body"))
            .collect();
        for child in others {
            self.walk(child);
        }
    }

    /// The text a here-string or here-doc sends to the command's stdin.
    fn stdin_text(&self, redirect: Node<'_>) -> Option<Word> {
        match redirect.kind() {
            "herestring_redirect" => redirect.named_child(0).map(|n| evaluate(n, self.source)),
            "heredoc_redirect" => {
                let mut cursor = redirect.walk();
                let body = redirect
                    .named_children(&mut cursor)
                    .find(|n| n.kind() == "heredoc_body")?;
                // Expansions in an unquoted here-doc make its text unknown.
                let known = body
                    .named_children(&mut body.walk())
                    .all(|n| n.kind() == "heredoc_content");
                Some(Word {
                    text: text_of(body, self.source).to_string(),
                    known,
                    pattern: false,
                })
            }
            _ => None,
        }
    }

    fn command(&mut self, node: Node<'_>, mut stdin: Option<Word>) {
        let mut words = Vec::new();
        let mut cursor = node.walk();
        let children: Vec<(Option<&str>, Node<'_>)> = node
            .children(&mut cursor)
            .enumerate()
            .map(|(i, child)| (node.field_name_for_child(i as u32), child))
            .collect();
        for (field, child) in children {
            match field {
                Some("name") | Some("argument") => {
                    words.push(evaluate(child, self.source));
                    // `echo $(rm x)`: substitutions inside words run too.
                    self.walk(child);
                }
                Some("redirect") if child.kind() == "herestring_redirect" => {
                    stdin = stdin.or_else(|| self.stdin_text(child));
                    self.walk(child);
                }
                // Leading `VAR=$(…)` assignments, redirections.
                _ if child.is_named() || child.is_missing() => self.walk(child),
                _ => {}
            }
        }
        if !words.is_empty() {
            self.items.push(Item::Command { words, stdin });
        }
    }

    fn file_redirect(&mut self, node: Node<'_>) {
        let mut cursor = node.walk();
        let operator = node
            .children(&mut cursor)
            .find(|child| !child.is_named())
            .map(|child| child.kind())
            .unwrap_or("");
        let mut cursor = node.walk();
        let destinations: Vec<Node<'_>> = node
            .children_by_field_name("destination", &mut cursor)
            .collect();
        for destination in destinations {
            self.walk(destination);
            let target = evaluate(destination, self.source);
            if let Some(access) = redirect_access(operator, &target) {
                self.items.push(Item::Redirect { access, target });
            }
        }
    }
}

/// What a redirection does to its target file, if it names a file at all:
/// `2>&1` and `<&-` duplicate or close descriptors.
fn redirect_access(operator: &str, target: &Word) -> Option<Access> {
    let is_descriptor =
        target.known && (target.text == "-" || target.text.chars().all(|c| c.is_ascii_digit()));
    match operator {
        "<" => Some(Access::Read),
        ">" | ">>" | ">|" | "&>" | "&>>" => Some(Access::Write),
        ">&" | "&>&" if !is_descriptor => Some(Access::Write),
        "<&" | ">&" | "<&-" | ">&-" => None,
        // Anything new to this code is treated as a write: the cautious side.
        _ if is_descriptor => None,
        _ => Some(Access::Write),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn commands(script: &str) -> Vec<String> {
        parse(script)
            .into_iter()
            .map(|item| match item {
                Item::Command { words, .. } => words
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                Item::Redirect { access, target } => format!("{access:?} {}", target.text),
                Item::Assign { name, value } => format!("{name}={}", value.text),
                Item::Function { name, .. } => format!("function {}", name.text),
                Item::Unparsed { why, .. } => format!("unparsed: {why}"),
            })
            .collect()
    }

    #[test]
    fn finds_commands_in_substitutions_lists_and_compounds() {
        assert_eq!(
            commands("echo $(rm -rf x)"),
            ["rm -rf x", "echo $(rm -rf x)"]
        );
        assert_eq!(commands("cat `rm x`"), ["rm x", "cat `rm x`"]);
        assert_eq!(commands("ls\nrm -rf /"), ["ls", "rm -rf /"]);
        assert_eq!(commands("if true; then sudo ls; fi"), ["true", "sudo ls"]);
        assert_eq!(commands("cat <(curl x)"), ["curl x", "cat <(curl x)"]);
        assert_eq!(commands("f() { rm -rf /; }"), ["function f", "rm -rf /"]);
        assert_eq!(commands("x=$(curl y)"), ["x=$(curl y)", "curl y"]);
    }

    #[test]
    fn unquotes_words_and_skips_assignments() {
        assert_eq!(
            commands(r#"FOO=1 \rm "-rf" 'x y'"#),
            ["FOO=1", "rm -rf x y"]
        );
        assert_eq!(commands("export A=1 B=2"), ["A=1", "B=2"]);
        assert_eq!(commands(r"find . -exec rm {} \;"), ["find . -exec rm {} ;"]);
    }

    #[test]
    fn function_definitions_in_every_spelling() {
        assert_eq!(commands(":(){ :|:& };:"), ["function :", ":", ":", ":"]);
        assert_eq!(commands("function f { ls; }; f"), ["function f", "ls", "f"]);
        assert_eq!(commands("ls () ( rm x )"), ["function ls", "rm x"]);
        assert_eq!(commands("/bin/ls() { :; }"), ["function /bin/ls", ":"]);
        let items = parse("g() { :; } > out");
        assert!(
            matches!(&items[0], Item::Function { text, .. } if text == "g() { :; } > out"),
            "{items:?}"
        );
    }

    #[test]
    fn redirections() {
        assert_eq!(
            commands("echo hi 2>&1 > /etc/passwd < in"),
            ["echo hi", "Write /etc/passwd", "Read in"]
        );
        assert_eq!(commands("ls &> /dev/null"), ["ls", "Write /dev/null"]);
    }

    #[test]
    fn here_strings_and_docs_become_stdin() {
        let items = parse("bash <<< 'echo hi'");
        assert!(matches!(&items[0], Item::Command { stdin: Some(w), .. } if w.text == "echo hi"));
        let items = parse("sh <<'EOF'\nrm x\nEOF\n");
        assert!(
            matches!(&items[0], Item::Command { stdin: Some(w), .. } if w.text.contains("rm x") && w.known)
        );
    }

    #[test]
    fn deep_nesting_asks_instead_of_overflowing() {
        let script = format!("{}ls{}", "$(echo ".repeat(2000), ")".repeat(2000));
        assert!(
            commands(&script)
                .iter()
                .any(|c| c.contains("nested too deeply"))
        );
    }

    #[test]
    fn parse_errors_are_reported() {
        assert!(
            commands("echo \"unterminated")
                .iter()
                .any(|c| c.starts_with("unparsed"))
        );
        assert!(
            commands("if true; then ls")
                .iter()
                .any(|c| c.starts_with("unparsed"))
        );
    }
}
