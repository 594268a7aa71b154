//! A backup role as its connections see it. The role itself (receiver, applier, reads) runs
//! on the node's thread (`cluster/node_loop.rs`); this module holds what the node's I/O loop
//! and RESP front end reach it by.
//!
//! **Reads** (DESIGN.md, "Versioned reads"). A client may send a backup `Read` frames: a
//! read-only procedure, `min_lsn` and a consistency. [`BackupService`] hands each to the
//! node's thread, whose `BackupReads` (in `tandem-node`) says when it may run: once its
//! `min_lsn` is final and applied, and while everything applied is at or below the LSN the
//! primary last said it released; a linearizable read first asks the primary a `ReadIndex`
//! question. A read not served within [`READ_WAIT`] is answered `Busy`, and the stub asks the
//! primary. The RESP front end's reads (a Redis client's `GET` on a backup) go the same way,
//! as linearizable reads, through a [`BackupPort`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tandem_config::GroupId;
use tandem_node::{GateRule, Needs, READ_WAIT, ReadAnswer, WaitingRead};
use tandem_replication::NodeId;
use tandem_wire::{
    ErrorCode, Frame, FrameBuffer, ReplyStatus, Role, Welcome, encode_error, encode_reply,
    encode_welcome,
};

use crate::cluster::{NodeTx, ToNode};
use crate::config::NodeConfig;
use crate::members::MemberList;
use crate::native::{FrameReply, FrameSink, Service};
use crate::net::ConnError;
use crate::{Checksum, Control, NodeStatus};

/// A read waiting for the backup role, and where its answer goes.
pub(crate) type ReadRequest = WaitingRead<ReadTo, Instant>;

/// Where a read's answer goes.
#[derive(Debug)]
pub(crate) enum ReadTo {
    /// A native client: the answer encoded, a `Reply` or an `Error` frame.
    Frame(FrameReply),
    /// The RESP front end, through a [`BackupPort`]: the answer as the node core gave it.
    Local(LocalRead),
}

/// The answers of the reads a [`BackupPort`] handed the role, until the front end takes
/// them; `None` for a read the role dropped unanswered (it ended).
struct LocalAnswers {
    answers: Mutex<Vec<(u64, Option<ReadAnswer>)>>,
    /// Whether the front end was woken since it last took the answers: one wake-up serves
    /// every answer that arrives before it looks.
    woken: AtomicBool,
    wake: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for LocalAnswers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalAnswers")
    }
}

impl LocalAnswers {
    fn put(&self, seq: u64, answer: Option<ReadAnswer>) {
        self.answers
            .lock()
            .expect("not poisoned")
            .push((seq, answer));
        if !self.woken.swap(true, Ordering::AcqRel) {
            (self.wake)();
        }
    }
}

/// One read of a [`BackupPort`]: answered exactly once, by the role or, if it is dropped
/// unanswered, as `None`, so the front end never waits for an answer that cannot come.
#[derive(Debug)]
pub(crate) struct LocalRead {
    seq: u64,
    to: Arc<LocalAnswers>,
    answered: bool,
}

impl LocalRead {
    pub(crate) fn answer(mut self, answer: ReadAnswer) {
        self.answered = true;
        self.to.put(self.seq, Some(answer));
    }
}

impl Drop for LocalRead {
    fn drop(&mut self) {
        if !self.answered {
            self.to.put(self.seq, None);
        }
    }
}

/// A port into one backup role from inside the node: the RESP front end's reads go to the
/// role as linearizable reads, the way a stub's `Read` frames do, without a socket or a
/// frame between them. Reads are numbered from 0 in the order they are pushed; the role
/// answers them in any order, each within [`READ_WAIT`] (or, if it ends first, as dropped),
/// and wakes the front end.
#[derive(Debug)]
pub struct BackupPort {
    to_node: NodeTx,
    /// The group of the role.
    group: GroupId,
    answers: Arc<LocalAnswers>,
    /// Tells the roles apart: a node may hold a new backup role after a restart or a depose.
    role: usize,
    /// What the role applied last (`ROLE` and `INFO replication` show it).
    lsn_applied: Arc<AtomicU64>,
    seq_next: u64,
}

impl BackupPort {
    /// Whether this port leads to the role `handle` runs.
    pub fn is_of(&self, handle: &BackupHandle) -> bool {
        self.role == Arc::as_ptr(&handle.context.lsn_applied) as usize
    }

    /// The LSN the role applied last.
    pub fn lsn_applied(&self) -> u64 {
        self.lsn_applied.load(Ordering::Acquire)
    }

