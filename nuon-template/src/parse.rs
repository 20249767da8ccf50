//! The parser of Go's template language: the tree `text/template/parse`
//! builds, with the same checks (functions defined, variables declared,
//! `break` inside `range`).

use std::collections::{BTreeMap, HashSet};

use super::lex::{T, Token, lex};

mod number;
pub(crate) use number::number;

/// A node of a template's body.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Text(Box<str>),
    Action(Pipe),
    If(Branch),
    With(Branch),
    Range(Branch),
    Template {
        pos: usize,
        name: String,
        pipe: Option<Pipe>,
    },
    Break,
    Continue,
}

/// `if`, `with` or `range`.
#[derive(Debug, Clone)]
pub(crate) struct Branch {
    pub pipe: Pipe,
    pub list: Vec<Node>,
    pub else_list: Option<Vec<Node>>,
}

/// A pipeline: optional declarations, then commands joined by `|`.
#[derive(Debug, Clone)]
pub(crate) struct Pipe {
    pub pos: usize,
    pub end: usize,
    pub decl: Vec<String>,
    pub is_assign: bool,
    pub cmds: Vec<Cmd>,
}

/// One command of a pipeline: a function, field or value and its arguments.
#[derive(Debug, Clone)]
pub(crate) struct Cmd {
    pub args: Vec<Arg>,
}

/// An operand, with its span in the source for messages.
#[derive(Debug, Clone)]
pub(crate) struct Arg {
    pub pos: usize,
    pub end: usize,
    pub kind: ArgKind,
}

/// A number literal, with what it can be read as.
#[derive(Debug, Clone)]
pub(crate) struct Number {
    pub text: String,
    pub int: Option<i64>,
    pub float: Option<f64>,
}

#[derive(Debug, Clone)]
pub(crate) enum ArgKind {
    Dot,
    Nil,
    Bool(bool),
    Str(String),
    Num(Number),
    /// `.a.b`
    Field(Vec<String>),
    /// `$x.a.b`: the variable (with `$`), then fields.
    Var(Vec<String>),
    /// A function name.
    Ident(String),
    /// `( pipeline )`
    Pipe(Box<Pipe>),
    /// `(pipeline).a.b` or `fn.a`
    Chain(Box<Arg>, Vec<String>),
}

impl ArgKind {
    /// Whether this can only be a value (not a function, field or pipeline).
    fn is_constant(&self) -> bool {
        matches!(
            self,
            ArgKind::Dot | ArgKind::Nil | ArgKind::Bool(_) | ArgKind::Str(_) | ArgKind::Num(_)
        )
    }
}

/// A parse error at a byte offset.
#[derive(Debug, Clone)]
pub(crate) struct ParseError {
    pub pos: usize,
    pub message: String,
}

type Parsed<T> = Result<T, ParseError>;

/// The trees of one template text: the main one and every `define`d one.
#[derive(Debug, Clone, Default)]
pub(crate) struct Trees {
    pub main: Vec<Node>,
    pub defined: BTreeMap<String, Vec<Node>>,
}

/// How deep control structures and parenthesized pipelines may nest: the
/// parser, the engine and every walker of the tree recurse on it, on
/// threads with small stacks (Go 1.20 added such a limit too, with its
/// words). No config nests past a handful.
const MAX_NESTING: usize = 100;

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    at: usize,
    vars: Vec<String>,
    range_depth: usize,
    /// Nested lists and pipelines open now (bounded by [`MAX_NESTING`]).
    nesting: usize,
    funcs: &'a dyn Fn(&str) -> bool,
    defined: BTreeMap<String, Vec<Node>>,
}

enum End {
    Done,
    Else(usize),
    Eof,
}

/// Parses `src`. `is_func` says which identifiers are functions.
pub(crate) fn parse(src: &str, is_func: &dyn Fn(&str) -> bool) -> Parsed<Trees> {
    let mut p = Parser {
        src,
        toks: lex(src),
        at: 0,
        vars: vec!["$".into()],
        range_depth: 0,
        nesting: 0,
        funcs: is_func,
        defined: BTreeMap::new(),
    };
    let (main, end) = p.list(true)?;
    match end {
        End::Eof => {}
        End::Done => return Err(p.err_at(p.prev_pos(), "unexpected {{end}}")),
        End::Else(pos) => return Err(p.err_at(pos, "unexpected {{else}}")),
    }
    Ok(Trees {
        main,
        defined: p.defined,
    })
}

