//! The backup role as one value: the gate, the receiver on the primary's connection, the
//! applier, the reads waiting on the backup and the batches held back for them, composed in
//! one order whichever driver runs them.
//!
//! A driver hands the role what arrived (`step`, `tick`, `read`, `synced`) and then takes a
//! turn in two halves. [`BackupRole::receive`] returns what the receiver decided:
//! 1. `to_log`: what the log must hold of what the receiver accepted, the image before the
//!    batches, in the order the applier takes them (a backup acknowledges only what its log
//!    was told to hold);
//! 2. `messages`: the receiver's acks to the primary.
//!
//! The driver sends those before it calls [`BackupRole::apply_received`] (a 2-safe ack never
//! waits for application, seed 004 §3.2), which applies and returns:
//! 1. `messages`: the applier's ack of what it applied, then a `ReadIndex` question;
//! 2. `answers`: the reads answered, each at the state it was served on.
//!
//! No message leaves for the primary while the gate is frozen (a frozen backup has closed
//! its primary's connection). [`BackupRole::turn`] runs both halves into one ready.
//!
//! Nothing here decides *whether* a record is safe to apply or a read to serve: the receiver
//! core, the applier and [`BackupReads`] do. The simulator's backups run this composition
//! (the runtime's, once issue 38's node drives them), so that no driver writes it again.

use std::collections::VecDeque;

use tandem_config::GroupId;
use tandem_memory::Segment;
use tandem_redo::{CallId, SealedBatch, TailLimits};
use tandem_replication::transfer::PageImage;
use tandem_replication::{ApplyBatch, ApplyError, Message, NodeId, ReceiverConfig, ReceiverReady};
use tandem_store::DataModel;

use crate::backup::{ApplierRole, Handover, HandoverError};
use crate::gate::GateRule;
use crate::log::{LogOrder, receiver_orders};
use crate::peer_frame::RelayedPublication;
use crate::reads::{BackupReads, ReadAnswer, WaitingRead};
use crate::receiver::ReceiverRole;

/// What a driver watches while a backup role of `group` applies: the simulator's checkers.
/// Nothing the role decides depends on it; an error it returns ends the turn and is handed
/// back.
pub trait BackupWatch {
    type Error;

    /// `batch` is about to be applied (the driver reads what it needs of its bytes now: the
    /// applier takes the batch).
    fn applying(&mut self, group: GroupId, batch: &ApplyBatch);

    /// The batch last announced by [`BackupWatch::applying`] was applied: records above
    /// `lsn_before` up to `lsn`, holding the calls `calls`.
    fn applied(
        &mut self,
        group: GroupId,
        lsn_before: u64,
        lsn: u64,
        calls: &[CallId],
    ) -> Result<(), Self::Error>;

    /// A state transfer was installed: `segment` holds the bytes the primary of `view` sent
    /// at `lsn`.
    fn installed(
        &mut self,
        group: GroupId,
        view: u64,
        lsn: u64,
        segment: &Segment,
    ) -> Result<(), Self::Error>;
}

/// Why a backup role's turn stopped.
#[derive(Debug)]
pub enum BackupTurnError<E> {
    /// The applier refused a batch the receiver accepted.
    Apply(ApplyError),
    /// The applier could not install a state transfer.
    Install(String),
    /// The driver's watch refused what was applied.
    Watch(E),
}

/// Everything a turn of a backup role hands the driver, in the order of the module's
/// contract. Reused from turn to turn (capacity kept): the driver drains it.
#[derive(Debug)]
pub struct BackupReady<T> {
    pub to_log: Vec<LogOrder>,
    pub messages: Vec<(NodeId, Message)>,
    /// Each read answered: where it goes, its sequence number, and the answer.
    pub answers: Vec<(T, u64, ReadAnswer)>,
    /// The turn applied records (the applier's LSN before it, if it moved).
    pub applied_from: Option<u64>,
}

impl<T> Default for BackupReady<T> {
    fn default() -> Self {
        BackupReady {
            to_log: Vec::new(),
            messages: Vec::new(),
            answers: Vec::new(),
            applied_from: None,
        }
    }
}

