//! `--color auto|always|never`, `NO_COLOR` and `FORCE_COLOR` for `check` and `report`: the
//! flag first, then `NO_COLOR`, then `FORCE_COLOR`, then whether stdout is a terminal (never,
//! here: the output is a pipe). Without escapes, the coloured text is the plain text.

use std::path::Path;
use std::process::Command;

use gpuleak_e2e::gpuleak_bin;

use super::traces;

/// The stdout of `gpuleak COMMAND ARGS TRACES` with `env` set (and no other colour variable).
fn text(command: &str, args: &[&str], env: &[(&str, &str)], traces: &[&Path]) -> String {
    let mut cmd = Command::new(gpuleak_bin());
    cmd.env_remove("NO_COLOR").env_remove("FORCE_COLOR");
    cmd.envs(env.iter().copied()).arg(command).args(args).args(traces);
    String::from_utf8(cmd.output().unwrap().stdout).unwrap()
}

/// `s` without its SGR escapes.
fn plain(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find('m').expect("an SGR escape ends with m");
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    out
}

/// Regression: `check` had no colour and no `--color`; `report` had no `--color` and ignored
/// `FORCE_COLOR`.
#[test]
fn color_always_colours_never_and_no_color_do_not_and_force_color_colours_a_pipe() {
    let t = &traces();
    for (command, traces) in [
        ("check", [t.leaks.as_path(), t.families.as_path()]),
        ("report", [t.leaks.as_path(), t.families.as_path()]),
    ] {
        let piped = text(command, &[], &[], &traces);
        assert!(!piped.contains('\x1b'), "{command}: auto, to a pipe: plain\n{piped}");
        for (args, env, coloured) in [
            (&["--color", "always"][..], &[][..], true),
            (&["--color", "always"], &[("NO_COLOR", "1")], true),
            (&["--color", "never"], &[], false),
            (&["--color", "never"], &[("FORCE_COLOR", "1")], false),
            (&[], &[("NO_COLOR", "1")], false),
            (&["--color", "auto"], &[("NO_COLOR", "1"), ("FORCE_COLOR", "1")], false),
            (&[], &[("FORCE_COLOR", "1")], true),
            (&["--color", "auto"], &[("FORCE_COLOR", "")], false),
        ] {
            let out = text(command, args, env, &traces);
            assert_eq!(out.contains("\x1b["), coloured, "{command} {args:?} {env:?}\n{out}");
            assert_eq!(plain(&out), piped, "{command} {args:?} {env:?}: the same text");
        }
    }

    let check = text("check", &["--color", "always"], &[], &[&t.families]);
    assert!(check.contains("\x1b[1;31merror[bad-free]\x1b[0m "), "{check}");
    assert!(check.contains("\x1b[1;31mgpuleak check: failed: "), "{check}");
    let several = text("check", &["--color", "always"], &[], &[&t.clean, &t.leaks]);
    assert!(several.contains("; \x1b[1;32mpassed\x1b[0m\n"), "{several}");
    assert!(
        several.contains("; \x1b[1;31mfailed (2 violations)\x1b[0m\n"),
        "{several}"
    );
    let passed = text("check", &["--color", "always"], &[], &[&t.clean]);
    assert!(
        passed.contains("\x1b[1;32mgpuleak check: passed (exit 0)\x1b[0m;"),
        "{passed}"
    );
    let report = text("report", &["--color", "always"], &[], &[&t.families]);
    assert!(report.contains("\x1b[1;31merror\x1b[0m: bad-free: "), "{report}");

    // The machine formats never carry colour.
    let json = text("check", &["--color", "always", "--format", "json"], &[], &[&t.leaks]);
    assert!(!json.contains('\x1b'), "{json}");
}
