//! Finding a symbol in a loaded object by reading its dynamic symbol table.
//!
//! The shim exports `dlsym` and `dlvsym` itself, so it cannot ask the dynamic linker for the
//! real ones by name: every such call would land in its own exports. Reading libc's GNU hash
//! table directly breaks the cycle without private glibc entry points (`_dl_sym` and friends
//! are gone since glibc 2.34).

use std::ffi::{c_int, c_void, CStr};

use libc::{dl_phdr_info, size_t, Elf64_Sym};

/// `Elf64_Dyn` (not in the libc crate).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(non_camel_case_types)]
struct Elf64_Dyn {
    d_tag: i64,
    d_val: u64,
}

const DT_NULL: i64 = 0;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_GNU_HASH: i64 = 0x6fff_fef5;
const STT_FUNC: u8 = 2;

struct Search<'a> {
    /// Objects whose path contains one of these, tried in order.
    objects: &'a [&'a [u8]],
    name: &'a CStr,
    found: Option<usize>,
    rank: usize,
}

/// Looks `name` up as a plain (non-IFUNC) function defined in the first loaded object whose path contains one
/// of `objects` (earlier entries win).
pub fn find_function(objects: &[&[u8]], name: &CStr) -> Option<usize> {
    let mut search = Search {
        objects,
        name,
        found: None,
        rank: usize::MAX,
    };
    // SAFETY: the callback only reads the loader's program headers and the object's own
    // mapped dynamic section, and `search` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut search).cast()) };
    search.found
}

unsafe extern "C" fn visit(info: *mut dl_phdr_info, _size: size_t, data: *mut c_void) -> c_int {
    // SAFETY: dl_iterate_phdr passes a whole `dl_phdr_info` (glibc's, as `libc` declares it)
    // and the `data` we gave it: `search`, alive and borrowed by no one else during the call.
    let (info, search) = unsafe { (&*info, &mut *data.cast::<Search<'_>>()) };
    if info.dlpi_name.is_null() {
        return 0;
    }
    // SAFETY: the loader's object names are NUL-terminated strings, alive while the object
    // is loaded (dl_iterate_phdr holds the loader's lock during the callback).
    let path = unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes();
    let Some(rank) = search.objects.iter().position(|o| contains(path, o)) else {
        return 0;
    };
    if rank >= search.rank {
        return 0;
    }
    // SAFETY: `info` describes an object that stays loaded during the callback (the loader's
    // lock is held), so its dynamic section and tables are mapped.
    if let Some(addr) = unsafe { lookup(info, search.name) } {
        search.found = Some(addr);
        search.rank = rank;
    }
    0
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn gnu_hash(name: &[u8]) -> u32 {
    name.iter()
        .fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(u32::from(c)))
}

/// # Safety
/// `info` must describe an object that is loaded and stays loaded during the call.
unsafe fn lookup(info: &dl_phdr_info, name: &CStr) -> Option<usize> {
    let base = info.dlpi_addr as usize;
    // SAFETY: the loader guarantees dlpi_phnum headers at dlpi_phdr.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let dynamic = phdrs.iter().find(|p| p.p_type == libc::PT_DYNAMIC)?;
    let mut dyn_ptr = (base + dynamic.p_vaddr as usize) as *const Elf64_Dyn;
    let (mut strtab, mut symtab, mut gnu) = (0usize, 0usize, 0usize);
    // glibc rewrites these entries to absolute addresses when it relocates an object; other
    // loaders leave them relative to the load base.
    let abs = |v: u64| {
        if (v as usize) < base {
            base + v as usize
        } else {
            v as usize
        }
    };
    loop {
        // SAFETY: the dynamic section is an array terminated by DT_NULL.
        let d = unsafe { dyn_ptr.read() };
        match d.d_tag {
            DT_NULL => break,
            DT_STRTAB => strtab = abs(d.d_val),
            DT_SYMTAB => symtab = abs(d.d_val),
            DT_GNU_HASH => gnu = abs(d.d_val),
            _ => {}
        }
        // SAFETY: still inside the DT_NULL-terminated array.
        dyn_ptr = unsafe { dyn_ptr.add(1) };
    }
    if strtab == 0 || symtab == 0 || gnu == 0 {
        return None;
    }
    let want = name.to_bytes();
    let h = gnu_hash(want);
    // SAFETY: a GNU hash table starts with four u32 words: nbuckets, symoffset, bloom size,
    // bloom shift, then the bloom words, buckets and chains, all inside the mapped object. A
    // chain ends with a word whose low bit is set, each index in it names an entry of the
    // symbol table, and each entry's `st_name` is the offset of a NUL-terminated name in the
    // string table: the tables the loader itself binds the object's symbols with.
    unsafe {
        let words = gnu as *const u32;
        let nbuckets = words.read();
        let symoffset = words.add(1).read();
        let bloom_size = words.add(2).read() as usize;
        if nbuckets == 0 {
            return None;
        }
        let buckets = words.add(4 + bloom_size * 2); // 64-bit bloom words
        let chains = buckets.add(nbuckets as usize);
        let mut idx = buckets.add((h % nbuckets) as usize).read();
        if idx < symoffset {
            return None;
        }
        loop {
            let ch = chains.add((idx - symoffset) as usize).read();
            if (ch | 1) == (h | 1) {
                let sym = &*(symtab as *const Elf64_Sym).add(idx as usize);
                let sym_name = CStr::from_ptr((strtab + sym.st_name as usize) as *const libc::c_char);
                let ty = sym.st_info & 0xf;
                if sym_name.to_bytes() == want && sym.st_shndx != 0 && ty == STT_FUNC {
                    return Some(base + sym.st_value as usize);
                }
            }
            if ch & 1 == 1 {
                return None;
            }
            idx += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_libc_functions_by_reading_the_hash_table() {
        let ours = find_function(&[b"libc.so"], c"getpid").expect("getpid in libc");
        assert_eq!(ours, libc::getpid as *const () as usize);
        assert!(find_function(&[b"libc.so"], c"gpuleak_no_such_function").is_none());
        assert!(find_function(&[b"libc.so"], c"dlsym").is_some());
    }
}
