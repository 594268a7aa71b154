//! Small helpers over blocking TCP: connection setup and frame reading.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use tandem_wire::{ErrorCode, Frame, FrameBuffer, FrameError};

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("connection closed by the peer")]
    Closed,
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    #[error("malformed frame: {0}")]
    Frame(#[from] FrameError),
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl ConnError {
    /// The code of the `Error` frame that tells the other side why its connection ends: the
    /// frame's own for a malformed one (an unsupported version says so), else `BadFrame`.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            ConnError::Frame(err) => err.code(),
            _ => ErrorCode::BadFrame,
        }
    }
}

/// Writes what `pending` holds from `written` on to a non-blocking `stream` until it takes no
/// more; what was written leaves `pending` once all of it went, or once a megabyte did.
pub(crate) fn write_pending(
    stream: &mut impl Write,
    pending: &mut Vec<u8>,
    written: &mut usize,
) -> io::Result<()> {
    while *written < pending.len() {
        match stream.write(&pending[*written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => *written += n,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    if *written == pending.len() {
        pending.clear();
        *written = 0;
    } else if *written >= 1 << 20 {
        pending.drain(..*written);
        *written = 0;
    }
    Ok(())
}

/// Sets the options every tandem connection uses: no Nagle delay (replies and acks are small
/// and latency-bound; batching is done by us, not by the kernel).
pub fn tune(stream: &TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)
}

/// Reads from `stream` into `buffer` once. Returns the bytes read; `Closed` at end of stream.
/// A read timeout surfaces as `Ok(0)` so callers can tick.
pub fn fill(stream: &mut TcpStream, buffer: &mut FrameBuffer) -> Result<usize, ConnError> {
    match stream.read(buffer.spare()) {
        Ok(0) => Err(ConnError::Closed),
        Ok(n) => {
            buffer.filled(n);
            Ok(n)
        }
        Err(err)
            if matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(0)
        }
        Err(err) => Err(ConnError::Io(err)),
    }
}

/// Reads until one whole frame is buffered and hands it to `with` (frames borrow the buffer).
pub fn read_one<T>(
    stream: &mut TcpStream,
    buffer: &mut FrameBuffer,
    timeout: Duration,
    with: impl FnOnce(Frame<'_>) -> Result<T, ConnError>,
) -> Result<T, ConnError> {
    stream.set_read_timeout(Some(timeout))?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(frame) = buffer.next_frame()? {
            return with(frame);
        }
        if std::time::Instant::now() >= deadline {
            return Err(ConnError::Protocol("timed out waiting for a frame".into()));
        }
        fill(stream, buffer)?;
    }
}

/// Writes `bytes` whole.
pub fn write_all(stream: &mut TcpStream, bytes: &[u8]) -> Result<(), ConnError> {
    stream.write_all(bytes)?;
    Ok(())
}
