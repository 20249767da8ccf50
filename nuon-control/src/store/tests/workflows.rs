//! Workflows and pruning.

use super::*;
use crate::store::RolloutSave;
use nuon_core::wire::ErrorCode;

conformance! {
    async fn a_runner_binary_is_kept_whole_once_and_only_for_its_org(f: Fixture) {
        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        let digest = format!("sha256:{}", "d".repeat(64));
        assert_eq!(f.store.runner_binary_parts(&f.org, &digest).await.unwrap(), 0);
        // Bytes of every value, a part of another size last.
        let parts = vec![(0..=255u8).collect::<Vec<u8>>(), vec![0, 1, 2]];
        f.store.put_runner_binary(&f.org, &digest, parts.clone()).await.unwrap();
        assert_eq!(f.store.runner_binary_parts(&f.org, &digest).await.unwrap(), 2);
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(f.store.runner_binary_part(&f.org, &digest, i as u32).await.unwrap().as_ref(), Some(p));
        }
        assert!(f.store.runner_binary_part(&f.org, &digest, 2).await.unwrap().is_none());
        // Kept once: a second upload of the digest changes nothing.
        f.store.put_runner_binary(&f.org, &digest, vec![vec![9; 4]]).await.unwrap();
        assert_eq!(f.store.runner_binary_part(&f.org, &digest, 0).await.unwrap().as_ref(), Some(&parts[0]));
        assert_eq!(f.store.runner_binaries(&f.org).await.unwrap().into_iter().collect::<Vec<_>>(), std::slice::from_ref(&digest));
        // Another org sees none of it.
        assert_eq!(f.store.runner_binary_parts(&other, &digest).await.unwrap(), 0);
        assert!(f.store.runner_binary_part(&other, &digest, 0).await.unwrap().is_none());
        assert!(f.store.runner_binaries(&other).await.unwrap().is_empty());
    }

    async fn a_rollout_is_a_head_and_a_row_per_install_and_a_save_writes_what_changed(f: Fixture) {
        use nuon_core::rollout::{NewRollout, RolloutKind, RolloutStatus, Selected, TargetState};
        use nuon_core::{ReleaseId, RolloutId, WorkflowId};

        let mut picked = Vec::new();
        for name in ["a", "b", "c"] {
            let inst = f.install(name).await;
            picked.push(Selected { id: inst.id.clone(), name: name.into(), release: None, config_version: None, pinned: None });
        }
        let r = NewRollout {
            id: RolloutId::generate(),
            kind: RolloutKind::Release,
            release_id: ReleaseId::generate(),
            runner_version: None,
            app_id: None,
            selector: String::new(),
            waves: "100%".parse().unwrap(),
            max_parallel: 5,
            approve_each_wave: false,
            bake_ms: 0,
            created_by: None,
        }
        .plan(picked, 10);
        f.store.create_rollout(&f.org, &r, None).await.unwrap();
        let id = r.id.as_str();
        let count = || f.raw("SELECT CAST(count(*) AS TEXT) FROM rollout_targets WHERE rollout_id = ?", id);
        assert_eq!(count().await.as_deref(), Some("3"));
        let doc = f.raw("SELECT doc FROM rollouts WHERE id = ?", id).await.unwrap();
        assert!(doc.contains("\"targets\":[]"), "the head holds no install: {doc}");
        assert_eq!(f.store.rollout_version(&f.org, &r.id).await.unwrap(), Some((1, true)));
        let mut read = f.store.get_rollout(&f.org, &r.id).await.unwrap().unwrap();
        assert_eq!(read.targets, r.targets, "{:?}", f.kind());

        // A save of the head and one install leaves the others' rows as
        // they were, even when the rollout it was made of says otherwise.
        read.started(1, WorkflowId::generate(), 20);
        read.status = RolloutStatus::Stopped;
        let mut save = RolloutSave::of(&read, [1]);
        save.head.reason = Some("stopped by the test".into());
        read.targets[0].state = TargetState::Failed;
        f.store.save_rollout(&f.org, &save, &[]).await.unwrap();
        let after = f.store.get_rollout(&f.org, &r.id).await.unwrap().unwrap();
        assert_eq!((after.version, after.status, after.reason.as_deref()), (2, RolloutStatus::Stopped, Some("stopped by the test")));
        let states: Vec<TargetState> = after.targets.iter().map(|t| t.state).collect();
        assert_eq!(states, [TargetState::Pending, TargetState::Running, TargetState::Pending]);
        assert_eq!(after.targets[1].tries, 1);
        assert_eq!(f.store.list_rollouts(&f.org, None).await.unwrap(), vec![after.clone()]);
        // Stale: the version moved.
        let e = f.store.save_rollout(&f.org, &save, &[]).await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict { code: ErrorCode::StaleRollout, .. }), "{e}");

        // A rollout stored whole by an earlier version (its installs in its
        // doc, no rows) reads the same, and a whole save writes its rows.
        let mut whole = after.clone();
        whole.version = 0;
        let whole_doc = serde_json::to_string(&whole).unwrap();
        f.raw(&format!("UPDATE rollouts SET doc = ? WHERE id = '{id}' RETURNING id"), &whole_doc).await;
        f.raw("DELETE FROM rollout_targets WHERE rollout_id = ? RETURNING rollout_id", id).await;
        assert_eq!(count().await.as_deref(), Some("0"));
        assert_eq!(f.store.rollout_version(&f.org, &r.id).await.unwrap(), Some((2, false)));
        let legacy = f.store.get_rollout(&f.org, &r.id).await.unwrap().unwrap();
        assert_eq!(legacy, after);
        f.store.save_rollout(&f.org, &RolloutSave::whole(&legacy), &[]).await.unwrap();
        assert_eq!(count().await.as_deref(), Some("3"));
        assert_eq!(f.store.rollout_version(&f.org, &r.id).await.unwrap(), Some((3, true)));
        let converted = f.store.get_rollout(&f.org, &r.id).await.unwrap().unwrap();
        assert_eq!(converted.targets, after.targets);
        // An active rollout's installs, as rows, are held against another.
        let mut other = r.clone();
        other.id = RolloutId::generate();
        let e = f.store.create_rollout(&f.org, &other, None).await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict { code: ErrorCode::InstallInRollout, .. }), "{e}");
        assert!(f.store.rollout_version(&f.org, &other.id).await.unwrap().is_none());
    }

    async fn runner_releases_are_kept_once_per_version_and_a_runner_rollout_records_each_ask(f: Fixture) {
        use nuon_core::rollout::{NewRollout, RolloutKind, Selected, TargetState};
        use nuon_core::wire::RunnerReleaseInfo;
        use nuon_core::{ReleaseId, RolloutId};

        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        let release = |version: &str, at: i64| RunnerReleaseInfo {
            id: ReleaseId::generate(),
            version: version.into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            repository: "nuon-runner".into(),
            manifest: format!("sha256:{}", "a".repeat(64)),
            digest: format!("sha256:{}", "b".repeat(64)),
            size: 10,
            signature: "sig".into(),
            served: false,
            created_at_ms: at,
            created_by: None,
        };
        let (v1, v2) = (release("1.0.0", 1), release("2.0.0", 2));
        f.store.create_runner_release(&f.org, &v1).await.unwrap();
        f.store.create_runner_release(&f.org, &v2).await.unwrap();
        // A version is published once; another org has its own.
        let e = f.store.create_runner_release(&f.org, &release("1.0.0", 3)).await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict { code: ErrorCode::RunnerReleaseExists, .. }), "{e}");
        f.store.create_runner_release(&other, &release("1.0.0", 3)).await.unwrap();
        let listed: Vec<String> = f.store.list_runner_releases(&f.org).await.unwrap().into_iter().map(|r| r.version).collect();
        assert_eq!(listed, ["2.0.0", "1.0.0"]);
        assert_eq!(f.store.get_runner_release(&f.org, "2.0.0").await.unwrap(), Some(v2.clone()));
        assert_eq!(f.store.get_runner_release(&f.org, v1.id.as_str()).await.unwrap(), Some(v1.clone()));
        assert!(f.store.get_runner_release(&other, v1.id.as_str()).await.unwrap().is_none());

        // A runner rollout's ask is saved with the rollout, with its number;
        // the install's app release is not touched.
        let inst = f.install("acme").await;
        let r = NewRollout {
            id: RolloutId::generate(),
            kind: RolloutKind::Runner,
            release_id: v2.id.clone(),
            runner_version: Some("2.0.0".into()),
            app_id: None,
            selector: String::new(),
            waves: "100%".parse().unwrap(),
            max_parallel: 5,
            approve_each_wave: false,
            bake_ms: 0,
            created_by: None,
        }
        .plan(vec![Selected { id: inst.id.clone(), name: "acme".into(), release: Some(v1.id.clone()), config_version: None, pinned: None }], 10);
        f.store.create_rollout(&f.org, &r, None).await.unwrap();
        let mut r = f.store.get_rollout(&f.org, &r.id).await.unwrap().unwrap();
        assert_eq!((r.kind, r.runner_version.as_deref(), r.app_id.as_ref()), (RolloutKind::Runner, Some("2.0.0"), None));
        assert!(f.store.runner_release_of(&f.org, &inst.id).await.unwrap().is_none());
        // A claim's settings' version is read in one statement: the same as
        // of the install and its ask read apart.
        let basis = || async {
            let one = f.store.settings_basis_of_runner(&f.org, &inst.runner_id).await.unwrap().unwrap();
            let whole = f.store.find_install_of_runner(&f.org, &inst.runner_id).await.unwrap().unwrap();
            let asked = f.store.runner_release_of(&f.org, &inst.id).await.unwrap();
            assert_eq!(one, crate::store::SettingsBasis::of(&whole, asked));
            one
        };
        let before = basis().await;
        assert_eq!(before.asked, None);
        assert!(f.store.settings_basis_of_runner(&other, &inst.runner_id).await.unwrap().is_none());
        r.asked(0, 20);
        r.asked(0, 21);
        f.store.save_rollout(&f.org, &RolloutSave::of(&r, [0]), &[(inst.id.clone(), v2.id.clone())]).await.unwrap();
        assert_eq!(f.store.runner_release_of(&f.org, &inst.id).await.unwrap(), Some((v2.id.clone(), 2)));
        let after = basis().await;
        assert_eq!(after.asked, Some((v2.id.clone(), 2)));
        assert_ne!(after.version(), before.version(), "an ask changes the settings' version");
        // A claim that takes a job reads the basis with it (PostgreSQL; SQLite reads it after).
        let (on_sqlite, store) = (matches!(f.backing, Backing::Sqlite { .. }), &f.store); let claim = |runner: RunnerId| async move { store.claim(&runner, &["exec".into()], 8, 60_000).await.unwrap() };
        let claimed = { f.queue_for(&inst.runner_id, 1).await; claim(inst.runner_id.clone()).await };
        assert_eq!((claimed.jobs.len(), claimed.settings), (1, (!on_sqlite).then(|| Some(after.clone()))));
        let claimed = { f.queue(1).await; claim(f.runner.clone()).await };
        assert_eq!((claimed.jobs.len(), claimed.settings), (1, (!on_sqlite).then_some(None)), "a runner of no install has none");
        assert_eq!(claim(inst.runner_id.clone()).await.settings, None, "nor does a claim that took nothing");
        assert_eq!(f.store.install_runner_releases(&f.org).await.unwrap().get(&inst.id), Some(&(v2.id.clone(), 2)));
        assert!(f.store.install_runner_releases(&other).await.unwrap().is_empty());
        assert!(f.store.install_releases(&f.org).await.unwrap().is_empty());
        let r = f.store.get_rollout(&f.org, &r.id).await.unwrap().unwrap();
        assert_eq!((r.targets[0].state, r.targets[0].tries), (TargetState::Running, 2));
        // Paused, it is still active (the leader still looks at it).
        let mut paused = r.clone();
        paused.pause().unwrap();
        f.store.save_rollout(&f.org, &RolloutSave::of(&paused, []), &[]).await.unwrap();
        assert_eq!(f.store.active_rollouts().await.unwrap(), [(f.org.clone(), r.id.clone())]);
        assert_eq!(f.store.list_rollouts(&f.org, Some(&v2.id)).await.unwrap().len(), 1);
        // The install's removal takes the record with it.
        assert!(f.store.remove_install(&f.org, &inst.id).await.unwrap());
        assert!(f.store.runner_release_of(&f.org, &inst.id).await.unwrap().is_none());
    }

    async fn workflows_keep_their_planned_steps_and_belong_to_one_org(f: Fixture) {
        use nuon_core::workflow::{PlannedStep, StepKind, WorkflowKind};
        use nuon_core::{AppId, InstallId, WorkflowId};

        use super::{NewInstall, NewWorkflow};

        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        let app = f
            .store
            .create_app(&f.org, &AppId::generate(), "web")
            .await
            .unwrap();
        let inst = f
            .store
            .create_install(
                &f.org,
                NewInstall {
                    id: InstallId::generate(),
                    app_id: app.id.clone(),
                    name: "acme".into(),
                    config_version: 1,
                    runner_id: RunnerId::generate(),
                    runner_name: "install-acme".into(),
                    runner_token_hash: "h-acme".into(),
                    inputs_json: "{}".into(),
                    sealed_json: "{}".into(),
                    approval: nuon_core::model::ApprovalMode::Prompt,
                    toggles: Default::default(),
                    overrides: Default::default(),
                    labels: Default::default(),
                },
            )
            .await
            .unwrap();
        let steps = vec![
            PlannedStep {
                name: "plan db".into(),
                kind: StepKind::Plan,
                target: Some("db".into()),
                needs_approval: false,
                skipped: None,
            },
            PlannedStep {
                name: "apply db".into(),
                kind: StepKind::Apply,
                target: Some("db".into()),
                needs_approval: true,
                skipped: None,
            },
        ];
        let new = |id: &WorkflowId| NewWorkflow {
            id: id.clone(),
            install_id: inst.id.clone(),
            kind: WorkflowKind::Provision,
            config_version: 1,
            component: None,
            steps: steps.clone(),
            inputs: Default::default(),
            trigger: None,
            fire: None,
            release: None,
            rollout: None,
        };
        let id = WorkflowId::generate();
        let w = f.store.create_workflow(&f.org, new(&id)).await.unwrap();
        assert_eq!(
            (w.status.as_str(), w.kind, w.steps.len()),
            ("pending", WorkflowKind::Provision, 2)
        );
        assert_eq!(w.steps[1].kind, StepKind::Apply);
        assert!(w.steps[1].needs_approval);
        assert_eq!(
            f.store.get_workflow(&f.org, &id).await.unwrap(),
            Some(w.clone())
        );
        assert_eq!(
            f.store.list_workflows(&f.org, &inst.id).await.unwrap(),
            vec![w]
        );
        assert!(f.store.get_workflow(&other, &id).await.unwrap().is_none());
        // A step kind of a newer release (a rolling upgrade) is read as
        // unknown, not refused, and its row keeps its kind.
        let newer = f
            .raw(
                "UPDATE workflow_steps SET kind = 'kind_of_a_newer_release' \
                 WHERE workflow_id = ? AND idx = 1 RETURNING kind",
                id.as_str(),
            )
            .await;
        assert_eq!(newer.as_deref(), Some("kind_of_a_newer_release"));
        let read = f.store.get_workflow(&f.org, &id).await.unwrap().unwrap();
        assert_eq!(read.steps[1].kind, StepKind::Unknown);
        assert_eq!(read.steps[1].name, "apply db");
        assert_eq!(f.store.list_workflows(&f.org, &inst.id).await.unwrap()[0].steps[1].kind, StepKind::Unknown);
        let kept = f
            .raw("SELECT kind FROM workflow_steps WHERE workflow_id = ? AND idx = 1", id.as_str())
            .await;
        assert_eq!(kept.as_deref(), Some("kind_of_a_newer_release"));
        f.raw(
            "UPDATE workflow_steps SET kind = 'apply' WHERE workflow_id = ? AND idx = 1 RETURNING kind",
            id.as_str(),
        )
        .await;
        assert!(
            f.store
                .list_workflows(&other, &inst.id)
                .await
                .unwrap()
                .is_empty()
        );
        let e = f
            .store
            .create_workflow(&other, new(&WorkflowId::generate()))
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{e}");

        // A step skipped before it starts, run-time inputs and a trigger
        // are kept; tries that failed are kept with their step.
        let skipped = PlannedStep {
            skipped: Some("component db is turned off on this install".into()),
            ..steps[0].clone()
        };
        let cron = |id: &WorkflowId| NewWorkflow {
            steps: vec![skipped.clone(), steps[1].clone()],
            inputs: [("LEVEL".to_string(), "debug".to_string())].into(),
            trigger: Some("cron".into()),
            fire: Some(("nightly".into(), 1_700_000_000_000)),
            release: None,
            rollout: None,
            ..new(id)
        };
        // A rollout's start: the workflow and the rollout saved over its
        // version together; a second start over the same version (another
        // leader) is refused and leaves no workflow.
        {
            use nuon_core::rollout::{NewRollout, Selected, TargetState};
            use nuon_core::{ReleaseId, RolloutId};
            let release = ReleaseId::generate();
            let r = NewRollout {
                id: RolloutId::generate(),
                kind: nuon_core::rollout::RolloutKind::Release,
                release_id: release.clone(),
                runner_version: None,
                app_id: Some(app.id.clone()),
                selector: "tier=prod".into(),
                waves: "100%".parse().unwrap(),
                max_parallel: 5,
                approve_each_wave: false,
                bake_ms: 0,
                created_by: Some("admin".into()),
            }
            .plan(vec![Selected { id: inst.id.clone(), name: "acme".into(), release: None, config_version: None, pinned: None }], 10);
            f.store.create_rollout(&f.org, &r, None).await.unwrap();
            let mut r = f.store.get_rollout(&f.org, &r.id).await.unwrap().unwrap();
            assert_eq!(r.version, 1);
            let (w1, w2) = (WorkflowId::generate(), WorkflowId::generate());
            let mut started = r.clone();
            started.started(0, w1.clone(), 20);
            let go = |id: &WorkflowId, doc: &nuon_core::rollout::RolloutInfo, version: u32| NewWorkflow {
                kind: WorkflowKind::Deploy,
                config_version: version,
                release: Some(release.clone()),
                rollout: Some(RolloutSave::of(doc, [0])),
                ..new(id)
            };
            // The install runs the workflow's config version from then on.
            let w = f.store.create_workflow(&f.org, go(&w1, &started, 2)).await.unwrap();
            assert_eq!(w.release_id.as_ref(), Some(&release));
            assert_eq!(f.store.find_install(&f.org, "acme").await.unwrap().unwrap().config_version, 2);
            let mut again = r.clone();
            again.started(0, w2.clone(), 21);
            let e = f.store.create_workflow(&f.org, go(&w2, &again, 3)).await.unwrap_err();
            assert!(matches!(e, StoreError::Conflict { code: ErrorCode::StaleRollout, .. }), "{e}");
            assert!(f.store.get_workflow(&f.org, &w2).await.unwrap().is_none());
            // Refused: nothing of it is kept, the config version included.
            assert_eq!(f.store.find_install(&f.org, "acme").await.unwrap().unwrap().config_version, 2);
            r = f.store.get_rollout(&f.org, &r.id).await.unwrap().unwrap();
            assert_eq!((r.version, r.targets[0].state, r.targets[0].workflow_id.as_ref()), (2, TargetState::Running, Some(&w1)));
            // Saved with the install's release; a stale save is refused.
            let stale = r.clone();
            r.targets[0].state = TargetState::Succeeded;
            r.status = nuon_core::rollout::RolloutStatus::Succeeded;
            f.store.save_rollout(&f.org, &RolloutSave::of(&r, [0]), &[(inst.id.clone(), release.clone())]).await.unwrap();
            let e = f.store.save_rollout(&f.org, &RolloutSave::whole(&stale), &[]).await.unwrap_err();
            assert!(matches!(e, StoreError::Conflict { code: ErrorCode::StaleRollout, .. }), "{e}");
            assert_eq!(f.store.install_releases(&f.org).await.unwrap().get(&inst.id), Some(&release));
            assert!(f.store.install_releases(&other).await.unwrap().is_empty());
            // Listed per release, newest first; only active ones are driven.
            assert!(f.store.active_rollouts().await.unwrap().is_empty());
            let mut back = r.clone();
            back.id = RolloutId::generate();
            back.status = nuon_core::rollout::RolloutStatus::Running;
            back.created_at_ms = 30;
            let mut ended = f.store.get_rollout(&f.org, &r.id).await.unwrap().unwrap();
            ended.status = nuon_core::rollout::RolloutStatus::RolledBack;
            f.store.create_rollout(&f.org, &back, Some(&RolloutSave::whole(&ended))).await.unwrap();
            // The replaced one was saved with it; replacing it again (stale) stores nothing.
            let mut twice = back.clone();
            twice.id = RolloutId::generate();
            let e = f.store.create_rollout(&f.org, &twice, Some(&RolloutSave::whole(&ended))).await.unwrap_err();
            assert!(matches!(e, StoreError::Conflict { code: ErrorCode::StaleRollout, .. }), "{e}");
            assert!(f.store.get_rollout(&f.org, &twice.id).await.unwrap().is_none());
            let listed: Vec<_> = f.store.list_rollouts(&f.org, Some(&release)).await.unwrap().into_iter().map(|r| (r.id, r.status)).collect();
            assert_eq!(listed, [(back.id.clone(), nuon_core::rollout::RolloutStatus::Running), (r.id.clone(), nuon_core::rollout::RolloutStatus::RolledBack)]);
            assert!(f.store.list_rollouts(&f.org, Some(&ReleaseId::generate())).await.unwrap().is_empty());
            assert_eq!(f.store.list_rollouts(&f.org, None).await.unwrap().len(), 2);
            assert!(f.store.get_rollout(&other, &r.id).await.unwrap().is_none());
            assert_eq!(f.store.active_rollouts().await.unwrap(), [(f.org.clone(), back.id.clone())]);
            // An install takes one active rollout at a time.
            let mut third = back.clone();
            third.id = RolloutId::generate();
            let e = f.store.create_rollout(&f.org, &third, None).await.unwrap_err();
            assert!(matches!(e, StoreError::Conflict { code: ErrorCode::InstallInRollout, .. }), "{e}");
            assert!(e.to_string().contains("acme"), "{e}");
            assert!(f.store.get_rollout(&f.org, &third.id).await.unwrap().is_none());
        }
        let c1 = WorkflowId::generate();
        let w = f.store.create_workflow(&f.org, cron(&c1)).await.unwrap();
        assert_eq!(w.steps[0].status.as_str(), "skipped");
        assert_eq!(w.steps[0].reason.as_deref(), skipped.skipped.as_deref());
        assert_eq!(w.steps[0].outputs[nuon_core::workflow::TURNED_OFF], true);
        assert_eq!(w.inputs["LEVEL"], "debug");
        assert_eq!(w.trigger.as_deref(), Some("cron"));
        // The same cron run, stored again (another leader): refused, and
        // nothing of it is kept.
        let c2 = WorkflowId::generate();
        let e = f.store.create_workflow(&f.org, cron(&c2)).await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict { code: ErrorCode::AlreadyStarted, .. }), "{e}");
        assert!(f.store.get_workflow(&f.org, &c2).await.unwrap().is_none());
        let tried = serde_json::json!([{"job_id": null, "reason": "boom", "failed_at_ms": 5, "retry_at_ms": 7}]);
        f.store
            .update_step(
                &f.org,
                &c1,
                1,
                super::StepUpdate {
                    status: nuon_core::workflow::StepStatus::Pending,
                    attempts: Some(serde_json::from_value(tried).unwrap()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let w = f.store.get_workflow(&f.org, &c1).await.unwrap().unwrap();
        assert_eq!(w.steps[1].attempts.len(), 1);
        assert_eq!(w.steps[1].attempts[0].retry_at_ms, Some(7));

        // Components turned off and on, per install.
        f.store.set_install_toggle(&f.org, &inst.id, "db", Some(false)).await.unwrap();
        f.store.set_install_toggle(&f.org, &inst.id, "web", Some(true)).await.unwrap();
        let got = f.store.find_install(&f.org, inst.id.as_str()).await.unwrap().unwrap();
        assert_eq!(got.toggles, [("db".to_string(), false), ("web".to_string(), true)].into());
        f.store.set_install_toggle(&f.org, &inst.id, "db", None).await.unwrap();
        let got = f.store.find_install(&f.org, inst.id.as_str()).await.unwrap().unwrap();
        assert_eq!(got.toggles, [("web".to_string(), true)].into());
        assert!(f.store.set_install_toggle(&other, &inst.id, "db", Some(true)).await.is_err());
        // An install may start with components off, in its creation.
        let toggled = f
            .store
            .create_install(
                &f.org,
                NewInstall {
                    id: InstallId::generate(),
                    app_id: app.id.clone(),
                    name: "toggled".into(),
                    config_version: 1,
                    runner_id: RunnerId::generate(),
                    runner_name: "install-toggled".into(),
                    runner_token_hash: "h-toggled".into(),
                    inputs_json: "{}".into(),
                    sealed_json: "{}".into(),
                    approval: nuon_core::model::ApprovalMode::Prompt,
                    toggles: [("db".to_string(), false)].into(),
                    overrides: [("db".to_string(), over("a = 1\n"))].into(),
                    labels: Default::default(),
                },
            )
            .await
            .unwrap();
        assert_eq!(toggled.toggles, [("db".to_string(), false)].into());
        let got = f.store.find_install(&f.org, toggled.id.as_str()).await.unwrap().unwrap();
        assert_eq!(got.toggles, [("db".to_string(), false)].into());
        assert_eq!(got.overrides, [("db".to_string(), over("a = 1\n"))].into());

        // An install's own values for components: set, replaced, cleared,
        // one component at a time, in its org only.
        let helm = nuon_core::wire::ComponentOverride {
            helm_values: Some("a: \"it's\"\n".into()),
            tf_vars: None,
        };
        f.store.set_install_override(&f.org, &inst.id, "web", Some(&helm)).await.unwrap();
        f.store.set_install_override(&f.org, &inst.id, "db", Some(&over("b = 2"))).await.unwrap();
        f.store.set_install_override(&f.org, &inst.id, "db", Some(&over("c = 3"))).await.unwrap();
        let got = f.store.find_install(&f.org, inst.id.as_str()).await.unwrap().unwrap();
        assert_eq!(
            got.overrides,
            [("db".to_string(), over("c = 3")), ("web".to_string(), helm.clone())].into()
        );
        f.store.set_install_override(&f.org, &inst.id, "db", None).await.unwrap();
        let got = f.store.find_install(&f.org, inst.id.as_str()).await.unwrap().unwrap();
        assert_eq!(got.overrides, [("web".to_string(), helm)].into());
        assert_eq!(got.toggles, [("web".to_string(), true)].into(), "toggles untouched");
        assert!(f.store.set_install_override(&other, &inst.id, "db", None).await.is_err());

        // Checks the vendor's systems push: recorded by name, the last
        // push of a name replacing the one before, in its org only.
        let check = |name: &str, healthy: bool, at_ms: i64| nuon_core::model::InstallCheck {
            name: name.into(),
            status: if healthy {
                nuon_core::model::CheckStatus::Healthy
            } else {
                nuon_core::model::CheckStatus::Unhealthy
            },
            detail: (!healthy).then(|| "card \"declined\"".into()),
            at_ms,
        };
        f.store.set_install_check(&f.org, &inst.id, &check("billing", false, 1)).await.unwrap();
        f.store.set_install_check(&f.org, &inst.id, &check("db.ready", true, 2)).await.unwrap();
        f.store.set_install_check(&f.org, &inst.id, &check("billing", true, 3)).await.unwrap();
        let got = f.store.find_install(&f.org, inst.id.as_str()).await.unwrap().unwrap();
        assert_eq!(
            got.checks,
            [
                ("billing".to_string(), check("billing", true, 3)),
                ("db.ready".to_string(), check("db.ready", true, 2)),
            ]
            .into()
        );
        assert_eq!(got.overrides.len(), 1, "overrides untouched");
        assert!(f.store.set_install_check(&other, &inst.id, &check("x", true, 4)).await.is_err());

        // The install's summary cache: stale after every change to one of
        // its workflows, saved only at the revision it was made at, and
        // only the install's org sees it.
        let cache = || async {
            let all = f.store.fleet_changes(&f.org, 0).await.unwrap().summaries;
            assert_eq!(all.len(), 1, "{all:?}");
            all.into_iter().next().unwrap()
        };
        let text = |n: u32| crate::store::SummaryText {
            brief: format!("{{\"n\":{n}}}"),
            full: format!("{{\"at\":{n}}}"),
        };
        let c = cache().await;
        assert_eq!(c.install_id, inst.id);
        assert!(c.rev >= 1, "creating workflows moved the revision: {c:?}");
        assert_eq!(c.fresh(), None);
        f.store.save_install_summaries(&[(inst.id.clone(), c.rev, text(1))]).await.unwrap();
        assert_eq!(cache().await.fresh(), Some(&text(1)));
        assert!(f.store.fleet_changes(&other, 0).await.unwrap().summaries.is_empty());
        f.store
            .update_step(&f.org, &c1, 1, super::StepUpdate {
                status: nuon_core::workflow::StepStatus::WaitingApproval,
                ..Default::default()
            })
            .await
            .unwrap();
        let moved = cache().await;
        assert_eq!((moved.rev, moved.fresh()), (c.rev + 1, None));
        // A summary made before that change is not saved over it.
        f.store.save_install_summaries(&[(inst.id.clone(), c.rev, text(2))]).await.unwrap();
        assert_eq!(cache().await.fresh(), None);
        f.store.save_install_summaries(&[(inst.id.clone(), moved.rev, text(3))]).await.unwrap();
        assert_eq!(cache().await.fresh(), Some(&text(3)));
        f.store
            .set_workflow_status(&f.org, &c1, nuon_core::workflow::WorkflowStatus::Cancelled, None, None, None)
            .await
            .unwrap();
        assert_eq!(cache().await.rev, moved.rev + 1);
    }
}

conformance! {
    async fn pruning_removes_old_finished_jobs_and_their_logs_only(f: Fixture) {
        let old = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        f.store
            .append_logs(&f.runner, &old, Fixture::batch(n, 1, &["a", "b"]))
            .await
            .unwrap();
        f.store
            .complete(
                &f.runner,
                &old,
                Completion {
                    attempt: n,
                    logs: None,
                    log_lines: 2,
                    result: ok_result(),
                },
            )
            .await
            .unwrap();
        let queued = f.queue(1).await;
        // Nothing finished before an hour ago.
        assert_eq!(f.store.prune(now_ms() - 3_600_000).await.unwrap(), 0);
        assert_eq!(f.texts(&old).await, ["a", "b"]);
        // The finished job and its log go; the queued one stays.
        assert!(f.store.prune(now_ms() + 1).await.unwrap() >= 2);
        assert!(f.store.get_job(&f.org, &old).await.unwrap().is_none());
        assert!(f.store.read_logs(&f.org, &old, 0, 10).await.unwrap().is_none());
        assert_eq!(
            f.store.get_job(&f.org, &queued).await.unwrap().unwrap().status,
            JobStatus::Queued
        );
    }
}

conformance! {
    async fn the_executor_moves_workflows_and_steps(f: Fixture) {
        use nuon_core::WorkflowId;
        use nuon_core::workflow::{PlannedStep, StepKind, WorkflowKind};

        let inst = f.install("acme").await;
        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        let step = |name: &str| PlannedStep {
            name: name.into(),
            kind: StepKind::Plan,
            target: Some("db".into()),
            needs_approval: true,
            skipped: None,
        };
        let mut ids = Vec::new();
        for _ in 0..2 {
            let id = WorkflowId::generate();
            f.store
                .create_workflow(
                    &f.org,
                    NewWorkflow {
                        id: id.clone(),
                        install_id: inst.id.clone(),
                        kind: WorkflowKind::Deploy,
                        config_version: 1,
                        component: None,
                        steps: vec![step("plan db"), step("apply db")],
                        inputs: Default::default(),
                        trigger: None,
                        fire: None,
                        release: None,
                        rollout: None,
                    },
                )
                .await
                .unwrap();
            ids.push(id);
        }
        let active = |v: Vec<super::ActiveWorkflow>| {
            assert!(v.iter().all(|a| a.org == f.org && a.install == inst.id), "{v:?}");
            v.into_iter().map(|a| a.id).collect::<Vec<_>>()
        };
        assert_eq!(active(f.store.active_workflows().await.unwrap()), ids, "oldest first");

        f.store.set_workflow_status(&f.org, &ids[0], nuon_core::workflow::WorkflowStatus::Running, None, None, None).await.unwrap();
        f.store
            .update_step(&f.org, &ids[0], 0, StepUpdate {
                status: nuon_core::workflow::StepStatus::Succeeded,
                outputs_json: Some(r#"{"changes":1}"#.into()),
                ..Default::default()
            })
            .await
            .unwrap();
        f.store
            .update_step(&f.org, &ids[0], 1, StepUpdate {
                status: nuon_core::workflow::StepStatus::WaitingApproval,
                reason: Some("waits".into()),
                approved: Some(true),
                ..Default::default()
            })
            .await
            .unwrap();
        // Another org's writes change nothing.
        f.store.set_workflow_status(&other, &ids[0], nuon_core::workflow::WorkflowStatus::Failed, None, None, None).await.unwrap();
        let refused = f.store
            .update_step(&other, &ids[0], 0, StepUpdate { status: nuon_core::workflow::StepStatus::Failed, ..Default::default() })
            .await;
        assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
        let w = f.store.get_workflow(&f.org, &ids[0]).await.unwrap().unwrap();
        assert_eq!(w.status, "running");
        assert_eq!(w.finished_at_ms, None);
        assert_eq!((w.steps[0].status.as_str(), w.steps[0].outputs["changes"].as_i64()), ("succeeded", Some(1)));
        assert_eq!(w.steps[1].status, "waiting_approval");
        assert_eq!(w.steps[1].reason.as_deref(), Some("waits"));
        assert!(w.steps[1].approved_at_ms.is_some());
        f.store
            .update_step(&f.org, &ids[0], 1, StepUpdate {
                status: nuon_core::workflow::StepStatus::Pending,
                approved: Some(false),
                clear_job: true,
                ..Default::default()
            })
            .await
            .unwrap();
        let w = f.store.get_workflow(&f.org, &ids[0]).await.unwrap().unwrap();
        assert_eq!((w.steps[1].approved_at_ms, w.steps[1].job_id.as_ref()), (None, None));

        // A step waiting for a person is found among many workflows, and
        // not once it is approved.
        assert!(f.store.waiting_steps(&f.org, &ids).await.unwrap().is_empty());
        f.store
            .update_step(&f.org, &ids[0], 1, StepUpdate {
                status: nuon_core::workflow::StepStatus::WaitingApproval,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            f.store.waiting_steps(&f.org, &ids).await.unwrap(),
            [(ids[0].clone(), "apply db".to_owned())]
        );
        assert!(f.store.waiting_steps(&other, &ids).await.unwrap().is_empty());

        // An ending status ends the workflow and takes it off the active list.
        f.store.set_workflow_status(&f.org, &ids[0], nuon_core::workflow::WorkflowStatus::Succeeded, None, None, None).await.unwrap();
        let w = f.store.get_workflow(&f.org, &ids[0]).await.unwrap().unwrap();
        assert!(w.finished_at_ms.is_some());
        assert_eq!(active(f.store.active_workflows().await.unwrap()), ids[1..]);
        // Statuses many at a time, of the org's workflows only.
        let mut asked = ids.clone();
        asked.push(WorkflowId::generate());
        let statuses = f.store.workflow_statuses(&f.org, &asked).await.unwrap();
        let mut statuses: Vec<_> = statuses.into_iter().map(|(id, s, at)| (id, s, at.is_some())).collect();
        statuses.sort_by_key(|(id, _, _)| ids.iter().position(|i| i == id));
        assert_eq!(
            statuses,
            [
                (ids[0].clone(), nuon_core::workflow::WorkflowStatus::Succeeded, true),
                (ids[1].clone(), nuon_core::workflow::WorkflowStatus::Pending, false),
            ]
        );
        assert!(f.store.workflow_statuses(&other, &ids).await.unwrap().is_empty());
    }

    async fn removing_an_install_takes_what_is_only_its_and_an_app_waits_for_its_installs(f: Fixture) {
        use nuon_core::workflow::{PlannedStep, StepKind, WorkflowKind, WorkflowStatus};
        use nuon_core::{AppId, WorkflowId};

        use super::NewWorkflow;

        let app = f.store.create_app(&f.org, &AppId::generate(), "web").await.unwrap();
        let install = |name: &str| super::new_install(&app.id, name, Default::default());
        let a = f.store.create_install(&f.org, install("a")).await.unwrap();
        let b = f.store.create_install(&f.org, install("b")).await.unwrap();
        let wf = WorkflowId::generate();
        f.store
            .create_workflow(&f.org, NewWorkflow {
                id: wf.clone(),
                install_id: a.id.clone(),
                kind: WorkflowKind::Deploy,
                config_version: 1,
                component: None,
                steps: vec![PlannedStep { name: "plan x".into(), kind: StepKind::Plan, target: Some("x".into()), needs_approval: false, skipped: None }],
                inputs: Default::default(),
                trigger: None,
                fire: None,
                release: None,
                rollout: None,
            })
            .await
            .unwrap();
        // Held by a workflow: refused, nothing removed.
        let e = f.store.remove_install(&f.org, &a.id).await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict { code: ErrorCode::InstallBusy, .. }), "{e}");
        assert!(f.store.find_install(&f.org, "a").await.unwrap().is_some());
        // Another org's: not there.
        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        assert!(!f.store.remove_install(&other, &a.id).await.unwrap());
        f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Succeeded, None, None, None).await.unwrap();
        assert!(f.store.remove_install(&f.org, &a.id).await.unwrap());
        assert!(f.store.find_install(&f.org, "a").await.unwrap().is_none());
        assert!(f.store.get_workflow(&f.org, &wf).await.unwrap().is_none());
        let runner = f.store.find_runner(&f.org, a.runner_id.as_str()).await.unwrap().unwrap();
        assert!(runner.revoked, "its runner's token is revoked");
        assert!(!f.store.remove_install(&f.org, &a.id).await.unwrap());
        // The name is free again.
        f.store.create_install(&f.org, NewInstall { runner_name: "install-a2".into(), runner_token_hash: "h-a2".into(), ..install("a") }).await.unwrap();

        // The app waits for its installs, and names them.
        let e = f.store.remove_app(&f.org, &app.id).await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict { code: ErrorCode::AppHasInstalls, .. }), "{e}");
        assert!(e.to_string().contains("a, b"), "{e}");
        for name in ["a", "b"] {
            let i = f.store.find_install(&f.org, name).await.unwrap().unwrap();
            assert!(f.store.remove_install(&f.org, &i.id).await.unwrap());
        }
        let _ = b;
        assert!(!f.store.remove_app(&other, &app.id).await.unwrap());
        assert!(f.store.remove_app(&f.org, &app.id).await.unwrap());
        assert!(f.store.find_app(&f.org, "web").await.unwrap().is_none());
        f.store.create_app(&f.org, &AppId::generate(), "web").await.unwrap();
    }
}

/// A Terraform override of `text`.
fn over(text: &str) -> nuon_core::wire::ComponentOverride {
    nuon_core::wire::ComponentOverride {
        helm_values: None,
        tf_vars: Some(text.into()),
    }
}
