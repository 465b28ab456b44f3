//! The symbolizer against real programs built here at test time (gcc, g++, rustc): each prints
//! its load bias, mapped range and some return addresses, and the symbolizer must name them
//! (function, file, line, inlined calls) from the module map alone, including after the file
//! was stripped, rebuilt, or its debug info moved to a debug dir.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use gpuleak_analyzer::symbolize::{Frame, ModuleInfo, Symbolizer};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// Prints the main program's load bias and mapped range as `module BIAS LO HI`.
const PRINT_MODULE_C: &str = r#"
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdio.h>

static int print_module(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size; (void)data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD) continue;
        uintptr_t a = info->dlpi_addr + p->p_vaddr;
        if (a < lo) lo = a;
        if (a + p->p_memsz > hi) hi = a + p->p_memsz;
    }
    printf("module %#lx %#lx %#lx\n", (unsigned long)info->dlpi_addr, (unsigned long)lo, (unsigned long)hi);
    return 1; /* the first object is the program itself */
}
"#;

/// C at -O2: `inner_helper` is always inlined into `outer_function`.
const INLINE_C: &str = r#"
void *volatile sites[2];
volatile int sink;

__attribute__((noinline, noclone)) void record(int slot) {
    sites[slot] = __builtin_return_address(0);
}

static inline __attribute__((always_inline)) void inner_helper(int n) {
    record(0); /* @inner_call */
    sink = n;
}

__attribute__((noinline, noclone)) void outer_function(int n) {
    inner_helper(n); /* @outer_call */
    sink = n + 1;
}

int main(int argc, char **argv) {
    (void)argv;
    outer_function(argc);
    record(1); /* @main_call */
    sink = 0;
    dl_iterate_phdr(print_module, NULL);
    printf("site inline %p\n", sites[0]);
    printf("site main %p\n", sites[1]);
    return 0;
}
"#;

/// C++: a method of a class template in a namespace.
const WIDGET_CPP: &str = r#"
void *volatile site;

extern "C" __attribute__((noinline, noclone)) void record() {
    site = __builtin_return_address(0);
}

namespace ns {
template <typename T> struct Widget {
    T size = 0;
    __attribute__((noinline)) void grow(unsigned long n);
};

template <typename T> void Widget<T>::grow(unsigned long n) {
    record(); // @grow_call
    size += static_cast<T>(n);
}

template struct Widget<int>;
} // namespace ns

int main() {
    ns::Widget<int> w;
    w.grow(3);
    dl_iterate_phdr(print_module, nullptr);
    printf("site grow %p\n", site);
    return w.size == 3 ? 0 : 1;
}
"#;

/// Rust at opt-level 0; glibc's `backtrace` stands in for `__builtin_return_address`.
const MYCRATE_RS: &str = r#"
use std::ffi::c_void;

extern "C" {
    fn backtrace(buffer: *mut *mut c_void, size: i32) -> i32;
}

/// The return address into the caller.
#[inline(never)]
fn record() -> usize {
    let mut buf = [std::ptr::null_mut::<c_void>(); 2];
    // SAFETY: `buf` has room for the 2 entries backtrace may write.
    let n = unsafe { backtrace(buf.as_mut_ptr(), 2) };
    assert_eq!(n, 2);
    buf[1] as usize
}

mod module {
    #[inline(never)]
    pub fn function() -> usize {
        let site = super::record(); // @rust_call
        std::hint::black_box(site)
    }
}

fn main() {
    let site = module::function();
    // The lowest mapping of the executable and the end of its highest.
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let (mut lo, mut hi) = (u64::MAX, 0);
    for line in maps.lines() {
        if !line.ends_with(exe.to_str().unwrap()) {
            continue;
        }
        let range = line.split(' ').next().unwrap();
        let (a, b) = range.split_once('-').unwrap();
        lo = lo.min(u64::from_str_radix(a, 16).unwrap());
        hi = hi.max(u64::from_str_radix(b, 16).unwrap());
    }
    println!("maps {lo:#x} {hi:#x}");
    println!("site function {site:#x}");
}
"#;

/// A program built and run once, and what it printed.
struct Program {
    exe: PathBuf,
    module: ModuleInfo,
    sites: HashMap<String, u64>,
    source: &'static str,
    source_name: &'static str,
}

impl Program {
    fn site(&self, name: &str) -> u64 {
        self.sites[name]
    }

    /// The module as recorded, but at another path (a copy of the file).
    fn module_at(&self, path: &Path) -> ModuleInfo {
        ModuleInfo {
            path: path.to_str().unwrap().to_owned(),
            ..self.module.clone()
        }
    }

