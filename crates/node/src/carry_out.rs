//! The carry-out table: what a node does with the role it holds, and the records in it, to
//! follow a committed view, for each [`Transition`] from each role. It is written once here;
//! a driver says how it holds roles (threads, values) through a [`Carrier`], and decides
//! nothing the table decides.
//!
//! The table's rules, in words:
//! - Records move from role to role whenever the transition keeps them: a promoted or
//!   following backup's applier hands its segment (and the batches it retained) over; a
//!   deposed primary gives its segment back at its last commit; a restarted node takes the
//!   records its log gave back.
//! - Records that cannot be kept (a handover refused, a primary that cannot give its segment
//!   back, a rewind with more diverged pages than a `Diverged` names) are never served: a
//!   backup reloads the initial database and catches up from the primary, and a promotion
//!   leaves the node outside (its peers replace it once they suspect it).
//! - A node left out of a view keeps its records as a frozen backup and loads a spare
//!   segment meanwhile, in case the next view truncates them.

use std::fmt::{self, Display};

use tandem_cluster::role::Transition;
use tandem_config::View;
use tandem_memory::Segment;
use tandem_redo::SealedBatch;

use crate::backup::Handover;

/// The role a node holds: what its data plane runs.
#[derive(Debug, Default)]
pub enum Slot<P, B> {
    #[default]
    Outside,
    Primary(P),
    /// The backup role, which serves the view's backups and spares alike (a spare's acks
    /// count for no rule until a view makes it a backup).
    Backup(B),
}

/// Where the records a role starts on came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Records {
    /// A fresh load of the initial database.
    Loaded,
    /// The node's previous role handed them over (or gave them back, deposed).
    Kept,
    /// Its log gave them back at a restart.
    Recovered,
    /// Rewound to the truncate LSN for a rejoin: the pages changed above it come back by a
    /// state transfer.
    Rewound,
}

/// What the table did that a driver reports (its log, the simulator's trace).
pub enum CarryNote<'a> {
    /// The backup role could not hand its records over: the node does not take the view
    /// up from them (a promotion leaves it outside; a backup reloads).
    HandoverRefused { error: &'a dyn Display },
    /// No initial database could be loaded for a role that starts from one.
    LoadFailed { error: &'a dyn Display },
    /// The node takes back `discarded` records above the truncate LSN `lsn`, and fetches the
    /// `pages` they changed.
    TakesBack {
        lsn: u64,
        discarded: u64,
        pages: usize,
    },
    /// The node's records above the truncate LSN could not be rewound: it reloads.
    CannotRewind { lsn: u64, discarded: u64 },
}

impl fmt::Display for CarryNote<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CarryNote::HandoverRefused { error } => {
                write!(f, "cannot keep its records ({error})")
            }
            CarryNote::LoadFailed { error } => write!(f, "cannot load the database: {error}"),
            CarryNote::TakesBack {
                lsn,
                discarded,
                pages,
            } => write!(
                f,
                "rewinds to the truncate LSN {lsn}, taking back the {discarded} records above \
                 it; fetches the {pages} pages they changed"
            ),
            CarryNote::CannotRewind { lsn, discarded } => write!(
                f,
                "discarded {discarded} records above the truncate LSN {lsn}; reloading to \
                 catch up from the primary"
            ),
        }
    }
}

impl fmt::Debug for CarryNote<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// How a driver holds roles: the operations the table is written in. Each starts, ends or
/// changes one role and does nothing else the table could decide.
pub trait Carrier {
    /// A primary role as the driver holds it.
    type Primary;
    /// A backup role as the driver holds it.
    type Backup;
    /// Why a backup role could not hand its records over.
    type HandoverError: Display;
    /// Why no initial database could be loaded.
    type LoadError: Display;

    /// The view the primary role serves.
    fn primary_view(&self, primary: &Self::Primary) -> u64;

    /// The primary role stays primary in `view` (members joined or left).
    fn stay_primary(
        &mut self,
        primary: Self::Primary,
        view: &View,
    ) -> Slot<Self::Primary, Self::Backup>;

    /// The backup role keeps following the same primary in `view` (it reopens if frozen).
    fn stay_backup(&mut self, backup: Self::Backup, view: &View) -> Self::Backup;

