//! Invitations: a link spent once however many browsers race on it, given
//! back when the install is refused, revoked and expired links refused,
//! scoped to their org.

use super::*;
use nuon_core::model::InvitationState;
use nuon_core::{AppId, InstallId, InvitationId};

fn invitation(org: &OrgId, expires_at_ms: i64) -> StoredInvitation {
    StoredInvitation {
        id: InvitationId::generate(),
        org_id: org.clone(),
        app_id: AppId::generate(),
        install_id: None,
        name: Some("acme".into()),
        email: Some("ops@customer.test".into()),
        created_by: "admin".into(),
        created_at_ms: now_ms(),
        expires_at_ms,
        used_at_ms: None,
        revoked_at_ms: None,
        browser_hash: None,
        customer_inputs: Vec::new(),
    }
}

conformance! {
    async fn an_invitation_is_spent_once_given_back_revoked_and_scoped(f: Fixture) {
        let store = &f.store;
        let later = now_ms() + 3_600_000;
        let inv = invitation(&f.org, later);
        store.create_invitation(&inv, "hash-1").await.unwrap();
        let found = store.invitation_by_token("hash-1").await.unwrap().unwrap();
        assert_eq!(found, inv);
        assert_eq!(found.state(now_ms()), InvitationState::Pending);
        assert!(store.invitation_by_token("hash-2").await.unwrap().is_none());

        // Two browsers at once: one spends it.
        let (a, b) = tokio::join!(
            store.spend_invitation("hash-1", now_ms(), "browser-a"),
            store.spend_invitation("hash-1", now_ms(), "browser-b"),
        );
        let spent: Vec<_> = [a.unwrap(), b.unwrap()]
            .into_iter()
            .filter(|s| matches!(s, Spend::Spent(_)))
            .collect();
        assert_eq!(spent.len(), 1, "{spent:?}");
        let again = store.spend_invitation("hash-1", now_ms(), "browser-c").await.unwrap();
        let Spend::Refused(used) = again else { panic!("{again:?}") };
        assert_eq!(used.state(now_ms()), InvitationState::Used);
        assert!(matches!(
            store.spend_invitation("nope", now_ms(), "x").await.unwrap(),
            Spend::Unknown
        ));

        // The install was refused: the link is given back.
        store.unspend_invitation(&inv.id).await.unwrap();
        let Spend::Spent(mine) = store.spend_invitation("hash-1", now_ms(), "browser-d").await.unwrap() else {
            panic!("spent again after it was given back")
        };
        assert_eq!(mine.browser_hash.as_deref(), Some("browser-d"));
        // The install made: it stays spent, with what the customer set.
        let install = InstallId::generate();
        store
            .set_invitation_install(&inv.id, &install, &["team".into(), "size".into()])
            .await
            .unwrap();
        store.unspend_invitation(&inv.id).await.unwrap();
        let after = store.get_invitation(&f.org, &inv.id).await.unwrap().unwrap();
        assert_eq!(after.state(now_ms()), InvitationState::Used);
        assert_eq!(after.install_id.as_ref(), Some(&install));
        assert_eq!(
            store.customer_inputs(&f.org, &install).await.unwrap(),
            ["size", "team"]
        );
        assert!(store.customer_inputs(&f.org, &InstallId::generate()).await.unwrap().is_empty());

        // Revoked and expired links are refused; newest first; another org sees none.
        let other = invitation(&f.org, later);
        store.create_invitation(&other, "hash-3").await.unwrap();
        let revoked = store.revoke_invitation(&f.org, &other.id, now_ms()).await.unwrap().unwrap();
        assert_eq!(revoked.state(now_ms()), InvitationState::Revoked);
        let again = store.revoke_invitation(&f.org, &other.id, now_ms() + 5).await.unwrap().unwrap();
        assert_eq!(again.revoked_at_ms, revoked.revoked_at_ms, "revoked once");
        assert!(matches!(
            store.spend_invitation("hash-3", now_ms(), "x").await.unwrap(),
            Spend::Refused(_)
        ));
        let old = invitation(&f.org, now_ms() - 1);
        store.create_invitation(&old, "hash-4").await.unwrap();
        let Spend::Refused(expired) = store.spend_invitation("hash-4", now_ms(), "x").await.unwrap() else {
            panic!("an expired link is refused")
        };
        assert_eq!(expired.state(now_ms()), InvitationState::Expired);
        let listed = store.list_invitations(&f.org).await.unwrap();
        assert_eq!(
            listed.iter().map(|i| &i.id).collect::<Vec<_>>(),
            [&old.id, &other.id, &inv.id]
        );
        let stranger = OrgId::generate();
        assert!(store.list_invitations(&stranger).await.unwrap().is_empty());
        assert!(store.get_invitation(&stranger, &inv.id).await.unwrap().is_none());
        assert!(store.revoke_invitation(&stranger, &inv.id, now_ms()).await.unwrap().is_none());
        assert!(store.customer_inputs(&stranger, &install).await.unwrap().is_empty());
    }

    async fn a_stack_template_link_works_once_until_it_expires_and_the_next_replaces_it(f: Fixture) {
        let store = &f.store;
        let inv = invitation(&f.org, now_ms() + 3_600_000);
        store.create_invitation(&inv, "link").await.unwrap();
        // Not spent yet: no install, no template link.
        store.set_invitation_template(&inv.id, "t-0", now_ms() + 60_000).await.unwrap();
        assert!(store.spend_invitation_template("t-0", now_ms()).await.unwrap().is_none());
        let Spend::Spent(_) = store.spend_invitation("link", now_ms(), "browser").await.unwrap() else {
            panic!("spent")
        };
        store.set_invitation_install(&inv.id, &InstallId::generate(), &[]).await.unwrap();

        // Fetched once; two fetches racing: one gets it.
        store.set_invitation_template(&inv.id, "t-1", now_ms() + 60_000).await.unwrap();
        let (a, b) = tokio::join!(
            store.spend_invitation_template("t-1", now_ms()),
            store.spend_invitation_template("t-1", now_ms()),
        );
        let got: Vec<_> = [a.unwrap(), b.unwrap()].into_iter().flatten().collect();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].id, inv.id);
        assert!(store.spend_invitation_template("t-1", now_ms()).await.unwrap().is_none());

        // A new link replaces the one before; an expired one is refused.
        store.set_invitation_template(&inv.id, "t-2", now_ms() + 60_000).await.unwrap();
        store.set_invitation_template(&inv.id, "t-3", now_ms() + 60_000).await.unwrap();
        assert!(store.spend_invitation_template("t-2", now_ms()).await.unwrap().is_none());
        store.set_invitation_template(&inv.id, "t-4", now_ms() - 1).await.unwrap();
        assert!(store.spend_invitation_template("t-4", now_ms()).await.unwrap().is_none());

        // Revoked: its link stops working.
        store.set_invitation_template(&inv.id, "t-5", now_ms() + 60_000).await.unwrap();
        store.revoke_invitation(&f.org, &inv.id, now_ms()).await.unwrap();
        assert!(store.spend_invitation_template("t-5", now_ms()).await.unwrap().is_none());
    }
}
