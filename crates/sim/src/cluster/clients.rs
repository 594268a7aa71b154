//! The clients: closed loops of calls, each routed by the stub's own `Router`
//! (`tandem_client::route`), which decides whom to greet, when to resend the same
//! (client id, seq), when to pause and when a call is over. This module only carries its
//! actions out on the simulated network and clock, as the blocking `Client` does over TCP.

use super::*;

impl World {
    pub(super) fn client_next(&mut self, client: usize) -> Result<(), String> {
        if !self.faults_on || self.clients[client].call.is_some() {
            // After healing, clients finish what they started and start nothing new.
            return Ok(());
        }
        let now = self.now_duration();
        let state = &mut self.clients[client];
        state.seq += 1;
        let (proc_id, args) = match &mut state.calls {
            ClientCalls::Driver(driver) => {
                let mut args = Vec::new();
                let proc_id = driver.next_call(&mut args);
                (proc_id, args)
            }
            ClientCalls::Redis(redis) => {
                let unit = match redis.proxy.next_unit(&proxy_info()) {
                    Some(unit) => unit,
                    None => {
                        // The application has every reply: it sends its next pipeline.
                        assert_eq!(
                            redis.requests, redis.replies,
                            "client {client}: the proxy answers each request once"
                        );
                        let mut requests = Vec::new();
                        for call in redis.workload.next_pipeline() {
                            redis.requests += call.write_requests(&mut requests) as u64;
                            redis.unsent.extend(call.commands().iter().cloned());
                        }
                        redis.proxy.feed(&requests);
                        redis
                            .proxy
                            .next_unit(&proxy_info())
                            .expect("a pipeline of data commands makes a unit")
                    }
                };
                let call = RedisCall::from_unit(unit.proc_id, &unit.args);
                for words in call.commands() {
                    let next = redis.unsent.pop_front();
                    if next.as_ref() != Some(words) {
                        let next = next.map_or("nothing".to_owned(), |next| {
                            RedisCall::Command(next).to_string()
                        });
                        return Err(self.fail(format!(
                            "client {client}'s proxy sent {call}, but the next command its \
                             application wrote and was not answered for is {next}: a command \
                             sent twice, or out of order"
                        )));
                    }
                }
                let encoded = call.encode();
                assert_eq!(
                    encoded,
                    (unit.proc_id, unit.args.clone()),
                    "the proxy sends what a session would"
                );
                redis.unit = Some(unit);
                redis.sent.push(call);
                assert_eq!(redis.sent.len() as u64, state.seq, "a call per seq");
                encoded
            }
        };
        let route = state.router.begin(state.seq, now);
        state.call = Some((route, SimCall { proc_id, args }));
        self.report.calls += 1;
        self.client_act(client);
        Ok(())
    }

    /// Asks the client's router what to do next and does it: greets a node, sends the call,
    /// pauses, or ends the call.
    fn client_act(&mut self, client: usize) {
        let now = self.now_duration();
        let state = &mut self.clients[client];
        let Some((route, _)) = state.call.as_mut() else {
            return;
        };
        state.epoch += 1;
        let epoch = state.epoch;
        let from = CLIENT_BASE + client as NodeId;
        match state.router.next(route, now) {
            Action::Connect { index, until } => {
                state.conn += 1;
                state.waiting = Waiting::Greeting { index };
                let conn = state.conn;
                self.send(from, index as NodeId + 1, Wire::Hello { conn });
                self.schedule_client_timer(client, epoch, until);
            }
            Action::Send { until } => {
                let primary = state.router.primary().expect("a call goes to the primary");
                let (route, call) = state.call.as_ref().expect("a call in flight");
                let wire = Wire::Call {
                    conn: state.conn,
                    seq: route.seq(),
                    call: call.clone(),
                };
                state.waiting = Waiting::Answer;
                self.send(from, primary.index as NodeId + 1, wire);
                self.schedule_client_timer(client, epoch, until);
            }
            Action::Sleep { until } => {
                state.waiting = Waiting::Pause;
                self.schedule_client_timer(client, epoch, until);
            }
            Action::Done(result) => {
                state.waiting = Waiting::Nothing;
                let (route, _) = state.call.take().expect("a call in flight");
                if let ClientCalls::Redis(redis) = &mut state.calls {
                    let unit = redis.unit.take().expect("a unit per call");
                    let sent = redis.sent.last().expect("the unit's call");
                    let rolled_back = matches!(&result, Ok(outcome) if !outcome.committed());
                    if rolled_back && unit.batched() {
                        // Nothing of it ran: the proxy sends its commands again, one by one.
                        for words in sent.commands().iter().rev() {
                            redis.unsent.push_front(words.clone());
                        }
                    }
                    match &result {
                        Ok(outcome) => {
                            redis
                                .proxy
                                .finish_answered(unit, outcome.status, &outcome.body);
                        }
                        Err(err) => {
                            let text = format!("ERR {err}");
                            redis.proxy.finish(unit, ProxyAnswer::Failed(&text));
                        }
                    }
                    let out = std::mem::take(redis.proxy.out());
                    redis.workload.observe(&out);
                    redis.replies += count_replies(&out)
                        .unwrap_or_else(|err| panic!("client {client}: the proxy wrote {err}"));
                }
                match result {
                    Ok(_) => self.report.replies += 1,
                    Err(err) => {
                        self.report.deadline_errors += 1;
                        self.note(format!("client {client} call {}: {err}", route.seq()));
                    }
                }
                self.schedule_next_call(client);
            }
        }
    }

