use super::*;

fn files(list: &[(&str, &str)]) -> Vec<SourceFile> {
    list.iter().map(|(n, t)| SourceFile::new(*n, *t)).collect()
}

const META: (&str, &str) = ("metadata.toml", "version = \"v2\"\n");

fn image(name: &str, extra: &str) -> String {
    format!(
        "name = \"{name}\"\ntype = \"container_image\"\n{extra}\n[public]\nimage_url = \"{name}\"\ntag = \"1\"\n"
    )
}

#[test]
fn components_come_in_dependency_order_with_every_dependency() {
    let web = "name = \"web\"\ntype = \"terraform_module\"\nterraform_version = \"1.9.0\"\noci = \"r/web:1\"\n[vars]\nurl = \"{{ .nuon.components.db.outputs.url }}\"\n";
    let f = files(&[
        META,
        ("components/web.toml", web),
        (
            "components/db.toml",
            &image("db", "dependencies = [\"net\"]"),
        ),
        ("components/net.toml", &image("net", "")),
        (
            "components/aaa.toml",
            &image("aaa", "dependencies = [\"web\"]"),
        ),
    ]);
    let (config, d) = parse(&f);
    assert!(d.is_empty(), "{d}");
    let config = config.unwrap();
    let order: Vec<_> = config.components.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(order, ["net", "db", "web", "aaa"]);
    let web = config.component("web").unwrap();
    assert!(web.dependencies.is_empty());
    assert_eq!(web.depends_on, ["db"]);
    assert_eq!(config.component("aaa").unwrap().depends_on, ["web"]);
}

#[test]
fn parse_works_on_files_alone_and_reports_in_file_order() {
    let f = files(&[
        ("components/b.toml", "name = \"b\"\ntype = \"nope\"\n"),
        ("components/a.toml", "name = \"a\"\n"),
    ]);
    let (config, d) = parse(&f);
    assert!(config.is_none());
    let lines: Vec<String> = d.iter().map(|x| x.to_string()).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("components/a.toml:1:1: missing required key \"type\""));
    assert!(lines[1].starts_with("components/b.toml:2:8: unknown component type \"nope\""));
    assert!(lines[2].starts_with("metadata.toml:1:1: missing metadata.toml"));
}

#[test]
fn input_types_coerce_nuon_strings() {
    use serde_json::json;
    assert_eq!(InputType::Number.coerce(&json!("3")), Ok(json!(3)));
    assert_eq!(InputType::Bool.coerce(&json!("false")), Ok(json!(false)));
    assert_eq!(InputType::List.coerce(&json!("a,b")), Ok(json!(["a", "b"])));
    assert_eq!(
        InputType::Json.coerce(&json!("{\"a\":1}")),
        Ok(json!({"a": 1}))
    );
    assert!(InputType::String.coerce(&json!(3)).is_err());
    assert!(InputType::Bool.coerce(&json!("yes")).is_err());
}

/// A `[public_repo]`'s `owner/name` is cloned from GitHub; a URL is
/// cloned as it is.
#[test]
fn a_public_repos_clone_url() {
    assert_eq!(
        super::public_repo_url("nuonco/example-app-configs"),
        "https://github.com/nuonco/example-app-configs.git"
    );
    for url in [
        "https://gitlab.com/acme/app.git",
        "file:///srv/git/app",
        "git@github.com:acme/app.git",
    ] {
        assert_eq!(super::public_repo_url(url), url);
    }
}

/// A template that would exhaust any render's budget is refused at
/// validate, naming the file, line and column and the budget; the other
/// values are not blamed.
#[test]
fn a_template_bomb_is_refused_at_validate_with_its_place_and_the_budget() {
    let bomb = "{{ .nuon.install.id }}{{ range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}-x";
    let web = format!(
        "name = \"web\"\ntype = \"terraform_module\"\nterraform_version = \"1.9.0\"\noci = \"r/web:1\"\n[vars]\nok = \"{{{{ .nuon.install.id }}}}\"\nname = \"{bomb}\"\nafter = \"{{{{ .nuon.app.id }}}}\"\n"
    );
    let f = files(&[META, ("components/web.toml", &web)]);
    let (config, d) = parse(&f);
    assert!(config.is_none());
    let lines: Vec<String> = d.iter().map(|x| x.to_string()).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    // The inner range's body, on line 7 after `name = "`.
    assert!(lines[0].starts_with("components/web.toml:7:"), "{lines:?}");
    assert!(
        lines[0].contains("work budget exhausted: over 4000000 steps"),
        "{lines:?}"
    );
}

