//! Jobs that are not exactly what the org signed for this runner never run.

use nuon_core::Signed as _;
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

/// Attack 5: a claim answer saved once and served again (by a compromised
/// control plane, or anyone on a plain-HTTP link) runs nothing: not in the
/// same process, not after a restart (the journal is the record), not
/// once its grant's time is past, not without a grant or with one for
/// another attempt, and not as a new attempt, granted, of a job it ran to
/// its end (as a control plane restored from an older backup asks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_served_again_runs_nothing() {
    let h = Harness::new();
    let count = h.dir.path().join("count");
    let spec = h.sh(&format!("echo ran >> '{}'", count.display()));
    let claim = h.claimed(&spec);
    let runs = || {
        std::fs::read_to_string(&count)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let replay = |claimed: nuon_core::wire::ClaimedJob| {
        h.fake.with(|s| s.completions.remove(&claimed.job_id));
        h.enqueue(claimed)
    };

    let runner = h.start(h.config());
    h.enqueue(claim.clone());
    let done = h.fake.completion(&spec.job_id, secs(30)).await;
    assert_eq!(done.result.outcome, Outcome::Succeeded, "{done:?}");
    assert_eq!(runs(), 1);

    // Once its spool is shipped and gone (a replay while it is there is
    // dropped before it is even read).
    let spool = crate::fake::spool_file(&h.work_dir(), &(spec.job_id.clone(), 1));
    crate::fake::eventually("the spool shipped", secs(30), || !spool.exists()).await;
    // It ran to its end here, so the runner's journal refuses it by its
    // id, whatever the attempt or the grant.
    // Until the run's task is joined the runner ignores a claim of the
    // attempt it runs: served again until it is answered.
    let done = until_answered(
        || {
            h.fake.with(|s| s.queue.clear());
            replay(claim.clone());
        },
        || h.fake.with(|s| s.completions.get(&spec.job_id).cloned()),
    )
    .await;
    assert_eq!(done.result.outcome, Outcome::Failed, "{done:?}");
    let reason = done.result.reason.unwrap();
    assert!(
        reason.contains("ran attempt 1 of this job to its end"),
        "{reason}"
    );
    assert!(reason.contains("audit.jsonl"), "{reason}");

    // Served again by someone on the link, not by the control plane, so
    // it holds no lease of it and takes nothing of that attempt: the
    // refusal is journaled, and the run's end still counts (nothing says
    // `job.dropped`), so a later claim of the job is still refused as run
    // (after the restart below, from the journal).
    let journal = h.work_dir().join("audit.jsonl");
    let entries = |action: &str| {
        std::fs::read_to_string(&journal)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&format!("\"action\":\"{action}\"")))
            .count()
    };
    let before = entries("job.refused");
    // Served again until refused (a claim of an attempt whose task is not
    // joined yet is ignored).
    until_answered(
        || {
            h.fake.with(|s| {
                s.leases.remove(&(spec.job_id.clone(), 1));
                s.replays.clear();
                s.replays.push_back(claim.clone());
            })
        },
        || (entries("job.refused") > before).then_some(()),
    )
    .await;
    // Its shippers drained: a refusal shipped as that attempt would have
    // been refused as stale by now, and read as the run's end not counting.
    runner.stop(secs(30)).await.unwrap();
    assert_eq!(entries("job.dropped"), 0, "the run's end was forgotten");

    // After a restart, from the journal.
    let runner = h.start(h.config());
    replay(claim.clone());
    refused(&h, &spec.job_id, "a job runs once").await;

    // No grant; a grant of another attempt; a grant whose time is past.
    let mut bare = h.claimed_attempt(&spec, 2);
    bare.grant = String::new();
    replay(bare);
    refused(&h, &spec.job_id, "carries no grant").await;
    let mut other = h.claimed_attempt(&spec, 2);
    other.attempt = 3;
    replay(other);
    refused(&h, &spec.job_id, "its grant does not verify").await;
    let mut late = h.claimed_attempt(&spec, 4);
    late.not_after_ms = nuon_core::now_ms() - 1_000;
    let grant = nuon_core::Grant {
        job_id: &spec.job_id,
        attempt: 4,
        runner_id: &h.runner_id,
        not_after_ms: late.not_after_ms,
        spec: late.spec.as_bytes(),
    };
    late.grant = h.key.sign_now(&grant.signed_bytes());
    replay(late);
    refused(&h, &spec.job_id, "its grant ended").await;

    // A new attempt, granted (a control plane restored from a backup
    // taken before the job ended asks again): refused, nothing runs.
    replay(h.claimed_attempt(&spec, 5));
    refused(
        &h,
        &spec.job_id,
        "ran attempt 1 of this job to its end (succeeded",
    )
    .await;
    runner.stop(secs(30)).await.unwrap();
    assert_eq!(runs(), 1);
}

/// Serves a replay with `serve` until `answered` finds the runner's
/// answer: a claim of an attempt whose task the runner has not joined yet
/// is ignored, so one served too early gets none. At most 6 times, 5 s
/// each.
async fn until_answered<R>(mut serve: impl FnMut(), mut answered: impl FnMut() -> Option<R>) -> R {
    for _ in 0..6 {
        serve();
        let until = std::time::Instant::now() + secs(5);
        while std::time::Instant::now() < until {
            if let Some(r) = answered() {
                return r;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    panic!("a replay served 6 times was never answered");
}

/// The completion of `job`, refused for `why`; its reason.
async fn refused(h: &Harness, job: &JobId, why: &str) -> String {
    let done = h.fake.completion(job, secs(30)).await;
    assert_eq!(done.result.outcome, Outcome::Failed, "{done:?}");
    let reason = done.result.reason.unwrap();
    assert!(reason.contains(why), "{reason} lacks {why}");
    reason
}
