//! A primary role's native client connections on the node's I/O loop: each parses calls for
//! the role (and answers `Members` itself); the role's answers come back as frames.

use super::*;
use crate::members::MemberList;
use crate::native::{FrameSink, Service};
use tandem_redis::session::ScriptActivity;

/// What every client connection of this primary needs to know.
#[derive(Clone, Debug)]
pub(super) struct ClientContext {
    pub(super) node_id: NodeId,
    pub(super) view: Arc<AtomicU64>,
    /// Numbers client connections (shared by every acceptor of this primary).
    pub(super) conn_next: Arc<AtomicU64>,
    /// The last committed LSN, for Welcome frames.
    pub(super) lsn_committed: Arc<AtomicU64>,
    pub(super) inbound: InboundTx,
    /// What a `Members` frame is answered with.
    pub(super) members: MemberList,
    /// The watch over the node's scripts, if its model runs any: a connection with no call
    /// of its own unanswered is answered `SCRIPT KILL` here, as on the RESP port (a proxy's
    /// clients reach the node this way).
    pub(super) scripts: Option<crate::scripts::Scripts>,
}

/// One client connection of this primary role.
pub(super) struct Client {
    pub(super) conn: ConnId,
    pub(super) context: ClientContext,
}

impl Client {
    /// The `Welcome` frame a client of this primary gets first.
    fn welcome(&self, out: &mut Vec<u8>) {
        encode_welcome(
            out,
            &Welcome {
                version: tandem_wire::PROTOCOL_VERSION,
                node_id: self.context.node_id,
                role: Role::Primary,
                view: self.context.view.load(Ordering::Acquire),
                lsn: self.context.lsn_committed.load(Ordering::Acquire),
            },
        );
    }

    /// Tells the role the connection opened: its answers go to `sink`.
    fn opened(&self, sink: FrameSink, unanswered: &Arc<AtomicU64>) -> Result<(), RoleGone> {
        self.context.inbound.send(Inbound::ConnOpened {
            conn: self.conn,
            out: ConnSink::Frames(sink),
            unanswered: Arc::clone(unanswered),
            answer_withheld: false,
        })
    }

    /// While a script runs, answers `SCRIPT KILL` itself into `answer`: it stops the script
    /// (`+OK`), which the node thread could not answer before the script ends. False if the call
    /// goes to the role as usual (anything else, or no script to stop: it then answers
    /// `NOTBUSY`). Unlike the RESP port, this port answers nothing else `-BUSY`: a stub
    /// resends a call it waited for too long, with the same seq, and a `-BUSY` to the resend
    /// would say the call did not run while its first sending may still commit.
    fn answers_while_a_script_runs(
        &self,
        call: &tandem_wire::Call<'_>,
        answer: &mut Vec<u8>,
    ) -> bool {
        let Some(scripts) = &self.context.scripts else {
            return false;
        };
        if scripts.activity() == ScriptActivity::Idle
            || !tandem_redis::session::is_script_kill_call(ProcId(call.proc_id), call.args)
            || !scripts.kill()
        {
            return false;
        }
        let lsn = self.context.lsn_committed.load(Ordering::Acquire);
        encode_reply(answer, call.seq, lsn, ReplyStatus::Committed, b"+OK\r\n");
        true
    }

    /// Hands the role the calls of `batch`, if it holds any.
    fn send_calls(&self, batch: CallBatch, unanswered: &AtomicU64) -> Result<(), RoleGone> {
        if batch.calls.is_empty() {
            return Ok(());
        }
        unanswered.fetch_add(batch.calls.len() as u64, Ordering::Relaxed);
        self.context.inbound.send(Inbound::Calls(batch))
    }

