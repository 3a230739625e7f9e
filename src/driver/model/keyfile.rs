//! Keys stored by `acp-bash login`: one file per provider in the config directory
//! (`$XDG_CONFIG_HOME/acp-bash/keys/PROVIDER`, else `~/.config/acp-bash/keys/PROVIDER`), the
//! directory 0700 and the file 0600.
//!
//! Owns where the files are, writing one (a temporary file created 0600, then renamed over the
//! old one, so no reader ever sees a half-written or wider-open key) and reading one back, which
//! refuses a file that anyone but its owner may read or write (the key may have leaked: the
//! message says to `chmod 600` it or log in again). The model driver reads the file when the
//! key's environment variable is unset, and again before each prompt while it has no key (a
//! client's terminal login happens while the agent runs). Must not touch: the terminal, the
//! environment of commands (the directory is masked from them by the CLI), ACP.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::client::Provider;

/// The directory of stored keys under the config directory `config_home`
/// (`$XDG_CONFIG_HOME`, else `$HOME/.config`).
pub fn key_dir(config_home: &Path) -> PathBuf {
    config_home.join("acp-bash").join("keys")
}

/// The config directory from `XDG_CONFIG_HOME` (when absolute) or `HOME`, as read by `var`.
pub fn config_home(var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(dir) = var("XDG_CONFIG_HOME").map(PathBuf::from) {
        if dir.is_absolute() {
            return Some(dir);
        }
    }
    let home = PathBuf::from(var("HOME")?);
    home.is_absolute().then(|| home.join(".config"))
}

/// The file that holds `provider`'s key in `dir` (from [`key_dir`]).
pub fn key_file(dir: &Path, provider: Provider) -> PathBuf {
    dir.join(provider.id())
}

/// The key in `path`, `None` when there is no such file. `Err` says what is wrong: a file
/// others may read or write (never used), not a regular file, unreadable, or empty.
pub fn read_key(path: &Path) -> Result<Option<String>, String> {
    let file = match fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(format!(
                "cannot read the key file {}: {error}",
                path.display()
            ))
        }
    };
    // The opened file's own metadata: what is checked is what is read.
    let meta = file
        .metadata()
        .map_err(|error| format!("cannot read the key file {}: {error}", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "the key file {} is not a regular file: remove it and run `acp-bash login` again",
            path.display()
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "the key file {} is open to others (mode {mode:03o}), so it was not used: \
                 the key may have leaked. Revoke it at the provider and run `acp-bash login` \
                 again, or, if no one else could read it, `chmod 600 {}`.",
                path.display(),
                path.display()
            ));
        }
    }
    let mut key = String::new();
    file.take(64 * 1024)
        .read_to_string(&mut key)
        .map_err(|error| format!("cannot read the key file {}: {error}", path.display()))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(format!(
            "the key file {} is empty: run `acp-bash login` again",
            path.display()
        ));
    }
    Ok(Some(key.to_string()))
}

/// Writes `key` to `path` with mode 0600, its directory made 0700 if new; an existing file is
/// replaced at once (renamed over), whatever its mode was.
pub fn store_key(path: &Path, key: &str) -> Result<(), String> {
    let key = key.trim();
    if key.is_empty() {
        return Err("the key is empty: nothing was stored".into());
    }
    if key.contains(['\n', '\r', '\0']) {
        return Err("the key holds a line break or a NUL: paste one key on one line".into());
    }
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no directory", path.display()))?;
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut nonce = [0u8; 8];
    crate::random::random_bytes(&mut nonce);
    let temp = dir.join(format!(".{name}.{:x}", u64::from_le_bytes(nonce)));
    let write = || -> io::Result<()> {
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&temp)?;
        file.write_all(key.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        fs::rename(&temp, path)
    };
    write().map_err(|error| {
        let _ = fs::remove_file(&temp);
        format!("cannot write the key file {}: {error}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_home_is_xdg_when_absolute_else_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            config_home(env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
            Some(PathBuf::from("/x"))
        );
        assert_eq!(
            config_home(env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.config"))
        );
        assert_eq!(config_home(env(&[])), None);
        assert_eq!(
            key_file(&key_dir(Path::new("/x")), Provider::Anthropic),
            Path::new("/x/acp-bash/keys/anthropic")
        );
    }
}