    /// The backup role ends and its applier hands the segment over at `lsn`.
    fn hand_over(
        &mut self,
        backup: Self::Backup,
        lsn: u64,
    ) -> Result<Handover, Self::HandoverError>;

    /// The deposed primary role ends and gives its segment back at its last commit (None: it
    /// cannot, and the node reloads).
    fn give_back(&mut self, primary: Self::Primary, view: &View) -> Option<Segment>;

    /// The role in `slot` ends without its records (`discarded` of them lie above the truncate
    /// LSN).
    fn stop(&mut self, slot: Slot<Self::Primary, Self::Backup>, view: &View, discarded: u64);

    /// The records the node's log gave back at its restart, if no role has taken them.
    fn take_recovered(&mut self) -> Option<Segment>;

    /// A segment holding the initial database.
    fn load(&mut self) -> Result<Segment, Self::LoadError>;

    /// `segment` rewound to rejoin from the truncate LSN `lsn` (or from where the node's log
    /// can end below it); None if it cannot be rewound.
    fn rewound(&mut self, segment: Segment, lsn: u64) -> Option<Segment>;

    /// A primary role of `view` on `segment`, resuming from `tail`; it waits
    /// `lease_owed_ticks` for the old primary's lease to end before it releases a reply.
    fn start_primary(
        &mut self,
        segment: Segment,
        tail: Vec<SealedBatch>,
        view: &View,
        lease_owed_ticks: u64,
        records: Records,
    ) -> Slot<Self::Primary, Self::Backup>;

    /// A backup role of `view` on `segment`, with `tail` as the start of its retained tail.
    fn start_backup(
        &mut self,
        segment: Segment,
        tail: Vec<SealedBatch>,
        view: &View,
        records: Records,
    ) -> Slot<Self::Primary, Self::Backup>;

    /// A frozen backup role of the node's own reign as primary of `view_held`, on `segment`
    /// (`view`, the view that left it out, for the settings it shares with every role).
    fn start_frozen_backup(
        &mut self,
        segment: Segment,
        view_held: u64,
        view: &View,
    ) -> Slot<Self::Primary, Self::Backup>;

    /// A backup role of `view` on the initial database (outside while it still loads).
    fn reload_backup(&mut self, view: &View) -> Slot<Self::Primary, Self::Backup>;

    /// Starts loading the segment the node would rejoin with, if none is loading or loaded.
    fn load_spare(&mut self);

    /// The node asks to join at once, whether or not its spare segment is loaded: it holds
    /// records to rejoin from.
    fn join_with_records(&mut self);

