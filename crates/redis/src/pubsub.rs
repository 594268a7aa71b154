//! Pub/sub: who listens to what on one node, and what a publication delivers.
//!
//! Messages are not data: nothing here is in the segment, replicated or logged. A node's
//! [`Hub`] holds its RESP connections' subscriptions (channels, patterns and shard channels,
//! as Redis 7.0's `pubsub.c`), answers the pub/sub commands a connection's [`Session`] hands
//! its front end ([`Request`]), and turns a publication into [`Delivery`]s, which the front
//! end writes to each receiving connection in that connection's protocol. Like Redis, a
//! message reaches the subscribers connected when it is published and is never kept for
//! later; a client that reconnects subscribes again.
//!
//! Orders are Redis's where clients can see them: a channel's subscribers receive in the
//! order they subscribed, and a publication delivers to a channel's subscribers before the
//! patterns'. Patterns are visited in byte order (Redis's dict order is arbitrary).
//!
//! [`Session`]: crate::session::Session

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::resp::{Argv, Proto, ReplyWriter};

/// What a front end without a hub (`tandem proxy`) answers a pub/sub command.
pub const NOT_SERVED: &str = "ERR pub/sub is served on a node's RESP port: tandem proxy does not \
     carry it (connect the subscriber and the publisher to the same node)";

/// What `EXEC` answers an `SSUBSCRIBE` of its block (Redis's words: a transaction denies
/// blocking).
pub const SHARD_IN_MULTI: &str = "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client";

/// Whether `name` (a table entry's) subscribes or unsubscribes.
fn is_subscription(name: &str) -> bool {
    matches!(
        name,
        "SUBSCRIBE" | "UNSUBSCRIBE" | "PSUBSCRIBE" | "PUNSUBSCRIBE" | "SSUBSCRIBE" | "SUNSUBSCRIBE"
    )
}

/// Whether `name` (a table entry's) is one of the pub/sub commands.
pub fn is_command(name: &str) -> bool {
    is_subscription(name) || matches!(name, "PUBLISH" | "SPUBLISH" | "PUBSUB")
}

/// Whether a subscribed RESP2 connection may send command `name` (Redis's list in
/// `processCommand`).
pub fn allowed_while_subscribed(name: &str) -> bool {
    is_subscription(name) || matches!(name, "PING" | "QUIT" | "RESET")
}

/// Redis's refusal of any other command on a subscribed RESP2 connection, naming the
/// command as Redis's `fullname` does (`get`, `client|id`).
pub fn only_pubsub_here(argv: &Argv) -> String {
    let name = String::from_utf8_lossy(argv.get(0).unwrap_or_default()).to_ascii_lowercase();
    let sub = argv.get(1).unwrap_or_default();
    let full = match crate::cmd::SUBCOMMANDS.iter().find(|(of, sub_name, _)| {
        of.eq_ignore_ascii_case(&name) && sub_name.as_bytes().eq_ignore_ascii_case(sub)
    }) {
        Some((_, sub_name, _)) => format!("{name}|{}", sub_name.to_ascii_lowercase()),
        None => name,
    };
    format!(
        "ERR Can't execute '{full}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
         RESET are allowed in this context"
    )
}

/// The request the pub/sub command `argv` (named `name` in the table, its arity checked)
/// makes, or `None` with its reply written to `out`: a refusal, or `PUBSUB HELP`'s text.
pub fn request(name: &str, argv: &Argv, proto: Proto, out: &mut Vec<u8>) -> Option<Request> {
    let rest = || argv.iter().skip(1).map(<[u8]>::to_vec).collect::<Vec<_>>();
    let arg = |i: usize| argv.get(i).unwrap_or_default().to_vec();
    let request = match name {
        "SUBSCRIBE" | "PSUBSCRIBE" | "SSUBSCRIBE" => Request::Subscribe {
            kind: kind_named(name),
            names: rest(),
        },
        "UNSUBSCRIBE" | "PUNSUBSCRIBE" | "SUNSUBSCRIBE" => Request::Unsubscribe {
            kind: kind_named(name),
            names: rest(),
        },
        "PUBLISH" | "SPUBLISH" => Request::Publish {
            shard: name == "SPUBLISH",
            channel: arg(1),
            message: arg(2),
        },
        "PUBSUB" => return pubsub_request(argv, proto, out),
        _ => unreachable!("{name} is no pub/sub command"),
    };
    Some(request)
}