/// How a backup role serves reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadSettings {
    /// The longest reply a read may have (see [`BackupReads::new`]).
    pub reply_len_max: usize,
    /// How long a `ReadIndex` question waits for its answer before it is asked again, µs.
    pub index_retry_us: u64,
}

/// One backup role of a node: whom it follows, what it received and applied, and the reads
/// waiting on it. `T` is where a read's answer goes.
#[derive(Debug)]
pub struct BackupRole<T> {
    gate: GateRule,
    receiver: ReceiverRole,
    applier: ApplierRole,
    reads: BackupReads<T, u64>,
    /// Batches received but held back for a read (the applier applies them once no waiting
    /// read needs the state where it is).
    held: VecDeque<ApplyBatch>,
    /// The receiver's count of released LSNs heard, as last passed to `reads`.
    released_heard: u64,
    settings: ReadSettings,
    /// The receiver's output, reused from turn to turn.
    received: ReceiverReady,
    /// Pub/sub messages the primary relayed, waiting for the applier to reach their LSN.
    relayed: VecDeque<RelayedPublication>,
    /// Bytes of channels and messages in `relayed`.
    relayed_bytes: usize,
}

/// The most relayed pub/sub messages a backup holds for its applier to catch up: more are
/// dropped, as Redis drops the messages of a subscriber too slow to take them.
pub const RELAYED_HELD_MAX: usize = 1 << 16;
/// The most bytes (channels and messages) of relayed pub/sub messages a backup holds.
pub const RELAYED_HELD_BYTES_MAX: usize = 16 << 20;

impl<T> BackupRole<T> {
    /// A backup role behind `gate`, receiving with `receiver` and applying with `applier`.
    /// `question_first` numbers its `ReadIndex` questions apart from every other role's of
    /// the node (see [`BackupReads::new`]).
    pub fn new(
        gate: GateRule,
        receiver: ReceiverRole,
        applier: ApplierRole,
        settings: ReadSettings,
        question_first: u64,
    ) -> BackupRole<T> {
        BackupRole {
            gate,
            receiver,
            applier,
            reads: BackupReads::new(settings.reply_len_max, question_first),
            held: VecDeque::new(),
            released_heard: 0,
            settings,
            received: ReceiverReady::default(),
            relayed: VecDeque::new(),
            relayed_bytes: 0,
        }
    }

    /// Holds a pub/sub message the primary relayed until the applier has applied its LSN;
    /// false if it was dropped because too many wait.
    pub fn hold_relayed(&mut self, publication: RelayedPublication) -> bool {
        let len = publication.channel.len() + publication.message.len();
        if self.relayed.len() >= RELAYED_HELD_MAX
            || self.relayed_bytes + len > RELAYED_HELD_BYTES_MAX
        {
            return false;
        }
        self.relayed_bytes += len;
        self.relayed.push_back(publication);
        true
    }

    /// Moves the relayed pub/sub messages whose LSN the applier has applied to `into`, in
    /// the order they were relayed.
    pub fn take_relayed_applied(&mut self, into: &mut Vec<RelayedPublication>) {
        let lsn_applied = self.applier.lsn_applied();
        while let Some(front) = self.relayed.front()
            && front.lsn <= lsn_applied
        {
            let publication = self.relayed.pop_front().expect("front exists");
            self.relayed_bytes -= publication.channel.len() + publication.message.len();
            into.push(publication);
        }
    }

    /// A backup role following `config`'s primary on `segment` (kept from an earlier role,
    /// perhaps rewound), with `tail`, the batches it applied in that role, ending at the
    /// segment's LSN.
    pub fn on_segment(
        config: ReceiverConfig,
        segment: Segment,
        tail: Vec<SealedBatch>,
        limits: TailLimits,
        settings: ReadSettings,
        question_first: u64,
    ) -> BackupRole<T> {
        let lsn = segment.lsn();
        let gate = GateRule::new(config.view, config.primary);
        let receiver = ReceiverRole::for_segment(config, lsn, lsn, segment.diverged());
        let applier = ApplierRole::active(segment, tail, limits);
        BackupRole::new(gate, receiver, applier, settings, question_first)
    }

