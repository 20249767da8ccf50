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
impl WebhookStore for SqliteStore {
    async fn create_webhook(
        &self,
        org: &OrgId,
        id: &WebhookId,
        url: &str,
        events: &[WebhookEvent],
        sealed_secret: &str,
    ) -> Result<WebhookInfo> {
        let (org, id, url, events, secret) = (
            org.clone(),
            id.clone(),
            url.to_owned(),
            events_column(events),
            sealed_secret.to_owned(),
        );
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO webhooks (id, org_id, url, events, secret, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![id.as_str(), org.as_str(), url, events, secret, now_ms()],
            )
            .map_err(db_err)?;
            record::<WebhookInfo>(conn, &format!("SELECT {WEBHOOK} FROM webhooks WHERE id = ?1"), [id.as_str()])?
                .ok_or_else(|| StoreError::Invalid("the webhook vanished".into()))
        })
        .await
    }

    async fn list_webhooks(&self, org: &OrgId) -> Result<Vec<WebhookInfo>> {
        let org = org.clone();
        self.read(move |conn| {
            records::<WebhookInfo>(
                conn,
                &format!("SELECT {WEBHOOK} FROM webhooks WHERE org_id = ?1 AND removed_at IS NULL ORDER BY created_at, id"),
                [org.as_str()],
            )
        })
        .await
    }

    async fn remove_webhook(&self, org: &OrgId, id: &WebhookId) -> Result<Option<WebhookInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            let found = record::<WebhookInfo>(
                conn,
                &format!("SELECT {WEBHOOK} FROM webhooks WHERE org_id = ?1 AND id = ?2 AND removed_at IS NULL"),
                [org.as_str(), id.as_str()],
            )?;
            if found.is_some() {
                let now = now_ms();
                conn.execute("UPDATE webhooks SET removed_at = ?2 WHERE id = ?1", params![id.as_str(), now])
                    .map_err(db_err)?;
                conn.execute(
                    "UPDATE webhook_deliveries SET status = 'failed', next_at = NULL, \
                     last_error = 'the webhook was removed' WHERE webhook_id = ?1 AND status = 'pending'",
                    [id.as_str()],
                )
                .map_err(db_err)?;
            }
            Ok(found)
        })
        .await
    }

    async fn insert_deliveries(
        &self,
        org: &OrgId,
        event: WebhookEvent,
        rows: Vec<(DeliveryId, WebhookId, String)>,
    ) -> Result<()> {
        let org = org.clone();
        self.write(move |conn| {
            let now = now_ms();
            for (id, hook, body) in &rows {
                conn.prepare_cached(
                    "INSERT INTO webhook_deliveries (id, webhook_id, org_id, event, body, status, created_at, next_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?6)",
                )
                .and_then(|mut s| {
                    s.execute(params![id.as_str(), hook.as_str(), org.as_str(), event.as_str(), body, now])
                })
                .map_err(db_err)?;
            }
            Ok(())
        })
        .await
    }

    async fn due_deliveries(&self, now: i64, limit: u32) -> Result<Vec<DueDelivery>> {
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {DELIVERY}, d.org_id, w.url, w.secret FROM webhook_deliveries d \
                     JOIN webhooks w ON w.id = d.webhook_id \
                     WHERE d.status = 'pending' AND w.removed_at IS NULL AND d.next_at <= ?1 \
                     AND d.seq = (SELECT MIN(p.seq) FROM webhook_deliveries p \
                                  WHERE p.webhook_id = d.webhook_id AND p.status = 'pending') \
                     ORDER BY d.seq LIMIT ?2"
                ))
                .map_err(db_err)?;
            let mut rows = stmt.query(params![now, limit]).map_err(db_err)?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(db_err)? {
                let row = DeliveryRow::read(r)?;
                out.push(DueDelivery {
                    delivery: row.info,
                    org: r.id(10)?,
                    url: r.text(11)?,
                    sealed_secret: r.text(12)?,
                    body: row.body,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn record_try(&self, id: &DeliveryId, outcome: DeliveryTry) -> Result<()> {
        let id = id.clone();
        self.write(move |conn| {
            let id = id.as_str();
            match outcome {
                DeliveryTry::Delivered => conn.execute(
                    "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, \
                     delivered_at = ?2, next_at = NULL WHERE id = ?1 AND status = 'pending'",
                    params![id, now_ms()],
                ),
                DeliveryTry::Retry { error, next_at_ms } => conn.execute(
                    "UPDATE webhook_deliveries SET attempts = attempts + 1, last_error = ?2, next_at = ?3 \
                     WHERE id = ?1 AND status = 'pending'",
                    params![id, error, next_at_ms],
                ),
                DeliveryTry::GiveUp { error } => conn.execute(
                    "UPDATE webhook_deliveries SET status = 'failed', attempts = attempts + 1, \
                     last_error = ?2, next_at = NULL WHERE id = ?1 AND status = 'pending'",
                    params![id, error],
                ),
            }
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn list_deliveries(
        &self,
        org: &OrgId,
        webhook: Option<&WebhookId>,
        limit: u32,
    ) -> Result<Vec<DeliveryInfo>> {
        let (org, hook) = (org.clone(), webhook.map(|w| w.as_str().to_owned()));
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {DELIVERY} FROM webhook_deliveries d WHERE d.org_id = ?1 \
                     AND (?2 IS NULL OR d.webhook_id = ?2) ORDER BY d.seq DESC LIMIT ?3"
                ))
                .map_err(db_err)?;
            let mut rows = stmt
                .query(params![org.as_str(), hook, limit])
                .map_err(db_err)?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(db_err)? {
                out.push(DeliveryRow::read(r)?.info);
            }
            Ok(out)
        })
        .await
    }
}
