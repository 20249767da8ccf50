//! The label index: what a selector reads, kept by the database whoever
//! writes an install's labels.

use super::*;
use nuon_core::labels::{Labels, Selector};
use nuon_core::model::Install;
use nuon_core::wire::InstallCursor;

/// The names of `installs`, in their order.
fn names(installs: &[Install]) -> Vec<String> {
    installs.iter().map(|i| i.name.clone()).collect()
}

conformance! {
    async fn a_selector_reads_the_label_index_and_picks_what_matching_each_install_picks(f: Fixture) {
        let app = f.store.create_app(&f.org, &AppId::generate(), "web").await.unwrap();
        let other = f.store.create_org(&OrgId::generate(), "o2", b"k").await.unwrap().org_id;
        let other_app = f.store.create_app(&other, &AppId::generate(), "web").await.unwrap();
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        let fleet = [
            ("a", labels(&[("tier", "prod"), ("region", "eu")])),
            ("b", labels(&[("tier", "prod"), ("region", "us")])),
            ("c", labels(&[("tier", "trial"), ("region", "eu")])),
            ("d", labels(&[("tier", "trial")])),
            ("e", labels(&[])),
        ];
        for (name, l) in &fleet {
            f.store.create_install(&f.org, new_install(&app.id, name, l.clone())).await.unwrap();
        }
        // Another org's install with the same labels is never picked.
        f.store
            .create_install(&other, new_install(&other_app.id, "a", fleet[0].1.clone()))
            .await
            .unwrap();

        let check = |text: &'static str| {
            let store = &f.store;
            let org = &f.org;
            async move {
                let selector: Selector = text.parse().unwrap();
                let all = store.list_installs(org).await.unwrap();
                let want: Vec<Install> =
                    all.into_iter().filter(|i| selector.matches(&i.labels)).collect();
                let got = store.select_installs(org, &selector).await.unwrap();
                assert_eq!(names(&got), names(&want), "selector {text:?}");
                names(&got)
            }
        };
        assert_eq!(check("").await, ["a", "b", "c", "d", "e"]);
        assert_eq!(check("tier=prod").await, ["a", "b"]);
        assert_eq!(check("tier=prod,region=eu").await, ["a"]);
        assert_eq!(check("tier!=prod").await, ["c", "d", "e"]);
        assert_eq!(check("region in (eu,us)").await, ["a", "b", "c"]);
        assert_eq!(check("region notin (eu)").await, ["b", "d", "e"]);
        assert_eq!(check("region").await, ["a", "b", "c"]);
        assert_eq!(check("!region").await, ["d", "e"]);
        assert_eq!(check("!region,tier").await, ["d"]);
        assert_eq!(check("tier=none").await, Vec::<String>::new());

        // A change of labels moves the install in the index.
        let d = f.store.find_install(&f.org, "d").await.unwrap().unwrap();
        f.store
            .change_install_labels(&f.org, &d.id, &labels(&[("region", "us")]), &["tier".into()], 64)
            .await
            .unwrap();
        assert_eq!(check("region=us").await, ["b", "d"]);
        assert_eq!(check("!tier").await, ["d", "e"]);

        // Labels written past this code (a replica of a release before
        // the index) are indexed all the same: the database keeps it.
        let a = f.store.find_install(&f.org, "a").await.unwrap().unwrap();
        f.raw(
            r#"UPDATE installs SET labels = '{"tier":"trial"}' WHERE id = ? RETURNING id"#,
            a.id.as_str(),
        )
        .await;
        assert_eq!(check("tier=trial").await, ["a", "c"]);
        assert_eq!(check("region=eu").await, ["c"]);

        // A removed install leaves the index.
        assert!(f.store.remove_install(&f.org, &a.id).await.unwrap());
        assert_eq!(check("tier=trial").await, ["c"]);
        let left = f.raw("SELECT CAST(COUNT(*) AS TEXT) FROM install_labels WHERE install_id = ?", a.id.as_str()).await;
        assert_eq!(left.as_deref(), Some("0"));
    }

    async fn a_selection_is_read_in_pages_that_hold_when_an_install_goes(f: Fixture) {
        let app = f.store.create_app(&f.org, &AppId::generate(), "web").await.unwrap();
        let prod = || [("tier".to_owned(), "prod".to_owned())].into_iter().collect();
        // Seven installs, every other one `tier=prod`, some made in the
        // same millisecond (the id orders those).
        for n in 0..7 {
            let labels = if n % 2 == 0 { prod() } else { Default::default() };
            f.store.create_install(&f.org, new_install(&app.id, &format!("i{n}"), labels)).await.unwrap();
        }
        let pages = |text: &'static str, limit: u32| {
            let store = &f.store;
            let org = &f.org;
            async move {
                let selector: Selector = text.parse().unwrap();
                let (mut pages, mut after) = (Vec::new(), None::<InstallCursor>);
                loop {
                    let page = store.select_installs_page(org, &selector, after.as_ref(), limit).await.unwrap();
                    assert!(page.len() <= limit as usize, "a page of {} past {limit}", page.len());
                    let Some(last) = page.last() else { break };
                    after = Some(InstallCursor { created_at_ms: last.created_at_ms, id: last.id.clone() });
                    pages.push(names(&page));
                    assert!(pages.len() <= 10, "pages never end: {pages:?}");
                }
                pages
            }
        };
        // Page by page, a selection is what one read of it is, cut.
        let whole = |text: &'static str| {
            let store = &f.store;
            let org = &f.org;
            async move { names(&store.select_installs(org, &text.parse().unwrap()).await.unwrap()) }
        };
        let all = whole("").await;
        assert_eq!(all.len(), 7);
        let cut = |names: Vec<String>, n: usize| -> Vec<Vec<String>> {
            names.chunks(n).map(<[String]>::to_vec).collect()
        };
        assert_eq!(pages("", 3).await, cut(all.clone(), 3));
        assert_eq!(pages("", 1).await, cut(all.clone(), 1));
        assert_eq!(pages("", 1000).await, vec![all.clone()]);
        let picked = whole("tier=prod").await;
        assert_eq!(picked.len(), 4);
        assert_eq!(pages("tier=prod", 3).await, cut(picked, 3));

        // A cursor whose install was removed in between still holds.
        let installs = f.store.select_installs(&f.org, &"".parse().unwrap()).await.unwrap();
        let at = InstallCursor { created_at_ms: installs[2].created_at_ms, id: installs[2].id.clone() };
        assert!(f.store.remove_install(&f.org, &installs[2].id).await.unwrap());
        let next = f.store.select_installs_page(&f.org, &"".parse().unwrap(), Some(&at), 2).await.unwrap();
        assert_eq!(names(&next), all[3..5]);
    }
}

