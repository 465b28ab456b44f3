//! The user's code by path: which Python source files and which native modules may hold the
//! program's own code, the rule that names a site (the innermost frame of the user's) in the
//! analyzer's reports and in the shim's metrics labels. Both read it from here so that a
//! label and a report name the same frame.
//!
//! - A Python file is the user's unless it is a frozen module (`<frozen ...>`) or lies under
//!   `site-packages/`, `dist-packages/` or an interpreter's `lib/pythonX.Y/`.
//! - A native module is the user's unless it is the C or C++ runtime or the dynamic loader,
//!   the interpreter (`libpython*`, a `python3.X` executable, a module under `lib/pythonX.Y/`),
//!   an installed package's (under `site-packages/` or `dist-packages/`), CUDA's, a known
//!   framework's, or the shim.
//!
//! Only the path's own components count, never where it lies on this machine relative to
//! anything else, so a program's files are the user's wherever its checkout or its virtual
//! environment is.
//!
//! ```
//! use gpuleak_format::user_code::{is_user_module, is_user_python_file};
//!
//! assert!(is_user_python_file("/home/me/train.py"));
//! assert!(!is_user_python_file("/usr/lib/python3.12/threading.py"));
//! assert!(is_user_module("/home/me/build/libmine.so"));
//! assert!(!is_user_module("/usr/lib/x86_64-linux-gnu/libcudart.so.12"));
//! ```

/// The last component of a path.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether a Python source file is outside the standard library and installed packages.
pub fn is_user_python_file(path: &str) -> bool {
    !(path.starts_with("<frozen") || in_installed_or_interpreter_dir(path))
}

/// Under `site-packages/`, `dist-packages/` or an interpreter's `lib/pythonX.Y/`.
pub fn in_installed_or_interpreter_dir(path: &str) -> bool {
    let dirs: Vec<&str> = path.split('/').collect();
    let dirs = &dirs[..dirs.len().saturating_sub(1)];
    dirs.iter().any(|d| *d == "site-packages" || *d == "dist-packages")
        || dirs
            .windows(2)
            .any(|w| (w[0] == "lib" || w[0] == "lib64") && is_python_version_dir(w[1]))
}

