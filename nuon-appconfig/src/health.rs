//! Reading a component's `[health]` into
//! [`ComponentHealth`](nuon_core::app::ComponentHealth).

use crate::reader::{Located, Reader};
use nuon_core::app::*;

/// Reads `[health]` of a component: what it holds and the strings that are
/// templates (rendered after the apply). `None` when it is absent, turned
/// off (`enabled = false`) or unreadable (the problems are in `d`).
pub(crate) fn read(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    templates: &mut Vec<Located>,
) -> Option<ComponentHealth> {
    let mut h = r.table(d, "health")?;
    let enabled = h.bool(d, "enabled").unwrap_or(true);
    let window = h.str(d, "stabilization_window");
    let block_deploy = h.bool(d, "block_deploy").unwrap_or(false);
    let required = h.str_list(d, "required_checks");
    let mut ok = true;
    for c in &required {
        if let Err(e) = check_name(&c.text) {
            d.push(h.file.at(&c.span, format!("required_checks: {e}")));
            ok = false;
        }
    }
    let mut probes = Vec::new();
    for (i, mut p) in h.tables(d, "probes").into_iter().enumerate() {
        let span = p.span();
        let kind_v = p.str(d, "type");
        let name = p.str(d, "name");
        let url = p.str(d, "url");
        let command = p.str_list(d, "command");
        p.finish(d, &[], |_| None);
        let at = |what: String| p.file.at(&span, format!("health.probes[{i}]: {what}"));
        let kind = match &kind_v {
            None => {
                d.push(at("type is required: http, tcp or exec".into()));
                None
            }
            Some(k) => {
                let kind = ProbeKind::parse(&k.text);
                if kind.is_none() {
                    d.push(p.file.at(
                        &k.span,
                        format!(
                            "health.probes[{i}]: invalid type {:?}, must be http, tcp or exec",
                            k.text
                        ),
                    ));
                }
                kind
            }
        };
        let Some(kind) = kind else {
            ok = false;
            continue;
        };
        match kind {
            ProbeKind::Http | ProbeKind::Tcp => {
                let Some(u) = url.as_ref().filter(|u| !u.text.trim().is_empty()) else {
                    d.push(at(format!("{} probes require a url", kind.as_str())));
                    ok = false;
                    continue;
                };
                // A target that is a template is checked once rendered.
                if !u.text.contains("{{") {
                    let checked = match kind {
                        ProbeKind::Http => http_url(&u.text),
                        _ => tcp_address(&u.text).map(drop),
                    };
                    if let Err(e) = checked {
                        d.push(p.file.at(&u.span, format!("health.probes[{i}]: {e}")));
                        ok = false;
                    }
                }
                if !command.is_empty() {
                    let an = if kind == ProbeKind::Http { "an" } else { "a" };
                    d.push(at(format!(
                        "command is for exec probes; {an} {} probe reads url",
                        kind.as_str()
                    )));
                }
            }
            ProbeKind::Exec => {
                if command.first().is_none_or(|c| c.text.trim().is_empty()) {
                    d.push(at("exec probes require a command (an argv array)".into()));
                    ok = false;
                    continue;
                }
                if url.is_some() {
                    d.push(at(
                        "url is for http and tcp probes; an exec probe runs command".into(),
                    ));
                }
            }
        }
        templates.extend(url.iter().cloned());
        templates.extend(command.iter().cloned());
        let name = name.map(|n| n.text).unwrap_or_else(|| match kind {
            ProbeKind::Exec => command[0].text.clone(),
            _ => url.as_ref().map(|u| u.text.clone()).unwrap_or_default(),
        });
        probes.push(HealthProbe {
            kind,
            name,
            url: url.map(|u| u.text),
            command: command.into_iter().map(|c| c.text).collect(),
        });
    }
    if let Some(w) = &window {
        if w.text.contains("{{") {
            templates.push(w.clone());
        } else if let Err(e) = parse_window(&w.text) {
            d.push(h.file.at(&w.span, e));
            ok = false;
        }
    }
    h.finish(d, &[], |_| None);
    if !enabled || !ok {
        return None;
    }
    Some(ComponentHealth {
        stabilization_window: window.map_or_else(|| DEFAULT_WINDOW.to_owned(), |w| w.text),
        block_deploy,
        probes,
        required_checks: required.into_iter().map(|c| c.text).collect(),
    })
}
