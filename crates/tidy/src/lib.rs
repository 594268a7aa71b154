//! Checks of the source tree itself, run as this crate's tests (`tests/tidy.rs`): they read
//! the workspace's sources and hold them to rules a reviewer would otherwise have to count.
//! The crate has no code of its own.
