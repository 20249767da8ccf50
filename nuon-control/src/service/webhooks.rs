//! The org's webhooks: adding one (with the signing secret it is shown
//! once), listing and removing them, and their deliveries. The deliveries
//! themselves are made by the operations layer ([`crate::ops`]).

use nuon_core::WebhookId;
use nuon_core::endpoint::{self as ep};
use nuon_core::wire::{CreateWebhook, DeliveryList, WebhookCreated, WebhookInfo, WebhookList};

use super::{Caller, Services, require_admin};
use crate::error::Error;

/// Deliveries listed when the caller names no limit.
const DEFAULT_DELIVERIES: u32 = 100;

/// The most deliveries listed at once.
const MAX_DELIVERIES: u32 = 1000;

impl Services<'_> {
    /// `POST /v1/webhooks`: a webhook of the org to `req.url` for
    /// `req.events`, with a new signing secret, answered this once.
    /// Admins only; recorded in the audit trail, refusals included.
    pub(crate) async fn create_webhook(
        &self,
        caller: &Caller,
        req: CreateWebhook,
    ) -> Result<WebhookCreated, Error> {
        let result = self.add_webhook(caller, req).await;
        self.audited_at::<ep::CreateWebhook, _>(caller, &[], result)
            .await
    }

    async fn add_webhook(
        &self,
        caller: &Caller,
        req: CreateWebhook,
    ) -> Result<WebhookCreated, Error> {
        require_admin(&caller.principal)?;
        let url = req.url.trim();
        let parsed = reqwest::Url::parse(url).map_err(|e| {
            Error::bad_request(format!(
                "webhook url {url:?} is not a URL ({e}): give e.g. https://hooks.example.com/nuon"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(Error::bad_request(format!(
                "webhook url {url:?} must be http:// or https:// with a host"
            )));
        }
        // A literal address is checked now; a name, at each delivery.
        let literal = parsed.host_str().and_then(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .ok()
        });
        if let Some(ip) =
            literal.filter(|ip| !self.ops.webhook_allow_private && !crate::ops::is_public(*ip))
        {
            return Err(Error::bad_request(format!(
                "webhook url {url:?} points at {ip}, not a public address: an org's webhook may not reach into the control plane's network (`nuon-ctl serve --webhook-allow-private-networks` allows it)"
            )));
        }
        if req.events.is_empty() {
            let all: Vec<_> = nuon_core::webhook::WebhookEvent::ALL
                .iter()
                .map(|e| e.as_str())
                .collect();
            return Err(Error::bad_request(format!(
                "a webhook takes at least one event: {}",
                all.join(", ")
            )));
        }
        let mut events = req.events.clone();
        events.sort();
        events.dedup();
        let id = WebhookId::generate();
        let mut raw = [0u8; 24];
        nuon_core::random_bytes(&mut raw);
        let secret = format!("whsec_{}", hex::encode(raw));
        let sealed = self
            .secrets
            .seal(&secret, &crate::secrets::webhook_context(&id));
        let webhook = self
            .store
            .create_webhook(
                &caller.principal.org_id,
                &id,
                parsed.as_str(),
                &events,
                &sealed,
            )
            .await?;
        Ok(WebhookCreated { webhook, secret })
    }

    /// `GET /v1/webhooks`: the org's webhooks.
    pub(crate) async fn list_webhooks(&self, caller: &Caller) -> Result<WebhookList, Error> {
        Ok(WebhookList {
            webhooks: self.store.list_webhooks(&caller.principal.org_id).await?,
        })
    }

    /// `POST /v1/webhooks/{id}/remove`: removes webhook `raw` of the org
    /// (its pending deliveries are given up) and answers it. Admins only;
    /// recorded in the audit trail, refusals included.
    pub(crate) async fn remove_webhook(
        &self,
        caller: &Caller,
        raw: &str,
    ) -> Result<WebhookInfo, Error> {
        let result = self.drop_webhook(caller, raw).await;
        self.audited_at::<ep::RemoveWebhook, _>(caller, &[raw], result)
            .await
    }

    async fn drop_webhook(&self, caller: &Caller, raw: &str) -> Result<WebhookInfo, Error> {
        require_admin(&caller.principal)?;
        let id = webhook_id(raw)?;
        self.store
            .remove_webhook(&caller.principal.org_id, &id)
            .await?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "no webhook {raw} in this org (see `nuon orgs webhooks list`)"
                ))
            })
    }

    /// `GET /v1/webhooks/deliveries`: the org's webhook deliveries, newest
    /// first, of webhook `webhook` only when given; `limit` of them (1 to
    /// 1000, default 100).
    pub(crate) async fn list_deliveries(
        &self,
        caller: &Caller,
        webhook: Option<&str>,
        limit: Option<u32>,
    ) -> Result<DeliveryList, Error> {
        let hook = webhook.map(webhook_id).transpose()?;
        let limit = limit.unwrap_or(DEFAULT_DELIVERIES).clamp(1, MAX_DELIVERIES);
        Ok(DeliveryList {
            deliveries: self
                .store
                .list_deliveries(&caller.principal.org_id, hook.as_ref(), limit)
                .await?,
        })
    }
}

/// The webhook id `raw`; a malformed one is not found.
fn webhook_id(raw: &str) -> Result<WebhookId, Error> {
    raw.parse()
        .map_err(|_| Error::not_found(format!("no webhook {raw:?}")))
}