    /// Hands the role a linearizable read of read-only procedure `proc_id` and returns its
    /// seq. Never blocks: if the node's thread has stopped, the read is answered `None` at
    /// once.
    pub fn push(&mut self, proc_id: u16, args: Vec<u8>) -> u64 {
        let seq = self.seq_next;
        self.seq_next += 1;
        let now = Instant::now();
        let request = ReadRequest {
            seq,
            proc_id,
            // A RESP connection has no session LSN: the primary's answer to the read's
            // question is all it needs.
            min_lsn: 0,
            args,
            deadline: now + READ_WAIT,
            to: ReadTo::Local(LocalRead {
                seq,
                to: Arc::clone(&self.answers),
                answered: false,
            }),
            needs: Needs::ReadIndex,
        };
        // A stopped node hands the read back, and dropping it answers it.
        let group = self.group;
        let _ = self.to_node.send(ToNode::Read {
            group,
            read: request,
        });
        seq
    }

    /// Appends the answers that arrived to `into`, without waiting: the seq of each read and
    /// its answer, `None` for one the role dropped unanswered.
    pub fn take(&self, into: &mut Vec<(u64, Option<ReadAnswer>)>) {
        self.answers.woken.store(false, Ordering::Release);
        into.append(&mut self.answers.answers.lock().expect("not poisoned"));
    }
}

/// Who the backup role follows, and whether it still does, as the node's thread last
/// published it (the node core's [`GateRule`]) for the threads that cannot ask the role: the
/// acceptor and the front end.
#[derive(Debug)]
pub struct Gate {
    state: Mutex<GateRule>,
    /// The view, readable without the lock.
    view: AtomicU64,
}

impl Gate {
    pub fn new(view: u64, primary: NodeId) -> Gate {
        Gate {
            state: Mutex::new(GateRule::new(view, primary)),
            view: AtomicU64::new(view),
        }
    }

    pub fn view(&self) -> u64 {
        self.view.load(Ordering::Acquire)
    }

    /// Whether the backup stopped accepting its primary for a view change.
    pub fn is_frozen(&self) -> bool {
        self.state.lock().expect("not poisoned").is_frozen()
    }

    /// The primary this backup follows.
    pub fn primary(&self) -> NodeId {
        self.state.lock().expect("not poisoned").primary()
    }

    /// The role stopped accepting the primary, for the rest of the view.
    pub fn freeze(&self) {
        self.state.lock().expect("not poisoned").freeze();
    }

    /// A new view with the same primary (members joined or left).
    pub fn set_view(&self, view: u64, primary: NodeId) {
        let mut state = self.state.lock().expect("not poisoned");
        state.set_view(view, primary);
        self.view.store(view, Ordering::Release);
    }
}

/// What a backup role's connections share: who the node is, whom the role follows, and
/// what it applied (a reader's Welcome says both).
#[derive(Clone, Debug)]
struct BackupContext {
    node_id: NodeId,
    /// The group of the role.
    group: GroupId,
    gate: Arc<Gate>,
    lsn_applied: Arc<AtomicU64>,
    /// When the role started: a bounded read's window never reaches further back.
    started: Instant,
    /// What a client's `Members` frame is answered with.
    members: MemberList,
}

/// A backup role as the node's acceptor and RESP front end see it.
#[derive(Debug)]
pub struct BackupHandle {
    control: Sender<(GroupId, Control)>,
    to_node: NodeTx,
    context: BackupContext,
}

/// Asks a backup role for its status and checksum; outlives the role harmlessly.
#[derive(Clone, Debug)]
pub struct BackupProbe {
    control: Sender<(GroupId, Control)>,
    group: GroupId,
}

impl BackupProbe {
    pub fn status(&self) -> Option<NodeStatus> {
        crate::ask(Duration::from_secs(5), |reply| {
            self.control.send((self.group, Control::Status(reply)))
        })
    }

    pub fn checksum(&self) -> Option<Checksum> {
        crate::ask(Duration::from_secs(30), |reply| {
            self.control.send((self.group, Control::Checksum(reply)))
        })
    }
}

impl BackupHandle {
    /// A port for reads from inside the node (the RESP front end); `wake` is called once
    /// answers wait to be taken.
    pub fn local_port(&self, wake: Arc<dyn Fn() + Send + Sync>) -> BackupPort {
        BackupPort {
            to_node: self.to_node.clone(),
            group: self.context.group,
            answers: Arc::new(LocalAnswers {
                answers: Mutex::new(Vec::new()),
                woken: AtomicBool::new(false),
                wake,
            }),
            role: Arc::as_ptr(&self.context.lsn_applied) as usize,
            lsn_applied: Arc::clone(&self.context.lsn_applied),
            seq_next: 0,
        }
    }

