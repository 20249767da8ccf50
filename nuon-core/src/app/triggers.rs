//! The trigger types of an action, as Nuon names them (and the old names
//! it still reads).

/// Old trigger names Nuon still accepts, and what it reads them as.
pub const OLD_TRIGGERS: &[(&str, &str)] = &[
    ("pre-component-deploy", "pre-deploy-component"),
    ("post-component-deploy", "post-deploy-component"),
];

/// The trigger types an action may have (Nuon's).
pub const TRIGGERS: &[&str] = &[
    "manual",
    "cron",
    "role-enabled",
    "role-disabled",
    "pre-provision",
    "post-provision",
    "pre-deprovision",
    "post-deprovision",
    "pre-deploy-all-components",
    "post-deploy-all-components",
    "pre-teardown-all-components",
    "post-teardown-all-components",
    "pre-deploy-component",
    "post-deploy-component",
    "pre-teardown-component",
    "post-teardown-component",
    "post-provision-sandbox",
    "pre-reprovision",
    "post-reprovision",
    "pre-reprovision-sandbox",
    "post-reprovision-sandbox",
    "pre-deprovision-sandbox",
    "post-deprovision-sandbox",
    "pre-enable-component",
    "post-enable-component",
    "pre-disable-component",
    "post-disable-component",
    "pre-update-inputs",
    "post-update-inputs",
    "pre-secrets-sync",
    "post-secrets-sync",
];
