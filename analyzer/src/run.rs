//! `gpuleak run`: runs a command with `libgpuleak.so` preloaded, one trace per process, and
//! says what was found and which command to run next.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The environment variable naming the shim explicitly.
pub const LIB_VAR: &str = "GPULEAK_LIB";
/// The shim's file name.
pub const LIB_NAME: &str = "libgpuleak.so";

/// Finds `libgpuleak.so`: `GPULEAK_LIB`, else beside this executable, else in `../lib` (an
/// installed layout), else inside the `gpuleak` Python package installed with this executable
/// by the wheel (`python/`): `../lib/python3.*/site-packages/gpuleak/` (a virtual environment,
/// `pip install --user`, a system prefix; `dist-packages` on Debian) or `../gpuleak/`
/// (`pip install --target DIR`, which puts scripts in `DIR/bin`).
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
    shim_candidates(dir)
        .iter()
        .find(|p| p.is_file())
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
        .ok_or_else(|| {
            format!(
                "cannot find {LIB_NAME} beside {}, in ../lib or in an installed gpuleak Python \
                 package; set {LIB_VAR}",
                dir.display()
            )
        })
}

/// Where `libgpuleak.so` may be, in order, for an executable in `dir`.
fn shim_candidates(dir: &Path) -> Vec<PathBuf> {
    let mut candidates = vec![dir.join(LIB_NAME), dir.join("../lib").join(LIB_NAME)];
    let prefix_lib = dir.join("../lib");
    // Newest Python first, so that a prefix with several gives the same answer every time.
    let mut pythons: Vec<PathBuf> = std::fs::read_dir(&prefix_lib)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    pythons.sort_by_key(|p| python_version(p));
    for python in pythons.iter().rev() {
        for packages in ["site-packages", "dist-packages"] {
            candidates.push(python.join(packages).join("gpuleak").join(LIB_NAME));
        }
    }
    candidates.push(dir.join("../gpuleak").join(LIB_NAME));
    candidates
}

/// `(3, 11)` from `.../python3.11`, for ordering.
fn python_version(dir: &Path) -> (u32, u32) {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut parts = name
        .trim_start_matches("python")
        .split('.')
        .map(|n| n.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The `sitecustomize.py` that `gpuleak run` puts first on `PYTHONPATH`: when the program
/// imports torch or cupy it attaches the Python package's adapter (if the package is installed for
/// that interpreter), under `--no-framework-cache` it turns off CuPy's memory pools when the
/// program imports cupy; then it runs the one it hides.
pub const SITECUSTOMIZE: &str = include_str!("run_sitecustomize.py");

/// Set by `--no-framework-cache`, for the Python package: memory that the frameworks' modules
/// hold is then real tensors, not a cache, and counts as leaked.
pub const NO_CACHE_VAR: &str = "GPULEAK_NO_FRAMEWORK_CACHE";

/// One variable `--no-framework-cache` sets, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvSetting {
    /// The variable.
    pub name: &'static str,
    /// Its value.
    pub value: OsString,
    /// What it does, for `-v`.
    pub why: &'static str,
}

/// The environment of `--no-framework-cache`, so that each tensor is a real allocation:
/// PyTorch's documented switch, JAX's (XLA's allocator on `cudaMalloc`/`cudaFree`, nothing
/// preallocated), numba-cuda's deferred deallocations flushed at every free and, for CuPy, which has no such variable, `site_dir` (holding
/// [`SITECUSTOMIZE`]) first on `PYTHONPATH`, before `pythonpath` (the caller's).
pub fn framework_cache_env(site_dir: &Path, pythonpath: Option<&OsStr>) -> Vec<EnvSetting> {
    let path = python_path(site_dir, pythonpath);
    let set = |name, value: &str, why| EnvSetting {
        name,
        value: value.into(),
        why,
    };
    vec![
        set(
            "PYTORCH_NO_CUDA_MEMORY_CACHING",
            "1",
            "PyTorch: no caching allocator, each tensor is a cudaMalloc",
        ),
        set(
            "XLA_PYTHON_CLIENT_ALLOCATOR",
            "platform",
            "JAX: allocate and free on demand (no BFC pool)",
        ),
        set(
            "XLA_PYTHON_CLIENT_PREALLOCATE",
            "false",
            "JAX: no preallocation of most of the device",
        ),
        set(
            "NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT",
            "0",
            "numba-cuda: free each device array when it dies, not in batches",
        ),
        EnvSetting {
            name: "PYTHONPATH",
            value: path,
            why: "CuPy: a sitecustomize calls cupy.cuda.set_allocator(None) and \
                  set_pinned_memory_allocator(None) when cupy is imported",
        },
        set(
            NO_CACHE_VAR,
            "1",
            "gpuleak's Python package: count what the frameworks hold as leaked",
        ),
    ]
}

/// `site_dir` first on `PYTHONPATH`, before `pythonpath` (the caller's).
pub fn python_path(site_dir: &Path, pythonpath: Option<&OsStr>) -> OsString {
    let mut path = OsString::from(site_dir);
    if let Some(p) = pythonpath.filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(p);
    }
    path
}

