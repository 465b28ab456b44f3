//! The gpuleak analyzer as a library: opening traces and turning them into output. The
//! `gpuleak` binary (`main.rs`) is a thin command line over it.
//!
//! ```no_run
//! let file = gpuleak_analyzer::TraceFile::open("app.1234.trace".as_ref()).unwrap();
//! let mut out = Vec::new();
//! let errors = gpuleak_analyzer::dump::write(&file, &mut out).unwrap();
//! assert!(errors.is_empty());
//! ```

pub mod allocation;
pub mod apis;
pub(crate) mod aside;
pub(crate) mod aside_hash;
pub mod captures;
pub mod check;
pub mod colour;
pub mod decision;
pub mod diff;
pub mod dump;
pub mod file;
pub mod frameworks;
pub mod hash;
pub(crate) mod json;
pub mod memory;
pub mod model;
pub mod modules;
pub mod owner;
pub mod replay;
pub mod report;
pub mod run;
pub mod site;
pub mod streams;
pub mod symbolize;

pub use file::TraceFile;
