//! A port into the primary role from inside the node: the RESP front end's calls go to the
//! primary role the way a stub's do (a connection number, calls in order, answers in order),
//! without a socket or a frame encoding between them. The front end gathers the calls of
//! every RESP connection it serves into one batch per pass, and the node thread hands back the
//! answers of a turn as one vector, then wakes the front end (which waits on its sockets,
//! not on the channel).

use super::*;

/// The primary role this port was opened on has stopped (deposed, or the node is shutting
/// down): the outcomes of its unanswered calls are unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the primary role stopped before it answered")]
pub struct RoleGone;

/// How one call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalOutcome {
    /// Committed or read: the procedure's reply.
    Committed(Vec<u8>),
    /// The procedure refused and wrote nothing: its message.
    RolledBack(String),
    /// The role did not run it, or cannot say it ran: not primary, a lease that ran out
    /// before the reply could leave, a refusal. The message says which.
    Unanswered { code: ErrorCode, message: String },
}

/// One call's answer: the seq [`LocalPort::push`] gave the call, and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalAnswer {
    pub seq: u64,
    pub outcome: LocalOutcome,
}

/// Where a connection's answers go.
pub enum ConnSink {
    /// A client over TCP: answers as frames, for its writer thread or the I/O loop.
    Frames(crate::native::FrameSink),
    /// A port inside the node: answers as they are, and `wake` once they are handed over.
    Local {
        answers: Sender<Vec<LocalAnswer>>,
        wake: Arc<dyn Fn() + Send + Sync>,
    },
}

impl std::fmt::Debug for ConnSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConnSink::Frames(_) => "ConnSink::Frames",
            ConnSink::Local { .. } => "ConnSink::Local",
        })
    }
}

/// A port into one primary role. Calls are numbered from 0 in the order they are
/// pushed; the role answers them in that order.
#[derive(Debug)]
pub struct LocalPort {
    conn: ConnId,
    inbound: InboundTx,
    answers: Receiver<Vec<LocalAnswer>>,
    /// Tells the roles apart: a node deposed and promoted again gets a new role.
    role: usize,
    /// The calls pushed since the last send.
    batch: CallBatch,
    /// The most calls a batch held: the next batch is made that large at once, rather than
    /// grown call by call (the primary's profile found a tenth of its allocations there).
    batch_len_max: usize,
    seq_next: u64,
    /// Calls sent and not yet answered.
    unanswered: Arc<AtomicU64>,
    /// The role's last committed LSN, published before the answers it covers are handed
    /// over.
    lsn_committed: Arc<AtomicU64>,
}

impl LocalPort {
    pub(super) fn open(
        conn: ConnId,
        context: &ClientContext,
        wake: Arc<dyn Fn() + Send + Sync>,
    ) -> LocalPort {
        let (answers_in, answers) = mpsc::channel();
        let unanswered = Arc::new(AtomicU64::new(0));
        // If the role has stopped, the sends below find the channel closed.
        let _ = context.inbound.send(Inbound::ConnOpened {
            conn,
            out: ConnSink::Local {
                answers: answers_in,
                wake,
            },
            unanswered: Arc::clone(&unanswered),
            answer_withheld: true,
        });
        LocalPort {
            conn,
            inbound: context.inbound.clone(),
            answers,
            role: Arc::as_ptr(&context.view) as usize,
            batch: CallBatch {
                conn,
                client_id: 0,
                calls: Vec::new(),
            },
            batch_len_max: 0,
            seq_next: 0,
            unanswered,
            lsn_committed: Arc::clone(&context.lsn_committed),
        }
    }

    /// The role's last committed LSN: a call answered through this port, or through any
    /// other of the role's connections, committed at or before it. A waiting blocking call
    /// is tried again once it passes the LSN read before its last try.
    pub fn lsn_committed(&self) -> u64 {
        self.lsn_committed.load(Ordering::Acquire)
    }

    /// Whether this port leads to the role `handle` runs.
    pub fn is_of(&self, handle: &PrimaryHandle) -> bool {
        self.role == Arc::as_ptr(&handle.context.view) as usize
    }

    /// Adds a call (procedure, arguments, read-only) to the next batch and returns its seq.
    pub fn push(&mut self, proc_id: u16, args: Vec<u8>, read_only: bool) -> u64 {
        let seq = self.seq_next;
        self.seq_next += 1;
        self.batch.calls.push(CallSlot {
            seq,
            proc_id,
            safety: None,
            args,
            read_only,
        });
        seq
    }

    /// Sends the calls pushed since the last send, as one batch.
    pub fn send(&mut self) -> Result<(), RoleGone> {
        if self.batch.calls.is_empty() {
            return Ok(());
        }
        self.batch_len_max = self.batch_len_max.max(self.batch.calls.len());
        let batch = CallBatch {
            conn: self.conn,
            client_id: 0,
            calls: Vec::with_capacity(self.batch_len_max),
        };
        let batch = std::mem::replace(&mut self.batch, batch);
        self.unanswered
            .fetch_add(batch.calls.len() as u64, Ordering::Relaxed);
        self.inbound
            .send(Inbound::Calls(batch))
            .map_err(|_| RoleGone)
    }

    /// Calls sent and not yet answered.
    pub fn unanswered(&self) -> u64 {
        self.unanswered.load(Ordering::Relaxed)
    }

    /// Appends the answers that arrived to `into`, without waiting. Fails once the role has
    /// stopped and every answer it sent has been taken.
    pub fn take(&mut self, into: &mut Vec<LocalAnswer>) -> Result<(), RoleGone> {
        loop {
            match self.answers.try_recv() {
                Ok(mut answers) => into.append(&mut answers),
                Err(mpsc::TryRecvError::Empty) => return Ok(()),
                Err(mpsc::TryRecvError::Disconnected) => return Err(RoleGone),
            }
        }
    }
}

impl Drop for LocalPort {
    fn drop(&mut self) {
        let _ = self.inbound.send(Inbound::ConnClosed { conn: self.conn });
    }
}