/// A config written as Nuon's apps are in 2026: the old trigger names, an
/// empty boundary, a role's policy in a file, Nuon's state read by name.
fn nuon_style(runner_type: &str, role_name: &str) -> Vec<SourceFile> {
    let role = format!(
        "type = \"custom\"\nname = \"{role_name}\"\ndescription = \"reads\"\npermissions_boundary = \"\"\n\n[[policies]]\nname = \"read\"\ncontents = \"./read.json\"\n"
    );
    let web = "name = \"web\"\ntype = \"terraform_module\"\nterraform_version = \"1.9.0\"\noci = \"r/web:1\"\n[vars]\nregion = \"{{ .nuon.cloud_account.aws.region }}\"\nvendor = \"{{ .nuon.org.name }}-{{ .nuon.id }}-{{ .nuon.runner.id }}-{{ .nuon.domain.public_domain }}\"\n";
    let action = "name = \"hook\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"post-component-deploy\"\ncomponent_name = \"web\"\n\n[[steps]]\nname = \"say\"\nenable_kube_config = true\ncommand = \"echo hi {{ .action.inputs.who }}\"\n";
    files(&[
        META,
        ("runner.toml", &format!("runner_type = \"{runner_type}\"\n")),
        ("permissions/reader.toml", &role),
        ("components/web.toml", web),
        ("actions/hook.toml", action),
    ])
}

#[test]
fn nuons_spellings_are_read_as_nuon_reads_them() {
    let (config, d) = parse(&nuon_style("aws", "{{ .nuon.install.id }}-reader"));
    assert!(!d.has_errors(), "{d}");
    let warnings: Vec<String> = d.warnings().map(|w| w.to_string()).collect();
    assert!(
        warnings.iter().any(|w| w.contains(
            "trigger type \"post-component-deploy\" is the old name of \"post-deploy-component\""
        )),
        "{warnings:?}"
    );
    let config = config.unwrap();
    assert_eq!(config.actions[0].triggers[0].kind, "post-deploy-component");
    // A step asking for the kubeconfig gives the action's script one.
    assert!(config.actions[0].enable_kube_config);
    // An empty boundary is none; the policy's file is named, and kept
    // with the version as its text.
    let role = &config.permissions.roles[0];
    assert_eq!(role.permissions_boundary, None);
    assert!(
        file_refs(&config)
            .iter()
            .any(|(who, _, path)| who.contains("reader") && path == "./read.json"),
        "{:?}",
        file_refs(&config)
    );
    let mut kept = config.clone();
    let problems = inline_file_refs(&mut kept, &|p| {
        (p == "permissions/read.json").then(|| "{\"Version\": \"2012-10-17\"}".to_owned())
    });
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        kept.permissions.roles[0].policies[0]["contents"],
        "{\"Version\": \"2012-10-17\"}"
    );
}

#[test]
fn a_role_name_past_iams_limit_is_refused_at_validate_with_the_limit_and_length() {
    let long = "{{ .nuon.install.id }}-reporting-service-readonly-access-for-ops";
    let (config, d) = parse(&nuon_style("aws", long));
    assert!(config.is_none());
    let e = d.to_string();
    assert!(
        e.contains("is 72 characters long as it renders for an install"),
        "{e}"
    );
    assert!(e.contains("an AWS IAM role name is at most 64"), "{e}");
    assert!(e.contains("permissions/reader.toml:2:8: role name"), "{e}");
    let (_, d) = parse(&nuon_style("aws", &"r".repeat(65)));
    assert!(
        d.to_string()
            .contains("is 65 characters long; an AWS IAM role name is at most 64"),
        "{d}"
    );
    // Not AWS's role (a GCP runner), or a name that reads the install's
    // name (checked when its stack is made, with the real name): no error.
    assert!(!parse(&nuon_style("gcp", &"r".repeat(65))).1.has_errors());
    let named = "{{ .nuon.install.name }}-reporting-service-readonly-access-for-ops";
    assert!(!parse(&nuon_style("aws", named)).1.has_errors());
}

#[test]
fn an_inline_runbook_step_runs_as_an_action_of_its_own() {
    let rb = "name = \"ops\"\n\n[[steps]]\nname = \"fix\"\ntype = \"action\"\ninline_contents = \"echo fixing\"\nrole = \"maintenance\"\nenable_kube_config = true\n";
    let (config, d) = parse(&files(&[META, ("runbooks/ops.toml", rb)]));
    assert!(d.is_empty(), "{d}");
    let config = config.unwrap();
    let a = config
        .actions
        .iter()
        .find(|a| a.name == "runbook-ops-fix")
        .unwrap();
    assert!(a.triggers.is_empty());
    assert_eq!(a.steps[0].inline_contents.as_deref(), Some("echo fixing"));
    assert_eq!(a.role.as_deref(), Some("maintenance"));
    assert!(a.enable_kube_config);
    assert_eq!(
        config.runbooks[0].steps[0]["action_name"],
        "runbook-ops-fix"
    );
    // Its name is the config's to give once.
    let clash = "name = \"runbook-ops-fix\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"x\"\ncommand = \"true\"\n";
    let (config, d) = parse(&files(&[
        META,
        ("runbooks/ops.toml", rb),
        ("actions/clash.toml", clash),
    ]));
    assert!(config.is_none());
    assert!(
        d.to_string().contains("runs as action \"runbook-ops-fix\""),
        "{d}"
    );
    // Neither an action nor inline: still an error.
    let bare = "name = \"ops\"\n\n[[steps]]\nname = \"fix\"\ntype = \"action\"\n";
    let (_, d) = parse(&files(&[META, ("runbooks/ops.toml", bare)]));
    assert!(d.to_string().contains("needs action_name"), "{d}");
}

