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
    use nuon_core::workflow::{StepKind, WorkflowKind, plan};
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

/// The workflow planner over configs read from their files.
mod plans {
    use nuon_core::app::{AppConfig, SourceFile};
    use nuon_core::workflow::*;

    use crate::parse;

    fn config() -> AppConfig {
        let image = |name: &str, deps: &str| {
            format!(
                "name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\ndependencies = [{deps}]\npath = \"./{name}\"\n"
            )
        };
        let files = vec![
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            SourceFile::new(
                "sandbox.toml",
                "terraform_version = \"1.9.0\"\npath = \"./sb\"\n",
            ),
            SourceFile::new("components/web.toml", image("web", "\"db\"")),
            SourceFile::new("components/db.toml", image("db", "")),
            SourceFile::new(
                "actions/check.toml",
                "name = \"check\"\ntimeout = \"1m\"\n[[triggers]]\ntype = \"post-deploy-component\"\ncomponent_name = \"db\"\n[[triggers]]\ntype = \"post-provision\"\n[[steps]]\nname = \"s\"\ncommand = \"true\"\n",
            ),
        ];
        let (c, d) = parse(&files);
        c.unwrap_or_else(|| panic!("{d}"))
    }

    fn names(steps: &[PlannedStep]) -> Vec<String> {
        steps
            .iter()
            .map(|s| {
                format!(
                    "{}{}",
                    s.name,
                    if s.needs_approval { " (approval)" } else { "" }
                )
            })
            .collect()
    }

    #[test]
    fn provision_builds_the_sandbox_then_components_in_order_with_hooks() {
        let steps = plan(&config(), WorkflowKind::Provision, true, None);
        assert_eq!(
            names(&steps),
            [
                "await install stack",
                "await runner",
                "sync sandbox",
                "plan sandbox",
                "apply sandbox (approval)",
                "sync db",
                "plan db",
                "apply db (approval)",
                "action check",
                "sync web",
                "plan web",
                "apply web (approval)",
                "action check",
            ]
        );
        let deploy = plan(&config(), WorkflowKind::Deploy, false, None);
        assert_eq!(
            names(&deploy),
            [
                "sync db",
                "plan db",
                "apply db",
                "action check",
                "sync web",
                "plan web",
                "apply web"
            ]
        );
    }

    #[test]
    fn teardown_goes_dependents_first_and_deprovision_ends_with_the_sandbox() {
        let steps = plan(&config(), WorkflowKind::Deprovision, true, None);
        assert_eq!(
            names(&steps),
            [
                "sync web",
                "plan destroy web",
                "destroy web (approval)",
                "sync db",
                "plan destroy db",
                "destroy db (approval)",
                "sync sandbox",
                "plan destroy sandbox",
                "destroy sandbox (approval)",
            ]
        );
        assert_eq!(steps[2].target.as_deref(), Some("web"));
        assert_eq!(steps[2].kind, StepKind::Destroy);
    }

    #[test]
    fn an_image_is_deployed_by_its_sync_and_has_nothing_to_destroy() {
        let files = vec![
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            SourceFile::new(
                "components/img.toml",
                "name = \"img\"\ntype = \"container_image\"\n[public]\nimage_url = \"r.example/img\"\ntag = \"1\"\n",
            ),
        ];
        let (c, d) = parse(&files);
        let c = c.unwrap_or_else(|| panic!("{d}"));
        assert_eq!(
            names(&plan(&c, WorkflowKind::Deploy, true, None)),
            ["sync img"]
        );
        assert!(plan(&c, WorkflowKind::Teardown, true, None).is_empty());
    }

    #[test]
    fn one_component_gets_only_its_own_steps() {
        let steps = plan(&config(), WorkflowKind::Deploy, false, Some("db"));
        assert_eq!(
            names(&steps),
            ["sync db", "plan db", "apply db", "action check"]
        );
        let steps = plan(&config(), WorkflowKind::Teardown, true, Some("web"));
        assert_eq!(
            names(&steps),
            ["sync web", "plan destroy web", "destroy web (approval)"]
        );
    }

