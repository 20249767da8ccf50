//! People and API tokens: a person is invited by email address with a
//! role (owner, admin, deployer, viewer); an API token is a person's or a
//! service account's. Changes are admins' (an owner is made, changed and
//! removed by an owner), recorded in the audit trail; reads are any
//! token's.
//!
//! A person's tokens never do more than their role allows now: the role is
//! read with the token on every request, so a demotion or a removal holds
//! at once.

use nuon_core::TokenId;
use nuon_core::endpoint::{
    CreateToken as CreateTokenOp, InviteUser as InviteUserOp, RemoveUser, RevokeToken,
    SetUserRole as SetUserRoleOp,
};
use nuon_core::token::issue_api_token;
use nuon_core::wire::{
    CreateToken, ErrorCode, InviteUser, OrgInfo, Role, SetUserRole, TokenCreated, TokenInfo,
    TokenList, UserInfo, UserList,
};

use super::{Caller, Services, require_admin, valid_name};
use crate::error::Error;
use crate::store::NewApiToken;

impl Services<'_> {
    /// `GET /v1/users`: the org's people.
    pub(crate) async fn list_users(&self, caller: &Caller) -> Result<UserList, Error> {
        let users = self.store.list_users(&caller.principal.org_id).await?;
        Ok(UserList { users })
    }

    /// `POST /v1/users`: invites a person by email address with a role.
    /// Admins only, and an owner is invited by an owner (or by an admin
    /// while the org has none); recorded in the audit trail, refusals
    /// included.
    pub(crate) async fn invite_user(
        &self,
        caller: &Caller,
        req: InviteUser,
    ) -> Result<UserInfo, Error> {
        let result = self.invite_person(caller, req).await;
        self.audited_at::<InviteUserOp, _>(caller, &[], result)
            .await
    }

    async fn invite_person(&self, caller: &Caller, req: InviteUser) -> Result<UserInfo, Error> {
        let email = email_of(&req.email)?;
        self.require_owner_for(caller, req.role == Role::Owner)
            .await?;
        let p = &caller.principal;
        let user = self
            .store
            .invite_user(&p.org_id, &email, req.role, &p.actor())
            .await?;
        tracing::info!(user = %user.id, role = req.role.as_str(), "person invited");
        Ok(user)
    }

    /// `PATCH /v1/users/{id}`: changes the role of the person `key` (an
    /// id or an email address); their tokens follow at once. Admins only,
    /// and a change that makes or unmakes an owner is an owner's;
    /// recorded in the audit trail, refusals included.
    pub(crate) async fn set_user_role(
        &self,
        caller: &Caller,
        key: &str,
        req: SetUserRole,
    ) -> Result<UserInfo, Error> {
        let result = self.change_person_role(caller, key, req).await;
        self.audited_at::<SetUserRoleOp, _>(caller, &[key], result)
            .await
    }

    async fn change_person_role(
        &self,
        caller: &Caller,
        key: &str,
        req: SetUserRole,
    ) -> Result<UserInfo, Error> {
        require_admin(&caller.principal)?;
        let user = self.user_of(caller, key).await?;
        self.require_owner_for(caller, user.role == Role::Owner || req.role == Role::Owner)
            .await?;
        self.store
            .set_user_role(&caller.principal.org_id, &user.id, req.role)
            .await?
            .ok_or_else(|| Error::not_found(format!("no person {key:?} in this org")))
    }

    /// `DELETE /v1/users/{id}`: removes the person `key` (an id or an
    /// email address) and revokes every token of theirs. Admins only, an
    /// owner removed by an owner; recorded in the audit trail, refusals
    /// included.
    pub(crate) async fn remove_user(&self, caller: &Caller, key: &str) -> Result<UserInfo, Error> {
        let result = self.remove_person(caller, key).await;
        self.audited_at::<RemoveUser, _>(caller, &[key], result)
            .await
    }

    async fn remove_person(&self, caller: &Caller, key: &str) -> Result<UserInfo, Error> {
        require_admin(&caller.principal)?;
        let user = self.user_of(caller, key).await?;
        self.require_owner_for(caller, user.role == Role::Owner)
            .await?;
        self.store
            .remove_user(&caller.principal.org_id, &user.id)
            .await?
            .ok_or_else(|| Error::not_found(format!("no person {key:?} in this org")))
    }

    /// Changes that make, unmake or touch an owner are an owner's; while
    /// the org has no owner, an admin may make the first.
    async fn require_owner_for(&self, caller: &Caller, touches_owner: bool) -> Result<(), Error> {
        let p = &caller.principal;
        require_admin(p)?;
        if !touches_owner || p.user.as_ref().is_some_and(|u| u.role == Role::Owner) {
            return Ok(());
        }
        let users = self.store.list_users(&p.org_id).await?;
        if users.iter().any(|u| u.role == Role::Owner) {
            return Err(Error::refused(
                ErrorCode::Forbidden,
                "only an owner makes, changes or removes an owner",
            ));
        }
        Ok(())
    }

    /// The caller's org's person `key`: an email address in any case, or
    /// an id as it is (ids are upper case); a 404 that says where people
    /// are listed.
    async fn user_of(&self, caller: &Caller, key: &str) -> Result<UserInfo, Error> {
        let key_as_stored = if key.contains('@') {
            key.to_lowercase()
        } else {
            key.to_owned()
        };
        self.store
            .find_user(&caller.principal.org_id, &key_as_stored)
            .await?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "no person {key:?} in this org (see `nuon users list`)"
                ))
            })
    }

    /// `GET /v1/org`: the caller's org.
    pub(crate) async fn get_org(&self, caller: &Caller) -> Result<OrgInfo, Error> {
        self.store
            .get_org(&caller.principal.org_id)
            .await?
            .ok_or_else(|| Error::not_found("the token's org no longer exists"))
    }

    /// `POST /v1/tokens`: a new API token and its secret (shown only in
    /// this answer). Made with a person's token, it is theirs and held to
    /// their role, unless a service account's is asked for. Admins only;
    /// recorded in the audit trail, refusals included.
    pub(crate) async fn create_token(
        &self,
        caller: &Caller,
        req: CreateToken,
    ) -> Result<TokenCreated, Error> {
        let result = self.make_api_token(caller, req).await;
        self.audited_at::<CreateTokenOp, _>(caller, &[], result)
            .await
    }

    async fn make_api_token(
        &self,
        caller: &Caller,
        req: CreateToken,
    ) -> Result<TokenCreated, Error> {
        let p = &caller.principal;
        require_admin(p)?;
        if !valid_name(&req.name) {
            return Err(Error::bad_request(format!(
                "invalid token name {:?}: use 1 to 64 letters, digits, '-', '_' or '.'",
                req.name.chars().take(80).collect::<String>()
            )));
        }
        // A person's token makes a token of theirs, held to their role; a
        // service account's (or one asked for) belongs to no person.
        let user = match (&p.user, req.service_account) {
            (Some(u), false) => Some(u),
            _ => None,
        };
        let scope = match user {
            Some(u) => req.scope.at_most(u.role.scope()),
            None => req.scope,
        };
        let id = TokenId::generate();
        let issued = issue_api_token(&id);
        let new = NewApiToken {
            id: id.clone(),
            name: req.name.clone(),
            scope,
            token_hash: issued.hash.clone(),
            user_id: user.map(|u| u.id.clone()),
            expires_at_ms: None,
        };
        let token = self.store.create_api_token(&p.org_id, &new).await?;
        tracing::info!(token = %id, scope = scope.as_str(), "API token created");
        Ok(TokenCreated {
            token,
            secret: issued.secret,
        })
    }

    /// `GET /v1/tokens`: the org's API tokens, never their secrets.
    pub(crate) async fn list_tokens(&self, caller: &Caller) -> Result<TokenList, Error> {
        let tokens = self.store.list_api_tokens(&caller.principal.org_id).await?;
        Ok(TokenList { tokens })
    }

    /// The org's tokens' names by id: who a service account that acted
    /// is, as a page names it.
    pub(crate) async fn token_names(
        &self,
        caller: &Caller,
    ) -> Result<std::collections::BTreeMap<String, String>, Error> {
        let tokens = self.store.list_api_tokens(&caller.principal.org_id).await?;
        Ok(tokens
            .into_iter()
            .map(|t| (t.id.to_string(), t.name))
            .collect())
    }

    /// `POST /v1/tokens/{id}/revoke`: the token `raw` authenticates
    /// nothing after; a token does not revoke itself. Admins only;
    /// recorded in the audit trail, refusals included.
    pub(crate) async fn revoke_token(
        &self,
        caller: &Caller,
        raw: &str,
    ) -> Result<TokenInfo, Error> {
        let result = self.retire_token(caller, raw).await;
        self.audited_at::<RevokeToken, _>(caller, &[raw], result)
            .await
    }

    async fn retire_token(&self, caller: &Caller, raw: &str) -> Result<TokenInfo, Error> {
        let p = &caller.principal;
        require_admin(p)?;
        // A malformed id is simply not found.
        let id: TokenId = raw
            .parse()
            .map_err(|_| Error::not_found(format!("no token {raw:?}")))?;
        if id == p.token_id {
            return Err(Error::refused(
                ErrorCode::OwnToken,
                "a token cannot revoke itself: revoke it with another admin token",
            ));
        }
        let token = self
            .store
            .revoke_api_token(&p.org_id, &id)
            .await?
            .ok_or_else(|| Error::not_found(format!("no token {raw:?}")))?;
        tracing::info!(token = %id, "API token revoked");
        Ok(token)
    }
}

/// An email address, lower case, or a 400 that says what is wrong.
fn email_of(raw: &str) -> Result<String, Error> {
    let email = raw.trim().to_lowercase();
    let ok = email.len() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && !domain.is_empty() && !domain.contains('@')
        });
    if !ok {
        return Err(Error::bad_request(format!(
            "{:?} is not an email address (name@example.com)",
            raw.chars().take(80).collect::<String>()
        )));
    }
    Ok(email)
}