fn describe(t: &Token) -> String {
    match t.t {
        T::Eof => "EOF".into(),
        T::RightDelim => "\"}}\"".into(),
        T::LeftDelim => "\"{{\"".into(),
        T::Space => "space".into(),
        T::Error => t.val.clone(),
        _ => format!("{:?}", t.val),
    }
}

impl Parser<'_> {
    fn err_at(&self, pos: usize, msg: impl Into<String>) -> ParseError {
        ParseError {
            pos,
            message: msg.into(),
        }
    }

    fn prev_pos(&self) -> usize {
        self.toks[self.at.saturating_sub(1)].pos
    }

    fn peek(&self) -> &Token {
        &self.toks[self.at.min(self.toks.len() - 1)]
    }

    fn next(&mut self) -> Parsed<Token> {
        let t = self.peek().clone();
        if t.t == T::Error {
            return Err(self.err_at(t.pos, t.val));
        }
        if self.at < self.toks.len() - 1 {
            self.at += 1;
        }
        Ok(t)
    }

    fn skip_space(&mut self) {
        while self.peek().t == T::Space {
            self.at += 1;
        }
    }

    fn peek_non_space(&mut self) -> &Token {
        self.skip_space();
        self.peek()
    }

    fn next_non_space(&mut self) -> Parsed<Token> {
        self.skip_space();
        self.next()
    }

    fn unexpected(&self, t: &Token, context: &str) -> ParseError {
        if t.t == T::Error {
            return self.err_at(t.pos, t.val.clone());
        }
        self.err_at(t.pos, format!("unexpected {} in {context}", describe(t)))
    }

    fn expect(&mut self, want: T, context: &str) -> Parsed<Token> {
        let t = self.next_non_space()?;
        if t.t != want {
            return Err(self.unexpected(&t, context));
        }
        Ok(t)
    }

    /// Nodes up to `{{end}}`, `{{else}}` or the end of the text.
    /// Runs `f` one level deeper, refused past [`MAX_NESTING`].
    fn nested<R>(&mut self, f: impl FnOnce(&mut Self) -> Parsed<R>) -> Parsed<R> {
        if self.nesting >= MAX_NESTING {
            let pos = self.peek().pos;
            return Err(self.err_at(
                pos,
                format!("max expression depth exceeded (over {MAX_NESTING} nested actions or parentheses)"),
            ));
        }
        self.nesting += 1;
        let r = f(self);
        self.nesting -= 1;
        r
    }

    fn list(&mut self, top: bool) -> Parsed<(Vec<Node>, End)> {
        self.nested(|p| p.list_body(top))
    }

    fn list_body(&mut self, top: bool) -> Parsed<(Vec<Node>, End)> {
        let mut nodes = Vec::new();
        loop {
            let t = self.next()?;
            match t.t {
                T::Eof => return Ok((nodes, End::Eof)),
                T::Text => nodes.push(Node::Text(t.val.into_boxed_str())),
                T::LeftDelim => {
                    let k = self.peek_non_space().clone();
                    match k.t {
                        T::End => {
                            self.next()?;
                            self.expect(T::RightDelim, "end")?;
                            return Ok((nodes, End::Done));
                        }
                        T::Else => {
                            self.next()?;
                            // `else if` leaves the `if` for the caller.
                            if self.peek_non_space().t != T::If {
                                self.expect(T::RightDelim, "else")?;
                            }
                            return Ok((nodes, End::Else(k.pos)));
                        }
                        T::Define if top => {
                            self.next()?;
                            self.define(k.pos)?;
                        }
                        _ => nodes.push(self.action()?),
                    }
                }
                _ => return Err(self.unexpected(&t, "input")),
            }
        }
    }

    fn define(&mut self, pos: usize) -> Parsed<()> {
        let name = self.expect_string("define clause")?;
        self.expect(T::RightDelim, "define clause")?;
        let body = self.defined_body(pos)?;
        self.add_defined(pos, name, body)
    }

    /// The body of a `define` or `block` up to its `{{end}}`, with only `$`
    /// in scope (a defined template inherits no variables).
    fn defined_body(&mut self, pos: usize) -> Parsed<Vec<Node>> {
        let saved = std::mem::replace(&mut self.vars, vec!["$".into()]);
        let r = self.list(false);
        self.vars = saved;
        match r? {
            (body, End::Done) => Ok(body),
            (_, End::Else(p)) => Err(self.err_at(p, "unexpected {{else}}")),
            (_, End::Eof) => Err(self.err_at(pos, "unexpected EOF")),
        }
    }

    fn add_defined(&mut self, pos: usize, name: String, body: Vec<Node>) -> Parsed<()> {
        let empty = body
            .iter()
            .all(|n| matches!(n, Node::Text(t) if t.trim().is_empty()));
        match self.defined.get(&name) {
            Some(old) if !empty && !old.is_empty() => Err(self.err_at(
                pos,
                format!("template: multiple definition of template {name:?}"),
            )),
            Some(_) if empty => Ok(()),
            _ => {
                self.defined.insert(name, body);
                Ok(())
            }
        }
    }

    fn expect_string(&mut self, context: &str) -> Parsed<String> {
        let t = self.next_non_space()?;
        match t.t {
            T::Str | T::RawStr => unquote(&t.val).map_err(|m| self.err_at(t.pos, m)),
            _ => Err(self.unexpected(&t, context)),
        }
    }

    /// After `{{`: a control structure or an action.
    fn action(&mut self) -> Parsed<Node> {
        let t = self.peek_non_space().clone();
        match t.t {
            T::Block => {
                self.next()?;
                self.block(t.pos)
            }
            T::Break | T::Continue => {
                self.next()?;
                self.expect(T::RightDelim, &t.val)?;
                if self.range_depth == 0 {
                    return Err(
                        self.err_at(t.pos, format!("{{{{{}}}}} outside {{{{range}}}}", t.val))
                    );
                }
                Ok(if t.t == T::Break {
                    Node::Break
                } else {
                    Node::Continue
                })
            }
            T::If => {
                self.next()?;
                Ok(Node::If(self.control("if")?))
            }
            T::Range => {
                self.next()?;
                self.range_depth += 1;
                let b = self.control("range");
                self.range_depth -= 1;
                Ok(Node::Range(b?))
            }
            T::With => {
                self.next()?;
                Ok(Node::With(self.control("with")?))
            }
            T::Template => {
                self.next()?;
                let name = self.expect_string("template clause")?;
                let pipe = if self.peek_non_space().t != T::RightDelim {
                    Some(self.pipeline("template clause", T::RightDelim)?)
                } else {
                    self.next()?;
                    None
                };
                Ok(Node::Template {
                    pos: t.pos,
                    name,
                    pipe,
                })
            }
            T::Define => Err(self.err_at(
                t.pos,
                "unexpected <define> in command: define is only allowed at the top level",
            )),
            T::End | T::Else => Err(self.unexpected(&t, "command")),
            _ => Ok(Node::Action(self.pipeline("command", T::RightDelim)?)),
        }
    }

    fn block(&mut self, pos: usize) -> Parsed<Node> {
        let name = self.expect_string("block clause")?;
        let pipe = self.pipeline("block clause", T::RightDelim)?;
        let body = self.defined_body(pos)?;
        self.add_defined(pos, name.clone(), body)?;
        Ok(Node::Template {
            pos,
            name,
            pipe: Some(pipe),
        })
    }

    fn control(&mut self, context: &str) -> Parsed<Branch> {
        let mark = self.vars.len();
        let pos = self.prev_pos();
        let r = self.control_inner(context, pos);
        self.vars.truncate(mark);
        r
    }

    fn control_inner(&mut self, context: &str, pos: usize) -> Parsed<Branch> {
        let pipe = self.pipeline(context, T::RightDelim)?;
        let in_range = context == "range";
        let (list, end) = self.list(false)?;
        let unclosed = format!("unexpected EOF: {{{{{context}}}}} has no {{{{end}}}}");
        let else_list = match end {
            End::Done => None,
            End::Eof => return Err(self.err_at(pos, unclosed)),
            End::Else(_) => {
                if context == "if" && self.peek_non_space().t == T::If {
                    // {{else if b}} is {{else}}{{if b}}…{{end}}, sharing our {{end}}.
                    self.next()?;
                    Some(vec![Node::If(self.control("if")?)])
                } else {
                    let depth = self.range_depth;
                    if in_range {
                        // `break` in a range's else belongs to an outer range.
                        self.range_depth -= 1;
                    }
                    let r = self.list(false);
                    self.range_depth = depth;
                    let (l, end) = r?;
                    match end {
                        End::Done => Some(l),
                        End::Else(p) => {
                            return Err(self.err_at(p, "expected end; found {{else}}"));
                        }
                        End::Eof => return Err(self.err_at(pos, unclosed)),
                    }
                }
            }
        };
        Ok(Branch {
            pipe,
            list,
            else_list,
        })
    }

    fn pipeline(&mut self, context: &str, end: T) -> Parsed<Pipe> {
        self.nested(|p| p.pipeline_body(context, end))
    }

    fn pipeline_body(&mut self, context: &str, end: T) -> Parsed<Pipe> {
        let pos = self.peek_non_space().pos;
        let mut pipe = Pipe {
            pos,
            end: pos,
            decl: Vec::new(),
            is_assign: false,
            cmds: Vec::new(),
        };
        // Declarations: `$x :=`, `$x =`, `$i, $v :=` (range only).
        loop {
            let save = self.at;
            if self.peek_non_space().t != T::Variable {
                break;
            }
            let v = self.next()?;
            let after = self.peek_non_space().t;
            match after {
                T::Assign | T::Declare => {
                    let op = self.next()?;
                    pipe.is_assign = op.t == T::Assign;
                    if pipe.is_assign && !self.vars.contains(&v.val) {
                        return Err(self.err_at(v.pos, format!("undefined variable {:?}", v.val)));
                    }
                    pipe.decl.push(v.val.clone());
                    self.vars.push(v.val);
                    break;
                }
                T::Punct if self.peek().val == "," => {
                    self.next()?;
                    pipe.decl.push(v.val.clone());
                    self.vars.push(v.val);
                    if context == "range" && pipe.decl.len() < 2 {
                        match self.peek_non_space().t {
                            T::Variable | T::RightDelim | T::RParen => continue,
                            _ => {
                                return Err(
                                    self.err_at(v.pos, "range can only initialize variables")
                                );
                            }
                        }
                    }
                    return Err(self.err_at(v.pos, format!("too many declarations in {context}")));
                }
                _ => {
                    self.at = save;
                    break;
                }
            }
        }
        loop {
            let t = self.next_non_space()?;
            if t.t == end {
                pipe.end = t.pos;
                if pipe.cmds.is_empty() {
                    return Err(self.err_at(t.pos, format!("missing value for {context}")));
                }
                for (i, c) in pipe.cmds.iter().enumerate().skip(1) {
                    if c.args[0].kind.is_constant() {
                        return Err(self.err_at(
                            c.args[0].pos,
                            format!("non executable command in pipeline stage {}", i + 1),
                        ));
                    }
                }
                return Ok(pipe);
            }
            match t.t {
                T::Bool
                | T::Char
                | T::Dot
                | T::Field
                | T::Ident
                | T::Number
                | T::Nil
                | T::RawStr
                | T::Str
                | T::Variable
                | T::LParen => {
                    self.at -= 1;
                    pipe.cmds.push(self.command()?);
                }
                _ => return Err(self.unexpected(&t, context)),
            }
        }
    }

    fn command(&mut self) -> Parsed<Cmd> {
        let mut args = Vec::new();
        loop {
            self.skip_space();
            if let Some(a) = self.operand()? {
                args.push(a);
            }
            let t = self.next()?;
            match t.t {
                T::Space => continue,
                T::RightDelim | T::RParen => self.at -= 1,
                T::Pipe => {}
                _ => return Err(self.unexpected(&t, "operand")),
            }
            break;
        }
        if args.is_empty() {
            return Err(self.err_at(self.peek().pos, "empty command"));
        }
        Ok(Cmd { args })
    }

    fn operand(&mut self) -> Parsed<Option<Arg>> {
        let Some(mut node) = self.term()? else {
            return Ok(None);
        };
        if self.peek().t == T::Field {
            let mut fields = Vec::new();
            let mut end = node.end;
            while self.peek().t == T::Field {
                let f = self.next()?;
                end = f.pos + f.val.len();
                fields.push(f.val[1..].to_string());
            }
            node = match node.kind {
                ArgKind::Field(mut f) => {
                    f.extend(fields);
                    Arg {
                        pos: node.pos,
                        end,
                        kind: ArgKind::Field(f),
                    }
                }
                ArgKind::Var(mut v) => {
                    v.extend(fields);
                    Arg {
                        pos: node.pos,
                        end,
                        kind: ArgKind::Var(v),
                    }
                }
                k if k.is_constant() => {
                    return Err(self.err_at(
                        node.pos,
                        format!(
                            "unexpected . after term {:?}",
                            &self.src[node.pos..node.end]
                        ),
                    ));
                }
                k => Arg {
                    pos: node.pos,
                    end,
                    kind: ArgKind::Chain(
                        Box::new(Arg {
                            pos: node.pos,
                            end: node.end,
                            kind: k,
                        }),
                        fields,
                    ),
                },
            };
        }
        Ok(Some(node))
    }

    fn term(&mut self) -> Parsed<Option<Arg>> {
        let t = self.next_non_space()?;
        let end = t.pos + t.val.len();
        let kind = match t.t {
            T::Ident => {
                if !(self.funcs)(&t.val) {
                    return Err(self.err_at(t.pos, format!("function {:?} not defined", t.val)));
                }
                ArgKind::Ident(t.val)
            }
            T::Dot => ArgKind::Dot,
            T::Nil => ArgKind::Nil,
            T::Variable => {
                if !self.vars.contains(&t.val) {
                    return Err(self.err_at(t.pos, format!("undefined variable {:?}", t.val)));
                }
                ArgKind::Var(vec![t.val])
            }
            T::Field => ArgKind::Field(vec![t.val[1..].to_string()]),
            T::Bool => ArgKind::Bool(t.val == "true"),
            T::Number | T::Char => ArgKind::Num(number(&t.val).map_err(|m| self.err_at(t.pos, m))?),
            T::LParen => {
                let p = self.pipeline("parenthesized pipeline", T::RParen)?;
                let end = p.end + 1;
                return Ok(Some(Arg {
                    pos: t.pos,
                    end,
                    kind: ArgKind::Pipe(Box::new(p)),
                }));
            }
            T::Str | T::RawStr => ArgKind::Str(unquote(&t.val).map_err(|m| self.err_at(t.pos, m))?),
            _ => {
                self.at -= 1;
                return Ok(None);
            }
        };
        Ok(Some(Arg {
            pos: t.pos,
            end,
            kind,
        }))
    }
}

