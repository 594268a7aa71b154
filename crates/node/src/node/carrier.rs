//! The node's roles as the supervisor drives them ([`Driving`], its [`Roles`]), and the
//! carry-out table carried out on values ([`InMemory`], its [`Carrier`]).

use tandem_cluster::ClusterMessage;
use tandem_cluster::role::Transition;
use tandem_config::{GroupId, View};
use tandem_memory::Segment;
use tandem_redo::SealedBatch;
use tandem_replication::{NodeId, Primary, PrimaryConfig, ReceiverConfig};
use tandem_store::Store;

use super::{
    Destination, NextSegment, NodeEnv, Plane, PrimaryStarting, RecordsMoved, RoleSlot, env::Carried,
};
use crate::backup::{ApplierRole, Handover, HandoverError, rewind_to_rejoin};
use crate::backup_role::BackupRole;
use crate::carry_out::{Carrier, CarryNote, Records, Slot, carry_out};
use crate::gate::GateRule;
use crate::peer_frame::PeerMessage;
use crate::primary::PrimaryRole;
use crate::primary_host::PrimaryHost;
use crate::receiver::ReceiverRole;
use crate::supervisor::{Notice, RoleHeld, Roles, lsn_released_at_promotion, lsn_synced_bound};

/// A node's planes and its driver, for one drive of the supervisor.
pub(super) struct Driving<'a, D, R, E> {
    pub(super) planes: &'a mut [Plane<D, R>],
    pub(super) env: &'a mut E,
}

impl<D, R, E> Driving<'_, D, R, E> {
    /// The plane of `group`: the supervisor orders only the groups of its core, which are
    /// the node's.
    fn plane(&self, group: GroupId) -> &Plane<D, R> {
        self.planes
            .iter()
            .find(|plane| plane.group == group)
            .unwrap_or_else(|| panic!("the supervisor ordered group {group}, not the node's"))
    }

    fn plane_mut(&mut self, group: GroupId) -> &mut Plane<D, R> {
        super::plane_in(self.planes, group)
            .unwrap_or_else(|| panic!("the supervisor ordered group {group}, not the node's"))
    }

    fn role(&self, group: GroupId) -> &RoleSlot<D, R> {
        &self.plane(group).role
    }

    fn role_mut(&mut self, group: GroupId) -> &mut RoleSlot<D, R> {
        &mut self.plane_mut(group).role
    }
}

impl<D: Destination, R, E: NodeEnv<D, R>> Roles for Driving<'_, D, R, E> {
    type Error = E::Error;

    fn held(&self, group: GroupId) -> RoleHeld {
        match self.role(group) {
            Slot::Outside => RoleHeld::Outside,
            Slot::Primary(host) => RoleHeld::Primary {
                view: host.primary().view(),
            },
            Slot::Backup(backup) => RoleHeld::Backup {
                view: backup.gate().view(),
                primary: backup.gate().primary(),
            },
        }
    }

    fn lsn_committed(&mut self, group: GroupId) -> u64 {
        match self.role(group) {
            Slot::Primary(host) => host.primary().lsn_committed(),
            _ => unreachable!("only a primary is asked its committed LSN"),
        }
    }

    fn freeze(&mut self, group: GroupId) -> u64 {
        match self.role_mut(group) {
            Slot::Backup(backup) => backup.freeze(),
            _ => unreachable!("only a backup is frozen"),
        }
    }

    fn lsn_synced(&self, group: GroupId) -> u64 {
        let Slot::Backup(backup) = self.role(group) else {
            unreachable!("asked of a frozen backup");
        };
        lsn_synced_bound(
            self.env.lsn_durable(group),
            backup.receiver().core().lsn_synced_told(),
        )
    }

    fn diverged(&self, group: GroupId) -> bool {
        match self.role(group) {
            Slot::Backup(backup) => backup.applier().is_diverged(),
            _ => false,
        }
    }

    fn lsn_before_rewind(&self, group: GroupId) -> Option<u64> {
        match self.role(group) {
            Slot::Backup(backup) => backup.applier().lsn_before_rewind(),
            _ => None,
        }
    }

    fn prepare_removal(
        &mut self,
        group: GroupId,
        view: u64,
        backup: NodeId,
    ) -> Result<(), E::Error> {
        let plane = super::plane_in(self.planes, group).expect("the supervisor orders its groups");
        if let Slot::Primary(host) = &mut plane.role {
            host.role_mut().prepare_removal(view, backup);
        }
        plane.collect_primary(self.env)
    }

    fn carry_out(
        &mut self,
        group: GroupId,
        transition: Transition,
        view: &View,
    ) -> Result<bool, E::Error> {
        let plane = super::plane_in(self.planes, group).expect("the supervisor orders its groups");
        plane.carry_out(transition, view, self.env)
    }

    fn send(&mut self, to: NodeId, message: ClusterMessage) {
        self.env.send(to, PeerMessage::Cluster(message));
    }

    fn notice(&mut self, group: GroupId, notice: Notice<'_>) {
        self.env.notice(group, notice);
    }
}

