//! The subset of CEL that DRA device selectors are written in and the solver evaluates:
//! `device.driver`, `device.attributes["domain"].name` (or `["name"]`),
//! `device.capacity["domain"].name`, string, integer and boolean literals, `quantity("40Gi")`,
//! `==`, `!=`, `<`, `<=`, `>`, `>=`, `&&`, `||`, `!`, parentheses, `has(...)`, and the
//! quantity methods `isGreaterThan`, `isLessThan` and `compareTo`. An expression outside the
//! subset is a [`CelError`] at compile time, never a silent match or mismatch.

use super::{Device, DeviceAttribute};
use crate::quantity::Quantity;
use std::cmp::Ordering;

/// An expression the subset cannot parse or does not support.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CEL selector {expression:?}: {reason}")]
pub struct CelError {
    /// The expression.
    pub expression: String,
    /// What is wrong or unsupported.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Int(i64),
    Op(&'static str),
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    const OPS: [&str; 16] = [
        "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", "[", "]", ".", ",", "?",
    ];
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err("unterminated string".into()),
                    Some(&q) if q == c => break,
                    Some('\\') => {
                        let e = chars.get(i + 1).ok_or("unterminated string")?;
                        s.push(match e {
                            'n' => '\n',
                            't' => '\t',
                            other => *other,
                        });
                        i += 2;
                        continue;
                    }
                    Some(&ch) => s.push(ch),
                }
                i += 1;
            }
            i += 1;
            out.push(Token::Str(s));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            if chars
                .get(i)
                .is_some_and(|c| c.is_alphanumeric() || *c == '.')
            {
                return Err(format!("unsupported number literal near {s:?}"));
            }
            out.push(Token::Int(
                s.parse().map_err(|_| format!("integer {s} out of range"))?,
            ));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let op = OPS
                .iter()
                .find(|op| rest.starts_with(**op))
                .ok_or_else(|| format!("unexpected character {c:?}"))?;
            if *op == "?" {
                return Err("the conditional operator is not supported".into());
            }
            out.push(Token::Op(op));
            i += op.len();
        }
    }
    Ok(out)
}

/// What an expression refers to on a device.
#[derive(Debug, Clone, PartialEq)]
enum Path {
    Driver,
    Attribute { domain: String, name: String },
    Capacity { domain: String, name: String },
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Bool(bool),
    Int(i64),
    Str(String),
    Quantity(Quantity),
    Path(Path),
    Has(Path),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(&'static str, Box<Expr>, Box<Expr>),
    /// `a.compareTo(b)` on quantities.
    CompareTo(Box<Expr>, Box<Expr>),
}

/// A compiled selector.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    expression: String,
    expr: Expr,
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, op: &str) -> bool {
        if self.peek() == Some(&Token::Op(op_static(op))) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(format!("expected {op:?}"))
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        while self.eat("||") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.cmp()?;
        while self.eat("&&") {
            left = Expr::And(Box::new(left), Box::new(self.cmp()?));
        }
        Ok(left)
    }

    fn cmp(&mut self) -> Result<Expr, String> {
        let left = self.unary()?;
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.eat(op) {
                let right = self.unary()?;
                return Ok(Expr::Cmp(op_static(op), Box::new(left), Box::new(right)));
            }
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        self.postfix()
    }

    fn string(&mut self) -> Result<String, String> {
        match self.tokens.get(self.at).cloned() {
            Some(Token::Str(s)) => {
                self.at += 1;
                Ok(s)
            }
            _ => Err("expected a string".into()),
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        match self.tokens.get(self.at).cloned() {
            Some(Token::Ident(s)) => {
                self.at += 1;
                Ok(s)
            }
            _ => Err("expected a name".into()),
        }
    }

    /// `device.driver`, `device.attributes["d"].n`, `device.capacity["d"]["n"]`, after
    /// `device` was read.
    fn path(&mut self) -> Result<Path, String> {
        self.expect(".")?;
        let field = self.ident()?;
        match field.as_str() {
            "driver" => Ok(Path::Driver),
            "attributes" | "capacity" => {
                self.expect("[")?;
                let domain = self.string()?;
                self.expect("]")?;
                let name = if self.eat(".") {
                    self.ident()?
                } else {
                    self.expect("[")?;
                    let n = self.string()?;
                    self.expect("]")?;
                    n
                };
                Ok(if field == "attributes" {
                    Path::Attribute { domain, name }
                } else {
                    Path::Capacity { domain, name }
                })
            }
            other => Err(format!("device.{other} is not supported")),
        }
    }

    fn postfix(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        while self.eat(".") {
            let method = self.ident()?;
            self.expect("(")?;
            let arg = self.or()?;
            self.expect(")")?;
            e = match method.as_str() {
                "isGreaterThan" => Expr::Cmp(">", Box::new(e), Box::new(arg)),
                "isLessThan" => Expr::Cmp("<", Box::new(e), Box::new(arg)),
                "compareTo" => Expr::CompareTo(Box::new(e), Box::new(arg)),
                other => return Err(format!("method {other}() is not supported")),
            };
        }
        Ok(e)
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let Some(token) = self.tokens.get(self.at).cloned() else {
            return Err("unexpected end of expression".into());
        };
        self.at += 1;
        match token {
            Token::Str(s) => Ok(Expr::Str(s)),
            Token::Int(i) => Ok(Expr::Int(i)),
            Token::Op("(") => {
                let e = self.or()?;
                self.expect(")")?;
                Ok(e)
            }
            Token::Op("-") => Err("negative literals are not supported".into()),
            Token::Ident(id) => match id.as_str() {
                "true" => Ok(Expr::Bool(true)),
                "false" => Ok(Expr::Bool(false)),
                "device" => Ok(Expr::Path(self.path()?)),
                "has" => {
                    self.expect("(")?;
                    if self.ident()? != "device" {
                        return Err("has() takes a device field".into());
                    }
                    let p = self.path()?;
                    self.expect(")")?;
                    Ok(Expr::Has(p))
                }
                "quantity" => {
                    self.expect("(")?;
                    let text = self.string()?;
                    self.expect(")")?;
                    Quantity::parse(&text)
                        .map(Expr::Quantity)
                        .map_err(|e| e.to_string())
                }
                other => Err(format!("{other} is not supported")),
            },
            Token::Op(op) => Err(format!("unexpected {op:?}")),
        }
    }
}