    fn note(&mut self, note: CarryNote<'_>);
}

/// Carries `transition` out on the role in `slot` to follow `view`; returns the role the node
/// holds next.
pub fn carry_out<C: Carrier>(
    carrier: &mut C,
    transition: Transition,
    slot: Slot<C::Primary, C::Backup>,
    view: &View,
) -> Slot<C::Primary, C::Backup> {
    match (transition, slot) {
        (Transition::StayPrimary, Slot::Primary(primary)) => carrier.stay_primary(primary, view),
        (Transition::StayBackup, Slot::Backup(backup)) => {
            Slot::Backup(carrier.stay_backup(backup, view))
        }
        (
            Transition::Promote {
                lsn,
                lease_owed_ticks,
            },
            slot,
        ) => promote(carrier, slot, lsn, lease_owed_ticks, view),
        (Transition::StartPrimary, _) => match carrier.load() {
            Ok(segment) => carrier.start_primary(segment, Vec::new(), view, 0, Records::Loaded),
            Err(error) => {
                carrier.note(CarryNote::LoadFailed { error: &error });
                Slot::Outside
            }
        },
        // A restarted node follows the view from the records its log gave back
        // (`RoleRule::with_recovered`).
        (Transition::StayBackup | Transition::Follow { .. }, Slot::Outside) => {
            let Some(segment) = carrier.take_recovered() else {
                unreachable!("only records recovered are followed from outside");
            };
            carrier.start_backup(segment, Vec::new(), view, Records::Recovered)
        }
        (Transition::Follow { lsn }, slot) => follow(carrier, slot, lsn, view),
        (Transition::Rejoin { lsn, discarded }, slot) => {
            rejoin(carrier, slot, lsn, discarded, view)
        }
        (Transition::Reload { discarded }, slot) => {
            carrier.stop(slot, view, discarded);
            carrier.reload_backup(view)
        }
        (Transition::StandBy, slot) => stand_by(carrier, slot, view),
        (Transition::StepDown, Slot::Outside) => {
            carrier.load_spare();
            Slot::Outside
        }
        (Transition::Wait, slot) => {
            carrier.stop(slot, view, 0);
            Slot::Outside
        }
        (transition, _) => unreachable!("{transition:?} from a role it does not apply to"),
    }
}

/// A promotion: from the backup role's records, or from those the log gave back (every
/// node of the group restarted).
fn promote<C: Carrier>(
    carrier: &mut C,
    slot: Slot<C::Primary, C::Backup>,
    lsn: u64,
    lease_owed_ticks: u64,
    view: &View,
) -> Slot<C::Primary, C::Backup> {
    let (segment, tail, records) = match slot {
        Slot::Backup(backup) => match carrier.hand_over(backup, lsn) {
            Ok(handover) => (handover.segment, handover.batches, Records::Kept),
            Err(error) => {
                carrier.note(CarryNote::HandoverRefused { error: &error });
                return Slot::Outside;
            }
        },
        Slot::Outside => match carrier.take_recovered() {
            Some(segment) => (segment, Vec::new(), Records::Recovered),
            None => unreachable!("only records recovered are promoted from outside"),
        },
        Slot::Primary(_) => unreachable!("a primary stays primary, it is not promoted"),
    };
    assert_eq!(segment.lsn(), lsn, "promoted from the LSN it reported");
    carrier.start_primary(segment, tail, view, lease_owed_ticks, records)
}

/// A member follows a new reign's primary with every record it holds (none lies above the
/// truncate LSN `lsn`).
fn follow<C: Carrier>(
    carrier: &mut C,
    slot: Slot<C::Primary, C::Backup>,
    lsn: u64,
    view: &View,
) -> Slot<C::Primary, C::Backup> {
    let kept = match slot {
        Slot::Backup(backup) => match carrier.hand_over(backup, lsn) {
            Ok(handover) => Some((handover.segment, handover.batches)),
            Err(error) => {
                carrier.note(CarryNote::HandoverRefused { error: &error });
                None
            }
        },
        // A deposed primary named a member at once, with nothing above the truncate LSN.
        Slot::Primary(primary) => carrier
            .give_back(primary, view)
            .map(|segment| (segment, Vec::new())),
        Slot::Outside => unreachable!("matched before: a follow from outside"),
    };
    match kept {
        Some((segment, tail)) => {
            assert_eq!(segment.lsn(), lsn, "it follows from the LSN it holds");
            carrier.start_backup(segment, tail, view, Records::Kept)
        }
        None => carrier.reload_backup(view),
    }
}

/// A member follows a new reign's primary from its records rewound to the truncate LSN
/// `lsn`, `discarded` records above it.
fn rejoin<C: Carrier>(
    carrier: &mut C,
    slot: Slot<C::Primary, C::Backup>,
    lsn: u64,
    discarded: u64,
    view: &View,
) -> Slot<C::Primary, C::Backup> {
    let held = match slot {
        Slot::Primary(primary) => carrier.give_back(primary, view),
        Slot::Backup(backup) => match carrier.hand_over(backup, lsn + discarded) {
            Ok(handover) => Some(handover.segment),
            Err(error) => {
                carrier.note(CarryNote::HandoverRefused { error: &error });
                None
            }
        },
        // Records its log gave back.
        Slot::Outside => carrier.take_recovered(),
    };
    let Some(held) = held else {
        return carrier.reload_backup(view);
    };
    match carrier.rewound(held, lsn) {
        Some(segment) => {
            let pages = segment.diverged().len();
            carrier.note(CarryNote::TakesBack {
                lsn,
                discarded,
                pages,
            });
            carrier.start_backup(segment, Vec::new(), view, Records::Rewound)
        }
        None => {
            carrier.note(CarryNote::CannotRewind { lsn, discarded });
            carrier.reload_backup(view)
        }
    }
}

/// A node left out of the view keeps its records, frozen: a backup as it is (the supervisor
/// froze it before deciding), a deposed primary as a backup of its own reign. It loads a
/// spare segment meanwhile, in case the next view truncates them, but asks to join at once.
fn stand_by<C: Carrier>(
    carrier: &mut C,
    slot: Slot<C::Primary, C::Backup>,
    view: &View,
) -> Slot<C::Primary, C::Backup> {
    match slot {
        Slot::Backup(backup) => {
            carrier.load_spare();
            carrier.join_with_records();
            Slot::Backup(backup)
        }
        Slot::Primary(primary) => {
            let view_held = carrier.primary_view(&primary);
            let Some(segment) = carrier.give_back(primary, view) else {
                carrier.load_spare();
                return Slot::Outside;
            };
            carrier.load_spare();
            carrier.join_with_records();
            carrier.start_frozen_backup(segment, view_held, view)
        }
        Slot::Outside => unreachable!("a node outside steps down"),
    }
}

#[cfg(test)]
mod tests {
    //! Every cell of the table on a carrier that records what it was asked, with the failure
    //! paths no correct run takes (a refused handover, a segment a primary cannot give back, a
    //! rewind that cannot be done, a load that fails), which the simulator cannot reach.

