//! The module map: every loaded object's path, address range and build id, so that the
//! analyzer can symbolize raw return addresses offline (and check it reads the same file).

use std::ffi::{c_int, c_void, CStr};

use libc::{dl_phdr_info, size_t};

/// One loaded object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Load bias.
    pub base: u64,
    /// Lowest mapped address.
    pub start: u64,
    /// One past the highest mapped address.
    pub end: u64,
    /// Path (the executable's real path for the main program).
    pub path: String,
    /// GNU build id, empty when absent.
    pub build_id: Vec<u8>,
}

const NT_GNU_BUILD_ID: u32 = 3;

/// Every loaded object, and the loader's (adds, subs) counters for change detection.
pub fn loaded() -> (Vec<Module>, (u64, u64)) {
    let mut state: (Vec<Module>, (u64, u64)) = (Vec::new(), (0, 0));
    // SAFETY: the callback only reads the loader's data and pushes into `state`, which
    // outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut state).cast()) };
    (state.0, state.1)
}

/// The loader's (adds, subs) counters: they change whenever an object is loaded or
/// unloaded.
pub fn generation() -> (u64, u64) {
    let mut g: (u64, u64) = (0, 0);
    // SAFETY: the callback writes only into `g` and stops after the first object.
    unsafe { libc::dl_iterate_phdr(Some(counters), (&raw mut g).cast()) };
    g
}

unsafe extern "C" fn counters(info: *mut dl_phdr_info, _size: size_t, data: *mut c_void) -> c_int {
    // SAFETY: dl_iterate_phdr passes a whole `dl_phdr_info` (glibc's, with the adds and subs
    // counters) and the `data` we gave it: `g`, alive and borrowed by no one else.
    let (info, g) = unsafe { (&*info, &mut *data.cast::<(u64, u64)>()) };
    *g = (info.dlpi_adds, info.dlpi_subs);
    1
}

/// The main program's path. `/proc/self/exe` names the file the kernel started, which is the
/// dynamic loader itself when a program is started through it (`ld-linux-x86-64.so.2 ./app`,
/// as Nix wrappers, hermetic toolchains and a foreign C library need): then the kernel
/// loaded no interpreter (`AT_BASE` is 0: the loader was the program it started; a program
/// without one cannot have preloaded us), and the path comes from the mapping that holds the
/// main program's first address.
fn main_program_path(start: u64) -> String {
    if crate::sys::getauxval(libc::AT_BASE) == 0 {
        if let Some(path) = mapped_file(start) {
            return path;
        }
    }
    std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The file mapped at `addr`, from `/proc/self/maps`.
fn mapped_file(addr: u64) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|line| {
        let mut fields = line.splitn(6, ' ');
        let (lo, hi) = fields.next()?.split_once('-')?;
        let (lo, hi) = (u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?);
        let path = fields.nth(4)?.trim_start();
        ((lo..hi).contains(&addr) && path.starts_with('/')).then(|| path.to_string())
    })
}

/// The main program's path (see [`main_program_path`]): the first loaded object's.
pub fn main_program() -> String {
    loaded().0.into_iter().next().map(|m| m.path).unwrap_or_default()
}

unsafe extern "C" fn visit(info: *mut dl_phdr_info, _size: size_t, data: *mut c_void) -> c_int {
    // SAFETY: dl_iterate_phdr passes a whole `dl_phdr_info` (glibc's, with the adds and subs
    // counters) and the `data` we gave it: `state`, alive and borrowed by no one else.
    let (info, state) = unsafe { (&*info, &mut *data.cast::<(Vec<Module>, (u64, u64))>()) };
    state.1 = (info.dlpi_adds, info.dlpi_subs);
    // SAFETY: the loader guarantees dlpi_phnum headers at dlpi_phdr.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let base = info.dlpi_addr;
    let (mut start, mut end) = (u64::MAX, 0u64);
    let mut build_id = Vec::new();
    for p in phdrs {
        if p.p_type == libc::PT_LOAD {
            start = start.min(base.wrapping_add(p.p_vaddr));
            end = end.max(base.wrapping_add(p.p_vaddr + p.p_memsz));
        } else if p.p_type == libc::PT_NOTE && build_id.is_empty() {
            let at = base.wrapping_add(p.p_vaddr) as *const u8;
            // SAFETY: a PT_NOTE segment holds allocated note sections, inside a PT_LOAD one:
            // mapped, `p_memsz` bytes, while the object stays loaded (the loader's lock is held
            // during the callback).
            let notes = unsafe { std::slice::from_raw_parts(at, p.p_memsz as usize) };
            build_id = find_build_id(notes).unwrap_or_default();
        }
    }
    if start >= end {
        return 0;
    }
    let name = if info.dlpi_name.is_null() {
        &b""[..]
    } else {
        // SAFETY: the loader's NUL-terminated object name, alive while the object is loaded.
        unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes()
    };
    let path = if name.is_empty() && state.0.is_empty() {
        main_program_path(start)
    } else {
        String::from_utf8_lossy(name).into_owned()
    };
    state.0.push(Module {
        base,
        start,
        end,
        path,
        build_id,
    });
    0
}

/// Finds the GNU build id in a run of ELF notes.
pub fn find_build_id(mut notes: &[u8]) -> Option<Vec<u8>> {
    let word = |b: &[u8], at: usize| b.get(at..at + 4).map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    let align = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let namesz = word(notes, 0)? as usize;
        let descsz = word(notes, 4)? as usize;
        let ty = word(notes, 8)?;
        let name_end = 12usize.checked_add(align(namesz))?;
        let desc_end = name_end.checked_add(align(descsz))?;
        if desc_end > notes.len() {
            return None;
        }
        if ty == NT_GNU_BUILD_ID && namesz == 4 && &notes[12..16] == b"GNU\0" {
            return Some(notes[name_end..name_end + descsz].to_vec());
        }
        notes = &notes[desc_end..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_executable_first_and_libc_with_build_ids() {
        let (mods, _) = loaded();
        assert!(
            mods[0]
                .path
                .ends_with(&*std::env::current_exe().unwrap().file_name().unwrap().to_string_lossy())
                || !mods[0].path.is_empty()
        );
        let libc_mod = mods.iter().find(|m| m.path.contains("libc.so")).expect("libc loaded");
        assert!(!libc_mod.build_id.is_empty(), "Debian's libc has a build id");
        let here = lists_the_executable_first_and_libc_with_build_ids as *const () as u64;
        assert!(mods.iter().any(|m| m.start <= here && here < m.end));
    }
}
