//! Many installs at once: their rows and their workflows in one read,
//! their summaries in one write, each only at its revision.

use super::*;

conformance! {
    async fn many_installs_and_their_workflows_are_read_at_once_and_their_summaries_saved_at_once(f: Fixture) {
        use nuon_core::WorkflowId;

        let installs = [f.install("a").await, f.install("b").await, f.install("c").await];
        // Two workflows of `a`, one of `b`, none of `c`.
        let mut made = Vec::new();
        for (inst, n) in [(&installs[0], 2), (&installs[1], 1)] {
            for _ in 0..n {
                made.push((inst.id.clone(), pending(&f, &inst.id).await));
                // Created at distinct times: newest first is an order.
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        }
        let ids: Vec<_> = installs.iter().map(|i| i.id.clone()).collect();
        let store = &f.store;
        let read = f.store.installs_workflows(&f.org, &ids).await.unwrap();
        let of = |i: usize| -> Vec<WorkflowId> {
            read.iter().filter(|w| w.install_id == ids[i]).map(|w| w.id.clone()).collect()
        };
        assert_eq!(of(0), vec![made[1].1.clone(), made[0].1.clone()], "each install's newest first");
        assert_eq!(of(1), vec![made[2].1.clone()]);
        assert!(of(2).is_empty());
        assert!(read.iter().all(|w| w.steps.len() == 2), "each with its steps");
        // The same as one install's list, install by install.
        for id in &ids {
            let one: Vec<_> = read.iter().filter(|w| &w.install_id == id).cloned().collect();
            assert_eq!(f.store.list_workflows(&f.org, id).await.unwrap(), one);
        }
        // Another org reads none of them.
        let other = f.store.create_org(&OrgId::generate(), "other", b"sealed key of other").await.unwrap().org_id;
        assert!(f.store.installs_workflows(&other, &ids).await.unwrap().is_empty());
        assert!(f.store.installs_workflows(&f.org, &[]).await.unwrap().is_empty());
        // The installs themselves, at once: each as one read finds it, none
        // of another org, none that is not there.
        let gone = nuon_core::InstallId::generate();
        let mut found = f.store.find_installs(&f.org, &[ids[2].clone(), gone, ids[0].clone()]).await.unwrap();
        found.sort_by(|a, b| a.name.cmp(&b.name));
        let org = &f.org;
        let one = |i: usize| { let id = ids[i].clone(); async move { store.find_install(org, id.as_str()).await.unwrap().unwrap() } };
        assert_eq!(found, vec![one(0).await, one(2).await]);
        assert!(f.store.find_installs(&other, &ids).await.unwrap().is_empty());
        assert!(f.store.find_installs(&f.org, &[]).await.unwrap().is_empty());

        // Saved at once, each at its revision: one made before a change
        // since is not saved, the others are.
        let text = |n: usize| crate::store::SummaryText { brief: format!("{{\"n\":{n}}}"), full: format!("{{\"at\":{n}}}") };
        let rev = |i: usize| { let id = ids[i].clone(); async move { store.install_summary_rev(&id).await.unwrap() } };
        let stale_b = rev(1).await;
        f.store.update_step(&f.org, &made[2].1, 0, super::StepUpdate { status: nuon_core::workflow::StepStatus::Skipped, ..Default::default() }).await.unwrap();
        assert!(rev(1).await > stale_b);
        let saved = vec![(ids[0].clone(), rev(0).await, text(0)), (ids[1].clone(), stale_b, text(1)), (ids[2].clone(), rev(2).await, text(2))];
        f.store.save_install_summaries(&saved).await.unwrap();
        let cached = f.store.fleet_changes(&f.org, 0).await.unwrap().summaries;
        let fresh = |i: usize| cached.iter().find(|c| c.install_id == ids[i]).and_then(|c| c.fresh().cloned());
        assert_eq!(fresh(0), Some(text(0)));
        assert_eq!(fresh(1), None, "made before a change since: not saved");
        assert_eq!(fresh(2), Some(text(2)));
        f.store.save_install_summaries(&[]).await.unwrap();
    }
}
