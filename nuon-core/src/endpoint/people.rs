//! The operations served by `nuon-control/src/api/people.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `GET /v1/users`.
    ListUsers: Get routes::USERS, "listUsers",
        () => crate::wire::UserList, body = false,
        summary = "The org's people, with their roles and whether they have signed in.";
    /// `POST /v1/users`.
    InviteUser: Post routes::USERS, "inviteUser",
        crate::wire::InviteUser => crate::wire::UserInfo, status = 201, body = true,
        summary = "Invite a person by email address with a role (owner, admin, deployer, viewer); they sign in through the org's OpenID Connect provider. Admin only; an owner is made by an owner (or by an admin while the org has none).";
    /// `PATCH /v1/users/{id}`.
    SetUserRole: Patch routes::USER, "setUserRole",
        crate::wire::SetUserRole => crate::wire::UserInfo, body = true,
        summary = "Change a person's role (by id or email address); their tokens follow at once. The org's last owner stays one.";
    /// `DELETE /v1/users/{id}`.
    RemoveUser: Delete routes::USER, "removeUser",
        () => crate::wire::UserInfo, body = false,
        summary = "Remove a person from the org and revoke every token of theirs.";
    /// `GET /v1/auth/oidc/callback`.
    SignInCallback: Get routes::OIDC_CALLBACK, "signInCallback",
        () => crate::wire::SignedIn, body = false,
        summary = "Where the provider sends the browser back: the code is traded for an ID token, checked (signature, issuer, audience, expiry, this sign-in's state and nonce), and an invited person gets an API token of theirs that expires (shown only in this answer; an HTML page when the browser asks for one).";
}
