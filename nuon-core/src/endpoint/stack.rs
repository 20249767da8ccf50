//! The operations served by `nuon-control/src/api/stack.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `GET /v1/installs/{id}/stack`.
    GetInstallStack: Get routes::INSTALL_STACK, "getInstallStack",
        () => crate::wire::InstallStack, body = false,
        summary = "The install's stack: what the customer applies once to run the install's runner, made from the app's stack.toml, runner.toml, permissions and break_glass. Each download carries a new one-time token for the stack's phone-home (valid 24 h, or nuon-ctl serve --stack-token-ttl; single use); the one before stops working. Needs an admin token.";
}