/// What the (un)subscription command `name` names: `P…` patterns, `S…` shard channels.
fn kind_named(name: &str) -> Kind {
    match name {
        "PSUBSCRIBE" | "PUNSUBSCRIBE" => Kind::Pattern,
        "SSUBSCRIBE" | "SUNSUBSCRIBE" => Kind::Shard,
        _ => Kind::Channel,
    }
}

/// `PUBSUB subcommand …` (its subcommand and arity checked against the table already).
fn pubsub_request(argv: &Argv, proto: Proto, out: &mut Vec<u8>) -> Option<Request> {
    let sub = argv.get(1).unwrap_or_default().to_ascii_uppercase();
    let names = || argv.iter().skip(2).map(<[u8]>::to_vec).collect::<Vec<_>>();
    let pattern = || argv.get(2).map(<[u8]>::to_vec);
    match (sub.as_slice(), argv.len()) {
        (b"CHANNELS", 2 | 3) => Some(Request::Channels {
            shard: false,
            pattern: pattern(),
        }),
        (b"SHARDCHANNELS", 2 | 3) => Some(Request::Channels {
            shard: true,
            pattern: pattern(),
        }),
        (b"NUMSUB", _) => Some(Request::NumSub {
            shard: false,
            channels: names(),
        }),
        (b"SHARDNUMSUB", _) => Some(Request::NumSub {
            shard: true,
            channels: names(),
        }),
        (b"NUMPAT", 2) => Some(Request::NumPat),
        (b"HELP", 2) => {
            crate::cmd::streams::reply_help(&mut ReplyWriter::new(out, proto), "PUBSUB", HELP);
            None
        }
        _ => {
            ReplyWriter::new(out, proto).error(&format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
                String::from_utf8_lossy(crate::session::c_string(
                    argv.get(1).unwrap_or_default(),
                    128
                ))
            ));
            None
        }
    }
}

/// `PUBSUB HELP`'s lines, Redis 7.0.15's.
const HELP: &[&str] = &[
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
];

/// What a subscription names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A channel (`SUBSCRIBE`).
    Channel,
    /// A glob-style pattern of channels (`PSUBSCRIBE`).
    Pattern,
    /// A shard channel (`SSUBSCRIBE`): only `SPUBLISH` reaches it, and no pattern.
    Shard,
}

impl Kind {
    fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// A pub/sub command, parsed and checked by the session, for the front end to carry out on
/// its node's [`Hub`] ([`Hub::run`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Subscribe {
        kind: Kind,
        names: Vec<Vec<u8>>,
    },
    /// No names: every subscription of the kind.
    Unsubscribe {
        kind: Kind,
        names: Vec<Vec<u8>>,
    },
    /// `PUBLISH` (or `SPUBLISH`, `shard`): answers how many subscriptions received it.
    Publish {
        shard: bool,
        channel: Vec<u8>,
        message: Vec<u8>,
    },
    /// `PUBSUB CHANNELS` / `SHARDCHANNELS`: the channels with a subscriber, matching the
    /// pattern if one is given.
    Channels {
        shard: bool,
        pattern: Option<Vec<u8>>,
    },
    /// `PUBSUB NUMSUB` / `SHARDNUMSUB`: each channel and its subscribers (patterns not
    /// counted).
    NumSub {
        shard: bool,
        channels: Vec<Vec<u8>>,
    },
    /// `PUBSUB NUMPAT`: how many distinct patterns have a subscriber.
    NumPat,
    /// `RESET`: every subscription of the connection ends, unannounced.
    EndAll,
}

