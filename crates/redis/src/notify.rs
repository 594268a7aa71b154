//! Keyspace notifications, as Redis 7.0's `notify.c`: a write command tells what it did to a
//! key (`set`, `lpush`, `del`, `expired`, …) under a class of events, and with the class on in
//! `notify-keyspace-events` the call publishes `__keyspace@DB__:KEY EVENT` (flag `K`) and
//! `__keyevent@DB__:EVENT KEY` (flag `E`), `DB` the database the key is in.
//!
//! A command notifies as it writes, after every check that could refuse it, so a command that
//! answers an error has notified nothing. The messages of a call are [`Notices`] in its
//! context; the model hands them to the node's queue ([`tandem_store::Publications`]) only
//! once the call's txn committed, so a call rolled back (out of memory, a script that failed
//! after writing, a redo record too long) publishes nothing. They reach the subscribers of
//! the node that ran the call, as Redis's reach those of the server that ran the command.
//!
//! Known differences: there is one database (`@0`); reads do not expire keys (a backup
//! cannot write), so `expired` comes from a write that finds the key expired or from the
//! primary's sweep, and `keymiss` (`m`) is never sent (`CONFIG SET` refuses it); tandem does
//! not evict (`e`). A message to a connection waits behind the replies that connection is
//! owed, so a RESP3 connection that listens to its own writes hears each after its reply,
//! where Redis sends it before.

use tandem_store::Publication;

use crate::params;

/// A class of events, as `notify-keyspace-events` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventClass {
    /// `g`: commands on any type (`del`, `expire`, `rename_from`, …).
    Generic,
    /// `$`
    String,
    /// `l`
    List,
    /// `s`
    Set,
    /// `h`
    Hash,
    /// `z`
    ZSet,
    /// `x`: a key removed because it expired.
    Expired,
    /// `e`: a key removed to make room (`maxmemory-policy`).
    Evicted,
    /// `t`
    Stream,
    /// `n`: a key that did not exist was created.
    New,
}

impl EventClass {
    fn bit(self) -> u64 {
        params::keyspace_event_bit(match self {
            EventClass::Generic => b'g',
            EventClass::String => b'$',
            EventClass::List => b'l',
            EventClass::Set => b's',
            EventClass::Hash => b'h',
            EventClass::ZSet => b'z',
            EventClass::Expired => b'x',
            EventClass::Evicted => b'e',
            EventClass::Stream => b't',
            EventClass::New => b'n',
        })
    }
}

/// What one call publishes: the classes it notifies (the database's
/// `notify-keyspace-events`, or none where nobody listens) and the messages so far.
#[derive(Debug, Default)]
pub struct Notices {
    mask: u64,
    published: Vec<Publication>,
}

impl Notices {
    /// Notices for a call under the flags `mask` (`notify-keyspace-events`' word).
    pub fn new(mask: u64) -> Notices {
        Notices {
            mask,
            published: Vec::new(),
        }
    }

    /// Whether events of `class` are published at all.
    pub fn wants(&self, class: EventClass) -> bool {
        let kinds = params::keyspace_event_bit(b'K') | params::keyspace_event_bit(b'E');
        self.mask & class.bit() != 0 && self.mask & kinds != 0
    }

    /// Publishes that `event` of `class` happened to `key`, as the flags say.
    pub fn notify(&mut self, class: EventClass, event: &str, db: u8, key: &[u8]) {
        if !self.wants(class) {
            return;
        }
        if self.mask & params::keyspace_event_bit(b'K') != 0 {
            let mut channel = format!("__keyspace@{db}__:").into_bytes();
            channel.extend_from_slice(key);
            self.published
                .push(Publication::new(channel, event.as_bytes().to_vec()));
        }
        if self.mask & params::keyspace_event_bit(b'E') != 0 {
            let mut channel = format!("__keyevent@{db}__:").into_bytes();
            channel.extend_from_slice(event.as_bytes());
            self.published.push(Publication::new(channel, key.to_vec()));
        }
    }

    /// Publishes `message` on `channel` (a script's `PUBLISH`), whatever classes of
    /// notifications the database asks for: delivered, as they are, once the call commits.
    pub fn publish(&mut self, channel: &[u8], message: &[u8]) {
        self.published
            .push(Publication::new(channel.to_vec(), message.to_vec()));
    }

    /// How many messages there are so far.
    pub fn len(&self) -> usize {
        self.published.len()
    }

    /// Whether there is none so far.
    pub fn is_empty(&self) -> bool {
        self.published.is_empty()
    }

    /// Forgets every message after the first `len` (what a failed script published, in a
    /// block whose earlier commands' messages stay).
    pub fn truncate(&mut self, len: usize) {
        self.published.truncate(len);
    }

    /// The messages so far, leaving none.
    pub fn take(&mut self) -> Vec<Publication> {
        std::mem::take(&mut self.published)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(flags: &str) -> u64 {
        params::parse(&params::NOTIFY_KEYSPACE_EVENTS, flags.as_bytes()).expect("valid flags")
    }

    fn channels(notices: &mut Notices) -> Vec<(String, String)> {
        notices
            .take()
            .into_iter()
            .map(|p| {
                (
                    String::from_utf8(p.channel).unwrap(),
                    String::from_utf8(p.message).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn the_flags_choose_the_classes_and_the_channels() {
        let mut both = Notices::new(mask("KEA"));
        both.notify(EventClass::String, "set", 0, b"foo");
        assert_eq!(
            channels(&mut both),
            [
                ("__keyspace@0__:foo".into(), "set".into()),
                ("__keyevent@0__:set".into(), "foo".into())
            ]
        );
        let mut lists_only = Notices::new(mask("Kl"));
        lists_only.notify(EventClass::String, "set", 0, b"foo");
        lists_only.notify(EventClass::List, "lpush", 0, b"l");
        assert_eq!(
            channels(&mut lists_only),
            [("__keyspace@0__:l".into(), "lpush".into())]
        );
        // A class without K or E publishes nothing, as in Redis.
        let mut neither = Notices::new(mask("A"));
        neither.notify(EventClass::Generic, "del", 0, b"foo");
        assert!(neither.take().is_empty());
        // `A` leaves out `n`.
        let mut all = Notices::new(mask("EA"));
        all.notify(EventClass::New, "new", 0, b"foo");
        assert!(all.take().is_empty());
        let mut new = Notices::new(mask("En"));
        new.notify(EventClass::New, "new", 0, b"foo");
        assert_eq!(
            channels(&mut new),
            [("__keyevent@0__:new".into(), "foo".into())]
        );
    }
}
