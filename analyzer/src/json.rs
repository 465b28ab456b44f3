//! The one JSON writer of the analyzer: the value every document is built from (the report,
//! its memory object, the diff, the merge, and `gpuleak check`'s JSON and SARIF), its printer
//! in two layouts, and its reader (`gpuleak merge` reads reports back into it). `gpuleak dump`
//! writes its records as it decodes them, one a line, escaping strings with [`string`].
//!
//! Other inputs (baselines, the reports `gpuleak diff` compares) are read with serde_json. The
//! symbol cache is not output: gpuleak alone writes and reads its files, with serde's derive on
//! typed records (`symbolize::cache`).

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::symbolize::Frame;

/// A JSON value; objects keep their keys in the order given.
#[derive(Clone, Debug, PartialEq)]
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

/// A stack as an array of frame objects, innermost first.
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

/// How [`render`] lays a value out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// The report's: two-space indentation; objects of up to six scalar fields (frames) and
    /// arrays of up to eight scalars led by a string on one line; floats rounded to six
    /// decimals.
    Report,
    /// `gpuleak check`'s: two-space indentation, every non-empty array and object over several
    /// lines, floats as their shortest exact text (`2.5`, `50.0`, `1e+20`), backspace and form
    /// feed escaped as `\b` and `\f`. Byte for byte what serde_json's pretty printer wrote for
    /// these documents before they moved to this writer.
    Expanded,
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

/// Appends `v` to `s` in `layout`, without a final newline.
pub(crate) fn render(v: &J, layout: Layout, s: &mut String) {
    render_at(v, layout, 0, s);
}

fn render_at(v: &J, layout: Layout, indent: usize, s: &mut String) {
    use std::fmt::Write as _;
    let report = layout == Layout::Report;
    match v {
        J::Null => s.push_str("null"),
        J::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        J::U(n) => {
            let _ = write!(s, "{n}");
        }
        J::I(n) => {
            let _ = write!(s, "{n}");
        }
        J::F(x) if x.is_finite() && report => {
            // Six significant digits are plenty for ratios and rates.
            let _ = write!(s, "{}", (x * 1e6).round() / 1e6);
        }
        // serde_json's number text (the shortest that reads back the same, `50.0`, `1e+20`):
        // the text `check`'s documents have always had.
        J::F(x) => match serde_json::Number::from_f64(*x) {
            Some(n) => {
                let _ = write!(s, "{n}");
            }
            None => s.push_str("null"),
        },
        J::S(t) => escape(t, !report, s),
        J::A(items) if items.is_empty() => s.push_str("[]"),
        J::O(fields) if fields.is_empty() => s.push_str("{}"),
        J::A(items) if report && is_flat(v) && matches!(items.first(), Some(J::S(_))) && items.len() <= 8 => {
            s.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                render_at(item, layout, indent, s);
            }
            s.push(']');
        }
        J::A(items) => {
            s.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                pad(s, indent + 2);
                render_at(item, layout, indent + 2, s);
                s.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            pad(s, indent);
            s.push(']');
        }
        J::O(fields) if report && is_flat(v) && fields.len() <= 6 => {
            s.push('{');
            for (i, (k, item)) in fields.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                string(k, s);
                s.push_str(": ");
                render_at(item, layout, indent, s);
            }
            s.push('}');
        }
        J::O(fields) => {
            s.push_str("{\n");
            for (i, (k, item)) in fields.iter().enumerate() {
                pad(s, indent + 2);
                escape(k, !report, s);
                s.push_str(": ");
                render_at(item, layout, indent + 2, s);
                s.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
            }
            pad(s, indent);
            s.push('}');
        }
    }
}

/// Appends `n` spaces.
fn pad(s: &mut String, mut n: usize) {
    const SPACES: &str = "                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        s.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// Appends `t` as a JSON string literal, control characters as `\n`, `\r`, `\t` or `\u00XX`.
pub(crate) fn string(t: &str, s: &mut String) {
    escape(t, false, s);
}

/// Appends `t` as a JSON string literal; `short_bf` writes backspace and form feed as `\b`
/// and `\f` rather than `\u0008` and `\u000c`.
fn escape(t: &str, short_bf: bool, s: &mut String) {
    use std::fmt::Write as _;
    s.reserve(t.len() + 2);
    s.push('"');
    // Runs of characters that need no escape are copied whole: the bytes that do are all
    // ASCII, so every cut falls between characters.
    let mut from = 0;
    for (i, &b) in t.as_bytes().iter().enumerate() {
        if b != b'"' && b != b'\\' && b >= 0x20 {
            continue;
        }
        s.push_str(&t[from..i]);
        from = i + 1;
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x08 if short_bf => s.push_str("\\b"),
            0x0c if short_bf => s.push_str("\\f"),
            _ => {
                let _ = write!(s, "\\u{b:04x}");
            }
        }
    }
    s.push_str(&t[from..]);
    s.push('"');
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
    /// Orders the fields of every object, at every depth, by key (SARIF's order: the order
    /// serde_json's maps gave it).
    pub(crate) fn sort_keys(&mut self) {
        match self {
            J::A(items) => items.iter_mut().for_each(J::sort_keys),
            J::O(fields) => {
                fields.sort_by_key(|(k, _)| *k);
                fields.iter_mut().for_each(|(_, v)| v.sort_keys());
            }
            _ => {}
        }
    }

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
    fn strings_are_escaped() {
        let mut s = String::new();
        string("a\"b\\c\n\u{1}\u{8}é\u{7f}\tü", &mut s);
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001\\u0008é\u{7f}\\tü\"");
    }

    #[test]
    fn the_expanded_layout_is_serde_jsons_pretty_printer() {
        let v = J::O(vec![
            (
                "a",
                J::A(vec![J::S("\u{8}\u{c}\u{1f}\u{7f}\"é".into()), J::Null, J::Bool(true)]),
            ),
            (
                "b",
                J::O(vec![("x", J::U(u64::MAX)), ("y", J::I(-7)), ("z", J::O(vec![]))]),
            ),
            ("e", J::A(vec![])),
            (
                "f",
                J::A(
                    [
                        0.0,
                        -0.0,
                        5.0,
                        2.5,
                        0.1,
                        1e-5,
                        1e-7,
                        1e15,
                        1e16,
                        1e20,
                        581340081208420.2,
                        f64::MAX,
                    ]
                    .into_iter()
                    .map(J::F)
                    .collect(),
                ),
            ),
            ("nan", J::F(f64::NAN)),
        ]);
        // Keys in serde_json's (sorted) order.
        let mut s = String::new();
        render(&v, Layout::Expanded, &mut s);
        let parsed: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(s, serde_json::to_string_pretty(&parsed).unwrap());
        assert!(s.contains("\"\\b\\f\\u001f"), "{s}");
        assert!(s.contains("  5.0,") && s.contains("1e+20"), "{s}");
    }

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
        render(&v, Layout::Report, &mut s);
        assert_eq!(
            s,
            "{\n  \"a\": 1,\n  \"frames\": [\n    {\"function\": \"main\", \"line\": null}\n  ],\n  \"empty\": [],\n  \"neg\": -3\n}"
        );
    }
}
