//! What a descriptor leads to, for the checks that keep the shim off descriptors a program took
//! back (the trace's, the metrics server's sockets).

/// The file a descriptor leads to: device, inode and type (`st_mode & S_IFMT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// File type bits.
    pub kind: u32,
}

impl FileId {
    /// What `fd` leads to, if it is open (`fstat` only: async-signal-safe).
    pub fn of(fd: libc::c_int) -> Option<FileId> {
        let st = crate::sys::fstat(fd)?;
        Some(FileId {
            dev: st.st_dev,
            ino: st.st_ino,
            kind: st.st_mode & libc::S_IFMT,
        })
    }

    /// Whether this is a socket.
    pub fn is_socket(&self) -> bool {
        self.kind == libc::S_IFSOCK
    }
}
