//! The operations served by `nuon-control/src/api/orgs.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `GET /v1/org`.
    GetOrg: Get routes::ORG, "getOrg",
        () => crate::wire::OrgInfo, body = false,
        summary = "The token's org.";
    /// `POST /v1/tokens`.
    CreateToken: Post routes::TOKENS, "createToken",
        crate::wire::CreateToken => crate::wire::TokenCreated, status = 201, body = true,
        summary = "Create an API token; its secret is shown only in this answer.";
    /// `GET /v1/tokens`.
    ListTokens: Get routes::TOKENS, "listTokens",
        () => crate::wire::TokenList, body = false,
        summary = "The org's API tokens, never their secrets.";
    /// `POST /v1/tokens/{id}/revoke`.
    RevokeToken: Post routes::TOKEN_REVOKE, "revokeToken",
        () => crate::wire::TokenInfo, body = false,
        summary = "Revoke an API token.";
    /// `POST /v1/sign-in-codes`.
    CreateSignInCode: Post routes::SIGN_IN_CODES, "createSignInCode",
        () => crate::wire::SignInCode, status = 201, body = false,
        summary = "A one-time link that signs a browser into the dashboard as this token (deployer or admin): it works once, for 10 minutes, and its page shows the org and the person and asks first. What `nuon dev` prints instead of a token.";
}
