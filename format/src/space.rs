//! Which address space a pointer lives in, and which families are memory the program owns.

use crate::fields::MemKind;

/// The name space in which a pointer or handle identifies one allocation: the set of families
/// whose free functions accept each other's pointers.
///
/// Device, managed and stream-ordered memory share one space because the driver lets
/// `cuMemFree` release stream-ordered memory and `cuMemFreeAsync` release `cuMemAlloc` memory;
/// pointers imported from another process's pool, graph memory, and buffers mapped onto
/// external memory, are freed by the same two functions (mipmapped arrays mapped onto external
/// memory, like the program's own arrays, by `cuMipmappedArrayDestroy`).
/// Every other family has its own handles or its own free function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Space {
    /// Device, managed, stream-ordered, pool-imported and graph addresses.
    Device,
    /// Page-locked host memory allocated by the driver.
    Host,
    /// Host memory the program registered.
    Registered,
    /// Virtual address reservations.
    Reserve,
    /// VMM physical memory handles.
    Physical,
    /// Array and mipmapped-array handles.
    Array,
    /// Addresses opened from another process's IPC handle.
    Ipc,
    /// External memory object handles.
    External,
}

impl Space {
    /// The space of a memory family.
    #[inline]
    pub fn of(kind: MemKind) -> Space {
        // A load from a table made at compile time, where the `match` compiled to a jump
        // through a table of addresses (at every allocation and free the leak model reads).
        const TABLE: [Space; MemKind::ALL.len()] = {
            let mut table = [Space::Device; MemKind::ALL.len()];
            let mut i = 0;
            while i < MemKind::ALL.len() {
                table[MemKind::ALL[i] as usize] = Space::declared(MemKind::ALL[i]);
                i += 1;
            }
            table
        };
        TABLE[kind as usize]
    }

    /// The space of a memory family, worked out (see [`Space::of`]).
    const fn declared(kind: MemKind) -> Space {
        match kind {
            MemKind::Device
            | MemKind::Managed
            | MemKind::Async
            | MemKind::PoolImport
            | MemKind::Graph
            | MemKind::ExternalBuffer => Space::Device,
            MemKind::Host => Space::Host,
            MemKind::HostRegistered => Space::Registered,
            MemKind::VmmReserve => Space::Reserve,
            // cuMemRelease releases all three kinds of handle, one name space.
            MemKind::VmmPhysical | MemKind::VmmImport | MemKind::Multicast => Space::Physical,
            MemKind::Array | MemKind::ExternalArray => Space::Array,
            MemKind::Ipc => Space::Ipc,
            MemKind::External => Space::External,
        }
    }

    /// Every space, for looking a pointer up in the others.
    pub const ALL: [Space; 8] = [
        Space::Device,
        Space::Host,
        Space::Registered,
        Space::Reserve,
        Space::Physical,
        Space::Array,
        Space::Ipc,
        Space::External,
    ];
}

/// Whether a family is memory the program owns, counted in leaked and peak bytes.
///
/// Host-registered memory belongs to the program's own allocator, IPC-opened and pool-imported
/// memory to another process, external memory (and what is mapped onto it) to its exporter, and an address reservation is no memory at all. An imported VMM
/// handle is a reference to memory its exporter created (and counts); a multicast object only
/// binds memory the devices created with `cuMemCreate`. Unreleased ones are reported, but
/// never counted as leaked bytes.
pub fn is_owned_memory(kind: MemKind) -> bool {
    match kind {
        MemKind::Device
        | MemKind::Managed
        | MemKind::Host
        | MemKind::Async
        | MemKind::VmmPhysical
        | MemKind::Array
        | MemKind::Graph => true,
        MemKind::HostRegistered
        | MemKind::VmmReserve
        | MemKind::Ipc
        | MemKind::VmmImport
        | MemKind::Multicast
        | MemKind::PoolImport
        | MemKind::External
        | MemKind::ExternalBuffer
        | MemKind::ExternalArray => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_that_free_each_other_share_a_space() {
        assert_eq!(Space::of(MemKind::Device), Space::of(MemKind::Async));
        assert_eq!(Space::of(MemKind::Device), Space::of(MemKind::Managed));
        assert_ne!(Space::of(MemKind::Device), Space::of(MemKind::Host));
        for kind in MemKind::ALL {
            assert!(Space::ALL.contains(&Space::of(kind)));
        }
    }

    /// The table `Space::of` reads is the `match` it was made from, for every kind (listed
    /// in number order, every number once).
    #[test]
    fn the_table_of_spaces_is_the_declared_one() {
        for (i, kind) in MemKind::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, i);
            assert_eq!(Space::of(kind), Space::declared(kind), "{kind:?}");
        }
        assert_eq!(Space::of(MemKind::ExternalArray), Space::Array);
        assert_eq!(Space::of(MemKind::Multicast), Space::Physical);
    }

    #[test]
    fn only_owned_families_are_counted() {
        let owned: Vec<&str> = MemKind::ALL
            .into_iter()
            .filter(|k| is_owned_memory(*k))
            .map(MemKind::name)
            .collect();
        assert_eq!(owned, ["device", "managed", "host", "async", "vmm", "array", "graph"]);
    }
}
