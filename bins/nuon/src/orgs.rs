//! `nuon orgs`: the token's org and its API tokens.

use clap::Subcommand;
use nuon_core::wire::TokenList;

use crate::output::{Render, emit, emit_with};
use crate::{CliError, Global, client, fmt_time, table};

#[derive(Debug, Subcommand)]
pub(crate) enum OrgsCommand {
    /// Show the token's org.
    Get,
    /// The org's API tokens.
    Tokens {
        #[command(subcommand)]
        command: TokensCommand,
    },
    /// A one-time link that signs a browser into the dashboard as this
    /// token (deployer or admin; a read-only token signs in with the token
    /// form): it works once, for 10 minutes, and its page shows the org and
    /// the person and asks first.
    SignInLink,
    /// Webhooks: signed deliveries of the org's events, retried with
    /// backoff, in order.
    Webhooks {
        #[command(subcommand)]
        command: crate::ops::WebhooksCommand,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum TokensCommand {
    /// Create an API token; its secret is shown only now.
    Create {
        /// What it is for.
        #[arg(long)]
        name: String,
        /// `admin` (read and change), `deployer` (read; start, approve
        /// and cancel workflows, build, release, roll out) or `read`.
        #[arg(long, value_enum, default_value = "read")]
        scope: Scope,
        /// A service account's token (for CI, scripts), belonging to no
        /// person; admin only. Without it, a token made with a person's
        /// token is theirs, and never does more than their role.
        #[arg(long)]
        service_account: bool,
    },
    /// List the org's API tokens (never their secrets).
    List,
    /// Revoke an API token: it authenticates nothing after.
    Revoke {
        /// The token's id (`tok_…`).
        id: String,
    },
}

/// A token scope on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Scope {
    Admin,
    Deployer,
    Read,
}

pub(crate) async fn orgs(g: &Global, command: &OrgsCommand) -> Result<u8, CliError> {
    use nuon_core::wire::TokenScope;
    if let OrgsCommand::Webhooks { command } = command {
        return crate::ops::webhooks(g, command).await;
    }
    let client = client(g)?;
    match command {
        OrgsCommand::Webhooks { .. } => unreachable!("handled above"),
        OrgsCommand::SignInLink => {
            let link = client.create_sign_in_code().await?;
            emit_with(g, &link, |link| {
                outln!("{}", link.url);
                eprintln!("Open it within 10 minutes; it works once.");
            })?;
        }
        OrgsCommand::Get => {
            let org = client.get_org().await?;
            emit_with(g, &org, |org| outln!("{} ({})", org.name, org.id))?;
        }
        OrgsCommand::Tokens { command } => match command {
            TokensCommand::Create {
                name,
                scope,
                service_account,
            } => {
                let scope = match scope {
                    Scope::Admin => TokenScope::Admin,
                    Scope::Deployer => TokenScope::Deployer,
                    Scope::Read => TokenScope::Read,
                };
                let created = if *service_account {
                    client.create_service_account_token(name, scope).await?
                } else {
                    client.create_token(name, scope).await?
                };
                emit_with(g, &created, |created| {
                    outln!("token id: {}", created.token.id);
                    outln!("scope:    {}", created.token.scope.as_str());
                    outln!("secret:   {}", created.secret);
                    eprintln!("\nThe secret is shown only now. Use it as --token or NUON_TOKEN.");
                })?;
            }
            TokensCommand::List => emit(g, &client.list_tokens().await?)?,
            TokensCommand::Revoke { id } => {
                let t = client.revoke_token(id).await?;
                emit_with(g, &t, |t| outln!("revoked token {} ({})", t.name, t.id))?;
            }
        },
    }
    Ok(0)
}

impl Render for TokenList {
    fn render(&self) {
        table(
            &["ID", "NAME", "SCOPE", "OWNER", "CREATED", "STATE"],
            self.tokens
                .iter()
                .map(|t| {
                    vec![
                        t.id.to_string(),
                        t.name.clone(),
                        t.scope.as_str().into(),
                        t.user.clone().unwrap_or_else(|| "service account".into()),
                        fmt_time(Some(t.created_at_ms)),
                        match (t.revoked, t.expires_at_ms) {
                            (true, _) => "revoked".into(),
                            (false, Some(at)) if at <= nuon_core::now_ms() => "expired".into(),
                            (false, Some(at)) => format!("active until {}", fmt_time(Some(at))),
                            (false, None) => "active".into(),
                        },
                    ]
                })
                .collect(),
        );
    }
}
