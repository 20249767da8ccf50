//! The lexer of Go's template language, as `text/template/parse` lexes.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum T {
    Text,
    LeftDelim,
    RightDelim,
    Space,
    Ident,
    Field,
    Variable,
    Dot,
    Str,
    RawStr,
    Char,
    Number,
    Bool,
    Nil,
    Pipe,
    LParen,
    RParen,
    Declare,
    Assign,
    /// Any other printable ASCII character inside an action (`,`).
    Punct,
    // Keywords.
    If,
    Else,
    End,
    Range,
    With,
    Define,
    Template,
    Block,
    Break,
    Continue,
    Eof,
    Error,
}

/// One token: its kind, byte offset and text (for `Text`, after trimming;
/// for `Error`, the message).
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub t: T,
    pub pos: usize,
    pub val: String,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

fn keyword(word: &str) -> Option<T> {
    Some(match word {
        "if" => T::If,
        "else" => T::Else,
        "end" => T::End,
        "range" => T::Range,
        "with" => T::With,
        "define" => T::Define,
        "template" => T::Template,
        "block" => T::Block,
        "break" => T::Break,
        "continue" => T::Continue,
        "nil" => T::Nil,
        "true" | "false" => T::Bool,
        _ => return None,
    })
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    out: Vec<Token>,
    paren_depth: i32,
}

/// Lexes `src` whole. A lexing error ends the list with an `Error` token.
pub(crate) fn lex(src: &str) -> Vec<Token> {
    let mut l = Lexer {
        src,
        pos: 0,
        out: Vec::new(),
        paren_depth: 0,
    };
    if let Err((pos, msg)) = l.run() {
        l.out.push(Token {
            t: T::Error,
            pos,
            val: msg,
        });
    } else {
        l.out.push(Token {
            t: T::Eof,
            pos: src.len(),
            val: String::new(),
        });
    }
    l.out
}

type Lexed = Result<(), (usize, String)>;

