//! A step's dispatch and changes: only while its workflow runs, and each
//! marking its install's summary stale.

use super::*;
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
        let bumped = f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Running, Some(InstallState::Provisioning), None, None).await.unwrap();
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
        let bumped = f.store.set_workflow_status(&other, &wf, WorkflowStatus::Failed, Some(InstallState::Failed), Some(Some(&rel)), None).await.unwrap();
        assert_eq!(bumped, None, "another org's workflow answers no revision");
        assert_eq!(state().await, InstallState::Active, "nor changes the install's state");
        assert!(f.store.install_releases(&other).await.unwrap().is_empty(), "nor records a release");
        assert_eq!(f.store.get_workflow(&f.org, &wf).await.unwrap().unwrap().status, WorkflowStatus::Running);

        // The release the install runs is written with the end (twice over
        // is the same), and forgotten with another.
        let releases = || async { f.store.install_releases(&f.org).await.unwrap() };
        for _ in 0..2 {
            f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Succeeded, Some(InstallState::Active), Some(Some(&rel)), None).await.unwrap();
            assert_eq!(releases().await.get(&inst.id), Some(&rel));
        }
        assert_eq!(state().await, InstallState::Active, "the state with it");
        f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Succeeded, None, Some(None), None).await.unwrap();
        assert!(releases().await.is_empty());
        f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Succeeded, None, Some(Some(&rel)), None).await.unwrap();
        assert_eq!(releases().await.get(&inst.id), Some(&rel), "without a state");
    }
}

conformance! {
    async fn a_steps_success_is_written_with_the_next_steps_dispatch_and_without_it_when_the_workflow_stopped(f: Fixture) {
        use nuon_core::model::InstallState;
        use nuon_core::workflow::{StepStatus, WorkflowStatus};

        let inst = f.install("acme").await;
        let started = || async {
            let wf = pending(&f, &inst.id).await;
            f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Running, Some(InstallState::Provisioning), None, None).await.unwrap();
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
        f.store.dispatch_step(&f.org, &wf, 1, job, None, Some(Carried::Ended(0, success()))).await.unwrap();
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
        f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Cancelling, None, None, None).await.unwrap();
        // The jobs queued so far are taken first, so that the claim below
        // sees only what the refused dispatch might have queued.
        let drained = f.store.claim(&inst.runner_id, &["terraform".into()], 8, 60_000).await.unwrap().jobs.len();
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        let refused = f.store.dispatch_step(&f.org, &wf, 1, job, None, Some(Carried::Ended(0, success()))).await;
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
        let refused = f.store.dispatch_step(&other, &wf, 1, job, None, Some(Carried::Ended(0, success()))).await;
        assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
        let w = f.store.get_workflow(&f.org, &wf).await.unwrap().unwrap();
        assert_eq!((w.steps[0].status, w.steps[1].status), (StepStatus::Running, StepStatus::Pending));
    }
}