    /// What serves a client's connection on the node's I/O loop, apart from the role (so
    /// the caller need not hold it).
    pub(crate) fn native_service(&self) -> Box<dyn Service> {
        Box::new(BackupService {
            context: self.context.clone(),
            to_node: self.to_node.clone(),
            sink: None,
            waiting: false,
        })
    }

    pub fn gate(&self) -> &Gate {
        &self.context.gate
    }

    /// A handle that asks for status and checksum without holding the role.
    pub fn probe(&self) -> BackupProbe {
        BackupProbe {
            control: self.control.clone(),
            group: self.context.group,
        }
    }

    pub fn status(&self) -> Option<NodeStatus> {
        self.probe().status()
    }

    pub fn checksum(&self) -> Option<Checksum> {
        self.probe().checksum()
    }
}

/// What a backup role shares with the node's acceptor and RESP front end: its reads go to
/// the node's thread, which keeps `gate` and `lsn_applied` in step with the role it holds
/// (they tell the roles apart and fill a reader's Welcome).
pub(crate) struct NodeBackup {
    pub(crate) handle: BackupHandle,
    pub(crate) gate: Arc<Gate>,
    pub(crate) lsn_applied: Arc<AtomicU64>,
}

impl BackupHandle {
    /// The handle of a backup role of `group` following `gate`'s primary, applied up to
    /// `lsn_applied`; `control` reaches the node's thread for status and checksum.
    pub(crate) fn on_node(
        config: &NodeConfig,
        group: GroupId,
        to_node: NodeTx,
        control: Sender<(GroupId, Control)>,
        gate: Gate,
        lsn_applied: u64,
    ) -> NodeBackup {
        let gate = Arc::new(gate);
        let lsn_applied = Arc::new(AtomicU64::new(lsn_applied));
        let context = BackupContext {
            node_id: config.node_id,
            group,
            gate: Arc::clone(&gate),
            lsn_applied: Arc::clone(&lsn_applied),
            started: Instant::now(),
            members: MemberList::of(config),
        };
        let handle = BackupHandle {
            control,
            to_node,
            context,
        };
        NodeBackup {
            handle,
            gate,
            lsn_applied,
        }
    }
}

/// A backup role's client connection on the node's I/O loop (`crate::native`): it is
/// welcomed as a backup, its reads are served one at a time (the next frame is taken once
/// the last read is answered, so replies keep the order of the frames), `Call` frames get
/// `NotPrimary` and `Members` frames are answered at once. It outlives the role harmlessly:
/// a read the role drops unanswered closes the connection.
pub(crate) struct BackupService {
    context: BackupContext,
    to_node: NodeTx,
    /// Where the answers go, once the connection opened.
    sink: Option<FrameSink>,
    /// A read was handed over and is not answered yet.
    waiting: bool,
}

impl Service for BackupService {
    fn open(&mut self, sink: FrameSink, out: &mut Vec<u8>) -> Result<(), ConnError> {
        encode_welcome(
            out,
            &Welcome {
                version: tandem_wire::PROTOCOL_VERSION,
                node_id: self.context.node_id,
                role: Role::Backup,
                view: self.context.gate.view(),
                lsn: self.context.lsn_applied.load(Ordering::Acquire),
            },
        );
        self.sink = Some(sink);
        Ok(())
    }

    fn take(
        &mut self,
        buffer: &mut FrameBuffer,
        local: Option<SocketAddr>,
        out: &mut Vec<u8>,
    ) -> Result<(), ConnError> {
        let state = &self.context;
        while !self.waiting
            && let Some(frame) = buffer.next_frame().map_err(ConnError::Frame)?
        {
            match frame {
                Frame::Read(read) => {
                    let now = Instant::now();
                    let needs = Needs::of(read.consistency, |staleness_ms| {
                        let staleness = Duration::from_millis(u64::from(staleness_ms));
                        now.checked_sub(staleness)
                            .map_or(state.started, |from| from.max(state.started))
                    });
                    let sink = self
                        .sink
                        .clone()
                        .expect("a connection opens before it reads");
                    let request = ReadRequest {
                        seq: read.seq,
                        proc_id: read.proc_id,
                        min_lsn: read.min_lsn,
                        args: read.args.to_vec(),
                        deadline: now + READ_WAIT,
                        to: ReadTo::Frame(FrameReply::new(sink)),
                        needs,
                    };
                    // The role answers every read by its deadline, or drops it (a role
                    // change), which closes the connection.
                    let group = self.context.group;
                    let sent = self.to_node.send(ToNode::Read {
                        group,
                        read: request,
                    });
                    if sent.is_err() {
                        return Err(ConnError::Closed);
                    }
                    self.waiting = true;
                }
                Frame::Call(_) => {
                    let message = format!(
                        "node {} is a backup: it serves reads only; send calls to the primary",
                        state.node_id
                    );
                    encode_error(out, ErrorCode::NotPrimary, &message);
                }
                Frame::Members => state.members.answer(out, state.gate.view(), local),
                _ => {
                    return Err(ConnError::Protocol(
                        crate::native::ONLY_CALLS_AFTER_HELLO.into(),
                    ));
                }
            }
        }
        Ok(())
    }

