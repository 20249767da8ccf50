//! The operations served by `nuon-control/src/api/lifecycle.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `DELETE /v1/installs/{id}`.
    DeleteInstall: Delete routes::INSTALL, "deleteInstall",
        () => crate::wire::WorkflowInfo, status = 202, body = false,
        summary = "Delete an install: deprovision it (its components torn down, its sandbox destroyed), then remove it and revoke its runner. The answer is the deprovision workflow; the install goes when it succeeds (a failed one can be retried).";
    /// `POST /v1/installs/{id}/forget`.
    ForgetInstall: Post routes::INSTALL_FORGET, "forgetInstall",
        () => crate::wire::InstallRemoved, body = false,
        summary = "Remove an install's record only: nothing in the customer's cloud is destroyed. Its workflows, states and runner token go with it. Refused while a workflow of it runs.";
    /// `POST /v1/installs/{id}/update-inputs`.
    UpdateInstallInputs: Post routes::INSTALL_UPDATE_INPUTS, "updateInstallInputs",
        crate::wire::UpdateInputs => crate::wire::InputsUpdated, body = true,
        summary = "Change inputs and secrets of an install and start the workflow Nuon starts: the actions of the pre-update-inputs and post-update-inputs triggers around a redeploy of the components that read the changed values (and what depends on them). With `dry_run`, only say what would run.";
    /// `POST /v1/installs/{id}/pending/apply`.
    ApplyInstallPending: Post routes::INSTALL_PENDING_APPLY, "applyInstallPending",
        () => crate::wire::PendingResolved, body = false,
        summary = "Deploy an install's pending values (changed by a workflow that was denied, failed or cancelled): a redeploy of the components that do not run them yet, and a teardown of each such component turned off.";
    /// `POST /v1/installs/{id}/pending/discard`.
    DiscardInstallPending: Post routes::INSTALL_PENDING_DISCARD, "discardInstallPending",
        () => crate::wire::PendingResolved, body = false,
        summary = "Drop an install's pending values: its inputs, secrets, toggles and overrides go back to what is deployed, and the components the change was for are deployed again with them (those that ran the dropped values change back; the plans of the others show nothing to change).";
    /// `DELETE /v1/apps/{id}`.
    DeleteApp: Delete routes::APP, "deleteApp",
        () => crate::wire::AppInfo, body = false,
        summary = "Delete an app with its config versions, builds and releases; refused while it has installs.";
}