    /// The 1-based line holding `marker` in the source.
    fn line(&self, marker: &str) -> u32 {
        let i = self.source.lines().position(|l| l.contains(marker)).expect(marker);
        i as u32 + 1
    }
}

fn scratch(name: &str) -> PathBuf {
    // target/tmp is shared by the debug and release profiles, which may run at once.
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("symbolize-{profile}"))
        .join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

fn build_id(path: &Path) -> Vec<u8> {
    let data = fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    file.build_id().unwrap().expect("a build id").to_vec()
}

/// Compiles `source` in a fresh dir, runs it and reads what it printed.
fn build(name: &str, source: &'static str, source_name: &'static str, compile: &[&str]) -> Program {
    let dir = scratch(&format!("build-{name}"));
    let src = dir.join(source_name);
    fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let (tool, flags) = compile.split_first().unwrap();
    run_ok(
        Command::new(tool)
            .args(flags)
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .current_dir(&dir),
    );
    let stdout = run_ok(&mut Command::new(&exe));

    let mut sites = HashMap::new();
    let mut module = None;
    for line in stdout.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["module", base, lo, hi] => module = Some((hex(base), hex(lo), hex(hi))),
            ["maps", lo, hi] => {
                // The lowest mapping is the first PT_LOAD's page: the bias is its distance from
                // that segment's page in the file's virtual addresses.
                let data = fs::read(&exe).unwrap();
                let file = object::File::parse(&*data).unwrap();
                let first = file.segments().map(|s| s.address()).min().unwrap() & !0xfff;
                module = Some((hex(lo) - first, hex(lo), hex(hi)));
            }
            ["site", name, addr] => {
                sites.insert(name.to_owned(), hex(addr));
            }
            _ => panic!("{name} printed {line:?}"),
        }
    }
    let (base, start, end) = module.expect("a module line");
    let module = ModuleInfo {
        base,
        start,
        end,
        path: exe.to_str().unwrap().to_owned(),
        build_id: build_id(&exe),
    };
    Program {
        exe,
        module,
        sites,
        source,
        source_name,
    }
}

fn c_program() -> &'static Program {
    static P: OnceLock<Program> = OnceLock::new();
    P.get_or_init(|| {
        let source = format!("{PRINT_MODULE_C}{INLINE_C}").leak();
        build("inline", source, "inline.c", &["gcc", "-g", "-O2"])
    })
}

fn cpp_program() -> &'static Program {
    static P: OnceLock<Program> = OnceLock::new();
    P.get_or_init(|| {
        let source = format!("{PRINT_MODULE_C}{WIDGET_CPP}").leak();
        build("widget", source, "widget.cpp", &["g++", "-g", "-O2"])
    })
}

fn rust_program() -> &'static Program {
    static P: OnceLock<Program> = OnceLock::new();
    P.get_or_init(|| {
        build(
            "mycrate",
            MYCRATE_RS,
            "mycrate.rs",
            &[
                "rustc",
                "--crate-name",
                "mycrate",
                "-g",
                "-C",
                "opt-level=0",
                "-C",
                "link-arg=-Wl,--build-id",
            ],
        )
    })
}

fn file_name(frame: &Frame) -> Option<&str> {
    Path::new(frame.file.as_deref()?).file_name()?.to_str()
}

/// Asserts one frame's function, file base name, line and inlined mark.
#[track_caller]
fn assert_frame(frame: &Frame, function: &str, p: &Program, marker: &str, inlined: bool) {
    assert_eq!(frame.function.as_deref(), Some(function), "{frame:?}");
    assert_eq!(file_name(frame), Some(p.source_name), "{frame:?}");
    assert_eq!(frame.line, Some(p.line(marker)), "{frame:?} for {marker}");
    assert_eq!(frame.inlined, inlined, "{frame:?}");
    assert_eq!(
        frame.module.as_deref(),
        p.exe.file_name().and_then(|n| n.to_str()),
        "{frame:?}"
    );
}

/// The frames of the C program's call inside the inlined helper, with full debug info.
#[track_caller]
fn assert_inlined_call(frames: &[Frame], p: &Program) {
    assert_eq!(frames.len(), 2, "{frames:#?}");
    assert_frame(&frames[0], "inner_helper", p, "@inner_call", true);
    assert_frame(&frames[1], "outer_function", p, "@outer_call", false);
    let offset = p.site("inline") - p.module.base;
    assert!(frames.iter().all(|f| f.address == offset), "{frames:#?}");
}

