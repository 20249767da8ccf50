//! Terraform state behind the `http` backend: versions, locks, state tokens.

use super::*;

fn lock(id: &str, job: Option<&JobId>) -> StateLock {
    StateLock {
        id: id.into(),
        info: format!("{{\"ID\":\"{id}\"}}"),
        created_at_ms: now_ms(),
        job_id: job.cloned(),
    }
}

conformance! {
    async fn state_versions_and_locks_follow_terraforms_http_backend(f: Fixture) {
        let inst = f.install("acme").await;
        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        let s = &*f.store;
        assert_eq!(s.get_state(&inst.id, "db").await.unwrap(), None);
        assert_eq!(s.put_state(&inst.id, "db", None, "v1".into()).await.unwrap(), Ok(1));
        assert_eq!(s.put_state(&inst.id, "db", None, "v2".into()).await.unwrap(), Ok(2));
        assert_eq!(s.get_state(&inst.id, "db").await.unwrap(), Some((2, "v2".into())));

        // A lock: taken once; others are told who holds it.
        s.lock_state(&inst.id, "db", lock("L1", None)).await.unwrap().unwrap();
        let held = s.lock_state(&inst.id, "db", lock("L2", None)).await.unwrap().unwrap_err();
        assert_eq!(held.id, "L1");
        // Writes need the lock's id while it is held.
        assert_eq!(s.put_state(&inst.id, "db", None, "x".into()).await.unwrap().unwrap_err().id, "L1");
        assert_eq!(s.put_state(&inst.id, "db", Some("L2"), "x".into()).await.unwrap().unwrap_err().id, "L1");
        assert_eq!(s.put_state(&inst.id, "db", Some("L1"), "v3".into()).await.unwrap(), Ok(3));
        assert_eq!(s.unlock_state(&inst.id, "db", "L2").await.unwrap().unwrap_err().id, "L1");
        s.unlock_state(&inst.id, "db", "L1").await.unwrap().unwrap();
        s.lock_state(&inst.id, "db", lock("L3", None)).await.unwrap().unwrap();

        // The operator's view, scoped by org.
        s.lock_state(&inst.id, "app", lock("L4", None)).await.unwrap().unwrap();
        let states = s.list_states(&f.org, &inst.id).await.unwrap();
        let view: Vec<_> = states
            .iter()
            .map(|c| (c.component.as_str(), c.latest, c.versions, c.lock.as_ref().map(|l| l.id.as_str())))
            .collect();
        assert_eq!(view, [("app", None, 0, Some("L4")), ("db", Some(3), 3, Some("L3"))]);
        assert!(states[1].updated_at_ms.is_some());
        assert!(s.list_states(&other, &inst.id).await.unwrap().is_empty());
        assert_eq!(s.force_unlock_state(&other, &inst.id, "db").await.unwrap(), None);
        assert_eq!(s.force_unlock_state(&f.org, &inst.id, "db").await.unwrap().unwrap().id, "L3");
        assert_eq!(s.force_unlock_state(&f.org, &inst.id, "db").await.unwrap(), None);
        assert!(s.get_state(&inst.id, "db").await.unwrap().is_some());
    }

    async fn a_state_token_lasts_while_its_job_runs_and_its_locks_go_with_it(f: Fixture) {
        use nuon_core::WorkflowId;
        use nuon_core::workflow::{PlannedStep, StepKind, WorkflowKind};

        let inst = f.install("acme").await;
        assert_eq!(
            f.store.install_of_runner(&inst.runner_id).await.unwrap(),
            Some((f.org.clone(), inst.id.clone()))
        );
        assert_eq!(f.store.install_of_runner(&f.runner).await.unwrap(), None);
        let wf = WorkflowId::generate();
        f.store
            .create_workflow(
                &f.org,
                NewWorkflow {
                    id: wf.clone(),
                    install_id: inst.id.clone(),
                    kind: WorkflowKind::Provision,
                    config_version: 1,
                    component: None,
                    steps: ["plan db", "apply db"]
                        .map(|name| PlannedStep {
                            name: name.into(),
                            kind: StepKind::Plan,
                            target: Some("db".into()),
                            needs_approval: false,
                            skipped: None,
                        })
                        .into(),
                    inputs: Default::default(),
                    trigger: None,
                    fire: None,
                    release: None,
                    rollout: None,
                },
            )
            .await
            .unwrap();
        f.store.set_workflow_status(&f.org, &wf, nuon_core::workflow::WorkflowStatus::Running, None, None, None).await.unwrap();
        let job = f.new_job(&inst.runner_id, "terraform", 1);
        let job_id = job.spec.job_id.clone();
        let token = StateToken {
            hash: "stt-hash".into(),
            install_id: inst.id.clone(),
            component: "db".into(),
        };
        let done = StepUpdate { status: nuon_core::workflow::StepStatus::Succeeded, ..Default::default() };
        f.store.update_step(&f.org, &wf, 0, done).await.unwrap();
        f.store.dispatch_step(&f.org, &wf, 1, job, Some(token), None).await.unwrap();
        // The engine's one read of a workflow to move: the workflow as
        // read alone, its install, their runner (read on the first step's
        // row), its running step's job (on the second's) without its
        // payload.
        let moving = super::workflow_to_move(&*f.store, &f.org, &wf).await.unwrap().unwrap();
        assert_eq!(moving.workflow, f.store.get_workflow(&f.org, &wf).await.unwrap().unwrap());
        assert_eq!(moving.install, f.store.find_install(&f.org, inst.id.as_str()).await.unwrap());
        assert_eq!(moving.runner, f.store.find_runner(&f.org, inst.runner_id.as_str()).await.unwrap());
        let mut shown = f.store.get_job(&f.org, &job_id).await.unwrap().unwrap();
        assert!(!shown.payload.is_null(), "the job as shown has its payload");
        shown.payload = serde_json::Value::Null;
        assert_eq!(moving.jobs, vec![shown]);
        assert_eq!(moving.runner.as_ref().map(|r| &r.id), Some(&inst.runner_id));
        assert_eq!(super::workflow_to_move(&*f.store, &OrgId::generate(), &wf).await.unwrap(), None);
        // Many in one read: each there of the org asked, whole, and
        // nothing of another org's or of one that is not there.
        let queued = WorkflowId::generate();
        let mut second = NewWorkflow {
            id: queued.clone(),
            install_id: inst.id.clone(),
            kind: WorkflowKind::Provision,
            config_version: 1,
            component: None,
            steps: Vec::new(),
            inputs: Default::default(),
            trigger: None,
            fire: None,
            release: None,
            rollout: None,
        };
        second.steps = ["plan db", "apply db", "plan app"]
            .map(|name| PlannedStep {
                name: name.into(),
                kind: StepKind::Plan,
                target: Some("db".into()),
                needs_approval: false,
                skipped: None,
            })
            .into();
        f.store.create_workflow(&f.org, second).await.unwrap();
        let mut many = f
            .store
            .workflows_to_move(&[
                (f.org.clone(), queued.clone()),
                (OrgId::generate(), queued.clone()),
                (f.org.clone(), WorkflowId::generate()),
                (f.org.clone(), wf.clone()),
            ])
            .await
            .unwrap();
        many.sort_by(|a, b| a.workflow.id.as_str().cmp(b.workflow.id.as_str()));
        let mut each = vec![moving.clone(), super::workflow_to_move(&*f.store, &f.org, &queued).await.unwrap().unwrap()];
        each.sort_by(|a, b| a.workflow.id.as_str().cmp(b.workflow.id.as_str()));
        assert_eq!(many, each);
        let read = each.iter().find(|m| m.workflow.id == queued).unwrap();
        assert_eq!(read.workflow, f.store.get_workflow(&f.org, &queued).await.unwrap().unwrap());
        assert_eq!(read.workflow.steps.len(), 3);
        assert_eq!(read.install, moving.install);
        assert!(read.jobs.is_empty(), "none of its steps runs");
        assert_eq!(f.store.workflows_to_move(&[]).await.unwrap(), vec![]);
        // A job's end finds the workflow whose step ran it; a job of no
        // step finds none.
        let lone = f.queue(1).await;
        assert_eq!(
            f.store.workflows_of_jobs(&[lone, job_id.clone()]).await.unwrap(),
            vec![(job_id.clone(), f.org.clone(), wf.clone())]
        );
        assert_eq!(f.store.workflows_of_jobs(&[]).await.unwrap(), vec![]);
        // What the leader's pass checks of a workflow it left waiting on
        // its job: the workflow's status, and whether the job is live
        // (queued here; running below; not once it ended).
        let status = |v: Vec<super::ActiveWorkflow>| v.into_iter().find(|a| a.id == wf).map(|a| a.status);
        assert_eq!(status(f.store.active_workflows().await.unwrap()), Some(nuon_core::workflow::WorkflowStatus::Running));
        let gone = JobId::generate();
        assert_eq!(f.store.live_jobs(&[gone.clone(), job_id.clone()]).await.unwrap(), vec![job_id.clone()]);
        assert_eq!(f.store.live_jobs(&[]).await.unwrap(), vec![]);
        let who = f.store.authenticate_state("stt-hash").await.unwrap().unwrap();
        assert_eq!(
            who,
            StatePrincipal {
                org_id: f.org.clone(),
                install_id: inst.id.clone(),
                component: "db".into(),
                job_id: job_id.clone(),
            }
        );
        assert_eq!(f.store.authenticate_state("other").await.unwrap(), None);
        f.store
            .lock_state(&inst.id, "db", lock("L1", Some(&job_id)))
            .await
            .unwrap()
            .unwrap();
        f.store.lock_state(&inst.id, "app", lock("L2", None)).await.unwrap().unwrap();

        // The job ends: its token stops working, and its locks are released.
        let claimed = f.store.claim(&inst.runner_id, &["terraform".into()], 1, 60_000).await.unwrap();
        assert_eq!(claimed.jobs.len(), 1);
        assert_eq!(f.store.live_jobs(std::slice::from_ref(&job_id)).await.unwrap(), vec![job_id.clone()]);
        f.store
            .complete(&inst.runner_id, &job_id, Completion { attempt: 1, log_lines: 0, result: ok_result(), logs: None })
            .await
            .unwrap();
        assert_eq!(f.store.live_jobs(&[job_id.clone(), gone]).await.unwrap(), vec![]);
        assert_eq!(f.store.authenticate_state("stt-hash").await.unwrap(), None);
        let released = f.store.release_locks_of_job(&job_id).await.unwrap();
        assert_eq!(released.len(), 1);
        assert_eq!((released[0].0.as_str(), released[0].1.id.as_str()), ("db", "L1"));
        assert_eq!(released[0].1.job_id.as_ref(), Some(&job_id));
        let left: Vec<_> = f
            .store
            .list_states(&f.org, &inst.id)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|c| c.lock.map(|l| l.id))
            .collect();
        assert_eq!(left, ["L2"]);
        assert!(f.store.release_locks_of_job(&job_id).await.unwrap().is_empty());
    }
}
