//! Reads a parsed TOML table key by key, recording every problem with its
//! place instead of stopping at the first. The keys a reader is asked for
//! are the schema: whatever else the table holds is reported as unknown,
//! with the nearest known key as a suggestion.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use nuon_core::app::{Diagnostics, SourceFile, did_you_mean};

/// A TOML value with its place.
pub(crate) type Value<'i> = Spanned<DeValue<'i>>;

/// A string with the byte offset where its value starts in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Located {
    pub(crate) text: String,
    pub(crate) span: Range<usize>,
}

/// The TOML name of a value's type, for messages.
pub(crate) fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// A TOML value as JSON, or why it cannot be one.
pub(crate) fn to_json(v: &DeValue<'_>) -> Result<serde_json::Value, String> {
    Ok(match v {
        DeValue::String(s) => serde_json::Value::String(s.to_string()),
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
            .map(serde_json::Value::from)
            .map_err(|_| format!("integer {} does not fit in 64 bits", i.as_str()))?,
        DeValue::Float(f) => {
            let x: f64 = f
                .as_str()
                .replace('_', "")
                .parse()
                .map_err(|_| format!("float {} is not a number", f.as_str()))?;
            serde_json::Number::from_f64(x)
                .map(serde_json::Value::Number)
                .ok_or_else(|| format!("float {} is not a finite number", f.as_str()))?
        }
        DeValue::Boolean(b) => serde_json::Value::Bool(*b),
        DeValue::Datetime(d) => serde_json::Value::String(d.to_string()),
        DeValue::Array(a) => serde_json::Value::Array(
            a.iter()
                .map(|v| to_json(v.get_ref()))
                .collect::<Result<_, _>>()?,
        ),
        DeValue::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| Ok((k.get_ref().to_string(), to_json(v.get_ref())?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// Every string inside a value, with its place (for template checks).
pub(crate) fn strings_in(v: &Value<'_>, out: &mut Vec<Located>) {
    match v.get_ref() {
        DeValue::String(s) => out.push(Located {
            text: s.to_string(),
            span: v.span(),
        }),
        DeValue::Array(a) => a.iter().for_each(|v| strings_in(v, out)),
        DeValue::Table(t) => t.values().for_each(|v| strings_in(v, out)),
        _ => {}
    }
}

/// A table being read; see the module docs.
pub(crate) struct Reader<'a, 'i> {
    pub(crate) file: &'a SourceFile,
    table: &'a DeTable<'i>,
    span: Range<usize>,
    known: Vec<&'static str>,
    /// Where the table stands in the format (`components/*.toml`,
    /// `sandbox.toml.var_file[]`): the name its keys are listed under in
    /// the reference ([`KeyTable`]).
    at: String,
    /// What each key read holds, for the reference.
    holds: Vec<(&'static str, &'static str)>,
}

/// The keys the loader reads, table by table: the config reference is
/// made of it (see `key_table`). A table's keys are the ones its reader
/// asks for, present or not, so one table of a kind read anywhere gives
/// them all.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KeyTable {
    /// By place (`metadata.toml`, `components/*.toml`,
    /// `components/*.toml.var_file[]`).
    pub tables: BTreeMap<String, TableKeys>,
}

/// One table's keys.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TableKeys {
    /// Each key and what it holds (`a string`, `a table`, `required`).
    pub keys: BTreeMap<String, BTreeSet<String>>,
    /// Nuon's keys read here and ignored, with why (from the warning the
    /// loader gives).
    pub ignored: BTreeMap<String, String>,
}

thread_local! {
    /// Set while `key_table` reads its configs; `Reader::finish` adds to it.
    static CAPTURE: RefCell<Option<KeyTable>> = const { RefCell::new(None) };
}

/// Runs `read` with every finished table's keys collected.
pub(crate) fn capture_keys(read: impl FnOnce()) -> KeyTable {
    CAPTURE.with(|c| *c.borrow_mut() = Some(KeyTable::default()));
    read();
    CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default()
}

impl<'a, 'i> Reader<'a, 'i> {
    /// A file's top table; `at` names its place in the format.
    pub(crate) fn new(file: &'a SourceFile, table: &'a DeTable<'i>, at: String) -> Self {
        Reader {
            file,
            table,
            span: 0..0,
            known: Vec::new(),
            at,
            holds: Vec::new(),
        }
    }

    /// A table inside this one, at `key` (`components.*` for each table of
    /// a free-form one).
    pub(crate) fn nested(
        &self,
        key: &str,
        table: &'a DeTable<'i>,
        span: Range<usize>,
    ) -> Reader<'a, 'i> {
        Reader {
            file: self.file,
            table,
            span,
            known: Vec::new(),
            at: format!("{}.{key}", self.at),
            holds: Vec::new(),
        }
    }

    /// Says what `key` holds (for the reference).
    pub(crate) fn holds(&mut self, key: &'static str, what: &'static str) {
        self.holds.push((key, what));
    }

    /// Where the table starts (for "missing key" problems).
    pub(crate) fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// Every key with its value, for free-form tables.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (Located, &'a Value<'i>)> + '_ {
        self.table.iter().map(|(k, v)| {
            (
                Located {
                    text: k.get_ref().to_string(),
                    span: k.span(),
                },
                v,
            )
        })
    }

    /// Marks keys as known without reading them.
    pub(crate) fn know(&mut self, keys: &[&'static str]) {
        self.known.extend_from_slice(keys);
    }

    /// The value of `key`, if present; `key` becomes known.
    pub(crate) fn get(&mut self, key: &'static str) -> Option<&'a Value<'i>> {
        self.known.push(key);
        self.table.get(key)
    }

    fn wrong(&self, d: &mut Diagnostics, key: &str, v: &Value<'_>, want: &str) {
        d.push(self.file.at(
            &v.span(),
            format!("{key:?} must be {want}, found {}", type_name(v.get_ref())),
        ));
    }

    fn missing(&self, d: &mut Diagnostics, key: &str) {
        d.push(
            self.file
                .at(&self.span, format!("missing required key {key:?}")),
        );
    }

    /// An optional string.
    pub(crate) fn str(&mut self, d: &mut Diagnostics, key: &'static str) -> Option<Located> {
        self.holds(key, "a string");
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some(Located {
                text: s.to_string(),
                span: v.span(),
            }),
            _ => {
                self.wrong(d, key, v, "a string");
                None
            }
        }
    }

    /// A required string.
    pub(crate) fn req_str(&mut self, d: &mut Diagnostics, key: &'static str) -> Option<Located> {
        self.holds(key, "required");
        if self.table.get(key).is_none() {
            self.known.push(key);
            self.missing(d, key);
            return None;
        }
        self.str(d, key)
    }

    /// A required, non-empty name.
    pub(crate) fn name(&mut self, d: &mut Diagnostics, key: &'static str) -> Option<Located> {
        let name = self.req_str(d, key)?;
        if name.text.trim().is_empty() {
            d.push(
                self.file
                    .at(&name.span, format!("{key:?} must not be empty")),
            );
            return None;
        }
        Some(name)
    }

    /// An optional boolean.
    pub(crate) fn bool(&mut self, d: &mut Diagnostics, key: &'static str) -> Option<bool> {
        self.holds(key, "a boolean");
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong(d, key, v, "a boolean (true or false)");
                None
            }
        }
    }

    /// An optional integer.
    pub(crate) fn int(&mut self, d: &mut Diagnostics, key: &'static str) -> Option<i64> {
        self.holds(key, "an integer");
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.wrong(d, key, v, "an integer of 64 bits");
                    None
                }
            },
            _ => {
                self.wrong(d, key, v, "an integer");
                None
            }
        }
    }

    /// An optional list of strings.
    pub(crate) fn str_list(&mut self, d: &mut Diagnostics, key: &'static str) -> Vec<Located> {
        self.holds(key, "an array of strings");
        let Some(v) = self.get(key) else {
            return Vec::new();
        };
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong(d, key, v, "an array of strings");
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => out.push(Located {
                    text: s.to_string(),
                    span: item.span(),
                }),
                other => d.push(self.file.at(
                    &item.span(),
                    format!(
                        "every item of {key:?} must be a string, found {}",
                        type_name(other)
                    ),
                )),
            }
        }
        out
    }

    /// An optional value of any type, as JSON.
    pub(crate) fn any(
        &mut self,
        d: &mut Diagnostics,
        key: &'static str,
    ) -> Option<(serde_json::Value, &'a Value<'i>)> {
        self.holds(key, "any value");
        let v = self.get(key)?;
        match to_json(v.get_ref()) {
            Ok(j) => Some((j, v)),
            Err(e) => {
                d.push(self.file.at(&v.span(), format!("{key:?}: {e}")));
                None
            }
        }
    }

    /// An optional table of free-form values (`vars`, `values`,
    /// `env_vars`), as JSON, with every string found in it.
    pub(crate) fn map(
        &mut self,
        d: &mut Diagnostics,
        key: &'static str,
        strings: &mut Vec<Located>,
    ) -> BTreeMap<String, serde_json::Value> {
        self.holds(key, "a table");
        let Some(v) = self.get(key) else {
            return BTreeMap::new();
        };
        let DeValue::Table(t) = v.get_ref() else {
            self.wrong(d, key, v, "a table");
            return BTreeMap::new();
        };
        let mut out = BTreeMap::new();
        for (k, item) in t.iter() {
            match to_json(item.get_ref()) {
                Ok(j) => {
                    strings_in(item, strings);
                    out.insert(k.get_ref().to_string(), j);
                }
                Err(e) => d.push(
                    self.file
                        .at(&item.span(), format!("{:?}: {e}", k.get_ref())),
                ),
            }
        }
        out
    }

    /// An optional table of strings (`env_vars`).
    pub(crate) fn str_map(
        &mut self,
        d: &mut Diagnostics,
        key: &'static str,
        strings: &mut Vec<Located>,
    ) -> BTreeMap<String, String> {
        self.holds(key, "a table of strings");
        let Some(v) = self.get(key) else {
            return BTreeMap::new();
        };
        let DeValue::Table(t) = v.get_ref() else {
            self.wrong(d, key, v, "a table of strings");
            return BTreeMap::new();
        };
        let mut out = BTreeMap::new();
        for (k, item) in t.iter() {
            match item.get_ref() {
                DeValue::String(s) => {
                    strings_in(item, strings);
                    out.insert(k.get_ref().to_string(), s.to_string());
                }
                other => d.push(self.file.at(
                    &item.span(),
                    format!(
                        "{key}.{} must be a string, found {}",
                        k.get_ref(),
                        type_name(other)
                    ),
                )),
            }
        }
        out
    }

    /// An optional sub-table.
    pub(crate) fn table(
        &mut self,
        d: &mut Diagnostics,
        key: &'static str,
    ) -> Option<Reader<'a, 'i>> {
        self.holds(key, "a table");
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::Table(t) => Some(self.nested(key, t, v.span())),
            _ => {
                self.wrong(d, key, v, "a table");
                None
            }
        }
    }

    /// An optional array of tables (`[[key]]`).
    pub(crate) fn tables(&mut self, d: &mut Diagnostics, key: &'static str) -> Vec<Reader<'a, 'i>> {
        self.holds(key, "an array of tables");
        let at = format!("{key}[]");
        let Some(v) = self.get(key) else {
            return Vec::new();
        };
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong(d, key, v, &format!("an array of tables ([[{key}]])"));
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items.iter() {
            match item.get_ref() {
                DeValue::Table(t) => out.push(self.nested(&at, t, item.span())),
                other => d.push(self.file.at(
                    &item.span(),
                    format!(
                        "every item of {key:?} must be a table, found {}",
                        type_name(other)
                    ),
                )),
            }
        }
        out
    }

    /// Reports every key that was not asked for: a Nuon key we do not
    /// support yet (with its hint), a key that belongs elsewhere (with the
    /// hint `elsewhere` gives), or a typo (with the nearest known key).
    pub(crate) fn finish(
        &self,
        d: &mut Diagnostics,
        unsupported: &[(&str, &str)],
        elsewhere: impl Fn(&str) -> Option<String>,
    ) {
        self.record(unsupported);
        for (k, _) in self.table.iter() {
            let key: &str = k.get_ref();
            if self.known.contains(&key) {
                continue;
            }
            if let Some((_, why)) = unsupported.iter().find(|(u, _)| *u == key) {
                d.push(self.file.warn(
                    &k.span(),
                    format!("key {key:?} cannot take effect here ({why}): it is read and ignored"),
                ));
                continue;
            }
            // Nuon ignores keys it does not know; so does this platform,
            // saying so (a typo is the likeliest cause).
            let message = if let Some(hint) = elsewhere(key) {
                format!("key {key:?} {hint}: it is ignored")
            } else {
                format!(
                    "unknown key {key:?} is ignored{}",
                    did_you_mean(key, self.known.iter().copied())
                )
            };
            d.push(self.file.warn(&k.span(), message));
        }
    }
}