impl Request {
    /// Whether the request is answered with push messages (the confirmations of
    /// subscriptions), which `CLIENT REPLY OFF` does not silence, rather than with a reply.
    pub fn answers_with_push(&self) -> bool {
        matches!(
            self,
            Request::Subscribe { .. } | Request::Unsubscribe { .. }
        )
    }
}

/// One message for one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The receiving connection's id (`CLIENT ID`).
    pub client_id: u64,
    pub message: Message,
}

/// A published message as a subscriber receives it; the bytes are shared by its receivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// To a channel's subscriber: `message channel payload`.
    Channel {
        channel: Arc<[u8]>,
        payload: Arc<[u8]>,
    },
    /// To a pattern's subscriber: `pmessage pattern channel payload`.
    Pattern {
        pattern: Arc<[u8]>,
        channel: Arc<[u8]>,
        payload: Arc<[u8]>,
    },
    /// To a shard channel's subscriber: `smessage channel payload`.
    Shard {
        channel: Arc<[u8]>,
        payload: Arc<[u8]>,
    },
}

impl Message {
    /// Writes the message as Redis pushes it: an array in RESP2, a push in RESP3.
    pub fn write(&self, proto: Proto, out: &mut Vec<u8>) {
        let mut w = ReplyWriter::new(out, proto);
        match self {
            Message::Channel { channel, payload } => {
                w.push(3);
                w.bulk(b"message");
                w.bulk(channel);
                w.bulk(payload);
            }
            Message::Pattern {
                pattern,
                channel,
                payload,
            } => {
                w.push(4);
                w.bulk(b"pmessage");
                w.bulk(pattern);
                w.bulk(channel);
                w.bulk(payload);
            }
            Message::Shard { channel, payload } => {
                w.push(3);
                w.bulk(b"smessage");
                w.bulk(channel);
                w.bulk(payload);
            }
        }
    }

    /// The bytes the message holds (what a subscriber's output buffer grows by, about).
    pub fn len(&self) -> usize {
        match self {
            Message::Channel { channel, payload } | Message::Shard { channel, payload } => {
                channel.len() + payload.len()
            }
            Message::Pattern {
                pattern,
                channel,
                payload,
            } => pattern.len() + channel.len() + payload.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How many channels, patterns and shard channels: those with a subscriber on a node
/// ([`Hub::counts`]), or those one connection subscribed to ([`Hub::subscriptions_of`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub channels: usize,
    pub patterns: usize,
    pub shard_channels: usize,
}

/// One connection's subscriptions.
#[derive(Debug, Default)]
struct Subscriptions {
    channels: BTreeSet<Vec<u8>>,
    /// In the order subscribed, as Redis's list (`PUNSUBSCRIBE` without names goes in it).
    patterns: Vec<Vec<u8>>,
    shard: BTreeSet<Vec<u8>>,
}

impl Subscriptions {
    /// Redis's `clientSubscriptionsCount` (channels and patterns) or, for shard channels,
    /// `clientShardSubscriptionsCount`: the count a confirmation of `kind` carries.
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard.len(),
        }
    }

    fn total(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }

    fn names(&self, kind: Kind) -> Vec<Vec<u8>> {
        match kind {
            Kind::Channel => self.channels.iter().cloned().collect(),
            Kind::Pattern => self.patterns.clone(),
            Kind::Shard => self.shard.iter().cloned().collect(),
        }
    }

    /// Adds `name`; false if it was there.
    fn add(&mut self, kind: Kind, name: &[u8]) -> bool {
        match kind {
            Kind::Channel => self.channels.insert(name.to_vec()),
            Kind::Shard => self.shard.insert(name.to_vec()),
            Kind::Pattern if self.patterns.iter().any(|p| p == name) => false,
            Kind::Pattern => {
                self.patterns.push(name.to_vec());
                true
            }
        }
    }

