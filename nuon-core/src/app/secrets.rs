//! Who holds a secret's value (`held_by` in `secrets.toml`): the customer,
//! in their cloud's secret store, or the vendor's control plane.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::SecretDecl;

/// Who keeps a secret's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SecretHolder {
    /// The customer's cloud account (AWS Secrets Manager), made by the
    /// install stack; the runner reads the value when a job needs it.
    Customer,
    /// The vendor's control plane, sealed (`nuon installs create --secret`).
    Vendor,
}

impl SecretHolder {
    /// `customer` or `vendor`.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretHolder::Customer => "customer",
            SecretHolder::Vendor => "vendor",
        }
    }

    /// Who holds a secret that does not say, for an app of `runner_type`:
    /// the customer where the install stack makes the secret (AWS).
    pub fn default_for(runner_type: &str) -> Self {
        match runner_type {
            "aws" | "aws-ecs" | "aws-eks" => SecretHolder::Customer,
            _ => SecretHolder::Vendor,
        }
    }
}

impl SecretDecl {
    /// The customer-held ones of `decls` whose placeholder `text` prints:
    /// what a job's runner fills from the customer's secret store.
    pub fn printed_in(decls: &[SecretDecl], text: &str) -> Vec<String> {
        (decls.iter().filter(|s| s.held_by_customer()))
            .filter(|s| {
                text.contains(&Self::placeholder(&s.name))
                    || text.contains(&Self::placeholder_base64(&s.name))
            })
            .map(|s| s.name.clone())
            .collect()
    }

    /// Whether the customer keeps its value (the control plane never sees it).
    pub fn held_by_customer(&self) -> bool {
        self.held_by == Some(SecretHolder::Customer)
    }

    /// The text a customer-held secret renders to in the control plane:
    /// the runner puts the value in its place when the job runs.
    pub fn placeholder(name: &str) -> String {
        format!("__nuon_customer_secret__{name}__")
    }

    /// [`SecretDecl::placeholder`] for the value in base64 (a Kubernetes
    /// Secret's `data`).
    pub fn placeholder_base64(name: &str) -> String {
        format!("__nuon_customer_secret_base64__{name}__")
    }
}
