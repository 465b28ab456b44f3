//! The JSON value the reports are built from and read back into (`gpuleak merge`), and its
//! printer: two-space indentation, flat objects (frames) on one line. One writer for the
//! report, its memory object, the diff and the merge.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::dump::json_str;
use crate::symbolize::Frame;

/// A JSON value, just enough to build the report.
#[derive(Clone)]
pub(crate) enum J {
    Null,
    Bool(bool),
    U(u64),
    I(i64),
    /// A finite number (others print as null).
    F(f64),
    S(String),
    A(Vec<J>),
    O(Vec<(&'static str, J)>),
}

/// `null` or the text.
pub(crate) fn opt_str(s: Option<&str>) -> J {
    s.map_or(J::Null, |s| J::S(s.to_string()))
}

pub(crate) fn stack(frames: &[Frame]) -> J {
    J::A(frames.iter().map(frame).collect())
}

fn frame(f: &Frame) -> J {
    J::O(vec![
        ("function", opt_str(f.function.as_deref())),
        ("file", opt_str(f.file.as_deref())),
        ("line", f.line.map_or(J::Null, |l| J::U(u64::from(l)))),
        ("module", opt_str(f.module.as_deref())),
        ("address", J::S(format!("{:#x}", f.address))),
        ("inlined", J::Bool(f.inlined)),
        ("user", J::Bool(f.user)),
    ])
}

/// Whether a value prints on one line: scalars, and objects or arrays of scalars only.
fn is_flat(v: &J) -> bool {
    let scalar = |v: &J| !matches!(v, J::A(_) | J::O(_));
    match v {
        J::A(items) => items.iter().all(scalar),
        J::O(fields) => fields.iter().all(|(_, v)| scalar(v)),
        _ => true,
    }
}

/// Pretty-prints with two-space indentation; flat objects (frames) stay on one line.
pub(crate) fn render(v: &J, indent: usize, s: &mut String) {
    use std::fmt::Write as _;
    let pad = |s: &mut String, n: usize| s.extend(std::iter::repeat_n(' ', n));
    match v {
        J::Null => s.push_str("null"),
        J::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        J::U(n) => {
            let _ = write!(s, "{n}");
        }
        J::I(n) => {
            let _ = write!(s, "{n}");
        }
        J::F(x) if x.is_finite() => {
            // Six significant digits are plenty for ratios and rates.
            let _ = write!(s, "{}", (x * 1e6).round() / 1e6);
        }
        J::F(_) => s.push_str("null"),
        J::S(t) => json_str(t, s),
        J::A(items) if items.is_empty() => s.push_str("[]"),
        J::O(fields) if fields.is_empty() => s.push_str("{}"),
        J::A(items) if is_flat(v) && matches!(items.first(), Some(J::S(_))) && items.len() <= 8 => {
            s.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                render(item, indent, s);
            }
            s.push(']');
        }
        J::A(items) => {
            s.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                pad(s, indent + 2);
                render(item, indent + 2, s);
                s.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            pad(s, indent);
            s.push(']');
        }
        J::O(fields) if is_flat(v) && fields.len() <= 6 => {
            s.push('{');
            for (i, (k, item)) in fields.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                json_str(k, s);
                s.push_str(": ");
                render(item, indent, s);
            }
            s.push('}');
        }
        J::O(fields) => {
            s.push_str("{\n");
            for (i, (k, item)) in fields.iter().enumerate() {
                pad(s, indent + 2);
                json_str(k, s);
                s.push_str(": ");
                render(item, indent + 2, s);
                s.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
            }
            pad(s, indent);
            s.push('}');
        }
    }
}

thread_local! {
    static KEYS: RefCell<HashSet<&'static str>> = RefCell::new(HashSet::new());
}

/// A key of a report's objects, kept for the rest of the process (reports have a few dozen
/// distinct keys, whatever their size).
fn intern(key: &str) -> &'static str {
    KEYS.with(|k| {
        let mut k = k.borrow_mut();
        if let Some(s) = k.get(key) {
            return *s;
        }
        let s: &'static str = Box::leak(key.to_string().into_boxed_str());
        k.insert(s);
        s
    })
}

impl<'de> Deserialize<'de> for J {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<J, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = J;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<J, E> {
                Ok(J::Null)
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<J, E> {
                Ok(J::Bool(b))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<J, E> {
                Ok(J::U(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<J, E> {
                Ok(if n >= 0 { J::U(n as u64) } else { J::I(n) })
            }
            fn visit_f64<E: de::Error>(self, x: f64) -> Result<J, E> {
                Ok(J::F(x))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<J, E> {
                Ok(J::S(s.to_string()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<J, E> {
                Ok(J::S(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<J, A::Error> {
                let mut items = Vec::with_capacity(a.size_hint().unwrap_or(0));
                while let Some(v) = a.next_element()? {
                    items.push(v);
                }
                Ok(J::A(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<J, A::Error> {
                let mut fields = Vec::new();
                while let Some(k) = a.next_key::<String>()? {
                    let v = a.next_value()?;
                    fields.push((intern(&k), v));
                }
                Ok(J::O(fields))
            }
        }
        d.deserialize_any(V)
    }
}

impl J {
    pub(crate) fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::O(fields) => fields.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut J> {
        match self {
            J::O(fields) => fields.iter_mut().find(|(k, _)| *k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn u(&self) -> Option<u64> {
        match self {
            J::U(n) => Some(*n),
            _ => None,
        }
    }

    pub(crate) fn s(&self) -> Option<&str> {
        match self {
            J::S(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn items(&self) -> &[J] {
        match self {
            J::A(items) => items,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_objects_stay_on_one_line_and_nested_ones_indent() {
        let v = J::O(vec![
            ("a", J::U(1)),
            (
                "frames",
                J::A(vec![J::O(vec![("function", J::S("main".into())), ("line", J::Null)])]),
            ),
            ("empty", J::A(vec![])),
            ("neg", J::I(-3)),
        ]);
        let mut s = String::new();
        render(&v, 0, &mut s);
        assert_eq!(
            s,
            "{\n  \"a\": 1,\n  \"frames\": [\n    {\"function\": \"main\", \"line\": null}\n  ],\n  \"empty\": [],\n  \"neg\": -3\n}"
        );
    }
}
