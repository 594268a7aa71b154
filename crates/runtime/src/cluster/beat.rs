//! The beat thread: while the node's thread is busy (a long call, a read-only script on a
//! backup, a checksum, a starved thread on a loaded machine), its links keep speaking. On a
//! link silent for a heartbeat's interval (nothing queued to that peer), it sends:
//! - from a primary role to a backup, a `Pulse` in the role's view, unless the cluster core
//!   took the node as stuck (no turn for `tuning.executor_stall_ms` past a long call's
//!   allowance), as the link threads did;
//! - from a backup role to its primary, the role's last ack again with no tick echoed (it
//!   extends no lease and claims nothing the role had not acknowledged), unless the node
//!   thread began no turn for `tuning.executor_stall_ms` while no script runs (a script
//!   stops at its own limits).
//!
//! So a busy node keeps its peers hearing it and a stuck one falls silent; a dead process
//! sends nothing at all, so a kill is still seen at once (its closed sockets).
//!
//! The node's thread publishes the links ([`Beats::publish`]) and the backup role's last ack
//! ([`Beats::note_ack`]); the beat thread writes through each connection's [`PeerOut`] lock,
//! the one the node's thread writes through, so frames never interleave and a sealed link's
//! sequence holds.
//!
//! The beat waits on nothing an ordinary thread can hold for long. It takes two locks the
//! node's thread takes too, what is published and each link's [`PeerOut`], and both are
//! [`PiMutex`]es: while the beat waits for one, the node's thread holding it runs at the
//! beat's real-time priority, so a machine busy with ordinary threads cannot keep it
//! preempted mid-write, and the beat waits only for the rest of a seal or a write. (The
//! kernel boosts only for a real-time waiter: under the nice −20 fallback, the beat waits
//! as any thread would.) The rest is the beat's own or lock-free: the `turns` lock no other
//! thread takes, the turn count and the stuck verdict (atomics), the script watch (atomics).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use tandem_config::GroupId;
use tandem_replication::{Message, NodeId};
use tandem_store::CallWatch;
use tandem_wire::encode_peer;

use super::peers::PeerOut;
use crate::primary::Progress;

/// The shortest the beat thread sleeps between two looks.
const SLEEP_MIN: Duration = Duration::from_micros(200);

/// What the beat sends on a silent link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Beat {
    /// From a primary role to a backup: a pulse in the role's view.
    Pulse { view: u64 },
    /// From a backup role to its primary: the role's last ack again, echoing no tick.
    Ack,
}

/// A lock the node's thread shares with the beat thread: a Linux priority-inheritance futex
/// (`FUTEX_LOCK_PI`), so that a holder the beat waits for runs at the beat's priority until
/// it lets go (see the module). Untaken, it costs what `std`'s mutex does: a compare-and-swap
/// to take it and one to let go. It does not poison: a node thread that panics ends the
/// process.
pub(super) type PiMutex<T> = priority_inheriting_lock::PriorityInheritingLock<T>;

/// A link the beat speaks on: (peer, the connection's number, the group of the role, what it
/// sends, the write side). One connection carries the links of every group two nodes share.
pub(super) type BeatLink = (NodeId, u64, GroupId, Beat, Arc<PiMutex<PeerOut>>);

/// What the node's thread publishes for the beat.
#[derive(Default)]
struct Published {
    links: Vec<BeatLink>,
    /// The last ack each group's backup role sent its primary.
    last_ack: BTreeMap<GroupId, Message>,
}

/// When the node's thread last began a turn, as the beat saw it.
struct Turns {
    seen: u64,
    moved_at: Instant,
}

/// What the node's thread shares with the beat thread.
pub(super) struct Beats {
    /// Taken by the node's thread when its links change and for each ack a backup role sends.
    published: PiMutex<Published>,
    progress: Arc<Progress>,
    /// Scripts under way: a backup role's read may run one for as long as its limits let it.
    watch: Option<Arc<CallWatch>>,
    interval: Duration,
    /// A node thread that began no turn for this long, with no script running, is stuck.
    stall: Duration,
    /// The beat thread's alone (it needs `&self`).
    turns: Mutex<Turns>,
}