    #[test]
    fn a_teardown_of_one_component_takes_its_dependents_down_first() {
        let steps = plan_with(&config(), WorkflowKind::Teardown, false, Some("db"), true);
        assert_eq!(
            names(&steps),
            [
                "sync web",
                "plan destroy web",
                "destroy web",
                "sync db",
                "plan destroy db",
                "destroy db",
            ]
        );
        // Nothing depends on web; and a deploy is never widened.
        let steps = plan_with(&config(), WorkflowKind::Teardown, false, Some("web"), true);
        assert_eq!(names(&steps).len(), 3);
        let steps = plan_with(&config(), WorkflowKind::Deploy, false, Some("db"), true);
        assert_eq!(
            names(&steps),
            ["sync db", "plan db", "apply db", "action check"]
        );
    }

    #[test]
    fn a_denial_leaves_out_dependents_when_deploying_and_dependencies_when_destroying() {
        let c = config();
        let (out, sandbox) = left_out_by_denial(&c, Some("db"), false);
        assert_eq!(out.into_iter().collect::<Vec<_>>(), ["db", "web"]);
        assert!(!sandbox);
        let (out, sandbox) = left_out_by_denial(&c, Some("web"), false);
        assert_eq!(out.into_iter().collect::<Vec<_>>(), ["web"]);
        assert!(!sandbox);
        let (out, sandbox) = left_out_by_denial(&c, Some("web"), true);
        assert_eq!(out.into_iter().collect::<Vec<_>>(), ["db", "web"]);
        assert!(sandbox, "the sandbox outlives every component");
        let (out, sandbox) = left_out_by_denial(&c, None, false);
        assert_eq!(out.len(), 2);
        assert!(sandbox);
    }

    /// Every lifecycle trigger a workflow plans fires at its point: one
    /// action per trigger (named as its trigger; the component triggers
    /// name db), in every workflow kind, and for one component.
    #[test]
    fn every_lifecycle_trigger_fires_at_its_point() {
        // Every trigger a workflow's plan places: all of Nuon's but
        // those of a person, a schedule or a change outside a plan
        // (toggles, inputs, the secrets sync, break-glass roles).
        let all: Vec<&str> = nuon_core::app::TRIGGERS
            .iter()
            .copied()
            .filter(|t| {
                !matches!(*t, "manual" | "cron" | "role-enabled" | "role-disabled")
                    && !t.ends_with("able-component")
                    && !t.ends_with("-update-inputs")
                    && !t.ends_with("-secrets-sync")
            })
            .collect();
        let tf = |name: &str, deps: &str| {
            format!(
                "name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\ndependencies = [{deps}]\npath = \"./{name}\"\n"
            )
        };
        let mut files = vec![
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            SourceFile::new(
                "sandbox.toml",
                "terraform_version = \"1.9.0\"\npath = \"./sb\"\n",
            ),
            SourceFile::new("components/web.toml", tf("web", "\"db\"")),
            SourceFile::new("components/db.toml", tf("db", "")),
        ];
        for t in &all {
            let component = if t.ends_with("-component") {
                "component_name = \"db\"\n"
            } else {
                ""
            };
            files.push(SourceFile::new(
                format!("actions/{t}.toml"),
                format!("name = \"{t}\"\ntimeout = \"1m\"\n[[triggers]]\ntype = \"{t}\"\n{component}[[steps]]\nname = \"s\"\ncommand = \"true\"\n"),
            ));
        }
        let (c, d) = parse(&files);
        let c = c.unwrap_or_else(|| panic!("{d}"));
        let plan_of = |kind, only| names(&plan(&c, kind, false, only));
        let mut fired = std::collections::BTreeSet::new();
        let mut check = |what: &str, got: Vec<String>, want: &[&str]| {
            assert_eq!(got, want, "{what}");
            fired.extend(
                got.iter()
                    .filter_map(|s| s.strip_prefix("action "))
                    .map(str::to_owned),
            );
        };
        let db = [
            "action pre-deploy-component",
            "sync db",
            "plan db",
            "apply db",
            "action post-deploy-component",
        ];
        let web = ["sync web", "plan web", "apply web"];
        let deploy_all = [
            &["action pre-deploy-all-components"][..],
            &db,
            &web,
            &["action post-deploy-all-components"],
        ]
        .concat();
        check(
            "provision",
            plan_of(WorkflowKind::Provision, None),
            &[
                &[
                    "await install stack",
                    "await runner",
                    "action pre-provision",
                    "sync sandbox",
                    "plan sandbox",
                    "apply sandbox",
                    "action post-provision-sandbox",
                ][..],
                &deploy_all,
                &["action post-provision"],
            ]
            .concat(),
        );
        check(
            "reprovision",
            plan_of(WorkflowKind::Reprovision, None),
            &[
                &[
                    "await runner",
                    "action pre-reprovision",
                    "action pre-reprovision-sandbox",
                    "sync sandbox",
                    "plan sandbox",
                    "apply sandbox",
                    "action post-reprovision-sandbox",
                ][..],
                &deploy_all,
                &["action post-reprovision"],
            ]
            .concat(),
        );
        check("deploy", plan_of(WorkflowKind::Deploy, None), &deploy_all);
        check("deploy db", plan_of(WorkflowKind::Deploy, Some("db")), &db);
        check(
            "deploy web",
            plan_of(WorkflowKind::Deploy, Some("web")),
            &web,
        );
        let web_down = ["sync web", "plan destroy web", "destroy web"];
        let db_down = [
            "action pre-teardown-component",
            "sync db",
            "plan destroy db",
            "destroy db",
            "action post-teardown-component",
        ];
        let teardown_all = [
            &["action pre-teardown-all-components"][..],
            &web_down,
            &db_down,
            &["action post-teardown-all-components"],
        ]
        .concat();
        check(
            "teardown",
            plan_of(WorkflowKind::Teardown, None),
            &teardown_all,
        );
        check(
            "teardown db",
            plan_of(WorkflowKind::Teardown, Some("db")),
            &db_down,
        );
        check(
            "deprovision",
            plan_of(WorkflowKind::Deprovision, None),
            &[
                &["action pre-deprovision"][..],
                &teardown_all,
                &[
                    "action pre-deprovision-sandbox",
                    "sync sandbox",
                    "plan destroy sandbox",
                    "destroy sandbox",
                    "action post-deprovision-sandbox",
                    "action post-deprovision",
                ],
            ]
            .concat(),
        );
        let all: std::collections::BTreeSet<String> = all.iter().map(|s| s.to_string()).collect();
        assert_eq!(all.len(), 19, "{all:?}");
        assert_eq!(fired, all, "every trigger fired somewhere");
    }
}