/// A SQLite data dir whose label index lost a trigger (or was never made:
/// a data dir of a release before it) gets it back, filled from the
/// installs, when it is opened.
#[tokio::test]
async fn a_sqlite_label_index_missing_a_trigger_is_made_again_and_filled_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let org = OrgId::generate();
    let install = InstallId::generate();
    {
        let store = SqliteStore::open(dir.path()).unwrap();
        store.create_org(&org, "o", b"k").await.unwrap();
        let app = store
            .create_app(&org, &AppId::generate(), "web")
            .await
            .unwrap();
        store
            .create_install(
                &org,
                NewInstall {
                    id: install.clone(),
                    app_id: app.id,
                    name: "a".into(),
                    config_version: 1,
                    runner_id: RunnerId::generate(),
                    runner_name: "install-a".into(),
                    runner_token_hash: "hash-a".into(),
                    inputs_json: "{}".into(),
                    sealed_json: "{}".into(),
                    approval: nuon_core::model::ApprovalMode::ApproveAll,
                    toggles: Default::default(),
                    overrides: Default::default(),
                    labels: [("tier".to_owned(), "prod".to_owned())].into(),
                },
            )
            .await
            .unwrap();
    }
    let conn = rusqlite::Connection::open(dir.path().join(SqliteStore::DB_FILE)).unwrap();
    conn.execute_batch(
        "DROP TRIGGER install_labels_update; DELETE FROM install_labels; \
         UPDATE installs SET labels = '{\"tier\":\"trial\"}';",
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(dir.path()).unwrap();
    let picked = |text: &'static str| {
        let store = &store;
        let org = &org;
        async move {
            let selector: Selector = text.parse().unwrap();
            names(&store.select_installs(org, &selector).await.unwrap())
        }
    };
    assert_eq!(picked("tier=trial").await, ["a"]);
    assert!(picked("tier=prod").await.is_empty());
    store
        .change_install_labels(&org, &install, &Default::default(), &["tier".into()], 64)
        .await
        .unwrap();
    assert_eq!(picked("!tier").await, ["a"]);
}
