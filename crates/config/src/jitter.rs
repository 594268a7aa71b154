//! The seeded source of election jitter.
//!
//! raft-rs draws each election timeout with `rand::thread_rng()`, which would make runs
//! unrepeatable. [`crate::ConfigCore`] configures raft-rs with a degenerate range (one value,
//! `2 × election_ticks`, so the thread RNG has nothing to choose) and decides the real timeout
//! itself: each time a follower or candidate starts counting (its election clock is at 0), it
//! draws a deadline of `election_ticks + d` ticks, `d` uniform in `[0, election_ticks)`, from
//! this generator, and when the clock reaches the deadline it moves raft-rs's clock to the
//! last tick before raft-rs's own timeout, so that this tick starts the election. The result
//! is raft's usual randomized timeout in `[election_ticks, 2 × election_ticks)`, re-drawn for
//! every countdown (so two nodes that collided once do not collide forever), from one seed.

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, and good enough to spread election timeouts.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// Every node may be given the same cluster seed: mixing in the node id gives each its own
    /// sequence.
    pub(crate) fn for_node(seed: u64, node: u32) -> SplitMix64 {
        let mut mixer = SplitMix64 {
            state: seed ^ u64::from(node).wrapping_mul(0xD6E8_FEB8_6659_FD93),
        };
        SplitMix64 {
            state: mixer.next_u64(),
        }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform enough in `[0, bound)`: the modulo bias is below 2^-50 for the small bounds
    /// used here.
    pub(crate) fn below(&mut self, bound: usize) -> usize {
        assert!(bound > 0);
        (self.next_u64() % bound as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_draws_and_nodes_differ() {
        let draws = |seed, node| {
            let mut rng = SplitMix64::for_node(seed, node);
            (0..64).map(|_| rng.below(50)).collect::<Vec<_>>()
        };
        assert_eq!(draws(7, 1), draws(7, 1));
        assert_ne!(draws(7, 1), draws(7, 2));
        assert_ne!(draws(7, 1), draws(8, 1));
        let spread = draws(7, 1);
        assert!(spread.iter().all(|&d| d < 50));
        // Not constant: a broken generator would put every node on the same timeout.
        assert!(spread.iter().any(|&d| d != spread[0]));
    }
}