/// A copy of `exe` at `to` with every symbol and all debug info stripped; returns `to`.
fn stripped_copy(exe: &Path, to: &Path) -> PathBuf {
    copy(exe, to);
    run_ok(Command::new("strip").arg(to));
    to.to_path_buf()
}

/// Where a debug dir keeps the debug file of `exe` by its build id.
fn build_id_file(debug_dir: &Path, exe: &Path) -> PathBuf {
    let hex: String = build_id(exe).iter().map(|b| format!("{b:02x}")).collect();
    debug_dir
        .join(".build-id")
        .join(&hex[..2])
        .join(format!("{}.debug", &hex[2..]))
}

fn copy(from: &Path, to: &Path) {
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    fs::copy(from, to).unwrap();
}

#[test]
fn c_inlined_call_expands_to_both_functions_with_call_lines() {
    let p = c_program();
    let s = Symbolizer::new(vec![p.module.clone()], vec![]);
    assert_inlined_call(&s.symbolize(p.site("inline")), p);

    let frames = s.symbolize(p.site("main"));
    assert_eq!(frames.len(), 1, "{frames:#?}");
    assert_frame(&frames[0], "main", p, "@main_call", false);
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
}

#[test]
fn cpp_template_method_is_demangled() {
    let p = cpp_program();
    let s = Symbolizer::new(vec![p.module.clone()], vec![]);
    let frames = s.symbolize(p.site("grow"));
    assert_eq!(frames.len(), 1, "{frames:#?}");
    assert_frame(&frames[0], "ns::Widget<int>::grow", p, "@grow_call", false);
}

#[test]
fn rust_function_is_demangled_without_hash() {
    let p = rust_program();
    let s = Symbolizer::new(vec![p.module.clone()], vec![]);
    let frames = s.symbolize(p.site("function"));
    assert_eq!(frames.len(), 1, "{frames:#?}");
    assert_frame(&frames[0], "mycrate::module::function", p, "@rust_call", false);
}

#[test]
fn rebuilt_module_falls_back_to_module_and_offset() {
    let p = c_program();
    let mut module = p.module.clone();
    module.build_id[0] ^= 0xff;
    let s = Symbolizer::new(vec![module], vec![]);
    let frames = s.symbolize(p.site("inline"));
    let expected = Frame {
        function: None,
        file: None,
        line: None,
        module: Some("inline".into()),
        address: p.site("inline") - p.module.base,
        inlined: false,
        user: false,
    };
    assert_eq!(frames, [expected]);
    let warnings = s.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("was rebuilt since the trace was recorded"),
        "{warnings:?}"
    );
}

#[test]
fn stripped_copies_keep_function_names_from_the_symbol_table() {
    let dir = scratch("strip-g");
    for (p, site, function) in [
        (c_program(), "inline", "outer_function"),
        (cpp_program(), "grow", "ns::Widget<int>::grow"),
        (rust_program(), "function", "mycrate::module::function"),
    ] {
        let copy_path = dir.join(p.exe.file_name().unwrap());
        copy(&p.exe, &copy_path);
        run_ok(Command::new("strip").arg("-g").arg(&copy_path));
        let s = Symbolizer::new(vec![p.module_at(&copy_path)], vec![]);
        let frames = s.symbolize(p.site(site));
        assert_eq!(frames.len(), 1, "{frames:#?}");
        assert_eq!(frames[0].function.as_deref(), Some(function), "{frames:#?}");
        assert_eq!((&frames[0].file, frames[0].line), (&None, None), "{frames:#?}");
        let warnings = s.warnings();
        assert!(warnings.iter().any(|w| w.contains("no DWARF")), "{warnings:?}");
        // The full symbol table is still there: the note must not say only exports have names.
        assert!(
            warnings.iter().any(|w| w.contains("no DWARF: no file:line")),
            "{warnings:?}"
        );
        assert!(
            !warnings.iter().any(|w| w.contains("only exported functions named")),
            "{warnings:?}"
        );
    }
}