    /// Removes `name`; false if it was not there.
    fn remove(&mut self, kind: Kind, name: &[u8]) -> bool {
        match kind {
            Kind::Channel => self.channels.remove(name),
            Kind::Shard => self.shard.remove(name),
            Kind::Pattern => {
                let before = self.patterns.len();
                self.patterns.retain(|p| p != name);
                self.patterns.len() < before
            }
        }
    }
}

/// A node's subscriptions, both ways: each connection's, and each name's subscribers in the
/// order they subscribed.
#[derive(Debug, Default)]
pub struct Hub {
    clients: BTreeMap<u64, Subscriptions>,
    channels: BTreeMap<Vec<u8>, Vec<u64>>,
    patterns: BTreeMap<Vec<u8>, Vec<u64>>,
    shard: BTreeMap<Vec<u8>, Vec<u64>>,
    /// What publications delivered and the front end has not yet written.
    outbox: Vec<Delivery>,
    /// The messages this node's clients published (`PUBLISH`, `SPUBLISH`) since the front
    /// end last took them, for it to relay to the group's other members.
    published: Vec<Published>,
}

/// A message a client of this node published: a shard channel's or a channel's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    pub shard: bool,
    pub channel: Vec<u8>,
    pub message: Vec<u8>,
}

impl Hub {
    pub fn new() -> Hub {
        Hub::default()
    }

    /// The messages this node's clients published since the last call, oldest first (the
    /// messages relayed to this node, which [`Hub::publish`] delivers, are not among them).
    pub fn take_published(&mut self) -> Vec<Published> {
        std::mem::take(&mut self.published)
    }

    /// Carries out `request` for connection `client_id`, whose protocol is `proto`; writes
    /// its answer to `out`.
    pub fn run(&mut self, client_id: u64, proto: Proto, request: Request, out: &mut Vec<u8>) {
        match request {
            Request::Subscribe { kind, names } => {
                for name in names {
                    self.subscribe(client_id, kind, &name);
                    self.confirm(
                        client_id,
                        proto,
                        kind.subscribe_word(),
                        Some(&name),
                        kind,
                        out,
                    );
                }
            }
            Request::Unsubscribe { kind, names } => {
                self.unsubscribe(client_id, proto, kind, names, out)
            }
            Request::Publish {
                shard,
                channel,
                message,
            } => {
                let receivers = self.publish(shard, &channel, &message);
                ReplyWriter::new(out, proto).integer(receivers as i64);
                self.published.push(Published {
                    shard,
                    channel,
                    message,
                });
            }
            Request::Channels { shard, pattern } => {
                let index = if shard { &self.shard } else { &self.channels };
                let names: Vec<&Vec<u8>> = index
                    .keys()
                    .filter(|name| {
                        pattern
                            .as_ref()
                            .is_none_or(|p| crate::glob::matches(p, name))
                    })
                    .collect();
                let mut w = ReplyWriter::new(out, proto);
                w.array(names.len());
                for name in names {
                    w.bulk(name);
                }
            }
            Request::NumSub { shard, channels } => {
                let index = if shard { &self.shard } else { &self.channels };
                let mut w = ReplyWriter::new(out, proto);
                // Redis answers a flat array here, even in RESP3.
                w.array(channels.len() * 2);
                for channel in &channels {
                    w.bulk(channel);
                    w.integer(index.get(channel).map_or(0, Vec::len) as i64);
                }
            }
            Request::NumPat => ReplyWriter::new(out, proto).integer(self.patterns.len() as i64),
            Request::EndAll => self.forget(client_id),
        }
    }

    /// How many subscriptions connection `client_id` holds, of every kind: while it holds
    /// any, a RESP2 connection may send only the pub/sub commands, `PING`, `QUIT` and `RESET`.
    pub fn subscriptions(&self, client_id: u64) -> usize {
        self.clients.get(&client_id).map_or(0, Subscriptions::total)
    }

