//! Why a node could not start.
//!
//! Each message names the configuration field or the resource that failed, because it is
//! what an operator reads on stderr (`tandem node` prints it after `error: `) and what the
//! command-line tests look for; the underlying error stays attached as the source.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use tandem_memory::{PassiveError, SegmentError};

/// A setup failure of [`crate::start_node`] (and so of [`crate::run_node`]).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listener could not be bound; `field` is `listen` or `metrics_listen`.
    #[error("{field}: cannot bind {address}: {source}")]
    Bind {
        field: &'static str,
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The config store's directory could not be created.
    #[error("cluster.data_dir: cannot create {path}: {source}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The config store's files in `cluster.data_dir` could not be opened or read.
    #[error("cluster.data_dir: {0}")]
    ConfigStoreDisk(#[source] io::Error),
    /// The config store refused the initial map or the state it persisted.
    #[error("config store: {0}")]
    ConfigStore(#[source] tandem_config::ConfigError),
    /// A certificate or key of the `[tls]` table could not be read or used; `field` names it.
    #[error("tls.{field}: {reason}")]
    Tls { field: &'static str, reason: String },
    /// The write-ahead log could not be opened, or failed when a role started on it.
    #[error("log: {0}")]
    Log(String),
    /// The group's segment could not be mapped at `group.db_mib`.
    #[error("group.db_mib: {0}")]
    Segment(#[source] SegmentError),
    /// The passive mode's trace or mirror could not be set up for `group.mode`.
    #[error("group.mode: {0}")]
    Passive(#[source] PassiveError),
    /// An in-process load was asked of a data model that has none.
    #[error("the data model '{model}' has no in-process load; drive it over the network")]
    NoLocalLoad { model: String },
    /// The system refused a thread; `thread` says which, article included ("the node",
    /// "the beat").
    #[error("cannot start {thread}: {source}")]
    Thread {
        thread: &'static str,
        #[source]
        source: io::Error,
    },
    /// The RESP port's event loop (`resp_listen`) could not be set up.
    #[error("resp_listen: cannot set up the event loop: {0}")]
    RespPort(#[source] io::Error),
    /// The node's thread ended, which it does only by a bug it reported.
    #[error("the node's thread ended")]
    NodeThreadEnded,
    /// The signal handlers or the watch on standard input could not be set up.
    #[error("cannot watch for a stop: {0}")]
    Stops(#[source] io::Error),
    /// The native port's gate (`listen`) could not be set up.
    #[error("listen: cannot set up the native port's event loop: {0}")]
    NativePort(#[source] io::Error),
    /// The thread that loaded a spare segment panicked (its message was printed then).
    #[error("the segment's loader panicked")]
    LoaderPanicked,
}

#[cfg(test)]
mod tests {
    use super::*;

    // The messages are user-facing (printed after `error: ` and grepped by the command-line
    // tests), so they must read exactly as the strings they replaced.
    #[test]
    fn messages_name_the_field_or_resource() {
        let refused = || io::Error::new(io::ErrorKind::AddrInUse, "in use");
        let bind = StartError::Bind {
            field: "metrics_listen",
            address: SocketAddr::from(([127, 0, 0, 1], 9000)),
            source: refused(),
        };
        assert_eq!(
            bind.to_string(),
            "metrics_listen: cannot bind 127.0.0.1:9000: in use"
        );
        let data_dir = StartError::DataDir {
            path: PathBuf::from("/var/tandem/1"),
            source: refused(),
        };
        assert_eq!(
            data_dir.to_string(),
            "cluster.data_dir: cannot create /var/tandem/1: in use"
        );
        assert_eq!(
            StartError::ConfigStoreDisk(refused()).to_string(),
            "cluster.data_dir: in use"
        );
        let thread = StartError::Thread {
            thread: "the accept thread",
            source: refused(),
        };
        assert_eq!(thread.to_string(), "cannot start the accept thread: in use");
        assert_eq!(
            StartError::LoaderPanicked.to_string(),
            "the segment's loader panicked"
        );
    }
}
