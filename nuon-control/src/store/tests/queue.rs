//! The runner side: log batches, completions, leases, org limits, scoping.

use super::*;
use nuon_core::wire::ErrorCode;

conformance! {
    async fn log_batches_are_idempotent_and_gaps_store_nothing(f: Fixture) {
        let job = f.queue(1).await;
        let (job2, n) = f.claim_one(60_000).await;
        assert_eq!(job, job2);
        // check(batch, expected ack) in order; the log must end as a, b, c, d.
        let cases: [(u64, &[&str], u64); 5] = [
            (1, &["a", "b"], 2),
            (1, &["a", "b"], 2), // a resend: nothing new
            (2, &["b", "c"], 3), // overlap: only "c" is new
            (5, &["e"], 3),      // a gap: nothing stored
            (4, &["d"], 4),
        ];
        for (first, texts, expected) in cases {
            let ack = f
                .store
                .append_logs(&f.runner, &job, Fixture::batch(n, first, texts))
                .await
                .unwrap();
            assert_eq!(ack.acked_seq, expected, "batch from {first}");
        }
        assert_eq!(f.texts(&job).await, ["a", "b", "c", "d"]);
    }
}

conformance! {
    async fn completion_waits_for_logs_and_is_idempotent(f: Fixture) {
        let job = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        f.store
            .append_logs(&f.runner, &job, Fixture::batch(n, 1, &["a"]))
            .await
            .unwrap();
        let done = || Completion {
            attempt: n,
            logs: None,
            log_lines: 2,
            result: ok_result(),
        };
        match f.store.complete(&f.runner, &job, done()).await {
            Err(StoreError::Conflict {
                code: ErrorCode::LogsPending,
                acked_seq: Some(1),
                ..
            }) => {}
            other => panic!("expected logs_pending, got {other:?}"),
        }
        f.store
            .append_logs(&f.runner, &job, Fixture::batch(n, 2, &["b"]))
            .await
            .unwrap();
        let first = f.store.complete(&f.runner, &job, done()).await.unwrap();
        let again = f.store.complete(&f.runner, &job, done()).await.unwrap();
        assert_eq!(
            (first.status, again.status),
            (JobStatus::Succeeded, JobStatus::Succeeded)
        );
        // A finished attempt takes no more lines.
        let late = f
            .store
            .append_logs(&f.runner, &job, Fixture::batch(n, 3, &["c"]))
            .await;
        assert!(
            matches!(
                late,
                Err(StoreError::Conflict {
                    code: ErrorCode::StaleAttempt,
                    ..
                })
            ),
            "{late:?}"
        );
    }
}