impl<D: Destination, R> Plane<D, R> {
    /// Carries `transition` out to follow `view`; whether the node serves afterwards.
    pub(super) fn carry_out<E: NodeEnv<D, R>>(
        &mut self,
        transition: Transition,
        view: &View,
        env: &mut E,
    ) -> Result<bool, E::Error> {
        let ignore_depose = env.ignores_depose()
            && view.primary != self.id
            && matches!(self.role, Slot::Primary(_));
        if !ignore_depose {
            self.depose(view, env)?;
        }
        // Whatever the node becomes, the batches a backup held back for reads come first: a
        // role change cannot wait.
        self.release_held(env)?;
        env.carrying_out(self.group, &self.role);
        let was_backup = matches!(self.role, Slot::Backup(_));
        let role = std::mem::replace(&mut self.role, Slot::Outside);
        if ignore_depose {
            return self.stay_stale_primary(role, view, env);
        }
        let mut carrier = InMemory {
            plane: self,
            env,
            failure: None,
        };
        let next = carry_out(&mut carrier, transition, role, view);
        if let Some(failure) = carrier.failure {
            return Err(failure);
        }
        let new_role = !matches!(
            transition,
            Transition::StayPrimary | Transition::StayBackup | Transition::Wait
        ) || (transition == Transition::StayBackup && !was_backup);
        // Every role started (a backup kept through a stand-by is not) aligns the log with
        // its segment first.
        let starts_role = new_role
            && !(transition == Transition::StandBy && was_backup)
            && !matches!(next, Slot::Outside);
        if new_role {
            self.role_epoch += 1;
        }
        env.carried(Carried {
            group: self.group,
            role: &next,
            view,
            new_role,
            role_epoch: self.role_epoch,
        });
        self.start(next, starts_role, env);
        if matches!(transition, Transition::Promote { .. })
            && let Slot::Primary(host) = &self.role
        {
            env.promoted(self.group, host, view)?;
        }
        match &self.role {
            Slot::Primary(_) => self.collect_primary(env)?,
            Slot::Backup(_) => self.collect_backup(env)?,
            Slot::Outside => {}
        }
        Ok(!matches!(self.role, Slot::Outside))
    }

    /// Takes `next` up: the log aligned with its records if it `starts`, its checkpoints
    /// enabled, and told what its log holds.
    fn start<E: NodeEnv<D, R>>(&mut self, mut next: RoleSlot<D, R>, starts: bool, env: &mut E) {
        // Where the role's records end: a backup kept across the view may hold received
        // batches its applier has not applied yet, which its log holds already.
        let lsn_start = match &next {
            Slot::Primary(host) => host.role().store().segment().lsn(),
            Slot::Backup(backup) => backup
                .applier()
                .lsn_applied()
                .max(backup.receiver().core().lsn_received()),
            Slot::Outside => 0,
        };
        if starts {
            env.log_align(self.group, lsn_start);
        }
        let (bytes, lsn_loaded) = (self.settings.checkpoint_bytes, self.settings.lsn_loaded);
        match &mut next {
            Slot::Primary(host) => host.role_mut().enable_checkpoints(bytes, lsn_loaded),
            Slot::Backup(backup) => backup.applier_mut().enable_checkpoints(bytes, lsn_loaded),
            Slot::Outside => {}
        }
        self.role = next;
        if starts {
            self.log_listen(env);
        }
    }

    /// A primary role that `view` replaced gives up its replies ("not primary"), and the
    /// calls still queued are told so: their clients go to the new primary at once.
    fn depose<E: NodeEnv<D, R>>(&mut self, view: &View, env: &mut E) -> Result<(), E::Error> {
        let Slot::Primary(host) = &mut self.role else {
            return Ok(());
        };
        if view.primary == self.id {
            return Ok(());
        }
        host.role_mut().depose(view.number);
        for waiting in host.take_waiting() {
            env.not_primary(waiting.to);
        }
        self.collect_primary(env)
    }

