//! The clients: closed loops that call like the stub, resending the same (client id, seq)
//! to the next node on a timeout or to the named primary on "not primary".

use super::*;

impl World {
    pub(super) fn client_next(&mut self, client: usize) {
        if !self.faults_on || self.clients[client].call.is_some() {
            // After healing, clients finish what they started and start nothing new.
            return;
        }
        let state = &mut self.clients[client];
        state.seq += 1;
        let seq = state.seq;
        let mut args = Vec::new();
        state
            .driver
            .as_mut()
            .expect("a client has a driver")
            .next_call(&mut args);
        state.call = Some((seq, args));
        state.attempt = 0;
        state.deadline_at = self.now + self.faults.deadline;
        self.report.calls += 1;
        self.client_send(client);
    }

    /// Sends the call in flight to the node the client believes is the primary, and sets the
    /// retry timer.
    pub(super) fn client_send(&mut self, client: usize) {
        let state = &mut self.clients[client];
        let Some((seq, args)) = state.call.clone() else {
            return;
        };
        state.attempt += 1;
        let attempt = state.attempt;
        let target = state.target;
        let retry = self.faults.retry_after.min(state.deadline_at - self.now);
        self.send(
            CLIENT_BASE + client as NodeId,
            target,
            Wire::Call { seq, args },
        );
        // One timer per attempt: the retry, or the deadline if it comes first.
        self.schedule(
            retry,
            Event::ClientRetry {
                client,
                seq,
                attempt,
                rotate: true,
            },
        );
    }

    /// Like the stub: resend with the same (client id, seq), to the next node when the last
    /// attempt got no answer in time.
    pub(super) fn client_retry(&mut self, client: usize, seq: u64, attempt: u64, rotate: bool) {
        let nodes = self.faults.nodes as NodeId;
        let state = &mut self.clients[client];
        let waiting = state
            .call
            .as_ref()
            .is_some_and(|(waiting, _)| *waiting == seq);
        if !waiting || state.attempt != attempt {
            return;
        }
        if self.now >= state.deadline_at {
            state.call = None;
            self.report.deadline_errors += 1;
            self.note(format!("client {client} call {seq}: deadline"));
            self.schedule_next_call(client);
            return;
        }
        if rotate {
            state.target = state.target % nodes + 1;
        }
        self.client_send(client);
    }

    pub(super) fn client_receive(
        &mut self,
        client: usize,
        from: NodeId,
        wire: Wire,
    ) -> Result<(), String> {
        let state = &mut self.clients[client];
        let waiting = |seq: u64| state.call.as_ref().is_some_and(|(w, _)| *w == seq);
        match wire {
            Wire::Reply { seq, lsn, .. } if waiting(seq) => {
                // Under a 1-safe rule a new view may rightly lose released commits, and
                // LSNs go back with them.
                if lsn < state.lsn_last && fenced_by_acks(self.faults.safety) {
                    let last = state.lsn_last;
                    return Err(self.fail(format!(
                        "client {client} got LSN {lsn} for call {seq} after LSN {last}"
                    )));
                }
                state.lsn_last = lsn;
                state.call = None;
                state.target = from;
                self.report.replies += 1;
                self.schedule_next_call(client);
            }
            Wire::NotPrimary { seq, primary } if waiting(seq) => {
                // Follow the hint, or move on if the node named itself (it is not serving).
                let nodes = self.faults.nodes as NodeId;
                state.target = if primary == from {
                    from % nodes + 1
                } else {
                    primary
                };
                // The timer of this attempt is void now; a short pause, like the stub's
                // backoff, before resending.
                state.attempt += 1;
                let attempt = state.attempt;
                let pause = (MICROS_PER_TICK / 2).min(state.deadline_at - self.now);
                self.schedule(
                    pause,
                    Event::ClientRetry {
                        client,
                        seq,
                        attempt,
                        rotate: false,
                    },
                );
            }
            // A late answer to a call the client finished or gave up on.
            _ => {}
        }
        Ok(())
    }

    pub(super) fn schedule_next_call(&mut self, client: usize) {
        // Closed-loop clients: a short think between calls.
        let think = self.rng.below(MICROS_PER_TICK / 10);
        self.schedule(think, Event::ClientNext { client });
    }
}
