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
#[path = "suite/crash.rs"]
mod crash;
#[path = "suite/frames.rs"]
mod frames;
#[path = "suite/kinds.rs"]
mod kinds;
#[path = "suite/mirrored.rs"]
mod mirrored;
#[path = "suite/mirroring.rs"]
mod mirroring;
#[path = "suite/output.rs"]
mod output;
#[path = "suite/planted.rs"]
mod planted;
#[path = "suite/planted_mirror.rs"]
mod planted_mirror;
#[path = "suite/property.rs"]
mod property;
#[path = "suite/refusals.rs"]
mod refusals;
