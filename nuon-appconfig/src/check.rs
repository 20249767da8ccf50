//! Checks across files: unique names, references between parts (input
//! groups, dependencies, templates, triggers, install inputs), dependency
//! cycles; then the config is put together in dependency order.

use std::collections::{BTreeMap, BTreeSet};

use super::loaded::{Item, Loaded, Place, check_refs};
use super::reader::Located;
use super::template::{self, Reference};
use super::{AppConfig, Source};
use nuon_core::app::{Diagnostics, SourceFile, did_you_mean};
use nuon_core::template::Budget;

/// Reports names given twice; returns each name's first place.
fn unique<T>(
    what: &str,
    items: &[Item<T>],
    files: &[SourceFile],
    d: &mut Diagnostics,
) -> BTreeMap<String, Place> {
    let mut seen: BTreeMap<String, Place> = BTreeMap::new();
    for item in items {
        let Some(name) = &item.name else { continue };
        let place = Place {
            file: item.file,
            offset: name.span.start,
        };
        if let Some(first) = seen.get(&name.text) {
            let f = &files[first.file];
            let (line, col) = f.position(first.offset);
            d.push(files[item.file].at(
                &name.span,
                format!(
                    "duplicate {what} name {:?} (first defined at {}:{line}:{col})",
                    name.text, f.name
                ),
            ));
        } else {
            seen.insert(name.text.clone(), place);
        }
    }
    seen
}

/// The byte offset in the file of position `offset` of a string value's
/// decoded text (escapes make the two differ; the same text is looked for
/// in the raw value).
fn locate(file: &SourceFile, s: &Located, offset: usize) -> usize {
    let raw = file.text.get(s.span.clone()).unwrap_or("");
    let mut end = (offset + 40).min(s.text.len());
    while !s.text.is_char_boundary(end) {
        end -= 1;
    }
    // The text up to the first character TOML may have escaped.
    let needle = s.text[offset..end]
        .split(|c: char| c == '"' || c == '\\' || c.is_control())
        .next()
        .unwrap_or("");
    if needle.is_empty() {
        return s.span.start;
    }
    let nth = s.text[..offset].matches(needle).count();
    raw.match_indices(needle)
        .nth(nth)
        .map(|(i, _)| s.span.start + i)
        .unwrap_or(s.span.start)
}

/// Checks an install file's `[components.NAME]` overrides: the component
/// exists and takes that kind of values, their templates read what its
/// deploy can render, and plain values are YAML or `.tfvars`.
fn check_overrides(
    inst: &Item<super::InstallDecl>,
    loaded: &Loaded,
    all_deps: &BTreeMap<String, BTreeSet<String>>,
    files: &[SourceFile],
    names: &Names<'_>,
    d: &mut Diagnostics,
) {
    use super::ComponentKind;
    let file = &files[inst.file];
    for o in &inst.overrides {
        let name = &o.component.text;
        // `enabled` alone was checked with the toggles.
        if o.helm_values.is_none() && o.tf_vars.is_none() && inst.refs.contains(&o.component) {
            continue;
        }
        check_refs(
            "component",
            std::slice::from_ref(&o.component),
            names.components,
            file,
            d,
        );
        let Some(kind) = loaded
            .components
            .iter()
            .filter_map(|c| c.value.as_ref())
            .find(|c| c.name == *name)
            .map(|c| c.kind())
        else {
            continue;
        };
        // What the component depends on, directly or not: what its
        // overrides may read the outputs of.
        let mut before = BTreeSet::new();
        let mut todo = vec![name.clone()];
        while let Some(n) = todo.pop() {
            for dep in all_deps.get(&n).into_iter().flatten() {
                if before.insert(dep.clone()) {
                    todo.push(dep.clone());
                }
            }
        }
        for (key, text, takes, other) in [
            (
                "helm_values",
                &o.helm_values,
                ComponentKind::HelmChart,
                "a terraform_module takes tf_vars",
            ),
            (
                "tf_vars",
                &o.tf_vars,
                ComponentKind::TerraformModule,
                "a helm_chart takes helm_values",
            ),
        ] {
            let Some(text) = text else { continue };
            if kind != takes {
                d.push(file.at(
                    &text.span,
                    format!(
                        "{key}: component {name:?} is a {}, not a {} ({other})",
                        kind.as_str(),
                        takes.as_str()
                    ),
                ));
                continue;
            }
            let reads = check_templates(std::slice::from_ref(text), inst.file, files, names, d);
            for (of, place) in reads.components {
                if !before.contains(&of) && names.components.contains_key(&of) {
                    d.push(files[place.file].diag(
                        place.offset,
                        format!(
                            "{key} reads the outputs of {of}, which {name} does not depend on: it may deploy first (add {of:?} to {name}'s dependencies)"
                        ),
                    ));
                }
            }
            if template::is_template(&text.text) {
                continue;
            }
            let checked = match takes {
                ComponentKind::HelmChart => super::yaml_mapping(&text.text).map(drop),
                _ => super::tf_vars_file(&text.text).map(drop),
            };
            if let Err(e) = checked {
                d.push(file.at(&text.span, format!("{key} of component {name:?}: {e}")));
            }
        }
    }
}

