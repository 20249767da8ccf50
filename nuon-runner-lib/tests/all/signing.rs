//! Jobs that are not exactly what the org signed for this runner never run.

use nuon_core::wire::LogStream;
use nuon_core::{JobId, OrgSigningKey, Outcome, RunnerId};

use crate::fake::{Harness, secs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_or_misaddressed_jobs_never_run() {
    let h = Harness::new();
    let marker = h.dir.path().join("marker");
    let evil = || h.sh(&format!("touch '{}'", marker.display()));

    // The org signed a harmless spec; the spec delivered was changed.
    let harmless = h.claimed(&h.sh("echo harmless"));
    let changed = evil();
    let mut altered = harmless.clone();
    altered.job_id = changed.job_id.clone();
    altered.spec = serde_json::to_string(&changed).unwrap();

    // Signed by another key.
    let mut other_key = h.claimed(&evil());
    other_key.signature = OrgSigningKey::generate().sign_now(other_key.spec.as_bytes());

    // Unsigned.
    let mut unsigned = h.claimed(&evil());
    unsigned.signature = String::new();

    // Signed, but for another runner.
    let mut for_other = evil();
    for_other.runner_id = RunnerId::generate();
    let for_other = h.claimed(&for_other);

    // Signed, but claimed as another job.
    let mut other_job = h.claimed(&evil());
    other_job.job_id = JobId::generate();

    // Signed spec that is not a job spec.
    let mut not_a_spec = h.claimed(&h.sh("true"));
    not_a_spec.spec = "{\"command\":\"true\"}".into();
    not_a_spec.signature = h.key.sign_now(not_a_spec.spec.as_bytes());

    let cases = [
        (
            altered,
            "job signature does not match the org's signing key",
        ),
        (
            other_key,
            "job signature does not match the org's signing key",
        ),
        (unsigned, "job spec is not signed"),
        (for_other, "is for runner"),
        (other_job, "the signed spec is for job"),
        (not_a_spec, "not a valid job spec"),
    ];
    let runner = h.start(h.config());
    for (claimed, why) in cases {
        let key = h.enqueue(claimed);
        let done = h.fake.completion(&key.0, secs(30)).await;
        assert_eq!(done.result.outcome, Outcome::Failed);
        let reason = done.result.reason.clone().unwrap();
        assert!(
            reason.starts_with(&format!("refusing job {}: ", key.0)),
            "{reason}"
        );
        assert!(reason.contains(why), "{reason} lacks {why}");
        assert_eq!(h.fake.with(|s| s.texts(&key, LogStream::System)), [reason]);
        // Refused before the first heartbeat: no lease was ever used.
        assert!(h.fake.with(|s| {
            s.heartbeats
                .iter()
                .all(|hb| hb.leases.iter().all(|l| l.job_id != key.0))
        }));
    }
    // A valid job still runs, and the marker was never made.
    let ok = h.enqueue_spec(&h.sh("echo fine"));
    assert_eq!(
        h.fake.completion(&ok.0, secs(30)).await.result.outcome,
        Outcome::Succeeded
    );
    runner.stop(secs(30)).await.unwrap();
    assert!(!marker.exists(), "a refused job ran");
}
