//! The crates' layering: `scripts/module-cycles` finds no import circle between the modules of
//! the analyzer and the format crate, file by file or taken together by their first path
//! segment; in the shim, file by file, none but the knot of the graph handlers; and it does
//! find the circle of a small crate made with one.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpuleak_e2e::TempDir;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// `scripts/module-cycles ARGS` from the repository: its exit status and output.
fn cycles(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new("python3")
        .current_dir(repo())
        .arg("scripts/module-cycles")
        .args(args)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

#[test]
fn the_analyzer_and_the_format_crate_have_no_import_circle() {
    for args in [
        &["analyzer/src", "format/src"][..],
        &["--top", "analyzer/src", "format/src"],
    ] {
        let (code, text) = cycles(args);
        assert_eq!(code, Some(0), "{args:?}:\n{text}");
        assert!(
            text.contains("analyzer/src: ") && text.contains("format/src: "),
            "{text}"
        );
    }
}

#[test]
fn the_shim_s_only_circle_is_the_knot_of_the_graph_handlers() {
    let (code, text) = cycles(&["shim/src"]);
    let circles: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("circle of"))
        .collect();
    assert_eq!(
        circles,
        ["  circle of 4: exports::graph_accesses, exports::graph_listing, exports::graph_updates, exports::graphs"],
        "{text}"
    );
    assert_eq!(code, Some(1), "{text}");
}

#[test]
fn a_circle_between_two_modules_is_found_and_a_test_only_one_is_not() {
    let dir = TempDir::new();
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("b")).unwrap();
    fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    fs::write(src.join("b/mod.rs"), "pub struct B;\n#[cfg(test)]\nmod tests;\n").unwrap();
    // Test code reaching back is no circle.
    fs::write(src.join("b/tests.rs"), "use crate::a::A;\n").unwrap();
    let path = src.to_string_lossy().into_owned();
    let (code, text) = cycles(&[&path]);
    assert_eq!(code, Some(0), "{text}");
    // The same edge in the module's own code is.
    fs::write(src.join("b/mod.rs"), "use crate::a::A;\npub struct B;\n").unwrap();
    let (code, text) = cycles(&["--edges", &path]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("circle of 2: a, b"), "{text}");
    assert!(text.contains("a -> b") && text.contains("b -> a"), "{text}");
}
