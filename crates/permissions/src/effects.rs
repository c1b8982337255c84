//! The files a command reads or writes through its arguments, for the
//! common file commands: `rm x` writes `x`, `cp a /etc/b` writes `/etc/b`,
//! `cat .env` reads `.env`. This is what lets path rules (`**/.env`,
//! "writes outside the workspace") see through commands, not only through
//! redirections. Commands not listed here have no path parts; their command
//! rule alone decides.

use crate::rules::Access;
use crate::word::Word;

/// What a command does beyond what its command rule says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    /// A file it reads or writes.
    File(Access, Word),
    /// Something no rule can see into (a sed script that runs commands):
    /// it asks, with this reason.
    Opaque(String),
}

/// Operands and option values of one command line.
pub(crate) struct Args<'w> {
    pub operands: Vec<&'w Word>,
    pub options: Vec<(&'w str, &'w Word)>,
    pub flags: Vec<&'w str>,
}

impl<'w> Args<'w> {
    /// Splits `args` given the options that take a value (`-t DIR`,
    /// `--target-directory=DIR`). Everything after `--` is an operand.
    pub fn split(args: &'w [Word], valued: &[&str]) -> Args<'w> {
        let mut out = Args {
            operands: Vec::new(),
            options: Vec::new(),
            flags: Vec::new(),
        };
        let mut words = args.iter();
        while let Some(word) = words.next() {
            let text = word.text.as_str();
            if text == "--" {
                out.operands.extend(words.by_ref());
                break;
            }
            if !text.starts_with('-') || text == "-" || !word.known {
                out.operands.push(word);
            } else if let Some((name, _)) = text.split_once('=').filter(|_| text.starts_with("--"))
            {
                out.options.push((name, word));
            } else if valued.contains(&text) {
                if let Some(value) = words.next() {
                    out.options.push((text, value));
                }
            } else {
                out.flags.push(text);
            }
        }
        out
    }

    /// The value of an option, either `-t DIR` or `--long=DIR`.
    pub fn value(&self, names: &[&str]) -> Option<Word> {
        self.options
            .iter()
            .find(|(name, _)| names.contains(name))
            .map(
                |(name, word)| match word.text.strip_prefix(&format!("{name}=")) {
                    Some(value) => Word {
                        text: value.to_string(),
                        ..(*word).clone()
                    },
                    None => (*word).clone(),
                },
            )
    }
}

pub(crate) fn all(access: Access, words: &[&Word]) -> Vec<Effect> {
    words
        .iter()
        .map(|w| Effect::File(access, (*w).clone()))
        .collect()
}

fn one(access: Access, word: Option<Word>) -> Vec<Effect> {
    word.map(|w| Effect::File(access, w)).into_iter().collect()
}

/// Paths read or written by `program args…` (`program` already reduced to
/// its basename).
pub(crate) fn effects(program: &str, args: &[Word]) -> Vec<Effect> {
    match program {
        "rm" | "rmdir" | "unlink" | "shred" | "tee" => {
            all(Access::Write, &Args::split(args, &SHRED).operands)
        }
        "touch" => all(
            Access::Write,
            &Args::split(args, &["-d", "-r", "-t"]).operands,
        ),
        "mkdir" => all(
            Access::Write,
            &Args::split(args, &["-m", "--mode", "--context"]).operands,
        ),
        "truncate" => all(
            Access::Write,
            &Args::split(args, &["-s", "-r", "--size", "--reference"]).operands,
        ),
        "chmod" | "chown" | "chgrp" => ownership(args),
        "cp" | "install" | "mv" | "rsync" => copy(program, args),
        "ln" => link(args),
        "dd" => dd(args),
        "sed" => crate::sed::effects(args),
        "find" => find(args),
        "git" => args
            .iter()
            .filter_map(|w| w.text.strip_prefix("--output="))
            .map(|out| Effect::File(Access::Write, Word::literal(out)))
            .collect(),
        "tree" => read_and_log(args, &["-o"], &["-L", "-P", "-I", "--charset"]),
        "less" => read_and_log(
            args,
            &["-o", "-O", "--log-file", "--LOG-FILE"],
            &["-b", "-h", "-j", "-x", "-y", "-z"],
        ),
        "xxd" => {
            let operands = Args::split(args, &["-c", "-g", "-l", "-o", "-s", "-n"]).operands;
            let mut effects = all(Access::Read, &operands[..operands.len().min(1)]);
            effects.extend(all(Access::Write, operands.get(1..2).unwrap_or(&[])));
            effects
        }
        "sort" => sort(args),
        "uniq" => {
            let operands = Args::split(args, &["-f", "-s", "-w"]).operands;
            let mut effects = all(Access::Read, &operands[..operands.len().min(1)]);
            effects.extend(all(Access::Write, operands.get(1..2).unwrap_or(&[])));
            effects
        }
        "grep" | "egrep" | "fgrep" | "rg" => grep(program, args),
        "cat" | "head" | "tail" | "more" | "wc" | "cut" | "diff" | "cmp" | "stat" | "file"
        | "nl" | "od" | "hexdump" | "md5sum" | "sha1sum" | "sha256sum" | "sha512sum" | "cksum"
        | "tac" | "strings" | "ls" | "du" | "source" | "." => {
            all(Access::Read, &Args::split(args, &READ_VALUED).operands)
        }
        _ => Vec::new(),
    }
}

const SHRED: [&str; 3] = ["-n", "-s", "--random-source"];
const READ_VALUED: [&str; 14] = [
    "-n",
    "-c",
    "--lines",
    "--bytes",
    "-d",
    "-f",
    "-b",
    "--output-delimiter",
    "-U",
    "-C",
    "-x",
    "-X",
    "-I",
    "--hide",
];

/// `tree DIR… -o FILE`, `less FILE… -o LOG`: operands read, the log written.
fn read_and_log(args: &[Word], log: &[&str], valued: &[&str]) -> Vec<Effect> {
    let all_valued: Vec<&str> = log.iter().chain(valued).copied().collect();
    let parsed = Args::split(args, &all_valued);
    let mut effects = all(Access::Read, &parsed.operands);
    effects.extend(one(Access::Write, parsed.value(log)));
    effects
}

/// `chmod MODE FILE…`: the first operand is the mode, unless `--reference`.
fn ownership(args: &[Word]) -> Vec<Effect> {
    let parsed = Args::split(args, &[]);
    let skip = usize::from(parsed.value(&["--reference"]).is_none());
    all(Access::Write, parsed.operands.get(skip..).unwrap_or(&[]))
}

/// `cp SRC… DEST` / `cp -t DIR SRC…`: sources read (written too for `mv`),
/// the destination written. A remote rsync side (`host:path`) is not a
/// local path; the rules deny the remote copy itself.
fn copy(program: &str, args: &[Word]) -> Vec<Effect> {
    let valued = [
        "-t",
        "--target-directory",
        "-S",
        "--suffix",
        "-m",
        "--mode",
        "-o",
        "--owner",
        "-g",
        "--group",
        "-e",
        "--rsh",
        "--exclude",
        "--include",
        "-f",
        "--filter",
        "-T",
        "--temp-dir",
        "-B",
        "--port",
    ];
    let parsed = Args::split(args, &valued);
    let local: Vec<&Word> = parsed
        .operands
        .iter()
        .copied()
        .filter(|w| !w.text.contains(':'))
        .collect();
    let source_access = if program == "mv" {
        Access::Write
    } else {
        Access::Read
    };
    if let Some(target) = parsed.value(&["-t", "--target-directory"]) {
        let mut effects = all(source_access, &local);
        effects.push(Effect::File(Access::Write, target));
        return effects;
    }
    match parsed.operands.split_last() {
        Some((last, sources)) => {
            let sources: Vec<&Word> = sources
                .iter()
                .copied()
                .filter(|w| !w.text.contains(':'))
                .collect();
            let mut effects = all(source_access, &sources);
            if !last.text.contains(':') {
                effects.push(Effect::File(Access::Write, (*last).clone()));
            }
            effects
        }
        None => Vec::new(),
    }
}

/// `ln [-s] TARGET LINK`: only the link is written; with one operand the
/// link goes in the current directory.
fn link(args: &[Word]) -> Vec<Effect> {
    let parsed = Args::split(args, &["-t", "--target-directory", "-S", "--suffix"]);
    if let Some(target) = parsed.value(&["-t", "--target-directory"]) {
        return vec![Effect::File(Access::Write, target)];
    }
    match parsed.operands.as_slice() {
        [] => Vec::new(),
        [_] => vec![Effect::File(Access::Write, Word::literal("."))],
        [.., last] => vec![Effect::File(Access::Write, (*last).clone())],
    }
}

fn dd(args: &[Word]) -> Vec<Effect> {
    args.iter()
        .filter_map(|w| {
            let (key, value) = w.text.split_once('=')?;
            let access = match key {
                "if" => Access::Read,
                "of" => Access::Write,
                _ => return None,
            };
            Some(Effect::File(
                access,
                Word {
                    text: value.to_string(),
                    ..w.clone()
                },
            ))
        })
        .collect()
}

/// `find PATH… EXPR`: `-fprint FILE` and friends write FILE; `-delete`
/// writes (deletes under) the start paths.
fn find(args: &[Word]) -> Vec<Effect> {
    let mut effects = Vec::new();
    let starts: Vec<&Word> = args
        .iter()
        .take_while(|w| !w.text.starts_with('-') && !matches!(w.text.as_str(), "(" | "!" | ","))
        .collect();
    for (at, word) in args.iter().enumerate() {
        match word.text.as_str() {
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                effects.extend(one(Access::Write, args.get(at + 1).cloned()))
            }
            "-delete" if starts.is_empty() => {
                effects.push(Effect::File(Access::Write, Word::literal(".")))
            }
            "-delete" => effects.extend(all(Access::Write, &starts)),
            _ => {}
        }
    }
    effects
}

