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
