//! The documentation against the code: the one settings table (`docs/settings.md`) names
//! exactly the `GPULEAK_*` variables the code reads, and every link between the project's
//! Markdown pages leads to a file (and a heading) that exists.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Files under `dir` (recursively) whose names end in one of `exts`.
fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') && name != "node_modules" {
                files(&path, exts, out);
            }
        } else if exts.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

/// The names of the form `GPULEAK_[A-Z0-9_]+` that stand alone in quotes in `text`: a name the
/// code passes to the environment (read, looked up or set for a child), not one mentioned in
/// a message or a comment, nor a bare prefix.
fn quoted_setting_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("\"GPULEAK_") {
        let after = &rest[at + 1..];
        let len = after
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(after.len());
        if after[len..].starts_with('"') && !after[..len].ends_with('_') {
            names.insert(after[..len].to_string());
        }
        rest = &after[len..];
    }
    names
}

/// The variables in the first column of the settings table.
fn table_names(doc: &str) -> Vec<String> {
    doc.lines()
        .filter_map(|l| l.strip_prefix("| `GPULEAK_"))
        .map(|l| format!("GPULEAK_{}", &l[..l.find('`').expect("closing backquote")]))
        .collect()
}

#[test]
fn settings_table_matches_the_code() {
    let root = repo();
    let doc = fs::read_to_string(root.join("docs/settings.md")).expect("docs/settings.md");
    let rows = table_names(&doc);
    let table: BTreeSet<String> = rows.iter().cloned().collect();
    assert_eq!(
        rows.len(),
        table.len(),
        "a variable has two rows in docs/settings.md: {rows:?}"
    );

    // Where the code reads settings: the shim, the gpuleak command (with the sitecustomize it
    // writes) and the Python package. Build scripts and tests are left out: their variables
    // are not settings.
    let mut sources = Vec::new();
    for dir in ["shim/src", "format/src", "unwind/src", "analyzer/src", "python/gpuleak"] {
        files(&root.join(dir), &[".rs", ".py"], &mut sources);
    }
    let mut code: BTreeMap<String, PathBuf> = BTreeMap::new();
    for path in &sources {
        let text = fs::read_to_string(path).unwrap_or_default();
        for name in quoted_setting_names(&text) {
            code.entry(name)
                .or_insert_with(|| path.strip_prefix(&root).unwrap_or(path).to_path_buf());
        }
    }
    assert!(
        code.contains_key("GPULEAK_OUTPUT") && code.contains_key("GPULEAK_LIB"),
        "the scan found {code:?}"
    );

    let missing: Vec<String> = code
        .iter()
        .filter(|(n, _)| !table.contains(*n))
        .map(|(n, p)| format!("{n} (read in {})", p.display()))
        .collect();
    assert!(
        missing.is_empty(),
        "read by the code but not in docs/settings.md's table: {missing:?}"
    );
    let unread: Vec<&String> = table.iter().filter(|n| !code.contains_key(*n)).collect();
    assert!(
        unread.is_empty(),
        "in docs/settings.md's table but read by no code: {unread:?}"
    );
}

#[test]
fn quoted_setting_names_skip_mentions() {
    let text = r#"var("GPULEAK_LIMIT"); "GPULEAK_FAIL={v:?}"; // GPULEAK_CLOCK; ("GPULEAK_X1", "GPULEAK_")"#;
    let names: Vec<String> = quoted_setting_names(text).into_iter().collect();
    assert_eq!(names, ["GPULEAK_LIMIT", "GPULEAK_X1"]);
}

/// A heading's anchor as GitHub makes it: lower case, spaces to `-`, other punctuation but
/// `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown page's headings (outside fenced code).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            let base = anchor(line.trim_start_matches('#'));
            let mut name = base.clone();
            let mut n = 0;
            while out.contains(&name) {
                n += 1;
                name = format!("{base}-{n}");
            }
            out.insert(name);
        }
    }
    out
}

/// The targets of the inline links `[text](target)` in a Markdown page, outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code spans may hold `](` that is no link.
        let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("").to_string();
            out.push(target);
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn links_between_docs_resolve() {
    let root = repo();
    let mut pages = Vec::new();
    files(&root, &[".md"], &mut pages);
    pages.retain(|p| !p.starts_with(root.join("fuzz/corpus")));
    assert!(
        pages.iter().any(|p| p.ends_with("docs/settings.md")),
        "no pages found under {}",
        root.display()
    );
    let mut broken = Vec::new();
    for page in &pages {
        let text = fs::read_to_string(page).expect("page");
        for target in links(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, frag) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                page.parent().expect("dir").join(file)
            };
            let shown = page.strip_prefix(&root).unwrap_or(page).display().to_string();
            if !path.exists() {
                broken.push(format!("{shown}: {target} (no such file)"));
                continue;
            }
            if let (Some(frag), true) = (frag, path.extension().is_some_and(|e| e == "md")) {
                let text = fs::read_to_string(&path).expect("linked page");
                if !anchors(&text).contains(frag) {
                    broken.push(format!("{shown}: {target} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_github() {
    assert_eq!(anchor(" Stream-ordering findings"), "stream-ordering-findings");
    assert_eq!(anchor(" The user's frame"), "the-users-frame");
    assert_eq!(
        anchor(" Bounded traces (written by the shim)"),
        "bounded-traces-written-by-the-shim"
    );
    assert_eq!(links("see [a](b.md#c) and `[x](y)`"), ["b.md#c"]);
}