impl Beats {
    /// Starts the beat thread of the node `config` describes, whose turns `progress` counts
    /// and whose scripts run under `watch`.
    pub(super) fn start(
        config: &crate::config::NodeConfig,
        progress: Arc<Progress>,
        watch: Option<Arc<CallWatch>>,
    ) -> Result<Arc<Beats>, crate::StartError> {
        let beats = Arc::new(Beats::new(&config.tuning, progress, watch));
        let running = Arc::clone(&beats);
        std::thread::Builder::new()
            .name("beat".into())
            .spawn(move || running.run())
            .map_err(|source| crate::StartError::Thread {
                thread: "the beat",
                source,
            })?;
        Ok(beats)
    }

    fn new(
        tuning: &crate::config::Tuning,
        progress: Arc<Progress>,
        watch: Option<Arc<CallWatch>>,
    ) -> Beats {
        Beats {
            published: PiMutex::new(Published::default()),
            turns: Mutex::new(Turns {
                seen: progress.turns(),
                moved_at: Instant::now(),
            }),
            progress,
            watch,
            interval: beat_interval(tuning),
            stall: Duration::from_millis(tuning.executor_stall_ms),
        }
    }

    /// The links the node's roles hold now. The node's thread calls it only when they
    /// changed.
    pub(super) fn publish(&self, links: Vec<BeatLink>) {
        let mut published = self.published.lock();
        // A group whose backup role holds no link any more repeats no ack.
        let acking = |group: &GroupId| {
            links
                .iter()
                .any(|&(_, _, of, beat, _)| of == *group && beat == Beat::Ack)
        };
        published.last_ack.retain(|group, _| acking(group));
        published.links = links;
    }

    /// `group`'s backup role sent its primary `ack`.
    pub(super) fn note_ack(&self, group: GroupId, ack: &Message) {
        if let Message::Ack { .. } = ack {
            self.published.lock().last_ack.insert(group, ack.clone());
        }
    }

    /// Runs the beat until the node stops, at a raised priority where the system lets it.
    pub(super) fn run(self: Arc<Beats>) {
        match raise_priority() {
            Ok(raised) => tracing::info!("the beat thread runs {}", raised.words()),
            Err(err) => tracing::warn!(
                "the beat thread runs at the node's priority: the system refused a higher one \
                 ({err}); a busy machine may delay a primary's pulses (give the process \
                 CAP_SYS_NICE, or run it as root, to raise it)"
            ),
        }
        let mut frame = Vec::new();
        // The node holds the beat while it runs: once this thread alone holds it, the node
        // stopped (one run inside another program; a node process ends with its process).
        while Arc::strong_count(&self) > 1 {
            let sleep = self.beat_once(Instant::now(), &mut frame);
            std::thread::sleep(sleep.max(SLEEP_MIN));
        }
    }

    /// Whether a backup role's node thread looks stuck at `now`: no turn began for the
    /// stall allowance and no script runs.
    fn backup_stuck(&self, now: Instant) -> bool {
        let mut turns = self.turns.lock().expect("not poisoned");
        let seen = self.progress.turns();
        if seen != turns.seen {
            *turns = Turns {
                seen,
                moved_at: now,
            };
        }
        let script = self
            .watch
            .as_ref()
            .is_some_and(|watch| watch.running().is_some());
        now.saturating_duration_since(turns.moved_at) >= self.stall && !script
    }

    /// Speaks on every link silent for an interval; returns how long until one may be due.
    fn beat_once(&self, now: Instant, frame: &mut Vec<u8>) -> Duration {
        let published = self.published.lock();
        let primary_stuck = self.progress.is_stuck();
        let backup_stuck = self.backup_stuck(now);
        let mut next = self.interval;
        // A connection found silent is spoken on for every group's link it carries, though
        // the first beat on it makes it heard.
        let mut beaten: Vec<u64> = Vec::new();
        for &(_, number, group, beat, ref out) in &published.links {
            let mut out = out.lock();
            let silent = now.saturating_duration_since(out.queued_at);
            if silent < self.interval && !beaten.contains(&number) {
                next = next.min(self.interval - silent);
                continue;
            }
            let message = match beat {
                Beat::Pulse { view } if !primary_stuck => Message::Pulse { view },
                Beat::Ack if !backup_stuck => match published.last_ack.get(&group) {
                    Some(Message::Ack {
                        view,
                        lsn_received,
                        lsn_applied,
                        lsn_durable,
                        ..
                    }) => Message::Ack {
                        view: *view,
                        lsn_received: *lsn_received,
                        lsn_applied: *lsn_applied,
                        lsn_durable: *lsn_durable,
                        tick_echoed: 0,
                    },
                    _ => continue,
                },
                _ => continue,
            };
            frame.clear();
            encode_peer(frame, group, &message);
            beaten.push(number);
            // A write that fails is the node's thread's to find and report.
            if out.frames(frame).is_ok() {
                let _ = out.flush();
            }
        }
        next
    }
}