conformance! {
    async fn a_workflows_start_is_written_with_its_first_dispatch_and_a_steps_update_with_its_end(f: Fixture) {
        use nuon_core::WorkflowId;
        use nuon_core::model::InstallState;
        use nuon_core::workflow::{StepStatus, WorkflowStatus};

        let inst = f.install("acme").await;
        let pending = || pending(&f, &inst.id);
        let rev = || async { f.store.install_summary_rev(&inst.id).await.unwrap() };
        let install = || async { f.store.find_install(&f.org, inst.id.as_str()).await.unwrap().unwrap() };
        let (store, org) = (&f.store, &f.org);
        let workflow = |wf: WorkflowId| async move { store.get_workflow(org, &wf).await.unwrap().unwrap() };
        let queued = || async { f.store.claim(&inst.runner_id, &["terraform".into()], 8, 60_000).await.unwrap().jobs.len() };

        // Carried start: the workflow running, its install in the state it
        // gave, its first step running its job, all at once.
        let wf = pending().await;
        let before = rev().await;
        assert_ne!(install().await.state, InstallState::Provisioning);
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        let job_id = job.spec.job_id.clone();
        f.store.dispatch_step(&f.org, &wf, 0, job, None, Some(Carried::Started(InstallState::Provisioning))).await.unwrap();
        let w = workflow(wf.clone()).await;
        assert_eq!(w.status, WorkflowStatus::Running);
        assert_eq!((w.steps[0].status, w.steps[0].job_id.as_ref()), (StepStatus::Running, Some(&job_id)));
        assert_eq!(install().await.state, InstallState::Provisioning);
        assert!(rev().await > before, "the summary is marked stale");
        assert_eq!(queued().await, 1);

        // The end carries its last step's update: the step's outputs, the
        // install's outputs, and the install's state the end gives (not
        // the step's), in one change.
        let success = StepUpdate {
            status: StepStatus::Succeeded,
            outputs_json: Some(r#"{"changes":0}"#.into()),
            install_outputs: Some((r#"{"url":"u"}"#.into(), InstallState::Failed)),
            ..Default::default()
        };
        let before = rev().await;
        let bumped = f.store
            .set_workflow_status(&f.org, &wf, WorkflowStatus::Succeeded, Some(InstallState::Active), None, Some((0, success.clone())))
            .await
            .unwrap();
        let w = workflow(wf.clone()).await;
        assert_eq!((w.status, w.steps[0].status), (WorkflowStatus::Succeeded, StepStatus::Succeeded));
        assert_eq!(w.steps[0].outputs["changes"], 0);
        let after = install().await;
        assert_eq!((after.outputs_json.as_deref(), after.state), (Some(r#"{"url":"u"}"#), InstallState::Active));
        assert_eq!(bumped, Some(rev().await));
        assert!(rev().await > before);
        // Without a state of its own, the step's goes with its outputs.
        let wf2 = pending().await;
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        f.store.dispatch_step(&f.org, &wf2, 0, job, None, Some(Carried::Started(InstallState::Provisioning))).await.unwrap();
        let with_state = StepUpdate { install_outputs: Some((r#"{"url":"v"}"#.into(), InstallState::Active)), ..success.clone() };
        f.store.set_workflow_status(&f.org, &wf2, WorkflowStatus::Succeeded, None, None, Some((0, with_state))).await.unwrap();
        let after = install().await;
        assert_eq!((after.outputs_json.as_deref(), after.state), (Some(r#"{"url":"v"}"#), InstallState::Active));
        assert_eq!(workflow(wf2).await.steps[0].status, StepStatus::Succeeded);

        // A start carried to a workflow no longer pending (cancelled
        // meanwhile) writes nothing and queues nothing.
        let wf = pending().await;
        f.store.set_workflow_status(&f.org, &wf, WorkflowStatus::Cancelled, Some(InstallState::Active), None, None).await.unwrap();
        let drained = queued().await;
        let before = rev().await;
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        let refused = f.store.dispatch_step(&f.org, &wf, 0, job, None, Some(Carried::Started(InstallState::Provisioning))).await;
        assert!(matches!(&refused, Err(StoreError::Invalid(m)) if m.contains("not running")), "{refused:?}");
        let w = workflow(wf.clone()).await;
        assert_eq!((w.status, w.steps[0].status, w.steps[0].job_id.as_ref()), (WorkflowStatus::Cancelled, StepStatus::Pending, None));
        assert_eq!(install().await.state, InstallState::Active, "the install's state is not written");
        assert_eq!(rev().await, before);
        assert_eq!(queued().await, 0, "nothing queued (taken before: {drained})");
        // Nor does another org's.
        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        let wf = pending().await;
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        let refused = f.store.dispatch_step(&other, &wf, 0, job, None, Some(Carried::Started(InstallState::Provisioning))).await;
        assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
        assert_eq!(workflow(wf).await.status, WorkflowStatus::Pending);
    }
}
