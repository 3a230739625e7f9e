use super::*;

fn cwd() -> PathBuf {
    PathBuf::from("/home/me/proj")
}

/// A classification as (kind, title, [(path, line)]).
type Shown = (CallKind, String, Vec<(String, Option<u32>)>);

fn shown(script: &str) -> Option<Shown> {
    classify(script, &cwd()).map(|c| {
        let locations = c
            .locations
            .into_iter()
            .map(|l| (l.path.to_string_lossy().into_owned(), l.line))
            .collect();
        (c.kind, c.title, locations)
    })
}

fn title(script: &str) -> Option<String> {
    shown(script).map(|(_, title, _)| title)
}

#[track_caller]
fn read(script: &str, title_is: &str, path: &str, line: Option<u32>) {
    assert_eq!(
        shown(script),
        Some((
            CallKind::Read,
            title_is.to_string(),
            vec![(path.to_string(), line)]
        )),
        "{script}"
    );
}

#[test]
fn single_reads_are_reads_of_their_file() {
    read("cat f", "Read f", "/home/me/proj/f", None);
    read(
        "head -n 40 src/a.rs",
        "Read src/a.rs",
        "/home/me/proj/src/a.rs",
        None,
    );
    read("head -40 a", "Read a", "/home/me/proj/a", None);
    read("tail -n +5 a", "Read a", "/home/me/proj/a", None);
    read("sed -n '1,80p' f", "Read f", "/home/me/proj/f", Some(1));
    read("sed -n 120,200p f", "Read f", "/home/me/proj/f", Some(120));
    read("sed -n -e '7,$p' f", "Read f", "/home/me/proj/f", Some(7));
    read("nl -ba f", "Read f", "/home/me/proj/f", None);
    read("nl -b a f", "Read f", "/home/me/proj/f", None);
    read("bat f", "Read f", "/home/me/proj/f", None);
    read("bat -r 30:40 f", "Read f", "/home/me/proj/f", Some(30));
    read("cat /etc/hosts", "Read /etc/hosts", "/etc/hosts", None);
    read("cat ../x", "Read /home/me/x", "/home/me/x", None);
}

#[test]
fn searches_name_their_pattern_and_where() {
    assert_eq!(title("rg foo").as_deref(), Some("Search 'foo' in ."));
    assert_eq!(
        title("rg -n 'fn main' src").as_deref(),
        Some("Search 'fn main' in src")
    );
    assert_eq!(
        title("rg -e foo -g '*.rs' src tests").as_deref(),
        Some("Search 'foo' in src, tests")
    );
    assert_eq!(
        title("grep -rn TODO src").as_deref(),
        Some("Search 'TODO' in src")
    );
    assert_eq!(
        title("grep -rn TODO").as_deref(),
        Some("Search 'TODO' in .")
    );
    assert_eq!(
        title("grep TODO a.txt").as_deref(),
        Some("Search 'TODO' in a.txt")
    );
    assert_eq!(
        title("git grep -n foo -- src").as_deref(),
        Some("Search 'foo' in src")
    );
    assert_eq!(
        title("fd main src").as_deref(),
        Some("Search 'main' in src")
    );
    assert_eq!(
        title("find . -name '*.rs'").as_deref(),
        Some("Search '*.rs' in .")
    );
    assert_eq!(
        title("find src -type f -iname 'x*'").as_deref(),
        Some("Search 'x*' in src")
    );
    let (kind, _, locations) = shown("rg foo src").unwrap();
    assert_eq!(kind, CallKind::Search);
    assert_eq!(locations, vec![("/home/me/proj/src".to_string(), None)]);
}

#[test]
fn listings_are_reads_titled_list() {
    for (script, expected) in [
        ("ls", "List ."),
        ("ls -la src", "List src"),
        ("tree -L 2", "List ."),
        ("rg --files", "List ."),
        ("rg --files src", "List src"),
        ("git ls-files", "List ."),
        ("find . -type f", "List ."),
        ("find src -maxdepth 1", "List src"),
        ("fd", "List ."),
    ] {
        let (kind, title, _) = shown(script).unwrap_or_else(|| panic!("{script}"));
        assert_eq!(
            (kind, title.as_str()),
            (CallKind::List, expected),
            "{script}"
        );
    }
}