    /// Under a planted bug, the primary keeps its `role` in `view`, which names another
    /// primary: it believes itself alone in the new view.
    fn stay_stale_primary<E: NodeEnv<D, R>>(
        &mut self,
        role: RoleSlot<D, R>,
        view: &View,
        env: &mut E,
    ) -> Result<bool, E::Error> {
        let Slot::Primary(mut stale) = role else {
            unreachable!("checked: a primary")
        };
        if !stale.primary().is_deposed() && stale.primary().view() < view.number {
            env.note(format_args!(
                "sabotage: node {} stays primary in view {}",
                self.id, view.number
            ));
            // Alone in the new view, it releases at commit.
            let config = PrimaryConfig {
                backups: Vec::new(),
                spares: Vec::new(),
                lone: true,
                ..self.primary_config(view)
            };
            stale.role_mut().restart_replication(config);
        }
        self.role = Slot::Primary(stale);
        self.collect_primary(env)?;
        Ok(true)
    }
}

/// The carry-out table's operations on values: records move with the roles, and the
/// driver's ledger follows them ([`NodeEnv::records`]).
struct InMemory<'a, D, R, E: NodeEnv<D, R>> {
    plane: &'a mut Plane<D, R>,
    env: &'a mut E,
    /// Why the carry-out fails, if the driver said so of a note.
    failure: Option<E::Error>,
}

