//! Install labels and groups: set on create and later, selected by label
//! selectors whose members follow the labels, refused with a reason when
//! malformed, and read from `installs/*.toml`.

use nuon_tests::ControlPlane;
use serde_json::Value;

use crate::deploy::{example, ok, text};

fn names(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            i.as_str()
                .map_or_else(|| i["name"].as_str().unwrap().to_owned(), str::to_owned)
        })
        .collect()
}

#[test]
fn labels_select_installs_and_groups_follow_them() {
    let cp = ControlPlane::start("10s").unwrap();
    ok(cp.nuon(&["apps", "create", "hello"]));
    ok(cp.nuon(&[
        "apps",
        "sync",
        example().to_str().unwrap(),
        "--app",
        "hello",
    ]));
    for (name, labels) in [
        ("a", ["tier=prod", "region=eu"]),
        ("b", ["tier=prod", "region=us"]),
        ("c", ["tier=trial", "region=eu"]),
    ] {
        let mut args = vec!["installs", "create", "--app", "hello", "--name", name];
        args.extend(["--input", "api_key=k3y-demo"]);
        for l in labels {
            args.extend(["--label", l]);
        }
        ok(cp.nuon(&args));
    }
    let json = |args: &[&str]| -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&ok(cp.nuon(&all))).unwrap()
    };
    assert_eq!(
        names(
            &json(&["installs", "list", "--selector", "tier=prod"]),
            "installs"
        ),
        ["a", "b"]
    );
    assert_eq!(
        names(
            &json(&[
                "installs",
                "list",
                "--selector",
                "tier in (prod,trial),region!=us"
            ]),
            "installs"
        ),
        ["a", "c"]
    );
    // Pages: at most --limit, oldest first, and where the next starts.
    let page = |selector: &str, limit: &str, after: Option<&str>| -> Value {
        let mut args = vec!["installs", "list", "--selector", selector, "--limit", limit];
        args.extend(after.map(|a| ["--after", a]).into_iter().flatten());
        json(&args)
    };
    let first = page("", "2", None);
    assert_eq!(names(&first, "installs"), ["a", "b"]);
    let next = first["next"].as_str().expect("a next page").to_owned();
    let last = page("", "2", Some(&next));
    assert_eq!(names(&last, "installs"), ["c"]);
    assert!(last.get("next").is_none(), "{last}");
    let one = page("region=eu", "1", None);
    assert_eq!(names(&one, "installs"), ["a"]);
    let two = page("region=eu", "1", one["next"].as_str());
    assert_eq!(names(&two, "installs"), ["c"]);
    assert!(two.get("next").is_none(), "{two}");
    let out = cp.nuon(&[
        "installs",
        "list",
        "--selector",
        "tier=prod",
        "--limit",
        "1",
    ]);
    let hint = String::from_utf8_lossy(&out.stderr).into_owned();
    let cmd = hint
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no next page's command: {hint}"));
    assert!(
        cmd.starts_with("nuon installs list --selector 'tier=prod' --limit 1 --after "),
        "{cmd}"
    );
    // The command it gives is the next page's, as printed.
    let after = cmd.rsplit(' ').next().unwrap();
    let b = page("tier=prod", "1", Some(after));
    assert_eq!(names(&b, "installs"), ["b"]);
    // Without --limit, every install as before, and no cursor.
    let all = json(&["installs", "list"]);
    assert_eq!(names(&all, "installs"), ["a", "b", "c"]);
    assert!(all.get("next").is_none(), "{all}");
    // A page asked wrongly is refused with what to pass.
    let out = cp.nuon(&["installs", "list", "--limit", "2", "--after", "junk"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(
        text(&out).contains("the `next` of the page before"),
        "{}",
        text(&out)
    );
    let out = cp.nuon(&["installs", "list", "--after", &next]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    for (query, says) in [
        ("limit=0", "a page holds 1 to 1000"),
        ("limit=1001", "a page holds 1 to 1000"),
        ("limit=2&after=junk", "the `next` of the page before"),
        (&format!("after={next}") as &str, "pass limit too"),
        ("limit=2&page=3", "unknown field"),
    ] {
        let (status, body) = nuon_tests::rt().block_on(async {
            let r = reqwest::Client::new()
                .get(format!("{}/v1/installs?{query}", cp.control_url))
                .bearer_auth(&cp.admin_token)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        });
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.contains(says), "{query}: {body}");
    }

    let get = json(&["installs", "get", "a"]);
    assert_eq!(
        get["labels"],
        serde_json::json!({"region": "eu", "tier": "prod"})
    );

    // A group's members are whichever installs match it when it is read.
    let g = json(&[
        "installs",
        "groups",
        "create",
        "eu",
        "--selector",
        "region=eu,tier!=trial",
    ]);
    assert_eq!(names(&g, "installs"), ["a"]);
    json(&["installs", "label", "c", "tier=prod"]);
    assert_eq!(
        names(&json(&["installs", "groups", "get", "eu"]), "installs"),
        ["a", "c"]
    );
    let a = json(&["installs", "label", "a", "region-", "team=core"]);
    assert_eq!(
        a["labels"],
        serde_json::json!({"team": "core", "tier": "prod"})
    );
    assert_eq!(
        names(&json(&["installs", "groups", "get", "eu"]), "installs"),
        ["c"]
    );
    json(&["installs", "groups", "create", "everyone", "--selector", ""]);
    let list = json(&["installs", "groups", "list"]);
    assert_eq!(names(&list, "groups"), ["eu", "everyone"]);
    assert_eq!(names(&list["groups"][1], "installs"), ["a", "b", "c"]);
    let table = ok(cp.nuon(&["installs", "list"]));
    assert!(table.contains("team=core,tier=prod"), "{table}");

    // Bad input: refused with what is wrong, nothing changed.
    let out = cp.nuon(&["installs", "label", "a", "bad key=1"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(text(&out).contains("name must be"), "{}", text(&out));
    let out = cp.nuon(&[
        "installs",
        "groups",
        "create",
        "x",
        "--selector",
        "tier in prod",
    ]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(text(&out).contains("list in parentheses"), "{}", text(&out));
    let out = cp.nuon(&[
        "installs",
        "groups",
        "create",
        "eu",
        "--selector",
        "tier=prod",
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("already exists"), "{}", text(&out));
    // The API checks too, for clients other than the CLI.
    let api = cp.client();
    let err = nuon_tests::rt()
        .block_on(api.create_group("raw", "region in (eu"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("without its ')'"), "{err}");
    let err = nuon_tests::rt()
        .block_on(api.set_install_labels(
            "b",
            &nuon_core::wire::LabelChange {
                set: [("tier".to_owned(), "x".repeat(70))].into(),
                remove: vec![],
            },
        ))
        .unwrap_err()
        .to_string();
    assert!(err.contains("at most 63"), "{err}");
    assert_eq!(json(&["installs", "get", "b"])["labels"]["tier"], "prod");

    let gone = json(&["installs", "groups", "delete", "eu"]);
    assert_eq!(gone["name"], "eu");
    let out = cp.nuon(&["installs", "groups", "get", "eu"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("no group \"eu\""), "{}", text(&out));
    // The installs stay.
    assert_eq!(
        names(&json(&["installs", "list"]), "installs"),
        ["a", "b", "c"]
    );
}

#[test]
fn labels_in_installs_files_are_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("app");
    let copy = |from: &std::path::Path, to: &std::path::Path| {
        let out = std::process::Command::new("cp")
            .arg("-r")
            .arg(from)
            .arg(to)
            .output()
            .unwrap();
        assert!(out.status.success());
    };
    copy(&example(), &app);
    let demo = app.join("installs/demo.toml");
    let mut text_of = std::fs::read_to_string(&demo).unwrap();
    text_of = text_of.replace(
        "approval_option = \"approve-all\"",
        "approval_option = \"approve-all\"\nlabels = { tier = \"prod\", \"example.com/team\" = \"core\" }",
    );
    std::fs::write(&demo, &text_of).unwrap();
    let cp = ControlPlane::start("10s").unwrap();
    let out = cp.nuon(&["apps", "validate", app.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        !text(&out).contains("labels"),
        "labels are read now, not warned about: {}",
        text(&out)
    );

    std::fs::write(
        &demo,
        text_of.replace("tier = \"prod\"", "tier = \"no spaces allowed\""),
    )
    .unwrap();
    // Nuon keeps any string; one that cannot select here is left out with
    // a warning at its place, and the config stays valid.
    let out = cp.nuon(&["apps", "validate", app.to_str().unwrap()]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("installs/demo.toml:6:"), "{t}");
    assert!(t.contains("label tier=\"no spaces allowed\""), "{t}");
    assert!(t.contains("the label is left out"), "{t}");
}

#[test]
fn a_release_freezes_a_config_version_and_its_builds() {
    use crate::deploy::{BOX_APP, Manual};
    if !nuon_tests::have_tool("terraform", "build a Terraform component") {
        return;
    }
    let m = Manual::start(&[BOX_APP[0], BOX_APP[1], BOX_APP[2]]);
    let json = |args: &[&str]| -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&ok(m.cp.nuon(&all))).unwrap()
    };
    let first = json(&["releases", "create", "--app", "app"]);
    let built = json(&["builds", "list", "--app", "app"]);
    let box_build = built["builds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["component"] == "box")
        .unwrap()
        .clone();
    assert_eq!(first["config_version"], 1);
    assert_eq!(first["builds"]["box"], box_build["artifact"], "{first}");

    // A new config version, built: the first release keeps its artifact.
    let app = m.dir.path().join("app");
    std::fs::write(
        app.join("src/box/main.tf"),
        "resource \"terraform_data\" \"box\" {\n  input = \"box v2\"\n}\n",
    )
    .unwrap();
    ok(m.cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    // Not built yet: refused, with what to run.
    let out = m.cp.nuon(&["releases", "create", "--app", "app"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("has none of box"), "{}", text(&out));
    assert!(
        text(&out).contains("nuon builds create --app app"),
        "{}",
        text(&out)
    );
    ok(m.cp.nuon(&["builds", "create", "--app", "app", "--wait"]));
    let second = json(&["releases", "create", "--app", "app"]);
    assert_eq!(second["config_version"], 2);
    assert_ne!(
        second["builds"]["box"]["digest"],
        first["builds"]["box"]["digest"]
    );
    let again = json(&["releases", "get", first["id"].as_str().unwrap()]);
    assert_eq!(again["builds"], first["builds"]);
    assert_eq!(again["app_name"], "app");
    // An older version on request.
    let old = json(&["releases", "create", "--app", "app", "--config", "1"]);
    assert_eq!(old["builds"]["box"], first["builds"]["box"]);
    let list = json(&["releases", "list", "--app", "app"]);
    let ids: Vec<&str> = list["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            old["id"].as_str().unwrap(),
            second["id"].as_str().unwrap(),
            first["id"].as_str().unwrap()
        ],
        "newest first"
    );
    let out = m.cp.nuon(&["releases", "get", "rel_nope"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("no release"), "{}", text(&out));
    let out =
        m.cp.nuon(&["releases", "create", "--app", "app", "--config", "9"]);
    assert!(
        text(&out).contains("has no config version 9"),
        "{}",
        text(&out)
    );
}
