//! Builtins that change what later words of a script mean. The rules judge
//! `ls` as the program ls; after `alias ls='rm -rf ~'` (with aliases
//! expanded), `enable -f ./evil.so ls` or `hash -p ./evil ls` a plain `ls`
//! runs something else, so the verdict on it would be about the wrong
//! program. These ask whatever the profile says about the builtin itself.
//! Function definitions do the same; the engine handles them, since it also
//! has to find their calls.
//!
//! Left alone on purpose: `unalias` and `enable`'s listing forms only
//! remove or show definitions, so words go back to meaning what they say;
//! `builtin x` and `command x` skip functions and aliases and are seen
//! through as wrappers (`wrappers.rs`); `hash` without `-p` only caches
//! what a PATH search would find anyway.

use crate::word::Word;

/// Why `program args…` redefines what later commands run, if it does.
pub(crate) fn redefines(program: &str, args: &[Word]) -> Option<String> {
    let unknown = args.iter().any(|w| !w.known);
    match program {
        // `alias`, `alias -p` and `alias ls` only print.
        "alias" if unknown || args.iter().any(|w| w.text.contains('=')) => Some(
            "`alias` defines an alias, and with aliases expanded a later word can run any command"
                .into(),
        ),
        // Without this a script's aliases are never expanded (bash -c is
        // not interactive), so it is what makes an alias matter.
        "shopt"
            if flags(args).any(|f| f.contains('s'))
                && (unknown || args.iter().any(|w| w.text == "expand_aliases")) =>
        {
            Some("`shopt -s expand_aliases` makes aliases expand, so a later word can run any command".into())
        }
        // `set -k` puts `NAME=value` arguments anywhere on a command line
        // into the program's environment: `git diff GIT_EXTERNAL_DIFF=./x`.
        "set" if sets_keyword(args) => Some(
            "`set -k` turns `NAME=value` arguments into environment variables that can change what a program runs"
                .into(),
        ),
        // `enable`, `enable -a`, `-p`, `-s` only list builtins.
        "enable" if unknown || args.iter().any(|w| !is_listing(&w.text)) => Some(
            "`enable` switches builtins on or off or loads new ones from a file, which changes what a command name runs"
                .into(),
        ),
        "hash" if unknown || flags(args).any(|f| f.contains('p')) => {
            Some("`hash -p PATH NAME` makes NAME run the program at PATH".into())
        }
        _ => None,
    }
}

/// The option clusters before the first operand, without their dash.
fn flags(args: &[Word]) -> impl Iterator<Item = &str> {
    args.iter()
        .map(|w| w.text.as_str())
        .take_while(|t| *t != "--")
        .filter_map(|t| t.strip_prefix('-'))
}

fn sets_keyword(args: &[Word]) -> bool {
    let before_operands: Vec<&Word> = args.iter().take_while(|w| w.text != "--").collect();
    before_operands.iter().any(|w| !w.known)
        || before_operands.iter().any(|w| {
            w.text
                .strip_prefix('-')
                .is_some_and(|cluster| !cluster.starts_with('-') && cluster.contains('k'))
        })
        || before_operands
            .windows(2)
            .any(|pair| pair[0].text == "-o" && pair[1].text == "keyword")
}

fn is_listing(arg: &str) -> bool {
    arg.strip_prefix('-')
        .is_some_and(|letters| !letters.is_empty() && letters.chars().all(|c| "aps".contains(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asks(line: &str) -> bool {
        let words: Vec<Word> = line.split(' ').map(Word::literal).collect();
        redefines(&words[0].text, &words[1..]).is_some()
    }

    #[test]
    fn definitions_ask_and_listings_do_not() {
        assert!(asks("alias ls=rm"));
        assert!(asks("alias -p x=y"));
        assert!(!asks("alias"));
        assert!(!asks("alias ls"));
        assert!(asks("shopt -s expand_aliases"));
        assert!(asks("shopt -s extglob expand_aliases"));
        assert!(!asks("shopt -u expand_aliases"));
        assert!(!asks("shopt expand_aliases"));
        assert!(!asks("shopt -s extglob"));
        assert!(asks("set -k"));
        assert!(asks("set -ek"));
        assert!(asks("set -o keyword"));
        assert!(!asks("set -e"));
        assert!(!asks("set -- -k"));
        assert!(!asks("set +k"));
        assert!(asks("enable -n echo"));
        assert!(asks("enable -f ./x.so ls"));
        assert!(asks("enable echo"));
        assert!(!asks("enable"));
        assert!(!asks("enable -a"));
        assert!(!asks("enable -ps"));
        assert!(asks("hash -p /tmp/x ls"));
        assert!(asks("hash -rp /tmp/x ls"));
        assert!(!asks("hash -r"));
        assert!(!asks("hash ls"));
        assert!(!asks("unalias -a"));
    }

    #[test]
    fn unknown_words_ask() {
        let words = [
            Word::literal("alias"),
            Word {
                text: "$x".into(),
                known: false,
                pattern: false,
            },
        ];
        assert!(redefines("alias", &words[1..]).is_some());
    }
}
