//! The operations served by `nuon-control/src/api/ops.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `GET /v1/audit`.
    ListAudit: Get routes::AUDIT, "listAudit",
        () => crate::wire::AuditList, body = false,
        summary = "A page of the org's audit trail, oldest first: every state-changing API call and every job, each entry chained to the one before by its hash.";
    /// `GET /v1/audit/verify`.
    VerifyAudit: Get routes::AUDIT_VERIFY, "verifyAudit",
        () => crate::wire::AuditVerification, body = false,
        summary = "Check the org's audit chain from its first entry: how many entries chain, the head hash, and the first entry that does not chain.";
    /// `POST /v1/webhooks`.
    CreateWebhook: Post routes::WEBHOOKS, "createWebhook",
        crate::wire::CreateWebhook => crate::wire::WebhookCreated, status = 201, body = true,
        summary = "Add a webhook; its signing secret is shown only in this answer.";
    /// `GET /v1/webhooks`.
    ListWebhooks: Get routes::WEBHOOKS, "listWebhooks",
        () => crate::wire::WebhookList, body = false,
        summary = "The org's webhooks.";
    /// `POST /v1/webhooks/{id}/remove`.
    RemoveWebhook: Post routes::WEBHOOK_REMOVE, "removeWebhook",
        () => crate::wire::WebhookInfo, body = false,
        summary = "Remove a webhook; its pending deliveries are given up.";
    /// `GET /v1/webhooks/deliveries`.
    ListWebhookDeliveries: Get routes::WEBHOOK_DELIVERIES, "listWebhookDeliveries",
        () => crate::wire::DeliveryList, body = false,
        summary = "The org's webhook deliveries, newest first: event, status, tries, last error.";
    /// `POST /v1/installs/{id}/debug`.
    RequestInstallDebug: Post routes::INSTALL_DEBUG, "requestInstallDebug",
        crate::wire::DebugRequest => crate::wire::JobInfo, status = 201, body = true,
        summary = "Ask the install's runner to run a command for its logs or to debug; the runner decides (`nuon-runner run --debug-commands`), and a refusal fails the job with the runner's reason. Follow the job's log for the answer.";
}