    use tandem_memory::{PAGE_SIZE, Strategy};

    use super::*;

    /// A carrier that logs each operation; `Primary` and `Backup` name the role held.
    #[derive(Default)]
    struct Logged {
        ops: Vec<String>,
        refuse_handover: bool,
        cannot_give_back: bool,
        cannot_rewind: bool,
        cannot_load: bool,
    }

    fn segment() -> Segment {
        Segment::anonymous(4 * PAGE_SIZE, Strategy::V3InlineLog).expect("a small segment")
    }

    impl Carrier for Logged {
        type Primary = &'static str;
        type Backup = &'static str;
        type HandoverError = &'static str;
        type LoadError = &'static str;

        fn primary_view(&self, _: &&'static str) -> u64 {
            4
        }

        fn stay_primary(
            &mut self,
            primary: &'static str,
            view: &View,
        ) -> Slot<&'static str, &'static str> {
            self.ops
                .push(format!("{primary} stays in view {}", view.number));
            Slot::Primary(primary)
        }

        fn stay_backup(&mut self, backup: &'static str, view: &View) -> &'static str {
            self.ops
                .push(format!("{backup} stays in view {}", view.number));
            backup
        }

        fn hand_over(&mut self, backup: &'static str, lsn: u64) -> Result<Handover, &'static str> {
            self.ops.push(format!("{backup} hands over at {lsn}"));
            if self.refuse_handover {
                return Err("refused");
            }
            Ok(Handover {
                segment: segment(),
                batches: Vec::new(),
            })
        }

        fn give_back(&mut self, primary: &'static str, _: &View) -> Option<Segment> {
            self.ops.push(format!("{primary} gives its segment back"));
            (!self.cannot_give_back).then(segment)
        }

        fn stop(&mut self, slot: Slot<&'static str, &'static str>, _: &View, discarded: u64) {
            let held = match slot {
                Slot::Outside => "nothing",
                Slot::Primary(role) | Slot::Backup(role) => role,
            };
            self.ops
                .push(format!("{held} stops, {discarded} discarded"));
        }

        fn take_recovered(&mut self) -> Option<Segment> {
            self.ops.push("takes the recovered records".into());
            Some(segment())
        }

        fn load(&mut self) -> Result<Segment, &'static str> {
            self.ops.push("loads".into());
            if self.cannot_load {
                return Err("no memory");
            }
            Ok(segment())
        }

        fn rewound(&mut self, segment: Segment, lsn: u64) -> Option<Segment> {
            self.ops.push(format!("rewinds to {lsn}"));
            (!self.cannot_rewind).then_some(segment)
        }

        fn start_primary(
            &mut self,
            _: Segment,
            _: Vec<SealedBatch>,
            view: &View,
            lease_owed_ticks: u64,
            records: Records,
        ) -> Slot<&'static str, &'static str> {
            self.ops.push(format!(
                "primary of view {} on {records:?} records, {lease_owed_ticks} ticks owed",
                view.number
            ));
            Slot::Primary("new primary")
        }

        fn start_backup(
            &mut self,
            _: Segment,
            _: Vec<SealedBatch>,
            view: &View,
            records: Records,
        ) -> Slot<&'static str, &'static str> {
            self.ops.push(format!(
                "backup of view {} on {records:?} records",
                view.number
            ));
            Slot::Backup("new backup")
        }

        fn start_frozen_backup(
            &mut self,
            _: Segment,
            view_held: u64,
            _: &View,
        ) -> Slot<&'static str, &'static str> {
            self.ops.push(format!("frozen backup of view {view_held}"));
            Slot::Backup("frozen backup")
        }

        fn reload_backup(&mut self, view: &View) -> Slot<&'static str, &'static str> {
            self.ops
                .push(format!("reloaded backup of view {}", view.number));
            Slot::Backup("reloaded backup")
        }

        fn load_spare(&mut self) {
            self.ops.push("loads a spare".into());
        }

        fn join_with_records(&mut self) {
            self.ops.push("joins with its records".into());
        }

        fn note(&mut self, note: CarryNote<'_>) {
            self.ops.push(format!("note: {note}"));
        }
    }