    fn mail(&mut self, frames: Option<Vec<u8>>, out: &mut Vec<u8>) -> Result<(), ConnError> {
        self.waiting = false;
        let frame = frames.ok_or(ConnError::Closed)?;
        out.extend_from_slice(&frame);
        Ok(())
    }

    fn takes_more(&self) -> bool {
        !self.waiting
    }

    fn closed(&mut self) {}
}

/// A read's answer as the frame a stub gets.
pub(crate) fn answer_frame(node_id: NodeId, seq: u64, answer: ReadAnswer) -> Vec<u8> {
    let mut frame = Vec::new();
    match answer {
        ReadAnswer::Served { lsn, body } => {
            encode_reply(&mut frame, seq, lsn, ReplyStatus::Committed, &body);
        }
        ReadAnswer::RolledBack { lsn, reason } => {
            let status = ReplyStatus::RolledBack;
            encode_reply(&mut frame, seq, lsn, status, reason.as_bytes());
        }
        ReadAnswer::Writes { proc_id } => {
            let message = format!(
                "procedure {proc_id} writes: send it to the primary, not to backup {node_id}"
            );
            encode_error(&mut frame, ErrorCode::NotPrimary, &message);
        }
        ReadAnswer::Unknown { proc_id } => {
            let message = format!("no procedure has id {proc_id}");
            encode_error(&mut frame, ErrorCode::UnknownProcedure, &message);
        }
        ReadAnswer::Busy {
            lsn_applied,
            lsn_released,
            min_lsn,
        } => {
            let needs = match min_lsn {
                Some(lsn) => format!("the read needs LSN {lsn}"),
                None => "the primary did not say what the read needs in time".into(),
            };
            let message = format!(
                "node {node_id} has applied LSN {lsn_applied} and may show up to LSN \
                 {lsn_released}; {needs}: ask the primary"
            );
            encode_error(&mut frame, ErrorCode::Busy, &message);
        }
    }
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RESP front end's reads: each is answered exactly once, the front end is woken once
    /// until it takes the answers, and a read the role dropped unanswered (it ended) or one
    /// pushed after the node's thread stopped is answered as lost, never left waiting.
    #[test]
    fn a_local_read_is_answered_once_and_one_never_served_as_lost() {
        let woken = Arc::new(AtomicU64::new(0));
        let wake = {
            let woken = Arc::clone(&woken);
            Arc::new(move || {
                woken.fetch_add(1, Ordering::Relaxed);
            })
        };
        let (to_node, inbox, _poll) = NodeTx::with_poll().expect("a poll");
        let mut port = BackupPort {
            to_node,
            group: 0,
            answers: Arc::new(LocalAnswers {
                answers: Mutex::new(Vec::new()),
                woken: AtomicBool::new(false),
                wake,
            }),
            role: 0,
            lsn_applied: Arc::default(),
            seq_next: 0,
        };
        let first = port.push(7, vec![1]);
        let dropped = port.push(7, vec![2]);
        let Some(ToNode::Read { group: 0, read }) = inbox.try_recv() else {
            panic!("the first read reached the node's thread")
        };
        assert_eq!(read.needs, Needs::ReadIndex, "a RESP read is linearizable");
        assert_eq!(read.args, [1]);
        let ReadTo::Local(local) = read.to else {
            panic!("its answer goes back to the port")
        };
        local.answer(ReadAnswer::Unknown { proc_id: 7 });
        drop(inbox.try_recv().expect("the second read"));
        let mut answers = Vec::new();
        port.take(&mut answers);
        assert_eq!(
            answers,
            [
                (first, Some(ReadAnswer::Unknown { proc_id: 7 })),
                (dropped, None)
            ]
        );
        assert_eq!(
            woken.load(Ordering::Relaxed),
            1,
            "one wake-up for both answers taken together"
        );

        drop(inbox);
        let lost = port.push(7, vec![3]);
        answers.clear();
        port.take(&mut answers);
        assert_eq!(
            answers,
            [(lost, None)],
            "a stopped node's read is lost at once"
        );
        assert_eq!(woken.load(Ordering::Relaxed), 2);
    }
}
