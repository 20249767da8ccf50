//! Webhooks and their deliveries.

use nuon_core::webhook::WebhookEvent;
use nuon_core::wire::{DeliveryInfo, WebhookInfo};
use nuon_core::{DeliveryId, WebhookId, now_ms};

use super::rows::{Cells, DeliveryRow, Record};
use super::shared::events_column;
use super::sql::{Sql, Stmt, args};
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

impl Record for DueDelivery {
    const COLUMNS: &'static str = "d.id, d.webhook_id, d.event, d.status, d.attempts, d.created_at, \
         d.delivered_at, d.next_at, d.last_error, d.body, d.org_id, w.url, w.secret";
    fn read(r: &impl Cells) -> Result<Self> {
        let row = DeliveryRow::read(r)?;
        Ok(DueDelivery {
            delivery: row.info,
            org: r.id(10)?,
            url: r.text(11)?,
            sealed_secret: r.text(12)?,
            body: row.body,
        })
    }
}

/// The statement that records a try of the delivery `id`.
fn try_stmt(id: &DeliveryId, outcome: DeliveryTry) -> Stmt {
    match outcome {
        DeliveryTry::Delivered => Stmt::new(
            "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, \
             delivered_at = $2, next_at = NULL WHERE id = $1 AND status = 'pending'",
            args![id.as_str(), now_ms()],
        ),
        DeliveryTry::Retry { error, next_at_ms } => Stmt::new(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, last_error = $2, next_at = $3 \
             WHERE id = $1 AND status = 'pending'",
            args![id.as_str(), error, next_at_ms],
        ),
        DeliveryTry::GiveUp { error } => Stmt::new(
            "UPDATE webhook_deliveries SET status = 'failed', attempts = attempts + 1, \
             last_error = $2, next_at = NULL WHERE id = $1 AND status = 'pending'",
            args![id.as_str(), error],
        ),
    }
}

/// The webhooks' store, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> WebhookStore for S {
    async fn create_webhook(
        &self,
        org: &OrgId,
        id: &WebhookId,
        url: &str,
        events: &[WebhookEvent],
        sealed_secret: &str,
    ) -> Result<WebhookInfo> {
        let stmt = Stmt::new(
            format!(
                "INSERT INTO webhooks (id, org_id, url, events, secret, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) RETURNING {}",
                WebhookInfo::COLUMNS
            ),
            args![
                id.as_str(),
                org.as_str(),
                url,
                events_column(events),
                sealed_secret,
                now_ms(),
            ],
        );
        self.write_query(stmt)
            .await?
            .pop()
            .ok_or_else(|| StoreError::Invalid("the webhook vanished".into()))
    }

    async fn list_webhooks(&self, org: &OrgId) -> Result<Vec<WebhookInfo>> {
        self.query(Stmt::new(
            format!(
                "SELECT {} FROM webhooks WHERE org_id = $1 AND removed_at IS NULL \
                 ORDER BY created_at, id",
                WebhookInfo::COLUMNS
            ),
            args![org.as_str()],
        ))
        .await
    }

    async fn remove_webhook(&self, org: &OrgId, id: &WebhookId) -> Result<Option<WebhookInfo>> {
        let read = Stmt::new(
            format!(
                "SELECT {} FROM webhooks WHERE org_id = $1 AND id = $2 AND removed_at IS NULL",
                WebhookInfo::COLUMNS
            ),
            args![org.as_str(), id.as_str()],
        );
        let id = id.clone();
        // Removed and its pending deliveries given up in one step.
        self.change_locked(read, move |rows: Vec<WebhookInfo>| {
            let Some(found) = rows.into_iter().next() else {
                return Ok((Vec::new(), None));
            };
            let writes = vec![
                Stmt::new(
                    "UPDATE webhooks SET removed_at = $2 WHERE id = $1",
                    args![id.as_str(), now_ms()],
                ),
                Stmt::new(
                    "UPDATE webhook_deliveries SET status = 'failed', next_at = NULL, \
                     last_error = 'the webhook was removed' \
                     WHERE webhook_id = $1 AND status = 'pending'",
                    args![id.as_str()],
                ),
            ];
            Ok((writes, Some(found)))
        })
        .await
    }

    async fn insert_deliveries(
        &self,
        org: &OrgId,
        event: WebhookEvent,
        rows: Vec<(DeliveryId, WebhookId, String)>,
    ) -> Result<()> {
        let now = now_ms();
        let stmts = rows
            .into_iter()
            .map(|(id, hook, body)| {
                Stmt::new(
                    "INSERT INTO webhook_deliveries (id, webhook_id, org_id, event, body, status, \
                     created_at, next_at) VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6)",
                    args![
                        id.as_str(),
                        hook.as_str(),
                        org.as_str(),
                        event.as_str(),
                        body,
                        now,
                    ],
                )
            })
            .collect();
        self.execute(stmts).await?;
        Ok(())
    }

    async fn due_deliveries(&self, now: i64, limit: u32) -> Result<Vec<DueDelivery>> {
        self.query(Stmt::new(
            format!(
                "SELECT {} FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id \
                 WHERE d.status = 'pending' AND w.removed_at IS NULL AND d.next_at <= $1 \
                 AND d.seq = (SELECT MIN(p.seq) FROM webhook_deliveries p \
                              WHERE p.webhook_id = d.webhook_id AND p.status = 'pending') \
                 ORDER BY d.seq LIMIT $2",
                DueDelivery::COLUMNS
            ),
            args![now, limit],
        ))
        .await
    }

    async fn record_try(&self, id: &DeliveryId, outcome: DeliveryTry) -> Result<()> {
        self.execute_one(try_stmt(id, outcome)).await?;
        Ok(())
    }

    async fn list_deliveries(
        &self,
        org: &OrgId,
        webhook: Option<&WebhookId>,
        limit: u32,
    ) -> Result<Vec<DeliveryInfo>> {
        let rows: Vec<DeliveryRow> = self
            .query(Stmt::new(
                format!(
                    "SELECT {} FROM webhook_deliveries d WHERE d.org_id = $1 \
                     AND (CAST($2 AS TEXT) IS NULL OR d.webhook_id = $2) \
                     ORDER BY d.seq DESC LIMIT $3",
                    DeliveryRow::COLUMNS
                ),
                args![org.as_str(), webhook.map(|w| w.as_str()), limit],
            ))
            .await?;
        Ok(rows.into_iter().map(|d| d.info).collect())
    }
}
