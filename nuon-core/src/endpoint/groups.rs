//! The operations served by `nuon-control/src/api/groups.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `PATCH /v1/installs/{id}/labels`.
    SetInstallLabels: Patch routes::INSTALL_LABELS, "setInstallLabels",
        crate::wire::LabelChange => crate::wire::InstallInfo, body = true,
        summary = "Add, replace or remove some of an install's labels; the others stay.";
    /// `POST /v1/install-groups`.
    CreateInstallGroup: Post routes::INSTALL_GROUPS, "createInstallGroup",
        crate::wire::CreateGroup => crate::wire::GroupInfo, status = 201, body = true,
        summary = "Create a group of installs: a name and a label selector; its members are the installs whose labels match it.";
    /// `GET /v1/install-groups`.
    ListInstallGroups: Get routes::INSTALL_GROUPS, "listInstallGroups",
        () => crate::wire::GroupList, body = false,
        summary = "The org's groups of installs, with the installs each selects now.";
    /// `GET /v1/install-groups/{name}`.
    GetInstallGroup: Get routes::INSTALL_GROUP, "getInstallGroup",
        () => crate::wire::GroupInfo, body = false,
        summary = "One group of installs, with the installs it selects now.";
    /// `DELETE /v1/install-groups/{name}`.
    DeleteInstallGroup: Delete routes::INSTALL_GROUP, "deleteInstallGroup",
        () => crate::wire::GroupInfo, body = false,
        summary = "Delete a group (its installs stay).";
}
