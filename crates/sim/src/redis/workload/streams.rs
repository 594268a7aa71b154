//! The workload's stream commands (see the parent module): adds, reads by range and by
//! consumer group, deletes, trims, acknowledgements, claims and inspections, on keys `q:`,
//! naming entries by the IDs the client's replies showed.

use super::{CONSUMERS, GROUPS, IDS_SEEN_MAX, STREAM_COUNT_MAX, STREAMS, Workload, words};

impl Workload {
    /// One stream command: mostly adds and reads by a group's consumers, then the rest of
    /// the family. Groups are made often and destroyed seldom, and a stream is deleted now
    /// and then (a key another type took back, too), so that most reads find their group.
    pub(super) fn stream_command(&mut self) -> Vec<Vec<u8>> {
        let key = self.key(STREAMS);
        // Mostly the first group, so that its consumers meet each other's entries.
        let group = if self.rng.percent(80) {
            GROUPS[0].as_bytes().to_vec()
        } else {
            self.pick(GROUPS)
        };
        let consumer = self.pick(CONSUMERS);
        let count = self.number(1, STREAM_COUNT_MAX);
        match self.rng.below(32) {
            0..6 => self.xadd(key, b"*".to_vec()),
            6..8 => {
                let id = self.explicit_id();
                self.xadd(key, id)
            }
            8 => words(&[b"XLEN", &key]),
            9..11 => self.xrange(key, count),
            11 => {
                let mut command = words(&[b"XDEL", &key, &self.seen_id()]);
                if self.rng.percent(30) {
                    command.push(self.seen_id());
                }
                command
            }
            12 => {
                let mut command = words(&[b"XTRIM", &key]);
                self.push_trim(&mut command);
                command
            }
            13..18 => self.xgroup(key, group, consumer),
            18..21 => {
                let mut command = words(&[b"XREADGROUP", b"GROUP", &group, &consumer]);
                command.extend(words(&[b"COUNT", &count]));
                if self.rng.percent(15) {
                    command.push(b"NOACK".to_vec());
                }
                command.extend(words(&[b"STREAMS", &key, b">"]));
                command
            }
            21..23 => {
                let read = [b"GROUP".as_slice(), &group, &consumer, b"COUNT", &count];
                let mut command = words(&[b"XREADGROUP"]);
                command.extend(words(&read));
                command.extend(words(&[b"STREAMS", &key, b"0"]));
                command
            }
            23..25 => {
                let mut command = words(&[b"XACK", &key, &group]);
                for _ in 0..1 + self.rng.below(3) {
                    command.push(self.seen_id());
                }
                command
            }
            25..27 => self.xpending(key, group, consumer, count),
            27..29 => self.xclaim(key, group, consumer, count),
            29..31 => words(&[b"XINFO", b"GROUPS", &key]),
            _ if self.rng.percent(50) => words(&[b"DEL", &key]),
            _ => words(&[b"XLEN", &key]),
        }
    }

    /// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=] threshold] id field value…`.
    fn xadd(&mut self, key: Vec<u8>, id: Vec<u8>) -> Vec<Vec<u8>> {
        let mut command = vec![b"XADD".to_vec(), key];
        if self.rng.percent(10) {
            command.push(b"NOMKSTREAM".to_vec());
        }
        if self.rng.percent(40) {
            self.push_trim(&mut command);
        }
        command.push(id);
        for _ in 0..1 + self.rng.below(2) {
            command.push(self.value("f", 4));
            command.push(self.value("v", 100));
        }
        command
    }

    /// An exact trim: `MAXLEN [=] n` mostly, else `MINID [=] id`.
    fn push_trim(&mut self, command: &mut Vec<Vec<u8>>) {
        let minid = self.rng.percent(25);
        command.push(if minid {
            b"MINID".to_vec()
        } else {
            b"MAXLEN".to_vec()
        });
        if self.rng.percent(50) {
            command.push(b"=".to_vec());
        }
        let threshold = if minid {
            self.seen_id()
        } else {
            self.number(0, 12)
        };
        command.push(threshold);
    }

    /// `XRANGE key start end COUNT n` or `XREVRANGE key end start COUNT n`, each bound
    /// open, an ID, or an ID excluded.
    fn xrange(&mut self, key: Vec<u8>, count: Vec<u8>) -> Vec<Vec<u8>> {
        let mut bound = |open: &[u8]| match self.rng.below(4) {
            0 => self.seen_id(),
            1 => [b"(".as_slice(), &self.seen_id()].concat(),
            _ => open.to_vec(),
        };
        let (start, end) = (bound(b"-"), bound(b"+"));
        if self.rng.percent(30) {
            words(&[b"XREVRANGE", &key, &end, &start, b"COUNT", &count])
        } else {
            words(&[b"XRANGE", &key, &start, &end, b"COUNT", &count])
        }
    }