/// An edge of the component graph, with where it was declared.
struct Edge {
    to: String,
    file: usize,
    offset: usize,
}

/// What the templates of one item read.
#[derive(Default)]
struct Reads {
    components: Vec<(String, Place)>,
}

struct Names<'a> {
    inputs: &'a BTreeMap<String, Place>,
    secrets: &'a BTreeMap<String, Place>,
    /// The secrets the customer holds: the runner puts each value where
    /// the secret is printed, so a template may only print it bare.
    customer_secrets: &'a std::collections::BTreeSet<String>,
    components: &'a BTreeMap<String, Place>,
    /// What the config's templates may do together when each is rendered
    /// once with no install's values: a template that exhausts it would
    /// exhaust any job's.
    budget: Budget,
}

fn check_templates(
    strings: &[Located],
    file_idx: usize,
    files: &[SourceFile],
    names: &Names<'_>,
    d: &mut Diagnostics,
) -> Reads {
    let file = &files[file_idx];
    let mut reads = Reads::default();
    for s in strings {
        if !s.text.contains("{{") {
            continue;
        }
        let (actions, errors) = template::scan(&s.text);
        let parsed = errors.is_empty();
        for e in errors {
            d.push(file.diag(locate(file, s, e.offset), e.message));
        }
        // Once the budget is gone, the templates after the one that took
        // it are not blamed.
        if parsed
            && !names.budget.is_spent()
            && let Some(e) = template::exhausts_budget(&s.text, &names.budget)
        {
            d.push(file.diag(locate(file, s, e.offset), e.message));
        }
        for a in actions {
            let at = locate(file, s, a.start);
            let unknown = |what: &str, name: &str, known: &BTreeMap<String, Place>, hint: &str| {
                format!(
                    "{} reads unknown {what} {name:?}{}",
                    a.written,
                    if known.is_empty() {
                        format!(" ({hint})")
                    } else {
                        did_you_mean(name, known.keys().map(String::as_str))
                    }
                )
            };
            match &a.reference {
                Reference::Input(n) if !names.inputs.contains_key(n) => d.push(file.diag(
                    at,
                    unknown("input", n, names.inputs, "inputs.toml declares none"),
                )),
                Reference::Secret(n) if !names.secrets.contains_key(n) => d.push(file.diag(
                    at,
                    unknown("secret", n, names.secrets, "secrets.toml declares none"),
                )),
                Reference::Secret(n) if names.customer_secrets.contains(n) && !a.printed => {
                    d.push(file.diag(at, super::secrets::not_bare(&a.written, n)))
                }
                Reference::ComponentOutput { component, .. } => {
                    if names.components.contains_key(component) {
                        reads.components.push((
                            component.clone(),
                            Place {
                                file: file_idx,
                                offset: at,
                            },
                        ));
                    } else {
                        d.push(file.diag(
                            at,
                            unknown(
                                "component",
                                component,
                                names.components,
                                "the app has no components",
                            ),
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    reads
}

/// Every cycle of the graph, each once, as a path that returns to its
/// start, with the place of its first edge.
fn cycles(graph: &BTreeMap<String, Vec<Edge>>) -> Vec<(Vec<String>, usize, usize)> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, Vec<Edge>>,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
        found: &mut Vec<(Vec<String>, usize, usize)>,
        seen: &mut BTreeSet<Vec<String>>,
    ) {
        marks.insert(node.to_owned(), Mark::Active);
        stack.push(node.to_owned());
        for e in graph.get(node).into_iter().flatten() {
            match marks.get(&e.to).copied().unwrap_or(Mark::New) {
                Mark::New if graph.contains_key(&e.to) => {
                    visit(&e.to, graph, marks, stack, found, seen)
                }
                Mark::Active => {
                    let start = stack.iter().position(|n| *n == e.to).unwrap_or(0);
                    let mut cycle: Vec<String> = stack[start..].to_vec();
                    // One cycle, whichever node it was entered by.
                    let min = cycle
                        .iter()
                        .enumerate()
                        .min_by(|a, b| a.1.cmp(b.1))
                        .map(|(i, _)| i)
                        .unwrap_or(0);
                    cycle.rotate_left(min);
                    if seen.insert(cycle.clone()) {
                        // The place of the edge leaving the cycle's first node.
                        let first = &cycle[0];
                        let next = cycle.get(1).unwrap_or(first);
                        let (file, offset) = graph[first]
                            .iter()
                            .find(|x| &x.to == next)
                            .map(|x| (x.file, x.offset))
                            .unwrap_or((e.file, e.offset));
                        let mut path = cycle.clone();
                        path.push(cycle[0].clone());
                        found.push((path, file, offset));
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        marks.insert(node.to_owned(), Mark::Done);
    }
    let mut marks = BTreeMap::new();
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    for node in graph.keys() {
        if marks.get(node).copied().unwrap_or(Mark::New) == Mark::New {
            visit(
                node,
                graph,
                &mut marks,
                &mut Vec::new(),
                &mut found,
                &mut seen,
            );
        }
    }
    found
}

/// Components in dependency order: dependencies first, otherwise by name.
fn topo_order(deps: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    while out.len() < deps.len() {
        let ready: Vec<String> = deps
            .iter()
            .filter(|(n, ds)| {
                !done.contains(*n) && ds.iter().all(|x| done.contains(x) || !deps.contains_key(x))
            })
            .map(|(n, _)| n.clone())
            .collect();
        if ready.is_empty() {
            // A cycle (already reported): the rest by name.
            out.extend(deps.keys().filter(|n| !done.contains(*n)).cloned());
            break;
        }
        for n in ready {
            done.insert(n.clone());
            out.push(n);
        }
    }
    out
}

/// Every role a config names to run with (a rule of
/// `operation_roles.toml`, a component's or the sandbox's own
/// `operation_roles`, an action's `role` or `break_glass_role`) is one
/// `permissions` or `break_glass` declares, as Nuon checks it (names
/// compared without spaces): a job would otherwise be refused at run time.
fn roles_declared(files: &[SourceFile], loaded: &Loaded, d: &mut Diagnostics) {
    let perms = &loaded.platform.permissions;
    let declared = |name: &str| {
        perms
            .roles
            .iter()
            .chain(&perms.break_glass)
            .any(|r| super::same_role(&r.name, name))
    };
    // (file, role, why, where to look for it from)
    let mut named: Vec<(usize, &str, String, &str)> = Vec::new();
    if let (Some(rules), Some(file)) = (
        &loaded.platform.operation_roles,
        files.iter().position(|f| f.name == "operation_roles.toml"),
    ) {
        for r in &rules.rules {
            let why = format!("operation_roles.toml: {} {}", r.principal, r.operation);
            named.push((file, &r.role, why, &r.principal));
        }
    }
    if let Some(Item {
        value: Some(s),
        file,
        ..
    }) = &loaded.sandbox
    {
        for (op, role) in &s.operation_roles {
            named.push((
                *file,
                role,
                format!("the sandbox's operation_roles {op}"),
                op,
            ));
        }
    }
    for c in &loaded.components {
        let Some(v) = &c.value else { continue };
        for (op, role) in &v.operation_roles {
            let why = format!("component {}'s operation_roles {op}", v.name);
            named.push((c.file, role, why, op));
        }
    }
    for a in &loaded.actions {
        let Some(v) = &a.value else { continue };
        for (key, role) in [("role", &v.role), ("break_glass_role", &v.break_glass_role)] {
            if let Some(role) = role {
                named.push((a.file, role, format!("action {}'s {key}", v.name), key));
            }
        }
    }
    for (file, role, why, near) in named {
        if declared(role) {
            continue;
        }
        let f = &files[file];
        let from = f.text.find(near).unwrap_or(0);
        let at = f.text[from..]
            .find(&format!("\"{role}\""))
            .map(|at| from + at + 1)
            .or_else(|| f.text.find(role))
            .unwrap_or(0);
        d.push(f.at(
            &(at..at + role.len()),
            format!(
                "{why} names role {role:?}, which permissions and break_glass do not declare: declare it (permissions.toml, permissions/, break_glass.toml) or name one they do"
            ),
        ));
    }
}

pub(crate) fn cross_check(
    files: &[SourceFile],
    mut loaded: Loaded,
    d: &mut Diagnostics,
) -> Option<AppConfig> {
    let groups = unique("input group", &loaded.groups, files, d);
    let inputs = unique("input", &loaded.inputs, files, d);
    let secrets = unique("secret", &loaded.secrets, files, d);
    super::secrets::one_writer_per_key(files, &loaded.secrets, d);
    let components = unique("component", &loaded.components, files, d);
    roles_declared(files, &loaded, d);
    // A secrets-sync trigger with nothing synced never fires.
    if !loaded
        .secrets
        .iter()
        .filter_map(|s| s.value.as_ref())
        .any(|s| !s.kubernetes.is_empty())
    {
        for a in &loaded.actions {
            let Some(action) = &a.value else { continue };
            for t in action
                .triggers
                .iter()
                .filter(|t| t.kind.ends_with("secrets-sync"))
            {
                let file = &files[a.file];
                let at = file.text.find(&format!("{:?}", t.kind)).unwrap_or(0);
                d.push(file.warn(
                    &(at..at + t.kind.len() + 2),
                    format!(
                        "trigger type {:?} never fires: no secret is synced into Kubernetes (kubernetes_sync or kubernetes_sync_targets in secrets.toml)",
                        t.kind
                    ),
                ));
            }
        }
    }
    // The sandbox's state, build and outputs go by this name.
    for c in &loaded.components {
        if let Some(n) = c.name.as_ref().filter(|n| n.text == "sandbox") {
            d.push(files[c.file].at(
                &n.span,
                "component name \"sandbox\" is reserved for the app's sandbox: pick another name",
            ));
        }
    }
    let actions = unique("action", &loaded.actions, files, d);
    unique("install", &loaded.installs, files, d);
    let runner_type = loaded.runner.as_ref().map_or("local", |r| &r.runner_type);
    let customer_secrets = super::secrets::resolve(runner_type, &mut loaded.secrets);
    let names = Names {
        inputs: &inputs,
        secrets: &secrets,
        customer_secrets: &customer_secrets,
        components: &components,
        budget: Budget::new(4 * Budget::DEFAULT_STEPS, 4 * Budget::DEFAULT_TIME),
    };

    // The platform files: their templates, and the components and actions
    // they name.
    for (file, strings) in &loaded.platform.strings {
        check_templates(strings, *file, files, &names, d);
    }
    for (file, r, kind) in &loaded.platform.refs {
        let known = if *kind == "component" {
            &components
        } else {
            &actions
        };
        if !known.contains_key(&r.text) {
            d.push(files[*file].diag(
                r.span.start,
                format!(
                    "unknown {kind} {:?}{}",
                    r.text,
                    did_you_mean(&r.text, known.keys().map(String::as_str))
                ),
            ));
        }
    }

    for i in &loaded.inputs {
        check_refs("input group", &i.refs, &groups, &files[i.file], d);
    }

    if let Some(s) = &loaded.sandbox {
        let reads = check_templates(&s.strings, s.file, files, &names, d);
        for (c, place) in reads.components {
            d.push(files[place.file].diag(
                place.offset,
                format!(
                    "the sandbox cannot read the outputs of component {c:?}: it is provisioned before any component"
                ),
            ));
        }
    }

    // A job image is the build of a container_image component.
    if let Some((f, refs)) = &loaded.job_images {
        check_refs("component", refs, &components, &files[*f], d);
        for r in refs {
            let kind = loaded
                .components
                .iter()
                .filter(|c| c.name.as_ref().is_some_and(|n| n.text == r.text))
                .find_map(|c| c.value.as_ref().map(|v| v.kind()));
            if let Some(kind) = kind
                && kind != super::ComponentKind::ContainerImage
            {
                d.push(files[*f].at(
                    &r.span,
                    format!(
                        "job_images: {:?} is a {} component; a job image is the build of a container_image component",
                        r.text,
                        kind.as_str()
                    ),
                ));
            }
        }
    }

    let mut graph: BTreeMap<String, Vec<Edge>> = BTreeMap::new();
    let mut all_deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in &loaded.components {
        let file = &files[c.file];
        let me = c.name.as_ref().map(|n| n.text.clone());
        check_refs("component", &c.deps, &components, file, d);
        let reads = check_templates(&c.strings, c.file, files, &names, d);
        // Read after the apply: its own outputs are there by then.
        let after = check_templates(&c.after_apply, c.file, files, &names, d);
        let Some(me) = me else { continue };
        let mut edges = Vec::new();
        for dep in &c.deps {
            if dep.text == me {
                d.push(file.at(
                    &dep.span,
                    format!("component {me:?} cannot depend on itself"),
                ));
            } else if components.contains_key(&dep.text) {
                edges.push(Edge {
                    to: dep.text.clone(),
                    file: c.file,
                    offset: dep.span.start,
                });
            }
        }
        if let Some(to) = context_component(c.context.as_ref(), &loaded, file, d)
            && to != me
            && components.contains_key(&to)
        {
            let at = c.context.as_ref().map(|k| k.span.start).unwrap_or(0);
            edges.push(Edge {
                to,
                file: c.file,
                offset: at,
            });
        }
        for (to, place) in reads.components {
            if to == me {
                d.push(files[place.file].diag(
                    place.offset,
                    format!("component {me:?} cannot read its own outputs"),
                ));
            } else {
                edges.push(Edge {
                    to,
                    file: place.file,
                    offset: place.offset,
                });
            }
        }
        for (to, place) in after.components.into_iter().filter(|(to, _)| *to != me) {
            edges.push(Edge {
                to,
                file: place.file,
                offset: place.offset,
            });
        }
        if graph.contains_key(&me) {
            continue; // a duplicate, already reported
        }
        all_deps.insert(me.clone(), edges.iter().map(|e| e.to.clone()).collect());
        graph.insert(me, edges);
    }
    for (path, file, offset) in cycles(&graph) {
        d.push(files[file].diag(offset, format!("dependency cycle: {}", path.join(" -> "))));
    }

    let mut action_deps: Vec<BTreeSet<String>> = Vec::new();
    for a in &loaded.actions {
        let file = &files[a.file];
        check_refs("component", &a.deps, &components, file, d);
        check_refs("component", &a.refs, &components, file, d);
        let reads = check_templates(&a.strings, a.file, files, &names, d);
        let mut deps: BTreeSet<String> = a
            .deps
            .iter()
            .filter(|x| components.contains_key(&x.text))
            .map(|x| x.text.clone())
            .collect();
        deps.extend(reads.components.into_iter().map(|(c, _)| c));
        deps.extend(
            context_component(a.context.as_ref(), &loaded, file, d)
                .filter(|c| components.contains_key(c)),
        );
        action_deps.push(deps);
    }

    // Install inputs: declared, of the right type, every required one given.
    let mut install_inputs = Vec::new();
    for inst in &loaded.installs {
        let file = &files[inst.file];
        super::install_file::check_toggles(inst, &loaded, &components, file, d);
        check_overrides(inst, &loaded, &all_deps, files, &names, d);
        let values = super::install_file::check_inputs(inst, &loaded, &inputs, file, d);
        install_inputs.push(values);
    }

    if d.has_errors() {
        return None;
    }
    // No error: every part was read.
    let metadata = loaded.metadata?;
    let mut by_name: BTreeMap<String, super::Component> = BTreeMap::new();
    for c in loaded.components {
        let mut c = c.value?;
        c.depends_on = all_deps
            .get(&c.name)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        by_name.insert(c.name.clone(), c);
    }
    let components = topo_order(&all_deps)
        .into_iter()
        .filter_map(|n| by_name.remove(&n))
        .collect();
    let mut actions = Vec::new();
    for (a, deps) in loaded.actions.into_iter().zip(action_deps) {
        let mut a = a.value?;
        a.depends_on = deps.into_iter().collect();
        actions.push(a);
    }
    let mut installs = Vec::new();
    for (i, values) in loaded.installs.into_iter().zip(install_inputs) {
        let mut i = i.value?;
        i.inputs = values;
        installs.push(i);
    }
    Some(AppConfig {
        metadata,
        sandbox: match loaded.sandbox {
            Some(s) => Some(s.value?),
            None => None,
        },
        runner: loaded.runner,
        input_groups: loaded
            .groups
            .into_iter()
            .map(|g| g.value)
            .collect::<Option<_>>()?,
        inputs: loaded
            .inputs
            .into_iter()
            .map(|i| i.value)
            .collect::<Option<_>>()?,
        secrets: loaded
            .secrets
            .into_iter()
            .map(|s| s.value)
            .collect::<Option<_>>()?,
        components,
        actions,
        installs,
        stack: loaded.platform.stack,
        permissions: loaded.platform.permissions,
        operation_roles: loaded.platform.operation_roles,
        policies: loaded.platform.policies,
        kubernetes_contexts: loaded.platform.kubernetes_contexts,
        runbooks: loaded.platform.runbooks,
        installer: loaded.platform.installer,
    })
}

/// Checks that a valid config's `path` sources and files exist in its dir.
pub(crate) fn local_paths(
    exists: &dyn Fn(&str, bool) -> bool,
    config: &AppConfig,
    files: &[SourceFile],
    d: &mut Diagnostics,
) {
    // `file` is where the path is written: the sandbox's file, or the file
    // of the component with that name.
    let mut check =
        |owner: &str, in_file: &dyn Fn(&SourceFile) -> bool, path: &str, is_dir: bool| {
            if exists(path, is_dir) {
                return;
            }
            let Some(f) = files.iter().find(|f| in_file(f) && f.text.contains(path)) else {
                return;
            };
            let at = f.text.find(path).map(|i| i.saturating_sub(1)).unwrap_or(0);
            d.push(f.diag(
                at,
                format!(
                    "{owner}: {} {path:?} does not exist next to the config",
                    if is_dir { "directory" } else { "file" }
                ),
            ));
        };
    if let Some(s) = &config.sandbox {
        let in_file = |f: &SourceFile| f.name == "sandbox.toml";
        if let Source::Path { path } = &s.source {
            check("the sandbox", &in_file, path, true);
        }
    }
    for c in &config.components {
        let owner = format!("component {:?}", c.name);
        let quoted = format!("{:?}", c.name);
        let in_file =
            |f: &SourceFile| f.name.starts_with("components/") && f.text.contains(&quoted);
        if let Source::Path { path } = &c.source {
            check(&owner, &in_file, path, true);
        }
    }
    // Files named in contents: next to the part's file, or at the top.
    for (who, category, path) in super::file_refs(config) {
        let Ok(candidates) = super::file_ref_candidates(category, &path) else {
            continue;
        };
        if candidates.iter().any(|c| exists(c, false)) {
            continue;
        }
        let in_file = |f: &SourceFile| {
            (category.is_empty() || f.name.starts_with(category)) && f.text.contains(&path)
        };
        check(&who, &in_file, &path, false);
    }
}

/// The component whose `kubeconfig` output the kubernetes context `named`
/// reads (an error when no context has that name).
fn context_component(
    named: Option<&Located>,
    loaded: &Loaded,
    file: &SourceFile,
    d: &mut Diagnostics,
) -> Option<String> {
    let named = named?;
    let contexts = &loaded.platform.kubernetes_contexts;
    match contexts.iter().find(|k| k.name == named.text) {
        Some(k) => Some(k.component.clone()),
        None => {
            let hint = if contexts.is_empty() {
                ": kubernetes_contexts.toml declares none".to_owned()
            } else {
                did_you_mean(&named.text, contexts.iter().map(|k| k.name.as_str()))
            };
            d.push(file.at(
                &named.span,
                format!("unknown kubernetes context {:?}{hint}", named.text),
            ));
            None
        }
    }
}