conformance! {
    async fn writes_arriving_together_are_each_answered_as_if_alone(f: Fixture) {
        // Many runners' writes at once, as a group commit takes them:
        // each job gets its log lines (and a resend of them) and its
        // completion together; one write is stale, one completion comes
        // early. Each is answered on its own.
        let jobs = 12;
        for _ in 0..jobs {
            f.queue(1).await;
        }
        let claimed = f
            .store
            .claim(&f.runner, &["exec".into()], jobs, 60_000)
            .await
            .unwrap()
            .jobs;
        assert_eq!(claimed.len(), jobs as usize);
        let mut leases: Vec<LeaseRef> = claimed
            .iter()
            .map(|c| LeaseRef {
                job_id: c.job_id.clone(),
                attempt: c.attempt,
            })
            .collect();
        leases.push(LeaseRef {
            job_id: claimed[0].job_id.clone(),
            attempt: 7,
        });
        // A job the store never had (it was restored from a backup taken
        // before the job was made): the runner is told to stop it.
        leases.push(LeaseRef {
            job_id: JobId::generate(),
            attempt: 1,
        });
        let store = &f.store;
        let runner = &f.runner;
        let heartbeat = store.heartbeat(runner, &leases, 60_000);
        let logs = claimed.iter().flat_map(|c| {
            let once = store.append_logs(runner, &c.job_id, Fixture::batch(c.attempt, 1, &["a", "b"]));
            let again = store.append_logs(runner, &c.job_id, Fixture::batch(c.attempt, 2, &["b"]));
            [once, again]
        });
        let stale = store.append_logs(runner, &claimed[1].job_id, Fixture::batch(9, 1, &["x"]));
        let (states, acks, stale) = tokio::join!(
            heartbeat,
            futures_util::future::join_all(logs),
            stale
        );
        let states = states.unwrap();
        assert_eq!(states.len(), leases.len());
        assert!(states[..jobs as usize].iter().all(|s| s.state == LeaseState::Active));
        assert_eq!(states[jobs as usize].state, LeaseState::Stale);
        assert_eq!(states[jobs as usize + 1].state, LeaseState::Stale);
        assert!(acks.iter().all(|a| a.as_ref().unwrap().acked_seq == 2), "{acks:?}");
        assert!(
            matches!(stale, Err(StoreError::Conflict { code: ErrorCode::StaleAttempt, .. })),
            "{stale:?}"
        );
        let done = |i: usize, log_lines| {
            let c = &claimed[i];
            store.complete(
                runner,
                &c.job_id,
                Completion {
                    attempt: c.attempt,
                    logs: None,
                    log_lines,
                    result: ok_result(),
                },
            )
        };
        // The last job's completion comes once too early (before a line it
        // names), then as it should; the first job's comes twice.
        let mut ends = vec![done(claimed.len() - 1, 3), done(0, 2)];
        ends.extend((0..claimed.len()).map(|i| done(i, 2)));
        let mut ends = futures_util::future::join_all(ends).await;
        let early = ends.remove(0);
        assert!(
            matches!(early, Err(StoreError::Conflict { code: ErrorCode::LogsPending, acked_seq: Some(2), .. })),
            "{early:?}"
        );
        assert!(
            ends.iter().all(|e| e.as_ref().unwrap().status == JobStatus::Succeeded),
            "{ends:?}"
        );
        for c in &claimed {
            assert_eq!(f.texts(&c.job_id).await, ["a", "b"]);
            let job = f.store.get_job(&f.org, &c.job_id).await.unwrap().unwrap();
            assert_eq!((job.status, job.exit_code), (JobStatus::Succeeded, Some(0)));
        }
    }
}

conformance! {
    async fn expired_leases_requeue_or_fail_by_policy_and_fence_the_old_attempt(f: Fixture) {
        let once = f.queue(1).await;
        let twice = f.queue(2).await;
        let never_confirmed = f.queue(1).await;
        let claimed = f
            .store
            .claim(&f.runner, &["exec".into()], 3, 1)
            .await
            .unwrap()
            .jobs;
        assert_eq!(claimed.len(), 3);
        // The first two confirm with a heartbeat (work started); the third never does.
        let leases: Vec<_> = claimed[..2]
            .iter()
            .map(|c| LeaseRef {
                job_id: c.job_id.clone(),
                attempt: c.attempt,
            })
            .collect();
        let states = f.store.heartbeat(&f.runner, &leases, 1).await.unwrap();
        assert!(states.iter().all(|s| s.state == LeaseState::Active));
        let rescued = f.store.rescue_expired(now_ms() + 10).await.unwrap();
        assert_eq!(rescued.len(), 3);
        let status = |id: JobId| {
            let (store, org) = (&f.store, f.org.clone());
            async move { store.get_job(&org, &id).await.unwrap().unwrap() }
        };
        let lost = status(once.clone()).await;
        assert_eq!(lost.status, JobStatus::Failed);
        assert!(lost.reason.unwrap().contains("runner lost"));
        assert_eq!(status(twice.clone()).await.status, JobStatus::Queued);
        assert_eq!(
            status(never_confirmed.clone()).await.status,
            JobStatus::Queued
        );
        // The old attempt of the requeued job is fenced off.
        let stale = f
            .store
            .heartbeat(&f.runner, &leases[1..], 60_000)
            .await
            .unwrap();
        assert_eq!(stale[0].state, LeaseState::Stale);
        let write = f
            .store
            .append_logs(&f.runner, &twice, Fixture::batch(1, 1, &["x"]))
            .await;
        assert!(
            matches!(
                write,
                Err(StoreError::Conflict {
                    code: ErrorCode::StaleAttempt,
                    ..
                })
            ),
            "{write:?}"
        );
        let next = f
            .store
            .claim(&f.runner, &["exec".into()], 5, 60_000)
            .await
            .unwrap()
            .jobs;
        let twice_next = next.iter().find(|c| c.job_id == twice).unwrap();
        assert_eq!(twice_next.attempt, 2);
    }
}

