//! The beat thread: while the node's thread is busy (a long call, a checksum, a starved
//! thread on a loaded machine), a primary role's backups keep hearing it. For each backup
//! linked to the primary role, it sends a `Pulse` when nothing was queued to that backup for
//! a heartbeat's interval, unless the cluster core took the node as stuck (no turn for
//! `tuning.executor_stall_ms`): the backups keep hearing a busy primary and stop hearing a
//! stuck one. A dead process sends nothing at all, so a kill is still seen at once (its
//! closed sockets) and a stuck node after the core's stall allowance.
//!
//! The node's thread publishes the links and the role's view ([`Beats::publish`]); the beat
//! thread writes through each connection's [`PeerOut`] lock, the one the node's thread
//! writes through, so frames never interleave and a sealed link's sequence holds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tandem_replication::{Message, NodeId};
use tandem_wire::encode_peer;

use super::peers::PeerOut;
use crate::primary::Progress;

/// The shortest the beat thread sleeps between two looks.
const SLEEP_MIN: Duration = Duration::from_micros(200);

/// The links a primary role's beat speaks for, and the role's view.
#[derive(Default)]
struct Published {
    view: u64,
    /// (backup, the connection's number, its write side).
    links: Vec<(NodeId, u64, Arc<Mutex<PeerOut>>)>,
}

/// What the node's thread shares with the beat thread.
pub(super) struct Beats {
    published: Mutex<Published>,
    progress: Arc<Progress>,
    interval: Duration,
}

impl Beats {
    /// Starts the beat thread of the node `config` describes, whose primary roles' turns
    /// `progress` counts.
    pub(super) fn start(
        config: &crate::config::NodeConfig,
        progress: Arc<Progress>,
    ) -> Result<Arc<Beats>, crate::StartError> {
        let tuning = &config.tuning;
        let beats = Arc::new(Beats {
            published: Mutex::new(Published::default()),
            progress,
            interval: Duration::from_micros(tuning.tick_us * tuning.heartbeat_ticks),
        });
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

    /// The primary role's links in `view` (none: no primary role). The node's thread calls
    /// it only when they changed.
    pub(super) fn publish(&self, view: u64, links: Vec<(NodeId, u64, Arc<Mutex<PeerOut>>)>) {
        *self.published.lock().expect("not poisoned") = Published { view, links };
    }

    /// Runs the beat until the process stops, at a raised priority where the system lets it.
    pub(super) fn run(self: Arc<Beats>) {
        match raise_priority() {
            Ok(how) => tracing::info!("the beat thread runs {how}"),
            Err(err) => tracing::warn!(
                "the beat thread runs at the node's priority: the system refused a higher one \
                 ({err}); a busy machine may delay a primary's pulses (give the process \
                 CAP_SYS_NICE, or run it as root, to raise it)"
            ),
        }
        let mut frame = Vec::new();
        loop {
            let sleep = self.beat_once(Instant::now(), &mut frame);
            std::thread::sleep(sleep.max(SLEEP_MIN));
        }
    }

    /// Pulses every link silent for an interval; returns how long until one may be due.
    fn beat_once(&self, now: Instant, frame: &mut Vec<u8>) -> Duration {
        let published = self.published.lock().expect("not poisoned");
        let stuck = self.progress.is_stuck();
        let mut next = self.interval;
        for (_, _, out) in &published.links {
            let mut out = out.lock().expect("not poisoned");
            let silent = now.saturating_duration_since(out.queued_at);
            if silent < self.interval {
                next = next.min(self.interval - silent);
                continue;
            }
            if stuck {
                continue;
            }
            frame.clear();
            encode_peer(
                frame,
                &Message::Pulse {
                    view: published.view,
                },
            );
            // A write that fails is the node's thread's to find and report.
            if out.frames(frame).is_ok() {
                let _ = out.flush();
            }
        }
        next
    }
}

/// Puts the calling thread ahead of every ordinary thread: the lowest real-time priority
/// (`SCHED_FIFO` 1), or failing that the highest ordinary one (nice −20). The beat sleeps
/// almost always and works for microseconds when it wakes, so it cannot starve the machine.
fn raise_priority() -> Result<&'static str, thread_priority::Error> {
    use thread_priority::{
        NormalThreadSchedulePolicy, RealtimeThreadSchedulePolicy, ThreadPriority,
        ThreadSchedulePolicy, set_thread_priority_and_policy, thread_native_id,
    };
    let me = thread_native_id();
    let fifo = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
    if set_thread_priority_and_policy(me, ThreadPriority::Min, fifo).is_ok() {
        return Ok("at real-time priority (SCHED_FIFO 1)");
    }
    let normal = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
    set_thread_priority_and_policy(me, ThreadPriority::Max, normal)?;
    Ok("at the highest ordinary priority (nice -20)")
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
        let beats = Beats {
            published: Mutex::new(Published::default()),
            progress: Arc::new(Progress::default()),
            interval: Duration::from_millis(10),
        };
        beats.publish(7, vec![(2, 1, Arc::new(Mutex::new(out)))]);
        (beats, backup, now)
    }

    /// The frames the backup received within 50 ms.
    fn received(backup: &mut TcpStream) -> Vec<Message> {
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
            while let Some(Frame::Peer(message)) = buffer.next_frame().unwrap() {
                messages.push(message);
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
}
