//! A client inside the node: a RESP connection's calls go to the primary role's executor the
//! way a stub's do (a connection number, calls in order, answers in order), without a socket
//! between them.

use super::*;

/// The primary role this client was opened on has stopped (deposed, or the node is shutting
/// down): its calls' outcomes are unknown.
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

/// One connection's way to a primary role's executor.
#[derive(Debug)]
pub struct LocalClient {
    conn: ConnId,
    inbound: Sender<Inbound>,
    replies: Receiver<Vec<u8>>,
    unanswered: Arc<AtomicU64>,
    /// Tells the roles apart: a node deposed and promoted again gets a new role.
    role: usize,
    max_frame_len: usize,
    pending: Vec<u8>,
    metrics: Arc<Metrics>,
}

impl LocalClient {
    pub(super) fn open(conn: ConnId, context: &ClientContext) -> LocalClient {
        let (out, replies) = mpsc::channel();
        let unanswered = Arc::new(AtomicU64::new(0));
        // If the role has stopped, the calls below find the channel closed.
        let _ = context.inbound.send(Inbound::ConnOpened {
            conn,
            out,
            unanswered: Arc::clone(&unanswered),
            answer_withheld: true,
        });
        context.metrics.client_connections.inc();
        LocalClient {
            conn,
            inbound: context.inbound.clone(),
            replies,
            unanswered,
            role: Arc::as_ptr(&context.view) as usize,
            max_frame_len: context.max_frame_len,
            pending: Vec::new(),
            metrics: Arc::clone(&context.metrics),
        }
    }

    /// Whether this client talks to the role `handle` runs.
    pub fn is_of(&self, handle: &PrimaryHandle) -> bool {
        self.role == Arc::as_ptr(&handle.context.view) as usize
    }

    /// Runs `calls` (procedure, arguments, read-only) in order, as one batch, and appends
    /// their outcomes to `outcomes` in the same order.
    pub fn run(
        &mut self,
        calls: &[(u16, &[u8], bool)],
        outcomes: &mut Vec<LocalOutcome>,
    ) -> Result<(), RoleGone> {
        if calls.is_empty() {
            return Ok(());
        }
        let mut batch = CallBatch {
            conn: self.conn,
            client_id: 0,
            bytes: Vec::new(),
            calls: Vec::with_capacity(calls.len()),
        };
        for (seq, &(proc_id, args, read_only)) in calls.iter().enumerate() {
            let start = batch.bytes.len();
            batch.bytes.extend_from_slice(args);
            batch.calls.push(CallSlot {
                seq: seq as u64,
                proc_id,
                safety: None,
                args: start..batch.bytes.len(),
                read_only,
            });
        }
        self.unanswered
            .fetch_add(calls.len() as u64, Ordering::Relaxed);
        self.inbound
            .send(Inbound::Calls(batch))
            .map_err(|_| RoleGone)?;
        let wanted = outcomes.len() + calls.len();
        while outcomes.len() < wanted {
            self.decode_pending(outcomes, wanted)?;
            if outcomes.len() == wanted {
                break;
            }
            let bytes = self.replies.recv().map_err(|_| RoleGone)?;
            self.pending.extend_from_slice(&bytes);
        }
        Ok(())
    }

    fn decode_pending(
        &mut self,
        outcomes: &mut Vec<LocalOutcome>,
        wanted: usize,
    ) -> Result<(), RoleGone> {
        let mut at = 0;
        while outcomes.len() < wanted {
            let decoded = tandem_wire::decode_frame(&self.pending[at..], self.max_frame_len);
            let Ok(Some((frame, len))) = decoded else {
                // The executor writes only whole, valid frames: a bad one means it is gone.
                if decoded.is_err() {
                    return Err(RoleGone);
                }
                break;
            };
            let outcome = match frame {
                Frame::Reply(reply) => match reply.status {
                    ReplyStatus::Committed => LocalOutcome::Committed(reply.body.to_vec()),
                    ReplyStatus::RolledBack => {
                        LocalOutcome::RolledBack(String::from_utf8_lossy(reply.body).into_owned())
                    }
                },
                Frame::Error(error) => LocalOutcome::Unanswered {
                    code: error.code,
                    message: error.message,
                },
                _ => return Err(RoleGone),
            };
            outcomes.push(outcome);
            at += len;
        }
        self.pending.drain(..at);
        Ok(())
    }
}

impl Drop for LocalClient {
    fn drop(&mut self) {
        let _ = self.inbound.send(Inbound::ConnClosed { conn: self.conn });
        self.metrics.client_connections.dec();
    }
}
