//! Webhooks and their deliveries.

use nuon_core::webhook::WebhookEvent;
use nuon_core::wire::{DeliveryInfo, WebhookInfo};
use nuon_core::{DeliveryId, WebhookId};

use super::*;
use crate::store::WebhookStore;
use crate::store::rows::DeliveryRow;
use crate::store::shared::events_column;
use crate::store::webhooks::{DeliveryTry, DueDelivery};

const WEBHOOK: &str = <WebhookInfo as Record>::COLUMNS;
const DELIVERY: &str = <DeliveryRow as Record>::COLUMNS;

#[async_trait]
impl WebhookStore for PostgresStore {
    async fn create_webhook(
        &self,
        org: &OrgId,
        id: &WebhookId,
        url: &str,
        events: &[WebhookEvent],
        sealed_secret: &str,
    ) -> Result<WebhookInfo> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO webhooks (id, org_id, url, events, secret, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING {WEBHOOK}"
        )))
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(url)
        .bind(events_column(events))
        .bind(sealed_secret)
        .bind(now_ms())
        .fetch_one(&self.pool)
        .await
        .map_err(db)?;
        WebhookInfo::read(&row)
    }

    async fn list_webhooks(&self, org: &OrgId) -> Result<Vec<WebhookInfo>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {WEBHOOK} FROM webhooks WHERE org_id = $1 AND removed_at IS NULL ORDER BY created_at, id"
        )))
        .bind(org.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter().map(WebhookInfo::read).collect()
    }

    async fn remove_webhook(&self, org: &OrgId, id: &WebhookId) -> Result<Option<WebhookInfo>> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(AssertSqlSafe(format!(
            "UPDATE webhooks SET removed_at = $3 WHERE org_id = $1 AND id = $2 AND removed_at IS NULL \
             RETURNING {WEBHOOK}"
        )))
        .bind(org.as_str())
        .bind(id.as_str())
        .bind(now_ms())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        if row.is_some() {
            sqlx::query(
                "UPDATE webhook_deliveries SET status = 'failed', next_at = NULL, \
                 last_error = 'the webhook was removed' WHERE webhook_id = $1 AND status = 'pending'",
            )
            .bind(id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        row.map(|r| WebhookInfo::read(&r)).transpose()
    }

    async fn insert_deliveries(
        &self,
        org: &OrgId,
        event: WebhookEvent,
        rows: Vec<(DeliveryId, WebhookId, String)>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        let now = now_ms();
        for (id, hook, body) in rows {
            sqlx::query(
                "INSERT INTO webhook_deliveries (id, webhook_id, org_id, event, body, status, created_at, next_at) \
                 VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6)",
            )
            .bind(id.as_str())
            .bind(hook.as_str())
            .bind(org.as_str())
            .bind(event.as_str())
            .bind(body)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        tx.commit().await.map_err(db)
    }

    async fn due_deliveries(&self, now: i64, limit: u32) -> Result<Vec<DueDelivery>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {DELIVERY}, d.org_id, w.url, w.secret FROM webhook_deliveries d \
             JOIN webhooks w ON w.id = d.webhook_id \
             WHERE d.status = 'pending' AND w.removed_at IS NULL AND d.next_at <= $1 \
             AND d.seq = (SELECT MIN(p.seq) FROM webhook_deliveries p \
                          WHERE p.webhook_id = d.webhook_id AND p.status = 'pending') \
             ORDER BY d.seq LIMIT $2"
        )))
        .bind(now)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|r| {
                let row = DeliveryRow::read(r)?;
                Ok(DueDelivery {
                    delivery: row.info,
                    org: r.id(10)?,
                    url: r.text(11)?,
                    sealed_secret: r.text(12)?,
                    body: row.body,
                })
            })
            .collect()
    }

    async fn record_try(&self, id: &DeliveryId, outcome: DeliveryTry) -> Result<()> {
        let q = match outcome {
            DeliveryTry::Delivered => sqlx::query(
                "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, \
                 delivered_at = $2, next_at = NULL WHERE id = $1 AND status = 'pending'",
            )
            .bind(id.as_str())
            .bind(now_ms()),
            DeliveryTry::Retry { error, next_at_ms } => sqlx::query(
                "UPDATE webhook_deliveries SET attempts = attempts + 1, last_error = $2, next_at = $3 \
                 WHERE id = $1 AND status = 'pending'",
            )
            .bind(id.as_str())
            .bind(error)
            .bind(next_at_ms),
            DeliveryTry::GiveUp { error } => sqlx::query(
                "UPDATE webhook_deliveries SET status = 'failed', attempts = attempts + 1, \
                 last_error = $2, next_at = NULL WHERE id = $1 AND status = 'pending'",
            )
            .bind(id.as_str())
            .bind(error),
        };
        q.execute(&self.pool).await.map_err(db)?;
        Ok(())
    }

    async fn list_deliveries(
        &self,
        org: &OrgId,
        webhook: Option<&WebhookId>,
        limit: u32,
    ) -> Result<Vec<DeliveryInfo>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {DELIVERY} FROM webhook_deliveries d WHERE d.org_id = $1 \
             AND ($2::TEXT IS NULL OR d.webhook_id = $2) ORDER BY d.seq DESC LIMIT $3"
        )))
        .bind(org.as_str())
        .bind(webhook.map(|w| w.as_str()))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|r| DeliveryRow::read(r).map(|d| d.info))
            .collect()
    }
}
