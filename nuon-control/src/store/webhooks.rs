//! Webhooks and their deliveries.

use nuon_core::webhook::WebhookEvent;
use nuon_core::wire::{DeliveryInfo, WebhookInfo};
use nuon_core::{DeliveryId, WebhookId};

use super::*;

/// A delivery due now, with where it goes.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    /// The delivery.
    pub delivery: DeliveryInfo,
    /// Its org.
    pub org: OrgId,
    /// The webhook's URL.
    pub url: String,
    /// The webhook's secret, sealed.
    pub sealed_secret: String,
    /// The body to post, as stored.
    pub body: String,
}

/// How a try of a delivery went.
#[derive(Debug, Clone)]
pub enum DeliveryTry {
    /// The receiver took it.
    Delivered,
    /// It failed; tried again at `next_at_ms`.
    Retry {
        /// Why.
        error: String,
        /// When to try next.
        next_at_ms: i64,
    },
    /// It failed for the last time.
    GiveUp {
        /// Why.
        error: String,
    },
}

/// Webhooks and their deliveries.
#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    /// Adds a webhook to the org.
    async fn create_webhook(
        &self,
        org: &OrgId,
        id: &WebhookId,
        url: &str,
        events: &[WebhookEvent],
        sealed_secret: &str,
    ) -> Result<WebhookInfo>;

    /// The org's webhooks, oldest first.
    async fn list_webhooks(&self, org: &OrgId) -> Result<Vec<WebhookInfo>>;

    /// Removes a webhook; its pending deliveries fail. `None` when the org
    /// has no such webhook.
    async fn remove_webhook(&self, org: &OrgId, id: &WebhookId) -> Result<Option<WebhookInfo>>;

    /// Queues a delivery of `event` with `data` to every webhook of the org
    /// that takes it (the body: the delivery's id, the event, the org, the
    /// time and `data`). How many.
    async fn enqueue_event(
        &self,
        org: &OrgId,
        event: WebhookEvent,
        data: &serde_json::Value,
    ) -> Result<usize> {
        let rows: Vec<(DeliveryId, WebhookId, String)> = self
            .list_webhooks(org)
            .await?
            .into_iter()
            .filter(|w| w.events.contains(&event))
            .map(|w| {
                let id = DeliveryId::generate();
                let body = super::shared::delivery_body(&id, org, event, data);
                (id, w.id, body)
            })
            .collect();
        let count = rows.len();
        if count > 0 {
            self.insert_deliveries(org, event, rows).await?;
        }
        Ok(count)
    }

    /// Stores pending deliveries, due now: `(delivery, webhook, body)`.
    async fn insert_deliveries(
        &self,
        org: &OrgId,
        event: WebhookEvent,
        rows: Vec<(DeliveryId, WebhookId, String)>,
    ) -> Result<()>;

    /// Up to `limit` deliveries due at `now_ms`: of each webhook, only its
    /// oldest pending one (so each receiver gets its events in order).
    async fn due_deliveries(&self, now_ms: i64, limit: u32) -> Result<Vec<DueDelivery>>;

    /// Records a try of a delivery.
    async fn record_try(&self, id: &DeliveryId, outcome: DeliveryTry) -> Result<()>;

    /// The org's deliveries, newest first; of one webhook when given.
    async fn list_deliveries(
        &self,
        org: &OrgId,
        webhook: Option<&WebhookId>,
        limit: u32,
    ) -> Result<Vec<DeliveryInfo>>;
}
