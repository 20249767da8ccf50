//! An org's fleet read by what changed since a mark: every write is found,
//! whoever makes it, and removals show in the counts.

use super::*;

/// The names of `installs`, sorted.
fn names(installs: &[nuon_core::model::Install]) -> Vec<String> {
    let mut n: Vec<String> = installs.iter().map(|i| i.name.clone()).collect();
    n.sort();
    n
}

/// A summary to save.
fn summary_text() -> crate::store::SummaryText {
    crate::store::SummaryText {
        brief: "{}".into(),
        full: "{}".into(),
    }
}

conformance! {
    async fn the_fleet_changes_since_a_mark_hold_every_write_and_removals_show_in_the_counts(f: Fixture) {
        let app = f.store.create_app(&f.org, &AppId::generate(), "web").await.unwrap();
        let other = f.store.create_org(&OrgId::generate(), "o2", b"k").await.unwrap().org_id;
        let other_app = f.store.create_app(&other, &AppId::generate(), "web").await.unwrap();
        for name in ["a", "b"] {
            f.store.create_install(&f.org, new_install(&app.id, name, Default::default())).await.unwrap();
        }
        f.store.create_install(&other, new_install(&other_app.id, "z", Default::default())).await.unwrap();

        // From mark 0: the whole fleet, the org's only.
        let all = f.store.fleet_changes(&f.org, 0).await.unwrap();
        assert_eq!(names(&all.installs), ["a", "b"]);
        let runners = f.store.list_runners(&f.org).await.unwrap();
        assert_eq!(all.runners.len(), runners.len(), "every runner of the org");
        assert_eq!((all.install_count, all.runner_count), (2, runners.len()));
        assert!(all.summaries.is_empty(), "no workflow yet");

        // Nothing written since: nothing read.
        let quiet = f.store.fleet_changes(&f.org, all.mark).await.unwrap();
        assert!(quiet.installs.is_empty() && quiet.runners.is_empty(), "{quiet:?}");
        assert!(quiet.mark >= all.mark);

        // A write through the store, and one past it (a replica of an older
        // release): both found, and only them.
        let a = f.store.find_install(&f.org, "a").await.unwrap().unwrap();
        let b = f.store.find_install(&f.org, "b").await.unwrap().unwrap();
        f.store
            .change_install_labels(&f.org, &a.id, &[("tier".to_owned(), "prod".to_owned())].into(), &[], 64)
            .await
            .unwrap();
        let changed = f.store.fleet_changes(&f.org, quiet.mark).await.unwrap();
        assert_eq!(names(&changed.installs), ["a"]);
        assert_eq!(changed.installs[0].labels.get("tier").map(String::as_str), Some("prod"));
        f.raw("UPDATE installs SET state = 'active' WHERE id = ? RETURNING id", b.id.as_str()).await;
        let past = f.store.fleet_changes(&f.org, changed.mark).await.unwrap();
        assert_eq!(names(&past.installs), ["b"]);
        assert_eq!(past.installs[0].state.as_str(), "active");
        // Another org's writes are not this org's changes.
        let z = f.store.find_install(&other, "z").await.unwrap().unwrap();
        f.raw("UPDATE installs SET state = 'active' WHERE id = ? RETURNING id", z.id.as_str()).await;
        assert!(f.store.fleet_changes(&f.org, past.mark).await.unwrap().installs.is_empty());

        // A runner's write (a revocation) and a summary saved.
        f.store.revoke_runner(&f.org, &a.runner_id).await.unwrap();
        let runner = f.store.fleet_changes(&f.org, past.mark).await.unwrap();
        assert_eq!(runner.runners.len(), 1);
        assert_eq!(runner.runners[0].id, a.runner_id);
        assert!(runner.runners[0].revoked);
        f.store.save_install_summaries(&[(b.id.clone(), 0, summary_text())]).await.unwrap();
        let summary = f.store.fleet_changes(&f.org, runner.mark).await.unwrap();
        assert_eq!(summary.summaries.len(), 1);
        assert_eq!(summary.summaries[0].install_id, b.id);
        assert!(summary.installs.is_empty() && summary.runners.is_empty());

        // A removal leaves no row to read: the counts say it.
        assert!(f.store.remove_install(&f.org, &a.id).await.unwrap());
        let removed = f.store.fleet_changes(&f.org, summary.mark).await.unwrap();
        assert_eq!(removed.install_count, 1);
        assert!(removed.installs.is_empty());
        let whole = f.store.fleet_changes(&f.org, 0).await.unwrap();
        assert_eq!(names(&whole.installs), ["b"]);
        assert_eq!(whole.runners.len(), whole.runner_count);
    }
}

/// PostgreSQL: a write whose transaction commits after a mark was taken,
/// though it began before, is read from that mark (what a sequence's
/// numbers would miss: they are taken in one order and committed in
/// another).
#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_write_committed_after_a_mark_is_read_from_it() {
    for f in fixtures().await {
        let Backing::Postgres { cluster } = &f.backing else {
            continue;
        };
        let app = f
            .store
            .create_app(&f.org, &AppId::generate(), "web")
            .await
            .unwrap();
        f.store
            .create_install(&f.org, new_install(&app.id, "a", Default::default()))
            .await
            .unwrap();
        let a = f.store.find_install(&f.org, "a").await.unwrap().unwrap();
        let pool = sqlx::PgPool::connect(&cluster.url).await.unwrap();
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("UPDATE installs SET state = 'active' WHERE id = $1")
            .bind(a.id.as_str())
            .execute(&mut *tx)
            .await
            .unwrap();
        // Taken while the write is not committed: not seen yet.
        let before = f.store.fleet_changes(&f.org, 0).await.unwrap();
        assert_eq!(before.installs[0].state.as_str(), "created");
        // A later transaction's write, committed first.
        f.store
            .save_install_summaries(&[(a.id.clone(), 0, summary_text())])
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let after = f.store.fleet_changes(&f.org, before.mark).await.unwrap();
        assert_eq!(
            names(&after.installs),
            ["a"],
            "the write committed after the mark"
        );
        assert_eq!(after.installs[0].state.as_str(), "active");
        pool.close().await;
    }
}