/// How long a link may be silent before the beat speaks on it: a quarter of the silence a
/// peer suspects after (`suspect_ticks`), so a busy node's peers hear it four times within
/// that bound, and never less than a heartbeat's interval. The node's thread sends its own
/// heartbeats every interval; the beat only stands in when it is late, and waking once a
/// millisecond to find it on time cost the primary 7% of its CPU under load.
fn beat_interval(tuning: &crate::config::Tuning) -> Duration {
    let heartbeat_us = tuning.tick_us * tuning.heartbeat_ticks;
    let quarter_suspect_us = tuning.tick_us * tuning.suspect_ticks / 4;
    Duration::from_micros(heartbeat_us.max(quarter_suspect_us))
}

/// The priority the beat thread got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Raised {
    /// `SCHED_FIFO` 1: ahead of every ordinary thread, and lent to a lock's holder it waits for.
    RealTime,
    /// nice −20: the system refused a real-time priority.
    HighestOrdinary,
}

impl Raised {
    fn words(self) -> &'static str {
        match self {
            Raised::RealTime => "at real-time priority (SCHED_FIFO 1)",
            Raised::HighestOrdinary => "at the highest ordinary priority (nice -20)",
        }
    }
}

/// Puts the calling thread ahead of every ordinary thread: the lowest real-time priority
/// (`SCHED_FIFO` 1), or failing that the highest ordinary one (nice −20). The beat sleeps
/// almost always and works for microseconds when it wakes, so it cannot starve the machine.
fn raise_priority() -> Result<Raised, thread_priority::Error> {
    use thread_priority::{
        NormalThreadSchedulePolicy, RealtimeThreadSchedulePolicy, ThreadPriority,
        ThreadSchedulePolicy, set_thread_priority_and_policy, thread_native_id,
    };
    let me = thread_native_id();
    let fifo = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
    if set_thread_priority_and_policy(me, ThreadPriority::Min, fifo).is_ok() {
        return Ok(Raised::RealTime);
    }
    let normal = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
    set_thread_priority_and_policy(me, ThreadPriority::Max, normal)?;
    Ok(Raised::HighestOrdinary)
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    use tandem_wire::{Frame, FrameBuffer};

    use super::*;

    /// A beat speaking for one link (to node 2, in view 7) whose last frame left `silent`
    /// ago, and the backup's end of it.
    fn beat_with_link(silent: Duration) -> (Beats, TcpStream, Instant) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let backup = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (primary, _) = listener.accept().unwrap();
        primary.set_nonblocking(true).unwrap();
        let now = Instant::now() + Duration::from_secs(1);
        let out = PeerOut::plain(primary, now - silent);
        let beats = test_beats();
        let link = (
            2,
            1,
            0,
            Beat::Pulse { view: 7 },
            Arc::new(PiMutex::new(out)),
        );
        beats.publish(vec![link]);
        (beats, backup, now)
    }

    /// A beat with a 10 ms interval (heartbeats every 10 ticks of 1 ms, suspicion after 30)
    /// and a 1 s stall allowance.
    fn test_beats() -> Beats {
        let tuning = crate::config::Tuning {
            tick_us: 1000,
            heartbeat_ticks: 10,
            suspect_ticks: 30,
            executor_stall_ms: 1000,
            ..crate::config::Tuning::default()
        };
        Beats::new(&tuning, Arc::new(Progress::default()), None)
    }

    /// The frames of group 0 the backup received within 50 ms.
    fn received(backup: &mut TcpStream) -> Vec<Message> {
        received_in_groups(backup)
            .into_iter()
            .map(|(group, message)| {
                assert_eq!(group, 0);
                message
            })
            .collect()
    }

    /// The frames the peer received within 50 ms, with their groups.
    fn received_in_groups(backup: &mut TcpStream) -> Vec<(GroupId, Message)> {
        backup
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut buffer = FrameBuffer::new(1 << 20);
        let mut messages = Vec::new();
        while let Ok(n) = backup.read(buffer.spare()) {
            if n == 0 {
                break;
            }
            buffer.filled(n);
            while let Some(Frame::Peer { group, message }) = buffer.next_frame().unwrap() {
                messages.push((group, message));
            }
        }
        messages
    }

    #[test]
    fn a_link_silent_for_an_interval_is_pulsed_in_the_roles_view() {
        let (beats, mut backup, now) = beat_with_link(Duration::from_millis(10));
        let mut frame = Vec::new();
        assert_eq!(beats.beat_once(now, &mut frame), Duration::from_millis(10));
        assert_eq!(received(&mut backup), [Message::Pulse { view: 7 }]);
    }

    /// Node 1 leads group 1, which node 2 backs up, and backs up group 2, which node 2
    /// leads: one silent connection carries both groups' beats, each in its own group.
    #[test]
    fn a_silent_connection_carries_the_beat_of_every_group_it_links() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, _) = listener.accept().unwrap();
        conn.set_nonblocking(true).unwrap();
        let now = Instant::now() + Duration::from_millis(100);
        let out = Arc::new(PiMutex::new(PeerOut::plain(
            conn,
            now - Duration::from_millis(10),
        )));
        let beats = test_beats();
        beats.publish(vec![
            (2, 1, 1, Beat::Pulse { view: 7 }, Arc::clone(&out)),
            (2, 1, 2, Beat::Ack, out),
        ]);
        beats.note_ack(2, &ack(17));
        let mut frame = Vec::new();
        beats.beat_once(now, &mut frame);
        assert_eq!(
            received_in_groups(&mut peer),
            [(1, Message::Pulse { view: 7 }), (2, ack(0))]
        );
    }

    #[test]
    fn a_link_heard_lately_waits_for_the_rest_of_its_interval() {
        let (beats, mut backup, now) = beat_with_link(Duration::from_millis(4));
        let mut frame = Vec::new();
        assert_eq!(beats.beat_once(now, &mut frame), Duration::from_millis(6));
        assert!(received(&mut backup).is_empty());
    }

    #[test]
    fn a_stuck_node_is_not_pulsed_for() {
        let (beats, mut backup, now) = beat_with_link(Duration::from_millis(30));
        beats.progress.set_stuck(true);
        let mut frame = Vec::new();
        beats.beat_once(now, &mut frame);
        assert!(received(&mut backup).is_empty());
        beats.progress.set_stuck(false);
        beats.beat_once(now, &mut frame);
        assert_eq!(received(&mut backup), [Message::Pulse { view: 7 }]);
    }

    /// A beat for a backup role's link to its primary (node 1), whose last frame left
    /// `silent` before the returned instant; the primary's end of it.
    fn backup_beat(silent: Duration) -> (Beats, TcpStream, Instant) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let primary = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (backup, _) = listener.accept().unwrap();
        backup.set_nonblocking(true).unwrap();
        let beats = test_beats();
        // Within the stall allowance of the beat's making.
        let now = Instant::now() + Duration::from_millis(100);
        let out = PeerOut::plain(backup, now - silent);
        beats.publish(vec![(1, 1, 0, Beat::Ack, Arc::new(PiMutex::new(out)))]);
        (beats, primary, now)
    }

    fn ack(tick_echoed: u64) -> Message {
        Message::Ack {
            view: 3,
            lsn_received: 40,
            lsn_applied: 38,
            lsn_durable: 0,
            tick_echoed,
        }
    }

    #[test]
    fn a_busy_backup_repeats_its_last_ack_echoing_no_tick() {
        let (beats, mut primary, now) = backup_beat(Duration::from_millis(10));
        let mut frame = Vec::new();
        // No ack yet: nothing to repeat.
        beats.beat_once(now, &mut frame);
        assert!(received(&mut primary).is_empty());
        beats.note_ack(0, &ack(17));
        beats.note_ack(0, &Message::Pulse { view: 3 });
        beats.beat_once(now, &mut frame);
        assert_eq!(received(&mut primary), [ack(0)]);
    }

    #[test]
    fn a_backup_stuck_past_its_allowance_falls_silent() {
        let (beats, mut primary, now) = backup_beat(Duration::from_millis(10));
        beats.note_ack(0, &ack(17));
        let mut frame = Vec::new();
        let later = now + Duration::from_secs(1);
        beats.beat_once(later, &mut frame);
        assert!(received(&mut primary).is_empty(), "no turn for 1.1 s");
        // A turn begins: the backup speaks again.
        beats.progress.turn();
        beats.beat_once(later, &mut frame);
        assert_eq!(received(&mut primary), [ack(0)]);
    }

    /// The calling thread's scheduling priority now, as the kernel runs it (a lock's boost
    /// included): field 18 of its `/proc` stat, 0 to 39 for an ordinary thread (20 + nice),
    /// below 0 for a real-time one.
    fn priority_now() -> i64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The thread's name, in parentheses, may hold spaces: count the fields after it.
        let after_name = &stat[stat.rfind(')').unwrap() + 1..];
        after_name
            .split_whitespace()
            .nth(15)
            .unwrap()
            .parse()
            .unwrap()
    }

    /// The calling thread, of ordinary priority, holds `guard` (a lock the beat takes) as a
    /// node thread preempted mid-write would, while a beat thread at real-time priority runs
    /// `beats.beat_once(now)`. Says whether the holder was seen running at a real-time
    /// priority before it let go (it lets go once it is, or after ten seconds of looking),
    /// or `None` if the system refuses the beat a real-time priority (nothing to lend). The
    /// beat has spoken when this returns.
    fn holder_raised_while_the_beat_waits<G>(
        beats: &Beats,
        now: Instant,
        guard: G,
    ) -> Option<bool> {
        assert!(
            priority_now() >= 0,
            "the holder starts at an ordinary priority"
        );
        let (raised_tx, raised_rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let raised = raise_priority();
                raised_tx
                    .send(matches!(raised, Ok(Raised::RealTime)))
                    .unwrap();
                beats.beat_once(now, &mut Vec::new());
            });
            let real_time = raised_rx.recv().unwrap();
            let mut seen_raised = false;
            for _ in 0..10_000 {
                if !real_time || priority_now() < 0 {
                    seen_raised = real_time;
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(guard);
            real_time.then_some(seen_raised)
        })
    }

    #[test]
    fn a_node_thread_holding_the_link_runs_at_the_beats_priority_until_the_pulse_is_out() {
        let (beats, mut backup, now) = beat_with_link(Duration::from_millis(10));
        let out = Arc::clone(&beats.published.lock().links[0].4);
        // The node's thread, stopped mid-write: its frame is sealed, not yet written.
        let mut guard = out.lock();
        let mut frame = Vec::new();
        encode_peer(&mut frame, 0, &Message::Pulse { view: 6 });
        guard.frames(&frame).unwrap();
        let Some(raised) = holder_raised_while_the_beat_waits(&beats, now, guard) else {
            eprintln!("skipped: the system refuses real-time priority");
            return;
        };
        assert!(
            raised,
            "the holder of the link's lock kept its ordinary priority"
        );
        // Both frames whole and in order: the node's, then the beat's.
        assert_eq!(
            received(&mut backup),
            [Message::Pulse { view: 6 }, Message::Pulse { view: 7 }]
        );
    }

    #[test]
    fn a_node_thread_noting_an_ack_runs_at_the_beats_priority_until_the_ack_is_repeated() {
        let (beats, mut primary, now) = backup_beat(Duration::from_millis(10));
        // The node's thread, stopped in `note_ack`.
        let mut published = beats.published.lock();
        published.last_ack.insert(0, ack(17));
        let Some(raised) = holder_raised_while_the_beat_waits(&beats, now, published) else {
            eprintln!("skipped: the system refuses real-time priority");
            return;
        };
        assert!(
            raised,
            "the holder of what is published kept its ordinary priority"
        );
        assert_eq!(received(&mut primary), [ack(0)]);
    }

    #[test]
    fn the_beat_waits_a_quarter_of_the_suspicion_window_or_a_heartbeat() {
        let defaults = crate::config::Tuning::default();
        assert_eq!(
            (
                defaults.tick_us,
                defaults.heartbeat_ticks,
                defaults.suspect_ticks
            ),
            (1000, 1, 30)
        );
        assert_eq!(beat_interval(&defaults), Duration::from_micros(7500));
        let slow_heartbeats = crate::config::Tuning {
            heartbeat_ticks: 10,
            ..defaults
        };
        assert_eq!(beat_interval(&slow_heartbeats), Duration::from_millis(10));
    }
}
