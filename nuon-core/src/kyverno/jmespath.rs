//! JMESPath as Kyverno's variables use it (`{{ request.object.spec.containers[].image }}`):
//! fields and quoted fields, indexes, slices of one step (`[*]`, `[]`),
//! filters (`[?name == 'web']`), object projections (`.*`), pipes,
//! comparisons, `&&`/`||`/`!`, literals (`` `...` `` and `'...'`), and the
//! functions Kyverno's policies use most (JMESPath's own and Kyverno's
//! string helpers). Anything else is a parse error that says what.

use serde_json::{Map, Value};

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `@`: the current value.
    Current,
    /// A field of the current value.
    Field(String),
    /// Left, then right on what it gave.
    Sub(Box<Expr>, Box<Expr>),
    /// An index (negative from the end).
    Index(i64),
    /// Each element of the left (a list), right applied, nulls dropped.
    Project(Box<Expr>, Box<Expr>),
    /// The left flattened one level, then projected.
    Flatten(Box<Expr>, Box<Expr>),
    /// The elements of the left where the condition holds, projected.
    Filter(Box<Expr>, Box<Expr>, Box<Expr>),
    /// Each value of the left (an object), projected.
    Values(Box<Expr>, Box<Expr>),
    /// A literal.
    Literal(Value),
    /// `a | b`.
    Pipe(Box<Expr>, Box<Expr>),
    /// `a || b`.
    Or(Box<Expr>, Box<Expr>),
    /// `a && b`.
    And(Box<Expr>, Box<Expr>),
    /// `!a`.
    Not(Box<Expr>),
    /// A comparison.
    Cmp(&'static str, Box<Expr>, Box<Expr>),
    /// A function call.
    Call(String, Vec<Expr>),
    /// `[a, b]` on the current value.
    MultiList(Vec<Expr>),
    /// `{k: a}` on the current value.
    MultiMap(Vec<(String, Expr)>),
}

/// The functions an expression may call.
pub const FUNCTIONS: &[&str] = &[
    "length",
    "contains",
    "starts_with",
    "ends_with",
    "keys",
    "values",
    "join",
    "to_string",
    "to_number",
    "type",
    "not_null",
    "max",
    "min",
    "sum",
    "sort",
    "reverse",
    "abs",
    "to_upper",
    "to_lower",
    "trim",
    "split",
    "equal_fold",
    "replace_all",
    "truncate",
    "regex_match",
];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Quoted(String),
    Raw(String),
    Lit(Value),
    Num(i64),
    Sym(&'static str),
}

fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    const SYMS: &[&str] = &[
        "||", "&&", "==", "!=", "<=", ">=", "[?", "[]", "<", ">", "!", "|", ".", "[", "]", "(",
        ")", ",", ":", "*", "@", "{", "}",
    ];
    'outer: while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(text[start..i].to_owned()));
            continue;
        }
        if c.is_ascii_digit() || (c == '-' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let start = i;
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let n = text[start..i]
                .parse()
                .map_err(|_| format!("{:?} is not a number", &text[start..i]))?;
            out.push(Tok::Num(n));
            continue;
        }
        if let Some(close) = match c {
            '"' => Some('"'),
            '\'' => Some('\''),
            '`' => Some('`'),
            _ => None,
        } {
            let mut j = i + 1;
            let mut s = String::new();
            while j < b.len() && b[j] as char != close {
                if b[j] == b'\\' && j + 1 < b.len() {
                    s.push('\\');
                    j += 1;
                }
                let ch = text[j..].chars().next().unwrap_or_default();
                s.push(ch);
                j += ch.len_utf8();
            }
            if j >= b.len() {
                return Err(format!("{c} at {i} is not closed"));
            }
            i = j + 1;
            out.push(match close {
                '"' => Tok::Quoted(
                    serde_json::from_str(&format!("\"{s}\""))
                        .map_err(|e| format!("quoted field \"{s}\": {e}"))?,
                ),
                '\'' => Tok::Raw(s.replace("\\'", "'")),
                _ => {
                    let t = s.replace("\\`", "`");
                    Tok::Lit(
                        serde_json::from_str(&t).unwrap_or_else(|_| Value::String(t.trim().into())),
                    )
                }
            });
            continue;
        }
        for s in SYMS {
            if text[i..].starts_with(s) {
                out.push(Tok::Sym(s));
                i += s.len();
                continue 'outer;
            }
        }
        return Err(format!("unexpected {c:?} at {i}"));
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

