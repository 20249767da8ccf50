//! Secret tokens for the two APIs. Only their SHA-256 hash is ever stored.
//!
//! A runner token is `RUNNER_ID.SECRET`, so a runner knows its own id (and
//! checks that every job spec it runs names it) without asking the server.
//! An API token is `TOKEN_ID.SECRET`.

use sha2::{Digest, Sha256};

use crate::id::{RunnerId, TokenId, random_bytes};

/// A token as handed out once, with the hash to store.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// The secret text, shown once to the user.
    pub secret: String,
    /// Its SHA-256, hex, which is all the store keeps.
    pub hash: String,
}

fn secret_part() -> String {
    let mut raw = [0u8; 32];
    random_bytes(&mut raw);
    hex::encode(raw)
}

/// The hash the store keeps for a token text.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A new one-time install-stack token (`stk_` and a secret): what a
/// downloaded stack phones home with, once, for its runner's token.
pub fn issue_stack_token() -> IssuedToken {
    let secret = format!("stk_{}", secret_part());
    IssuedToken {
        hash: hash_token(&secret),
        secret,
    }
}

/// A new invitation token (`ilk_` and a secret): the secret part of a
/// customer's installer link, `https://CTL/install/TOKEN`.
pub fn issue_invitation_token() -> IssuedToken {
    let secret = format!("ilk_{}", secret_part());
    IssuedToken {
        hash: hash_token(&secret),
        secret,
    }
}

/// A new stack-template token (`ctt_` and a secret): the one-time link a
/// CloudFormation quick-create page fetches an install's template from.
pub fn issue_template_token() -> IssuedToken {
    let secret = format!("ctt_{}", secret_part());
    IssuedToken {
        hash: hash_token(&secret),
        secret,
    }
}

/// A new runner token for `runner`.
pub fn issue_runner_token(runner: &RunnerId) -> IssuedToken {
    let secret = format!("{runner}.{}", secret_part());
    IssuedToken {
        hash: hash_token(&secret),
        secret,
    }
}

/// A new API token with the given id.
pub fn issue_api_token(id: &TokenId) -> IssuedToken {
    let secret = format!("{id}.{}", secret_part());
    IssuedToken {
        hash: hash_token(&secret),
        secret,
    }
}

/// A new state token (`stt_SECRET`): Terraform's credential for one
/// component's state while one job runs.
pub fn issue_state_token() -> IssuedToken {
    let secret = format!("stt_{}", secret_part());
    IssuedToken {
        hash: hash_token(&secret),
        secret,
    }
}

/// The runner id a runner token names, when it is well formed.
pub fn runner_id_of_token(token: &str) -> Option<RunnerId> {
    token.split_once('.')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_token_names_its_runner_and_hashes_stably() {
        let id = RunnerId::generate();
        let t = issue_runner_token(&id);
        assert_eq!(runner_id_of_token(&t.secret), Some(id));
        assert_eq!(hash_token(&t.secret), t.hash);
        assert!(!t.hash.contains(&t.secret));
        assert_eq!(runner_id_of_token("garbage"), None);
    }
}
