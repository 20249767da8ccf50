//! Builds on the org's build runner.

use super::*;

conformance! {
    async fn builds_are_jobs_of_the_build_runner_listed_per_app(f: Fixture) {
        use nuon_core::AppId;

        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        let builder = f.store.build_runner(&f.org).await.unwrap().unwrap();
        assert_ne!(Some(&builder), f.store.build_runner(&other).await.unwrap().as_ref());
        let app = f.store.create_app(&f.org, &AppId::generate(), "web").await.unwrap();
        let mut ids = Vec::new();
        for component in ["db", "api"] {
            let job = f.new_job(&builder, "build", 1);
            let b = f.store.enqueue_build(job, &app.id, 1, component).await.unwrap();
            assert_eq!((b.app_id.clone(), b.config_version, b.component.as_str()), (app.id.clone(), 1, component));
            assert_eq!(b.status, JobStatus::Queued);
            assert_eq!(b.artifact, None);
            ids.push(b.id);
        }
        let listed: Vec<_> = f.store.list_builds(&f.org, &app.id).await.unwrap().into_iter().map(|b| b.component).collect();
        assert_eq!(listed, ["api", "db"], "newest first");
        assert!(f.store.list_builds(&other, &app.id).await.unwrap().is_empty());
        assert!(f.store.get_build(&other, &ids[0]).await.unwrap().is_none());

        // A finished build names the artifact its job reported.
        let claimed = f.store.claim(&builder, &["build".into()], 1, 60_000).await.unwrap();
        let job = claimed.jobs[0].job_id.clone();
        let artifact = serde_json::json!({
            "repo": "web/db",
            "digest": format!("sha256:{}", "a".repeat(64)),
        });
        let mut result = ok_result();
        result.outputs = serde_json::json!({ "artifact": artifact });
        f.store
            .complete(&builder, &job, Completion { attempt: 1, log_lines: 0, result, logs: None })
            .await
            .unwrap();
        let b = f.store.get_build(&f.org, &job).await.unwrap().unwrap();
        assert_eq!(b.status, JobStatus::Succeeded);
        assert_eq!(b.artifact.unwrap().repo, "web/db");
    }
}
