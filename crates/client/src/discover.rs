//! Discovery: the addresses of a group's members, learnt from any node that answers.
//!
//! A program given one or a few node addresses (the seeds) asks them in turn, one at a time:
//! connect, `Hello` as a client (client id 0: discovery sends no call, so it needs no dedup
//! slot), the node's `Welcome` (a primary's or a backup's, spares included), then `Members`
//! and its `MembersAnswer`. The first seed that answers ends the search. Its answer is what
//! that node was configured with (its own `listen` and its peers' addresses), so it names
//! every member, reachable or not, and the cluster's slot table (which group serves each
//! hash slot), so that a proxy can route each key to its group. A node with no role at the
//! moment (restarted, not yet rejoined) refuses clients, and discovery goes on to the next
//! seed.

use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tandem_replication::NodeId;
use tandem_wire::{Hello, Member, PeerKind, SlotRange, encode_hello, encode_members};

use crate::config::{ClientTls, Credentials, DURATION_MAX};
use crate::conn::{Conn, Failure, Greeter, Greeting};

/// What a seed answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovery {
    /// The seed that answered.
    pub seed: SocketAddr,
    /// The node at that seed.
    pub node: NodeId,
    /// The view that node knows (0 if none).
    pub view: u64,
    /// Every member the node knows, sorted by node id, at the addresses it was configured
    /// with (itself included).
    pub members: Vec<Member>,
    /// The slot table the answering node knows: ranges in slot order, each slot in one;
    /// empty for a cluster of one group, which serves every slot.
    pub slots: Vec<SlotRange>,
}

impl Discovery {
    /// Each member's address, in node id order; the node that answered at the seed's address
    /// (the one known to reach it from here), each address once.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        let mut addresses: Vec<SocketAddr> = Vec::with_capacity(self.members.len());
        for member in &self.members {
            let address = if member.node_id == self.node {
                self.seed
            } else {
                member.address
            };
            if !addresses.contains(&address) {
                addresses.push(address);
            }
        }
        if !addresses.contains(&self.seed) {
            // A node that does not list itself still answered at the seed.
            addresses.push(self.seed);
        }
        addresses
    }
}

/// Why one seed gave no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedFailure {
    pub seed: SocketAddr,
    /// What went wrong, in words: a refused or timed-out connect, the node's `Error` frame
    /// (a Hello for another group, a node with no role), a closed connection or garbage.
    pub reason: String,
}

impl fmt::Display for SeedFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.seed, self.reason)
    }
}

/// Why discovery found no members.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    #[error("no seeds: give the address of at least one node")]
    NoSeeds,
    #[error("timeout {timeout:?} is out of range: give each seed more than 0 and at most 24 h")]
    BadTimeout { timeout: Duration },
    #[error("no seed answered with the group's members: {}", list(failures))]
    Unanswered { failures: Vec<SeedFailure> },
}

fn list(failures: &[SeedFailure]) -> String {
    let said: Vec<String> = failures.iter().map(ToString::to_string).collect();
    said.join("; ")
}

