//! What each known program does with its words: the reads, searches and listings, and the
//! formatting stages a pipeline may end with. A program or an option not known here is no
//! action ([`None`]); so is one that writes (`sed -i`, `sort -o`, `find -delete`, `fd -x`).

use super::words::Command;
use super::Action;

/// The options of one command, split from its operands.
#[derive(Debug, Default)]
struct Args {
    /// Options without a value, as written (`-n`, `--files`); a bundle `-rn` is `-r`, `-n`.
    flags: Vec<String>,
    /// Options with their value (`-n 40`, `--glob=*.rs`, `-n40`).
    values: Vec<(String, String)>,
    /// Everything else, in order (after `--`, everything).
    operands: Vec<String>,
}

impl Args {
    fn has(&self, names: &[&str]) -> bool {
        self.flags.iter().any(|flag| names.contains(&flag.as_str()))
            || self
                .values
                .iter()
                .any(|(name, _)| names.contains(&name.as_str()))
    }

    fn value(&self, names: &[&str]) -> Option<&str> {
        self.values
            .iter()
            .find(|(name, _)| names.contains(&name.as_str()))
            .map(|(_, value)| value.as_str())
    }

    /// Every option is one of `allowed` (or `-NUM` when `numbers`).
    fn only(&self, allowed: &[&str], numbers: bool) -> bool {
        let names = self
            .flags
            .iter()
            .chain(self.values.iter().map(|(name, _)| name));
        names.into_iter().all(|name| {
            allowed.contains(&name.as_str())
                || (numbers && name.len() > 1 && name[1..].bytes().all(|b| b.is_ascii_digit()))
        })
    }
}

