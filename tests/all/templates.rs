//! Our Go-template engine against Go's own `text/template` and sprig: every
//! case of `tests/templates/cases.txt` renders byte for byte as Go renders
//! it, and fails where Go fails.

use nuon_core::template::{MissingKey, Template, Value};
use nuon_test_fixtures::templates::{self, Outcome};

fn ours(case: &templates::Case, default: &serde_json::Value) -> Outcome {
    let data = match &case.data {
        Some(d) => match serde_json::from_str::<serde_json::Value>(d) {
            Ok(v) => v,
            Err(e) => return Outcome::Err(format!("bad @data: {e}")),
        },
        None => default.clone(),
    };
    let mk = match case.missing_key.as_deref() {
        Some("error") => MissingKey::Error,
        Some("zero") => MissingKey::Zero,
        _ => MissingKey::Default,
    };
    match Template::parse(&case.name, &case.template) {
        Ok(t) => match t.missing_key(mk).execute(&Value::from_json(&data)) {
            Ok(s) => Outcome::Out(s),
            Err(e) => Outcome::Err(e.to_string()),
        },
        Err(e) => Outcome::Err(e.to_string()),
    }
}

#[test]
fn templates_render_as_go_and_sprig_render_them() {
    let dir = templates::dir();
    let cases_path = dir.join("cases.txt");
    let data_path = dir.join("data.json");
    let cases = templates::read_cases(&cases_path).expect("read cases");
    assert!(
        cases.len() >= 300,
        "the corpus has {} cases; the issue asks for at least 300",
        cases.len()
    );
    let default: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&data_path).expect("read data.json"))
            .expect("data.json");

    let tmp = tempfile::tempdir().expect("tempdir");
    let Some(oracle) = templates::build_oracle(tmp.path()).expect("build the oracle") else {
        return;
    };
    let want = templates::run_oracle(&oracle, &cases_path, &data_path).expect("run the oracle");
    assert_eq!(want.len(), cases.len(), "the oracle answered every case");

    let mut differ = Vec::new();
    let (mut ok, mut err) = (0, 0);
    for (case, (name, go)) in cases.iter().zip(&want) {
        assert_eq!(&case.name, name, "cases in the same order");
        let got = ours(case, &default);
        match (go, &got) {
            (Outcome::Out(a), Outcome::Out(b)) if a == b => ok += 1,
            (Outcome::Err(_), Outcome::Err(_)) => err += 1,
            _ => differ.push(format!(
                "--- {name}\n{}\n  go:   {go:?}\n  ours: {got:?}",
                case.template
            )),
        }
    }
    eprintln!(
        "templates: {ok} cases render identically, {err} fail in both, {} differ",
        differ.len()
    );
    assert!(
        differ.is_empty(),
        "{} of {} cases differ from Go:\n{}",
        differ.len(),
        cases.len(),
        differ.join("\n")
    );
}
