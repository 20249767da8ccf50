//! The operations served by `nuon-control/src/api/apps.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `POST /v1/apps`.
    CreateApp: Post routes::APPS, "createApp",
        crate::wire::CreateApp => crate::wire::AppInfo, status = 201, body = true,
        summary = "Create an app.";
    /// `GET /v1/apps`.
    ListApps: Get routes::APPS, "listApps",
        () => crate::wire::AppList, body = false,
        summary = "The org's apps.";
    /// `GET /v1/apps/{id}`.
    GetApp: Get routes::APP, "getApp",
        () => crate::wire::AppInfo, body = false,
        summary = "One app, by id or name.";
    /// `POST /v1/apps/{id}/configs`.
    SyncAppConfig: Post routes::APP_CONFIGS, "syncAppConfig",
        crate::wire::SyncConfig => crate::wire::ConfigVersionInfo, status = 201, body = true,
        summary = "Sync the app's next config version from its files; an invalid config is refused with every diagnostic.";
    /// `GET /v1/apps/{id}/configs`.
    ListAppConfigs: Get routes::APP_CONFIGS, "listAppConfigs",
        () => crate::wire::ConfigVersionList, body = false,
        summary = "The app's config versions.";
    /// `GET /v1/apps/{id}/configs/{version}`.
    GetAppConfig: Get routes::APP_CONFIG, "getAppConfig",
        () => crate::wire::ConfigVersionInfo, body = false,
        summary = "One config version (a number, or latest).";
    /// `GET /v1/apps/{id}/components`.
    ListComponents: Get routes::APP_COMPONENTS, "listComponents",
        () => crate::wire::ComponentList, body = false,
        summary = "The components of the app's latest config, dependencies first.";
    /// `POST /v1/installs`.
    CreateInstall: Post routes::INSTALLS, "createInstall",
        crate::wire::CreateInstall => crate::wire::InstallCreated, status = 201, body = true,
        summary = "Create an install of an app, with its runner; the runner token is shown only in this answer.";
    /// `GET /v1/installs`.
    ListInstalls: Get routes::INSTALLS, "listInstalls",
        () => crate::wire::InstallList, body = false,
        summary = "The org's installs (those whose labels match `selector`, when given).";
    /// `PATCH /v1/installs/{id}/inputs`.
    SetInstallInputs: Patch routes::INSTALL_INPUTS, "setInstallInputs",
        crate::wire::SetInputs => crate::wire::InstallInfo, body = true,
        summary = "Set some of an install's inputs.";
    /// `GET /v1/installs/{id}/workflows`.
    ListInstallWorkflows: Get routes::INSTALL_WORKFLOWS, "listInstallWorkflows",
        () => crate::wire::WorkflowList, body = false,
        summary = "An install's workflows, newest first, with their steps.";
    /// `GET /v1/workflows/{id}`.
    GetWorkflow: Get routes::WORKFLOW, "getWorkflow",
        () => crate::wire::WorkflowInfo, body = false,
        summary = "One workflow with its steps.";

    /// `GET /v1/installs/{id}`.
    GetInstall: Get routes::INSTALL, "getInstall", () => crate::wire::InstallInfo, body = false,
        summary = "One install, by id or name; sensitive inputs and secrets only by name.";
    /// `GET /v1/installs/{id}/render/{workflow}`.
    RenderInstall: Get routes::INSTALL_RENDER, "renderInstall",
        () => crate::rendered::RenderedWorkflow, body = false,
        summary = "What each step of a workflow (provision, deploy, teardown, deprovision, reprovision) would be given, rendered with the install's values and outputs: variables, var files, Helm values, manifests, action scripts. Secrets and sensitive values are stand-ins; outputs not known yet read `(known after apply)`. Nothing runs.";
    /// `GET /v1/installs/{id}/readme`.
    GetInstallReadme: Get routes::INSTALL_README, "getInstallReadme",
        () => crate::rendered::RenderedReadme, body = false,
        summary = "The app's README (metadata.toml `readme`) rendered with the install's values and outputs, as Nuon renders it: a reference that does not render is a warning, and the README is then shown as written. Secrets and sensitive values are stand-ins. 404 when the app has no README.";
    /// `GET /v1/installs/{id}/secrets`.
    ListInstallSecrets: Get routes::INSTALL_SECRETS, "listInstallSecrets",
        () => crate::wire::InstallSecrets, body = false,
        summary = "The install's secrets as its config declares them, never a value: who holds each (`customer`: in their cloud's secret store, entered in the install stack, the control plane never has it; `vendor`: sealed here), whether it is set, and where a customer-held one is (the ARN the install stack reported).";
    /// `PATCH /v1/installs/{id}`.
    UpdateInstall: Patch routes::INSTALL, "updateInstall", crate::wire::EditInstall => crate::wire::InstallInfo, body = true,
        summary = "Rename an install or change its approval mode (each when given). Its id, runner and workflows stay; a name another install of the org has is refused (409 `name_taken`).";
}