    /// A passive backup role following `config`'s primary: its mirror memory starts from
    /// `segment`'s image under `layout` (the primary's segment, loaded alike, traces its
    /// writes with the same layout); it keeps no segment, so it serves no read.
    pub fn passive(
        config: ReceiverConfig,
        segment: &Segment,
        layout: tandem_memory::MirrorLayout,
        limits: TailLimits,
        settings: ReadSettings,
        question_first: u64,
    ) -> BackupRole<T> {
        let lsn = segment.lsn();
        let mirror = tandem_memory::PassiveMirror::from_image(layout, &segment.passive_image())
            .expect("a segment's own image fits the layout it traces with");
        let gate = GateRule::new(config.view, config.primary);
        let receiver = ReceiverRole::for_segment(config, lsn, lsn, segment.diverged());
        let applier = ApplierRole::passive(mirror, lsn, limits);
        BackupRole::new(gate, receiver, applier, settings, question_first)
    }

    /// Whether the role is a passive backup's (it holds a mirror, not a segment).
    pub fn is_passive(&self) -> bool {
        self.applier.segment().is_none()
    }

    /// Ends the role: its applier hands the segment and the retained batches over at `lsn`
    /// for the node's next role (the reads still waiting are dropped; see
    /// [`BackupRole::expire_reads`] to answer them first).
    pub fn handover(self, lsn: u64) -> Result<Handover, HandoverError> {
        self.applier.handover(lsn)
    }

    /// The group whose stream the role follows.
    pub fn group(&self) -> GroupId {
        self.receiver.core().group()
    }

    pub fn gate(&self) -> &GateRule {
        &self.gate
    }

    pub fn receiver(&self) -> &ReceiverRole {
        &self.receiver
    }

    pub fn applier(&self) -> &ApplierRole {
        &self.applier
    }

    pub fn applier_mut(&mut self) -> &mut ApplierRole {
        &mut self.applier
    }

    /// The batches received and held back for a read, oldest first.
    pub fn held(&self) -> impl Iterator<Item = &ApplyBatch> {
        self.held.iter()
    }

    /// The active backup's segment.
    pub fn segment(&self) -> &Segment {
        self.applier
            .segment()
            .expect("a backup role that serves reads is active")
    }

    /// Whether some read waits or some batch is held back for one.
    pub fn has_reads_or_held(&self) -> bool {
        !(self.held.is_empty() && self.reads.is_empty())
    }

    /// A new view keeps this role: it reopens a backup frozen in the old one.
    pub fn stay(&mut self, view: u64, primary: NodeId) {
        self.gate.set_view(view, primary);
        let accepted = self.receiver.follow(&self.gate, self.applier.lsn_applied());
        assert!(accepted, "a backup that stays follows the same primary");
    }

    /// Stops taking anything from the primary for a view change; returns the LSN received,
    /// which is all this role ever acknowledges.
    pub fn freeze(&mut self) -> u64 {
        self.gate.freeze();
        self.receiver.core().lsn_received()
    }

    /// Whether a message from `from` may be taken: false for the primary's own message once
    /// the gate no longer accepts it (frozen, or another primary followed). A stranger's
    /// message goes to the receiver, which fences an older view's primary.
    pub fn admits(&mut self, from: NodeId) -> bool {
        let lsn_applied = self.applier.lsn_applied();
        self.receiver.follow(&self.gate, lsn_applied) || from != self.gate.primary()
    }

    /// A replication message from `from` (admitted by [`BackupRole::admits`]).
    pub fn step(&mut self, from: NodeId, message: Message) {
        self.receiver.step(from, message);
    }

    /// Bytes of a message from the primary arrived, and the message is not whole yet: the
    /// receiver answers them once a tick, so the primary hears this backup meanwhile.
    pub fn receiving(&mut self) {
        self.receiver.receiving();
    }

