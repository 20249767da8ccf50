//! Reading logs back in pages.

use super::*;

conformance! {
    async fn a_log_longer_than_one_page_of_chunks_is_not_complete_early(f: Fixture) {
        let job = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        // 100 batches of one line: more chunks than one page reads.
        for i in 1..=100u64 {
            let text = format!("line {i}");
            f.store
                .append_logs(&f.runner, &job, Fixture::batch(n, i, &[text.as_str()]))
                .await
                .unwrap();
        }
        f.store
            .complete(
                &f.runner,
                &job,
                Completion {
                    attempt: n,
                    logs: None,
                    log_lines: 100,
                    result: ok_result(),
                },
            )
            .await
            .unwrap();
        let mut cursor = 0;
        let mut seen = Vec::new();
        loop {
            let page = f.store.read_logs(&f.org, &job, cursor, 1000).await.unwrap().unwrap();
            seen.extend(page.lines.iter().map(|l| l.seq));
            cursor = page.next;
            if page.complete {
                break;
            }
            assert!(!page.lines.is_empty(), "a page that is not complete moves on");
        }
        assert_eq!(seen, (1..=100).collect::<Vec<_>>());
    }
}

conformance! {
    async fn a_page_of_long_lines_stops_at_its_byte_budget(f: Fixture) {
        let job = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        // Three batches of 130 lines of 16,000 bytes: chunks of 2 MB, each
        // more than a page holds, 6.2 MB in all.
        let lines: Vec<String> = (0..390).map(|i| format!("{i:05}{}", "x".repeat(15_995))).collect();
        for (b, chunk) in lines.chunks(130).enumerate() {
            let texts: Vec<&str> = chunk.iter().map(String::as_str).collect();
            f.store
                .append_logs(&f.runner, &job, Fixture::batch(n, 1 + 130 * b as u64, &texts))
                .await
                .unwrap();
        }
        let done = Completion {
            attempt: n,
            logs: None,
            log_lines: 390,
            result: ok_result(),
        };
        f.store.complete(&f.runner, &job, done).await.unwrap();
        let (mut cursor, mut seen, mut pages) = (0, Vec::new(), 0);
        loop {
            let page = f.store.read_logs(&f.org, &job, cursor, 10_000).await.unwrap().unwrap();
            let bytes: usize = page.lines.iter().map(|l| l.text.len()).sum();
            assert!(
                bytes <= super::shared::MAX_PAGE_BYTES + 16_000,
                "a page of {bytes} bytes"
            );
            let moved = page.next != cursor;
            seen.extend(page.lines.into_iter().map(|l| l.text));
            cursor = page.next;
            pages += 1;
            if page.complete {
                break;
            }
            assert!(moved, "page {pages} is not complete and does not move on");
        }
        assert_eq!(seen.len(), lines.len());
        assert!(seen == lines, "the lines came back out of order");
        assert!(pages >= 6, "6.2 MB came in {pages} page(s)");
    }
}

conformance! {
    async fn a_log_past_its_quota_is_cut_with_a_last_line_and_acknowledged_in_full(f: Fixture) {
        let job = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        let quota = crate::store::LogQuota {
            per_attempt: 1000,
            runner_room: u64::MAX,
        };
        // Ten batches of ten 40-byte lines (each record about 45 bytes).
        let mut wrote = 0;
        for b in 0..10u64 {
            let texts: Vec<String> = (0..10).map(|i| format!("{:040}", b * 10 + i)).collect();
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            let (ack, stored) = f
                .store
                .append_logs_within(&f.runner, &job, Fixture::batch(n, 1 + 10 * b, &texts), quota)
                .await
                .unwrap();
            assert_eq!(ack.acked_seq, 10 * (b + 1), "every line is acknowledged");
            wrote += stored;
        }
        // The same batch again is acknowledged and stores nothing.
        let again = f
            .store
            .append_logs_within(&f.runner, &job, Fixture::batch(n, 91, &["x"; 10]), quota)
            .await
            .unwrap();
        assert_eq!(again, (LogAck { acked_seq: 100 }, 0));
        let done = Completion {
            attempt: n,
            logs: None,
            log_lines: 100,
            result: ok_result(),
        };
        f.store.complete(&f.runner, &job, done).await.unwrap();
        let page = f.store.read_logs(&f.org, &job, 0, 1000).await.unwrap().unwrap();
        let last = page.lines.last().unwrap();
        assert!(last.text.starts_with("log truncated: this attempt's log reached"), "{}", last.text);
        assert!(last.text.contains("--log-quota-per-job"), "{}", last.text);
        let kept = page.lines.len() - 1;
        assert!((18..=24).contains(&kept), "{kept} lines kept under a quota of 1000 bytes");
        assert!(wrote <= 1000 + 300, "{wrote} bytes stored under a quota of 1000");
        let seqs: Vec<u64> = page.lines.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, (1..=kept as u64 + 1).collect::<Vec<_>>());
    }
}

conformance! {
    async fn a_runner_past_its_room_has_its_log_cut_saying_so(f: Fixture) {
        let job = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        let quota = crate::store::LogQuota {
            per_attempt: u64::MAX,
            runner_room: 0,
        };
        let (ack, stored) = f
            .store
            .append_logs_within(&f.runner, &job, Fixture::batch(n, 1, &["a", "b"]), quota)
            .await
            .unwrap();
        assert_eq!(ack.acked_seq, 2);
        assert!(stored > 0, "the line saying why is stored");
        // Later batches store nothing, even with room again.
        let (_, stored) = f
            .store
            .append_logs_within(&f.runner, &job, Fixture::batch(n, 3, &["c"]), crate::store::LogQuota::NONE)
            .await
            .unwrap();
        assert_eq!(stored, 0);
        let page = f.store.read_logs(&f.org, &job, 0, 1000).await.unwrap().unwrap();
        assert_eq!(page.lines.len(), 1);
        assert!(page.lines[0].text.contains("--log-quota-per-runner"), "{}", page.lines[0].text);
    }
}
