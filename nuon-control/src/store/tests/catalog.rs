//! Orgs, tokens, apps, config versions, installs; data dirs of earlier versions.

use super::*;
use nuon_core::wire::ErrorCode;

conformance! {
    async fn orgs_come_with_a_build_runner_and_api_tokens_have_scopes_and_can_be_revoked(f: Fixture) {
        use nuon_core::TokenId;
        use nuon_core::token::{hash_token, issue_api_token};
        use nuon_core::wire::{RunnerRole, TokenScope};

        let store = &f.store;
        let org = store.create_org(&OrgId::generate(), "o2", b"sealed key of o2").await.unwrap();
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
        let new = crate::store::NewApiToken {
            id: id.clone(),
            name: "reader".into(),
            scope: TokenScope::Read,
            token_hash: token.hash.clone(),
            user_id: None,
            expires_at_ms: None,
        };
        let info = store.create_api_token(&org.org_id, &new).await.unwrap();
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
        let other = store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
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
    async fn people_sign_in_once_invited_their_tokens_follow_their_role_and_an_org_keeps_an_owner(f: Fixture) {
        use nuon_core::TokenId;
        use nuon_core::token::issue_api_token;
        use nuon_core::wire::{Role, TokenScope, UserStatus};

        use crate::store::{Identity, NewApiToken, PendingSignIn};

        let store = &f.store;
        let org = store.create_org(&OrgId::generate(), "people", b"k").await.unwrap().org_id;
        let other = store.create_org(&OrgId::generate(), "people2", b"k").await.unwrap().org_id;
        let ann = store.invite_user(&org, "ann@example.com", Role::Owner, "tok_x").await.unwrap();
        assert_eq!((ann.status, ann.role), (UserStatus::Invited, Role::Owner));
        let err = store.invite_user(&org, "ann@example.com", Role::Viewer, "tok_x").await.unwrap_err();
        assert!(err.to_string().contains("already"), "{err}");
        // The same address in another org is another person.
        store.invite_user(&other, "ann@example.com", Role::Viewer, "tok_x").await.unwrap();
        let bob = store.invite_user(&org, "bob@example.com", Role::Admin, "ann@example.com").await.unwrap();
        assert_eq!(store.find_user(&org, "bob@example.com").await.unwrap(), Some(bob.clone()));
        assert_eq!(store.find_user(&org, bob.id.as_str()).await.unwrap(), Some(bob.clone()));
        assert!(store.find_user(&other, bob.id.as_str()).await.unwrap().is_none());

        // A sign-in's start is taken once, and not after it expired.
        let pending = PendingSignIn {
            org_id: org.clone(),
            nonce: "n".into(),
            verifier: "v".into(),
            expires_at_ms: nuon_core::now_ms() + 60_000,
        };
        store.begin_sign_in("h1", &pending).await.unwrap();
        store
            .begin_sign_in("h2", &PendingSignIn { expires_at_ms: nuon_core::now_ms() - 1, ..pending.clone() })
            .await
            .unwrap();
        assert_eq!(store.take_sign_in("h1").await.unwrap(), Some(pending));
        assert_eq!(store.take_sign_in("h1").await.unwrap(), None);
        assert_eq!(store.take_sign_in("h2").await.unwrap(), None);

        // Bob signs in: an admin's token, its scope held to his role.
        let session = |name: &str| {
            let id = TokenId::generate();
            let issued = issue_api_token(&id);
            (NewApiToken {
                id,
                name: name.into(),
                scope: TokenScope::Admin,
                token_hash: issued.hash.clone(),
                user_id: None,
                expires_at_ms: Some(nuon_core::now_ms() + 60_000),
            }, issued)
        };
        let who = Identity { email: "bob@example.com".into(), subject: "iss|bob".into(), name: Some("Bob".into()) };
        let (t, issued) = session("sign-in");
        let (user, token) = store.sign_in_user(&org, &who, &t).await.unwrap().unwrap();
        assert_eq!((user.status, user.name.as_deref()), (UserStatus::Active, Some("Bob")));
        assert_eq!((token.user.as_deref(), token.user_id.as_ref()), (Some("bob@example.com"), Some(&bob.id)));
        let p = store.authenticate_api(&issued.hash).await.unwrap().unwrap();
        assert_eq!((p.scope.as_str(), p.actor()), ("admin", "bob@example.com".to_owned()));
        store.set_user_role(&org, &bob.id, Role::Viewer).await.unwrap().unwrap();
        let p = store.authenticate_api(&issued.hash).await.unwrap().unwrap();
        assert_eq!(p.scope, "read", "a token follows its person's role at once");
        // Another account with the same address is refused; nobody invited
        // is no one.
        let (t2, _) = session("sign-in");
        let imposter = Identity { subject: "iss|mallory".into(), ..who.clone() };
        let err = store.sign_in_user(&org, &imposter, &t2).await.unwrap_err();
        assert!(err.to_string().contains("another account"), "{err}");
        let nobody = Identity { email: "eve@example.com".into(), ..who.clone() };
        assert!(store.sign_in_user(&org, &nobody, &t2).await.unwrap().is_none());
        // An expired token authenticates nothing.
        let (mut old, old_issued) = session("old");
        old.expires_at_ms = Some(nuon_core::now_ms() - 1);
        store.create_api_token(&org, &old).await.unwrap();
        assert!(store.authenticate_api(&old_issued.hash).await.unwrap().is_none());

        // The last owner stays; removing a person revokes their tokens.
        let err = store.set_user_role(&org, &ann.id, Role::Admin).await.unwrap_err();
        assert!(err.to_string().contains("last owner"), "{err}");
        assert!(store.remove_user(&org, &ann.id).await.is_err());
        assert!(store.remove_user(&other, &bob.id).await.unwrap().is_none());
        store.remove_user(&org, &bob.id).await.unwrap().unwrap();
        assert!(store.authenticate_api(&issued.hash).await.unwrap().is_none());
        let tokens = store.list_api_tokens(&org).await.unwrap();
        assert!(tokens.iter().filter(|t| t.user_id.is_some()).all(|t| t.revoked));
        let emails: Vec<String> = store.list_users(&org).await.unwrap().into_iter().map(|u| u.email).collect();
        assert_eq!(emails, ["ann@example.com"]);
    }
}

conformance! {
    async fn config_versions_count_per_app_and_apps_and_installs_are_org_scoped(f: Fixture) {
        use nuon_core::wire::RunnerRole;
        use nuon_core::{AppId, InstallId};

        use super::{NewInstall, StoredConfig};

        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
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
                    code: ErrorCode::NameTaken,
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
            approval: nuon_core::model::ApprovalMode::ApproveAll,
            toggles: Default::default(),
            overrides: Default::default(),
            labels: [("tier".to_owned(), "prod".to_owned())].into(),
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
                    code: ErrorCode::NameTaken,
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

        // Labels are kept with the install and replaced whole.
        assert_eq!(set.labels.get("tier").map(String::as_str), Some("prod"));
        let labels = [("tier".to_owned(), "trial".to_owned()), ("region".to_owned(), "eu".to_owned())].into();
        let got = f
            .store
            .change_install_labels(&f.org, &inst.id, &labels, &[], 64)
            .await
            .unwrap();
        assert_eq!(got, labels);
        let after = f
            .store
            .change_install_labels(&f.org, &inst.id, &Default::default(), &["region".into()], 64)
            .await
            .unwrap();
        assert_eq!(after, [("tier".to_owned(), "trial".to_owned())].into());
        let found = f.store.find_install(&f.org, "acme").await.unwrap().unwrap();
        assert_eq!(found.labels, after);
        assert!(f.store.change_install_labels(&other, &inst.id, &labels, &[], 64).await.is_err());
        let over = f
            .store
            .change_install_labels(&f.org, &inst.id, &labels, &[], 1)
            .await
            .unwrap_err();
        assert!(over.to_string().contains("at most 1 labels"), "{over}");
        // Many changes at once: none is lost.
        let store = &*f.store;
        let changes = (0..10).map(|i| {
            let (org, id) = (&f.org, &inst.id);
            async move {
                let set = [(format!("k{i}"), "v".to_owned())].into();
                store.change_install_labels(org, id, &set, &[], 64).await
            }
        });
        for r in futures_util::future::join_all(changes).await {
            r.unwrap();
        }
        let found = f.store.find_install(&f.org, "acme").await.unwrap().unwrap();
        assert_eq!(found.labels.len(), 11, "{:?}", found.labels);

        // Groups: a name per org, listed by name, deleted once.
        let g = f.store.create_group(&f.org, "eu", "region=eu").await.unwrap();
        assert_eq!((g.name.as_str(), g.selector.as_str()), ("eu", "region=eu"));
        f.store.create_group(&f.org, "all", "").await.unwrap();
        let e = f.store.create_group(&f.org, "eu", "x").await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict { code: ErrorCode::NameTaken, .. }), "{e}");
        f.store.create_group(&other, "eu", "region=us").await.unwrap();
        let names: Vec<String> = f.store.list_groups(&f.org).await.unwrap().into_iter().map(|g| g.name).collect();
        assert_eq!(names, ["all", "eu"]);
        assert!(f.store.delete_group(&f.org, "eu").await.unwrap());
        assert!(!f.store.delete_group(&f.org, "eu").await.unwrap());
        assert_eq!(f.store.list_groups(&other).await.unwrap().len(), 1);

        // Releases: kept whole, listed newest first, each org its own.
        let release = |version: u32, at: i64| nuon_core::wire::ReleaseInfo {
            id: nuon_core::ReleaseId::generate(),
            app_id: app.id.clone(),
            app_name: None,
            config_version: version,
            builds: [(
                "box".to_owned(),
                nuon_core::ArtifactRef {
                    repo: "app/box".into(),
                    digest: nuon_core::artifact::Digest::of(format!("v{version}").as_bytes()),
                    size: Some(2),
                },
            )]
            .into(),
            created_at_ms: at,
        };
        let (r1, r2) = (release(1, 1_000), release(2, 2_000));
        f.store.create_release(&f.org, &r1).await.unwrap();
        f.store.create_release(&f.org, &r2).await.unwrap();
        let listed = f.store.list_releases(&f.org, Some(&app.id)).await.unwrap();
        assert_eq!(listed, [r2.clone(), r1.clone()]);
        assert_eq!(f.store.list_releases(&f.org, None).await.unwrap().len(), 2);
        assert_eq!(f.store.get_release(&f.org, &r1.id).await.unwrap(), Some(r1.clone()));
        assert_eq!(f.store.get_release(&other, &r1.id).await.unwrap(), None);
        assert!(f.store.list_releases(&other, None).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_data_dir_of_an_earlier_version_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(dir.path()).unwrap();
        store
            .create_org(&OrgId::generate(), "o", b"sealed key of o")
            .await
            .unwrap();
        store.close();
    }
    // The runners table as an earlier version made it.
    let conn = rusqlite::Connection::open(dir.path().join("nuon.db")).unwrap();
    conn.execute_batch("ALTER TABLE runners DROP COLUMN role")
        .unwrap();
    drop(conn);
    let store = SqliteStore::open(dir.path()).unwrap();
    let org = store
        .create_org(&OrgId::generate(), "p", b"sealed key of p")
        .await
        .unwrap()
        .org_id;
    assert_eq!(store.list_runners(&org).await.unwrap()[0].name, "build");
}

