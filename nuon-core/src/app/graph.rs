//! The components' dependency graph, as the workflows walk it.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{AppConfig, Component, template};

impl AppConfig {
    /// The component named `name`.
    pub fn component(&self, name: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.name == name)
    }

    /// Every component `component` depends on, directly or not (written
    /// `dependencies` and the outputs its templates read).
    pub fn dependencies_of(&self, component: &str) -> BTreeSet<&str> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![component.to_owned()];
        while let Some(n) = todo.pop() {
            if let Some(c) = self.component(&n) {
                for d in &c.depends_on {
                    if seen.insert(d.as_str()) {
                        todo.push(d.clone());
                    }
                }
            }
        }
        seen
    }
}

/// The components that read any of `inputs` or `secrets` in their
/// templates, and every component that depends on one of them, in the
/// config's order: what a change of those values redeploys.
pub fn components_reading(
    config: &AppConfig,
    inputs: &[String],
    secrets: &[String],
) -> Vec<String> {
    fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
            Value::Object(m) => m.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let reads = |c: &Component| {
        let mut json = serde_json::to_value(c).unwrap_or(Value::Null);
        // What its README reads is shown, not deployed.
        if let Some(m) = json.as_object_mut() {
            m.remove("readme");
        }
        let mut texts = Vec::new();
        strings(&json, &mut texts);
        texts.iter().any(|t| {
            template::scan(t).0.iter().any(|a| match &a.reference {
                template::Reference::Input(n) => inputs.contains(n),
                template::Reference::Secret(n) => secrets.contains(n),
                _ => false,
            })
        })
    };
    let mut hit: Vec<&str> = config
        .components
        .iter()
        .filter(|c| reads(c))
        .map(|c| c.name.as_str())
        .collect();
    loop {
        let more: Vec<&str> = config
            .components
            .iter()
            .filter(|c| !hit.contains(&c.name.as_str()))
            .filter(|c| c.dependencies.iter().any(|d| hit.contains(&d.as_str())))
            .map(|c| c.name.as_str())
            .collect();
        if more.is_empty() {
            break;
        }
        hit.extend(more);
    }
    config
        .components
        .iter()
        .filter(|c| hit.contains(&c.name.as_str()))
        .map(|c| c.name.clone())
        .collect()
}