/// `GPULEAK_FRAMEWORKS=0` keeps `gpuleak run` from putting its sitecustomize on `PYTHONPATH`
/// (and the Python package from reading the frameworks' allocators).
pub const FRAMEWORKS_VAR: &str = "GPULEAK_FRAMEWORKS";

/// Whether the frameworks' allocators are read from inside, by the value of
/// [`FRAMEWORKS_VAR`] (on unless `0`).
pub fn frameworks_on(value: Option<&OsStr>) -> bool {
    value.is_none_or(|v| v != "0")
}

/// A private directory holding [`SITECUSTOMIZE`], removed with its contents on drop (when the
/// command has ended).
#[derive(Debug)]
pub struct SiteDir {
    path: PathBuf,
}

impl SiteDir {
    /// Creates it under the temporary directory, readable by this user only.
    pub fn create() -> std::io::Result<SiteDir> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = base.join(format!("gpuleak-run-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        let site = SiteDir { path };
        std::fs::write(site.path.join("sitecustomize.py"), SITECUSTOMIZE)?;
        Ok(site)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SiteDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
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

    /// The `GPULEAK_OUTPUT` value for the command: [`template`](Self::template) made absolute
    /// against the working directory, so that a process that changes directory before its
    /// first CUDA call still writes its trace where [`existing`](Self::existing) looks.
    pub fn absolute_template(&self) -> std::io::Result<OsString> {
        std::path::absolute(self.template()).map(PathBuf::into_os_string)
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
        // `.N` (a name already taken), then `-NNNNNN` (a bounded trace's later segment), then
        // `.N` again (a segment's name already taken), each optional.
        let number = |t: &str, lead: char, min: usize| -> Option<usize> {
            let n = t.strip_prefix(lead)?;
            let d = n.bytes().take_while(u8::is_ascii_digit).count();
            (d >= min).then_some(1 + d)
        };
        let mut t = tail;
        if let Some(n) = number(t, '.', 1) {
            t = &t[n..];
        }
        if let Some(n) = number(t, '-', 6) {
            t = &t[n..];
            if let Some(n) = number(t, '.', 1) {
                t = &t[n..];
            }
        }
        t.is_empty()
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

/// Exit status when the command is not found (as a shell's, or env(1)'s).
pub const EXIT_NOT_FOUND: u8 = 127;
/// Exit status when the command was found but cannot be run: not executable, a directory, a
/// file the kernel cannot execute.
pub const EXIT_CANNOT_RUN: u8 = 126;

/// The exit status and the one-line message (without `gpuleak: `) for a command that could not
/// be started, as env(1) decides: [`EXIT_NOT_FOUND`] when it does not exist,
/// [`EXIT_CANNOT_RUN`] for any other reason.
pub fn spawn_failure(command: &OsStr, e: &std::io::Error) -> (u8, String) {
    let name = command.to_string_lossy();
    let searched = !name.contains('/');
    if e.kind() == std::io::ErrorKind::NotFound {
        let why = if searched {
            "command not found (not in PATH)"
        } else {
            "no such file"
        };
        return (EXIT_NOT_FOUND, format!("{name}: {why}"));
    }
    let why = if !searched && Path::new(command).is_dir() {
        "is a directory".to_string()
    } else if e.raw_os_error() == Some(libc::ENOEXEC) {
        "not an executable the system can run (exec format error)".to_string()
    } else if e.kind() == std::io::ErrorKind::PermissionDenied {
        "permission denied (not executable, or in a directory that cannot be searched)".to_string()
    } else {
        // Without the " (os error N)" that io::Error adds.
        let text = e.to_string();
        text.split(" (os error").next().unwrap_or(&text).to_lowercase()
    };
    (EXIT_CANNOT_RUN, format!("{name}: cannot run: {why}"))
}

/// The exit status a shell would report: the code, or 128 + the signal.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Human-readable bytes (binary units: `1.5 MiB`; [`gpuleak_format::size::Bytes`]).
pub fn human_bytes(n: u64) -> String {
    gpuleak_format::size::Bytes(n).to_string()
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
    fn children_get_an_absolute_template_that_chdir_cannot_move() {
        let here = std::env::current_dir().unwrap();
        let d = Output::new(None, "app");
        assert_eq!(
            PathBuf::from(d.absolute_template().unwrap()),
            here.join("gpuleak.app.%p.trace")
        );
        let rel = Output::new(Some(Path::new("out/run.trace")), "app");
        assert_eq!(
            PathBuf::from(rel.absolute_template().unwrap()),
            here.join("out/run.%p.trace")
        );
        let abs = Output::new(Some(Path::new("/tmp/x/run.trace")), "app");
        assert_eq!(abs.absolute_template().unwrap(), OsString::from("/tmp/x/run.%p.trace"));
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
        // A bounded trace's later segments.
        assert!(o.matches("gpuleak.app.123.trace-000001"));
        assert!(o.matches("gpuleak.app.123.trace.2-000014"));
        assert!(o.matches("gpuleak.app.123.trace-1000000.1"));
        assert!(!o.matches("gpuleak.app.123.trace-01"));
        assert!(!o.matches("gpuleak.app.123.trace-000001x"));
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
    fn no_framework_cache_turns_off_every_framework_s_cache_and_keeps_pythonpath() {
        let env = framework_cache_env(Path::new("/tmp/site"), Some(OsStr::new("/mine:/other")));
        let get = |name: &str| env.iter().find(|e| e.name == name).map(|e| e.value.clone());
        assert_eq!(get("PYTORCH_NO_CUDA_MEMORY_CACHING"), Some("1".into()));
        assert_eq!(get("XLA_PYTHON_CLIENT_ALLOCATOR"), Some("platform".into()));
        assert_eq!(get("XLA_PYTHON_CLIENT_PREALLOCATE"), Some("false".into()));
        assert_eq!(get("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT"), Some("0".into()));
        assert_eq!(get("PYTHONPATH"), Some("/tmp/site:/mine:/other".into()));
        assert_eq!(get(NO_CACHE_VAR), Some("1".into()));
        let alone = framework_cache_env(Path::new("/tmp/site"), Some(OsStr::new("")));
        assert_eq!(
            alone.iter().find(|e| e.name == "PYTHONPATH").map(|e| e.value.clone()),
            Some("/tmp/site".into())
        );
    }

    #[test]
    fn frameworks_are_read_unless_gpuleak_frameworks_is_0() {
        assert!(frameworks_on(None));
        assert!(frameworks_on(Some(OsStr::new("1"))));
        assert!(frameworks_on(Some(OsStr::new(""))));
        assert!(!frameworks_on(Some(OsStr::new("0"))));
        assert_eq!(python_path(Path::new("/s"), None), OsString::from("/s"));
        assert_eq!(
            python_path(Path::new("/s"), Some(OsStr::new("/a"))),
            OsString::from("/s:/a")
        );
        // The hooks wait for torch, cupy and jax and import nothing before them; CuPy's pools are
        // only turned off under --no-framework-cache.
        assert!(SITECUSTOMIZE.contains("if fullname != name:\n                return None"));
        assert!(SITECUSTOMIZE.contains(
            "if os.environ.get(\"GPULEAK_NO_FRAMEWORK_CACHE\") == \"1\":\n    _gpuleak_after_import(\"cupy\""
        ));
        assert!(SITECUSTOMIZE.contains("_gpuleak_after_import(\"torch\", _gpuleak_attach,"));
        assert!(SITECUSTOMIZE.contains("_gpuleak_after_import(\"cupy\", _gpuleak_attach,"));
        assert!(SITECUSTOMIZE.contains("_gpuleak_after_import(\"jax\", _gpuleak_attach,"));
    }

    #[test]
    fn the_site_directory_holds_the_hook_and_goes_away() {
        let site = SiteDir::create().unwrap();
        let file = site.path().join("sitecustomize.py");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), SITECUSTOMIZE);
        assert!(SITECUSTOMIZE.contains("set_allocator(None)"));
        let dir = site.path().to_path_buf();
        drop(site);
        assert!(!dir.exists());
    }

    #[test]
    fn a_wheel_s_shim_is_found_inside_the_package() {
        let root = std::env::temp_dir().join(format!("gpuleak-run-test-{}", std::process::id()));
        let bin = root.join("bin");
        let old = root.join("lib/python3.9/site-packages/gpuleak");
        let new = root.join("lib/python3.11/site-packages/gpuleak");
        for d in [&bin, &old, &new] {
            std::fs::create_dir_all(d).unwrap();
        }
        let found = |dir: &Path| {
            shim_candidates(dir)
                .into_iter()
                .find(|p| p.is_file())
                .map(|p| p.canonicalize().unwrap())
        };
        std::fs::write(old.join(LIB_NAME), b"").unwrap();
        assert_eq!(found(&bin), Some(old.join(LIB_NAME).canonicalize().unwrap()));
        std::fs::write(new.join(LIB_NAME), b"").unwrap();
        // The newest Python's copy first.
        assert_eq!(found(&bin), Some(new.join(LIB_NAME).canonicalize().unwrap()));
        // `pip install --target DIR`: DIR/bin and DIR/gpuleak.
        let target = root.join("t");
        std::fs::create_dir_all(target.join("bin")).unwrap();
        std::fs::create_dir_all(target.join("gpuleak")).unwrap();
        std::fs::write(target.join("gpuleak").join(LIB_NAME), b"").unwrap();
        assert_eq!(
            found(&target.join("bin")),
            Some(target.join("gpuleak").join(LIB_NAME).canonicalize().unwrap())
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_command_not_found_exits_127_and_one_that_cannot_run_126() {
        let not_found = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(
            spawn_failure(OsStr::new("nosuch"), &not_found),
            (127, "nosuch: command not found (not in PATH)".to_string())
        );
        assert_eq!(
            spawn_failure(OsStr::new("./nosuch"), &not_found),
            (127, "./nosuch: no such file".to_string())
        );
        let denied = std::io::Error::from_raw_os_error(libc::EACCES);
        let (code, why) = spawn_failure(OsStr::new("/etc/passwd"), &denied);
        assert_eq!(
            (code, why.starts_with("/etc/passwd: cannot run: permission denied")),
            (126, true)
        );
        assert_eq!(
            spawn_failure(OsStr::new("/"), &denied),
            (126, "/: cannot run: is a directory".to_string())
        );
        let format = std::io::Error::from_raw_os_error(libc::ENOEXEC);
        assert_eq!(spawn_failure(OsStr::new("./blob"), &format).0, 126);
        let too_big = std::io::Error::from_raw_os_error(libc::E2BIG);
        assert_eq!(
            spawn_failure(OsStr::new("x"), &too_big),
            (126, "x: cannot run: argument list too long".to_string())
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
