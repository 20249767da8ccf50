//! Go `text/template` + sprig: parse the input as a template, run it on the
//! template differential test's data, and scan it as a config string would
//! be scanned (references under `.nuon`).
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use nuon_core::template::{Template, Value};

/// The data every case of `tests/templates/cases.txt` runs on by default,
/// so seeds taken from there reach the same fields.
static DATA: LazyLock<serde_json::Value> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../tests/templates/data.json"))
        .expect("tests/templates/data.json is JSON")
});

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    if let Ok(t) = Template::parse("fuzz", &text) {
        let _ = t.is_plain();
        let _ = t.functions();
        let _ = t.references();
        // A fresh copy each run: sprig's `set` and `unset` change maps in
        // place, and one input must not change the next one's data.
        let _ = t.execute(&Value::from_json(&DATA));
    }
    let (actions, errors) = nuon_core::app::template::scan(&text);
    for a in &actions {
        assert!(
            a.start <= a.end && a.end <= text.len(),
            "action span: {a:?}"
        );
    }
    for e in &errors {
        assert!(e.offset <= text.len(), "error offset past the end: {e:?}");
    }
});
