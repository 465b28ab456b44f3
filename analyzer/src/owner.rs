//! Who owns an allocation: the first module in its stack outside the CUDA libraries, and
//! whether that module is a known caching allocator (a pool).
//!
//! Detection is by module file name only (a table below): a pool statically linked into a
//! program, or a library renamed, is not recognised.

use gpuleak_format::user_code::CUDA_LIBRARIES;

use crate::modules::{file_name, Modules};

/// A caching allocator whose memory, still held at exit, is not a program leak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pool {
    /// PyTorch's CUDA caching allocator (`libc10_cuda.so`, `libtorch_cuda.so`).
    Pytorch,
    /// XLA's allocator (JAX, TensorFlow): `libxla*`, `xla_extension*`, anything under `jaxlib`.
    Xla,
    /// CuPy's memory pool (anything under `cupy`, `cupy_backends`).
    Cupy,
    /// RAPIDS Memory Manager (`librmm*`, anything under `rmm/`).
    Rmm,
}

impl Pool {
    /// Short name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Pool::Pytorch => "pytorch",
            Pool::Xla => "xla",
            Pool::Cupy => "cupy",
            Pool::Rmm => "rmm",
        }
    }
}

impl Pool {
    /// The pool whose memory a framework's segments are, by the framework's name in its
    /// state records (`torch`, `cupy`, `jax`).
    pub fn of_framework(framework: &str) -> Option<Pool> {
        match framework {
            "torch" => Some(Pool::Pytorch),
            "cupy" => Some(Pool::Cupy),
            "jax" => Some(Pool::Xla),
            _ => None,
        }
    }
}

/// Whether an allocation's stack is `pool`'s: its owner (the first module outside the CUDA
/// libraries) is, or one of its Python frames is in the pool's package directories (a pool
/// whose Python code calls the driver through bindings).
pub fn stack_in_pool(frames: &[u64], modules: &Modules, pool: Pool) -> bool {
    owner(frames, modules).and_then(pool_of) == Some(pool)
        || frames.iter().any(|&a| {
            modules
                .python
                .frame(a)
                .and_then(|f| f.file)
                .is_some_and(|file| pool_of(&file) == Some(pool))
        })
}

/// File-name prefixes of the driver and runtime plumbing, trimmed from the innermost end of
/// stacks shown in reports: the allocation's `api` and `via` already say what they did.
const RUNTIME_LIBRARIES: &[&str] = &["libcuda.so", "libcudart.so", "libgpuleak.so"];

/// Whether a module (by path) is one of the CUDA libraries
/// ([`gpuleak_format::user_code::CUDA_LIBRARIES`]) or the shim: frames in them are passed over
/// when looking for the owner, because they allocate on behalf of their caller.
pub fn is_cuda_library(path: &str) -> bool {
    let name = file_name(path);
    CUDA_LIBRARIES.iter().any(|p| name.starts_with(p)) || name.starts_with("libgpuleak.so")
}

/// Whether a module (by path) is the driver, the runtime or the shim.
pub fn is_runtime_library(path: &str) -> bool {
    let name = file_name(path);
    RUNTIME_LIBRARIES.iter().any(|p| name.starts_with(p))
}

/// The pool a module belongs to, by its path.
pub fn pool_of(path: &str) -> Option<Pool> {
    let name = file_name(path);
    let in_dir = |dir: &str| path.split('/').rev().skip(1).any(|d| d == dir);
    if name.starts_with("libc10_cuda") || name.starts_with("libtorch_cuda") {
        Some(Pool::Pytorch)
    } else if name.starts_with("libxla")
        || name.starts_with("xla_extension")
        || name.starts_with("xla_cuda_plugin")
        || in_dir("jaxlib")
        || in_dir("jax_plugins")
    {
        Some(Pool::Xla)
    } else if in_dir("cupy") || in_dir("cupy_backends") || name.starts_with("libcupy") {
        Some(Pool::Cupy)
    } else if name.starts_with("librmm") || in_dir("rmm") {
        Some(Pool::Rmm)
    } else {
        None
    }
}

