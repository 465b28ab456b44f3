//! Builds the C stack fixtures for the tests and the benchmark (never linked into the library):
//! `libgpuleak_unwind_fixture.a` (-fomit-frame-pointer), `libgpuleak_unwind_fixture_fp.a` (the
//! same code with frame pointers) and `libgpuleak_unwind_late.so`, which the tests dlopen after
//! their first capture. The tests and the bench name the archives with `#[link]`.

use std::env;
use std::path::PathBuf;

const FIXTURE: &str = "tests/fixture/stack.c";

fn main() {
    println!("cargo:rerun-if-changed={FIXTURE}");
    println!("cargo:rerun-if-changed=build.rs");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        return;
    }

    let archive = |prefix: &str, frame_pointers: &str, name: &str| {
        cc::Build::new()
            .file(FIXTURE)
            .opt_level(2)
            .define("FX_PREFIX", prefix)
            .flag(frame_pointers)
            .flag("-fasynchronous-unwind-tables")
            .cargo_metadata(false)
            .compile(name);
    };
    archive("fx_", "-fomit-frame-pointer", "gpuleak_unwind_fixture");
    archive("fxfp_", "-fno-omit-frame-pointer", "gpuleak_unwind_fixture_fp");
    println!("cargo:rustc-link-search=native={}", out_dir.display());

    let late = out_dir.join("libgpuleak_unwind_late.so");
    let compiler = cc::Build::new().opt_level(2).get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-fomit-frame-pointer", "-DFX_PREFIX=late_", "-o"])
        .arg(&late)
        .arg(FIXTURE)
        .status()
        .expect("run the C compiler");
    assert!(status.success(), "building {} failed", late.display());
    println!("cargo:rustc-env=GPULEAK_UNWIND_LATE_SO={}", late.display());
}
