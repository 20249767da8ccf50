//! A plugin written against `nuon:plugin@0.1.0` (the frozen copy in the
//! SDK's `wit-versions/0.1.0`), straight on wit-bindgen: it must keep
//! running on hosts of later 0.1.x versions.
#![allow(missing_docs, unsafe_code)]

wit_bindgen::generate!({
    path: "../../../nuon-plugins/sdk/wit-versions/0.1.0",
    world: "nuon-plugin",
});

use exports::nuon::plugin::plugin::{
    Applied, ChangePlan, Guest, PlanMode, PluginError, PluginInfo, Request,
};
use nuon::plugin::host;

struct Compat;

impl Guest for Compat {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "compat".into(),
            version: "0.1.0".into(),
            component_types: vec!["wasm".into()],
            config_schema: r#"{"type":"object"}"#.into(),
        }
    }

    fn validate(_: String) -> Result<(), PluginError> {
        Ok(())
    }

    fn plan(_: Request, mode: PlanMode) -> Result<ChangePlan, PluginError> {
        host::log(host::Level::Info, "planning on a 0.1.0 contract");
        Ok(ChangePlan {
            mode,
            changes: Vec::new(),
            data: r#"{"contract":"0.1.0"}"#.into(),
        })
    }

    fn apply(_: Request, plan: ChangePlan) -> Result<Applied, PluginError> {
        Ok(Applied {
            state: "{}".into(),
            outputs: plan.data,
        })
    }

    fn destroy(_: Request, _: ChangePlan) -> Result<(), PluginError> {
        Ok(())
    }
}

export!(Compat);