    /// Takes the whole frames `buffer` holds: calls and reads into the batch returned,
    /// `Members` and (while a script runs) `SCRIPT KILL` answered at once into `answers`
    /// (they may go ahead of replies to calls sent before them). `local`: the address the
    /// client reached this node at. A frame that breaks the protocol ends the taking; the
    /// calls before it are returned with the error.
    fn take_frames(
        &self,
        buffer: &mut FrameBuffer,
        client_id: u64,
        unanswered: &AtomicU64,
        local: Option<SocketAddr>,
        answers: &mut Vec<u8>,
    ) -> Result<CallBatch, (CallBatch, ConnError)> {
        let mut batch = CallBatch {
            conn: self.conn,
            client_id,
            calls: Vec::new(),
        };
        loop {
            let (seq, proc_id, safety, args, read_only) = match buffer.next_frame() {
                Ok(Some(Frame::Call(call)))
                    if batch.calls.is_empty()
                        && unanswered.load(Ordering::Relaxed) == 0
                        && self.answers_while_a_script_runs(&call, answers) =>
                {
                    continue;
                }
                Ok(Some(Frame::Call(call))) => {
                    (call.seq, call.proc_id, call.safety, call.args, false)
                }
                // A read-only call runs here like any call: the primary holds every commit,
                // so `min_lsn` is met.
                Ok(Some(Frame::Read(read))) => (read.seq, read.proc_id, None, read.args, true),
                Ok(Some(Frame::Members)) => {
                    let view = self.context.view.load(Ordering::Acquire);
                    self.context.members.answer(answers, view, local);
                    continue;
                }
                Ok(Some(_)) => {
                    let message = crate::native::ONLY_CALLS_AFTER_HELLO.into();
                    return Err((batch, ConnError::Protocol(message)));
                }
                Ok(None) => return Ok(batch),
                Err(err) => return Err((batch, ConnError::Frame(err))),
            };
            batch.calls.push(CallSlot {
                seq,
                proc_id,
                safety,
                args: args.to_vec(),
                read_only,
            });
        }
    }
}

/// A primary role's client connection on the node's I/O loop (`crate::native`).
pub(crate) struct PrimaryService {
    client: Client,
    client_id: u64,
    /// Calls sent and not yet answered (see `UNANSWERED_MAX`).
    unanswered: Arc<AtomicU64>,
}

impl PrimaryService {
    pub(super) fn new(client: Client, client_id: u64) -> PrimaryService {
        PrimaryService {
            client,
            client_id,
            unanswered: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Service for PrimaryService {
    fn open(&mut self, sink: FrameSink, out: &mut Vec<u8>) -> Result<(), ConnError> {
        self.client.welcome(out);
        self.client
            .opened(sink, &self.unanswered)
            .map_err(|_| ConnError::Closed)
    }

    fn take(
        &mut self,
        buffer: &mut FrameBuffer,
        local: Option<SocketAddr>,
        out: &mut Vec<u8>,
    ) -> Result<(), ConnError> {
        let unanswered = &self.unanswered;
        let taken = self
            .client
            .take_frames(buffer, self.client_id, unanswered, local, out);
        let (batch, broke) = match taken {
            Ok(batch) => (batch, None),
            Err((batch, err)) => (batch, Some(err)),
        };
        self.client
            .send_calls(batch, unanswered)
            .map_err(|_| ConnError::Closed)?;
        broke.map_or(Ok(()), Err)
    }

    fn mail(&mut self, frames: Option<Vec<u8>>, out: &mut Vec<u8>) -> Result<(), ConnError> {
        if let Some(frames) = frames {
            out.extend_from_slice(&frames);
        }
        Ok(())
    }

    /// A client that sends and never reads is not read either: its calls stop at TCP, so
    /// the role's queue and the reply buffers stay bounded.
    fn takes_more(&self) -> bool {
        self.unanswered.load(Ordering::Relaxed) <= UNANSWERED_MAX
    }

    fn closed(&mut self) {
        let closed = Inbound::ConnClosed {
            conn: self.client.conn,
        };
        let _ = self.client.context.inbound.send(closed);
    }
}