/// A library stripped to its dynamic symbols (as distributions and wheels ship them) names only
/// its exported functions, and the note says so; its other frames show as module+offset.
#[test]
fn a_library_with_only_dynamic_symbols_is_noted_as_such() {
    let dir = scratch("strip-all-shared");
    let lib = dir.join("libonly.so");
    let source = dir.join("only.c");
    std::fs::write(
        &source,
        "__attribute__((noinline)) int hidden(int x) { return x * 3; }\n\
         __attribute__((visibility(\"default\"))) int exported(int x) { return hidden(x) + 1; }\n",
    )
    .unwrap();
    run_ok(
        Command::new(std::env::var("CC").unwrap_or_else(|_| "gcc".into()))
            .args(["-O1", "-g", "-shared", "-fPIC", "-fvisibility=hidden", "-o"])
            .arg(&lib)
            .arg(&source),
    );
    // Where the two functions are, read before stripping.
    let nm = run_ok(Command::new("nm").arg(&lib));
    let at = |name: &str| {
        nm.lines()
            .find_map(|l| l.strip_suffix(&format!(" {name}")))
            .and_then(|l| l.split(' ').next())
            .map(hex)
            .unwrap_or_else(|| panic!("{name} not in\n{nm}"))
    };
    let (exported, hidden) = (at("exported"), at("hidden"));
    run_ok(Command::new("strip").arg(&lib));
    let base = 0x7f00_0000_0000;
    let module = ModuleInfo {
        base,
        start: base,
        end: base + 0x10_0000,
        path: lib.to_str().unwrap().to_owned(),
        build_id: Vec::new(),
    };
    let s = Symbolizer::new(vec![module], vec![]);
    // An address inside the function (frames are return addresses, looked up one byte back).
    let named = |addr: u64| s.symbolize(base + addr + 2)[0].function.clone();
    assert_eq!(named(exported).as_deref(), Some("exported"));
    assert_eq!(named(hidden), None);
    let warnings = s.warnings();
    assert!(
        warnings.iter().any(|w| w.contains("only exported functions named")),
        "{warnings:?}"
    );
    assert!(
        !warnings.iter().any(|w| w.contains("no DWARF: no file:line")),
        "{warnings:?}"
    );
}

#[test]
fn debug_dir_build_id_layout_brings_lines_back_to_a_stripped_file() {
    let p = c_program();
    let dir = scratch("build-id-layout");
    let stripped = stripped_copy(&p.exe, &dir.join("app/inline"));
    let debug = dir.join("debug");
    copy(&p.exe, &build_id_file(&debug, &p.exe));

    // Without the debug dir a fully stripped file names nothing.
    let s = Symbolizer::new(vec![p.module_at(&stripped)], vec![]);
    let frames = s.symbolize(p.site("inline"));
    assert_eq!(frames.len(), 1, "{frames:#?}");
    assert_eq!(frames[0].function, None, "{frames:#?}");

    let s = Symbolizer::new(vec![p.module_at(&stripped)], vec![debug]);
    assert_inlined_call(&s.symbolize(p.site("inline")), p);
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
}

#[test]
fn debug_dir_by_name_skips_a_file_with_another_build_id() {
    let p = c_program();
    let dir = scratch("by-name");
    let stripped = stripped_copy(&p.exe, &dir.join("app/inline"));
    // First dir: a debug file of the right name but of another program.
    let wrong = dir.join("wrong");
    copy(&cpp_program().exe, &wrong.join("inline.debug"));
    let right = dir.join("right");
    copy(&p.exe, &right.join("inline"));

    let s = Symbolizer::new(vec![p.module_at(&stripped)], vec![wrong, right]);
    assert_inlined_call(&s.symbolize(p.site("inline")), p);
    let warnings = s.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("not the debug file of"), "{warnings:?}");
}

#[test]
fn a_sysroot_holds_the_files_of_a_trace_recorded_elsewhere() {
    let p = c_program();
    let root = scratch("sysroot");
    // Recorded as /opt/app/inline on the traced machine; here only below the sysroot.
    copy(&p.exe, &root.join("opt/app/inline"));
    let recorded = p.module_at(Path::new("/opt/app/inline"));

    let s = Symbolizer::new(vec![recorded.clone()], vec![]);
    assert_eq!(s.symbolize(p.site("inline"))[0].function, None);
    assert!(
        s.warnings().iter().any(|w| w.contains("not found")),
        "{:?}",
        s.warnings()
    );

    let s = Symbolizer::new(vec![recorded.clone()], vec![]).with_sysroot(Some(root.clone()));
    assert_inlined_call(&s.symbolize(p.site("inline")), p);
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());

    // A module that is not below the sysroot is still found at its recorded path.
    let s = Symbolizer::new(vec![p.module.clone()], vec![]).with_sysroot(Some(root.join("empty")));
    assert_inlined_call(&s.symbolize(p.site("inline")), p);

    // A file below the sysroot of another build is not used for the module.
    copy(&cpp_program().exe, &root.join("opt/app/inline"));
    let s = Symbolizer::new(vec![recorded], vec![]).with_sysroot(Some(root));
    assert_eq!(s.symbolize(p.site("inline"))[0].function, None);
    assert!(
        s.warnings().iter().any(|w| w.contains("was rebuilt")),
        "{:?}",
        s.warnings()
    );
}