fn op_static(op: &str) -> &'static str {
    const ALL: [&str; 15] = [
        "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", "[", "]", ".", ",",
    ];
    ALL.iter().find(|o| **o == op).copied().unwrap_or("")
}

impl Selector {
    /// Compiles `expression`; anything outside the subset is an error naming the expression.
    pub fn compile(expression: &str) -> Result<Self, CelError> {
        let err = |reason: String| CelError {
            expression: expression.to_string(),
            reason,
        };
        let tokens = tokenize(expression).map_err(err)?;
        let mut p = Parser { tokens, at: 0 };
        let expr = p.or().map_err(err)?;
        if p.at != p.tokens.len() {
            return Err(err("unexpected text after the expression".into()));
        }
        Ok(Selector {
            expression: expression.to_string(),
            expr,
        })
    }

    /// The expression as written.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether `device` satisfies the selector. An evaluation error (a missing attribute, a
    /// type mismatch) is no match, so a device lacking what a selector asks about is never
    /// allocated.
    pub fn matches(&self, device: &Device) -> bool {
        matches!(eval(&self.expr, device), Ok(Value::Bool(true)))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Bool(bool),
    Int(i64),
    Str(String),
    Version(String),
    Quantity(Quantity),
}

fn resolve(path: &Path, device: &Device) -> Option<Value> {
    match path {
        Path::Driver => Some(Value::Str(device.driver.clone())),
        Path::Attribute { domain, name } => device.attribute(domain, name).map(|a| match a {
            DeviceAttribute::Int(i) => Value::Int(*i),
            DeviceAttribute::Bool(b) => Value::Bool(*b),
            DeviceAttribute::String(s) => Value::Str(s.clone()),
            DeviceAttribute::Version(v) => Value::Version(v.clone()),
        }),
        Path::Capacity { domain, name } => device
            .capacity_of(domain, name)
            .map(|q| Value::Quantity(*q)),
    }
}

fn eval(e: &Expr, device: &Device) -> Result<Value, ()> {
    Ok(match e {
        Expr::Bool(b) => Value::Bool(*b),
        Expr::Int(i) => Value::Int(*i),
        Expr::Str(s) => Value::Str(s.clone()),
        Expr::Quantity(q) => Value::Quantity(*q),
        Expr::Path(p) => resolve(p, device).ok_or(())?,
        Expr::Has(p) => Value::Bool(resolve(p, device).is_some()),
        Expr::Not(x) => match eval(x, device)? {
            Value::Bool(b) => Value::Bool(!b),
            _ => return Err(()),
        },
        // CEL's logical operators are commutative over errors: one side decides when it can.
        Expr::And(a, b) => match (eval(a, device), eval(b, device)) {
            (Ok(Value::Bool(false)), _) | (_, Ok(Value::Bool(false))) => Value::Bool(false),
            (Ok(Value::Bool(true)), Ok(Value::Bool(true))) => Value::Bool(true),
            _ => return Err(()),
        },
        Expr::Or(a, b) => match (eval(a, device), eval(b, device)) {
            (Ok(Value::Bool(true)), _) | (_, Ok(Value::Bool(true))) => Value::Bool(true),
            (Ok(Value::Bool(false)), Ok(Value::Bool(false))) => Value::Bool(false),
            _ => return Err(()),
        },
        Expr::CompareTo(a, b) => match (eval(a, device)?, eval(b, device)?) {
            (Value::Quantity(x), Value::Quantity(y)) => Value::Int(match x.cmp(&y) {
                Ordering::Less => -1,
                Ordering::Equal => 0,
                Ordering::Greater => 1,
            }),
            _ => return Err(()),
        },
        Expr::Cmp(op, a, b) => {
            let (x, y) = (eval(a, device)?, eval(b, device)?);
            let ord = match (&x, &y) {
                (Value::Int(x), Value::Int(y)) => x.cmp(y),
                (Value::Str(x), Value::Str(y)) => x.cmp(y),
                (Value::Quantity(x), Value::Quantity(y)) if !matches!(*op, "==" | "!=") => x.cmp(y),
                (Value::Bool(x), Value::Bool(y)) if matches!(*op, "==" | "!=") => x.cmp(y),
                (Value::Version(x), Value::Version(y)) if matches!(*op, "==" | "!=") => x.cmp(y),
                _ => return Err(()),
            };
            Value::Bool(match *op {
                "==" => ord == Ordering::Equal,
                "!=" => ord != Ordering::Equal,
                "<" => ord == Ordering::Less,
                "<=" => ord != Ordering::Greater,
                ">" => ord == Ordering::Greater,
                ">=" => ord != Ordering::Less,
                _ => return Err(()),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn gpu(model: &str, memory: i64) -> Device {
        Device {
            driver: "gpu.example.com".into(),
            pool: "node".into(),
            name: "gpu-0".into(),
            attributes: BTreeMap::from([
                ("model".into(), DeviceAttribute::String(model.into())),
                ("memory".into(), DeviceAttribute::Int(memory)),
            ]),
            capacity: BTreeMap::from([(
                "gpu.example.com/vram".into(),
                Quantity::parse("80Gi").unwrap(),
            )]),
        }
    }

    fn sel(e: &str) -> Selector {
        Selector::compile(e).unwrap()
    }

    #[test]
    fn upstream_selectors_evaluate() {
        let h100 = gpu("H100", 80);
        let a100 = gpu("A100", 40);
        let s = sel(r#"device.attributes["gpu.example.com"].model == "H100""#);
        assert!(s.matches(&h100) && !s.matches(&a100));
        let s = sel(r#"device.attributes["gpu.example.com"].memory > 40"#);
        assert!(s.matches(&h100) && !s.matches(&a100));
        assert!(sel(r#"device.driver == "gpu.example.com""#).matches(&h100));
        assert!(!sel(r#"device.driver == "nic.example.com""#).matches(&h100));
        let s = sel(r#"device.capacity["gpu.example.com"].vram.isGreaterThan(quantity("40Gi"))"#);
        assert!(s.matches(&h100));
        let s = sel(r#"device.capacity["gpu.example.com"].vram.isLessThan(quantity("40Gi"))"#);
        assert!(!s.matches(&h100));
        let s = sel(
            r#"device.capacity["gpu.example.com"].vram.compareTo(quantity("80Gi")) == 0 && !(device.attributes['gpu.example.com']['model'] != 'H100')"#,
        );
        assert!(s.matches(&h100) && !s.matches(&a100));
    }

    #[test]
    fn missing_attributes_do_not_match_and_has_tests_them() {
        let d = gpu("H100", 80);
        assert!(!sel(r#"device.attributes["gpu.example.com"].type == "compute""#).matches(&d));
        assert!(!sel(r#"device.attributes["other.com"].model == "H100""#).matches(&d));
        assert!(!sel(r#"has(device.attributes["gpu.example.com"].type)"#).matches(&d));
        // An error on one side of || does not hide a true other side.
        assert!(
            sel(r#"device.attributes["gpu.example.com"].type == "x" || device.driver == "gpu.example.com""#)
                .matches(&d)
        );
    }

    #[test]
    fn unsupported_expressions_are_errors_naming_them() {
        for bad in [
            "this is not valid CEL",
            "device.allowMultipleAllocations == true",
            r#"device.attributes["a"].b.matches("x")"#,
            "1 + 2",
            "device.driver == ",
        ] {
            let e = Selector::compile(bad).unwrap_err();
            assert_eq!(e.expression, bad);
            assert!(!e.reason.is_empty());
        }
    }
}
