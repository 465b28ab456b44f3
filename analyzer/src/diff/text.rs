//! The diff as text: what was compared, the totals, peak and growth of each side, then each
//! new, grown, shrunk and gone site with its bytes, allocations and stack (frames as in the
//! report).

use std::fmt::Write as _;
use std::io::{self, Write};

use super::{plural, Diff, Side, SiteChange, Source};
use crate::check::baseline::Totals;
use crate::report::text::frames;

/// Writes `d` to `out`; `native_frames` shows every native frame of Python stacks.
pub fn write(d: &Diff, native_frames: bool, out: &mut impl Write) -> io::Result<()> {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "gpuleak diff: {} bytes per site, A {} -> B {}",
        d.compared(),
        describe(&d.a),
        describe(&d.b)
    );
    let (a, b) = (d.a.total(), d.b.total());
    let _ = writeln!(
        s,
        "  {}: {} -> {} ({})",
        d.compared(),
        totals(a),
        totals(b),
        signed(i128::from(b.bytes) - i128::from(a.bytes))
    );
    if d.a.peak_bytes.is_some() || d.b.peak_bytes.is_some() {
        let peak = |p: Option<u64>| p.map_or("-".to_string(), |p| format!("{p} bytes"));
        let change = match (d.a.peak_bytes, d.b.peak_bytes) {
            (Some(x), Some(y)) => format!(" ({})", signed(i128::from(y) - i128::from(x))),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "  peak: {} -> {}{change}",
            peak(d.a.peak_bytes),
            peak(d.b.peak_bytes)
        );
    }
    if d.a.growth.is_some() || d.b.growth.is_some() {
        let growth = |side: &Side| match side.growth {
            Some(g) if g.sites > 0 => format!("{} rising by {} bytes", plural(g.sites, "site", "sites"), g.bytes),
            Some(_) => "none".to_string(),
            None => "-".to_string(),
        };
        let _ = writeln!(s, "  growth: {} -> {}", growth(&d.a), growth(&d.b));
    }
    let _ = writeln!(
        s,
        "  sites: {} new, {} grown, {} shrunk, {} gone, {} unchanged",
        d.new.len(),
        d.grown.len(),
        d.shrunk.len(),
        d.gone.len(),
        d.unchanged
    );
    for (what, list) in [
        ("new", &d.new),
        ("grown", &d.grown),
        ("shrunk", &d.shrunk),
        ("gone", &d.gone),
    ] {
        for c in list {
            site(what, c, native_frames, &mut s);
        }
    }
    let _ = writeln!(
        s,
        "\n{}",
        if d.exit_code() == 0 {
            "nothing new or grown"
        } else {
            "sites are new or grew"
        }
    );
    out.write_all(s.as_bytes())
}

fn describe(side: &Side) -> String {
    match side.source {
        Source::Snapshot(id) => format!("{} (snapshot {id})", side.input),
        Source::Report => format!("{} (JSON report)", side.input),
        Source::Trace => side.input.clone(),
    }
}

fn totals(t: Totals) -> String {
    format!(
        "{} bytes in {}",
        t.bytes,
        plural(t.allocations, "allocation", "allocations")
    )
}

fn signed(v: i128) -> String {
    if v >= 0 {
        format!("+{v} bytes")
    } else {
        format!("{v} bytes")
    }
}

fn site(what: &str, c: &SiteChange, native_frames: bool, s: &mut String) {
    let _ = writeln!(
        s,
        "\n{what}: {} -> {} ({})\n  site {}",
        totals(c.before),
        totals(c.after),
        signed(c.delta()),
        c.site
    );
    frames(&c.stack, native_frames, s);
}
