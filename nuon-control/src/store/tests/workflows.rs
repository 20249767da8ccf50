//! Workflows and pruning.

use super::*;

conformance! {
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
                    approval: "prompt".into(),
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
            ..new(id)
        };
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
        assert!(matches!(e, StoreError::Conflict { code: "already_started", .. }), "{e}");
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
                    },
                )
                .await
                .unwrap();
            ids.push(id);
        }
        let active = |v: Vec<(OrgId, WorkflowId)>| v.into_iter().map(|(_, w)| w).collect::<Vec<_>>();
        assert_eq!(active(f.store.active_workflows().await.unwrap()), ids, "oldest first");

        f.store.set_workflow_status(&f.org, &ids[0], nuon_core::workflow::WorkflowStatus::Running).await.unwrap();
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
        f.store.set_workflow_status(&other, &ids[0], nuon_core::workflow::WorkflowStatus::Failed).await.unwrap();
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

        // An ending status ends the workflow and takes it off the active list.
        f.store.set_workflow_status(&f.org, &ids[0], nuon_core::workflow::WorkflowStatus::Succeeded).await.unwrap();
        let w = f.store.get_workflow(&f.org, &ids[0]).await.unwrap().unwrap();
        assert!(w.finished_at_ms.is_some());
        assert_eq!(active(f.store.active_workflows().await.unwrap()), ids[1..]);
    }
}
