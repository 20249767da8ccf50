//! A step's dispatch and changes: only while its workflow runs, and each
//! marking its install's summary stale.

use super::*;
use nuon_core::workflow::{PlannedStep, StepKind};

/// A plan step of component `db`.
fn step(name: &str) -> PlannedStep {
    PlannedStep {
        name: name.into(),
        kind: StepKind::Plan,
        target: Some("db".into()),
        needs_approval: false,
        skipped: None,
    }
}

conformance! {
    async fn a_step_is_dispatched_only_while_its_workflow_runs_and_each_change_marks_the_summary_stale(f: Fixture) {
        use nuon_core::WorkflowId;
        use nuon_core::model::InstallState;
        use nuon_core::workflow::{StepStatus, WorkflowStatus};

        let inst = f.install("acme").await;
        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        let wf = WorkflowId::generate();
        f.store
            .create_workflow(&f.org, new_workflow(&wf, &inst.id, vec![step("plan db"), step("apply db")]))
            .await
            .unwrap();
        let rev = || async { f.store.install_summary_rev(&inst.id).await.unwrap() };
        let queued = || async { f.store.claim(&inst.runner_id, &["terraform".into()], 8, 60_000).await.unwrap().jobs.len() };

        // Pending: no dispatch, nothing queued, nothing marked.
        let at_start = rev().await;
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        let refused = f.store.dispatch_step(&f.org, &wf, 0, job, None, None).await;
        assert!(matches!(&refused, Err(StoreError::Invalid(m)) if m.contains("not running")), "{refused:?}");
        assert_eq!(rev().await, at_start);
        assert_eq!(f.store.get_workflow(&f.org, &wf).await.unwrap().unwrap().steps[0].job_id, None);

        // Running: another org's dispatch and a step it does not have are
        // refused the same way; then the step's job is queued.
        let state = || async { f.store.find_install(&f.org, inst.id.as_str()).await.unwrap().unwrap().state };
        let before = state().await;
        assert_ne!(before, InstallState::Provisioning);
        let bumped = f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Running, Some(InstallState::Provisioning), None).await.unwrap();
        assert_eq!(state().await, InstallState::Provisioning, "the install's state is written with the status");
        let running = rev().await;
        assert!(running > at_start, "a status change marks the summary stale");
        assert_eq!(bumped, Some(running), "the change answers the revision it bumped to");
        for (org, index) in [(&other, 0), (&f.org, 7)] {
            let job = f.new_job(&inst.runner_id, "terraform", 1);
            let refused = f.store.dispatch_step(org, &wf, index, job, None, None).await;
            assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
        }
        assert_eq!(rev().await, running);
        assert_eq!(queued().await, 0, "a refused dispatch queues nothing");
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        let job_id = job.spec.job_id.clone();
        f.store.dispatch_step(&f.org, &wf, 0, job, None, None).await.unwrap();
        let dispatched = rev().await;
        assert!(dispatched > running);
        let w = f.store.get_workflow(&f.org, &wf).await.unwrap().unwrap();
        assert_eq!((w.steps[0].status, w.steps[0].job_id.as_ref()), (StepStatus::Running, Some(&job_id)));
        assert_eq!(w.steps[1].job_id, None);
        assert_eq!(queued().await, 1);

        // A step's change marks it; one refused (another org's) does not.
        let refused = f.store.update_step(&other, &wf, 0, StepUpdate { status: StepStatus::Failed, ..Default::default() }).await;
        assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
        assert_eq!(rev().await, dispatched);
        // The install's outputs and state go with a step's update, and
        // with no refused one.
        let outputs = |state| Some((r#"{"url":"u"}"#.to_owned(), state));
        let refused = f.store.update_step(&f.org, &wf, 7, StepUpdate { install_outputs: outputs(InstallState::Failed), ..Default::default() }).await;
        assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
        let install = || async { f.store.find_install(&f.org, inst.id.as_str()).await.unwrap().unwrap() };
        assert_eq!((install().await.outputs_json, install().await.state), (None, InstallState::Provisioning));
        let done = StepUpdate { status: StepStatus::Succeeded, install_outputs: outputs(InstallState::Active), ..Default::default() };
        f.store.update_step(&f.org, &wf, 0, done).await.unwrap();
        let after = install().await;
        assert_eq!((after.outputs_json.as_deref(), after.state), (Some(r#"{"url":"u"}"#), InstallState::Active));
        assert!(rev().await > dispatched);
        // Another org's status change changes nothing (a mark more is
        // only a summary made again).
        let rel = nuon_core::ReleaseId::generate();
        let bumped = f.store.set_workflow_status(&other, &wf, WorkflowStatus::Failed, Some(InstallState::Failed), Some(Some(&rel))).await.unwrap();
        assert_eq!(bumped, None, "another org's workflow answers no revision");
        assert_eq!(state().await, InstallState::Active, "nor changes the install's state");
        assert!(f.store.install_releases(&other).await.unwrap().is_empty(), "nor records a release");
        assert_eq!(f.store.get_workflow(&f.org, &wf).await.unwrap().unwrap().status, WorkflowStatus::Running);

        // The release the install runs is written with the end (twice over
        // is the same), and forgotten with another.
        let releases = || async { f.store.install_releases(&f.org).await.unwrap() };
        for _ in 0..2 {
            f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Succeeded, Some(InstallState::Active), Some(Some(&rel))).await.unwrap();
            assert_eq!(releases().await.get(&inst.id), Some(&rel));
        }
        assert_eq!(state().await, InstallState::Active, "the state with it");
        f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Succeeded, None, Some(None)).await.unwrap();
        assert!(releases().await.is_empty());
        f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Succeeded, None, Some(Some(&rel))).await.unwrap();
        assert_eq!(releases().await.get(&inst.id), Some(&rel), "without a state");
    }
}

conformance! {
    async fn a_steps_success_is_written_with_the_next_steps_dispatch_and_without_it_when_the_workflow_stopped(f: Fixture) {
        use nuon_core::WorkflowId;
        use nuon_core::model::InstallState;
        use nuon_core::workflow::{StepStatus, WorkflowStatus};

        let inst = f.install("acme").await;
        let started = || async {
            let wf = WorkflowId::generate();
            f.store
                .create_workflow(&f.org, new_workflow(&wf, &inst.id, vec![step("plan db"), step("apply db")]))
                .await
                .unwrap();
            f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Running, Some(InstallState::Provisioning), None).await.unwrap();
            let job = f.new_job(&inst.runner_id, "terraform", 1);
            f.store.dispatch_step(&f.org, &wf, 0, job, None, None).await.unwrap();
            wf
        };
        let success = || StepUpdate {
            status: StepStatus::Succeeded,
            outputs_json: Some(r#"{"changes":1}"#.into()),
            install_outputs: Some((r#"{"url":"u"}"#.into(), InstallState::Active)),
            ..Default::default()
        };
        let rev = || async { f.store.install_summary_rev(&inst.id).await.unwrap() };
        let install = || async { f.store.find_install(&f.org, inst.id.as_str()).await.unwrap().unwrap() };

        // Carried: the first step succeeded, its outputs and the install's
        // with it, and the second step running its job, all at once.
        let wf = started().await;
        let before = rev().await;
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        let job_id = job.spec.job_id.clone();
        f.store.dispatch_step(&f.org, &wf, 1, job, None, Some((0, success()))).await.unwrap();
        let w = f.store.get_workflow(&f.org, &wf).await.unwrap().unwrap();
        assert_eq!(w.steps[0].status, StepStatus::Succeeded);
        assert_eq!(w.steps[0].outputs["changes"], 1);
        assert_eq!((w.steps[1].status, w.steps[1].job_id.as_ref()), (StepStatus::Running, Some(&job_id)));
        let after = install().await;
        assert_eq!((after.outputs_json.as_deref(), after.state), (Some(r#"{"url":"u"}"#), InstallState::Active));
        assert!(rev().await > before, "the summary is marked stale");

        // The workflow stopped meanwhile: the success is written all the
        // same, the next step is not dispatched and nothing is queued.
        let wf = started().await;
        f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Cancelling, None, None).await.unwrap();
        // The jobs queued so far are taken first, so that the claim below
        // sees only what the refused dispatch might have queued.
        let drained = f.store.claim(&inst.runner_id, &["terraform".into()], 8, 60_000).await.unwrap().jobs.len();
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        let refused = f.store.dispatch_step(&f.org, &wf, 1, job, None, Some((0, success()))).await;
        assert!(matches!(&refused, Err(StoreError::Invalid(m)) if m.contains("not running")), "{refused:?}");
        let w = f.store.get_workflow(&f.org, &wf).await.unwrap().unwrap();
        assert_eq!(w.steps[0].status, StepStatus::Succeeded, "the ended step's success is kept");
        assert_eq!((w.steps[1].status, w.steps[1].job_id.as_ref()), (StepStatus::Pending, None));
        let now = f.store.claim(&inst.runner_id, &["terraform".into()], 8, 60_000).await.unwrap().jobs.len();
        assert_eq!(now, 0, "nothing more queued (taken before: {drained})");

        // Another org's carry changes nothing of this one's.
        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        let wf = started().await;
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        let refused = f.store.dispatch_step(&other, &wf, 1, job, None, Some((0, success()))).await;
        assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
        let w = f.store.get_workflow(&f.org, &wf).await.unwrap().unwrap();
        assert_eq!((w.steps[0].status, w.steps[1].status), (StepStatus::Running, StepStatus::Pending));
    }
}
