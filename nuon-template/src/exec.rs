//! Executing a parsed template, with Go's semantics: `text/template`'s
//! `exec.go` step by step (arguments checked against each function's
//! parameter types, nil and missing values, variables and their scopes).

use std::collections::BTreeMap;

use super::budget::Meter;
use super::fmt::write_plain;
use super::funcs::{self, Ty};
use super::parse::{Arg, ArgKind, Branch, Node, Number, Pipe};
use super::value::{Elem, Value};
use super::value::{MAX_VALUE_DEPTH, Unkeepable, check_nesting};
use super::{MissingKey, Template};

/// How deep `{{template}}` calls may nest.
const MAX_DEPTH: usize = 100;
/// How deep bodies and template calls nest at run time, together.
const MAX_NESTING: usize = 200;

/// Why execution stopped early.
pub(crate) enum Stop {
    /// An error: the span it happened at and the message.
    Err(usize, usize, String),
    /// The budget ran out: where, and the budget's words.
    Exhausted(usize, usize, String),
    Break,
    Continue,
}

type Eval<T> = Result<T, Stop>;

pub(crate) struct State<'t> {
    pub tmpl: &'t Template,
    pub out: String,
    vars: Vec<(String, Value)>,
    depth: usize,
    /// Bodies and template calls open now.
    nesting: usize,
    /// The span of the node being evaluated, for messages.
    at: (usize, usize),
    meter: Meter<'t>,
}

impl<'t> State<'t> {
    pub fn new(tmpl: &'t Template, data: &Value, meter: Meter<'t>) -> Self {
        State {
            tmpl,
            out: String::new(),
            vars: vec![("$".into(), data.clone())],
            depth: 0,
            nesting: 0,
            at: (0, 0),
            meter,
        }
    }

    fn fail<T>(&self, msg: impl Into<String>) -> Eval<T> {
        Err(Stop::Err(self.at.0, self.at.1, msg.into()))
    }

    /// Takes `n` steps of the render's budget.
    fn step(&mut self, n: u64) -> Eval<()> {
        self.meter
            .take(n)
            .map_err(|m| Stop::Exhausted(self.at.0, self.at.1, m))
    }

    /// Takes the steps of a function's result, and reads the clock.
    fn step_after_call(&mut self, n: u64) -> Eval<()> {
        self.meter
            .after_call(n)
            .map_err(|m| Stop::Exhausted(self.at.0, self.at.1, m))
    }

    fn set_at(&mut self, a: &Arg) {
        self.at = (a.pos, a.end);
    }

    pub fn walk_list(&mut self, dot: &Value, nodes: &[Node]) -> Eval<()> {
        for n in nodes {
            self.walk(dot, n)?;
        }
        Ok(())
    }

    fn walk(&mut self, dot: &Value, node: &Node) -> Eval<()> {
        self.step(1)?;
        match node {
            Node::Text(t) => {
                self.out.push_str(t);
                if self.out.len() > self.tmpl.max_output {
                    return self.fail(format!(
                        "output is over {} bytes: a template renders config values, not bulk data",
                        self.tmpl.max_output
                    ));
                }
            }
            Node::Action(p) => {
                let v = self.eval_pipeline(dot, p)?;
                if p.decl.is_empty() {
                    match v {
                        Value::Missing if self.tmpl.no_value_is_error => {
                            self.at = (p.pos, p.end);
                            let src = self.tmpl.source[p.pos..p.end].trim();
                            return self.fail(format!("{src} has no value"));
                        }
                        Value::Missing => self.out.push_str("<no value>"),
                        v => write_plain(&mut self.out, &v),
                    }
                    if self.out.len() > self.tmpl.max_output {
                        return self.fail(format!(
                            "output is over {} bytes: a template renders config values, not bulk data",
                            self.tmpl.max_output
                        ));
                    }
                }
            }
            Node::If(b) => self.nested(|s| s.if_or_with(dot, b, false))?,
            Node::With(b) => self.nested(|s| s.if_or_with(dot, b, true))?,
            Node::Range(b) => self.nested(|s| s.range(dot, b))?,
            Node::Break => return Err(Stop::Break),
            Node::Continue => return Err(Stop::Continue),
            Node::Template { pos, name, pipe } => {
                self.at = (*pos, *pos);
                let Some(tree) = self.tmpl.trees.defined.get(name) else {
                    return self.fail(format!("template {name:?} not defined"));
                };
                if self.depth >= MAX_DEPTH {
                    return self.fail(format!("exceeded maximum template depth ({MAX_DEPTH})"));
                }
                let dot = match pipe {
                    Some(p) => self.eval_pipeline(dot, p)?,
                    None => Value::Missing,
                };
                let saved = std::mem::replace(&mut self.vars, vec![("$".into(), dot.clone())]);
                self.depth += 1;
                let r = self.nested(|s| s.walk_list(&dot, tree));
                self.depth -= 1;
                self.vars = saved;
                r?;
            }
        }
        Ok(())
    }