/// Go's `strconv.Unquote` for string and raw string literals.
pub(crate) fn unquote(lit: &str) -> Result<String, String> {
    if let Some(raw) = lit.strip_prefix('`').and_then(|s| s.strip_suffix('`')) {
        return Ok(raw.replace('\r', ""));
    }
    let inner = lit
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .ok_or("invalid syntax")?;
    let mut out = String::new();
    let mut rest = inner;
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        if c != '\\' {
            out.push(c);
            continue;
        }
        let (ch, r) = unescape(rest, '"')?;
        out.push_str(&ch);
        rest = r;
    }
    Ok(out)
}

/// One escape after `\`; returns the text it stands for and the rest.
fn unescape(rest: &str, quote: char) -> Result<(String, &str), String> {
    let bad = || "invalid syntax".to_string();
    let c = rest.chars().next().ok_or_else(bad)?;
    let after = &rest[c.len_utf8()..];
    let simple = match c {
        'a' => Some('\x07'),
        'b' => Some('\x08'),
        'f' => Some('\x0c'),
        'n' => Some('\n'),
        'r' => Some('\r'),
        't' => Some('\t'),
        'v' => Some('\x0b'),
        '\\' => Some('\\'),
        q if q == quote => Some(q),
        _ => None,
    };
    if let Some(s) = simple {
        return Ok((s.to_string(), after));
    }
    let hex = |n: usize| -> Result<(u32, &str), String> {
        let h = after.get(..n).ok_or_else(bad)?;
        let v = u32::from_str_radix(h, 16).map_err(|_| bad())?;
        Ok((v, &after[n..]))
    };
    match c {
        'x' => {
            let (v, r) = hex(2)?;
            // A byte; as text only when it is ASCII.
            let ch = char::from_u32(v).filter(|_| v < 0x80).ok_or_else(bad)?;
            Ok((ch.to_string(), r))
        }
        'u' | 'U' => {
            let (v, r) = hex(if c == 'u' { 4 } else { 8 })?;
            Ok((char::from_u32(v).ok_or_else(bad)?.to_string(), r))
        }
        '0'..='7' => {
            let o = rest.get(..3).ok_or_else(bad)?;
            let v = u32::from_str_radix(o, 8).map_err(|_| bad())?;
            let ch = char::from_u32(v).filter(|_| v < 0x80).ok_or_else(bad)?;
            Ok((ch.to_string(), &rest[3..]))
        }
        _ => Err(bad()),
    }
}