#[test]
fn a_sysroot_s_debug_dir_is_searched_by_build_id() {
    let p = c_program();
    let root = scratch("sysroot-debug");
    let stripped = stripped_copy(&p.exe, &root.join("opt/app/inline"));
    copy(&p.exe, &build_id_file(&root.join("usr/lib/debug"), &p.exe));
    let recorded = p.module_at(Path::new("/opt/app/inline"));

    let s = Symbolizer::new(vec![recorded], vec![]).with_sysroot(Some(root.clone()));
    assert_inlined_call(&s.symbolize(p.site("inline")), p);
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());

    // Like the host's /usr/lib/debug, it names files by build id only, never by name.
    let by_name = scratch("sysroot-by-name");
    copy(&stripped, &by_name.join("opt/app/inline"));
    copy(&p.exe, &by_name.join("usr/lib/debug/inline"));
    let s = Symbolizer::new(vec![p.module_at(Path::new("/opt/app/inline"))], vec![]).with_sysroot(Some(by_name));
    assert_eq!(s.symbolize(p.site("inline"))[0].function, None);
}

#[test]
fn gnu_debuglink_beside_the_file_is_followed() {
    let p = cpp_program();
    let dir = scratch("debuglink");
    let exe = dir.join("widget");
    copy(&p.exe, &exe);
    let debug = dir.join("widget.dbg");
    run_ok(Command::new("objcopy").arg("--only-keep-debug").arg(&exe).arg(&debug));
    run_ok(
        Command::new("objcopy")
            .arg("--strip-all")
            .arg("--add-gnu-debuglink=widget.dbg")
            .arg(&exe)
            .current_dir(&dir),
    );

    let s = Symbolizer::new(vec![p.module_at(&exe)], vec![]);
    let frames = s.symbolize(p.site("grow"));
    assert_eq!(frames.len(), 1, "{frames:#?}");
    assert_frame(&frames[0], "ns::Widget<int>::grow", p, "@grow_call", false);
}

#[test]
fn vdso_and_addresses_outside_every_module_fall_back_cleanly() {
    let p = c_program();
    let vdso = ModuleInfo {
        base: 0x7fff_0000_0000,
        start: 0x7fff_0000_0000,
        end: 0x7fff_0000_2000,
        path: "linux-vdso.so.1".into(),
        build_id: vec![1, 2, 3, 4],
    };
    let s = Symbolizer::new(vec![vdso, p.module.clone()], vec![]);
    let frames = s.symbolize(0x7fff_0000_0123);
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0].module.as_deref(), frames[0].address),
        (Some("linux-vdso.so.1"), 0x123)
    );
    let frames = s.symbolize(0x10);
    assert_eq!((frames[0].module.as_deref(), frames[0].address), (None, 0x10));
    assert_inlined_call(&s.symbolize(p.site("inline")), p);
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
}

