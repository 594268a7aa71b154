//! The crate's integration tests as one binary (one build, one link, one run); each
//! file beside this one is a module, named as the file.

mod common;
mod connections;
mod examples;
mod passive;
mod peer_auth;
mod peer_tls;
mod resp_port;
