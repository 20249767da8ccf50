//! The functions a template can call: Go's builtins and sprig's library,
//! each with the parameter types Go checks its arguments against.

mod builtin;
mod semver;
mod sprig;

use std::collections::HashMap;
use std::sync::OnceLock;

use super::Template;
use super::value::{Elem, Value};

/// A parameter's Go type, for Go's argument checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    /// `interface{}`
    Any,
    /// `reflect.Value` (the builtins): anything, even no value.
    Refl,
    /// `string`
    Str,
    /// `int`
    Int,
    /// `float64`
    Float,
    /// `bool`
    Bool,
    /// `map[string]interface{}`
    Map,
    /// `time.Time`
    Time,
}

impl Ty {
    pub fn go_name(self) -> &'static str {
        match self {
            Ty::Any => "interface {}",
            Ty::Refl => "reflect.Value",
            Ty::Str => "string",
            Ty::Int => "int",
            Ty::Float => "float64",
            Ty::Bool => "bool",
            Ty::Map => "map[string]interface {}",
            Ty::Time => "time.Time",
        }
    }
}

/// What a function is handed besides its arguments.
pub(crate) struct Ctx<'t> {
    pub tmpl: &'t Template,
}

pub(crate) type Call = fn(&Ctx<'_>, Vec<Value>) -> Result<Value, String>;

/// A function: its fixed parameters, its variadic one, and its body.
#[derive(Clone, Copy)]
pub(crate) struct Func {
    pub params: &'static [Ty],
    pub variadic: Option<Ty>,
    pub call: Call,
}

/// Go's `validateType`: whether `v` may be passed as `ty`, and as what.
pub(crate) fn validate(v: Value, ty: Ty) -> Result<Value, String> {
    use std::collections::BTreeMap;
    let ok = match (&v, ty) {
        (_, Ty::Refl) => true,
        (Value::Missing, Ty::Any) => return Ok(Value::Nil),
        (Value::Missing, Ty::Map) => return Ok(Value::map(BTreeMap::new())),
        (Value::Missing, t) => return Err(format!("invalid value; expected {}", t.go_name())),
        (_, Ty::Any) => true,
        (Value::Str(_), Ty::Str) => true,
        (Value::Int(_, super::value::IntType::Int), Ty::Int) => true,
        (Value::Float(_), Ty::Float) => true,
        (Value::Bool(_), Ty::Bool) => true,
        (Value::Map(_, Elem::Any), Ty::Map) => true,
        (Value::Time(_), Ty::Time) => true,
        _ => false,
    };
    if ok {
        return Ok(v);
    }
    let got = match v {
        Value::Nil => "interface {}".to_string(),
        other => other.type_name(),
    };
    Err(format!(
        "wrong type for value; expected {}; got {got}",
        ty.go_name()
    ))
}

fn table() -> &'static HashMap<&'static str, Func> {
    static TABLE: OnceLock<HashMap<&'static str, Func>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m = HashMap::new();
        builtin::register(&mut m);
        // sprig's functions take precedence over the builtins of the same
        // name (`slice`), as a template's FuncMap does in Go.
        sprig::register(&mut m);
        m
    })
}

/// The function named `name` (not `and`/`or`, which the executor runs).
pub(crate) fn lookup(name: &str) -> Option<Func> {
    table().get(name).copied()
}

/// Whether `name` can be called in a template.
pub(crate) fn exists(name: &str) -> bool {
    matches!(name, "and" | "or") || table().contains_key(name)
}

/// Why a sprig function is not here, for the parse error.
pub(crate) fn not_provided(name: &str) -> Option<&'static str> {
    Some(match name {
        "env" | "expandenv" => {
            "templates render on the control plane and read values from .nuon, never its environment"
        }
        "getHostByName" => "templates do no network lookups",
        "bcrypt"
        | "htpasswd"
        | "genPrivateKey"
        | "derivePassword"
        | "buildCustomCert"
        | "genCA"
        | "genCAWithKey"
        | "genSelfSignedCert"
        | "genSelfSignedCertWithKey"
        | "genSignedCert"
        | "genSignedCertWithKey"
        | "encryptAES"
        | "decryptAES"
        | "randBytes" => {
            "key and certificate generation belongs in a secret with auto_generate, not in a template that renders again on every deploy"
        }
        _ => return None,
    })
}

/// Registers `name` with its parameters.
pub(crate) fn add(
    m: &mut HashMap<&'static str, Func>,
    name: &'static str,
    params: &'static [Ty],
    variadic: Option<Ty>,
    call: Call,
) {
    m.insert(
        name,
        Func {
            params,
            variadic,
            call,
        },
    );
}