/// The options of a whitespace-separated list (`"-n --lines"`): a tool's table written compactly.
fn options(list: &'static str) -> Vec<&'static str> {
    list.split_whitespace().collect()
}

/// Splits `words` into options and operands; `valued` are the options that take a value
/// (`-n`, `--lines`). `None` when a valued option has no value.
fn split(words: &[String], valued: &[&str]) -> Option<Args> {
    let mut args = Args::default();
    let mut rest = words.iter();
    while let Some(word) = rest.next() {
        if word == "--" {
            args.operands.extend(rest.cloned());
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            match long.split_once('=') {
                Some((name, value)) => args.values.push((format!("--{name}"), value.to_string())),
                None if valued.contains(&word.as_str()) => {
                    args.values.push((word.clone(), rest.next()?.clone()));
                }
                None => args.flags.push(word.clone()),
            }
        } else if word.len() > 1 && word.starts_with('-') {
            if word[1..].bytes().all(|b| b.is_ascii_digit()) {
                args.flags.push(word.clone());
                continue;
            }
            for (at, c) in word.char_indices().skip(1) {
                let name = format!("-{c}");
                if valued.contains(&name.as_str()) {
                    let attached = &word[at + c.len_utf8()..];
                    let value = if attached.is_empty() {
                        rest.next()?.clone()
                    } else {
                        attached.to_string()
                    };
                    args.values.push((name, value));
                    break;
                }
                args.flags.push(name);
            }
        } else {
            args.operands.push(word.clone());
        }
    }
    Some(args)
}

/// The one file of a read: exactly one operand, not stdin.
fn one_file(args: &Args) -> Option<String> {
    match args.operands.as_slice() {
        [file] if file != "-" && !file.is_empty() => Some(file.clone()),
        _ => None,
    }
}

fn read(path: String, line: Option<u32>) -> Action {
    Action::Read { path, line }
}

const HEAD_TAIL: &[&str] = &["-n", "-c", "--lines", "--bytes"];
const HEAD_TAIL_OK: &[&str] = &[
    "-n",
    "-c",
    "-q",
    "-v",
    "-z",
    "--lines",
    "--bytes",
    "--quiet",
    "--silent",
    "--verbose",
    "--zero-terminated",
];
const NL: &[&str] = &["-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"];
const SORT: &[&str] = &["-k", "-t", "-S", "-T", "--key", "--field-separator"];
const UNIQ: &[&str] = &["-f", "-s", "-w"];
const CUT: &[&str] = &["-d", "-f", "-c", "-b", "--output-delimiter"];
const COLUMN: &[&str] = &["-s", "-c", "-o"];

/// What `command` does, when it is one read, search or listing.
pub(super) fn action(command: &Command) -> Option<Action> {
    let (program, words) = command.split_first()?;
    match program.as_str() {
        "cat" => {
            let args = split(words, &[])?;
            Some(read(one_file(&args)?, None))
        }
        "head" | "tail" => {
            let args = split(words, HEAD_TAIL)?;
            args.only(HEAD_TAIL_OK, true)
                .then(|| one_file(&args))?
                .map(|file| read(file, None))
        }
        "nl" => {
            let args = split(words, NL)?;
            Some(read(one_file(&args)?, None))
        }
        "bat" | "batcat" => bat(words),
        "sed" => sed(words),
        "rg" => rg(words),
        "grep" | "egrep" | "fgrep" => grep(words, false),
        "git" => match words.split_first() {
            Some((sub, rest)) if sub == "grep" => grep(rest, true),
            Some((sub, rest)) if sub == "ls-files" => {
                let args = split(rest, &["-x", "--exclude", "-X", "--exclude-from"])?;
                Some(Action::List {
                    paths: args.operands,
                })
            }
            _ => None,
        },
        "fd" | "fdfind" => fd(words),
        "find" => find(words),
        "ls" => {
            let valued = options("-I --ignore -w --width -T --tabsize --hide");
            let args = split(words, &valued)?;
            Some(Action::List {
                paths: args.operands,
            })
        }
        "tree" => {
            let args = split(words, &["-L", "-P", "-I", "--filelimit", "-o"])?;
            if args.has(&["-o"]) {
                return None;
            }
            Some(Action::List {
                paths: args.operands,
            })
        }
        _ => None,
    }
}

/// `bat f`, `bat -r 10:20 f` (a read from line 10).
fn bat(words: &[String]) -> Option<Action> {
    let valued = options(
        "-l --language -r --line-range -H --highlight-line --style --theme --tabs --wrap \
         --terminal-width -m --map-syntax --file-name --paging --color --decorations --pager",
    );
    let args = split(words, &valued)?;
    if args.has(&["--pager"]) {
        return None;
    }
    let line = args
        .value(&["-r", "--line-range"])
        .and_then(|range| range.split(':').next()?.parse().ok());
    Some(read(one_file(&args)?, line))
}

/// `sed -n '80,120p' f` (a read from line 80); any other sed is not a read.
fn sed(words: &[String]) -> Option<Action> {
    let args = split(words, &["-e", "--expression"])?;
    let allowed = [
        "-n",
        "--quiet",
        "--silent",
        "-E",
        "-r",
        "--regexp-extended",
        "-e",
        "--expression",
    ];
    if !args.only(&allowed, false) || !args.has(&["-n", "--quiet", "--silent"]) {
        return None;
    }
    let (script, files) = match args.value(&["-e", "--expression"]) {
        Some(script) => (script.to_string(), args.operands.as_slice()),
        None => {
            let (script, files) = args.operands.split_first()?;
            (script.clone(), files)
        }
    };
    let line = printed_range(&script)?;
    match files {
        [file] if file != "-" => Some(read(file.clone(), Some(line))),
        _ => None,
    }
}

/// The first line of a sed script that only prints a range: `N`, `Np`, `N,Mp`, `N,$p`.
fn printed_range(script: &str) -> Option<u32> {
    let range = script.trim().strip_suffix('p')?;
    let (first, last) = match range.split_once(',') {
        Some((first, last)) => (first, Some(last)),
        None => (range, None),
    };
    let first: u32 = first.parse().ok().filter(|&line| line > 0)?;
    if let Some(last) = last {
        if last != "$" && last.parse::<u32>().is_err() {
            return None;
        }
    }
    Some(first)
}

/// `rg PATTERN [PATH…]` a search; `rg --files [PATH…]` a listing.
fn rg(words: &[String]) -> Option<Action> {
    let valued = options(
        "-e --regexp -g --glob --iglob -t --type -T --type-not -m --max-count -A -B -C \
         --context -d --max-depth -M --max-columns -j --threads --sort --sortr --color -E \
         --encoding -r --replace -f --file --pre --pre-glob --max-filesize",
    );
    let args = split(words, &valued)?;
    if args.has(&["-f", "--file", "--pre", "--pre-glob"]) {
        return None;
    }
    if args.has(&["--files"]) {
        return Some(Action::List {
            paths: args.operands,
        });
    }
    search(&args, &["-e", "--regexp"], true)
}

/// A search's pattern (`-e P`, or the first operand) and paths (the rest; `.` when none and
/// `searches_cwd`, else it reads stdin: no search of files).
fn search(args: &Args, pattern_options: &[&str], searches_cwd: bool) -> Option<Action> {
    let (query, paths) = match args.value(pattern_options) {
        Some(pattern) => (pattern.to_string(), args.operands.clone()),
        None => {
            let (pattern, paths) = args.operands.split_first()?;
            (pattern.clone(), paths.to_vec())
        }
    };
    if paths.is_empty() && !searches_cwd {
        return None;
    }
    Some(Action::Search { query, paths })
}

/// `grep -rn P [PATH…]`, `git grep P [-- PATH…]`.
fn grep(words: &[String], git: bool) -> Option<Action> {
    let valued = options(
        "-e --regexp -f --file -m --max-count -A -B -C --context --include --exclude \
         --exclude-dir -d --directories -D --devices --max-depth --color --colour -O --open- \
         files-in-pager",
    );
    let args = split(words, &valued)?;
    if args.has(&["-f", "--file", "-O", "--open-files-in-pager"]) {
        return None;
    }
    let recursive = args.has(&["-r", "-R", "--recursive", "--dereference-recursive"])
        || args.value(&["-d", "--directories"]) == Some("recurse");
    search(&args, &["-e", "--regexp"], git || recursive)
}

/// `fd [PATTERN] [PATH…]`: a search by name, or a listing without a pattern.
fn fd(words: &[String]) -> Option<Action> {
    let valued = options(
        "-e --extension -t --type -d --max-depth --min-depth --exact-depth -E --exclude -c \
         --color -j --threads -S --size --changed-within --changed-before -o --owner --max- \
         results -x --exec -X --exec-batch --base-directory --search-path --path-separator \
         --format",
    );
    let args = split(words, &valued)?;
    if args.has(&["-x", "--exec", "-X", "--exec-batch", "--base-directory"]) {
        return None;
    }
    let mut operands = args.operands.clone();
    let searched: Vec<String> = args
        .values
        .iter()
        .filter(|(name, _)| name == "--search-path")
        .map(|(_, value)| value.clone())
        .collect();
    if operands.is_empty() {
        return Some(Action::List { paths: searched });
    }
    let query = operands.remove(0);
    operands.extend(searched);
    Some(Action::Search {
        query,
        paths: operands,
    })
}

/// `find [PATH…] [TESTS]`: a search when a test names files (`-name`, `-path`, `-regex`), a
/// listing without one; any action other than printing (`-exec`, `-delete`, `-fprint`) is not.
fn find(words: &[String]) -> Option<Action> {
    const VALUED: &[&str] = &[
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-lname",
        "-ilname",
        "-type",
        "-xtype",
        "-maxdepth",
        "-mindepth",
        "-size",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-newer",
        "-user",
        "-group",
        "-perm",
        "-regextype",
        "-links",
        "-printf",
    ];
    const BARE: &[&str] = &[
        "-print",
        "-print0",
        "-o",
        "-or",
        "-a",
        "-and",
        "-not",
        "!",
        "(",
        ")",
        "-empty",
        "-readable",
        "-writable",
        "-executable",
        "-prune",
        "-true",
        "-false",
        "-depth",
        "-mount",
        "-xdev",
        "-nowarn",
        "-ls",
        "-daystart",
        "-follow",
    ];
    const NAMES: &[&str] = &[
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
    ];
    let mut rest = words.iter().peekable();
    while rest
        .peek()
        .is_some_and(|w| matches!(w.as_str(), "-H" | "-L" | "-P"))
    {
        rest.next();
    }
    let mut paths = Vec::new();
    while let Some(word) = rest.peek() {
        if word.starts_with('-') || *word == "!" || *word == "(" || *word == ")" {
            break;
        }
        paths.push(rest.next()?.clone());
    }
    let mut query = None;
    while let Some(word) = rest.next() {
        if VALUED.contains(&word.as_str()) {
            let value = rest.next()?;
            if query.is_none() && NAMES.contains(&word.as_str()) {
                query = Some(value.clone());
            }
        } else if !BARE.contains(&word.as_str()) {
            return None;
        }
    }
    Some(match query {
        Some(query) => Action::Search { query, paths },
        None => Action::List { paths },
    })
}

/// Whether `command`, after the first stage of a pipeline, only shapes what it is given
/// (`head`, `tail`, `wc -l`, `sort`, `uniq`, `cut`, `tr`, `column`, `cat`, `nl`): it reads no
/// file and writes none.
pub(super) fn is_formatting(command: &Command) -> bool {
    let Some((program, words)) = command.split_first() else {
        return false;
    };
    let stdin_only = |valued: &[&str]| split(words, valued).is_some_and(|a| a.operands.is_empty());
    match program.as_str() {
        "head" | "tail" => split(words, HEAD_TAIL)
            .is_some_and(|args| args.operands.is_empty() && args.only(HEAD_TAIL_OK, true)),
        "wc" | "cat" => stdin_only(&[]),
        "sort" => split(words, SORT)
            .is_some_and(|args| args.operands.is_empty() && !args.has(&["-o", "--output"])),
        "uniq" => stdin_only(UNIQ),
        "cut" => stdin_only(CUT),
        "column" => stdin_only(COLUMN),
        "nl" => stdin_only(NL),
        "tr" => split(words, &[]).is_some_and(|args| args.operands.len() <= 2),
        _ => false,
    }
}