    /// A tick of the node's clock; a frozen role's receiver no longer counts time.
    pub fn tick(&mut self) {
        if !self.gate.is_frozen() {
            self.receiver.tick();
        }
    }

    /// The node's log synced every record up to `lsn_durable`.
    pub fn synced(&mut self, lsn_durable: u64) {
        self.receiver.synced(lsn_durable);
    }

    /// A client's read arrives.
    pub fn read(&mut self, read: WaitingRead<T, u64>) {
        self.reads.push(read);
    }

    /// Every waiting read ends at the next turn (a role change cannot wait for them).
    pub fn expire_reads(&mut self, now_us: u64) {
        self.reads.expire(now_us);
    }

    /// Takes everything that arrived since the last turn through the receiver, applies what
    /// no waiting read holds back, answers the reads that can be answered, and fills `ready`
    /// in the module's order. `model` runs the reads.
    pub fn turn<W: BackupWatch>(
        &mut self,
        now_us: u64,
        model: &dyn DataModel,
        watch: &mut W,
        ready: &mut BackupReady<T>,
    ) -> Result<(), BackupTurnError<W::Error>> {
        self.receive(now_us, ready);
        self.apply_received(now_us, model, watch, ready)
    }

    /// The bytes of batches [`BackupRole::receive`] took and the next apply will apply: a
    /// measure of how long that apply keeps the role.
    pub fn bytes_to_apply(&self) -> usize {
        let batches = self.received.to_apply.iter();
        batches.map(|apply| apply.batch.len()).sum()
    }

    /// The first half of a turn: takes what arrived through the receiver and hands out its
    /// log orders and acks (see the module).
    pub fn receive(&mut self, now_us: u64, ready: &mut BackupReady<T>) {
        let mut received = std::mem::take(&mut self.received);
        self.receiver.take_ready(&mut received);
        let view = self.receiver.core().view();
        ready.to_log.extend(receiver_orders(&received, view));
        self.hear_read_indexes(now_us, &mut received);
        ready.messages.append(&mut received.messages);
        if self.gate.is_frozen() {
            let primary = self.gate.primary();
            ready.messages.retain(|(to, _)| *to != primary);
        }
        self.received = received;
    }

    /// The second half of a turn: applies what [`BackupRole::receive`] took (unless a
    /// waiting read holds it back) and hands out the applier's ack, a question and the
    /// reads' answers (see the module).
    pub fn apply_received<W: BackupWatch>(
        &mut self,
        now_us: u64,
        model: &dyn DataModel,
        watch: &mut W,
        ready: &mut BackupReady<T>,
    ) -> Result<(), BackupTurnError<W::Error>> {
        let mut received = std::mem::take(&mut self.received);
        let lsn_before = self.applier.lsn_applied();
        let applied = self.apply_taken(now_us, model, &mut received, watch, ready);
        if self.applier.lsn_applied() > lsn_before {
            ready.applied_from = Some(lsn_before);
        }
        received.clear();
        self.received = received;
        applied?;
        self.collect_messages(now_us, ready);
        Ok(())
    }

    /// Installs the transfer and applies the batches `received` took.
    fn apply_taken<W: BackupWatch>(
        &mut self,
        now_us: u64,
        model: &dyn DataModel,
        received: &mut ReceiverReady,
        watch: &mut W,
        ready: &mut BackupReady<T>,
    ) -> Result<(), BackupTurnError<W::Error>> {
        if let Some(image) = received.to_install.take() {
            self.install(now_us, model, &image, watch, ready)?;
        }
        self.held.extend(received.to_apply.drain(..));
        self.apply_unheld(now_us, model, watch, ready)
    }

    /// What the primary said for the reads: its answers to their questions, and its
    /// released LSN whenever a message said it.
    fn hear_read_indexes(&mut self, now_us: u64, received: &mut ReceiverReady) {
        for (id, lsn) in received.read_indexes.drain(..) {
            self.reads.indexed(id, lsn);
        }
        let heard = self.receiver.core().released_heard();
        if heard != self.released_heard {
            self.released_heard = heard;
            let lsn_released = self.receiver.core().lsn_released();
            self.reads.heard_released(now_us, lsn_released);
        }
    }

