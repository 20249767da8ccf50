//! What the store keeps sealed, and what an earlier version kept in the clear.

use super::*;
use nuon_core::wire::ErrorCode;

conformance! {
    async fn signing_keys_kept_in_the_clear_are_found_and_sealed_once(f: Fixture) {
        let s = &*f.store;
        assert!(s.clear_signing_keys().await.unwrap().is_empty(), "sealed keys are not listed");
        // What an earlier version kept: the key's 32 bytes.
        let old = OrgId::generate();
        s.create_org(&old, "old", &[7u8; 32]).await.unwrap();
        assert_eq!(s.clear_signing_keys().await.unwrap(), vec![(old.clone(), vec![7u8; 32])]);
        s.seal_signing_key(&old, b"sealed now").await.unwrap();
        assert!(s.clear_signing_keys().await.unwrap().is_empty());
        assert_eq!(s.signing_key(&old).await.unwrap().unwrap(), b"sealed now");
        // Sealing twice changes nothing: only a key in the clear is replaced.
        s.seal_signing_key(&old, b"again").await.unwrap();
        assert_eq!(s.signing_key(&old).await.unwrap().unwrap(), b"sealed now");
    }

    async fn jobs_keep_their_spec_sealed_and_show_the_stored_payload(f: Fixture) {
        let mut job = f.new_job(&f.runner, "exec", 1);
        job.sealed_spec = "SEALED-SPEC".into();
        job.payload = serde_json::json!({"command": "(secret)"});
        let id = job.spec.job_id.clone();
        f.store.enqueue_job(job).await.unwrap();
        let shown = f.store.get_job(&f.org, &id).await.unwrap().unwrap();
        assert_eq!(shown.payload, serde_json::json!({"command": "(secret)"}));
        assert!(f.store.clear_job_specs(10).await.unwrap().is_empty());
        // A claim hands out what is kept: the API opens it for the runner.
        let claimed = f.store.claim(&f.runner, &["exec".into()], 1, 60_000).await.unwrap();
        assert_eq!(claimed.jobs[0].spec, "SEALED-SPEC");

        // A job an earlier version queued: its spec in the clear, no payload.
        let legacy = f.queue(1).await;
        assert_eq!(f.raw_text("UPDATE jobs SET payload = NULL WHERE id = ? RETURNING spec", &legacy).await.map(|s| s.contains("true")), Some(true));
        let found = f.store.clear_job_specs(10).await.unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, legacy);
        f.store.seal_job_spec(&legacy, "NOW-SEALED", "{\"command\":\"true\"}").await.unwrap();
        assert!(f.store.clear_job_specs(10).await.unwrap().is_empty());
        assert_eq!(f.raw_text("SELECT spec FROM jobs WHERE id = ?", &legacy).await.unwrap(), "NOW-SEALED");
        let shown = f.store.get_job(&f.org, &legacy).await.unwrap().unwrap();
        assert_eq!(shown.payload, serde_json::json!({"command": "true"}));
    }

    async fn a_kept_job_loses_its_spec_after_retention_and_keeps_its_result(f: Fixture) {
        use nuon_core::AppId;
        let builder = f.store.build_runner(&f.org).await.unwrap().unwrap();
        let app = f.store.create_app(&f.org, &AppId::generate(), "web").await.unwrap();
        let b = f.store.enqueue_build(f.new_job(&builder, "build", 1), &app.id, 1, "db").await.unwrap();
        f.store.claim(&builder, &["build".into()], 1, 60_000).await.unwrap();
        let mut result = ok_result();
        result.outputs = serde_json::json!({"artifact": {"repo": "web/db", "digest": format!("sha256:{}", "a".repeat(64))}});
        f.store.complete(&builder, &b.id, Completion { attempt: 1, log_lines: 0, result, logs: None }).await.unwrap();
        assert_ne!(f.raw_text("SELECT spec FROM jobs WHERE id = ?", &b.id).await.unwrap(), "");
        f.store.prune(now_ms() - 3_600_000).await.unwrap();
        assert_ne!(f.raw_text("SELECT spec FROM jobs WHERE id = ?", &b.id).await.unwrap(), "", "inside the window");
        assert!(f.store.prune(now_ms() + 1).await.unwrap() >= 1);
        assert_eq!(f.raw_text("SELECT spec FROM jobs WHERE id = ?", &b.id).await.unwrap(), "");
        let kept = f.store.get_build(&f.org, &b.id).await.unwrap().unwrap();
        assert_eq!(kept.status, JobStatus::Succeeded);
        assert!(kept.artifact.is_some(), "the result stays");
    }

    async fn a_rotation_replaces_the_key_it_was_given_and_only_that(f: Fixture) {
        use nuon_core::SignedRotation;
        let s = &*f.store;
        assert_eq!(s.org_named("o").await.unwrap(), f.org);
        assert!(s.org_named("nobody").await.unwrap_err().to_string().contains("no org is named"));
        assert!(s.key_rotations(&f.org).await.unwrap().is_empty());
        let chain = vec![SignedRotation { rotation: "{}".into(), signature: "sig".into() }];
        s.rotate_signing_key(&f.org, b"sealed key of o", b"second", &chain).await.unwrap();
        assert_eq!(s.signing_key(&f.org).await.unwrap().unwrap(), b"second");
        assert_eq!(s.key_rotations(&f.org).await.unwrap(), chain);
        // A rotation from a key that is no longer the org's changes nothing.
        let err = s.rotate_signing_key(&f.org, b"sealed key of o", b"third", &[]).await.unwrap_err();
        assert!(matches!(err, StoreError::Conflict { code: ErrorCode::KeyRotated, .. }), "{err:?}");
        assert_eq!(s.signing_key(&f.org).await.unwrap().unwrap(), b"second");
        assert_eq!(s.key_rotations(&f.org).await.unwrap(), chain);
    }

    async fn jobs_not_ended_are_listed_to_be_signed_again(f: Fixture) {
        let s = &*f.store;
        let mut ids = Vec::new();
        for _ in 0..5 {
            ids.push(f.queue(1).await);
        }
        // One runs, one has ended: the ended one is not listed.
        s.claim(&f.runner, &["exec".into()], 2, 60_000).await.unwrap();
        let claimed: Vec<JobId> = {
            let mut c = Vec::new();
            for id in &ids {
                if s.get_job(&f.org, id).await.unwrap().unwrap().status == JobStatus::Running {
                    c.push(id.clone());
                }
            }
            c
        };
        assert_eq!(claimed.len(), 2);
        s.complete(&f.runner, &claimed[0], Completion { attempt: 1, log_lines: 0, result: ok_result(), logs: None }).await.unwrap();
        let mut want: Vec<JobId> = ids.iter().filter(|i| **i != claimed[0]).cloned().collect();
        want.sort();
        // Paged in id order.
        let first = s.unended_job_specs(&f.org, None, 3).await.unwrap();
        let rest = s.unended_job_specs(&f.org, Some(&first[2].0), 3).await.unwrap();
        let got: Vec<JobId> = first.iter().chain(&rest).map(|(id, _)| id.clone()).collect();
        assert_eq!(got, want);
        assert!(s.unended_job_specs(&OrgId::generate(), None, 10).await.unwrap().is_empty());
        s.set_job_signature(&want[0], "NEW-SIGNATURE").await.unwrap();
        assert_eq!(f.raw_text("SELECT signature FROM jobs WHERE id = ?", &want[0]).await.unwrap(), "NEW-SIGNATURE");
    }

    async fn sealed_values_are_listed_by_place_and_replaced_only_if_unchanged(f: Fixture) {
        use crate::store::SealedColumn;
        let s = &*f.store;
        // The org's key is bytes holding the sealed text.
        let keys = s.sealed_values(SealedColumn::SigningKeys, "", 10).await.unwrap();
        assert_eq!(keys, vec![(f.org.to_string(), "sealed key of o".to_owned())]);
        assert!(s.replace_sealed(SealedColumn::SigningKeys, f.org.as_str(), "sealed key of o", "resealed").await.unwrap());
        assert_eq!(s.signing_key(&f.org).await.unwrap().unwrap(), b"resealed");
        assert!(!s.replace_sealed(SealedColumn::SigningKeys, f.org.as_str(), "sealed key of o", "again").await.unwrap());
        assert_eq!(s.signing_key(&f.org).await.unwrap().unwrap(), b"resealed");

        // Specs, paged in key order.
        let mut ids = Vec::new();
        for _ in 0..5 {
            ids.push(f.queue(1).await.to_string());
        }
        ids.sort();
        let first = s.sealed_values(SealedColumn::JobSpecs, "", 3).await.unwrap();
        let rest = s.sealed_values(SealedColumn::JobSpecs, &first[2].0, 3).await.unwrap();
        let got: Vec<String> = first.iter().chain(&rest).map(|(k, _)| k.clone()).collect();
        assert_eq!(got, ids);
        let (key, old) = &first[0];
        assert!(s.replace_sealed(SealedColumn::JobSpecs, key, old, "NEW-SPEC").await.unwrap());
        assert_eq!(f.raw_text("SELECT spec FROM jobs WHERE id = ?", &key.parse().unwrap()).await.unwrap(), "NEW-SPEC");

        // The key check is one setting.
        s.setting_or_insert("secrets_key_check", "CHECK").await.unwrap();
        s.setting_or_insert("other", "x").await.unwrap();
        let checks = s.sealed_values(SealedColumn::KeyCheck, "", 10).await.unwrap();
        assert_eq!(checks, vec![("secrets_key_check".to_owned(), "CHECK".to_owned())]);
        // Every place can be read (its SQL is valid on this database).
        for column in SealedColumn::ALL {
            s.sealed_values(column, "", 10).await.unwrap_or_else(|e| panic!("{column:?}: {e}"));
        }
    }
}
