//! Where a primary role's answers to one client connection gather during a turn of the
//! node's thread, and how they are handed over at its end: frames for a native client,
//! answers for a local port (the RESP front end).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tandem_node::{AnswerKind, Refusal};
use tandem_wire::{ErrorCode, ReplyStatus, encode_error, encode_reply};

use super::{ConnSink, LocalAnswer, LocalOutcome};

/// The most room a connection's answers of one turn keep for the next, in frames' bytes and
/// in answers: a turn of large replies does not leave every later turn holding as much.
const TURN_ROOM_MAX: usize = 64 << 10;
const TURN_ANSWERS_ROOM_MAX: usize = 4 << 10;

/// A client connection's answers of this turn, and where they go.
pub(crate) struct ConnOut {
    pub(super) sink: ConnSink,
    /// Answers of this turn not yet handed over: frames for a TCP client, answers for a
    /// local port (only the one its sink takes is used).
    pub(super) frames: Vec<u8>,
    pub(super) answers: Vec<LocalAnswer>,
    /// What a turn's answers took (at most [`TURN_ROOM_MAX`] bytes of frames,
    /// [`TURN_ANSWERS_ROOM_MAX`] answers): the next turn's are given as much room at once,
    /// rather than grown answer by answer.
    room_frames: usize,
    room_answers: usize,
    pub(super) unanswered: Arc<AtomicU64>,
    pub(super) answer_withheld: bool,
}

impl ConnOut {
    pub(crate) fn new(sink: ConnSink, unanswered: Arc<AtomicU64>, answer_withheld: bool) -> Self {
        ConnOut {
            sink,
            frames: Vec::new(),
            answers: Vec::new(),
            room_frames: 0,
            room_answers: 0,
            unanswered,
            answer_withheld,
        }
    }

    /// Where the answers go.
    pub(crate) fn sink(&self) -> &ConnSink {
        &self.sink
    }

    /// Answers call `seq` as `kind` says, at `lsn` unless it repeats an earlier run's; false
    /// for a refusal (it acknowledges nothing, and its latency is not counted).
    pub(crate) fn answer(&mut self, seq: u64, lsn: u64, kind: AnswerKind) -> bool {
        match kind {
            AnswerKind::Committed { body, lsn_repeated } => {
                self.committed(seq, lsn_repeated.unwrap_or(lsn), body);
            }
            AnswerKind::CommittedReplyNotKept {
                lsn_repeated,
                message,
            } => self.committed_reply_not_kept(seq, lsn_repeated, message),
            AnswerKind::RolledBack {
                message,
                ran_before,
            } => self.rolled_back(seq, ran_before.map_or(lsn, |run| run.lsn), message),
            AnswerKind::Refused { refusal, message } => {
                self.error(seq, error_code(refusal), &message);
                return false;
            }
        }
        true
    }

    /// Answers call `seq`: committed (or read, or repeated) at `lsn` with `body`.
    pub(crate) fn committed(&mut self, seq: u64, lsn: u64, body: Vec<u8>) {
        match self.sink {
            ConnSink::Frames(_) => {
                encode_reply(&mut self.frames, seq, lsn, ReplyStatus::Committed, &body);
            }
            ConnSink::Local { .. } => self.answers.push(LocalAnswer {
                seq,
                outcome: LocalOutcome::Committed(body),
            }),
        }
        self.answered();
    }

    /// Answers a retry of call `seq`, which committed at `lsn` but whose reply was not kept.
    pub(crate) fn committed_reply_not_kept(&mut self, seq: u64, lsn: u64, message: String) {
        match self.sink {
            ConnSink::Frames(_) => {
                let status = ReplyStatus::CommittedReplyNotKept;
                encode_reply(&mut self.frames, seq, lsn, status, message.as_bytes());
            }
            ConnSink::Local { .. } => {
                unreachable!("a local call has client id 0: it is never deduplicated")
            }
        }
        self.answered();
    }

    /// Answers call `seq`: its procedure refused with `message` and wrote nothing.
    pub(crate) fn rolled_back(&mut self, seq: u64, lsn: u64, message: String) {
        match self.sink {
            ConnSink::Frames(_) => {
                let status = ReplyStatus::RolledBack;
                encode_reply(&mut self.frames, seq, lsn, status, message.as_bytes());
            }
            ConnSink::Local { .. } => self.answers.push(LocalAnswer {
                seq,
                outcome: LocalOutcome::RolledBack(message),
            }),
        }
        self.answered();
    }

    /// Answers call `seq` with an error: it did not run, or it cannot be said that it did.
    pub(crate) fn error(&mut self, seq: u64, code: ErrorCode, message: &str) {
        match self.sink {
            ConnSink::Frames(_) => encode_error(&mut self.frames, code, message),
            ConnSink::Local { .. } => self.answers.push(LocalAnswer {
                seq,
                outcome: LocalOutcome::Unanswered {
                    code,
                    message: message.to_string(),
                },
            }),
        }
        self.answered();
    }

    /// A withheld reply of call `seq` (its lease ran out before it could leave): a TCP client
    /// is told what `tandem_node::withheld_answer` says; a local port is told "not primary"
    /// if it asked for it (the RESP front runs a withheld read again and tells a writer its
    /// command may have run), else nothing.
    pub(crate) fn withheld(&mut self, seq: u64) {
        let message = "this primary's lease ran out before the reply could leave";
        match self.sink {
            ConnSink::Frames(_) => {
                match tandem_node::withheld_answer(self.unanswered.load(Ordering::SeqCst)) {
                    Some(code) => self.error(seq, code, message),
                    None => self.answered(),
                }
            }
            _ if self.answer_withheld => self.error(seq, ErrorCode::NotPrimary, message),
            _ => self.answered(),
        }
    }

    /// Hands this turn's answers over.
    pub(crate) fn hand_over(&mut self) {
        match &self.sink {
            ConnSink::Frames(out) => {
                if !self.frames.is_empty() {
                    self.room_frames = self.room_frames.max(self.frames.len()).min(TURN_ROOM_MAX);
                    let room = Vec::with_capacity(self.room_frames);
                    out.send(std::mem::replace(&mut self.frames, room));
                }
            }
            ConnSink::Local { answers, wake } => {
                if !self.answers.is_empty() {
                    let taken = self.answers.len().min(TURN_ANSWERS_ROOM_MAX);
                    self.room_answers = self.room_answers.max(taken);
                    let room = Vec::with_capacity(self.room_answers);
                    let _ = answers.send(std::mem::replace(&mut self.answers, room));
                    wake();
                }
            }
        }
    }

    /// Counts one call answered.
    fn answered(&self) {
        self.unanswered.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The Error frame's code for a refused call.
pub(crate) fn error_code(refusal: Refusal) -> ErrorCode {
    match refusal {
        Refusal::UnknownProcedure => ErrorCode::UnknownProcedure,
        Refusal::WritesOnRead | Refusal::RuleUnmet | Refusal::StaleSeq | Refusal::DedupFull => {
            ErrorCode::BadArgs
        }
        Refusal::Internal => ErrorCode::Internal,
    }
}
