//! The crate's integration tests as one binary (one build, one link, one run); each file in
//! `tests/suite/` is a module, named as the file.

#[path = "suite/chain.rs"]
mod chain;
#[path = "suite/common.rs"]
mod common;
#[path = "suite/concurrent.rs"]
mod concurrent;
#[path = "suite/contents.rs"]
mod contents;
#[path = "suite/kinds.rs"]
mod kinds;
#[path = "suite/planted.rs"]
mod planted;
#[path = "suite/property.rs"]
mod property;
