//! `/permissions [remove HOST|PREFIX]`: what the session allows beyond its mode (the answers to
//! permission requests: hosts, and commands starting with a prefix) and what is allowed always
//! ([`crate::permit::AlwaysFile`]); `remove` takes one back, from the session and from the
//! file.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{inline_code, Command, CommandHost, CommandSpec, Run};
use crate::permit::SessionPermits;

/// `/permissions`.
pub const COMMAND: Command = Command::new(SPEC, parse);

/// What the agent advertises about `/permissions`.
pub const SPEC: CommandSpec = CommandSpec {
    name: "permissions",
    description: "List what you allowed when asked (this session, always), or take one back",
    hint: "nothing to list, or remove HOST|PREFIX",
    usage: "/permissions [remove HOST|PREFIX]",
};

/// `/permissions`' arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Permissions {
    /// List the session's grants and the kept ones.
    List,
    /// Take back what allows this host or command prefix.
    Remove(String),
}

fn parse(args: &str) -> Result<Box<dyn Run>, String> {
    let args = args.trim();
    if args.is_empty() || args == "list" {
        return Ok(Box::new(Permissions::List));
    }
    match args.split_once(char::is_whitespace) {
        Some(("remove", what)) if !what.trim().is_empty() => {
            Ok(Box::new(Permissions::Remove(what.trim().to_string())))
        }
        _ => Err(format!(
            "{args:?} is not one of: nothing (list), `remove HOST`, `remove PREFIX`"
        )),
    }
}

impl Run for Permissions {
    fn run<'a>(self: Box<Self>, host: &'a dyn CommandHost) -> BoxFuture<'a, String> {
        let answer = match host.permits() {
            None => "This session keeps no permissions: nothing was allowed when asked.".into(),
            Some(permits) => match *self {
                Permissions::List => list(&permits),
                Permissions::Remove(what) => remove(&permits, &what),
            },
        };
        futures::future::ready(answer).boxed()
    }
}

/// The session's grants, then the always file's lines.
pub fn list(permits: &SessionPermits) -> String {
    let mut answer = String::new();
    let granted = permits.granted();
    if granted.is_empty() {
        answer.push_str("This session allows nothing beyond its mode.\n");
    } else {
        answer.push_str("This session allows (beyond its mode):\n");
        for line in &granted {
            answer.push_str(&format!("- {}\n", inline_code(line, 200)));
        }
    }
    match &permits.settings.always {
        None => answer.push_str("\nNothing is kept always (no config directory).\n"),
        Some(file) => {
            let (grants, bad) = file.read();
            answer.push_str(&format!("\nAllowed always ({}):", file.path.display()));
            if grants.is_empty() {
                answer.push_str(" nothing.\n");
            } else {
                answer.push('\n');
                for grant in &grants {
                    answer.push_str(&format!("- {}\n", inline_code(&grant.line(), 200)));
                }
            }
            for why in bad {
                answer.push_str(&format!("- ignored: {why}\n"));
            }
        }
    }
    answer.push_str("\nTake one back with `/permissions remove HOST` or `/permissions remove PREFIX`.");
    answer
}

/// Takes back `what`, and says what was removed.
pub fn remove(permits: &SessionPermits, what: &str) -> String {
    match permits.remove(what) {
        Ok(removed) if removed.is_empty() => format!(
            "Nothing allows {}: see `/permissions`.",
            inline_code(what, 200)
        ),
        Ok(removed) => {
            let lines: Vec<String> = removed.iter().map(|l| inline_code(l, 200)).collect();
            let kept = permits
                .settings
                .always
                .as_ref()
                .map(|f| format!(" and from {}", f.path.display()))
                .unwrap_or_default();
            format!(
                "Removed {} from this session{kept}. Other sessions that are open now keep it \
                 until they end.",
                lines.join(", ")
            )
        }
        Err(error) => format!(
            "Could not take back {}: {error}. Nothing was changed in the file.",
            inline_code(what, 200)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_are_nothing_list_or_remove_something() {
        let parsed = |args: &str| parse(args).map(|run| format!("{run:?}"));
        assert_eq!(parsed("").unwrap(), "List");
        assert_eq!(parsed("list").unwrap(), "List");
        assert_eq!(
            parsed("remove npm install").unwrap(),
            "Remove(\"npm install\")"
        );
        assert!(parsed("remove").is_err());
        assert!(parsed("drop x").is_err());
    }
}