impl<D: Destination, R, E: NodeEnv<D, R>> Carrier for InMemory<'_, D, R, E> {
    type Primary = Box<PrimaryHost<D>>;
    type Backup = Box<BackupRole<R>>;
    type HandoverError = HandoverError;
    type LoadError = E::LoadError;

    fn primary_view(&self, primary: &Self::Primary) -> u64 {
        primary.primary().view()
    }

    fn stay_primary(&mut self, mut primary: Self::Primary, view: &View) -> RoleSlot<D, R> {
        let installed = primary
            .role_mut()
            .install_view(view.number, &view.backups, &view.spares);
        assert!(installed, "a primary that stays learns a newer view");
        Slot::Primary(primary)
    }

    fn stay_backup(&mut self, mut backup: Self::Backup, view: &View) -> Self::Backup {
        // A new view reopens a backup frozen in the old one.
        backup.stay(view.number, view.primary);
        backup
    }

    fn hand_over(&mut self, backup: Self::Backup, lsn: u64) -> Result<Handover, HandoverError> {
        let handover = backup.handover(lsn)?;
        // A rewound member promoted from the records it held before the rewind takes them
        // back.
        self.env.records(
            self.plane.group,
            RecordsMoved::HandedOver {
                lsn: handover.segment.lsn(),
            },
        );
        Ok(handover)
    }

    fn give_back(&mut self, primary: Self::Primary, view: &View) -> Option<Segment> {
        let segment = primary.into_segment();
        self.env.note(format_args!(
            "node {}: replaced by node {} in view {}; keeps its records up to LSN {}",
            self.plane.id,
            view.primary,
            view.number,
            segment.lsn()
        ));
        Some(segment)
    }

    fn stop(&mut self, role: RoleSlot<D, R>, view: &View, discarded: u64) {
        let node = self.plane.id;
        let truncate = view
            .truncate_lsn()
            .map_or("none".to_owned(), |lsn| lsn.to_string());
        match role {
            Slot::Primary(_) => self.env.note(format_args!(
                "node {node}: replaced by node {} in view {}; discarded {discarded} records \
                 above the truncate LSN {truncate}",
                view.primary, view.number
            )),
            Slot::Backup(_) if discarded > 0 => self.env.note(format_args!(
                "node {node}: discarded {discarded} records above the truncate LSN \
                 {truncate}; reloading to catch up from the primary"
            )),
            Slot::Backup(_) | Slot::Outside => {}
        }
    }

    fn take_recovered(&mut self) -> Option<Segment> {
        match std::mem::replace(&mut self.plane.next, NextSegment::None) {
            NextSegment::Recovered(segment) => {
                let group = self.plane.group;
                self.env
                    .records(group, RecordsMoved::Recovered { segment: &segment });
                Some(segment)
            }
            other => {
                self.plane.next = other;
                None
            }
        }
    }

    fn load(&mut self) -> Result<Segment, E::LoadError> {
        // A role that starts from the load does not take records rebuilt from the log.
        let next = std::mem::replace(&mut self.plane.next, NextSegment::None);
        self.env.records(self.plane.group, RecordsMoved::Loaded);
        match next {
            NextSegment::Ready(segment) => Ok(segment),
            NextSegment::Recovered(_) | NextSegment::None => self.env.load(self.plane.group),
            // The role cannot wait for the load under way to be handed over: the driver
            // finishes it now.
            NextSegment::Loading => {
                self.plane.loaded = Some(true);
                self.env.load(self.plane.group)
            }
        }
    }

    fn rewound(&mut self, mut segment: Segment, lsn: u64) -> Option<Segment> {
        // Where its log can end: below `lsn` if a logged image spans it.
        let lsn = self
            .env
            .log_align_rejoin(self.plane.group, lsn)
            .min(segment.lsn());
        if !rewind_to_rejoin(&mut segment, lsn) {
            return None;
        }
        self.env
            .records(self.plane.group, RecordsMoved::Rewound { lsn });
        Some(segment)
    }

    fn start_primary(
        &mut self,
        segment: Segment,
        tail: Vec<SealedBatch>,
        view: &View,
        lease_owed_ticks: u64,
        records: Records,
    ) -> RoleSlot<D, R> {
        let plane = &mut *self.plane;
        let lsn = segment.lsn();
        self.env.primary_starting(PrimaryStarting {
            group: plane.group,
            view,
            records,
            lsn,
            lease_owed_ticks,
        });
        let primary = if records == Records::Loaded {
            Primary::new(plane.primary_config(view), plane.settings.lsn_loaded)
        } else {
            let mut primary = Primary::resume(plane.primary_config(view), lsn, tail);
            if let Some(lsn) = lsn_released_at_promotion(view) {
                primary.released_at_most(lsn);
            }
            primary.hold_releases(lease_owed_ticks);
            primary
        };
        let mut store = Store::open(segment, plane.model.replica());
        store.set_reply_len_max(plane.settings.reply_len_max);
        store.set_record_len_max(plane.settings.record_len_max);
        let role = PrimaryRole::new(store, primary);
        Slot::Primary(Box::new(PrimaryHost::new(role)))
    }

    fn start_backup(
        &mut self,
        segment: Segment,
        tail: Vec<SealedBatch>,
        view: &View,
        records: Records,
    ) -> RoleSlot<D, R> {
        if records == Records::Recovered {
            self.env.note(format_args!(
                "node {}: follows view {} from the records its log gave back (LSN {})",
                self.plane.id,
                view.number,
                segment.lsn()
            ));
        }
        self.plane.backup_on_tail(segment, tail, view)
    }

    fn start_frozen_backup(
        &mut self,
        segment: Segment,
        view_held: u64,
        view: &View,
    ) -> RoleSlot<D, R> {
        let plane = &*self.plane;
        let lsn = segment.lsn();
        let config = ReceiverConfig {
            view: view_held,
            primary: plane.id,
            ..plane.receiver_config(view)
        };
        let mut gate = GateRule::new(view_held, plane.id);
        gate.freeze();
        let role = BackupRole::new(
            gate,
            ReceiverRole::new(config, lsn, lsn),
            ApplierRole::active(segment, Vec::new(), plane.tail_limits()),
            plane.settings.reads,
            super::question_first(plane.role_epoch + 1),
        );
        Slot::Backup(Box::new(role))
    }

    fn reload_backup(&mut self, view: &View) -> RoleSlot<D, R> {
        // A node that stood by asked to join before its spare segment was loaded: it serves
        // nothing until the load is done (the primary has it leave, and it asks again).
        if matches!(self.plane.next, NextSegment::Loading) {
            self.env.note(format_args!(
                "node {}: its records lie above the truncate LSN and its database is still \
                 loading; it rejoins once loaded",
                self.plane.id
            ));
            self.plane.loaded = Some(false);
            return Slot::Outside;
        }
        match self.load() {
            Ok(segment) => self.plane.backup_on_tail(segment, Vec::new(), view),
            Err(error) => {
                self.note(CarryNote::LoadFailed { error: &error });
                Slot::Outside
            }
        }
    }

    /// The node starts loading the segment it would rejoin with (unless one is at hand or
    /// loading), and asks to join only once it is loaded.
    fn load_spare(&mut self) {
        if matches!(self.plane.next, NextSegment::None) {
            self.env.start_load(self.plane.group);
            self.plane.next = NextSegment::Loading;
            self.plane.loaded = Some(false);
        }
    }

    /// The node asks to join at once, whether or not its spare segment is loaded: it holds
    /// records to rejoin from.
    fn join_with_records(&mut self) {
        self.plane.loaded = Some(true);
    }

    fn note(&mut self, note: CarryNote<'_>) {
        if let Err(failure) = self.env.carry_note(self.plane.group, &note)
            && self.failure.is_none()
        {
            self.failure = Some(failure);
        }
        let node = self.plane.id;
        self.env.note(format_args!("node {node}: {note}"));
    }
}