    /// Installs a state transfer: it cannot wait, so the reads end and the batches held go
    /// first.
    fn install<W: BackupWatch>(
        &mut self,
        now_us: u64,
        model: &dyn DataModel,
        image: &PageImage,
        watch: &mut W,
        ready: &mut BackupReady<T>,
    ) -> Result<(), BackupTurnError<W::Error>> {
        self.reads.expire(now_us);
        self.answer_reads(now_us, model, ready);
        while let Some(apply) = self.held.pop_front() {
            self.apply(apply, watch)?;
        }
        let installed = self
            .applier
            .install(image)
            .map_err(BackupTurnError::Install)?;
        // The calls inside the image are not seen here; those after it come later in the
        // history, so their seqs still only go up.
        if let Some(lsn) = installed {
            self.receiver.applied(lsn);
            let segment = self
                .applier
                .segment()
                .expect("only an active backup installs");
            // The receiver takes pages of its own view only, and a turn installs what it
            // staged before any view change reaches it.
            watch
                .installed(self.group(), self.receiver.core().view(), lsn, segment)
                .map_err(BackupTurnError::Watch)?;
        }
        Ok(())
    }

    /// Applies batch by batch while no waiting read needs the state where it is, answering
    /// the reads between batches.
    fn apply_unheld<W: BackupWatch>(
        &mut self,
        now_us: u64,
        model: &dyn DataModel,
        watch: &mut W,
        ready: &mut BackupReady<T>,
    ) -> Result<(), BackupTurnError<W::Error>> {
        loop {
            self.answer_reads(now_us, model, ready);
            let lsn_released = self.receiver.core().lsn_released();
            if self.reads.holding(self.applier.lsn_applied(), lsn_released) {
                return Ok(());
            }
            let Some(apply) = self.held.pop_front() else {
                return Ok(());
            };
            self.apply(apply, watch)?;
        }
    }

    /// Applies one received batch and tells the watch what it applied.
    fn apply<W: BackupWatch>(
        &mut self,
        apply: ApplyBatch,
        watch: &mut W,
    ) -> Result<(), BackupTurnError<W::Error>> {
        watch.applying(self.group(), &apply);
        let lsn_before = self.applier.lsn_applied();
        let applied = self.applier.apply(apply).map_err(BackupTurnError::Apply)?;
        let Some(lsn) = applied else {
            return Ok(());
        };
        self.receiver.applied(lsn);
        watch
            .applied(self.group(), lsn_before, lsn, self.applier.calls_applied())
            .map_err(BackupTurnError::Watch)
    }

    fn answer_reads(&mut self, now_us: u64, model: &dyn DataModel, ready: &mut BackupReady<T>) {
        let lsn_released = self.receiver.core().lsn_released();
        self.reads.answer(
            &self.applier,
            Some(model),
            lsn_released,
            now_us,
            |to, seq, answer| {
                ready.answers.push((to, seq, answer));
            },
        );
    }

    /// The receiver's acks first, then the applier's, then a read question, all to the
    /// primary unless the gate is frozen.
    fn collect_messages(&mut self, now_us: u64, ready: &mut BackupReady<T>) {
        let primary = self.gate.primary();
        let frozen = self.gate.is_frozen();
        let view = self.receiver.core().view();
        if let Some(ack) = self.applier.take_ack(view) {
            ready.messages.push((primary, ack));
        }
        let lsn_applied = self.applier.lsn_applied();
        let lsn_released = self.receiver.core().lsn_released();
        let retry_at = now_us + self.settings.index_retry_us;
        if let Some(id) = self
            .reads
            .question(now_us, retry_at, lsn_applied, lsn_released)
        {
            ready
                .messages
                .push((primary, Message::ReadIndex { view, id }));
        }
        if frozen {
            ready.messages.retain(|(to, _)| *to != primary);
        }
    }
}
