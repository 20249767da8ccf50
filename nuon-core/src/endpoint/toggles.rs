//! The operations served by `nuon-control/src/api/toggles.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `GET /v1/installs/{id}/components`.
    ListInstallComponents: Get routes::INSTALL_COMPONENTS, "listInstallComponents",
        () => crate::wire::InstallComponents, body = false,
        summary = "An install's components in dependency order: each on or off (toggleable ones can be turned off), and whether it is deployed.";
    /// `POST /v1/installs/{id}/components/{component}/disable`.
    DisableInstallComponent: Post routes::INSTALL_COMPONENT_DISABLE, "disableInstallComponent",
        crate::wire::ToggleComponent => crate::wire::ComponentToggled, body = true,
        summary = "Turn a toggleable component off for an install: it and the components that depend on it are torn down, and deploys skip them until it is on again.";
    /// `POST /v1/installs/{id}/components/{component}/enable`.
    EnableInstallComponent: Post routes::INSTALL_COMPONENT_ENABLE, "enableInstallComponent",
        crate::wire::ToggleComponent => crate::wire::ComponentToggled, body = true,
        summary = "Turn a toggleable component on again for an install: it is deployed.";
    /// `PUT /v1/installs/{id}/components/{component}/overrides`.
    SetInstallComponentOverrides: Put routes::INSTALL_COMPONENT_OVERRIDES, "setInstallComponentOverrides",
        crate::wire::SetComponentOverride => crate::wire::ComponentOverridden, body = true,
        summary = "Set an install's own values for a component (`helm_values` YAML for a helm_chart, `tf_vars` for a terraform_module), merged over the app config's; both empty clears them. The component is deployed with them (unless `deploy` is false or the install was never provisioned).";
}
