//! The crate's integration tests as one binary (one build, one link, one run); each
//! file beside this one is a module, named as the file.

mod alloc_props;
mod blocking;
mod commands;
mod common;
mod config;
mod dump_redis;
mod evict;
mod functions;
mod geo;
mod hashes;
mod hashsets_redis;
mod hll;
mod lists;
mod notify;
mod random_draws;
mod rdb_file;
mod resp_props;
mod scripts;
mod sets;
mod sort;
mod streams;
mod strings_bits;
mod transactions;
mod zsets;
mod zsets_algebra;