fn sort(args: &[Word]) -> Vec<Effect> {
    let valued = [
        "-k",
        "--key",
        "-t",
        "--field-separator",
        "-o",
        "--output",
        "-S",
        "--buffer-size",
        "-T",
        "--temporary-directory",
    ];
    let parsed = Args::split(args, &valued);
    let mut effects = all(Access::Read, &parsed.operands);
    effects.extend(one(Access::Write, parsed.value(&["-o", "--output"])));
    effects
}

/// `grep PATTERN FILE…`, or `grep -e PATTERN FILE…`.
fn grep(program: &str, args: &[Word]) -> Vec<Effect> {
    let mut valued = vec![
        "-e",
        "--regexp",
        "-f",
        "--file",
        "-m",
        "--max-count",
        "-A",
        "-B",
        "-C",
        "--context",
        "-d",
        "-D",
        "-g",
        "--glob",
        "-t",
        "--type",
        "-T",
        "--type-not",
        "-j",
        "--threads",
        "-M",
        "--max-columns",
        "--max-depth",
    ];
    if program == "rg" {
        valued.extend(["-r", "--replace"]);
    }
    let parsed = Args::split(args, &valued);
    let skip = usize::from(parsed.value(&["-e", "--regexp", "-f", "--file"]).is_none());
    all(Access::Read, parsed.operands.get(skip..).unwrap_or(&[]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(line: &str) -> Vec<String> {
        let words: Vec<Word> = line.split(' ').map(Word::literal).collect();
        effects(&words[0].text, &words[1..])
            .into_iter()
            .map(|effect| match effect {
                Effect::File(access, w) => format!("{} {}", access.as_str(), w.text),
                Effect::Opaque(why) => format!("opaque: {why}"),
            })
            .collect()
    }

    #[test]
    fn file_commands() {
        assert_eq!(show("rm -f a b"), ["write a", "write b"]);
        assert_eq!(show("cp -r a /etc/b"), ["read a", "write /etc/b"]);
        assert_eq!(show("mv a b"), ["write a", "write b"]);
        assert_eq!(show("cp -t /opt a"), ["read a", "write /opt"]);
        assert_eq!(
            show("cp --target-directory=/opt a"),
            ["read a", "write /opt"]
        );
        assert_eq!(show("ln -s /etc/passwd link"), ["write link"]);
        assert_eq!(show("chmod -R 755 /usr/x"), ["write /usr/x"]);
        assert_eq!(
            show("dd if=/dev/zero of=/dev/sda bs=1M"),
            ["read /dev/zero", "write /dev/sda"]
        );
        assert_eq!(show("rsync -a src host:dst"), ["read src"]);
        assert_eq!(show("mkdir -m 755 -p a/b"), ["write a/b"]);
    }

    #[test]
    fn sed_sort_grep() {
        assert_eq!(show("sed -i s/a/b/ f"), ["write f"]);
        assert_eq!(show("sed -ni.bak -e p f"), ["write f"]);
        assert_eq!(show("sed -n p f"), ["read f"]);
        assert_eq!(show("sort -o out in"), ["read in", "write out"]);
        assert_eq!(show("grep -rn foo src"), ["read src"]);
        assert_eq!(show("grep -e foo -e bar a b"), ["read a", "read b"]);
        assert_eq!(show("head -n 5 f"), ["read f"]);
        assert!(show("sed s/x/y/e f")[1].starts_with("opaque"));
        assert!(show("sed -n -e p -e w/etc/x f")[1].starts_with("opaque"));
        assert!(show("sed -f script.sed f")[1].starts_with("opaque"));
    }

    #[test]
    fn find_git_and_friends() {
        assert_eq!(show("find /tmp -name x -delete"), ["write /tmp"]);
        assert_eq!(show("find -delete"), ["write ."]);
        assert_eq!(show("find . -fprint /etc/x"), ["write /etc/x"]);
        assert_eq!(show("git log --output=/etc/x"), ["write /etc/x"]);
        assert_eq!(show("xxd -r dump bin"), ["read dump", "write bin"]);
        assert_eq!(show("tree -o /etc/x src"), ["read src", "write /etc/x"]);
        assert_eq!(show("less -o log f"), ["read f", "write log"]);
    }
}