    fn view() -> View {
        View {
            number: 5,
            primary: 1,
            backups: vec![2],
            spares: Vec::new(),
            promotions: Vec::new(),
            primary_sole_holder: false,
        }
    }

    /// Carries `transition` out on `slot`; the role held next and every operation asked.
    fn run(
        mut carrier: Logged,
        transition: Transition,
        slot: Slot<&'static str, &'static str>,
    ) -> (String, Vec<String>) {
        let next = carry_out(&mut carrier, transition, slot, &view());
        let next = match next {
            Slot::Outside => "outside".to_string(),
            Slot::Primary(role) | Slot::Backup(role) => role.to_string(),
        };
        (next, carrier.ops)
    }

    const PRIMARY: Slot<&str, &str> = Slot::Primary("primary");
    const BACKUP: Slot<&str, &str> = Slot::Backup("backup");

    #[test]
    fn promotions_take_the_backups_records_or_the_recovered_ones() {
        let promote = Transition::Promote {
            lsn: 0,
            lease_owed_ticks: 3,
        };
        let (next, ops) = run(Logged::default(), promote, BACKUP);
        assert_eq!(next, "new primary");
        assert_eq!(
            ops,
            [
                "backup hands over at 0",
                "primary of view 5 on Kept records, 3 ticks owed"
            ]
        );
        let (next, ops) = run(Logged::default(), promote, Slot::Outside);
        assert_eq!(next, "new primary");
        assert_eq!(
            ops,
            [
                "takes the recovered records",
                "primary of view 5 on Recovered records, 3 ticks owed"
            ]
        );
    }

    #[test]
    fn a_refused_handover_leaves_a_promoted_node_outside_and_reloads_a_follower() {
        let refusing = || Logged {
            refuse_handover: true,
            ..Logged::default()
        };
        let promote = Transition::Promote {
            lsn: 0,
            lease_owed_ticks: 0,
        };
        let (next, ops) = run(refusing(), promote, BACKUP);
        assert_eq!(next, "outside");
        assert_eq!(
            ops,
            [
                "backup hands over at 0",
                "note: cannot keep its records (refused)"
            ]
        );
        let (next, ops) = run(refusing(), Transition::Follow { lsn: 0 }, BACKUP);
        assert_eq!(next, "reloaded backup");
        assert_eq!(ops.last().unwrap(), "reloaded backup of view 5");
        let rejoin = Transition::Rejoin {
            lsn: 7,
            discarded: 3,
        };
        let (next, ops) = run(refusing(), rejoin, BACKUP);
        assert_eq!(next, "reloaded backup");
        assert_eq!(ops[0], "backup hands over at 10", "above the truncate LSN");
        assert!(!ops.iter().any(|op| op.starts_with("rewinds")), "{ops:?}");
    }

    #[test]
    fn a_follower_keeps_its_records_and_a_deposed_primary_that_cannot_give_them_back_reloads() {
        let (next, ops) = run(Logged::default(), Transition::Follow { lsn: 0 }, BACKUP);
        assert_eq!(next, "new backup");
        assert_eq!(
            ops,
            ["backup hands over at 0", "backup of view 5 on Kept records"]
        );
        let (next, ops) = run(Logged::default(), Transition::Follow { lsn: 0 }, PRIMARY);
        assert_eq!(next, "new backup");
        assert_eq!(
            ops,
            [
                "primary gives its segment back",
                "backup of view 5 on Kept records"
            ]
        );
        let lost = Logged {
            cannot_give_back: true,
            ..Logged::default()
        };
        let (next, ops) = run(lost, Transition::Follow { lsn: 0 }, PRIMARY);
        assert_eq!(next, "reloaded backup");
        assert_eq!(
            ops,
            [
                "primary gives its segment back",
                "reloaded backup of view 5"
            ]
        );
    }