/// Every function name a parsed tree calls, for checks.
pub(crate) fn collect_idents(nodes: &[Node], out: &mut HashSet<String>) {
    fn pipe(p: &Pipe, out: &mut HashSet<String>) {
        for c in &p.cmds {
            for a in &c.args {
                arg(a, out);
            }
        }
    }
    fn arg(a: &Arg, out: &mut HashSet<String>) {
        match &a.kind {
            ArgKind::Ident(n) => {
                out.insert(n.clone());
            }
            ArgKind::Pipe(p) => pipe(p, out),
            ArgKind::Chain(a, _) => arg(a, out),
            _ => {}
        }
    }
    for n in nodes {
        match n {
            Node::Action(p) => pipe(p, out),
            Node::If(b) | Node::With(b) | Node::Range(b) => {
                pipe(&b.pipe, out);
                collect_idents(&b.list, out);
                if let Some(e) = &b.else_list {
                    collect_idents(e, out);
                }
            }
            Node::Template { pipe: Some(p), .. } => pipe(p, out),
            _ => {}
        }
    }
}

/// Every field chain read from the data's root (`.a.b` while dot is the
/// root; `$.a.b` anywhere), for checks of what a template reads.
pub(crate) fn collect_refs(nodes: &[Node], dot_is_root: bool, out: &mut Vec<super::FieldRef>) {
    fn pipe(p: &Pipe, root: bool, out: &mut Vec<super::FieldRef>) {
        for c in &p.cmds {
            for a in &c.args {
                arg(a, root, out);
            }
        }
    }
    fn printed(p: &Pipe, root: bool, out: &mut Vec<super::FieldRef>) {
        let before = out.len();
        pipe(p, root, out);
        let alone = p.decl.is_empty() && p.cmds.len() == 1 && p.cmds[0].args.len() == 1;
        if alone && out.len() == before + 1 {
            out[before].printed = true;
        }
    }
    fn arg(a: &Arg, root: bool, out: &mut Vec<super::FieldRef>) {
        match &a.kind {
            ArgKind::Field(f) if root => out.push(super::FieldRef {
                path: f.clone(),
                offset: a.pos,
                end: a.end,
                printed: false,
            }),
            ArgKind::Var(v) if v[0] == "$" && v.len() > 1 => out.push(super::FieldRef {
                path: v[1..].to_vec(),
                offset: a.pos,
                end: a.end,
                printed: false,
            }),
            ArgKind::Pipe(p) => pipe(p, root, out),
            ArgKind::Chain(inner, _) => arg(inner, root, out),
            _ => {}
        }
    }
    for n in nodes {
        match n {
            Node::Action(p) => printed(p, dot_is_root, out),
            Node::If(b) => {
                pipe(&b.pipe, dot_is_root, out);
                collect_refs(&b.list, dot_is_root, out);
                if let Some(e) = &b.else_list {
                    collect_refs(e, dot_is_root, out);
                }
            }
            Node::With(b) | Node::Range(b) => {
                pipe(&b.pipe, dot_is_root, out);
                collect_refs(&b.list, false, out);
                if let Some(e) = &b.else_list {
                    collect_refs(e, dot_is_root, out);
                }
            }
            Node::Template { pipe: Some(p), .. } => pipe(p, dot_is_root, out),
            _ => {}
        }
    }
}
