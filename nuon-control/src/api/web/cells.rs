//! Small pieces of markup pages share: a health check's cell, a plan's
//! summary.

use maud::{Markup, html};
use nuon_core::wire::HealthCheck;

/// A health check as a cell: its name and status, what it says on hover,
/// and a change of it that is pending.
pub(super) fn check_cell(c: &HealthCheck) -> Markup {
    html! {
        span class={ "cell " (c.status) } title=(c.detail.clone().unwrap_or_default()) {
            (c.name) ": " (c.status)
            @if let Some(p) = &c.pending { " · change " (p.status) }
        }
    }
}

/// A plan's counts, and its resources: their addresses, actions and the
/// attributes they change (`input: 5 → 9`), open when there are few.
pub(super) fn plan_summary(c: &serde_json::Value) -> Markup {
    let n = |k: &str| c[k].as_u64().unwrap_or(0);
    let resources = nuon_core::workflow::plan_resources(c);
    html! {
        span.plan {
            span.add { "+" (n("add")) } " " span.change { "~" (n("change")) } " " span.destroy { "-" (n("destroy")) }
        }
        // Open when short: what changes is what an approval is about.
        @if !resources.is_empty() {
            details open[resources.len() <= 10] {
                summary { (resources.len()) " resource(s)" }
                ul { @for r in &resources { li {
                    code { (r.address) } " " span.muted { (r.actions) }
                    @if !r.values.is_empty() {
                        ul.values { @for v in &r.values { li { code { (v) } } } }
                    }
                } } }
            }
        }
    }
}
