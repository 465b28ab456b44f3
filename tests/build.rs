//! Builds the simulated CUDA driver and runtime (`simcuda/`) and every C test client
//! (`tests/clients/*.c`, and `validation/leak_driver.c`, the C workload of
//! `scripts/validate-gpu`) with the C compiler that `cc` picks (honouring `CC`).
//!
//! Output, under `$OUT_DIR`:
//! - `sim/`: `libcuda.so.1` (+ `libcuda.so`), `libcudart.so.12` (+ `libcudart.so`) and
//!   `libcudart_static.a`;
//! - `bin/<stem>`: one executable per client, linked as its first line says:
//!   `// link: driver | dl | cudart-shared | cudart-static | cublas | none` (`cublas`: the
//!   stand-in cuBLAS of `lib/`).
//!
//! - `lib/`: the stand-in libraries of `tests/libraries/`: `libcublas.so.13` (+ `libcublas.so`,
//!   the two cuBLAS functions that take a workspace) and `libtorch_blas.so`, which calls them
//!   through the PLT as a framework's native library does.
//!
//! The directories reach the tests as `GPULEAK_E2E_SIM_DIR`, `GPULEAK_E2E_BIN_DIR` and
//! `GPULEAK_E2E_LIB_DIR`. A compiler error fails the build with the compiler's own message.
//!
//! `GPULEAK_E2E_TARGET` (a Rust target triple, e.g. `aarch64-unknown-linux-gnu`) builds the
//! simulator and the clients for that architecture instead of the tests' own, with the cross
//! compiler `cc` picks for it: `scripts/test-aarch64` runs them under qemu (see `tests/lib.rs`).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags shared by the driver and the runtime: their own internal calls bind locally
/// (`-Bsymbolic-functions`) and only the API is exported, so an interposer sees exactly the
/// calls a client makes.
const LIBRARY_FLAGS: &[&str] = &[
    "-std=c11",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-O2",
    "-fPIC",
    "-pthread",
    "-fvisibility=hidden",
];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().expect("tests/ has a parent").to_path_buf();
    let simcuda = root.join("simcuda");
    let clients = manifest.join("clients");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let sim = out.join("sim");
    let bin = out.join("bin");
    let obj = out.join("obj");
    let lib = out.join("lib");
    let libraries = manifest.join("libraries");
    for dir in [&sim, &bin, &obj, &lib] {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=GPULEAK_E2E_TARGET");
    println!("cargo:rerun-if-changed={}", simcuda.display());
    println!("cargo:rerun-if-changed={}", clients.display());
    println!("cargo:rerun-if-changed={}", libraries.display());
    // The C workloads of scripts/validate-gpu, run on the simulator by tests/e2e/validation.rs.
    let validation = [
        root.join("validation/leak_driver.c"),
        root.join("validation/ordered_driver.c"),
    ];
    for v in &validation {
        println!("cargo:rerun-if-changed={}", v.display());
    }

    let compiler = Compiler::new(&simcuda.join("include"));
    build_driver(&compiler, &simcuda, &sim);
    build_runtime(&compiler, &simcuda, &sim, &obj);
    let mut sources = c_sources(&clients);
    sources.extend(validation);
    build_libraries(&compiler, &libraries, &lib);
    build_clients(&compiler, &sources, &clients, &sim, &bin);

    println!("cargo:rustc-env=GPULEAK_E2E_SIM_DIR={}", sim.display());
    println!("cargo:rustc-env=GPULEAK_E2E_BIN_DIR={}", bin.display());
    println!("cargo:rustc-env=GPULEAK_E2E_LIB_DIR={}", lib.display());
}

/// The stand-in libraries: a cuBLAS with its real file name (the shim finds a cuBLAS that
/// `RTLD_NEXT` cannot reach by that name), and a caller linked to it that finds it beside
/// itself (`$ORIGIN`), as a framework's wheel finds its CUDA libraries.
fn build_libraries(compiler: &Compiler, libraries: &Path, lib: &Path) {
    let mut cmd = compiler.command();
    cmd.args(LIBRARY_FLAGS)
        .args(["-shared", "-Wl,-soname,libcublas.so.13"])
        .arg(libraries.join("fake_cublas.c"))
        .arg("-o")
        .arg(lib.join("libcublas.so.13"));
    run(cmd, "stand-in cuBLAS");
    symlink("libcublas.so.13", &lib.join("libcublas.so"));
    let mut cmd = compiler.command();
    cmd.args(LIBRARY_FLAGS)
        .args(["-shared", "-Wl,-soname,libtorch_blas.so"])
        .arg(libraries.join("torch_blas.c"))
        .arg("-o")
        .arg(lib.join("libtorch_blas.so"))
        .arg("-L")
        .arg(lib)
        .arg("-lcublas")
        .arg("-Wl,-rpath,$ORIGIN");
    run(cmd, "stand-in framework library");
}

/// The C compiler as `cc` configures it, plus the simulator's include directory.
struct Compiler {
    tool: cc::Tool,
    include: PathBuf,
}

impl Compiler {
    fn new(include: &Path) -> Self {
        let tool = c_build().get_compiler();
        Compiler {
            tool,
            include: include.to_path_buf(),
        }
    }

    fn command(&self) -> Command {
        let mut cmd = self.tool.to_command();
        cmd.arg("-I").arg(&self.include);
        cmd
    }
}

/// `cc`'s configuration for the clients' architecture: the tests' own, or `GPULEAK_E2E_TARGET`.
fn c_build() -> cc::Build {
    let mut build = cc::Build::new();
    build.cargo_metadata(false);
    if let Some(target) = env::var("GPULEAK_E2E_TARGET").ok().filter(|t| !t.is_empty()) {
        build.target(&target);
    }
    build
}

