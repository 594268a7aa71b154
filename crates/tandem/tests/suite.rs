//! The crate's integration tests as one binary (one build, one link, one run); each
//! file beside this one is a module, named as the file.

mod cli;
mod common;
mod demo_redis;
mod discover;
mod failover;
mod local_cluster;
mod lossy;
mod proxy;
mod reads;
mod redis_acl;
mod redis_auth;
mod redis_clients;
mod redis_cluster;
mod redis_diff;
mod redis_rdb;
mod redis_role;
mod redis_select;
mod redis_support;
mod redis_tcl;
mod redis_tls;
mod replication;
mod up_support;
