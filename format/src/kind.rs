//! The families of memory an allocation record describes ([`MemKind`]): below the entry points'
//! meanings ([`crate::api`]) and the record fields ([`crate::fields`]), which both name them.

/// What family of memory an allocation record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MemKind {
    /// Device memory (`cuMemAlloc`, `cuMemAllocPitch`).
    Device = 0,
    /// Managed (unified) memory.
    Managed = 1,
    /// Page-locked host memory allocated by the driver.
    Host = 2,
    /// Host memory the program registered (page-locked in place; not allocated by CUDA).
    HostRegistered = 3,
    /// Stream-ordered memory from a pool.
    Async = 4,
    /// A virtual address range reservation (no memory by itself).
    VmmReserve = 5,
    /// A physical memory handle (`cuMemCreate`); `ptr` holds the handle.
    VmmPhysical = 6,
    /// A CUDA array; `ptr` holds the handle, `size` the bytes it needs.
    Array = 7,
    /// Memory of another process opened through IPC (not owned by this process).
    Ipc = 8,
    /// A physical memory handle imported from a shareable handle
    /// (`cuMemImportFromShareableHandle`): a reference to memory another process (or this
    /// one) created; `ptr` holds the handle. Released by `cuMemRelease`.
    VmmImport = 9,
    /// A multicast object (`cuMulticastCreate`); `ptr` holds its handle, `size` the most
    /// memory each device may bind to it. Released by `cuMemRelease`; the memory bound to it
    /// is the devices' own `cuMemCreate` memory.
    Multicast = 10,
    /// A pointer imported from another process's stream-ordered memory pool
    /// (`cuMemPoolImportPointer`): that process's memory, mapped here until this process frees
    /// the pointer with `cuMemFree` or `cuMemFreeAsync`.
    PoolImport = 11,
    /// Graph memory: what an allocation node of a CUDA graph allocates at each launch of the
    /// graph, at the fixed address the node was given; freed by a free node of a graph,
    /// `cuMemFreeAsync` or `cuMemFree`, or by the next launch of a graph instantiated with
    /// `CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH`. Destroying the graph frees nothing.
    Graph = 12,
    /// An external memory object (`cuImportExternalMemory`: memory of Vulkan, D3D or another
    /// process, through a shareable handle); `ptr` holds its handle, `size` the object's
    /// size. Destroyed by `cuDestroyExternalMemory`; not this process's memory.
    External = 13,
    /// A buffer mapped onto an external memory object (`cuExternalMemoryGetMappedBuffer`):
    /// the object's memory at a device address, until the program frees it with `cuMemFree`.
    ExternalBuffer = 14,
    /// A mipmapped array mapped onto an external memory object
    /// (`cuExternalMemoryGetMappedMipmappedArray`); `ptr` holds its handle. Freed by
    /// `cuMipmappedArrayDestroy`.
    ExternalArray = 15,
}

impl MemKind {
    /// Every kind, in number order.
    pub const ALL: [MemKind; 16] = [
        MemKind::Device,
        MemKind::Managed,
        MemKind::Host,
        MemKind::HostRegistered,
        MemKind::Async,
        MemKind::VmmReserve,
        MemKind::VmmPhysical,
        MemKind::Array,
        MemKind::Ipc,
        MemKind::VmmImport,
        MemKind::Multicast,
        MemKind::PoolImport,
        MemKind::Graph,
        MemKind::External,
        MemKind::ExternalBuffer,
        MemKind::ExternalArray,
    ];

    /// Short lowercase name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            MemKind::Device => "device",
            MemKind::Managed => "managed",
            MemKind::Host => "host",
            MemKind::HostRegistered => "host-registered",
            MemKind::Async => "async",
            MemKind::VmmReserve => "vmm-reserve",
            MemKind::VmmPhysical => "vmm",
            MemKind::Array => "array",
            MemKind::Ipc => "ipc",
            MemKind::VmmImport => "vmm-import",
            MemKind::Multicast => "multicast",
            MemKind::PoolImport => "pool-import",
            MemKind::Graph => "graph",
            MemKind::External => "external",
            MemKind::ExternalBuffer => "external-buffer",
            MemKind::ExternalArray => "external-array",
        }
    }
}
