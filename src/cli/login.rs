//! `acp-bash login [PROVIDER]`: reads an API key from stdin and stores it 0600 in the config
//! directory (`$XDG_CONFIG_HOME/acp-bash/keys/PROVIDER`, see
//! `acp_bash::driver::model::keyfile`), for the model driver to use when the key's variable is
//! unset. This is the `terminal` auth method an editor runs (Zed appends `login PROVIDER` to the
//! agent's own arguments, so the serve flags before it are accepted and only `--model` counts).
//!
//! The key is never an argument (it would show in `ps` and shell history): on a terminal it is
//! read with echo off, else the first line of stdin. Owns: the prompt and the terminal's echo.
//! Must not touch: where or how the file is written (the library's `keyfile`).

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use acp_bash::driver::model::{keyfile, ModelConfig, Provider};
use clap::Args;

/// The flags of `login`.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct LoginArgs {
    /// Whose key: `openai` (also any OpenAI-compatible server) or `anthropic`. Default: the
    /// provider of `--model`.
    #[arg(value_name = "PROVIDER", value_parser = ["openai", "anthropic"])]
    pub provider: Option<String>,
}

/// What `login` runs with: the provider, from its argument or `--model`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    /// Whose key.
    pub provider: Provider,
}

impl LoginArgs {
    /// The provider named here, else by `model` (`--model`'s value); `Err` when neither.
    pub fn login(&self, model: Option<&str>) -> Result<Login, String> {
        let provider = match (self.provider.as_deref(), model) {
            (Some("anthropic"), _) => Provider::Anthropic,
            (Some(_), _) => Provider::OpenAi,
            (None, Some(model)) => ModelConfig::parse_spec(model)?.0,
            (None, None) => {
                return Err("whose key? write `acp-bash login openai` (also for any \
                            OpenAI-compatible server) or `acp-bash login anthropic`"
                    .into())
            }
        };
        Ok(Login { provider })
    }
}

/// The key file for `provider` under this process's config directory.
pub fn key_path(provider: Provider) -> Option<PathBuf> {
    let home = keyfile::config_home(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))?;
    Some(keyfile::key_file(&keyfile::key_dir(&home), provider))
}

pub fn login(login: &Login) -> ExitCode {
    let provider = login.provider;
    let Some(path) = key_path(provider) else {
        eprintln!(
            "acp-bash login: neither XDG_CONFIG_HOME nor HOME is an absolute path: there is no \
             config directory to store the key in. Set {} where the editor starts acp-bash \
             instead.",
            provider.key_env()
        );
        return ExitCode::FAILURE;
    };
    let stdin = std::io::stdin();
    let on_tty = stdin.is_terminal();
    if on_tty {
        eprint!(
            "Paste your {} API key (it is not shown) and press Enter: ",
            provider.id()
        );
        let _ = std::io::stderr().flush();
    }
    let key = match read_line(on_tty) {
        Ok(key) => key,
        Err(error) => {
            eprintln!("acp-bash login: cannot read the key from stdin: {error}");
            return ExitCode::FAILURE;
        }
    };
    match keyfile::store_key(&path, &key) {
        Ok(()) => {
            eprintln!(
                "Stored the {} key in {} (mode 600). acp-bash uses it when {} is unset; \
                 delete the file to log out.",
                provider.id(),
                path.display(),
                provider.key_env()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("acp-bash login: {error}");
            ExitCode::FAILURE
        }
    }
}

/// One line of stdin; on a terminal with echo off for the time of the read.
fn read_line(on_tty: bool) -> std::io::Result<String> {
    let _echo = if on_tty { EchoOff::new() } else { None };
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_string())
}

/// The terminal's echo turned off until dropped (restored even when the read fails).
struct EchoOff {
    saved: libc::termios,
}

impl EchoOff {
    fn new() -> Option<EchoOff> {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with a termios we own; no pointer outlives them.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(libc::STDIN_FILENO, &mut saved) != 0 {
                return None;
            }
            let mut quiet = saved;
            quiet.c_lflag &= !libc::ECHO;
            quiet.c_lflag |= libc::ECHONL;
            if libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &quiet) != 0 {
                return None;
            }
            Some(EchoOff { saved })
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: restores the settings read in `new` on the same fd.
        unsafe {
            libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.saved);
        }
    }
}
