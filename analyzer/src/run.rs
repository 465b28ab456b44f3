//! `gpuleak run`: runs a command with `libgpuleak.so` preloaded, one trace per process, and
//! says what was found and which command to run next.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The environment variable naming the shim explicitly.
pub const LIB_VAR: &str = "GPULEAK_LIB";
/// The shim's file name.
pub const LIB_NAME: &str = "libgpuleak.so";

/// Finds `libgpuleak.so`: `GPULEAK_LIB`, else beside this executable, else in `../lib`
/// (an installed layout).
pub fn find_shim(exe: &Path) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(LIB_VAR).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{LIB_VAR}={} is not a file", p.display()))
        };
    }
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [dir.join(LIB_NAME), dir.join("../lib").join(LIB_NAME)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
        .ok_or_else(|| {
            format!(
                "cannot find {LIB_NAME} beside {} or in ../lib; set {LIB_VAR}",
                dir.display()
            )
        })
}

/// `LD_PRELOAD` with the shim first and whatever the user preloads kept after it.
pub fn preload_value(shim: &Path, existing: Option<&OsStr>) -> OsString {
    let mut v = OsString::from(shim);
    if let Some(e) = existing.filter(|e| !e.is_empty()) {
        v.push(":");
        v.push(e);
    }
    v
}

/// Where the traces go: a `GPULEAK_OUTPUT` template with `%p`, so that every process of the
/// run writes its own file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Directory the traces land in.
    pub dir: PathBuf,
    /// File name before the pid.
    pub prefix: String,
    /// File name after the pid.
    pub suffix: String,
}

impl Output {
    /// From `-o`: a template with `%p`, a directory (existing, or ending in `/`), or a file
    /// name (`.%p` is then inserted before the extension so children do not collide);
    /// default `gpuleak.<program>.%p.trace` in the working directory.
    pub fn new(requested: Option<&Path>, program: &str) -> Output {
        let default_name = format!("gpuleak.{program}.%p.trace");
        let (dir, name) = match requested {
            None => (PathBuf::from("."), default_name),
            Some(p) if p.is_dir() || p.as_os_str().to_string_lossy().ends_with('/') => (p.to_path_buf(), default_name),
            Some(p) => {
                let dir = p
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map_or(PathBuf::from("."), Path::to_path_buf);
                let file = p
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or(default_name);
                let name = if file.contains("%p") {
                    file
                } else if let Some((stem, ext)) = file.rsplit_once('.') {
                    format!("{stem}.%p.{ext}")
                } else {
                    format!("{file}.%p")
                };
                (dir, name)
            }
        };
        let (prefix, suffix) = name
            .split_once("%p")
            .map_or((name.clone(), String::new()), |(a, b)| (a.to_string(), b.to_string()));
        Output { dir, prefix, suffix }
    }

    /// The `GPULEAK_OUTPUT` value.
    pub fn template(&self) -> OsString {
        self.dir
            .join(format!("{}%p{}", self.prefix, self.suffix))
            .into_os_string()
    }

    /// Trace files in the directory that this template can produce (a pid, optionally
    /// followed by the shim's `.N` de-duplication suffix).
    pub fn existing(&self) -> BTreeSet<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return BTreeSet::new();
        };
        entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| self.matches(n))
            .map(|n| self.dir.join(n))
            .collect()
    }

    fn matches(&self, name: &str) -> bool {
        let Some(rest) = name.strip_prefix(&self.prefix) else {
            return false;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        let Some(tail) = rest[digits..].strip_prefix(&self.suffix) else {
            return false;
        };
        tail.is_empty()
            || tail
                .strip_prefix('.')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }
}

/// A shell-quoted argument for the "next command" line.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:%+,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The exit status a shell would report: the code, or 128 + the signal.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Human-readable bytes (binary units).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_always_carry_the_pid() {
        let d = Output::new(None, "app");
        assert_eq!(d.template(), OsString::from("./gpuleak.app.%p.trace"));
        let f = Output::new(Some(Path::new("/tmp/x/run.trace")), "app");
        assert_eq!(f.template(), OsString::from("/tmp/x/run.%p.trace"));
        let t = Output::new(Some(Path::new("/tmp/x/r-%p.bin")), "app");
        assert_eq!((t.prefix.as_str(), t.suffix.as_str()), ("r-", ".bin"));
        let dir = Output::new(Some(Path::new("/tmp/somedir/")), "app");
        assert_eq!(dir.template(), OsString::from("/tmp/somedir/gpuleak.app.%p.trace"));
    }

    #[test]
    fn only_files_of_the_template_match() {
        let o = Output::new(None, "app");
        assert!(o.matches("gpuleak.app.123.trace"));
        assert!(o.matches("gpuleak.app.123.trace.2"));
        assert!(!o.matches("gpuleak.app..trace"));
        assert!(!o.matches("gpuleak.app.12x.trace"));
        assert!(!o.matches("gpuleak.app.123.trace.x"));
        assert!(!o.matches("gpuleak.other.1.trace"));
    }

    #[test]
    fn preload_keeps_the_user_s_libraries() {
        let v = preload_value(Path::new("/l/libgpuleak.so"), Some(OsStr::new("libfoo.so")));
        assert_eq!(v, OsString::from("/l/libgpuleak.so:libfoo.so"));
        assert_eq!(
            preload_value(Path::new("/l/s.so"), Some(OsStr::new(""))),
            OsString::from("/l/s.so")
        );
    }

    #[test]
    fn quoting_and_sizes() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("./x.trace"), "./x.trace");
        assert_eq!(human_bytes(1000), "1000 B");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }
}