    fn schedule_client_timer(&mut self, client: usize, epoch: u64, until: Duration) {
        let at = until.as_micros() as u64;
        assert!(at >= self.now, "a client's timer is not in the past");
        self.schedule(at - self.now, Event::ClientTimer { client, epoch });
    }

    /// What the client waited for did not come in time (or its pause is over).
    pub(super) fn client_timer(&mut self, client: usize, epoch: u64) {
        let now = self.now_duration();
        let state = &mut self.clients[client];
        if state.epoch != epoch {
            return;
        }
        let Some((route, _)) = state.call.as_mut() else {
            return;
        };
        match state.waiting {
            Waiting::Greeting { index } => {
                // The connection is given up: whatever it still brings is void.
                state.conn += 1;
                let failed = Greeted::Failed("no greeting within the attempt timeout".into());
                state.router.greeted(route, index, failed);
            }
            Waiting::Answer => {
                state.conn += 1;
                state.router.answered(route, Answered::Timeout, now);
            }
            Waiting::Pause | Waiting::Nothing => {}
        }
        self.client_act(client);
    }

    pub(super) fn client_receive(
        &mut self,
        client: usize,
        from: NodeId,
        wire: Wire,
    ) -> Result<(), String> {
        let now = self.now_duration();
        let power_losses = self.report.power_losses;
        let durable = matches!(self.faults.safety, Safety::Durable(_));
        let state = &mut self.clients[client];
        let current = state.conn;
        let Some((route, _)) = state.call.as_mut() else {
            // A late answer to a call the client finished or gave up on.
            return Ok(());
        };
        match (wire, state.waiting) {
            (
                Wire::Welcome {
                    conn,
                    primary,
                    view,
                },
                Waiting::Greeting { index },
            ) if conn == current => {
                assert_eq!(
                    from,
                    index as NodeId + 1,
                    "a greeting comes from the node greeted"
                );
                let greeted = Greeted::Welcome {
                    primary,
                    node: from,
                    view,
                };
                state.router.greeted(route, index, greeted);
                if state.router.primary().is_none() {
                    state.conn += 1;
                }
            }
            (
                Wire::Reply {
                    conn,
                    seq,
                    lsn,
                    status,
                    body,
                    witness,
                },
                Waiting::Answer,
            ) if conn == current => {
                let kept = match &state.calls {
                    ClientCalls::Redis(_) => Some(body.clone()),
                    ClientCalls::Driver(_) => None,
                };
                let reply = Answered::Reply {
                    seq,
                    lsn,
                    status,
                    body,
                };
                if state.router.answered(route, reply, now) == Report::Ignored {
                    return Ok(());
                }
                // A linearizable read sent from now on reflects it, unless a power loss took it.
                if durable || witness.power_losses == power_losses {
                    let answered = &mut self.groups[group_index(state.group)].lsn_answered_max;
                    *answered = (*answered).max(lsn);
                }
                if let (ClientCalls::Redis(redis), Some(body)) = (&mut state.calls, kept) {
                    redis.acked.push(AckedReply {
                        seq,
                        lsn,
                        status,
                        body,
                        witness,
                    });
                }
                // Under a 1-safe rule a new view may rightly lose released commits, and
                // LSNs go back with them; so may a power loss under a rule that acknowledges
                // from memory.
                let kept = fenced_by_acks(self.faults.safety)
                    && (durable || witness.power_losses == state.power_losses_last);
                state.power_losses_last = witness.power_losses;
                if lsn < state.lsn_last && kept {
                    let last = state.lsn_last;
                    return Err(self.fail(format!(
                        "client {client} got LSN {lsn} for call {seq} after LSN {last}"
                    )));
                }
                state.lsn_last = lsn;
            }
            (Wire::NotPrimary { conn }, Waiting::Answer) if conn == current => {
                state.conn += 1;
                let not_primary = Answered::Error(ErrorFrame {
                    code: ErrorCode::NotPrimary,
                    message: format!("node {from} is not the primary"),
                });
                state.router.answered(route, not_primary, now);
            }
            (Wire::Busy { conn }, Waiting::Answer) if conn == current => {
                let busy = Answered::Error(ErrorFrame {
                    code: ErrorCode::Busy,
                    message: format!("node {from} withheld the reply: its lease ran out"),
                });
                state.router.answered(route, busy, now);
            }
            // On a connection the client gave up, or not what it waits for.
            _ => return Ok(()),
        }
        self.client_act(client);
        Ok(())
    }

    pub(super) fn schedule_next_call(&mut self, client: usize) {
        // Closed-loop clients: a short think between calls.
        let think = self.rng.below(MICROS_PER_TICK / 10);
        self.schedule(think, Event::ClientNext { client });
    }

    fn now_duration(&self) -> Duration {
        Duration::from_micros(self.now)
    }
}

/// What a proxy's sessions know of the cluster: to its applications it is the primary.
fn proxy_info() -> tandem_redis::session::ServerInfo {
    tandem_redis::session::ServerInfo {
        primary: true,
        ..Default::default()
    }
}

/// How many whole RESP replies `out` holds; an error if anything else is in it.
fn count_replies(mut out: &[u8]) -> Result<u64, String> {
    let mut count = 0;
    while !out.is_empty() {
        match tandem_redis::resp::parse_reply(out) {
            Ok(Some((_, used))) => {
                out = &out[used..];
                count += 1;
            }
            Ok(None) => {
                return Err(format!(
                    "a partial reply {:?}",
                    String::from_utf8_lossy(out)
                ));
            }
            Err(err) => return Err(format!("a malformed reply ({err:?})")),
        }
    }
    Ok(count)
}