    /// What connection `client_id` subscribed to, by kind (`CLIENT LIST`'s `sub`, `psub`,
    /// `ssub`).
    pub fn subscriptions_of(&self, client_id: u64) -> Counts {
        self.clients
            .get(&client_id)
            .map_or(Counts::default(), |subscriptions| Counts {
                channels: subscriptions.channels.len(),
                patterns: subscriptions.patterns.len(),
                shard_channels: subscriptions.shard.len(),
            })
    }

    /// Publishes `message` on `channel`: delivers it to the channel's subscribers, then (not
    /// for a shard channel) to each subscriber of each matching pattern. Returns how many
    /// deliveries that made (a connection subscribed to the channel and a pattern counts
    /// twice, as in Redis).
    pub fn publish(&mut self, shard: bool, channel: &[u8], message: &[u8]) -> usize {
        let index = if shard { &self.shard } else { &self.channels };
        let channel_shared: Arc<[u8]> = channel.into();
        let payload: Arc<[u8]> = message.into();
        let before = self.outbox.len();
        for &client_id in index.get(channel).into_iter().flatten() {
            let message = if shard {
                Message::Shard {
                    channel: Arc::clone(&channel_shared),
                    payload: Arc::clone(&payload),
                }
            } else {
                Message::Channel {
                    channel: Arc::clone(&channel_shared),
                    payload: Arc::clone(&payload),
                }
            };
            self.outbox.push(Delivery { client_id, message });
        }
        if !shard {
            for (pattern, clients) in &self.patterns {
                if !crate::glob::matches(pattern, channel) {
                    continue;
                }
                let pattern: Arc<[u8]> = pattern.as_slice().into();
                for &client_id in clients {
                    let message = Message::Pattern {
                        pattern: Arc::clone(&pattern),
                        channel: Arc::clone(&channel_shared),
                        payload: Arc::clone(&payload),
                    };
                    self.outbox.push(Delivery { client_id, message });
                }
            }
        }
        self.outbox.len() - before
    }

    /// What publications delivered since the last take, in order.
    pub fn take_deliveries(&mut self) -> Vec<Delivery> {
        std::mem::take(&mut self.outbox)
    }

    /// The messages delivered to connection `client_id` and not yet taken, taken out of the
    /// others, in order.
    pub fn take_deliveries_to(&mut self, client_id: u64) -> Vec<Message> {
        let mut taken = Vec::new();
        self.outbox.retain(|delivery| {
            let to_it = delivery.client_id == client_id;
            if to_it {
                taken.push(delivery.message.clone());
            }
            !to_it
        });
        taken
    }

    /// Whether publications delivered something not yet taken.
    pub fn has_deliveries(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Ends every subscription of connection `client_id`, telling it nothing: it closed, or
    /// sent `RESET`. Messages delivered to it and not yet taken are dropped too.
    pub fn forget(&mut self, client_id: u64) {
        self.outbox
            .retain(|delivery| delivery.client_id != client_id);
        let Some(subscriptions) = self.clients.remove(&client_id) else {
            return;
        };
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in subscriptions.names(kind) {
                self.drop_subscriber(kind, &name, client_id);
            }
        }
    }

    /// How many names have a subscriber, by kind (`INFO stats`).
    pub fn counts(&self) -> Counts {
        Counts {
            channels: self.channels.len(),
            patterns: self.patterns.len(),
            shard_channels: self.shard.len(),
        }
    }

    fn index_mut(&mut self, kind: Kind) -> &mut BTreeMap<Vec<u8>, Vec<u64>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn subscribe(&mut self, client_id: u64, kind: Kind, name: &[u8]) {
        if self.clients.entry(client_id).or_default().add(kind, name) {
            self.index_mut(kind)
                .entry(name.to_vec())
                .or_default()
                .push(client_id);
        }
    }