/// The addresses of every member of `group`, from the first of `seeds` that answers (see
/// [`Discovery::addresses`]). Each seed gets at most `timeout` for the connect, the greeting
/// and the answer; a seed listed twice is asked once.
pub fn discover(
    seeds: &[SocketAddr],
    group: u32,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, DiscoverError> {
    discover_members(seeds, group, timeout).map(|discovery| discovery.addresses())
}

/// [`discover`], with who answered, its view and the node ids.
pub fn discover_members(
    seeds: &[SocketAddr],
    group: u32,
    timeout: Duration,
) -> Result<Discovery, DiscoverError> {
    discover_with(seeds, group, timeout, None)
}

/// [`discover_members`], proving `credentials` to nodes that ask clients for a password.
pub fn discover_with(
    seeds: &[SocketAddr],
    group: u32,
    timeout: Duration,
    credentials: Option<&Credentials>,
) -> Result<Discovery, DiscoverError> {
    discover_secure(seeds, group, timeout, credentials, None)
}

/// [`discover_with`], over TLS (`tls`) to nodes whose native ports speak it.
pub fn discover_secure(
    seeds: &[SocketAddr],
    group: u32,
    timeout: Duration,
    credentials: Option<&Credentials>,
    tls: Option<&ClientTls>,
) -> Result<Discovery, DiscoverError> {
    if seeds.is_empty() {
        return Err(DiscoverError::NoSeeds);
    }
    if timeout.is_zero() || timeout > DURATION_MAX {
        return Err(DiscoverError::BadTimeout { timeout });
    }
    let greeter = Greeter {
        hello: Hello::new(PeerKind::Client, 0, group),
        credentials: credentials.cloned(),
        tls: tls.cloned(),
    };
    let mut hello = Vec::new();
    encode_hello(&mut hello, &greeter.hello);
    let mut members = Vec::new();
    encode_members(&mut members);
    let mut failures: Vec<SeedFailure> = Vec::new();
    for (index, &seed) in seeds.iter().enumerate() {
        if seeds[..index].contains(&seed) {
            continue;
        }
        let until = Instant::now() + timeout;
        match ask(seed, index, &hello, &greeter, &members, until) {
            Ok(discovery) => return Ok(discovery),
            Err(failure) => failures.push(SeedFailure {
                seed,
                reason: failure.to_string(),
            }),
        }
    }
    Err(DiscoverError::Unanswered { failures })
}

/// One seed: greet it, ask it, read its answer.
fn ask(
    seed: SocketAddr,
    index: usize,
    hello: &[u8],
    greeter: &Greeter,
    members: &[u8],
    until: Instant,
) -> Result<Discovery, Failure> {
    let mut conn = match Conn::open(seed, index, hello, greeter, until)? {
        Greeting::Primary(conn) | Greeting::Backup(conn) => conn,
        Greeting::Refused(error) => return Err(Failure::Refused(error)),
    };
    let answer = conn.members(members, until)?;
    Ok(Discovery {
        seed,
        node: conn.node,
        view: answer.view,
        members: answer.members,
        slots: answer.slots,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(node_id: NodeId, address: &str) -> Member {
        Member {
            node_id,
            address: address.parse().unwrap(),
        }
    }

    #[test]
    fn the_node_that_answered_is_named_by_its_seed_and_each_address_comes_once() {
        let discovery = Discovery {
            seed: "10.0.0.2:7002".parse().unwrap(),
            node: 2,
            view: 3,
            members: vec![
                member(1, "127.0.0.1:7001"),
                member(2, "127.0.0.1:7002"),
                member(3, "127.0.0.1:7001"),
            ],
            slots: Vec::new(),
        };
        let expected: Vec<SocketAddr> = ["127.0.0.1:7001", "10.0.0.2:7002"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(discovery.addresses(), expected);
    }

    #[test]
    fn seeds_and_timeout_are_checked_and_every_failed_seed_is_named() {
        let second = Duration::from_secs(1);
        assert_eq!(discover(&[], 0, second), Err(DiscoverError::NoSeeds));
        let seed: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let zero = Duration::ZERO;
        assert_eq!(
            discover(&[seed], 0, zero),
            Err(DiscoverError::BadTimeout { timeout: zero })
        );
        // Nothing listens on a port that was bound, then released.
        let closed = |_| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let seeds: Vec<SocketAddr> = (0..2).map(closed).collect();
        let twice = [seeds[0], seeds[1], seeds[0]];
        let Err(DiscoverError::Unanswered { failures }) = discover(&twice, 0, second) else {
            panic!("no seed answers");
        };
        let named: Vec<SocketAddr> = failures.iter().map(|failure| failure.seed).collect();
        assert_eq!(named, seeds, "each seed once, in order");
        let said = DiscoverError::Unanswered { failures }.to_string();
        assert!(said.contains(&seeds[1].to_string()), "{said}");
        assert!(said.contains("connect failed"), "{said}");
    }
}