conformance! {
    async fn an_org_limit_caps_its_running_jobs_across_its_runners(f: Fixture) {
        let second = RunnerId::generate();
        f.store
            .create_runner(&f.org, &second, "r2", "h2")
            .await
            .unwrap();
        for _ in 0..3 {
            f.queue(1).await;
        }
        let seconds = f.queue_for(&second, 1).await;
        let claim = |runner: RunnerId| {
            let store = &f.store;
            async move {
                store
                    .claim(&runner, &["exec".into()], 5, 60_000)
                    .await
                    .unwrap()
            }
        };
        assert_eq!(f.store.set_org_limit("o", Some(2)).await.unwrap(), f.org);
        // Two of the org's jobs may run: the first runner takes both places.
        let first = claim(f.runner.clone()).await;
        assert_eq!((first.jobs.len(), first.held_back), (2, true));
        let none = claim(second.clone()).await;
        assert_eq!((none.jobs.len(), none.held_back), (0, true));
        // A job that ends makes room for one more, whichever runner asks.
        let done = Completion {
            attempt: first.jobs[0].attempt,
            logs: None,
            log_lines: 0,
            result: ok_result(),
        };
        f.store
            .complete(&f.runner, &first.jobs[0].job_id, done)
            .await
            .unwrap();
        let next = claim(second.clone()).await;
        assert_eq!(next.jobs.len(), 1);
        assert_eq!(next.jobs[0].job_id, seconds);
        assert!(!next.held_back, "the second runner has nothing left queued");
        let full = claim(f.runner.clone()).await;
        assert_eq!((full.jobs.len(), full.held_back), (0, true));
        // So do lost attempts: both running ones (never confirmed, so
        // queued again) leave room for the first runner's two queued jobs.
        let rescued = f.store.rescue_expired(now_ms() + 120_000).await.unwrap();
        assert_eq!(rescued.len(), 2);
        assert!(rescued.iter().all(|r| r.org_id == f.org));
        let after = claim(f.runner.clone()).await;
        assert_eq!((after.jobs.len(), after.held_back), (2, false));
        // Lifting the limit lifts it; a limit of an unknown org is refused.
        f.store.set_org_limit("o", Some(0)).await.unwrap();
        f.queue(1).await;
        assert!(claim(f.runner.clone()).await.held_back);
        f.store.set_org_limit("o", None).await.unwrap();
        assert_eq!(claim(f.runner.clone()).await.jobs.len(), 1);
        let unknown = f.store.set_org_limit("nope", Some(1)).await;
        assert!(
            matches!(&unknown, Err(StoreError::Invalid(m)) if m.contains("nope")),
            "{unknown:?}"
        );
    }
}

