//! The readers: closed loops of read-only calls sent to each node in turn, as the stub's
//! `read` sends them to a backup, and the checker of what the backups answer.
//!
//! The checker holds every served read to its consistency: a read reflects at least its
//! reader's `min_lsn` (session), and a linearizable read reflects every answer any client
//! was given before it was sent: its LSN is at least the highest LSN answered by then. Under
//! 1-safe and bounded rules a failover may rightly lose answered commits, and LSNs go back
//! with them, so the linearizable check holds under the 2-safe rules, while no crash has
//! taken the only copy of answered records.

use super::*;

impl World {
    /// Sends reader `reader`'s next read to the next node in turn.
    pub(super) fn reader_next(&mut self, reader: usize) {
        if !self.faults_on {
            // After healing, readers start nothing new.
            return;
        }
        let consistency = match self.rng.below(8) {
            0 => ReadConsistency::Session,
            1 => ReadConsistency::Bounded { staleness_ms: 1 },
            _ => ReadConsistency::Linearizable,
        };
        let call = self.read_call();
        let nodes = self.nodes.len();
        let lsn_acked_before = self.group(self.readers[reader].group).lsn_answered_max;
        let power_losses = self.report.power_losses;
        let state = &mut self.readers[reader];
        state.seq += 1;
        state.conn += 1;
        state.epoch += 1;
        let to = (state.node_next % nodes) as NodeId + 1;
        state.node_next += 1;
        let sent = ReadSent {
            seq: state.seq,
            conn: state.conn,
            min_lsn: state.lsn_seen,
            consistency,
            lsn_acked_before,
            power_losses,
        };
        state.in_flight = Some(sent);
        let epoch = state.epoch;
        let wire = Wire::Read {
            conn: sent.conn,
            seq: sent.seq,
            call,
            min_lsn: sent.min_lsn,
            consistency,
        };
        self.send(READER_BASE + reader as NodeId, to, wire);
        self.schedule(READER_TIMEOUT_MICROS, Event::ReaderTimer { reader, epoch });
    }

    /// A read-only call of the run's model: an account's balance, or a counter's `GET`.
    fn read_call(&mut self) -> SimCall {
        match self.report.model {
            Model::DebitCredit => SimCall {
                proc_id: tandem_workloads::debit_credit::BALANCE,
                args: (self.rng.below(100) as u32).to_le_bytes().to_vec(),
            },
            Model::Redis => {
                let key = format!("n:{}", self.rng.below(4));
                let (proc_id, args) =
                    RedisCall::Command(vec![b"GET".to_vec(), key.into_bytes()]).encode();
                SimCall { proc_id, args }
            }
        }
    }

    /// Nobody served reader `reader`'s read in time: it moves on.
    pub(super) fn reader_timer(&mut self, reader: usize, epoch: u64) {
        let state = &mut self.readers[reader];
        if state.epoch != epoch || state.in_flight.take().is_none() {
            return;
        }
        state.epoch += 1;
        self.report.reads_unserved += 1;
        self.schedule_next_read(reader);
    }

    pub(super) fn reader_receive(&mut self, reader: usize, wire: Wire) -> Result<(), String> {
        let Wire::ReadAnswer {
            conn,
            seq,
            served_at,
        } = wire
        else {
            return Err(self.fail(format!("reader {reader} got {wire:?}")));
        };
        let state = &mut self.readers[reader];
        let Some(sent) = state
            .in_flight
            .filter(|sent| sent.conn == conn && sent.seq == seq)
        else {
            // An answer to a read the reader gave up.
            return Ok(());
        };
        state.in_flight = None;
        state.epoch += 1;
        let Some(lsn) = served_at else {
            self.report.reads_unserved += 1;
            self.schedule_next_read(reader);
            return Ok(());
        };
        state.lsn_seen = state.lsn_seen.max(lsn);
        self.report.reads_served += 1;
        if lsn < sent.min_lsn {
            return Err(self.fail(format!(
                "reader {reader}'s read {seq} was served at LSN {lsn}, older than the LSN {} \
                 it had seen",
                sent.min_lsn
            )));
        }
        let group = state.group;
        let answers_kept = fenced_by_acks(self.faults.safety) && !self.group(group).sole_copy_lost;
        if sent.consistency == ReadConsistency::Linearizable
            && answers_kept
            && lsn < sent.lsn_acked_before
        {
            return Err(self.fail(format!(
                "reader {reader}'s linearizable read {seq} was served at LSN {lsn}, but a \
                 client had been answered at LSN {} before it was sent",
                sent.lsn_acked_before
            )));
        }
        // A read served before a power loss (its answer still on the way) raises nothing that
        // reads sent after it are judged by, unless its records were in the logs.
        if answers_kept && self.acked_kept(sent.power_losses) {
            let sim = self.group_mut(group);
            sim.lsn_answered_max = sim.lsn_answered_max.max(lsn);
        }
        self.schedule_next_read(reader);
        Ok(())
    }

    fn schedule_next_read(&mut self, reader: usize) {
        let think = self.rng.below(MICROS_PER_TICK / 10);
        self.schedule(think, Event::ReaderNext { reader });
    }

    /// A reader's read reaches node `to`: a backup keeps it for its applier's rule; any other
    /// node answers that it serves no reads.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_at(
        &mut self,
        from: NodeId,
        to: NodeId,
        conn: u64,
        seq: u64,
        call: SimCall,
        min_lsn: u64,
        consistency: ReadConsistency,
    ) -> Result<(), String> {
        let now = self.now;
        let reader = (from - READER_BASE) as usize;
        let needs = Needs::of(consistency, |staleness_ms| {
            now.saturating_sub(u64::from(staleness_ms) * 1_000)
        });
        let read = WaitingRead {
            seq,
            proc_id: call.proc_id.0,
            min_lsn,
            args: call.args,
            deadline: now + READ_WAIT_MICROS,
            to: (reader, conn),
            needs,
        };
        let group = self.readers[reader].group;
        let kept = self.with_node(to, |member, env| member.read(group, read, env));
        if kept.transpose()? != Some(true) {
            let refused = Wire::ReadAnswer {
                conn,
                seq,
                served_at: None,
            };
            self.send(to, from, refused);
        }
        Ok(())
    }
}
