//! Whether text output is coloured, and the ANSI colours it uses: `--color auto|always|never`,
//! then `NO_COLOR` and `FORCE_COLOR` (<https://no-color.org>, <https://force-color.org>), then
//! whether the text goes to a terminal.

use std::ffi::OsStr;

/// What `--color` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// Colour when the environment asks for it, else when the text goes to a terminal.
    #[default]
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

impl Choice {
    /// Whether to colour: `--color always` or `never` decide alone; with `auto`, a non-empty
    /// `NO_COLOR` turns colour off, else a non-empty `FORCE_COLOR` turns it on, else it is on
    /// when the text goes to a terminal.
    pub fn colour(self, no_color: Option<&OsStr>, force_color: Option<&OsStr>, terminal: bool) -> bool {
        let set = |v: Option<&OsStr>| v.is_some_and(|v| !v.is_empty());
        match self {
            Choice::Always => true,
            Choice::Never => false,
            Choice::Auto if set(no_color) => false,
            Choice::Auto if set(force_color) => true,
            Choice::Auto => terminal,
        }
    }

    /// [`colour`](Self::colour) with this process's `NO_COLOR` and `FORCE_COLOR`.
    pub fn colour_here(self, terminal: bool) -> bool {
        self.colour(
            std::env::var_os("NO_COLOR").as_deref(),
            std::env::var_os("FORCE_COLOR").as_deref(),
            terminal,
        )
    }
}

/// ANSI colours, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    colour: bool,
}

impl Style {
    /// Plain text.
    pub const PLAIN: Style = Style { colour: false };
    /// Coloured text.
    pub const COLOUR: Style = Style { colour: true };

    /// Coloured when `colour` is true.
    pub fn new(colour: bool) -> Style {
        Style { colour }
    }

    /// `text` in the SGR attributes `code` (`1;31`), or as it is.
    pub(crate) fn paint(self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Bold.
    pub(crate) fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Bold red: errors and failures.
    pub(crate) fn red(self, text: &str) -> String {
        self.paint("1;31", text)
    }

    /// Bold yellow: warnings.
    pub(crate) fn yellow(self, text: &str) -> String {
        self.paint("1;33", text)
    }

    /// Bold green: passes.
    pub(crate) fn green(self, text: &str) -> String {
        self.paint("1;32", text)
    }

    /// Bold cyan: notes.
    pub(crate) fn cyan(self, text: &str) -> String {
        self.paint("1;36", text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_then_no_color_then_force_color_then_the_terminal() {
        let on = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        for terminal in [false, true] {
            for env in [None, empty, on] {
                assert!(Choice::Always.colour(env, None, terminal));
                assert!(Choice::Always.colour(on, env, terminal));
                assert!(!Choice::Never.colour(None, env, terminal));
                assert!(!Choice::Never.colour(env, on, terminal));
            }
            assert_eq!(Choice::Auto.colour(None, None, terminal), terminal);
            assert_eq!(Choice::Auto.colour(empty, empty, terminal), terminal);
            assert!(!Choice::Auto.colour(on, None, terminal));
            assert!(Choice::Auto.colour(None, on, terminal));
            assert!(!Choice::Auto.colour(on, on, terminal), "NO_COLOR over FORCE_COLOR");
        }
    }

    #[test]
    fn plain_text_has_no_escapes() {
        assert_eq!(Style::PLAIN.red("x"), "x");
        assert_eq!(Style::COLOUR.green("ok"), "\x1b[1;32mok\x1b[0m");
    }
}