/// Thousands of distinct return addresses all over a Rust binary (its own code and the
/// standard library's, all with DWARF), from four threads at once.
#[test]
fn thousands_of_distinct_addresses_resolve_quickly() {
    let p = rust_program();
    let data = fs::read(&p.exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut addresses: Vec<u64> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 8)
        .flat_map(|s| (s.address() + 1..s.address() + s.size()).step_by(24))
        .map(|a| a + p.module.base)
        .collect();
    addresses.sort_unstable();
    addresses.dedup();
    let stride = addresses.len().div_ceil(6000);
    let addresses: Vec<u64> = addresses.into_iter().step_by(stride).collect();
    assert!(addresses.len() >= 3000, "only {} addresses", addresses.len());

    let s = Symbolizer::new(vec![p.module.clone()], vec![]);
    let started = Instant::now();
    let named: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = addresses
            .chunks(addresses.len().div_ceil(4))
            .map(|chunk| {
                let s = &s;
                scope.spawn(move || chunk.iter().filter(|&&a| s.symbolize(a)[0].function.is_some()).count())
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let first = started.elapsed();
    // Much of the standard library has line tables but no function entries: named from .symtab.
    assert!(
        named * 100 >= addresses.len() * 99,
        "{named} of {} named",
        addresses.len()
    );

    let started = Instant::now();
    for &a in &addresses {
        s.symbolize(a);
    }
    let cached = started.elapsed();
    eprintln!("{} addresses: {first:?} first, {cached:?} cached", addresses.len());
    // Generous bounds for a debug build on a small machine; a lookup that reparsed the DWARF
    // or reloaded the file each time would take minutes.
    assert!(first.as_secs() < 20, "{first:?}");
    assert!(cached < first, "{cached:?} vs {first:?}");
}

/// The one cache file in `dir`, with every function name it holds replaced by `stale`: frames
/// named `stale` later can only have come from the cache.
fn doctor_cache(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = fs::read_to_string(&files[0]).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    for entry in json["entries"].as_array_mut().unwrap() {
        for frame in entry[1].as_array_mut().unwrap() {
            frame["function"] = "stale".into();
        }
    }
    fs::write(&files[0], json.to_string()).unwrap();
    files[0].clone()
}

fn functions(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(|f| f.function.as_deref().unwrap_or("?")).collect()
}

#[test]
fn symbol_cache_serves_its_frames_until_the_file_changes() {
    let p = c_program();
    let dir = scratch("cache-serves");
    let cache = dir.join("cache");
    let exe = dir.join(p.exe.file_name().unwrap());
    copy(&p.exe, &exe);
    let symbolizer = || Symbolizer::new(vec![p.module_at(&exe)], vec![]).with_symbol_cache(Some(cache.clone()));
    let first = symbolizer().symbolize(p.site("inline"));
    assert_inlined_call(&first, p);
    let again = symbolizer().symbolize(p.site("inline"));
    assert_eq!(first, again, "the cached frames are the frames");

    doctor_cache(&cache);
    let s = symbolizer();
    assert_eq!(
        functions(&s.symbolize(p.site("inline"))),
        ["stale", "stale"],
        "served from the cache"
    );
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
    drop(s);

    // The same bytes written again: another modification time, so the file is not trusted.
    copy(&p.exe, &exe);
    let s = symbolizer();
    assert_inlined_call(&s.symbolize(p.site("inline")), p);
}

#[test]
fn a_rebuilt_library_with_a_new_build_id_is_not_served_stale_names() {
    let (c, cpp) = (c_program(), cpp_program());
    let dir = scratch("cache-rebuilt");
    let cache = dir.join("cache");
    let exe = dir.join("app");
    copy(&c.exe, &exe);
    let s = Symbolizer::new(vec![c.module_at(&exe)], vec![]).with_symbol_cache(Some(cache.clone()));
    assert_eq!(
        functions(&s.symbolize(c.site("inline"))),
        ["inner_helper", "outer_function"]
    );
    drop(s);
    doctor_cache(&cache);

    // Another program at the same path, as a rebuilt library is: a new build id, in its trace
    // as in the file.
    copy(&cpp.exe, &exe);
    let s = Symbolizer::new(vec![cpp.module_at(&exe)], vec![]).with_symbol_cache(Some(cache.clone()));
    assert_eq!(functions(&s.symbolize(cpp.site("grow"))), ["ns::Widget<int>::grow"]);
    // An old trace of the old build: its file is gone, and the cache does not stand in for it.
    let s = Symbolizer::new(vec![c.module_at(&exe)], vec![]).with_symbol_cache(Some(cache));
    let frames = s.symbolize(c.site("inline"));
    assert_eq!(frames[0].function, None, "{frames:?}");
    assert!(s.warnings()[0].contains("was rebuilt"), "{:?}", s.warnings());
}

#[test]
fn a_corrupt_symbol_cache_file_is_ignored_and_rewritten() {
    let p = c_program();
    let dir = scratch("cache-corrupt");
    let cache = dir.join("cache");
    let symbolizer = || Symbolizer::new(vec![p.module.clone()], vec![]).with_symbol_cache(Some(cache.clone()));
    drop(symbolizer().symbolize(p.site("inline")));
    let path = doctor_cache(&cache);
    let text = fs::read(&path).unwrap();
    for junk in [&text[..text.len() / 2], b"\0\0\0\0", b"{}"] {
        fs::write(&path, junk).unwrap();
        let s = symbolizer();
        assert_inlined_call(&s.symbolize(p.site("inline")), p);
        assert!(s.warnings().is_empty(), "{:?}", s.warnings());
    }
    let valid: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        valid["entries"].as_array().map(Vec::len),
        Some(1),
        "rewritten whole: {valid}"
    );
}