/// The role a step runs with, over configs read from their files.
mod roles {
    use nuon_core::app::{OperationRoles, OperationRule, Permissions, Role, SourceFile};
    use nuon_core::stack::roles::role_for;
    use nuon_core::workflow::{StepKind, WorkflowKind};

    use crate::parse;

    fn role(kind: &str, name: &str) -> Role {
        Role {
            kind: Some(kind.into()),
            name: name.into(),
            description: "d".into(),
            ..Role::default()
        }
    }

    #[test]
    fn the_sandboxs_own_operation_roles() {
        use StepKind::*;
        use WorkflowKind as W;
        let files = vec![
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            SourceFile::new(
                "sandbox.toml",
                "terraform_version = \"1.9.0\"\npath = \"sandbox\"\n\n[[operation_roles]]\noperation = \"provision\"\nrole = \"dns\"\n\n[[operation_roles]]\noperation = \"reprovision\"\nrole = \"dns\"\n",
            ),
            SourceFile::new("sandbox/main.tf", ""),
            SourceFile::new(
                "permissions.toml",
                "[[custom_roles]]\nname = \"dns\"\ndescription = \"DNS\"\n\n[[custom_roles.policies]]\nmanaged_policy_name = \"AmazonRoute53FullAccess\"\n",
            ),
        ];
        let (c, d) = parse(&files);
        let mut c = c.unwrap_or_else(|| panic!("{d}"));
        c.permissions = Permissions {
            roles: ["provision", "maintenance", "deprovision"]
                .into_iter()
                .map(|op| role(op, &op[..1]))
                .chain([role("custom", "dns")])
                .collect(),
            named_policies: vec![],
            break_glass: vec![role("custom", "bg")],
        };
        c.operation_roles = Some(OperationRoles {
            kind: "matrix".into(),
            rules: vec![OperationRule {
                principal: "nuon::sandbox".into(),
                operation: "reprovision".into(),
                role: "m".into(),
            }],
        });
        let of = |wf, step| role_for(&c, wf, step, None).unwrap().unwrap();
        let own = of(W::Provision, SandboxApply);
        assert_eq!(own.name, "dns");
        assert_eq!(own.because, "the sandbox's operation_roles provision");
        assert_eq!(of(W::Reprovision, SandboxPlan).name, "m", "the rule wins");
        assert_eq!(of(W::Deprovision, SandboxDestroy).name, "d");
        assert_eq!(of(W::Provision, SecretsSync).name, "dns");
    }
}