    /// `XGROUP CREATE key group $|0|id [MKSTREAM]` mostly, else `DESTROY`, `CREATECONSUMER`
    /// or `DELCONSUMER`.
    fn xgroup(&mut self, key: Vec<u8>, group: Vec<u8>, consumer: Vec<u8>) -> Vec<Vec<u8>> {
        match self.rng.below(20) {
            0..14 => {
                let id = match self.rng.below(5) {
                    0 | 1 => b"$".to_vec(),
                    2 | 3 => b"0".to_vec(),
                    _ => self.seen_id(),
                };
                let mut command = words(&[b"XGROUP", b"CREATE", &key, &group, &id]);
                if self.rng.percent(60) {
                    command.push(b"MKSTREAM".to_vec());
                }
                command
            }
            14 => words(&[b"XGROUP", b"DESTROY", &key, &group]),
            15..17 => words(&[b"XGROUP", b"CREATECONSUMER", &key, &group, &consumer]),
            _ => words(&[b"XGROUP", b"DELCONSUMER", &key, &group, &consumer]),
        }
    }

    /// `XPENDING key group`, or `XPENDING key group - + count [consumer]`.
    fn xpending(
        &mut self,
        key: Vec<u8>,
        group: Vec<u8>,
        consumer: Vec<u8>,
        count: Vec<u8>,
    ) -> Vec<Vec<u8>> {
        if self.rng.percent(40) {
            return words(&[b"XPENDING", &key, &group]);
        }
        let mut command = words(&[b"XPENDING", &key, &group, b"-", b"+", &count]);
        if self.rng.percent(50) {
            command.push(consumer);
        }
        command
    }

    /// `XCLAIM key group consumer 0 id… [JUSTID]` or `XAUTOCLAIM key group consumer 0
    /// start COUNT n [JUSTID]`: a minimum idle time of 0, so that what is claimed does not
    /// depend on the clock.
    fn xclaim(
        &mut self,
        key: Vec<u8>,
        group: Vec<u8>,
        consumer: Vec<u8>,
        count: Vec<u8>,
    ) -> Vec<Vec<u8>> {
        let mut command = if self.rng.percent(50) {
            let mut command = words(&[b"XCLAIM", &key, &group, &consumer, b"0"]);
            for _ in 0..1 + self.rng.below(2) {
                command.push(self.seen_id());
            }
            command
        } else {
            let start = if self.rng.percent(60) {
                b"0".to_vec()
            } else {
                self.seen_id()
            };
            let claim = [b"0".as_slice(), &start, b"COUNT", &count];
            let mut command = words(&[b"XAUTOCLAIM", &key, &group, &consumer]);
            command.extend(words(&claim));
            command
        };
        if self.rng.percent(30) {
            command.push(b"JUSTID".to_vec());
        }
        command
    }

    /// An ID a reply showed, mostly one of the newest (what the client just read); else (or
    /// before any) a small one, which only a stream given explicit IDs holds.
    fn seen_id(&mut self) -> Vec<u8> {
        if self.ids_seen.is_empty() || self.rng.percent(15) {
            return format!("{}-{}", 1 + self.rng.below(3), self.rng.below(4)).into_bytes();
        }
        let newest = if self.rng.percent(50) {
            3
        } else {
            IDS_SEEN_MAX
        };
        let index = self.rng.below(self.ids_seen.len().min(newest) as u64) as usize;
        self.ids_seen[index].clone()
    }

    /// An explicit ID for `XADD`: a small one (accepted by a stream only `XADD` with such
    /// IDs wrote), or one near an ID a reply showed: equal to it, its sequence's next, or
    /// ahead of it by up to 100 ms (so ahead of the clock for a while, and `XADD *` must
    /// then count on from the top); each as `ms-seq`, `ms` or `ms-*`.
    fn explicit_id(&mut self) -> Vec<u8> {
        let (ms, seq) = if self.ids_seen.is_empty() || self.rng.percent(25) {
            (1 + self.rng.below(3), self.rng.below(4))
        } else {
            let seen = self.seen_id();
            let text = String::from_utf8(seen).expect("an ID is ASCII");
            let (ms, seq) = text.split_once('-').expect("an ID has a dash");
            let (ms, seq): (u64, u64) = (ms.parse().expect("ms"), seq.parse().expect("seq"));
            match self.rng.below(3) {
                0 => (ms, seq),
                1 => (ms, seq + 1),
                _ => (ms + 1 + self.rng.below(100), 0),
            }
        };
        match self.rng.below(4) {
            0 => format!("{ms}"),
            1 => format!("{ms}-*"),
            _ => format!("{ms}-{seq}"),
        }
        .into_bytes()
    }

    /// One of `names`.
    fn pick(&mut self, names: &[&str]) -> Vec<u8> {
        names[self.rng.below(names.len() as u64) as usize]
            .as_bytes()
            .to_vec()
    }
}