    fn unsubscribe(
        &mut self,
        client_id: u64,
        proto: Proto,
        kind: Kind,
        names: Vec<Vec<u8>>,
        out: &mut Vec<u8>,
    ) {
        let word = kind.unsubscribe_word();
        let names = if names.is_empty() {
            let held = self
                .clients
                .get(&client_id)
                .map(|s| s.names(kind))
                .unwrap_or_default();
            if held.is_empty() {
                // Subscribed to nothing of the kind: still one confirmation, naming none.
                self.confirm(client_id, proto, word, None, kind, out);
                return;
            }
            held
        } else {
            names
        };
        for name in names {
            let removed = self
                .clients
                .get_mut(&client_id)
                .is_some_and(|s| s.remove(kind, &name));
            if removed {
                self.drop_subscriber(kind, &name, client_id);
            }
            self.confirm(client_id, proto, word, Some(&name), kind, out);
        }
        if self.clients.get(&client_id).is_some_and(|s| s.total() == 0) {
            self.clients.remove(&client_id);
        }
    }

    /// Takes `client_id` off `name`'s subscribers; a name left without one goes.
    fn drop_subscriber(&mut self, kind: Kind, name: &[u8], client_id: u64) {
        let index = self.index_mut(kind);
        let clients = index.get_mut(name).expect("a subscription is in the index");
        let at = clients
            .iter()
            .position(|&id| id == client_id)
            .expect("the subscriber is in the name's list");
        clients.remove(at);
        if clients.is_empty() {
            index.remove(name);
        }
    }