#[test]
fn a_runbooks_steps_run_as_nuon_runs_its_step_types() {
    use crate::workflow::{StepKind, WorkflowKind, plan};
    let comp = |name: &str, url: &str| {
        format!(
            "name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \"1.9.0\"\noci = \"r/{name}:1\"\n[vars]\nx = \"{url}\"\n"
        )
    };
    let (db, api, web) = (
        comp("db", "1"),
        comp("api", "{{ .nuon.components.db.outputs.url }}"),
        comp("web", "{{ .nuon.components.api.outputs.url }}"),
    );
    let sandbox = "terraform_version = \"1.9.0\"\npath = \"./sandbox\"\n";
    let rb = "name = \"ops\"\n\n\
        [[steps]]\nname = \"web alone\"\ntype = \"deploy\"\ncomponent_name = \"web\"\n\n\
        [[steps]]\nname = \"web and below\"\ntype = \"deploy\"\ncomponent_name = \"web\"\ndeploy_dependencies = true\n\n\
        [[steps]]\nname = \"infra\"\ntype = \"sandbox_reprovision\"\nskip_component_deploys = true\n\n\
        [[steps]]\nname = \"all\"\ntype = \"sandbox_provision\"\n\n\
        [[steps]]\nname = \"gone\"\ntype = \"sandbox_deprovision\"\n";
    let (config, d) = parse(&files(&[
        META,
        ("sandbox.toml", sandbox),
        ("components/db.toml", &db),
        ("components/api.toml", &api),
        ("components/web.toml", &web),
        ("runbooks/ops.toml", rb),
    ]));
    assert!(!d.has_errors(), "{d}");
    let steps: Vec<String> = plan(&config.unwrap(), WorkflowKind::Runbook, false, Some("ops"))
        .iter()
        .filter(|s| {
            !matches!(
                s.kind,
                StepKind::Sync
                    | StepKind::SandboxSync
                    | StepKind::Plan
                    | StepKind::SandboxPlan
                    | StepKind::SandboxDestroyPlan
            )
        })
        .map(|s| match &s.target {
            Some(c) => format!("{:?} {c}", s.kind),
            None => format!("{:?}", s.kind),
        })
        .collect();
    assert_eq!(
        steps,
        [
            "Apply web",
            "Apply db",
            "Apply api",
            "Apply web",
            "SandboxApply",
            "SandboxApply",
            "Apply db",
            "Apply api",
            "Apply web",
            "SandboxDestroy",
        ],
        "deploy one, deploy with what it depends on (in order), the sandbox alone, the sandbox then every component, the sandbox's teardown"
    );
}

/// A component is stored and sent flat, as the config writes it: `type`
/// beside the common keys and the kind's own. Records written before
/// [`ComponentSpec`] (one struct of every kind's keys) read the same.
#[test]
fn a_component_keeps_its_flat_stored_form() {
    let stored = serde_json::json!({
        "name": "web",
        "type": "helm_chart",
        "dependencies": ["db"],
        "source": {"kind": "path", "path": "./chart"},
        "chart_name": "web",
        "namespace": "{{ .nuon.install.id }}",
        "values": {"replicas": 2},
        "take_ownership": true,
        "max_auto_retries": 2,
        "default_enabled": false,
        "toggleable": true,
        "kubernetes_context": "edge",
    });
    let c: Component = serde_json::from_value(stored.clone()).unwrap();
    assert_eq!(c.kind(), ComponentKind::HelmChart);
    let h = c.helm().unwrap();
    assert_eq!(h.chart_name, "web");
    assert_eq!(h.namespace.as_deref(), Some("{{ .nuon.install.id }}"));
    assert!(h.take_ownership);
    assert_eq!(c.kubernetes_context.as_deref(), Some("edge"));
    assert!(c.terraform().is_none());
    assert_eq!(serde_json::to_value(&c).unwrap(), stored);

    // A kind with nothing of its own is its type alone.
    let image = serde_json::json!({
        "name": "db",
        "type": "container_image",
        "source": {"kind": "image", "image_url": "postgres", "tag": "16"},
    });
    let c: Component = serde_json::from_value(image.clone()).unwrap();
    assert_eq!(c.spec, ComponentSpec::ContainerImage);
    assert_eq!(serde_json::to_value(&c).unwrap(), image);

    // A kind's required key missing is an error of the record, named.
    let broken = serde_json::json!({"name": "x", "type": "terraform_module", "source": {"kind": "path", "path": "."}});
    let e = serde_json::from_value::<Component>(broken).unwrap_err();
    assert!(e.to_string().contains("terraform_version"), "{e}");
}