impl Reader<'_, '_> {
    /// Adds this table's keys to the capture, if one is on.
    fn record(&self, unsupported: &[(&str, &str)]) {
        CAPTURE.with(|c| {
            let mut c = c.borrow_mut();
            let Some(all) = c.as_mut() else {
                return;
            };
            let table = all.tables.entry(self.at.clone()).or_default();
            for key in &self.known {
                let holds = table.keys.entry((*key).to_owned()).or_default();
                holds.extend(
                    self.holds
                        .iter()
                        .filter(|(k, _)| k == key)
                        .map(|(_, what)| (*what).to_owned()),
                );
            }
            for (key, why) in unsupported {
                table.ignored.insert((*key).to_owned(), (*why).to_owned());
            }
        });
    }
}

/// The text of a value read, if any.
pub(crate) fn text(l: Option<Located>) -> Option<String> {
    l.map(|l| l.text)
}

/// A duration (`30m`, `1h30m`) at `key`, checked.
pub(crate) fn duration(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    key: &'static str,
) -> Option<String> {
    r.holds(key, "a duration (30s, 1h30m)");
    let v = r.str(d, key)?;
    match nuon_core::parse_duration(&v.text) {
        Ok(_) => Some(v.text),
        Err(e) => {
            d.push(r.file.at(&v.span, format!("{key:?}: {e}")));
            None
        }
    }
}
