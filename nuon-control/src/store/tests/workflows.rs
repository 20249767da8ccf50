//! Workflows and pruning.

use super::*;

conformance! {
    async fn workflows_keep_their_planned_steps_and_belong_to_one_org(f: Fixture) {
        use nuon_core::workflow::{PlannedStep, StepKind, WorkflowKind};
        use nuon_core::{AppId, InstallId, WorkflowId};

        use super::{NewInstall, NewWorkflow};

        let other = f.store.create_org("other").await.unwrap().org_id;
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
            },
            PlannedStep {
                name: "apply db".into(),
                kind: StepKind::Apply,
                target: Some("db".into()),
                needs_approval: true,
            },
        ];
        let new = |id: &WorkflowId| NewWorkflow {
            id: id.clone(),
            install_id: inst.id.clone(),
            kind: WorkflowKind::Provision,
            config_version: 1,
            component: None,
            steps: steps.clone(),
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