/// Binding powers, lowest first.
fn infix(t: &Tok) -> Option<(u8, &'static str)> {
    match t {
        Tok::Sym("|") => Some((1, "|")),
        Tok::Sym("||") => Some((2, "||")),
        Tok::Sym("&&") => Some((3, "&&")),
        Tok::Sym(op @ ("==" | "!=" | "<" | "<=" | ">" | ">=")) => Some((5, op)),
        _ => None,
    }
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn eat(&mut self, s: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Sym(x)) if *x == s) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), String> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(format!("expected {s:?}, found {:?}", self.peek()))
        }
    }

    fn expr(&mut self, min: u8) -> Result<Expr, String> {
        let mut left = self.unary()?;
        while let Some((bp, op)) = self.peek().and_then(infix) {
            if bp <= min {
                break;
            }
            self.at += 1;
            let right = self.expr(bp)?;
            left = match op {
                "|" => Expr::Pipe(left.into(), right.into()),
                "||" => Expr::Or(left.into(), right.into()),
                "&&" => Expr::And(left.into(), right.into()),
                cmp => Expr::Cmp(cmp, left.into(), right.into()),
            };
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            return Ok(Expr::Not(self.unary()?.into()));
        }
        let first = self.primary()?;
        self.postfix(first)
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Tok::Ident(name)) if self.eat("(") => {
                if !FUNCTIONS.contains(&name.as_str()) {
                    return Err(format!(
                        "function {name}() is not one this platform evaluates ({})",
                        FUNCTIONS.join(", ")
                    ));
                }
                let mut args = Vec::new();
                if !self.eat(")") {
                    loop {
                        args.push(self.expr(0)?);
                        if self.eat(")") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Ok(Expr::Call(name, args))
            }
            Some(Tok::Ident(name)) | Some(Tok::Quoted(name)) => Ok(Expr::Field(name)),
            Some(Tok::Raw(s)) => Ok(Expr::Literal(Value::String(s))),
            Some(Tok::Lit(v)) => Ok(Expr::Literal(v)),
            Some(Tok::Num(n)) => Ok(Expr::Literal(Value::from(n))),
            Some(Tok::Sym("@")) => Ok(Expr::Current),
            Some(Tok::Sym("(")) => {
                let e = self.expr(0)?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Tok::Sym("*")) => {
                let rest = self.projected()?;
                Ok(Expr::Values(Expr::Current.into(), rest.into()))
            }
            Some(Tok::Sym("[")) => self.bracket(Expr::Current),
            Some(Tok::Sym("[]")) => {
                let rest = self.projected()?;
                Ok(Expr::Flatten(Expr::Current.into(), rest.into()))
            }
            Some(Tok::Sym("[?")) => self.filter(Expr::Current),
            Some(Tok::Sym("{")) => {
                let mut pairs = Vec::new();
                loop {
                    let key = match self.next() {
                        Some(Tok::Ident(k)) | Some(Tok::Quoted(k)) => k,
                        other => return Err(format!("expected a key, found {other:?}")),
                    };
                    self.expect(":")?;
                    pairs.push((key, self.expr(0)?));
                    if self.eat("}") {
                        break;
                    }
                    self.expect(",")?;
                }
                Ok(Expr::MultiMap(pairs))
            }
            other => Err(format!("unexpected {other:?}")),
        }
    }

    /// What follows `[` on `left`: an index, `*`, or a multi-select list.
    fn bracket(&mut self, left: Expr) -> Result<Expr, String> {
        match self.peek().cloned() {
            Some(Tok::Num(n)) => {
                self.at += 1;
                self.expect("]")?;
                Ok(Expr::Sub(left.into(), Expr::Index(n).into()))
            }
            Some(Tok::Sym("*")) => {
                self.at += 1;
                self.expect("]")?;
                let rest = self.projected()?;
                Ok(Expr::Project(left.into(), rest.into()))
            }
            _ if left == Expr::Current => {
                let mut items = Vec::new();
                loop {
                    items.push(self.expr(0)?);
                    if self.eat("]") {
                        break;
                    }
                    self.expect(",")?;
                }
                Ok(Expr::MultiList(items))
            }
            other => Err(format!("expected an index or *, found {other:?}")),
        }
    }

    fn filter(&mut self, left: Expr) -> Result<Expr, String> {
        let cond = self.expr(0)?;
        self.expect("]")?;
        let rest = self.projected()?;
        Ok(Expr::Filter(left.into(), cond.into(), rest.into()))
    }

    /// The steps after a projection, applied to each element: up to a
    /// flatten (`[]`), which takes the projection's result as a whole.
    fn projected(&mut self) -> Result<Expr, String> {
        self.steps(Expr::Current, true)
    }

    fn postfix(&mut self, left: Expr) -> Result<Expr, String> {
        self.steps(left, false)
    }

    fn steps(&mut self, mut left: Expr, projecting: bool) -> Result<Expr, String> {
        loop {
            if projecting && matches!(self.peek(), Some(Tok::Sym("[]"))) {
                return Ok(left);
            }
            if self.eat(".") {
                match self.next() {
                    Some(Tok::Ident(n)) | Some(Tok::Quoted(n)) => {
                        left = Expr::Sub(left.into(), Expr::Field(n).into());
                    }
                    Some(Tok::Sym("*")) => {
                        let rest = self.projected()?;
                        left = Expr::Values(left.into(), rest.into());
                    }
                    Some(Tok::Sym("{")) | Some(Tok::Sym("[")) => {
                        self.at -= 1;
                        let m = self.primary()?;
                        left = Expr::Sub(left.into(), m.into());
                    }
                    other => return Err(format!("expected a field after '.', found {other:?}")),
                }
            } else if self.eat("[") {
                left = self.bracket(left)?;
            } else if self.eat("[]") {
                let rest = self.projected()?;
                left = Expr::Flatten(left.into(), rest.into());
            } else if self.eat("[?") {
                left = self.filter(left)?;
            } else {
                return Ok(left);
            }
        }
    }
}

