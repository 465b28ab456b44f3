//! The diff as one JSON document: `new`, `grown`, `shrunk` and `gone` lists of sites, with
//! `summary`, `a` and `b` around them (`docs/diff.md` describes every field).

use std::io::{self, Write};

use super::{Diff, Side, SiteChange};
use crate::json::{render, stack, Layout, J};

/// The diff's schema version.
pub const SCHEMA_VERSION: u64 = 1;

/// Writes `d` to `out`, with a final newline.
pub fn write(d: &Diff, out: &mut impl Write) -> io::Result<()> {
    let mut s = String::with_capacity(4096);
    render(&document(d), Layout::Report, &mut s);
    s.push('\n');
    out.write_all(s.as_bytes())
}

fn opt(v: Option<u64>) -> J {
    v.map_or(J::Null, J::U)
}

fn delta(before: Option<u64>, after: Option<u64>) -> J {
    match (before, after) {
        (Some(a), Some(b)) => J::I(clamp(i128::from(b) - i128::from(a))),
        _ => J::Null,
    }
}

fn clamp(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

fn document(d: &Diff) -> J {
    let (a, b) = (d.a.total(), d.b.total());
    let growth = |s: &Side| s.growth.map(|g| g.bytes);
    let list = |l: &[SiteChange]| J::A(l.iter().map(site).collect());
    J::O(vec![
        ("schema_version", J::U(SCHEMA_VERSION)),
        ("compared", J::S(d.compared().to_string())),
        (
            "summary",
            J::O(vec![
                ("new", J::U(d.new.len() as u64)),
                ("grown", J::U(d.grown.len() as u64)),
                ("shrunk", J::U(d.shrunk.len() as u64)),
                ("gone", J::U(d.gone.len() as u64)),
                ("unchanged", J::U(d.unchanged)),
                ("bytes_before", J::U(a.bytes)),
                ("bytes_after", J::U(b.bytes)),
                ("delta", delta(Some(a.bytes), Some(b.bytes))),
                ("allocations_before", J::U(a.allocations)),
                ("allocations_after", J::U(b.allocations)),
                ("peak_bytes_before", opt(d.a.peak_bytes)),
                ("peak_bytes_after", opt(d.b.peak_bytes)),
                ("peak_delta", delta(d.a.peak_bytes, d.b.peak_bytes)),
                ("growth_bytes_before", opt(growth(&d.a))),
                ("growth_bytes_after", opt(growth(&d.b))),
                ("growth_sites_before", opt(d.a.growth.map(|g| g.sites))),
                ("growth_sites_after", opt(d.b.growth.map(|g| g.sites))),
            ]),
        ),
        ("a", side(&d.a)),
        ("b", side(&d.b)),
        ("new", list(&d.new)),
        ("grown", list(&d.grown)),
        ("shrunk", list(&d.shrunk)),
        ("gone", list(&d.gone)),
    ])
}

fn side(s: &Side) -> J {
    J::O(vec![
        ("input", J::S(s.input.clone())),
        ("source", J::S(s.source.name().to_string())),
        (
            "snapshot",
            match s.source {
                super::Source::Snapshot(id) => J::U(id),
                _ => J::Null,
            },
        ),
        ("sites", J::U(s.sites.len() as u64)),
    ])
}

fn site(c: &SiteChange) -> J {
    J::O(vec![
        ("site", J::S(c.site.to_string())),
        ("bytes_before", J::U(c.before.bytes)),
        ("bytes_after", J::U(c.after.bytes)),
        ("delta", J::I(clamp(c.delta()))),
        ("allocations_before", J::U(c.before.allocations)),
        ("allocations_after", J::U(c.after.allocations)),
        ("stack", stack(&c.stack)),
    ])
}