conformance! {
    async fn queries_are_scoped_by_org_and_runner(f: Fixture) {
        let job = f.queue(1).await;
        let other_org = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        assert!(f.store.get_job(&other_org, &job).await.unwrap().is_none());
        assert!(f.store.list_jobs(&other_org, 10).await.unwrap().is_empty());
        assert!(
            f.store
                .read_logs(&other_org, &job, 0, 10)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            f.store
                .request_cancel(&other_org, &job)
                .await
                .unwrap()
                .is_none()
        );
        let stranger = RunnerId::generate();
        f.store
            .create_runner(&f.org, &stranger, "s", "h2")
            .await
            .unwrap();
        assert!(
            f.store
                .claim(&stranger, &["exec".into()], 5, 1000)
                .await
                .unwrap()
                .jobs
                .is_empty()
        );
        assert_eq!(
            f.store
                .claim(&f.runner, &["other-kind".into()], 5, 1000)
                .await
                .unwrap()
                .jobs
                .len(),
            0
        );
    }
}

conformance! {
    async fn a_write_the_database_refuses_fails_alone(f: Fixture) {
        // PostgreSQL's text cannot hold NUL: the completion carrying one
        // may fail (SQLite takes it), but the writes arriving with it must
        // not fail with it.
        for _ in 0..2 {
            f.queue(1).await;
        }
        let claimed = f
            .store
            .claim(&f.runner, &["exec".into()], 2, 60_000)
            .await
            .unwrap()
            .jobs;
        let (a, b) = (&claimed[0], &claimed[1]);
        let lease = [LeaseRef {
            job_id: a.job_id.clone(),
            attempt: a.attempt,
        }];
        let mut poisoned = ok_result();
        poisoned.reason = Some("bad\0reason".into());
        let (beat, logs, end) = tokio::join!(
            f.store.heartbeat(&f.runner, &lease, 60_000),
            f.store.append_logs(&f.runner, &a.job_id, Fixture::batch(a.attempt, 1, &["a"])),
            f.store.complete(
                &f.runner,
                &b.job_id,
                Completion {
                    attempt: b.attempt,
                    logs: None,
                    log_lines: 0,
                    result: poisoned,
                },
            ),
        );
        assert_eq!(beat.unwrap()[0].state, LeaseState::Active);
        assert_eq!(logs.unwrap().acked_seq, 1);
        assert!(matches!(end, Ok(_) | Err(StoreError::Database(_))), "{end:?}");
        assert_eq!(f.texts(&a.job_id).await, ["a"]);
    }
}

conformance! {
    async fn a_setting_is_stored_once_and_kept(f: Fixture) {
        assert_eq!(f.store.setting_or_insert("k", "first").await.unwrap(), "first");
        assert_eq!(f.store.setting_or_insert("k", "second").await.unwrap(), "first");
        assert_eq!(f.store.setting_or_insert("other", "x").await.unwrap(), "x");
    }
}

conformance! {
    async fn lease_states_are_read_without_extending_and_leases_are_extended_at_a_new_lead(f: Fixture) {
        f.queue(1).await;
        let (job, n) = f.claim_one(60_000).await;
        let lease = LeaseRef { job_id: job.clone(), attempt: n };
        let stale = LeaseRef { job_id: job.clone(), attempt: n + 1 };
        let states = f.store.lease_states(&f.runner, &[lease.clone(), stale]).await.unwrap();
        let states: Vec<_> = states.into_iter().map(|s| (s.attempt, s.state)).collect();
        assert_eq!(states, [(n, LeaseState::Active), (n + 1, LeaseState::Stale)]);
        let stranger = RunnerId::generate();
        let theirs = f.store.lease_states(&stranger, std::slice::from_ref(&lease)).await.unwrap();
        assert_eq!(theirs[0].state, LeaseState::Stale);

        // Rescue at a time past the lease would end the attempt, unless the
        // leases were extended past it first (a new lead does that).
        let later = now_ms() + 120_000;
        assert_eq!(f.store.extend_running_leases(later + 1_000).await.unwrap(), 1);
        assert!(f.store.rescue_expired(later).await.unwrap().is_empty());
        assert_eq!(f.store.lease_states(&f.runner, &[lease]).await.unwrap()[0].state, LeaseState::Active);
        // Leases already past the time are left alone.
        assert_eq!(f.store.extend_running_leases(later).await.unwrap(), 0);
        assert_eq!(f.store.rescue_expired(later + 2_000).await.unwrap().len(), 1);
    }
}