conformance! {
    async fn orgs_keep_their_key_and_installs_their_state_outputs_and_version(f: Fixture) {
        let s = &*f.store;
        assert_eq!(s.count_orgs().await.unwrap(), 1);
        let other = s.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap();
        assert_eq!(s.count_orgs().await.unwrap(), 2);
        let org = s.get_org(&f.org).await.unwrap().unwrap();
        assert_eq!((org.id.clone(), org.name.as_str()), (f.org.clone(), "o"));
        assert_eq!(s.get_org(&nuon_core::OrgId::generate()).await.unwrap(), None);
        let key = s.signing_key(&other.org_id).await.unwrap().unwrap();
        assert_eq!(key, b"sealed key of other");
        assert_eq!(s.signing_key(&f.org).await.unwrap().unwrap(), b"sealed key of o");
        assert_eq!(s.signing_key(&nuon_core::OrgId::generate()).await.unwrap(), None);

        let a = f.install("a").await;
        let b = f.install("b").await;
        let names: Vec<_> = s.list_installs(&f.org).await.unwrap().into_iter().map(|i| i.name).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(s.list_installs(&other.org_id).await.unwrap().is_empty());
        let apps: Vec<_> = s.list_apps(&f.org).await.unwrap().into_iter().map(|a| a.name).collect();
        assert_eq!(apps, ["web"]);
        assert!(s.list_apps(&other.org_id).await.unwrap().is_empty());

        s.set_install_state(&f.org, &a.id, nuon_core::model::InstallState::Provisioning).await.unwrap();
        s.set_install_config(&f.org, &a.id, 3).await.unwrap();
        // Another org's writes touch nothing.
        s.set_install_state(&other.org_id, &b.id, nuon_core::model::InstallState::Failed).await.unwrap();
        s.set_install_config(&other.org_id, &b.id, 9).await.unwrap();
        let a = s.find_install(&f.org, "a").await.unwrap().unwrap();
        assert_eq!((a.state.as_str(), a.config_version), ("provisioning", 3));
        let b2 = s.find_install(&f.org, &b.id.to_string()).await.unwrap().unwrap();
        assert_eq!((b2.state, b2.config_version, b2.outputs_json), (b.state, 1, None));
        // Cron looks at the provisioned ones, each with its app and the
        // config version it runs.
        let scheduled = s.scheduled_installs().await.unwrap();
        let a_scheduled = crate::store::Scheduled { org: f.org.clone(), id: a.id.clone(), app_id: a.app_id.clone(), config_version: 3 };
        assert!(scheduled.contains(&a_scheduled), "{scheduled:?}");
        let created = b2.state == nuon_core::model::InstallState::Created;
        assert_eq!(scheduled.iter().any(|x| x.id == b.id), !created, "{scheduled:?}");

        // What it changed and did not deploy, kept whole and cleared
        // (another org's untouched).
        let mut p = nuon_core::model::Unapplied::begin(
            nuon_core::model::InstallValues { inputs_json: r#"{"n":"5"}"#.into(), ..Default::default() },
            7,
        );
        p.changed(["queue".to_owned()], Some(nuon_core::WorkflowId::generate()), 9);
        assert!(s.set_install_pending(&f.org, &a.id, Some(&p), 0).await.unwrap());
        // Over a revision that is gone: nothing written.
        assert!(!s.set_install_pending(&f.org, &a.id, None, 0).await.unwrap());
        assert!(!s.set_install_pending(&other.org_id, &b.id, Some(&p), 0).await.unwrap());
        let read = s.find_install(&f.org, "a").await.unwrap().unwrap();
        assert_eq!((read.pending, read.pending_rev), (Some(p), 1));
        assert_eq!(s.find_install(&f.org, "b").await.unwrap().unwrap().pending, None);
        assert!(s.set_install_pending(&f.org, &a.id, None, 1).await.unwrap());
        assert_eq!(s.find_install(&f.org, "a").await.unwrap().unwrap().pending, None);
    }

    async fn an_install_is_renamed_and_its_approval_mode_set_in_one_step(f: Fixture) {
        use crate::store::InstallChange;
        use nuon_core::model::ApprovalMode;
        let s = &*f.store;
        let a = f.install("a").await;
        let b = f.install("b").await;
        let change = |name: Option<&str>, approval| InstallChange { name: name.map(str::to_owned), approval };
        let after = s.update_install(&f.org, &a.id, &change(Some("a2"), Some(ApprovalMode::ApproveAll))).await.unwrap().unwrap();
        assert_eq!((after.id.clone(), after.name.as_str(), after.approval), (a.id.clone(), "a2", ApprovalMode::ApproveAll));
        assert!(s.find_install(&f.org, "a").await.unwrap().is_none());
        // Only what is given changes.
        let after = s.update_install(&f.org, &a.id, &change(None, Some(ApprovalMode::Prompt))).await.unwrap().unwrap();
        assert_eq!((after.name.as_str(), after.approval), ("a2", ApprovalMode::Prompt));
        assert_eq!(s.find_install(&f.org, "a2").await.unwrap().unwrap(), after);
        // A name taken is a conflict, and changes nothing (the mode with it neither).
        let taken = s.update_install(&f.org, &a.id, &change(Some("b"), Some(ApprovalMode::ApproveAll))).await.unwrap_err();
        assert!(matches!(taken, crate::store::StoreError::Conflict { code: ErrorCode::NameTaken, .. }), "{taken:?}");
        assert_eq!(s.find_install(&f.org, "a2").await.unwrap().unwrap(), after);
        assert_eq!(s.find_install(&f.org, "b").await.unwrap().unwrap().id, b.id);
        // Another org's install, or none: not there, nothing changed.
        let other = s.create_org(&OrgId::generate(), "other", b"k").await.unwrap().org_id;
        assert_eq!(s.update_install(&other, &a.id, &change(Some("x"), None)).await.unwrap(), None);
        assert_eq!(s.update_install(&f.org, &nuon_core::InstallId::generate(), &change(Some("x"), None)).await.unwrap(), None);
        assert_eq!(s.find_install(&f.org, "a2").await.unwrap().unwrap(), after);
    }

    async fn a_revoked_runner_authenticates_nothing_and_only_its_org_revokes_it(f: Fixture) {
        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        assert!(f.store.authenticate_runner("h").await.unwrap().is_some());
        assert_eq!(f.store.revoke_runner(&other, &f.runner).await.unwrap(), None);
        assert!(f.store.authenticate_runner("h").await.unwrap().is_some());
        let r = f.store.revoke_runner(&f.org, &f.runner).await.unwrap().unwrap();
        assert!(r.revoked);
        assert!(f.store.authenticate_runner("h").await.unwrap().is_none());
        // A second revoke keeps the first and still answers the runner.
        assert!(f.store.revoke_runner(&f.org, &f.runner).await.unwrap().unwrap().revoked);
    }

    async fn a_runner_session_is_taken_only_from_the_one_seen(f: Fixture) {
        let s = &f.store;
        assert_eq!(s.authenticate_runner("h").await.unwrap().unwrap().session, None);
        let a = r#"{"id":"a","host":"h1","pid":1}"#;
        let b = r#"{"id":"b","host":"h2","pid":2}"#;
        assert!(s.set_runner_session(&f.runner, None, a).await.unwrap());
        // Two takers that saw no session: only the first wins.
        assert!(!s.set_runner_session(&f.runner, None, b).await.unwrap());
        assert_eq!(s.authenticate_runner("h").await.unwrap().unwrap().session.as_deref(), Some(a));
        // A taker that saw `a` replaces it; one that saw it too late does not.
        assert!(s.set_runner_session(&f.runner, Some(a), b).await.unwrap());
        assert!(!s.set_runner_session(&f.runner, Some(a), a).await.unwrap());
        let listed = s.find_runner(&f.org, f.runner.as_str()).await.unwrap().unwrap();
        assert_eq!(listed.session.map(|x| (x.host, x.pid)), Some(("h2".to_owned(), 2)));
    }
}

conformance! {
    async fn dashboard_sessions_are_found_by_their_hash_until_they_end_or_expire(f: Fixture) {
        use crate::store::WebSession;

        let store = &f.store;
        let now = nuon_core::now_ms();
        let session = WebSession {
            id_hash: "h-live".into(),
            token_hash: "t".into(),
            csrf: "c".into(),
            created_at_ms: now,
            last_seen_at_ms: now,
            expires_at_ms: now + 60_000,
        };
        store.create_web_session(&session).await.unwrap();
        let old = WebSession { id_hash: "h-old".into(), expires_at_ms: now - 1, ..session.clone() };
        store.create_web_session(&old).await.unwrap();
        assert_eq!(store.web_session("h-live").await.unwrap(), Some(session.clone()));
        assert_eq!(store.web_session("h-old").await.unwrap(), None, "expired");
        store.touch_web_session("h-live", now + 5).await.unwrap();
        assert_eq!(store.web_session("h-live").await.unwrap().unwrap().last_seen_at_ms, now + 5);
        assert!(store.end_web_session("h-live").await.unwrap());
        assert!(!store.end_web_session("h-live").await.unwrap());
        assert_eq!(store.web_session("h-live").await.unwrap(), None);
    }
}
