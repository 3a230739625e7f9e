//! `acp-bash permissions [list | remove HOST|PREFIX]`: what was allowed always when asked
//! (`$XDG_CONFIG_HOME/acp-bash/permissions/allowed`, else `~/.config/…`), listed or taken back
//! from a terminal, through the same [`AlwaysFile`] code as the `/permissions` slash command.

use std::process::ExitCode;

use acp_bash::permit::AlwaysFile;
use clap::Args;

/// The flags of `permissions`.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct PermissionsArgs {
    /// `list` (the default), or `remove HOST` / `remove PREFIX`: take back what allows the
    /// host (`host HOST`) or the commands starting with PREFIX (`write FOLDER PREFIX`,
    /// `workspace PREFIX`); every other line of the file stays byte for byte.
    #[arg(value_name = "list | remove HOST|PREFIX")]
    pub action: Vec<String>,
}

/// What `permissions` does.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    List,
    Remove(String),
}

impl PermissionsArgs {
    fn action(&self) -> Result<Action, String> {
        match self.action.split_first() {
            None => Ok(Action::List),
            Some((first, [])) if first == "list" => Ok(Action::List),
            Some((first, rest)) if first == "remove" && !rest.is_empty() => {
                Ok(Action::Remove(rest.join(" ")))
            }
            _ => Err(format!(
                "`{}` is not `list`, `remove HOST` or `remove PREFIX`",
                self.action.join(" ")
            )),
        }
    }
}

/// The always file of this process's config directory.
fn always_file() -> Option<AlwaysFile> {
    acp_bash::driver::model::keyfile::config_home(|name| {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    })
    .map(|home| AlwaysFile::under(&home))
}

pub fn permissions(args: &PermissionsArgs) -> ExitCode {
    let Some(file) = always_file() else {
        eprintln!(
            "acp-bash permissions: neither XDG_CONFIG_HOME nor HOME is an absolute path: there \
             is no config directory, so nothing is allowed always. Set one as the editor does \
             when it starts acp-bash."
        );
        return ExitCode::FAILURE;
    };
    let action = match args.action() {
        Ok(action) => action,
        Err(error) => {
            eprintln!("acp-bash permissions: {error}");
            return ExitCode::from(2);
        }
    };
    match action {
        Action::List => {
            print!("{}", list(&file));
            ExitCode::SUCCESS
        }
        Action::Remove(what) => match file.remove_grants_for(&what) {
            Ok(removed) if removed.is_empty() => {
                eprintln!(
                    "acp-bash permissions: nothing in {} allows `{what}` (`acp-bash \
                         permissions list` shows what does).",
                    file.path.display()
                );
                ExitCode::FAILURE
            }
            Ok(removed) => {
                for line in removed {
                    println!("removed: {line}");
                }
                println!(
                    "from {}. Agents running now keep it until their sessions end.",
                    file.path.display()
                );
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!(
                    "acp-bash permissions: could not take back `{what}` from {}: {error}. \
                         Nothing was changed.",
                    file.path.display()
                );
                ExitCode::FAILURE
            }
        },
    }
}

/// The file's grants, one a line, then the lines ignored and why.
fn list(file: &AlwaysFile) -> String {
    let (grants, bad) = file.read();
    let mut out = format!("Allowed always ({}):\n", file.path.display());
    if grants.is_empty() {
        out.push_str("  nothing\n");
    }
    for grant in &grants {
        out.push_str(&format!("  {}\n", grant.line()));
    }
    for why in bad {
        out.push_str(&format!("  [ignored] {why}\n"));
    }
    if !grants.is_empty() {
        out.push_str("Take one back with `acp-bash permissions remove HOST|PREFIX`.\n");
    }
    out
}
