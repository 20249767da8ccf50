//! `nuon users` and `nuon login`: the org's people, invited by email
//! address with a role, and signing in through the org's OpenID Connect
//! provider.

use clap::Subcommand;
use nuon_core::wire::{Role, UserInfo, UserList, routes};

use crate::output::{Render, emit, emit_with, for_people};
use crate::{CliError, Global, client, fmt_time, table};

#[derive(Debug, Subcommand)]
pub(crate) enum UsersCommand {
    /// Invite a person by email address; they sign in with `nuon login`
    /// through the org's OpenID Connect provider.
    Invite {
        /// Their email address (their provider must vouch for it).
        email: String,
        /// `owner`, `admin`, `deployer` (starts, approves and rolls out)
        /// or `viewer` (reads only).
        #[arg(long, value_parser = parse_role)]
        role: Role,
    },
    /// List the org's people with their roles.
    List,
    /// Change a person's role (by email address or id); their tokens
    /// follow at once.
    SetRole {
        /// The person.
        user: String,
        /// The new role.
        #[arg(value_parser = parse_role)]
        role: Role,
    },
    /// Remove a person from the org and revoke every token of theirs.
    Remove {
        /// The person.
        user: String,
    },
}

/// `nuon login --org ORG`.
#[derive(Debug, clap::Args)]
pub(crate) struct LoginArgs {
    /// The org to sign in to, by name.
    #[arg(long)]
    org: String,
}

fn parse_role(raw: &str) -> Result<Role, String> {
    raw.parse()
}

impl Render for UserInfo {
    fn render(&self) {
        let u = self;
        outln!(
            "{} {} ({}, {})",
            u.id,
            u.email,
            u.role.as_str(),
            match u.status {
                nuon_core::wire::UserStatus::Invited => "invited",
                nuon_core::wire::UserStatus::Active => "signed in",
            }
        );
    }
}

impl Render for UserList {
    fn render(&self) {
        table(
            &["ID", "EMAIL", "ROLE", "STATUS", "NAME", "LAST SIGN-IN"],
            self.users
                .iter()
                .map(|u| {
                    vec![
                        u.id.to_string(),
                        u.email.clone(),
                        u.role.as_str().into(),
                        format!("{:?}", u.status).to_lowercase(),
                        u.name.clone().unwrap_or_else(|| "-".into()),
                        fmt_time(u.last_sign_in_at_ms),
                    ]
                })
                .collect(),
        );
    }
}

pub(crate) async fn users(g: &Global, command: &UsersCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    let user = match command {
        UsersCommand::Invite { email, role } => {
            let u = client.invite_user(email, *role).await?;
            for_people(g, || {
                eprintln!(
                    "Invited. They sign in with `nuon login --org ORG` (or at {}{}?org=ORG).",
                    g.api_url(),
                    routes::OIDC_LOGIN
                )
            });
            u
        }
        UsersCommand::List => {
            emit(g, &client.list_users().await?)?;
            return Ok(0);
        }
        UsersCommand::SetRole { user, role } => client.set_user_role(user, *role).await?,
        UsersCommand::Remove { user } => {
            let u = client.remove_user(user).await?;
            for_people(g, || {
                eprintln!("Removed; every token of theirs is revoked.")
            });
            u
        }
    };
    emit(g, &user)?;
    Ok(0)
}

/// Prints where to sign in: the browser goes to the org's provider and
/// comes back to a page with an API token of the person's own, shown once.
pub(crate) fn login(g: &Global, args: &LoginArgs) -> Result<u8, CliError> {
    let org: String = args
        .org
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let url = format!("{}{}?org={org}", g.api_url(), routes::OIDC_LOGIN);
    emit_with(g, &serde_json::json!({ "url": url }), |_| {
        outln!("{url}");
        eprintln!(
            "\nOpen this in a browser and sign in with your identity provider. The page you come back to shows your API token once: use it as NUON_TOKEN or --token."
        );
    })?;
    Ok(0)
}
