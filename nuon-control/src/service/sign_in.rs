//! One-time sign-in codes: an API token's holder opens a dashboard
//! session in a browser with a code instead of pasting the token.

use nuon_core::endpoint as ep;
use nuon_core::wire::SignInCode;

use super::{Caller, Services, require_deployer};
use crate::error::Error;
use crate::store::WebSession;

/// How long a sign-in code may be used: ten minutes.
pub(crate) const SIGN_IN_CODE_MS: i64 = 10 * 60 * 1000;

/// What marks a stored web session row as a sign-in code, not a session.
pub(crate) const SIGN_IN_CODE_MARK: &str = "sign-in-code";

/// The key a sign-in code is stored under: not the hash of the code
/// itself, so a code is never taken for a session's cookie.
pub(crate) fn sign_in_code_key(code: &str) -> String {
    nuon_core::token::hash_token(&format!("{SIGN_IN_CODE_MARK}:{code}"))
}

impl Services<'_> {
    /// `POST /v1/sign-in-codes`: a code that opens a dashboard session
    /// acting with the caller's token (`token_hash`), once, within ten
    /// minutes, at `base`'s `/login`. Deployers and admins (it writes a row
    /// that opens a session; read-only tokens sign in with the token
    /// form). Recorded in the audit trail, refusals included.
    pub(crate) async fn create_sign_in_code(
        &self,
        caller: &Caller,
        token_hash: String,
        base: &str,
    ) -> Result<SignInCode, Error> {
        let result = self.make_sign_in_code(caller, token_hash, base).await;
        self.audited_at::<ep::CreateSignInCode, _>(caller, &[], result)
            .await
    }

    async fn make_sign_in_code(
        &self,
        caller: &Caller,
        token_hash: String,
        base: &str,
    ) -> Result<SignInCode, Error> {
        require_deployer(&caller.principal)?;
        let mut raw = [0u8; 16];
        nuon_core::random_bytes(&mut raw);
        let code = hex::encode(raw);
        let now = nuon_core::now_ms();
        let expires_at_ms = now + SIGN_IN_CODE_MS;
        self.store
            .create_web_session(&WebSession {
                id_hash: sign_in_code_key(&code),
                token_hash,
                csrf: SIGN_IN_CODE_MARK.into(),
                created_at_ms: now,
                last_seen_at_ms: now,
                expires_at_ms,
            })
            .await?;
        Ok(SignInCode {
            url: format!("{base}/login?code={code}"),
            code,
            expires_at_ms,
        })
    }
}
