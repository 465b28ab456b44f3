//! `gpuleak dump`: every record as one JSON object per line, in sequence order.
//!
//! Each line has `seq`, `time_ns`, `tid`, `offset` (file offset of the record), `type` (the
//! record kind's name) and the kind's own fields. Addresses and handles are hex strings,
//! API numbers their symbol names, stacks lists of hex return addresses.
//!
//! Records are written as they are decoded, escaped by the JSON writer's `json::string`, not
//! built as `json::J` values first: a value per record took 1.5 times the CPU on a trace of
//! 604,000 records (`perf stat -r 5 gpuleak dump`, 2026-12-06).

use std::io::{self, Write};

use gpuleak_format::{Body, DecodeError, Entry, Value};

use crate::file::TraceFile;
use crate::json::string as json_str;

/// Writes every readable record of `file` to `out`; returns the decoding errors met (the
/// records before and around each one are still written).
pub fn write(file: &TraceFile, out: &mut impl Write) -> io::Result<Vec<DecodeError>> {
    let mut errors = Vec::new();
    let Ok(trace) = file.trace() else {
        return Ok(errors);
    };
    let mut line = String::with_capacity(256);
    for r in trace.records() {
        match r {
            Ok(entry) => {
                line.clear();
                entry_json(&entry, &mut line);
                line.push('\n');
                out.write_all(line.as_bytes())?;
            }
            Err(e) => errors.push(e),
        }
    }
    Ok(errors)
}

/// Appends one record as a JSON object.
pub fn entry_json(e: &Entry<'_>, s: &mut String) {
    use std::fmt::Write as _;
    let r = &e.record;
    let _ = write!(
        s,
        r#"{{"seq":{},"time_ns":{},"tid":{},"offset":{},"type":"#,
        r.seq.0, r.time_ns, e.tid, e.offset
    );
    json_str(r.body.name(), s);
    if let Body::Unknown { kind, payload } = &r.body {
        let _ = write!(s, r#","kind":{kind},"payload":""#);
        hex_bytes(payload, s);
        s.push('"');
    }
    r.body.visit(&mut |name, v| {
        s.push(',');
        json_str(name, s);
        s.push(':');
        value_json(v, s);
    });
    s.push('}');
}

fn value_json(v: Value<'_>, s: &mut String) {
    use std::fmt::Write as _;
    match v {
        Value::U(n) => {
            let _ = write!(s, "{n}");
        }
        Value::I(n) => {
            let _ = write!(s, "{n}");
        }
        Value::Addr(a) => {
            let _ = write!(s, "\"{a:#x}\"");
        }
        Value::Api(a) => json_str(&a.to_string(), s),
        Value::Kind(k) => json_str(k.name(), s),
        Value::Str(t) => json_str(t, s),
        Value::Bytes(b) => {
            s.push('"');
            hex_bytes(b, s);
            s.push('"');
        }
        Value::Addrs(list) => {
            s.push('[');
            for (i, a) in list.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                let _ = write!(s, "\"{a:#x}\"");
            }
            s.push(']');
        }
        Value::Strs(list) => {
            s.push('[');
            for (i, t) in list.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                json_str(t, s);
            }
            s.push(']');
        }
    }
}

fn hex_bytes(b: &[u8], s: &mut String) {
    use std::fmt::Write as _;
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
}