/// Parses an expression.
pub fn parse(text: &str) -> Result<Expr, String> {
    let toks = lex(text).map_err(|e| format!("{text:?}: {e}"))?;
    let mut p = Parser { toks, at: 0 };
    let e = p.expr(0).map_err(|e| format!("{text:?}: {e}"))?;
    if p.at < p.toks.len() {
        return Err(format!("{text:?}: unexpected {:?}", p.toks[p.at]));
    }
    Ok(e)
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Number(_) => true,
    }
}

fn project(items: Vec<Value>, rest: &Expr) -> Result<Value, String> {
    let mut out = Vec::new();
    for x in items {
        let v = eval(rest, &x)?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(Value::Array(out))
}

/// Evaluates `e` against `data`.
pub fn eval(e: &Expr, data: &Value) -> Result<Value, String> {
    Ok(match e {
        Expr::Current => data.clone(),
        Expr::Field(n) => data.get(n).cloned().unwrap_or(Value::Null),
        Expr::Sub(a, b) => {
            let left = eval(a, data)?;
            if left.is_null() {
                Value::Null
            } else {
                eval(b, &left)?
            }
        }
        Expr::Index(i) => match data.as_array() {
            Some(a) => {
                let i = if *i < 0 { a.len() as i64 + i } else { *i };
                usize::try_from(i)
                    .ok()
                    .and_then(|i| a.get(i))
                    .cloned()
                    .unwrap_or(Value::Null)
            }
            None => Value::Null,
        },
        Expr::Project(a, rest) => match eval(a, data)? {
            Value::Array(items) => project(items, rest)?,
            _ => Value::Null,
        },
        Expr::Flatten(a, rest) => match eval(a, data)? {
            Value::Array(items) => {
                let mut flat = Vec::new();
                for x in items {
                    match x {
                        Value::Array(inner) => flat.extend(inner),
                        other => flat.push(other),
                    }
                }
                project(flat, rest)?
            }
            _ => Value::Null,
        },
        Expr::Filter(a, cond, rest) => match eval(a, data)? {
            Value::Array(items) => {
                let mut kept = Vec::new();
                for x in items {
                    if truthy(&eval(cond, &x)?) {
                        kept.push(x);
                    }
                }
                project(kept, rest)?
            }
            _ => Value::Null,
        },
        Expr::Values(a, rest) => match eval(a, data)? {
            Value::Object(m) => project(m.into_iter().map(|(_, v)| v).collect(), rest)?,
            _ => Value::Null,
        },
        Expr::Literal(v) => v.clone(),
        Expr::Pipe(a, b) => eval(b, &eval(a, data)?)?,
        Expr::Or(a, b) => {
            let l = eval(a, data)?;
            if truthy(&l) { l } else { eval(b, data)? }
        }
        Expr::And(a, b) => {
            let l = eval(a, data)?;
            if truthy(&l) { eval(b, data)? } else { l }
        }
        Expr::Not(a) => Value::Bool(!truthy(&eval(a, data)?)),
        Expr::Cmp(op, a, b) => {
            let (l, r) = (eval(a, data)?, eval(b, data)?);
            match *op {
                "==" => Value::Bool(l == r),
                "!=" => Value::Bool(l != r),
                _ => match (l.as_f64(), r.as_f64()) {
                    (Some(x), Some(y)) => Value::Bool(match *op {
                        "<" => x < y,
                        "<=" => x <= y,
                        ">" => x > y,
                        _ => x >= y,
                    }),
                    _ => Value::Null,
                },
            }
        }
        Expr::Call(name, args) => {
            let vals = args
                .iter()
                .map(|a| eval(a, data))
                .collect::<Result<Vec<_>, _>>()?;
            call(name, &vals)?
        }
        Expr::MultiList(items) => {
            if data.is_null() {
                return Ok(Value::Null);
            }
            Value::Array(
                items
                    .iter()
                    .map(|x| eval(x, data))
                    .collect::<Result<_, _>>()?,
            )
        }
        Expr::MultiMap(pairs) => {
            if data.is_null() {
                return Ok(Value::Null);
            }
            let mut m = Map::new();
            for (k, x) in pairs {
                m.insert(k.clone(), eval(x, data)?);
            }
            Value::Object(m)
        }
    })
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn call(name: &str, a: &[Value]) -> Result<Value, String> {
    let arg = |i: usize| a.get(i).cloned().unwrap_or(Value::Null);
    let s = |i: usize| -> Result<String, String> {
        match a.get(i) {
            Some(Value::String(s)) => Ok(s.clone()),
            other => Err(format!(
                "{name}(): argument {} is {other:?}, not a string",
                i + 1
            )),
        }
    };
    let list = |i: usize| -> Result<Vec<Value>, String> {
        match a.get(i) {
            Some(Value::Array(l)) => Ok(l.clone()),
            other => Err(format!(
                "{name}(): argument {} is {other:?}, not a list",
                i + 1
            )),
        }
    };
    Ok(match name {
        "length" => Value::from(match arg(0) {
            Value::String(s) => s.chars().count(),
            Value::Array(l) => l.len(),
            Value::Object(m) => m.len(),
            other => return Err(format!("length() of {other}")),
        }),
        "contains" => Value::Bool(match arg(0) {
            Value::String(h) => h.contains(&s(1)?),
            Value::Array(l) => l.contains(&arg(1)),
            _ => false,
        }),
        "starts_with" => Value::Bool(s(0)?.starts_with(&s(1)?)),
        "ends_with" => Value::Bool(s(0)?.ends_with(&s(1)?)),
        "keys" => match arg(0) {
            Value::Object(m) => Value::Array(m.keys().cloned().map(Value::String).collect()),
            _ => Value::Null,
        },
        "values" => match arg(0) {
            Value::Object(m) => Value::Array(m.values().cloned().collect()),
            _ => Value::Null,
        },
        "join" => Value::String(list(1)?.iter().map(text).collect::<Vec<_>>().join(&s(0)?)),
        "to_string" => Value::String(text(&arg(0))),
        "to_number" => match arg(0) {
            Value::Number(n) => Value::Number(n),
            Value::String(t) => t
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map_or(Value::Null, Value::Number),
            _ => Value::Null,
        },
        "type" => Value::String(
            match arg(0) {
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            }
            .into(),
        ),
        "not_null" => a
            .iter()
            .find(|v| !v.is_null())
            .cloned()
            .unwrap_or(Value::Null),
        "max" | "min" | "sum" => {
            let nums: Vec<f64> = list(0)?.iter().filter_map(Value::as_f64).collect();
            let r = match name {
                "sum" => Some(nums.iter().sum()),
                "max" => nums.iter().copied().reduce(f64::max),
                _ => nums.iter().copied().reduce(f64::min),
            };
            r.and_then(serde_json::Number::from_f64)
                .map_or(Value::Null, Value::Number)
        }
        "sort" => {
            let mut l = list(0)?;
            l.sort_by(|x, y| match (x.as_f64(), y.as_f64()) {
                (Some(p), Some(q)) => p.total_cmp(&q),
                _ => text(x).cmp(&text(y)),
            });
            Value::Array(l)
        }
        "reverse" => match arg(0) {
            Value::String(t) => Value::String(t.chars().rev().collect()),
            Value::Array(mut l) => {
                l.reverse();
                Value::Array(l)
            }
            _ => Value::Null,
        },
        "abs" => arg(0)
            .as_f64()
            .and_then(|x| serde_json::Number::from_f64(x.abs()))
            .map_or(Value::Null, Value::Number),
        "to_upper" => Value::String(s(0)?.to_uppercase()),
        "to_lower" => Value::String(s(0)?.to_lowercase()),
        "trim" => {
            let cut = s(1).unwrap_or_else(|_| " \t\n".into());
            Value::String(s(0)?.trim_matches(|c| cut.contains(c)).to_owned())
        }
        "split" => Value::Array(
            s(0)?
                .split(&s(1)?)
                .map(|p| Value::String(p.to_owned()))
                .collect(),
        ),
        "equal_fold" => Value::Bool(s(0)?.to_lowercase() == s(1)?.to_lowercase()),
        "replace_all" => Value::String(s(0)?.replace(&s(1)?, &s(2)?)),
        "truncate" => {
            let n = arg(1).as_u64().unwrap_or(0) as usize;
            Value::String(s(0)?.chars().take(n).collect())
        }
        "regex_match" => {
            let re = regex::Regex::new(&s(0)?).map_err(|e| format!("regex_match(): {e}"))?;
            Value::Bool(re.is_match(&text(&arg(1))))
        }
        other => return Err(format!("function {other}() is not evaluated")),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(expr: &str, data: &Value) -> Value {
        eval(&parse(expr).unwrap(), data).unwrap()
    }

    #[test]
    fn kyvernos_expressions_evaluate_as_jmespath_says() {
        let d = json!({"request": {"object": {
            "metadata": {"name": "web", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"containers": [
                {"name": "a", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
                {"name": "b", "image": "busybox:latest", "ports": [{"containerPort": 8080}, {"containerPort": 9090}]}
            ]}
        }}});
        let o = "request.object";
        assert_eq!(run(&format!("{o}.metadata.name"), &d), "web");
        assert_eq!(
            run(
                &format!("{o}.metadata.labels.\"app.kubernetes.io/name\""),
                &d
            ),
            "web"
        );
        assert_eq!(
            run(&format!("{o}.spec.containers[].image"), &d),
            json!(["nginx:1.27", "busybox:latest"])
        );
        assert_eq!(
            run(&format!("{o}.spec.containers[*].name"), &d),
            json!(["a", "b"])
        );
        assert_eq!(run(&format!("{o}.spec.containers[-1].name"), &d), "b");
        assert_eq!(
            run(&format!("{o}.spec.containers[].ports[].containerPort"), &d),
            json!([80, 8080, 9090])
        );
        assert_eq!(
            run(
                &format!("{o}.spec.containers[?name == 'b'].image | [0]"),
                &d
            ),
            "busybox:latest"
        );
        assert_eq!(run(&format!("length({o}.spec.containers)"), &d), 2);
        assert_eq!(
            run(
                &format!("{o}.spec.containers[?ends_with(image, ':latest')] | length(@)"),
                &d
            ),
            1
        );
        assert_eq!(
            run(&format!("contains({o}.spec.containers[].name, 'a')"), &d),
            true
        );
        assert_eq!(run(&format!("{o}.metadata.labels.*"), &d), json!(["web"]));
        assert_eq!(run(&format!("{o}.nope.deeper"), &d), Value::Null);
        assert_eq!(run("to_upper('x') == 'X' && !`false`", &d), true);
        assert_eq!(
            run(&format!("split({o}.spec.containers[0].image, ':')[1]"), &d),
            "1.27"
        );
        assert_eq!(
            run(
                &format!("max({o}.spec.containers[].ports[].containerPort)"),
                &d
            ),
            json!(9090.0)
        );
        assert!(
            parse("lookup('x')")
                .unwrap_err()
                .contains("not one this platform evaluates")
        );
        assert!(parse("a.[").is_err());
    }
}