/// `python3`, `python3.11`, `python3.13t`.
fn is_python_version_dir(d: &str) -> bool {
    d.strip_prefix("python")
        .is_some_and(|v| !v.is_empty() && v.trim_end_matches('t').chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Base-name prefixes of CUDA's libraries (the driver, the runtime and the libraries on top):
/// never the user's code, and they allocate on behalf of their callers.
pub const CUDA_LIBRARIES: &[&str] = &[
    "libcuda.so",
    "libcudart",
    "libcublas",
    "libcudnn",
    "libnccl",
    "libcufft",
    "libcurand",
    "libcusparse",
    "libcusolver",
    "libcupti",
    "libnvrtc",
    "libnvJitLink",
    "libnvidia-",
    "libnvToolsExt",
    "libnvtx",
];

/// Base-name prefixes of libraries that are never the user's code, besides
/// [`CUDA_LIBRARIES`].
pub const NOT_USERS: &[&str] = &[
    // The C and C++ runtime and the loader.
    "libc.so",
    "libc-",
    "libm.so",
    "libm-",
    "libmvec",
    "libdl.so",
    "libdl-",
    "libpthread",
    "librt.so",
    "librt-",
    "libstdc++",
    "libc++",
    "libgcc_s",
    "libatomic",
    "libffi",
    "libunwind",
    "ld-linux",
    "ld64.so",
    "ld-musl",
    "linux-vdso",
    "linux-gate",
    // The interpreter.
    "libpython",
    // cuda-bindings' and cuda-python's extension modules, by name for when only the name is
    // known (an older baseline): their paths are under site-packages anyway.
    "cydriver.",
    "cyruntime.",
    "cynvrtc.",
    "cynvjitlink.",
    "cynvvm.",
    // Frameworks.
    "libtorch",
    "libc10",
    "libxla",
    "xla_extension",
    "xla_cuda_plugin",
    "libjax",
    "libcupy",
    "libnumba",
    "librmm",
    // The shim.
    "libgpuleak",
];

/// Directory names under which every module belongs to a framework or CUDA's Python packages.
pub const NOT_USERS_DIRS: &[&str] = &["jaxlib", "jax_plugins", "cupy", "cupy_backends", "numba", "torch"];

/// Whether a native module (by path, or by base name alone) may hold the user's code.
pub fn is_user_module(path: &str) -> bool {
    let name = file_name(path);
    if NOT_USERS.iter().chain(CUDA_LIBRARIES).any(|p| name.starts_with(p)) || is_python_executable(name) {
        return false;
    }
    if in_installed_or_interpreter_dir(path) {
        return false;
    }
    let dirs: Vec<&str> = path.split('/').collect();
    if dirs[..dirs.len().saturating_sub(1)]
        .iter()
        .any(|d| NOT_USERS_DIRS.contains(d))
    {
        return false;
    }
    // A Python extension module known by name alone (no directory: an older baseline) is
    // most likely an installed package's.
    if !path.contains('/') && (name.contains(".cpython-") || name.contains(".abi3.")) {
        return false;
    }
    true
}

/// `python`, `python3`, `python3.11`, `python3.13t`, `python3.11d`.
pub fn is_python_executable(name: &str) -> bool {
    name.strip_prefix("python").is_some_and(|v| {
        v.trim_end_matches(['t', 'd', 'm'])
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_interpreters_packages_and_frameworks_are_not_the_users_modules() {
        for (module, users) in [
            ("/home/me/build/app", true),
            ("/home/me/build/libmine.so", true),
            ("/usr/lib/x86_64-linux-gnu/libfoo.so.3", true),
            ("/usr/lib/x86_64-linux-gnu/libc.so.6", false),
            ("/usr/lib/x86_64-linux-gnu/libffi.so.8", false),
            ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", false),
            ("/lib64/ld-linux-x86-64.so.2", false),
            ("/usr/lib/libcuda.so.1", false),
            ("/usr/lib/libcudart.so.12", false),
            ("/usr/lib/libnccl.so.2", false),
            ("/usr/lib/libpython3.11.so.1.0", false),
            ("/usr/bin/python3.11", false),
            ("/v/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so", false),
            (
                "/v/lib/python3.11/site-packages/cuda/bindings/cydriver.cpython-311-x86_64-linux-gnu.so",
                false,
            ),
            (
                "/opt/venv/lib/python3.10/site-packages/mine/ext.cpython-310-x86_64-linux-gnu.so",
                false,
            ),
            (
                "/usr/lib/python3.10/lib-dynload/_ctypes.cpython-310-x86_64-linux-gnu.so",
                false,
            ),
            ("/home/me/src/ext.cpython-310-x86_64-linux-gnu.so", true),
            ("/home/me/pythonic/libmine.so", true),
            ("/x/libgpuleak.so", false),
            // A checkout in a directory named like a package or a runtime is still the user's.
            ("/work/main/target/release/app", true),
            ("/home/libc/app", true),
            // Known by name alone (an older baseline).
            ("cydriver.cpython-311-x86_64-linux-gnu.so", false),
            ("app", true),
        ] {
            assert_eq!(is_user_module(module), users, "{module}");
        }
    }

    #[test]
    fn python_files_of_the_standard_library_and_packages_are_not_the_users() {
        for (file, users) in [
            ("/home/me/train.py", true),
            ("train.py", true),
            ("<string>", true),
            ("<frozen importlib._bootstrap>", false),
            ("/usr/lib/python3.12/threading.py", false),
            ("/usr/lib/python3/dist-packages/numpy/core.py", false),
            (
                "/home/me/.venv/lib/python3.13t/site-packages/cuda/core/_memory.py",
                false,
            ),
            ("/home/me/lib/pythonic/app.py", true),
        ] {
            assert_eq!(is_user_python_file(file), users, "{file}");
        }
    }

    #[test]
    fn a_script_is_the_users_wherever_its_checkout_and_virtual_environment_are() {
        for file in [
            "/work/main/tests/python/client.py",
            "/work/main/target/pyenv/../../tests/python/client.py",
            "/srv/lib/app/client.py",
            "/home/me/python3.11/client.py",
        ] {
            assert!(is_user_python_file(file), "{file}");
        }
    }
}
