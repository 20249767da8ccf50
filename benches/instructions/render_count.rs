//! Counts the instructions of the template bench's execute loop: run by
//! `budget_cost.sh` under callgrind (only `render_all` is counted).
use nuon_core::template::{MissingKey, Template, Value};
use nuon_test_fixtures::templates;

#[inline(never)]
fn render_all(ready: &[(Template, Value)], iter: u32) {
    for _ in 0..iter {
        for (t, d) in ready {
            std::hint::black_box(t.execute(d).ok());
        }
    }
}

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("templates dir"));
    let iter: u32 = std::env::args().nth(2).map_or(20, |s| s.parse().unwrap());
    let (cases_path, data_path) = (dir.join("cases.txt"), dir.join("data.json"));
    let cases = templates::read_cases(&cases_path).unwrap();
    let default: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&data_path).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let oracle = templates::build_oracle(tmp.path()).unwrap().expect("go");
    let go = templates::run_oracle(&oracle, &cases_path, &data_path).unwrap();
    let mut ready = Vec::new();
    for (case, data) in templates::go_rendered(&cases, &go, &default).unwrap() {
        let mk = match case.missing_key.as_deref() {
            Some("error") => MissingKey::Error,
            Some("zero") => MissingKey::Zero,
            _ => MissingKey::Default,
        };
        let t = Template::parse(&case.name, &case.template)
            .unwrap()
            .missing_key(mk);
        ready.push((t, Value::from_json(&data)));
    }
    render_all(&ready, 1);
    let start = std::time::Instant::now();
    render_all(&ready, iter);
    eprintln!("{} cases x {iter}: {:?}", ready.len(), start.elapsed());
}
