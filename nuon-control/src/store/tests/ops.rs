//! The audit trail, webhooks and their deliveries, runner health and the
//! gauges of `/metrics`.

use nuon_core::audit::AuditEntry;
use nuon_core::model::RunnerHealth;
use nuon_core::webhook::WebhookEvent;
use nuon_core::{DeliveryId, WebhookId};

use super::*;
use crate::store::StackRedeem;

fn entry(i: u64) -> AuditEntry {
    AuditEntry::new(
        i as i64,
        "tok_x",
        "op",
        format!("/t/{i}"),
        "127.0.0.1",
        "200",
    )
}

conformance! {
    async fn audit_entries_chain_per_org_and_a_changed_row_is_named(f: Fixture) {
        let s = &*f.store;
        let other = s.create_org(&OrgId::generate(), "other", b"k").await.unwrap().org_id;
        let v = verify_audit(s, &f.org).await.unwrap();
        assert_eq!((v.entries, v.broken), (0, None));
        // Two batches, the orgs' entries interleaved: each org its own chain.
        let batch = |from: u64| {
            (from..from + 3)
                .flat_map(|i| {
                    [
                        NewAudit { org: f.org.clone(), entry: entry(i) },
                        NewAudit { org: other.clone(), entry: entry(100 + i) },
                    ]
                })
                .collect::<Vec<_>>()
        };
        s.append_audit(batch(1), &mut AuditHeads::default()).await.unwrap();
        s.append_audit(batch(4), &mut AuditHeads::default()).await.unwrap();
        let all = s.list_audit(&f.org, 0, 100, None).await.unwrap();
        assert_eq!(all.iter().map(|e| e.n).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(all.iter().map(|e| e.target.as_str()).collect::<Vec<_>>(), vec!["/t/1", "/t/2", "/t/3", "/t/4", "/t/5", "/t/6"]);
        assert_eq!(all[3].prev, all[2].hash, "the second batch continues the chain");
        let v = verify_audit(s, &f.org).await.unwrap();
        assert_eq!((v.entries, v.broken.clone()), (6, None));
        assert_eq!(v.head, all[5].hash);
        assert_eq!(s.audit_head(&f.org).await.unwrap(), Some((6, all[5].hash.clone())));
        assert_eq!(verify_audit(s, &other).await.unwrap().entries, 6);
        // Paging and the actor filter.
        assert_eq!(s.list_audit(&f.org, 4, 10, None).await.unwrap().len(), 2);
        assert!(s.list_audit(&f.org, 0, 10, Some("tok_y")).await.unwrap().is_empty());

        // Edited past the store: named.
        let org = f.org.as_str();
        f.raw("UPDATE audit SET outcome = '500' WHERE org_id = ? AND n = 3 RETURNING outcome", org).await;
        let b = verify_audit(s, &f.org).await.unwrap().broken.expect("an edit is caught");
        assert_eq!(b.entry, 3, "{b}");
        f.raw("UPDATE audit SET outcome = '200' WHERE org_id = ? AND n = 3 RETURNING outcome", org).await;
        assert_eq!(verify_audit(s, &f.org).await.unwrap().broken, None);
        // The last row deleted: the head still counts it.
        f.raw("DELETE FROM audit WHERE org_id = ? AND n = 6 RETURNING outcome", org).await;
        let b = verify_audit(s, &f.org).await.unwrap().broken.expect("a deletion is caught");
        assert_eq!(b.entry, 6, "{b}");
        // A row in the middle deleted.
        f.raw("DELETE FROM audit WHERE org_id = ? AND n = 2 RETURNING outcome", org).await;
        let b = verify_audit(s, &f.org).await.unwrap().broken.expect("a deletion is caught");
        assert_eq!(b.entry, 2, "{b}");
        assert!(b.why.contains("missing"), "{b}");
        // The other org's chain is untouched.
        assert_eq!(verify_audit(s, &other).await.unwrap().broken, None);
    }

    async fn a_batch_larger_than_one_insert_is_appended_whole(f: Fixture) {
        let s = &*f.store;
        let other = s.create_org(&OrgId::generate(), "other", b"k").await.unwrap().org_id;
        // 2,500 entries of two orgs in one batch: more than one insert holds.
        let batch: Vec<NewAudit> = (1..=2500u64)
            .map(|i| NewAudit { org: if i % 5 == 0 { other.clone() } else { f.org.clone() }, entry: entry(i) })
            .collect();
        s.append_audit(batch, &mut AuditHeads::default()).await.unwrap();
        s.append_audit(vec![NewAudit { org: f.org.clone(), entry: entry(9999) }], &mut AuditHeads::default()).await.unwrap();
        let v = verify_audit(s, &f.org).await.unwrap();
        assert_eq!((v.entries, v.broken), (2001, None));
        let v = verify_audit(s, &other).await.unwrap();
        assert_eq!((v.entries, v.broken), (500, None));
        assert_eq!(s.audit_head(&other).await.unwrap().map(|h| h.0), Some(500));
    }

    async fn writers_that_keep_their_heads_append_to_one_chain_whoever_moved_it(f: Fixture) {
        let s = &*f.store;
        let other = s.create_org(&OrgId::generate(), "other", b"k").await.unwrap().org_id;
        let one = |org: &OrgId, i: u64| vec![NewAudit { org: org.clone(), entry: entry(i) }];
        let (mut a, mut b) = (AuditHeads::default(), AuditHeads::default());
        // A's head goes stale behind its back: B appends after it.
        s.append_audit(one(&f.org, 1), &mut a).await.unwrap();
        for i in 2..=5 {
            s.append_audit(one(&f.org, i), &mut b).await.unwrap();
        }
        s.append_audit(one(&f.org, 6), &mut a).await.unwrap();
        s.append_audit(one(&f.org, 7), &mut b).await.unwrap();
        let all = s.list_audit(&f.org, 0, 100, None).await.unwrap();
        let got: Vec<(u64, String)> = all.iter().map(|e| (e.n, e.target.clone())).collect();
        let want: Vec<(u64, String)> = (1..=7).map(|i| (i, format!("/t/{i}"))).collect();
        assert_eq!(got, want, "each append linked to the head as it was, not as its writer left it");
        assert_eq!(verify_audit(s, &f.org).await.unwrap().broken, None);
        // Both at once, in batches of one org and of two.
        let write = |mut heads: AuditHeads, from: u64| {
            let (org, other) = (f.org.clone(), other.clone());
            async move {
                for i in from..from + 60 {
                    let mut batch = one(&org, i);
                    if i % 10 == 0 {
                        batch.extend(one(&other, i));
                    }
                    s.append_audit(batch, &mut heads).await.unwrap();
                }
                heads
            }
        };
        let (mut a, _) = tokio::join!(write(a, 100), write(b, 200));
        let v = verify_audit(s, &f.org).await.unwrap();
        assert_eq!((v.entries, v.broken), (127, None));
        let all = s.list_audit(&f.org, 7, 200, None).await.unwrap();
        for from in [100u64, 200] {
            let mine: Vec<_> = all.iter().map(|e| e.target.clone()).filter(|t| t[3..].parse::<u64>().is_ok_and(|i| (from..from + 60).contains(&i))).collect();
            let want: Vec<_> = (from..from + 60).map(|i| format!("/t/{i}")).collect();
            assert_eq!(mine, want, "each writer's entries whole and in its order");
        }
        let v = verify_audit(s, &other).await.unwrap();
        assert_eq!((v.entries, v.broken), (12, None));
        // A head that no longer names its org's chain (the head row gone):
        // the append makes it again rather than trusting what it kept.
        let org = f.org.as_str();
        f.raw("DELETE FROM audit WHERE org_id = ? RETURNING hash", org).await;
        f.raw("DELETE FROM audit_heads WHERE org_id = ? RETURNING hash", org).await;
        s.append_audit(one(&f.org, 1000), &mut a).await.unwrap();
        let v = verify_audit(s, &f.org).await.unwrap();
        assert_eq!((v.entries, v.broken), (1, None));
    }

    async fn entries_appended_while_the_chain_is_verified_are_not_tampering(f: Fixture) {
        let s = &*f.store;
        s.append_audit(vec![NewAudit { org: f.org.clone(), entry: entry(1) }], &mut AuditHeads::default()).await.unwrap();
        let appending = async {
            let mut heads = AuditHeads::default();
            for i in 2..300 {
                s.append_audit(vec![NewAudit { org: f.org.clone(), entry: entry(i) }], &mut heads).await.unwrap();
            }
        };
        let verifying = async {
            let mut runs = Vec::new();
            for _ in 0..100 {
                runs.push(verify_audit(s, &f.org).await.unwrap());
                tokio::task::yield_now().await;
            }
            runs
        };
        let ((), runs) = tokio::join!(appending, verifying);
        for v in runs {
            assert_eq!(v.broken, None, "after {} entries", v.entries);
        }
        assert_eq!(verify_audit(s, &f.org).await.unwrap().entries, 299);

        // The head itself tampered with: each way named.
        let org = f.org.as_str();
        let (_, head) = s.audit_head(&f.org).await.unwrap().expect("a head");
        let broken = || async { verify_audit(s, &f.org).await.unwrap().broken.expect("caught") };
        f.raw("UPDATE audit_heads SET hash = 'x' WHERE org_id = ? RETURNING hash", org).await;
        let b = broken().await;
        assert!(b.why.contains("another hash"), "{b}");
        f.raw(&format!("UPDATE audit_heads SET hash = '{head}' WHERE org_id = ? RETURNING hash"), org).await;
        assert_eq!(verify_audit(s, &f.org).await.unwrap().broken, None);
        f.raw("UPDATE audit_heads SET n = n - 1 WHERE org_id = ? RETURNING hash", org).await;
        let b = broken().await;
        assert!(b.why.contains("behind the store's back"), "{b}");
        f.raw("DELETE FROM audit_heads WHERE org_id = ? RETURNING hash", org).await;
        let b = broken().await;
        assert!(b.why.contains("no head"), "{b}");
    }

    async fn webhook_deliveries_go_out_in_order_one_at_a_time_per_webhook(f: Fixture) {
        let s = &*f.store;
        let a = WebhookId::generate();
        let b = WebhookId::generate();
        s.create_webhook(&f.org, &a, "http://127.0.0.1:9/a", &[WebhookEvent::WorkflowFailed, WebhookEvent::RunnerUnhealthy], "sealed-a").await.unwrap();
        s.create_webhook(&f.org, &b, "http://127.0.0.1:9/b", &[WebhookEvent::RunnerUnhealthy], "sealed-b").await.unwrap();
        assert_eq!(s.list_webhooks(&f.org).await.unwrap().len(), 2);
        let data = serde_json::json!({"n": 1});
        assert_eq!(s.enqueue_event(&f.org, WebhookEvent::WorkflowFailed, &data).await.unwrap(), 1);
        assert_eq!(s.enqueue_event(&f.org, WebhookEvent::RunnerUnhealthy, &serde_json::json!({"n": 2})).await.unwrap(), 2);
        assert_eq!(s.enqueue_event(&f.org, WebhookEvent::DriftDetected, &data).await.unwrap(), 0);
        // Of each webhook only its oldest pending delivery is due.
        let due = s.due_deliveries(now_ms(), 10).await.unwrap();
        assert_eq!(due.len(), 2);
        let first_a = due.iter().find(|d| d.delivery.webhook_id == a).unwrap().clone();
        assert_eq!(first_a.delivery.event, WebhookEvent::WorkflowFailed);
        assert_eq!(first_a.sealed_secret, "sealed-a");
        let body: serde_json::Value = serde_json::from_str(&first_a.body).unwrap();
        assert_eq!(body["id"], first_a.delivery.id.as_str());
        assert_eq!(body["data"]["n"], 1);
        // A failed try waits; the one after it waits behind it.
        s.record_try(&first_a.delivery.id, DeliveryTry::Retry { error: "refused".into(), next_at_ms: now_ms() + 60_000 }).await.unwrap();
        let due = s.due_deliveries(now_ms(), 10).await.unwrap();
        assert_eq!(due.len(), 1, "a's next waits behind its first");
        assert_eq!(due[0].delivery.webhook_id, b);
        let later = s.due_deliveries(now_ms() + 61_000, 10).await.unwrap();
        let again = later.iter().find(|d| d.delivery.webhook_id == a).unwrap();
        assert_eq!(again.delivery.id, first_a.delivery.id);
        assert_eq!(again.delivery.attempts, 1);
        assert_eq!(again.delivery.last_error.as_deref(), Some("refused"));
        s.record_try(&first_a.delivery.id, DeliveryTry::Delivered).await.unwrap();
        let due = s.due_deliveries(now_ms(), 10).await.unwrap();
        let next_a = due.iter().find(|d| d.delivery.webhook_id == a).unwrap();
        assert_eq!(next_a.delivery.event, WebhookEvent::RunnerUnhealthy);
        // The log, newest first; one webhook's.
        let all = s.list_deliveries(&f.org, None, 10).await.unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[2].status, "delivered");
        assert!(all[2].delivered_at_ms.is_some());
        assert_eq!(s.list_deliveries(&f.org, Some(&b), 10).await.unwrap().len(), 1);
        // Removed: gone from the list, its pending deliveries given up.
        assert!(s.remove_webhook(&f.org, &b).await.unwrap().is_some());
        assert!(s.remove_webhook(&f.org, &b).await.unwrap().is_none());
        let of_b = s.list_deliveries(&f.org, Some(&b), 10).await.unwrap();
        assert_eq!(of_b[0].status, "failed");
        assert_eq!(s.list_webhooks(&f.org).await.unwrap().len(), 1);
        s.record_try(&next_a.delivery.id, DeliveryTry::GiveUp { error: "gone".into() }).await.unwrap();
        assert!(s.due_deliveries(now_ms(), 10).await.unwrap().is_empty());
        let _unused: Option<DeliveryId> = None;
    }

    async fn runner_health_transitions_are_recorded_once(f: Fixture) {
        let s = &*f.store;
        let all = s.all_runners().await.unwrap();
        let r = all.iter().find(|(_, r)| r.id == f.runner).unwrap();
        assert_eq!(r.0, f.org);
        assert_eq!(r.1.health, RunnerHealth::Unknown);
        let moves = [(f.runner.clone(), RunnerHealth::Unknown, RunnerHealth::Healthy)];
        assert_eq!(s.set_runners_health(&moves, 5).await.unwrap(), vec![f.runner.clone()]);
        assert!(s.set_runners_health(&moves, 6).await.unwrap().is_empty(), "a stale transition is not recorded");
        assert!(s.set_runners_health(&[], 7).await.unwrap().is_empty());
        let too_many = vec![moves[0].clone(); crate::store::MAX_HEALTH_MOVES + 1];
        assert!(s.set_runners_health(&too_many, 8).await.is_err(), "more than the most at once is refused");
        let r = s.find_runner(&f.org, "r").await.unwrap().unwrap();
        assert_eq!((r.health, r.health_since_ms), (RunnerHealth::Healthy, Some(5)));
        s.set_runner_telemetry(&f.runner, r#"{"slots":4,"busy":1,"spool_backlog":0}"#).await.unwrap();
        let r = s.find_runner(&f.org, "r").await.unwrap().unwrap();
        assert_eq!(r.telemetry.unwrap().busy, 1);
    }

    async fn gauges_count_jobs_by_status_and_kind_and_runners_by_age(f: Fixture) {
        let s = &*f.store;
        f.queue(1).await;
        f.queue(1).await;
        let g = s.gauges(now_ms() - 1000, now_ms() - 5000).await.unwrap();
        assert_eq!(g.jobs, vec![("queued".into(), "exec".into(), 2)]);
        // The org's build runner and `r`, never seen.
        let n = g.runners[0];
        assert!(n >= 1);
        assert_eq!(g.runners, [n, 0, 0, 0], "never seen");
        s.claim(&f.runner, &["exec".into()], 1, 60_000).await.unwrap();
        let g = s.gauges(now_ms() - 1000, now_ms() - 5000).await.unwrap();
        let mut jobs = g.jobs.clone();
        jobs.sort();
        assert_eq!(jobs, vec![("queued".into(), "exec".into(), 1), ("running".into(), "exec".into(), 1)]);
        assert_eq!(g.runners, [n - 1, 1, 0, 0], "seen just now");
        let g = s.gauges(now_ms() + 10_000, now_ms() - 10_000).await.unwrap();
        assert_eq!(g.runners, [n - 1, 0, 1, 0], "unhealthy by the first threshold");
        let g = s.gauges(now_ms() + 10_000, now_ms() + 10_000).await.unwrap();
        assert_eq!(g.runners, [n - 1, 0, 0, 1], "offline by the second");
    }
}

conformance! {
    async fn a_stack_token_works_once_until_it_expires_and_a_new_one_replaces_it(f: Fixture) {
        let s = &*f.store;
        let i = f.install("stacked").await;
        assert!(i.stack_outputs.is_none());
        let now = now_ms();
        s.set_stack_token(&f.org, &i.id, "hash-1", now + 60_000).await.unwrap();
        let redeem = |h: &'static str, at: i64| s.redeem_stack_token(h, at, "runner-hash", "sealed-outputs");
        assert_eq!(redeem("hash-x", now).await.unwrap(), StackRedeem::Unknown);
        let redeemed = StackRedeem::Redeemed { org: f.org.clone(), install: i.id.clone(), runner: i.runner_id.clone() };
        // A look spends nothing.
        assert_eq!(s.peek_stack_token("hash-1", now).await.unwrap(), redeemed);
        assert_eq!(redeem("hash-1", now).await.unwrap(), redeemed);
        assert_eq!(redeem("hash-1", now + 1).await.unwrap(), StackRedeem::Used(now));
        assert_eq!(s.peek_stack_token("hash-1", now + 1).await.unwrap(), StackRedeem::Used(now));
        // The runner's token and the outputs changed with the spend.
        assert!(s.authenticate_runner("runner-hash").await.unwrap().is_some());
        // A new download: the old token is gone, the new one works once.
        s.set_stack_token(&f.org, &i.id, "hash-2", now + 60_000).await.unwrap();
        assert_eq!(redeem("hash-1", now).await.unwrap(), StackRedeem::Unknown);
        assert!(matches!(redeem("hash-2", now).await.unwrap(), StackRedeem::Redeemed { .. }));
        // Expired: refused, and left unspent.
        s.set_stack_token(&f.org, &i.id, "hash-3", now + 10).await.unwrap();
        assert_eq!(redeem("hash-3", now + 10).await.unwrap(), StackRedeem::Expired(now + 10));
        assert_eq!(redeem("hash-3", now + 20).await.unwrap(), StackRedeem::Expired(now + 10));
        // A revoked runner: refused, nothing spent or changed.
        s.set_stack_token(&f.org, &i.id, "hash-4", now + 60_000).await.unwrap();
        s.revoke_runner(&f.org, &i.runner_id).await.unwrap();
        assert_eq!(
            s.redeem_stack_token("hash-4", now, "other-hash", "other").await.unwrap(),
            StackRedeem::RunnerRevoked
        );
        assert!(s.authenticate_runner("other-hash").await.unwrap().is_none());
        let back = s.find_install(&f.org, "stacked").await.unwrap().unwrap();
        assert_eq!(back.stack_outputs.as_deref(), Some("sealed-outputs"));
    }
}