    /// Runs `f` one body deeper: bodies inside bodies and templates
    /// called from templates, together, stop at [`MAX_NESTING`] (each is
    /// a few frames of this thread's stack).
    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Eval<()>) -> Eval<()> {
        if self.nesting >= MAX_NESTING {
            return self.fail(format!(
                "exceeded maximum nesting ({MAX_NESTING} bodies and template calls inside each other)"
            ));
        }
        self.nesting += 1;
        let r = f(self);
        self.nesting -= 1;
        r
    }

    fn if_or_with(&mut self, dot: &Value, b: &Branch, with: bool) -> Eval<()> {
        let mark = self.vars.len();
        let r = (|| {
            let v = self.eval_pipeline(dot, &b.pipe)?;
            if v.truth() {
                self.walk_list(if with { &v } else { dot }, &b.list)
            } else if let Some(e) = &b.else_list {
                self.walk_list(dot, e)
            } else {
                Ok(())
            }
        })();
        self.vars.truncate(mark);
        r
    }

    fn range(&mut self, dot: &Value, b: &Branch) -> Eval<()> {
        let mark = self.vars.len();
        let r = self.range_inner(dot, b);
        self.vars.truncate(mark);
        match r {
            Err(Stop::Break) => Ok(()),
            r => r,
        }
    }

    fn range_inner(&mut self, dot: &Value, b: &Branch) -> Eval<()> {
        let v = self.eval_pipeline(dot, &b.pipe)?;
        let mark = self.vars.len();
        let items: Vec<(Value, Value)> = match &v {
            Value::List(l, _) => l
                .iter()
                .enumerate()
                .map(|(i, e)| (Value::int(i as i64), e.clone()))
                .collect(),
            Value::Map(m, _) => m
                .borrow()
                .iter()
                .map(|(k, e)| (Value::from(k.as_str()), e.clone()))
                .collect(),
            Value::Missing | Value::Nil => Vec::new(),
            other => {
                self.at = (b.pipe.pos, b.pipe.end);
                let mut s = String::new();
                write_plain(&mut s, other);
                return self.fail(format!("range can't iterate over {s}"));
            }
        };
        if items.is_empty() {
            if let Some(e) = &b.else_list {
                self.walk_list(dot, e)?;
            }
            return Ok(());
        }
        let n = b.pipe.decl.len();
        for (k, e) in items {
            self.step(1)?;
            if b.pipe.is_assign {
                // `range $i, $v = ...` sets variables declared before it.
                if n > 1 {
                    self.set_var(&b.pipe.decl[0], k)?;
                }
                if n > 0 {
                    self.set_var(&b.pipe.decl[n - 1], e.clone())?;
                }
            } else {
                if n > 0 {
                    self.vars[mark - 1].1 = e.clone();
                }
                if n > 1 {
                    self.vars[mark - 2].1 = k;
                }
            }
            let r = self.walk_list(&e, &b.list);
            self.vars.truncate(mark);
            match r {
                Ok(()) | Err(Stop::Continue) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(())
    }

    pub fn eval_pipeline(&mut self, dot: &Value, pipe: &Pipe) -> Eval<Value> {
        let mut value: Option<Value> = None;
        for cmd in &pipe.cmds {
            let v = self.eval_command(dot, &cmd.args, value.take())?;
            // A nil interface{} at the end of a command is no value at all.
            value = Some(match v {
                Value::Nil => Value::Missing,
                v => v,
            });
        }
        let value = value.unwrap_or(Value::Missing);
        for name in &pipe.decl {
            if pipe.is_assign {
                self.set_var(name, value.clone())?;
            } else {
                self.vars.push((name.clone(), value.clone()));
            }
        }
        Ok(value)
    }

    /// Go's `setVar`: the innermost variable of that name (declared in
    /// the text, it may not have been on this run: `and 0 ($v := 1)`).
    fn set_var(&mut self, name: &str, value: Value) -> Eval<()> {
        match self.vars.iter_mut().rev().find(|(n, _)| n == name) {
            Some(slot) => {
                slot.1 = value;
                Ok(())
            }
            None => self.fail(format!("undefined variable: {name}")),
        }
    }

    fn var(&self, name: &str) -> Eval<Value> {
        match self.vars.iter().rev().find(|(n, _)| n == name) {
            Some((_, v)) => Ok(v.clone()),
            None => self.fail(format!("undefined variable: {name}")),
        }
    }

    fn not_a_function(&self, args: &[Arg], final_: &Option<Value>) -> Eval<()> {
        if args.len() > 1 || final_.is_some() {
            let a = &args[0];
            return Err(Stop::Err(
                a.pos,
                a.end,
                format!(
                    "can't give argument to non-function {}",
                    &self.tmpl.source[a.pos..a.end]
                ),
            ));
        }
        Ok(())
    }

    fn eval_command(&mut self, dot: &Value, args: &[Arg], final_: Option<Value>) -> Eval<Value> {
        let first = &args[0];
        self.set_at(first);
        match &first.kind {
            ArgKind::Field(idents) => self.field_chain(dot, dot.clone(), idents, args, final_),
            ArgKind::Chain(node, fields) => {
                if matches!(node.kind, ArgKind::Nil) {
                    return self.fail("indirection through explicit nil");
                }
                let recv = self.eval_arg(dot, None, node)?;
                self.set_at(first);
                self.field_chain(dot, recv, fields, args, final_)
            }
            ArgKind::Ident(name) => self.eval_function(dot, name, args, final_),
            ArgKind::Pipe(p) => {
                self.not_a_function(args, &final_)?;
                self.eval_pipeline(dot, p)
            }
            ArgKind::Var(idents) => {
                let v = self.var(&idents[0])?;
                if idents.len() == 1 {
                    self.not_a_function(args, &final_)?;
                    return Ok(v);
                }
                self.field_chain(dot, v, &idents[1..], args, final_)
            }
            other => {
                self.not_a_function(args, &final_)?;
                match other {
                    ArgKind::Bool(b) => Ok(Value::Bool(*b)),
                    ArgKind::Dot => Ok(dot.clone()),
                    ArgKind::Nil => self.fail("nil is not a command"),
                    ArgKind::Num(n) => self.ideal(n),
                    ArgKind::Str(s) => Ok(Value::from(s.as_str())),
                    _ => self.fail("can't evaluate command"),
                }
            }
        }
    }

    fn ideal(&self, n: &Number) -> Eval<Value> {
        let t = n.text.as_str();
        let hex_int = t.len() > 2
            && t.starts_with("0")
            && t[1..].starts_with(['x', 'X'])
            && !t.contains(['p', 'P']);
        if n.float.is_some()
            && !hex_int
            && !t.starts_with('\'')
            && t.contains(['.', 'e', 'E', 'p', 'P'])
        {
            return Ok(Value::Float(n.float.unwrap_or_default()));
        }
        match n.int {
            Some(i) => Ok(Value::int(i)),
            None => self.fail(format!("{t} overflows int")),
        }
    }

    fn field_chain(
        &mut self,
        _dot: &Value,
        mut recv: Value,
        idents: &[String],
        args: &[Arg],
        final_: Option<Value>,
    ) -> Eval<Value> {
        let last = idents.len() - 1;
        for name in &idents[..last] {
            recv = self.field(name, false, recv)?;
        }
        let has_args = args.len() > 1 || final_.is_some();
        self.field(&idents[last], has_args, recv)
    }

    fn field(&self, name: &str, has_args: bool, recv: Value) -> Eval<Value> {
        match recv {
            Value::Missing => {
                if self.tmpl.missing_key == MissingKey::Error {
                    return self.fail(format!("nil data; no entry for key {name:?}"));
                }
                Ok(Value::Missing)
            }
            Value::Nil => self.fail(format!("nil pointer evaluating interface {{}}.{name}")),
            Value::Map(m, elem) => {
                if has_args {
                    return self.fail(format!("{name} is not a method but has arguments"));
                }
                let found = m.borrow().get(name).cloned();
                match found {
                    Some(v) => Ok(v),
                    None => match self.tmpl.missing_key {
                        MissingKey::Default => Ok(Value::Missing),
                        MissingKey::Zero => Ok(zero(elem)),
                        MissingKey::Error => {
                            self.fail(format!("map has no entry for key {name:?}"))
                        }
                    },
                }
            }
            other if self.tmpl.is_unknown(&other) => Ok(other),
            other => self.fail(format!(
                "can't evaluate field {name} in type {}",
                other.type_name()
            )),
        }
    }

    /// Evaluates an argument for a parameter of type `ty` (`None`: untyped).
    fn eval_arg(&mut self, dot: &Value, ty: Option<Ty>, arg: &Arg) -> Eval<Value> {
        self.set_at(arg);
        let v = match &arg.kind {
            ArgKind::Dot => dot.clone(),
            ArgKind::Nil => {
                return match ty {
                    None | Some(Ty::Any) => Ok(Value::Nil),
                    Some(Ty::Refl) => Ok(Value::Missing),
                    Some(Ty::Map) => Ok(Value::map(BTreeMap::new())),
                    Some(t) => self.fail(format!("cannot assign nil to {}", t.go_name())),
                };
            }
            ArgKind::Field(idents) => {
                self.field_chain(dot, dot.clone(), idents, std::slice::from_ref(arg), None)?
            }
            ArgKind::Var(idents) => {
                let v = self.var(&idents[0])?;
                if idents.len() == 1 {
                    v
                } else {
                    self.field_chain(dot, v, &idents[1..], &[], None)?
                }
            }
            ArgKind::Pipe(p) => self.eval_pipeline(dot, p)?,
            ArgKind::Ident(name) => {
                self.eval_function(dot, name, std::slice::from_ref(arg), None)?
            }
            ArgKind::Chain(..) => self.eval_command(dot, std::slice::from_ref(arg), None)?,
            lit => {
                let src = &self.tmpl.source[arg.pos..arg.end];
                return match (ty, lit) {
                    (None | Some(Ty::Any | Ty::Refl), ArgKind::Bool(b)) => Ok(Value::Bool(*b)),
                    (None | Some(Ty::Any | Ty::Refl), ArgKind::Str(s)) => {
                        Ok(Value::from(s.as_str()))
                    }
                    (None | Some(Ty::Any | Ty::Refl), ArgKind::Num(n)) => self.ideal(n),
                    (Some(Ty::Bool), ArgKind::Bool(b)) => Ok(Value::Bool(*b)),
                    (Some(Ty::Bool), _) => self.fail(format!("expected bool; found {src}")),
                    (Some(Ty::Str), ArgKind::Str(s)) => Ok(Value::from(s.as_str())),
                    (Some(Ty::Str), _) => self.fail(format!("expected string; found {src}")),
                    (Some(Ty::Int), ArgKind::Num(Number { int: Some(i), .. })) => {
                        Ok(Value::int(*i))
                    }
                    (Some(Ty::Int), _) => self.fail(format!("expected integer; found {src}")),
                    (Some(Ty::Float), ArgKind::Num(Number { float: Some(f), .. })) => {
                        Ok(Value::Float(*f))
                    }
                    (Some(Ty::Float), _) => self.fail(format!("expected float; found {src}")),
                    (Some(t), _) => self.fail(format!(
                        "can't handle {src} for arg of type {}",
                        t.go_name()
                    )),
                    (None, _) => self.fail(format!("can't handle {src}")),
                };
            }
        };
        self.set_at(arg);
        match ty {
            None => Ok(v),
            Some(t) => self.validate(v, t),
        }
    }

    /// Go's `validateType`: whether a value may be passed as `ty`.
    fn validate(&self, v: Value, ty: Ty) -> Eval<Value> {
        match funcs::validate(v, ty) {
            Ok(v) => Ok(v),
            Err(m) => self.fail(m),
        }
    }

    fn eval_function(
        &mut self,
        dot: &Value,
        name: &str,
        args: &[Arg],
        final_: Option<Value>,
    ) -> Eval<Value> {
        let cmd_span = (args[0].pos, args.last().map_or(args[0].end, |a| a.end));
        let given = &args[1..];
        if name == "and" || name == "or" {
            if given.is_empty() && final_.is_none() {
                self.at = cmd_span;
                return self.fail(format!(
                    "wrong number of args for {name}: want at least 1 got 0"
                ));
            }
            let mut v = Value::Missing;
            for a in given {
                v = self.eval_arg(dot, Some(Ty::Refl), a)?;
                if v.truth() == (name == "or") {
                    return Ok(v);
                }
            }
            if let Some(f) = final_ {
                v = f;
            }
            return Ok(v);
        }
        let Some(f) = funcs::lookup(name) else {
            self.at = cmd_span;
            return self.fail(format!("{name:?} is not a defined function"));
        };
        let num_in = given.len() + usize::from(final_.is_some());
        let fixed = f.params.len();
        match f.variadic {
            Some(_) if num_in < fixed => {
                self.at = cmd_span;
                return self.fail(format!(
                    "wrong number of args for {name}: want at least {fixed} got {}",
                    given.len()
                ));
            }
            None if num_in != fixed => {
                self.at = cmd_span;
                return self.fail(format!(
                    "wrong number of args for {name}: want {fixed} got {num_in}"
                ));
            }
            _ => {}
        }
        let mut argv = Vec::with_capacity(num_in);
        for (i, a) in given.iter().enumerate() {
            let ty = f.params.get(i).copied().or(f.variadic).unwrap_or(Ty::Any);
            argv.push(self.eval_arg(dot, Some(ty), a)?);
        }
        if let Some(v) = final_ {
            let ty = if num_in - 1 < fixed {
                f.params[num_in - 1]
            } else {
                f.variadic.unwrap_or(Ty::Any)
            };
            self.at = cmd_span;
            argv.push(self.validate(v, ty)?);
        }
        let ctx = funcs::Ctx { tmpl: self.tmpl };
        // A call is two steps and its arguments count by their size, its
        // result too (a list or map by its entries, a text by every 64
        // bytes); the clock is read when it returns.
        let size = argv.iter().map(size_of).sum::<u64>();
        self.at = cmd_span;
        self.step(2 + size / 4)?;
        match (f.call)(&ctx, argv) {
            Ok(v) => {
                self.step_after_call(size_of(&v))?;
                if v.is_container() {
                    self.at = cmd_span;
                    match check_nesting(&v) {
                        Ok(visited) => self.step(visited)?,
                        Err(Unkeepable::TooDeep) => {
                            return self.fail(format!(
                                "error calling {name}: its result nests lists and maps over {MAX_VALUE_DEPTH} levels deep"
                            ));
                        }
                        Err(Unkeepable::Cycle) => {
                            return self.fail(format!(
                                "error calling {name}: its result holds a map inside itself (a cycle), which cannot be printed, copied or compared"
                            ));
                        }
                    }
                }
                Ok(v)
            }
            Err(m) => {
                self.at = cmd_span;
                self.fail(format!("error calling {name}: {m}"))
            }
        }
    }
}

/// What a value counts for in a budget: a list or map by its entries, a
/// text by every 64 bytes, anything else nothing.
fn size_of(v: &Value) -> u64 {
    match v {
        Value::List(l, _) => l.len() as u64,
        Value::Map(m, _) => m.borrow().len() as u64,
        Value::Str(s) => s.len() as u64 / 64,
        _ => 0,
    }
}

/// The zero value of a map's elements, for `missingkey=zero`.
fn zero(e: Elem) -> Value {
    match e {
        Elem::Any => Value::Nil,
        Elem::Str => Value::from(""),
        Elem::Int => Value::int(0),
        Elem::List => Value::list(Vec::new()),
    }
}
