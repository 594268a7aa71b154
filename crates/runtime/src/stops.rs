//! What stops a node process: SIGTERM or SIGINT (Ctrl-C, `tandem down`, a service manager)
//! and, if asked, the end of its standard input (`tandem up` ties its nodes' lives to its
//! own that way). The node's I/O loop watches them among its sockets, so no thread waits for
//! them; a stop drains the log first ([`crate::stop_node`]).

use std::io::{self, Read};
use std::os::fd::AsRawFd;

use mio::net::UnixStream;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

/// What stops the node, beyond being killed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StopWhen {
    /// SIGTERM and SIGINT stop it (a node process; not a test that runs the loop in its own
    /// process).
    pub signals: bool,
    /// The end of its standard input stops it (`--exit-on-stdin-eof`).
    pub stdin_closes: bool,
}

/// The stops a loop watches, registered with its poll.
#[derive(Debug, Default)]
pub(crate) struct Stops {
    /// The read end of the pipe the signal handlers write a byte to.
    signals: Option<UnixStream>,
    stdin: bool,
}

impl Stops {
    /// Installs the signal handlers `when` asks for and registers their pipe under
    /// `signals_token`, and standard input under `stdin_token`.
    pub(crate) fn register(
        when: StopWhen,
        registry: &Registry,
        signals_token: Token,
        stdin_token: Token,
    ) -> io::Result<Stops> {
        let mut stops = Stops::default();
        if when.signals {
            let (read_end, write_end) = std::os::unix::net::UnixStream::pair()?;
            read_end.set_nonblocking(true)?;
            for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
                signal_hook::low_level::pipe::register(signal, write_end.try_clone()?)?;
            }
            let mut read_end = UnixStream::from_std(read_end);
            registry.register(&mut read_end, signals_token, Interest::READABLE)?;
            stops.signals = Some(read_end);
        }
        if when.stdin_closes {
            let fd = io::stdin().as_raw_fd();
            registry
                .register(&mut SourceFd(&fd), stdin_token, Interest::READABLE)
                .map_err(|err| {
                    io::Error::new(
                        err.kind(),
                        format!(
                            "cannot watch standard input for --exit-on-stdin-eof ({err}); it \
                             must be a pipe"
                        ),
                    )
                })?;
            stops.stdin = true;
        }
        Ok(stops)
    }

    /// Whether the node is a process of its own, which a stop ends: only such a node
    /// watches the signals.
    pub(crate) fn ends_process(&self) -> bool {
        self.signals.is_some()
    }

    /// Whether a signal came (its bytes are taken).
    pub(crate) fn signalled(&mut self) -> bool {
        let Some(pipe) = &mut self.signals else {
            return false;
        };
        let mut came = false;
        let mut bytes = [0u8; 16];
        loop {
            match pipe.read(&mut bytes) {
                Ok(0) => return came,
                Ok(_) => came = true,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return came,
            }
        }
    }

    /// Whether standard input ended. It was readable: one read does not block, and gives 0
    /// bytes at its end (whatever else comes is dropped).
    pub(crate) fn stdin_ended(&mut self) -> bool {
        if !self.stdin {
            return false;
        }
        let mut bytes = [0u8; 512];
        loop {
            match io::stdin().read(&mut bytes) {
                Ok(0) => return true,
                Ok(_) => return false,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
    }
}
