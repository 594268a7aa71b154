//! Redis Cluster's hash slots: a key belongs to one of [`SLOT_COUNT`] slots, the CRC16 of
//! the key (or of its hash tag, the part between the first `{` and the next `}` when that is
//! not empty) modulo 16,384. Clients compute the same slot to send each command to the node
//! that serves it, so the function must match Redis's `keyHashSlot` bit for bit.

/// How many slots the keyspace is split into (Redis Cluster's `CLUSTER_SLOTS`).
pub const SLOT_COUNT: u16 = 16_384;

/// The slot `key` belongs to.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOT_COUNT
}

/// The part of `key` its slot is computed from: the bytes between the first `{` and the
/// first `}` after it, if there are any; else the whole key. `{}` is no tag (`{}a` and
/// `{}b` then land on different slots, as in Redis).
fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&byte| byte == b'{') else {
        return key;
    };
    let after = &key[open + 1..];
    match after.iter().position(|&byte| byte == b'}') {
        Some(close) if close > 0 => &after[..close],
        _ => key,
    }
}

/// CRC16-CCITT in its XMODEM form (polynomial 0x1021, initial value 0, no reflection), as
/// Redis's `crc16.c` computes it.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        let mut crc = crc ^ (u16::from(byte) << 8);
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
        crc
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_xmodems() {
        // The check value of CRC-16/XMODEM, and the one Redis's crc16.c documents.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn slots_match_redis_cluster() {
        // `CLUSTER KEYSLOT` on redis-server 7.0 in cluster mode.
        for (key, slot) in [
            ("foo", 12182),
            ("bar", 5061),
            ("somekey", 11058),
            ("hello", 866),
            ("", 0),
        ] {
            assert_eq!(key_slot(key.as_bytes()), slot, "{key:?}");
        }
    }

    #[test]
    fn a_hash_tag_decides_the_slot_and_an_empty_one_does_not() {
        let user = key_slot(b"user1000");
        assert_eq!(key_slot(b"{user1000}.following"), user);
        assert_eq!(key_slot(b"{user1000}.followers"), user);
        assert_eq!(key_slot(b"x{user1000}y{other}"), user);
        // Only the first `{` opens a tag, and the first `}` after it closes it.
        assert_eq!(key_slot(b"{a{b}c}"), key_slot(b"a{b"));
        // `{}` is no tag: the whole key counts, so these two differ.
        assert_eq!(key_slot(b"{}a"), crc16(b"{}a") % SLOT_COUNT);
        assert_ne!(key_slot(b"{}a"), key_slot(b"{}b"));
        // An unclosed brace is no tag either.
        assert_eq!(key_slot(b"{abc"), crc16(b"{abc") % SLOT_COUNT);
    }
}
