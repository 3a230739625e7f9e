//! Which paths of the tracked folder the repository ignores, as Git decides it: the
//! `.gitignore` of every folder (patterns, negations, anchored and folder-only patterns, `**`)
//! and `.git/info/exclude`, matched by the `ignore` crate's gitignore module
//! (`notes/2026-12-06-gitignore-matching.md`). Ignored files are counted by folder, not diffed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

/// The ignore rules of one folder tree.
pub(super) struct Ignores {
    root: PathBuf,
    /// The `.gitignore` of each folder that has one, by folder (relative; empty: the root).
    files: BTreeMap<PathBuf, Gitignore>,
    /// `.git/info/exclude`: below every `.gitignore` in precedence.
    exclude: Gitignore,
}

/// The rules of the file `file`, whose patterns are relative to `dir`; `None` when it is not a
/// regular file (never read through a symlink) or holds no rule.
fn rules(dir: &Path, file: &Path) -> Option<Gitignore> {
    if !std::fs::symlink_metadata(file).ok()?.is_file() {
        return None;
    }
    let mut builder = GitignoreBuilder::new(dir);
    if let Some(error) = builder.add(file) {
        tracing::debug!(%error, file = %file.display(), "some ignore rules were not read");
    }
    builder.build().ok().filter(|rules| !rules.is_empty())
}

impl Ignores {
    /// The rules of `root` (canonical): its `.git/info/exclude` now; each folder's
    /// `.gitignore` as [`Ignores::load`] reads it.
    pub fn new(root: &Path) -> Ignores {
        let exclude = rules(root, &root.join(".git/info/exclude")).unwrap_or_else(Gitignore::empty);
        Ignores {
            root: root.to_path_buf(),
            files: BTreeMap::new(),
            exclude,
        }
    }

    /// Reads (again) the `.gitignore` of folder `dir` (relative), or forgets it once gone.
    pub fn load(&mut self, dir: &Path) {
        let folder = self.root.join(dir);
        match rules(&folder, &folder.join(".gitignore")) {
            Some(rules) => {
                self.files.insert(dir.to_path_buf(), rules);
            }
            None => {
                self.files.remove(dir);
            }
        }
    }

    /// Whether Git ignores `rel` itself (its folders not looked at): the deepest `.gitignore`
    /// with a matching rule decides (its last matching rule: a `!` one re-includes), then
    /// `.git/info/exclude`.
    fn decides(&self, rel: &Path, is_dir: bool) -> bool {
        let path = self.root.join(rel);
        let mut folder = rel.parent();
        while let Some(dir) = folder {
            if let Some(rules) = self.files.get(dir) {
                match rules.matched(&path, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            folder = dir.parent();
        }
        self.exclude.matched(&path, is_dir).is_ignore()
    }

    /// Where `rel` (a file, or a folder when `is_dir`) is counted when the repository ignores
    /// it: its topmost ignored folder, or, for a file ignored by itself, the folder it is in
    /// (`.` at the top). `None` when it is not ignored. As in Git, nothing under an ignored
    /// folder is re-included.
    pub fn folder(&self, rel: &Path, is_dir: bool) -> Option<PathBuf> {
        if self.files.is_empty() && self.exclude.is_empty() {
            return None;
        }
        let parts: Vec<_> = rel.components().collect();
        let mut prefix = PathBuf::new();
        for (at, part) in parts.iter().enumerate() {
            prefix.push(part);
            let dir = at + 1 < parts.len() || is_dir;
            if self.decides(&prefix, dir) {
                return Some(match dir {
                    true => prefix,
                    false => match prefix.parent() {
                        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
                        _ => PathBuf::from("."),
                    },
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// Git itself is the oracle: for every path of a tree with root, nested and
    /// `.git/info/exclude` rules (wildcards, negations, anchored and folder-only patterns,
    /// `**`), the paths `git check-ignore` names are exactly those given a folder here.
    #[test]
    fn git_check_ignore_agrees_on_every_path() {
        if Command::new("git").arg("--version").output().is_err() {
            panic!("git is needed for this test (the oracle)");
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .args(args)
                .current_dir(&root)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        let files = [
            ".gitignore",
            ".git/info/exclude",
            "a.txt",
            "a.log",
            "keep.log",
            "target/debug/x",
            "src/target/y",
            "src/main.rs",
            "src/gen/out.rs",
            "src/.gitignore",
            "src/notes.tmp",
            "src/deep/important.tmp",
            "src/deep/other.tmp",
            "docs/build/index.html",
            "docs/build.txt",
            "build/z",
            "node_modules/p/index.js",
            "logs/2026/a.txt",
            "logs/2026/keep/b.txt",
            "secret.env",
            "local/thing",
            "[brackets].txt",
            "sp ace.bak",
        ];
        for file in files {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            if !path.exists() {
                std::fs::write(&path, "x\n").unwrap();
            }
        }
        std::fs::write(
            root.join(".gitignore"),
            "# comment\n*.log\n!keep.log\ntarget/\n/build\ndocs/**/index.html\nnode_modules\n\
             logs/**\n!logs/**/keep/\n*.env\n\\[brackets\\].txt\nsp\\ ace.bak\n",
        )
        .unwrap();
        std::fs::write(
            root.join("src/.gitignore"),
            "gen/\n*.tmp\n!deep/important.tmp\n",
        )
        .unwrap();
        std::fs::write(root.join(".git/info/exclude"), "/local\n").unwrap();
        let mut ignores = Ignores::new(&root);
        for dir in ["", "src", "src/deep", "src/gen", "logs", "docs"] {
            ignores.load(Path::new(dir));
        }
        let paths: Vec<&str> = files
            .iter()
            .copied()
            .filter(|f| !f.starts_with(".git/"))
            .collect();
        let mut check = Command::new("git")
            .args(["check-ignore", "--stdin"])
            .current_dir(&root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut stdin = check.stdin.take().unwrap();
            for path in &paths {
                writeln!(stdin, "{path}").unwrap();
            }
        }
        let output = check.wait_with_output().unwrap();
        let by_git: Vec<String> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        let by_us: Vec<String> = paths
            .iter()
            .filter(|path| ignores.folder(Path::new(path), false).is_some())
            .map(|path| path.to_string())
            .collect();
        assert_eq!(by_us, by_git);
        // Every kind of rule took part, both ways.
        for ignored in [
            "a.log",
            "target/debug/x",
            "src/target/y",
            "src/gen/out.rs",
            "local/thing",
        ] {
            assert!(by_git.iter().any(|p| p == ignored), "{ignored}: {by_git:?}");
        }
        for kept in [
            "keep.log",
            "src/deep/important.tmp",
            "docs/build.txt",
            "src/main.rs",
        ] {
            assert!(!by_git.iter().any(|p| p == kept), "{kept}: {by_git:?}");
        }
        // Counted by the topmost ignored folder, or a file's own folder.
        assert_eq!(
            ignores.folder(Path::new("target/debug/x"), false),
            Some(PathBuf::from("target"))
        );
        assert_eq!(
            ignores.folder(Path::new("src/notes.tmp"), false),
            Some(PathBuf::from("src"))
        );
        assert_eq!(
            ignores.folder(Path::new("a.log"), false),
            Some(PathBuf::from("."))
        );
    }
}