#[test]
fn cd_prefixes_are_followed_and_formatting_stages_dropped() {
    read(
        "cd src && cat a.rs",
        "Read src/a.rs",
        "/home/me/proj/src/a.rs",
        None,
    );
    read(
        "cd src && cd .. && cat a.rs",
        "Read a.rs",
        "/home/me/proj/a.rs",
        None,
    );
    read("cd /tmp && cat a", "Read /tmp/a", "/tmp/a", None);
    read("cat f | head -n 20", "Read f", "/home/me/proj/f", None);
    assert_eq!(
        title("cd src && rg foo").as_deref(),
        Some("Search 'foo' in src")
    );
    assert_eq!(
        title("rg foo | wc -l").as_deref(),
        Some("Search 'foo' in .")
    );
    assert_eq!(title("rg --files | sort | head").as_deref(), Some("List ."));
    assert_eq!(
        title("ls src | sort -r | uniq | cut -c1-3 | tr a b").as_deref(),
        Some("List src")
    );
    assert_eq!(title("# look first\ncat f").as_deref(), Some("Read f"));
}

#[test]
fn anything_else_or_more_than_one_action_is_a_terminal() {
    for script in [
        "cargo test",
        "echo hi",
        "cat a b",
        "cat",
        "cat -",
        "cat f; ls",
        "cat f\nls",
        "cat f && ls",
        "cat f || ls",
        "ls && cd src",
        "cd src",
        "cd && ls",
        "cd - && ls",
        "cd a b && ls",
        "cat f | grep x",
        "cat f | sort -o out",
        "cat f | sort --output=out",
        "cat f | uniq - out",
        "cat f | tee out",
        "cat f |& head",
        "tail -f log",
        "head a b",
        "sed -i 's/a/b/' f",
        "sed -n 's/a/b/p' f",
        "sed 1,5p f",
        "sed -n 1,5p a b",
        "grep foo",
        "grep -f pats src",
        "rg --pre cat x",
        "find . -name x -delete",
        "find . -exec rm {} ;",
        "find . -name x -fprint out",
        "fd -x rm x",
        "tree -o out",
        "bat --pager 'rm -rf' f",
        "git log",
        "git -C x grep foo",
        "cat $HOME/f",
        "cat \"$F\"",
        "cat `pwd`/f",
        "cat $(pwd)/f",
        "cat ~/f",
        "cat *.rs",
        "cat f?",
        "cat {a,b}",
        "cat f > out",
        "cat < f",
        "cat f 2>/dev/null",
        "X=1 cat f",
        "(cat f)",
        "{ cat f; }",
        "if true; then cat f; fi",
        "cat f &",
        "! cat f",
        "cat $'f\\n'",
        "cat \"unterminated",
        "grep -n needle f'\n'\\$HOME",
        "cat f\\\t | sort",
        "",
        "   ",
    ] {
        assert_eq!(shown(script), None, "{script:?}");
    }
}

#[test]
fn quotes_and_escapes_are_undone_as_bash_undoes_them() {
    read("cat 'a b'", "Read a b", "/home/me/proj/a b", None);
    read("cat \"a b\"", "Read a b", "/home/me/proj/a b", None);
    read("cat a\\ b", "Read a b", "/home/me/proj/a b", None);
    read(
        "cat \"a\\\"b\\$c\\d\"",
        "Read a\"b$c\\d",
        "/home/me/proj/a\"b$c\\d",
        None,
    );
    read("cat 'a'\"b\"c", "Read abc", "/home/me/proj/abc", None);
    read("cat 'a\\b'", "Read a\\b", "/home/me/proj/a\\b", None);
}

#[test]
fn hostile_names_stay_one_line() {
    let (_, title, locations) = shown("cat 'a\nb\u{1b}[31m'").unwrap();
    assert_eq!(title, "Read a\\nb\\u{1b}[31m");
    assert_eq!(locations[0].0, "/home/me/proj/a\nb\u{1b}[31m");
    assert_eq!(title_of("rg 'x\ny' '`id`'"), "Search 'x\\ny' in `id`");
}

fn title_of(script: &str) -> String {
    title(script).unwrap_or_else(|| panic!("{script}"))
}

#[test]
fn long_scripts_and_relative_cwds_are_not_classified() {
    let long = format!("cat {}", "a".repeat(MAX_CLASSIFIED_BYTES));
    assert_eq!(classify(&long, &cwd()), None);
    assert_eq!(classify("cat f", Path::new("rel")), None);
}
