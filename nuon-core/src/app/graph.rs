//! The components' dependency graph, as the workflows walk it.

use std::collections::BTreeSet;

use super::{AppConfig, Component};

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