    /// Writes a (un)subscription's confirmation: `word name count` (`name` null when an
    /// unsubscription without names found none).
    fn confirm(
        &self,
        client_id: u64,
        proto: Proto,
        word: &[u8],
        name: Option<&[u8]>,
        kind: Kind,
        out: &mut Vec<u8>,
    ) {
        let count = self.clients.get(&client_id).map_or(0, |s| s.count(kind));
        let mut w = ReplyWriter::new(out, proto);
        w.push(3);
        w.bulk(word);
        match name {
            Some(name) => w.bulk(name),
            None => w.null(),
        }
        w.integer(count as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(hub: &mut Hub, client_id: u64, request: Request) -> Vec<u8> {
        let mut out = Vec::new();
        hub.run(client_id, Proto::Resp2, request, &mut out);
        out
    }

    fn names(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|n| n.as_bytes().to_vec()).collect()
    }

    fn subscribe(hub: &mut Hub, client_id: u64, kind: Kind, list: &[&str]) -> Vec<u8> {
        let names = names(list);
        run(hub, client_id, Request::Subscribe { kind, names })
    }

    #[test]
    fn confirmations_count_channels_and_patterns_together_and_shard_channels_apart() {
        let mut hub = Hub::new();
        let out = subscribe(&mut hub, 1, Kind::Channel, &["a", "a", "b"]);
        assert_eq!(
            out,
            b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n\
              *3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n\
              *3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n"
        );
        let out = subscribe(&mut hub, 1, Kind::Pattern, &["c*"]);
        assert_eq!(out, b"*3\r\n$10\r\npsubscribe\r\n$2\r\nc*\r\n:3\r\n");
        let out = subscribe(&mut hub, 1, Kind::Shard, &["s"]);
        assert_eq!(out, b"*3\r\n$10\r\nssubscribe\r\n$1\r\ns\r\n:1\r\n");
        assert_eq!(hub.subscriptions(1), 4);
        let mut out = Vec::new();
        hub.run(
            1,
            Proto::Resp3,
            Request::Unsubscribe {
                kind: Kind::Channel,
                names: names(&["zz"]),
            },
            &mut out,
        );
        assert_eq!(out, b">3\r\n$11\r\nunsubscribe\r\n$2\r\nzz\r\n:3\r\n");
    }

    #[test]
    fn unsubscribing_from_nothing_still_confirms_once_with_a_null() {
        let mut hub = Hub::new();
        let out = run(
            &mut hub,
            7,
            Request::Unsubscribe {
                kind: Kind::Pattern,
                names: Vec::new(),
            },
        );
        assert_eq!(out, b"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n");
        subscribe(&mut hub, 7, Kind::Channel, &["x", "y"]);
        let out = run(
            &mut hub,
            7,
            Request::Unsubscribe {
                kind: Kind::Channel,
                names: Vec::new(),
            },
        );
        assert_eq!(
            out,
            b"*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:1\r\n\
              *3\r\n$11\r\nunsubscribe\r\n$1\r\ny\r\n:0\r\n"
        );
        assert_eq!(hub.subscriptions(7), 0);
        assert_eq!(hub.counts(), Counts::default());
    }

    #[test]
    fn a_publication_reaches_channel_subscribers_in_order_then_patterns() {
        let mut hub = Hub::new();
        subscribe(&mut hub, 2, Kind::Channel, &["news"]);
        subscribe(&mut hub, 1, Kind::Channel, &["news"]);
        subscribe(&mut hub, 1, Kind::Pattern, &["n*"]);
        subscribe(&mut hub, 3, Kind::Pattern, &["x*"]);
        subscribe(&mut hub, 3, Kind::Shard, &["news"]);
        assert_eq!(hub.publish(false, b"news", b"hi"), 3);
        let receivers: Vec<u64> = hub.take_deliveries().iter().map(|d| d.client_id).collect();
        assert_eq!(receivers, [2, 1, 1]);
        // A shard publication reaches shard subscribers only, and no pattern.
        assert_eq!(hub.publish(true, b"news", b"hi"), 1);
        let deliveries = hub.take_deliveries();
        assert_eq!(deliveries[0].client_id, 3);
        let mut out = Vec::new();
        deliveries[0].message.write(Proto::Resp3, &mut out);
        assert_eq!(out, b">3\r\n$8\r\nsmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
        assert_eq!(hub.publish(false, b"other", b"hi"), 0);
        assert!(!hub.has_deliveries());
    }

    #[test]
    fn a_forgotten_client_receives_nothing_and_leaves_no_name_behind() {
        let mut hub = Hub::new();
        subscribe(&mut hub, 1, Kind::Channel, &["a"]);
        subscribe(&mut hub, 1, Kind::Pattern, &["*"]);
        subscribe(&mut hub, 2, Kind::Channel, &["a"]);
        assert_eq!(hub.publish(false, b"a", b"m"), 3);
        hub.forget(1);
        let receivers: Vec<u64> = hub.take_deliveries().iter().map(|d| d.client_id).collect();
        assert_eq!(receivers, [2]);
        assert_eq!(
            hub.counts(),
            Counts {
                channels: 1,
                ..Counts::default()
            }
        );
        assert_eq!(hub.publish(false, b"a", b"m"), 1);
    }

    #[test]
    fn introspection_answers_as_redis() {
        let mut hub = Hub::new();
        subscribe(&mut hub, 1, Kind::Channel, &["foo", "bar"]);
        subscribe(&mut hub, 2, Kind::Channel, &["foo"]);
        subscribe(&mut hub, 1, Kind::Pattern, &["f*"]);
        subscribe(&mut hub, 2, Kind::Pattern, &["f*", "g*"]);
        let out = run(
            &mut hub,
            3,
            Request::NumSub {
                shard: false,
                channels: names(&["foo", "none"]),
            },
        );
        assert_eq!(out, b"*4\r\n$3\r\nfoo\r\n:2\r\n$4\r\nnone\r\n:0\r\n");
        assert_eq!(run(&mut hub, 3, Request::NumPat), b":2\r\n");
        let out = run(
            &mut hub,
            3,
            Request::Channels {
                shard: false,
                pattern: Some(b"f*".to_vec()),
            },
        );
        assert_eq!(out, b"*1\r\n$3\r\nfoo\r\n");
    }
}