conformance! {
    async fn the_attempts_a_runner_holds_are_the_running_confirmed_ones(f: Fixture) {
        f.queue(1).await;
        f.queue(2).await;
        f.queue(3).await;
        let (confirmed, n) = f.claim_one(60_000).await;
        let (unconfirmed, _) = f.claim_one(60_000).await;
        let (ended, m) = f.claim_one(60_000).await;
        // Nothing held before a heartbeat confirms an attempt: a claim
        // answer may never have arrived.
        assert!(f.store.held_attempts(&f.runner).await.unwrap().is_empty());
        let lease = LeaseRef { job_id: confirmed.clone(), attempt: n };
        let done = LeaseRef { job_id: ended.clone(), attempt: m };
        f.store.heartbeat(&f.runner, &[lease.clone(), done], 60_000).await.unwrap();
        let end = Completion { attempt: m, log_lines: 0, result: ok_result(), logs: None };
        f.store.complete(&f.runner, &ended, end).await.unwrap();
        assert_eq!(f.store.held_attempts(&f.runner).await.unwrap(), [lease]);
        assert!(f.store.held_attempts(&RunnerId::generate()).await.unwrap().is_empty());
        let _ = unconfirmed;
    }
}

conformance! {
    async fn a_completion_stores_the_last_lines_it_carries_first(f: Fixture) {
        let job = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        f.store.append_logs(&f.runner, &job, Fixture::batch(n, 1, &["a", "b"])).await.unwrap();
        let done = |log_lines| Completion { attempt: n, log_lines, result: ok_result(), logs: None };
        let end = |first, texts: &[&str]| {
            f.store.complete_with_logs(&f.runner, &job, Fixture::batch(n, first, texts), LogQuota::NONE, done(4))
        };
        // Lines past a gap store nothing, and the completion waits for them.
        let gap = end(4, &["d"]).await;
        assert!(
            matches!(gap, Err(StoreError::Conflict { code: ErrorCode::LogsPending, acked_seq: Some(2), .. })),
            "{gap:?}"
        );
        // The lines that follow (one of them held already), and the
        // completion they make whole.
        let (ack, wrote) = end(2, &["b", "c", "d"]).await.unwrap();
        assert_eq!((ack.status, wrote > 0), (JobStatus::Succeeded, true));
        // Sent again (its answer lost): the same answer, nothing stored twice.
        let (ack, wrote) = end(2, &["b", "c", "d"]).await.unwrap();
        assert_eq!((ack.status, wrote), (JobStatus::Succeeded, 0));
        assert_eq!(f.texts(&job).await, ["a", "b", "c", "d"]);
        let row = f.store.get_job(&f.org, &job).await.unwrap().unwrap();
        assert_eq!(row.status, JobStatus::Succeeded);
        // A completion its lines do not make whole is refused; the lines stay.
        let job = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        let short = Completion { attempt: n, log_lines: 3, result: ok_result(), logs: None };
        let refused = f
            .store
            .complete_with_logs(&f.runner, &job, Fixture::batch(n, 1, &["x", "y"]), LogQuota::NONE, short)
            .await;
        assert!(
            matches!(refused, Err(StoreError::Conflict { code: ErrorCode::LogsPending, acked_seq: Some(2), .. })),
            "{refused:?}"
        );
        assert_eq!(f.texts(&job).await, ["x", "y"]);
        // Another runner's: refused, nothing stored.
        let other = f
            .store
            .complete_with_logs(&RunnerId::generate(), &job, Fixture::batch(n, 3, &["z"]), LogQuota::NONE, done(3))
            .await;
        assert!(other.is_err(), "{other:?}");
        assert_eq!(f.texts(&job).await, ["x", "y"]);
    }
}