impl Lexer<'_> {
    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn emit(&mut self, t: T, start: usize, val: impl Into<String>) {
        self.out.push(Token {
            t,
            pos: start,
            val: val.into(),
        });
    }

    /// At `}}` or ` -}}`: whether, and whether with a trim marker.
    fn at_right_delim(&self) -> Option<bool> {
        let r = self.rest().as_bytes();
        if r.len() >= 2 && is_space(r[0]) && r[1] == b'-' && self.rest()[2..].starts_with("}}") {
            return Some(true);
        }
        self.rest().starts_with("}}").then_some(false)
    }

    fn run(&mut self) -> Lexed {
        let mut trim_next = false;
        loop {
            // Text up to the next "{{".
            let start = self.pos;
            let end = self
                .rest()
                .find("{{")
                .map_or(self.src.len(), |i| self.pos + i);
            let mut text = &self.src[start..end];
            if trim_next {
                text = text.trim_start_matches([' ', '\t', '\r', '\n']);
            }
            self.pos = end;
            if end == self.src.len() {
                if !text.is_empty() {
                    self.emit(T::Text, start, text);
                }
                return Ok(());
            }
            let after = &self.src[end + 2..];
            let ab = after.as_bytes();
            let left_trim = ab.len() >= 2 && ab[0] == b'-' && is_space(ab[1]);
            if left_trim {
                text = text.trim_end_matches([' ', '\t', '\r', '\n']);
            }
            if !text.is_empty() {
                self.emit(T::Text, start, text);
            }
            let delim_at = self.pos;
            self.pos += 2 + if left_trim { 2 } else { 0 };
            if self.rest().starts_with("/*") {
                let Some(i) = self.rest()[2..].find("*/") else {
                    return Err((delim_at, "unclosed comment".into()));
                };
                self.pos += 2 + i + 2;
                let Some(trim) = self.at_right_delim() else {
                    return Err((delim_at, "comment ends before closing delimiter".into()));
                };
                self.pos += if trim { 4 } else { 2 };
                trim_next = trim;
                continue;
            }
            self.emit(T::LeftDelim, delim_at, "{{");
            self.paren_depth = 0;
            trim_next = self.inside_action(delim_at)?;
        }
    }

    /// Lexes one action up to and including its `}}`; returns whether it
    /// ended with a trim marker.
    fn inside_action(&mut self, delim_at: usize) -> Result<bool, (usize, String)> {
        loop {
            if let Some(trim) = self.at_right_delim() {
                if self.paren_depth != 0 {
                    return Err((self.pos, "unclosed left paren".into()));
                }
                let at = self.pos;
                self.pos += if trim { 4 } else { 2 };
                self.emit(T::RightDelim, at, "}}");
                return Ok(trim);
            }
            let start = self.pos;
            let Some(c) = self.rest().chars().next() else {
                return Err((delim_at, "unclosed action: \"{{\" without \"}}\"".into()));
            };
            let b = c as u32;
            if b < 128 && is_space(b as u8) {
                let n = self.rest().bytes().take_while(|&x| is_space(x)).count();
                // " -}}" after more than one space: the last space belongs to the marker.
                // (A single space before "-}}" was taken as the delimiter above.)
                let marker = self.src[start + n..].starts_with("-}}");
                self.pos += n - usize::from(marker);
                self.emit(T::Space, start, &self.src[start..self.pos]);
                continue;
            }
            self.pos += c.len_utf8();
            match c {
                '=' => self.emit(T::Assign, start, "="),
                ':' => {
                    if !self.rest().starts_with('=') {
                        return Err((start, "expected :=".into()));
                    }
                    self.pos += 1;
                    self.emit(T::Declare, start, ":=");
                }
                '|' => self.emit(T::Pipe, start, "|"),
                '"' => self.quote(start)?,
                '`' => {
                    let Some(i) = self.rest().find('`') else {
                        return Err((start, "unterminated raw quoted string".into()));
                    };
                    self.pos += i + 1;
                    self.emit(T::RawStr, start, &self.src[start..self.pos]);
                }
                '$' => self.field_or_variable(start, T::Variable)?,
                '\'' => self.char_constant(start)?,
                '.' if !self.rest().starts_with(|d: char| d.is_ascii_digit()) => {
                    self.field_or_variable(start, T::Field)?
                }
                '.' | '+' | '-' | '0'..='9' => {
                    self.pos = start;
                    self.number(start)?;
                }
                '(' => {
                    self.emit(T::LParen, start, "(");
                    self.paren_depth += 1;
                }
                ')' => {
                    self.emit(T::RParen, start, ")");
                    self.paren_depth -= 1;
                    if self.paren_depth < 0 {
                        return Err((start, "unexpected right paren U+0029 ')'".into()));
                    }
                }
                c if is_alnum(c) => {
                    self.pos = start;
                    self.pos += self.alnum_len();
                    let word = &self.src[start..self.pos];
                    let t = keyword(word).unwrap_or(T::Ident);
                    self.emit(t, start, word);
                    self.terminator()?;
                }
                c if c.is_ascii() && !c.is_ascii_control() => {
                    self.emit(T::Punct, start, c.to_string())
                }
                c => {
                    return Err((
                        start,
                        format!("unrecognized character in action: U+{:04X}", c as u32),
                    ));
                }
            }
        }
    }

    fn terminator(&self) -> Lexed {
        let Some(c) = self.rest().chars().next() else {
            return Ok(());
        };
        if (c.is_ascii() && is_space(c as u8))
            || matches!(c, '.' | ',' | '|' | ':' | ')' | '(')
            || self.rest().starts_with("}}")
        {
            return Ok(());
        }
        Err((self.pos, format!("bad character U+{:04X} '{c}'", c as u32)))
    }

    /// The length in bytes of the run of letters, digits and `_` next.
    fn alnum_len(&self) -> usize {
        self.rest()
            .chars()
            .take_while(|&c| is_alnum(c))
            .map(char::len_utf8)
            .sum()
    }

    fn field_or_variable(&mut self, start: usize, t: T) -> Lexed {
        let n = self.alnum_len();
        if n == 0 && t == T::Field {
            self.emit(T::Dot, start, ".");
            return self.terminator();
        }
        self.pos += n;
        self.emit(t, start, &self.src[start..self.pos]);
        self.terminator()
    }

    fn quote(&mut self, start: usize) -> Lexed {
        self.quoted(start, '"', T::Str, "unterminated quoted string")
    }

    fn char_constant(&mut self, start: usize) -> Lexed {
        self.quoted(start, '\'', T::Char, "unterminated character constant")
    }

    /// A literal up to its closing `close` on the same line, with `\`
    /// escapes (checked when the literal is parsed).
    fn quoted(&mut self, start: usize, close: char, t: T, unterminated: &str) -> Lexed {
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' if chars.next().is_none() => break,
                '\\' => {}
                '\n' => break,
                c if c == close => {
                    self.pos += i + 1;
                    self.emit(t, start, &self.src[start..self.pos]);
                    return Ok(());
                }
                _ => {}
            }
        }
        Err((start, unterminated.into()))
    }

    fn number(&mut self, start: usize) -> Lexed {
        let b = self.src.as_bytes();
        let mut i = self.pos;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let mut digits: &[u8] = b"0123456789_";
        let mut exp: &[u8] = b"eE";
        if b.get(i) == Some(&b'0') {
            match b.get(i + 1) {
                Some(b'x' | b'X') => {
                    i += 2;
                    digits = b"0123456789abcdefABCDEF_";
                    exp = b"pP";
                }
                Some(b'o' | b'O') => {
                    i += 2;
                    digits = b"01234567_";
                    exp = b"";
                }
                Some(b'b' | b'B') => {
                    i += 2;
                    digits = b"01_";
                    exp = b"";
                }
                _ => {}
            }
        }
        let run = |i: &mut usize, set: &[u8]| {
            while *i < b.len() && set.contains(&b[*i]) {
                *i += 1;
            }
        };
        run(&mut i, digits);
        if i < b.len() && b[i] == b'.' {
            i += 1;
            run(&mut i, digits);
        }
        if !exp.is_empty() && i < b.len() && exp.contains(&b[i]) {
            i += 1;
            if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                i += 1;
            }
            run(&mut i, b"0123456789_");
        }
        if i < b.len() && b[i] == b'i' {
            i += 1;
        }
        let next = self.src[i..].chars().next();
        if next.is_some_and(is_alnum) {
            let bad_end = i + next.map_or(0, char::len_utf8);
            return Err((
                start,
                format!("bad number syntax: {:?}", &self.src[start..bad_end]),
            ));
        }
        self.pos = i;
        self.emit(T::Number, start, &self.src[start..i]);
        Ok(())
    }
}