/// For an object created at `frames` (a stream, an event, a memory pool) by a known caching
/// allocator or framework, which keeps such objects for the life of the process on purpose (as
/// PyTorch keeps its stream pool): the clause a leak finding adds, and it is then a note.
pub fn kept_for_life(frames: &[u64], modules: &Modules, what: &str) -> Option<String> {
    let pool = owner(frames, modules).and_then(pool_of)?;
    Some(format!(
        "; created by the {} runtime, which keeps its {what} for the life of the process",
        pool.name()
    ))
}

/// For a stream or event whose creation stack was not recorded (the default), in a process
/// that loaded a framework which keeps its streams and events for the life of the process
/// (PyTorch's stream pool and the events of its caching allocators; XLA's streams, as JAX
/// makes them): the clause a leak finding adds, and it is then a note. Without the stack the
/// trace cannot tell the framework's from the program's, and a PyTorch or JAX program leaves
/// dozens to hundreds of them (seen on an H100, 2026-11-23: 128 streams from PyTorch's pool,
/// 34 from JAX), which would bury a real leak among warnings; with
/// `GPULEAK_OBJECT_STACKS=1` each is judged by its own creator ([`kept_for_life`]). CuPy and
/// RMM keep memory, not streams, so they do not count here.
pub fn framework_keeping_objects(modules: &Modules) -> Option<String> {
    modules.iter().find_map(|m| match pool_of(&m.path) {
        Some(pool @ (Pool::Pytorch | Pool::Xla)) => Some(format!(
            "; the process loaded the {} runtime ({}), which keeps its streams and events for \
             the life of the process, so without the stack this is a note",
            pool.name(),
            file_name(&m.path)
        )),
        _ => None,
    })
}

/// The owner of a stack: the path of the first module, innermost first, that is not a CUDA
/// library. `None` when the stack is empty, lies wholly in CUDA libraries, or its first other
/// frame is in no recorded module (JIT code).
pub fn owner<'m>(frames: &[u64], modules: &'m Modules) -> Option<&'m str> {
    for &address in frames {
        match modules.find(address) {
            Some(m) if is_cuda_library(&m.path) => continue,
            Some(m) => return Some(&m.path),
            None => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_recognised_by_module_name() {
        let cases = [
            (
                "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so",
                Some(Pool::Pytorch),
            ),
            ("/venv/torch/lib/libtorch_cuda.so", Some(Pool::Pytorch)),
            ("/venv/jaxlib/xla_extension.so", Some(Pool::Xla)),
            ("/venv/jax_plugins/xla_cuda12/xla_cuda_plugin.so", Some(Pool::Xla)),
            (
                "/venv/cupy_backends/cuda/api/runtime.cpython-312-x86_64-linux-gnu.so",
                Some(Pool::Cupy),
            ),
            ("/opt/rapids/lib/librmm.so", Some(Pool::Rmm)),
            ("/usr/bin/app", None),
            ("/usr/lib/libtorch.so", None),
            ("/home/me/cupyfan/app", None),
        ];
        for (path, pool) in cases {
            assert_eq!(pool_of(path), pool, "{path}");
        }
    }

    #[test]
    fn cuda_libraries_are_matched_exactly_enough() {
        assert!(is_cuda_library("/usr/lib/x86_64-linux-gnu/libcuda.so.1"));
        assert!(is_cuda_library("/venv/nvidia/cublas/lib/libcublasLt.so.12"));
        assert!(is_cuda_library("libnccl.so.2"));
        assert!(!is_cuda_library("/usr/bin/libcudaish_app"));
        assert!(is_runtime_library("/x/libcudart.so.12"));
        assert!(!is_runtime_library("/x/libcublas.so.12"));
    }

    #[test]
    fn the_owner_is_the_first_module_outside_the_cuda_libraries() {
        let modules = Modules::of_paths(&[
            (0x1000, "/lib/libcuda.so.1"),
            (0x2000, "/lib/libcublas.so.12"),
            (0x3000, "/torch/lib/libc10_cuda.so"),
            (0x4000, "/usr/bin/python3"),
        ]);
        assert_eq!(
            owner(&[0x1010, 0x2010, 0x3010, 0x4010], &modules),
            Some("/torch/lib/libc10_cuda.so")
        );
        assert_eq!(owner(&[0x4010], &modules), Some("/usr/bin/python3"));
        assert_eq!(owner(&[0x1010, 0x9000], &modules), None);
        assert_eq!(owner(&[], &modules), None);
    }
}