/// Runs a compiler or archiver command; panics with its output when it fails and forwards
/// its warnings to cargo.
fn run(mut cmd: Command, what: &str) {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {:?}: {e}", cmd.get_program()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        panic!("{what} failed ({}):\n{:?}\n{stderr}", output.status, cmd);
    }
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        println!("cargo:warning={what}: {line}");
    }
}

/// The `.c` files of a directory, sorted so that builds are reproducible.
fn c_sources(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    files.sort();
    files
}

/// Replaces `link` with a symbolic link to `target` (a file name in the same directory).
fn symlink(target: &str, link: &Path) {
    let _ = fs::remove_file(link);
    std::os::unix::fs::symlink(target, link).unwrap_or_else(|e| panic!("linking {} -> {target}: {e}", link.display()));
}

fn build_driver(compiler: &Compiler, simcuda: &Path, sim: &Path) {
    let mut cmd = compiler.command();
    cmd.args(LIBRARY_FLAGS)
        .args(["-shared", "-Wl,-Bsymbolic-functions", "-Wl,-soname,libcuda.so.1"])
        .args(c_sources(&simcuda.join("driver")))
        .arg("-o")
        .arg(sim.join("libcuda.so.1"));
    run(cmd, "simcuda driver");
    symlink("libcuda.so.1", &sim.join("libcuda.so"));
}

fn build_runtime(compiler: &Compiler, simcuda: &Path, sim: &Path, obj: &Path) {
    let sources = c_sources(&simcuda.join("runtime"));
    let mut cmd = compiler.command();
    cmd.args(LIBRARY_FLAGS)
        .args(["-shared", "-Wl,-Bsymbolic-functions", "-Wl,-soname,libcudart.so.12"])
        .args(&sources)
        .arg("-o")
        .arg(sim.join("libcudart.so.12"))
        .arg("-ldl");
    run(cmd, "simcuda runtime");
    symlink("libcudart.so.12", &sim.join("libcudart.so"));

    // The static archive holds the same code, as nvcc's default libcudart_static.a does.
    let mut objects = Vec::new();
    for source in &sources {
        let object = obj.join(source.file_stem().expect("file stem")).with_extension("o");
        let mut cmd = compiler.command();
        cmd.args(LIBRARY_FLAGS).arg("-c").arg(source).arg("-o").arg(&object);
        run(cmd, "simcuda static runtime");
        objects.push(object);
    }
    let archive = sim.join("libcudart_static.a");
    let _ = fs::remove_file(&archive);
    let mut ar = c_build().get_archiver();
    ar.arg("crs").arg(&archive).args(&objects);
    run(ar, "simcuda static runtime archive");
}

/// How a client links, from its first line: `// link: <mode>`.
fn link_mode(source: &Path) -> String {
    let text = fs::read_to_string(source).unwrap_or_else(|e| panic!("reading {}: {e}", source.display()));
    let first = text.lines().next().unwrap_or_default();
    match first.trim().strip_prefix("// link:") {
        Some(mode) => mode.trim().to_string(),
        None => panic!(
            "{}: the first line must say how to link, e.g. `// link: driver` \
             (driver, driver-cwd, dl, cudart-shared, cudart-static, cublas or none)",
            source.display()
        ),
    }
}

/// Builds each of `sources` (with `clients`, home of `sim_util.h`, on the include path).
fn build_clients(compiler: &Compiler, sources: &[PathBuf], clients: &Path, sim: &Path, bin: &Path) {
    std::thread::scope(|scope| {
        for source in sources {
            scope.spawn(move || build_client(compiler, source, clients, sim, bin));
        }
    });
}

fn build_client(compiler: &Compiler, source: &Path, clients: &Path, sim: &Path, bin: &Path) {
    let stem = source.file_stem().expect("file stem").to_string_lossy().into_owned();
    let mut cmd = compiler.command();
    cmd.arg("-I").arg(clients);
    // gnu11: clients are POSIX programs (fork, pause, dladdr with _GNU_SOURCE).
    cmd.args(["-std=gnu11", "-Wall", "-Wextra", "-g", "-O1", "-pthread"])
        .arg(source)
        .arg("-o")
        .arg(bin.join(&stem));
    match link_mode(source).as_str() {
        "driver" => {
            cmd.arg("-L").arg(sim).arg("-lcuda");
        }
        // A RUNPATH of the working directory: a setuid copy finds its driver and a preloaded
        // shim there (secure-execution mode ignores LD_LIBRARY_PATH).
        "driver-cwd" => {
            cmd.arg("-L").arg(sim).arg("-lcuda").arg("-Wl,-rpath,/proc/self/cwd");
        }
        "dl" => {
            cmd.arg("-ldl");
        }
        "cudart-shared" => {
            cmd.arg("-L").arg(sim).arg("-lcudart");
        }
        "cudart-static" => {
            cmd.arg(sim.join("libcudart_static.a")).arg("-ldl");
        }
        "cublas" => {
            let lib = sim.parent().expect("sim/ has a parent").join("lib");
            cmd.arg("-L").arg(&lib).arg("-lcublas").arg("-Wl,-rpath").arg(&lib);
        }
        "none" => {}
        other => panic!(
            "{}: unknown link mode `{other}` (driver, driver-cwd, dl, cudart-shared, cudart-static, cublas or none)",
            source.display()
        ),
    }
    run(cmd, &format!("client {stem}"));
}
