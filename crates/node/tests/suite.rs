//! The crate's integration tests as one binary (one build, one link, one run); each
//! file beside this one is a module, named as the file.

mod backup;
mod common;
mod primary;
mod scenarios;