    #[test]
    fn a_rejoin_rewinds_the_records_held_or_reloads() {
        let rejoin = Transition::Rejoin {
            lsn: 7,
            discarded: 3,
        };
        let (next, ops) = run(Logged::default(), rejoin, PRIMARY);
        assert_eq!(next, "new backup");
        assert_eq!(
            ops,
            [
                "primary gives its segment back",
                "rewinds to 7",
                "note: rewinds to the truncate LSN 7, taking back the 3 records above it; \
                 fetches the 0 pages they changed",
                "backup of view 5 on Rewound records",
            ]
        );
        let (_, ops) = run(Logged::default(), rejoin, Slot::Outside);
        assert_eq!(ops[..2], ["takes the recovered records", "rewinds to 7"]);
        let stuck = Logged {
            cannot_rewind: true,
            ..Logged::default()
        };
        let (next, ops) = run(stuck, rejoin, BACKUP);
        assert_eq!(next, "reloaded backup");
        assert_eq!(
            ops[1..],
            [
                "rewinds to 7",
                "note: discarded 3 records above the truncate LSN 7; reloading to catch up from \
                 the primary",
                "reloaded backup of view 5",
            ]
        );
    }

    #[test]
    fn a_node_left_out_stands_by_with_its_records_and_loads_a_spare() {
        let (next, ops) = run(Logged::default(), Transition::StandBy, BACKUP);
        assert_eq!(next, "backup", "the frozen backup is kept");
        assert_eq!(ops, ["loads a spare", "joins with its records"]);
        let (next, ops) = run(Logged::default(), Transition::StandBy, PRIMARY);
        assert_eq!(next, "frozen backup");
        assert_eq!(
            ops,
            [
                "primary gives its segment back",
                "loads a spare",
                "joins with its records",
                "frozen backup of view 4",
            ]
        );
        let lost = Logged {
            cannot_give_back: true,
            ..Logged::default()
        };
        let (next, ops) = run(lost, Transition::StandBy, PRIMARY);
        assert_eq!(next, "outside");
        assert_eq!(ops, ["primary gives its segment back", "loads a spare"]);
        let (next, ops) = run(Logged::default(), Transition::StepDown, Slot::Outside);
        assert_eq!(next, "outside");
        assert_eq!(ops, ["loads a spare"]);
    }

    #[test]
    fn the_rest_of_the_table() {
        let (next, ops) = run(Logged::default(), Transition::StayPrimary, PRIMARY);
        assert_eq!(
            (next.as_str(), ops.as_slice()),
            ("primary", &["primary stays in view 5".to_string()][..])
        );
        let (next, ops) = run(Logged::default(), Transition::StayBackup, BACKUP);
        assert_eq!(
            (next.as_str(), ops.as_slice()),
            ("backup", &["backup stays in view 5".to_string()][..])
        );
        let (next, ops) = run(Logged::default(), Transition::StayBackup, Slot::Outside);
        assert_eq!(next, "new backup");
        assert_eq!(
            ops,
            [
                "takes the recovered records",
                "backup of view 5 on Recovered records"
            ]
        );
        let (next, ops) = run(Logged::default(), Transition::StartPrimary, Slot::Outside);
        assert_eq!(next, "new primary");
        assert_eq!(
            ops,
            ["loads", "primary of view 5 on Loaded records, 0 ticks owed"]
        );
        let failing = Logged {
            cannot_load: true,
            ..Logged::default()
        };
        let (next, ops) = run(failing, Transition::StartPrimary, Slot::Outside);
        assert_eq!(next, "outside");
        assert_eq!(ops, ["loads", "note: cannot load the database: no memory"]);
        let (next, ops) = run(
            Logged::default(),
            Transition::Reload { discarded: 4 },
            BACKUP,
        );
        assert_eq!(next, "reloaded backup");
        assert_eq!(
            ops,
            ["backup stops, 4 discarded", "reloaded backup of view 5"]
        );
        let (next, ops) = run(Logged::default(), Transition::Wait, BACKUP);
        assert_eq!(next, "outside");
        assert_eq!(ops, ["backup stops, 0 discarded"]);
    }
}
