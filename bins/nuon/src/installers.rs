//! `nuon installers` (an app's `installer.toml`), `nuon installs invite`
//! and `nuon invitations`: the page a customer installs an app from, and
//! the links to it.

use clap::Subcommand;
use nuon_core::wire::{
    CreateInvitation, InstallerInfo, InstallerList, InvitationInfo, InvitationList,
};

use crate::output::{Render, emit, emit_with};
use crate::{CliError, Global, client, fmt_time, table};

#[derive(Debug, Subcommand)]
pub(crate) enum InstallersCommand {
    /// The org's installers: each app whose latest config has an
    /// installer.toml.
    List,
    /// One app's installer: what its page shows.
    Get {
        /// The app, by name or id.
        app: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum InvitationsCommand {
    /// The org's invitations, newest first.
    List,
    /// Take an invitation back: its link stops working at once.
    Revoke {
        /// The invitation's id (`inv_…`).
        id: String,
    },
}

/// `nuon installs invite --app APP`.
#[derive(Debug, clap::Args)]
pub(crate) struct InviteArgs {
    /// The app the customer installs, by name or id.
    #[arg(long)]
    app: String,
    /// The install's name (the customer picks one when unset).
    #[arg(long)]
    name: Option<String>,
    /// Whom it is for (kept with the invitation; nothing is sent).
    #[arg(long)]
    email: Option<String>,
    /// How long the link works: 30m, 12h, 7d (default 7d, at most 90d).
    #[arg(long, value_name = "DURATION")]
    expires: Option<String>,
    /// An install the customer finishes (applies its stack) instead of
    /// making one: it must never have been provisioned.
    #[arg(long)]
    install: Option<String>,
}

pub(crate) async fn invite(g: &Global, args: &InviteArgs) -> Result<u8, CliError> {
    if let Some(e) = &args.expires {
        nuon_core::parse_duration(e).map_err(|why| {
            CliError::usage(format!("--expires {e:?}: {why} (write 30m, 12h or 7d)"))
        })?;
    }
    let made = client(g)?
        .create_invitation(&CreateInvitation {
            app: args.app.clone(),
            install: args.install.clone(),
            name: args.name.clone(),
            email: args.email.clone(),
            expires_in: args.expires.clone(),
        })
        .await?;
    emit_with(g, &made, |made| {
        let i = &made.invitation;
        outln!("{}", made.url);
        eprintln!(
            "\nSend this link to the customer: it is shown only now. It works {} ({}), for one install of {}{}; `nuon invitations revoke {}` takes it back.",
            fmt_time(Some(i.expires_at_ms)),
            i.expires_at_ms,
            i.app_name.as_deref().unwrap_or(i.app_id.as_str()),
            i.name
                .as_deref()
                .map(|n| format!(" named {n}"))
                .unwrap_or_default(),
            i.id
        );
    })?;
    Ok(0)
}

impl Render for InstallerInfo {
    fn render(&self) {
        let i = &self.installer;
        outln!(
            "app:         {} (config v{})",
            self.app_name,
            self.config_version
        );
        outln!("name:        {}", i.name.as_deref().unwrap_or("-"));
        outln!("description: {}", i.description.as_deref().unwrap_or("-"));
        if let Some(s) = &i.slug {
            outln!("slug:        {s}");
        }
        if !i.apps.is_empty() {
            outln!("apps:        {}", i.apps.join(", "));
        }
        if let Some(l) = &i.logo_url {
            outln!("logo:        {l}");
        }
        for (label, url) in i.links() {
            outln!("link:        {label}: {url}");
        }
        for (what, md) in [
            ("after install", &i.post_install_markdown),
            ("footer", &i.footer_markdown),
            ("copyright", &i.copyright_markdown),
        ] {
            if let Some(md) = md {
                outln!("{what}:\n{}", indent(md));
            }
        }
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Render for InvitationInfo {
    fn render(&self) {
        outln!("id:       {}", self.id);
        outln!(
            "app:      {}",
            self.app_name.as_deref().unwrap_or(self.app_id.as_str())
        );
        outln!("state:    {}", self.state);
        if let Some(n) = &self.name {
            outln!("name:     {n}");
        }
        if let Some(e) = &self.email {
            outln!("email:    {e}");
        }
        if let Some(i) = &self.install_id {
            outln!("install:  {i}");
        }
        outln!("expires:  {}", fmt_time(Some(self.expires_at_ms)));
        outln!("by:       {}", self.created_by);
    }
}

pub(crate) async fn installers(g: &Global, command: &InstallersCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    match command {
        InstallersCommand::Get { app } => emit(g, &client.get_installer(app).await?)?,
        InstallersCommand::List => emit(g, &client.list_installers().await?)?,
    }
    Ok(0)
}

impl Render for InstallerList {
    fn render(&self) {
        table(
            &["APP", "NAME", "CONFIG", "LINKS"],
            self.installers
                .iter()
                .map(|i| {
                    vec![
                        i.app_name.clone(),
                        i.installer.name.clone().unwrap_or_else(|| "-".into()),
                        format!("v{}", i.config_version),
                        i.installer.links().len().to_string(),
                    ]
                })
                .collect(),
        );
    }
}

pub(crate) async fn invitations(g: &Global, command: &InvitationsCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    match command {
        InvitationsCommand::Revoke { id } => emit(g, &client.revoke_invitation(id).await?)?,
        InvitationsCommand::List => emit(g, &client.list_invitations().await?)?,
    }
    Ok(0)
}

impl Render for InvitationList {
    fn render(&self) {
        table(
            &["ID", "APP", "STATE", "NAME", "EMAIL", "INSTALL", "EXPIRES"],
            self.invitations
                .iter()
                .map(|i| {
                    vec![
                        i.id.to_string(),
                        i.app_name.clone().unwrap_or_else(|| i.app_id.to_string()),
                        i.state.to_string(),
                        i.name.clone().unwrap_or_else(|| "-".into()),
                        i.email.clone().unwrap_or_else(|| "-".into()),
                        i.install_id
                            .as_ref()
                            .map_or_else(|| "-".into(), |x| x.to_string()),
                        fmt_time(Some(i.expires_at_ms)),
                    ]
                })
                .collect(),
        );
    }
}
