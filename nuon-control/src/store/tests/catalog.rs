//! Orgs, tokens, apps, config versions, installs; data dirs of earlier versions.

use super::*;

conformance! {
    async fn orgs_come_with_a_build_runner_and_api_tokens_have_scopes_and_can_be_revoked(f: Fixture) {
        use nuon_core::TokenId;
        use nuon_core::token::{hash_token, issue_api_token};
        use nuon_core::wire::{RunnerRole, TokenScope};

        let store = &f.store;
        let org = store.create_org("o2").await.unwrap();
        let runners = store.list_runners(&org.org_id).await.unwrap();
        assert_eq!(runners.len(), 1);
        assert_eq!(
            (runners[0].name.as_str(), runners[0].role),
            ("build", RunnerRole::Build)
        );
        let who = store
            .authenticate_runner(&org.build_runner_token.hash)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(who.runner_id, org.build_runner);

        let id = TokenId::generate();
        let token = issue_api_token(&id);
        let info = store
            .create_api_token(&org.org_id, &id, "reader", TokenScope::Read, &token.hash)
            .await
            .unwrap();
        assert_eq!(info.scope, TokenScope::Read);
        let p = store
            .authenticate_api(&hash_token(&token.secret))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (p.org_id.clone(), p.scope.as_str()),
            (org.org_id.clone(), "read")
        );
        // Another org can neither see nor revoke it.
        let other = store.create_org("other").await.unwrap().org_id;
        assert!(store.revoke_api_token(&other, &id).await.unwrap().is_none());
        assert!(
            store
                .list_api_tokens(&other)
                .await
                .unwrap()
                .iter()
                .all(|t| t.id != id)
        );
        assert!(store.authenticate_api(&token.hash).await.unwrap().is_some());
        let revoked = store
            .revoke_api_token(&org.org_id, &id)
            .await
            .unwrap()
            .unwrap();
        assert!(revoked.revoked);
        assert!(store.authenticate_api(&token.hash).await.unwrap().is_none());
    }
}

conformance! {
    async fn config_versions_count_per_app_and_apps_and_installs_are_org_scoped(f: Fixture) {
        use nuon_core::wire::RunnerRole;
        use nuon_core::{AppId, InstallId};

        use super::{NewInstall, StoredConfig};

        let other = f.store.create_org("other").await.unwrap().org_id;
        let app = f
            .store
            .create_app(&f.org, &AppId::generate(), "web")
            .await
            .unwrap();
        let dup = f
            .store
            .create_app(&f.org, &AppId::generate(), "web")
            .await
            .unwrap_err();
        assert!(
            matches!(
                dup,
                StoreError::Conflict {
                    code: "name_taken",
                    ..
                }
            ),
            "{dup}"
        );
        // The same name in another org is fine.
        f.store
            .create_app(&other, &AppId::generate(), "web")
            .await
            .unwrap();

        let cfg = |n: &str| StoredConfig {
            version: 0,
            created_at_ms: 0,
            components: 1,
            files_json: "[]".into(),
            config_json: n.into(),
            warnings_json: "[]".into(),
            sources_json: "[]".into(),
        };
        assert_eq!(
            f.store
                .add_config(&f.org, &app.id, cfg("a"))
                .await
                .unwrap()
                .version,
            1
        );
        assert_eq!(
            f.store
                .add_config(&f.org, &app.id, cfg("b"))
                .await
                .unwrap()
                .version,
            2
        );
        assert!(matches!(
            f.store.add_config(&other, &app.id, cfg("x")).await,
            Err(StoreError::Invalid(_))
        ));
        let latest = f
            .store
            .get_config(&f.org, &app.id, None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((latest.version, latest.config_json.as_str()), (2, "b"));
        let first = f
            .store
            .get_config(&f.org, &app.id, Some(1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.config_json, "a");
        assert!(
            f.store
                .get_config(&other, &app.id, None)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            f.store.list_configs(&f.org, &app.id).await.unwrap().len(),
            2
        );
        assert!(
            f.store
                .list_configs(&other, &app.id)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            f.store
                .find_app(&f.org, "web")
                .await
                .unwrap()
                .unwrap()
                .latest_config,
            Some(2)
        );

        let new = |name: &str, runner: &str| NewInstall {
            id: InstallId::generate(),
            app_id: app.id.clone(),
            name: name.into(),
            config_version: 2,
            runner_id: RunnerId::generate(),
            runner_name: runner.into(),
            runner_token_hash: format!("hash-{name}"),
            inputs_json: "{}".into(),
            sealed_json: "{}".into(),
            approval: "approve-all".into(),
        };
        let inst = f
            .store
            .create_install(&f.org, new("acme", "install-acme"))
            .await
            .unwrap();
        let runner = f
            .store
            .find_runner(&f.org, "install-acme")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (runner.id, runner.role),
            (inst.runner_id.clone(), RunnerRole::Install)
        );
        // A taken name leaves nothing behind: neither install nor runner.
        let e = f
            .store
            .create_install(&f.org, new("acme", "install-acme2"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::Conflict {
                    code: "name_taken",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            f.store
                .find_runner(&f.org, "install-acme2")
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            f.store
                .find_install(&other, "acme")
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            f.store
                .set_install_inputs(&other, &inst.id, "{\"x\":1}", "{}")
                .await
                .unwrap()
                .is_none()
        );
        let set = f
            .store
            .set_install_inputs(&f.org, &inst.id, "{\"x\":1}", "{}")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(set.inputs_json, "{\"x\":1}");
    }
}

#[tokio::test]
async fn a_data_dir_of_an_earlier_version_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(dir.path()).unwrap();
        store.create_org("o").await.unwrap();
        store.close();
    }
    // The runners table as an earlier version made it.
    let conn = rusqlite::Connection::open(dir.path().join("nuon.db")).unwrap();
    conn.execute_batch("ALTER TABLE runners DROP COLUMN role")
        .unwrap();
    drop(conn);
    let store = SqliteStore::open(dir.path()).unwrap();
    let org = store.create_org("p").await.unwrap().org_id;
    assert_eq!(store.list_runners(&org).await.unwrap()[0].name, "build");
}
