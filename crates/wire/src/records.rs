//! TLS 1.3 records (RFC 8446 section 5) for links whose handshake rustls ran: once the
//! handshake is done, each direction's traffic key is taken from the session
//! (`dangerous_extract_secrets`, as kernel TLS does) and the two directions are sealed and
//! opened here, apart: a link's writer thread holds a [`RecordSealer`] and its reader a
//! [`RecordOpener`] (inside the [`crate::FrameBuffer`]), with no lock between them, which one
//! rustls session could not give two threads.
//!
//! What goes on the wire is what a TLS 1.3 peer sends: application data records of at most
//! 16 KiB of plaintext, each `23 3 3 len` then the AEAD of the plaintext and its content type
//! under the nonce `iv XOR seq`. The only records taken are application data; an alert ends
//! the link, and a post-handshake message (a key update, a ticket) is refused: tandem's
//! links send none (servers issue no tickets), so one would come from someone else. A
//! direction seals at most [`RECORDS_PER_KEY_MAX`] records: then the link must be made anew
//! (tandem's links reconnect), where TLS would update the key.

use std::fmt;

use ring::aead;

/// Plaintext bytes one record carries at most (2^14).
pub const RECORD_PLAINTEXT_MAX: usize = 1 << 14;
/// A record's header: content type, legacy version (2 bytes), length (2 bytes).
pub const RECORD_HEADER_LEN: usize = 5;
/// The longest record body a receiver takes (RFC 8446 5.2: 2^14 + 256).
pub const RECORD_BODY_MAX: usize = RECORD_PLAINTEXT_MAX + 256;
/// Records a direction seals under one key. AES-GCM's limit is 2^24.5 full records (RFC
/// 8446 5.5); tandem stays well below it, and its links reconnect when it is reached.
pub const RECORDS_PER_KEY_MAX: u64 = 1 << 24;

const CONTENT_APPLICATION_DATA: u8 = 23;
const CONTENT_ALERT: u8 = 21;
const TAG_LEN: usize = 16;

/// The AEAD a TLS 1.3 session agreed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordCipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

/// One direction's traffic key, as the handshake left it: the cipher, the key, the IV and
/// the sequence number of the direction's next record.
pub struct TrafficKey {
    pub cipher: RecordCipher,
    pub key: Vec<u8>,
    pub iv: [u8; aead::NONCE_LEN],
    pub seq: u64,
}

impl fmt::Debug for TrafficKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key and IV are secrets.
        f.debug_struct("TrafficKey")
            .field("cipher", &self.cipher)
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

/// Why a record could not be sealed or opened. Each ends the link.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("TLS key length {len} does not suit {cipher:?}")]
    BadKey { cipher: RecordCipher, len: usize },
    #[error("TLS record {seq}: not an application data record of TLS 1.3 (header {header:02x?})")]
    BadHeader {
        seq: u64,
        header: [u8; RECORD_HEADER_LEN],
    },
    #[error("TLS record {seq} does not decrypt: not from the peer, or altered")]
    BadRecord { seq: u64 },
    #[error("TLS record {seq} holds content type {found}, not application data")]
    Unexpected { seq: u64, found: u8 },
    #[error("the peer sent a TLS alert: the link is closed")]
    Alert,
    #[error("this direction sealed {RECORDS_PER_KEY_MAX} records under its key: link again")]
    KeyExhausted,
}

fn less_safe_key(traffic: &TrafficKey) -> Result<aead::LessSafeKey, RecordError> {
    let algorithm = match traffic.cipher {
        RecordCipher::Aes128Gcm => &aead::AES_128_GCM,
        RecordCipher::Aes256Gcm => &aead::AES_256_GCM,
        RecordCipher::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
    };
    let key = aead::UnboundKey::new(algorithm, &traffic.key).map_err(|_| RecordError::BadKey {
        cipher: traffic.cipher,
        len: traffic.key.len(),
    })?;
    Ok(aead::LessSafeKey::new(key))
}

/// RFC 8446 5.3: the sequence number, big-endian and padded to the IV's length, XOR the IV.
fn record_nonce(iv: &[u8; aead::NONCE_LEN], seq: u64) -> aead::Nonce {
    let mut nonce = *iv;
    for (byte, seq_byte) in nonce[aead::NONCE_LEN - 8..]
        .iter_mut()
        .zip(seq.to_be_bytes())
    {
        *byte ^= seq_byte;
    }
    aead::Nonce::assume_unique_for_key(nonce)
}

fn header(body_len: usize) -> [u8; RECORD_HEADER_LEN] {
    let len = u16::try_from(body_len).expect("a record body fits its length field");
    let [high, low] = len.to_be_bytes();
    [CONTENT_APPLICATION_DATA, 3, 3, high, low]
}

/// Seals what one side of a link sends into TLS 1.3 application data records.
pub struct RecordSealer {
    key: aead::LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
    seq: u64,
}

impl RecordSealer {
    pub fn new(traffic: &TrafficKey) -> Result<RecordSealer, RecordError> {
        Ok(RecordSealer {
            key: less_safe_key(traffic)?,
            iv: traffic.iv,
            seq: traffic.seq,
        })
    }

    /// Appends to `out` the records that carry `parts`, one after another (a batch frame's
    /// header and its shared bytes are sealed without being joined first).
    pub fn seal(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) -> Result<(), RecordError> {
        let total: usize = parts.iter().map(|part| part.len()).sum();
        let records = total.div_ceil(RECORD_PLAINTEXT_MAX) as u64;
        if self.seq + records > RECORDS_PER_KEY_MAX {
            return Err(RecordError::KeyExhausted);
        }
        out.reserve(total + records as usize * (RECORD_HEADER_LEN + 1 + TAG_LEN));
        let mut parts = parts.iter().map(|part| &part[..]).filter(|p| !p.is_empty());
        let mut current = parts.next();
        while current.is_some() {
            let start = out.len();
            out.extend_from_slice(&[0; RECORD_HEADER_LEN]);
            let mut taken = 0;
            while taken < RECORD_PLAINTEXT_MAX {
                let Some(part) = current else { break };
                let n = part.len().min(RECORD_PLAINTEXT_MAX - taken);
                out.extend_from_slice(&part[..n]);
                taken += n;
                current = if n == part.len() {
                    parts.next()
                } else {
                    Some(&part[n..])
                };
            }
            out.push(CONTENT_APPLICATION_DATA);
            let body_len = taken + 1 + TAG_LEN;
            let head = header(body_len);
            out[start..start + RECORD_HEADER_LEN].copy_from_slice(&head);
            let tag = self
                .key
                .seal_in_place_separate_tag(
                    record_nonce(&self.iv, self.seq),
                    aead::Aad::from(head),
                    &mut out[start + RECORD_HEADER_LEN..],
                )
                .expect("a record within TLS's limits seals");
            out.extend_from_slice(tag.as_ref());
            self.seq += 1;
        }
        Ok(())
    }
}

impl fmt::Debug for RecordSealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordSealer")
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

/// Opens the TLS 1.3 records one side of a link receives.
pub struct RecordOpener {
    key: aead::LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
    seq: u64,
}

impl RecordOpener {
    pub fn new(traffic: &TrafficKey) -> Result<RecordOpener, RecordError> {
        Ok(RecordOpener {
            key: less_safe_key(traffic)?,
            iv: traffic.iv,
            seq: traffic.seq,
        })
    }

    /// The length of the whole record (header and body) `bytes` starts with, once its header
    /// is in: `Ok(None)` until then. A header that is not TLS 1.3 application data's, or too
    /// long a body, is an error.
    pub fn record_len(&self, bytes: &[u8]) -> Result<Option<usize>, RecordError> {
        let Some(head) = bytes.first_chunk::<RECORD_HEADER_LEN>() else {
            return Ok(None);
        };
        let body_len = usize::from(u16::from_be_bytes([head[3], head[4]]));
        let well_formed = head[1] == 3 && head[2] == 3 && body_len <= RECORD_BODY_MAX;
        match head[0] {
            CONTENT_APPLICATION_DATA if well_formed && body_len > TAG_LEN => {
                Ok(Some(RECORD_HEADER_LEN + body_len))
            }
            // An alert after the handshake is encrypted as application data; a plaintext one
            // comes from a peer whose handshake failed at its end.
            CONTENT_ALERT if well_formed => Err(RecordError::Alert),
            _ => Err(RecordError::BadHeader {
                seq: self.seq,
                header: *head,
            }),
        }
    }

    /// Opens the whole record `record` (its header and body, [`record_len`](Self::record_len)
    /// bytes) in place and returns where its plaintext lies within it.
    pub fn open_in_place(
        &mut self,
        record: &mut [u8],
    ) -> Result<std::ops::Range<usize>, RecordError> {
        let head: [u8; RECORD_HEADER_LEN] = *record
            .first_chunk()
            .expect("a whole record holds its header");
        let seq = self.seq;
        let plaintext = self
            .key
            .open_in_place(
                record_nonce(&self.iv, seq),
                aead::Aad::from(head),
                &mut record[RECORD_HEADER_LEN..],
            )
            .map_err(|_| RecordError::BadRecord { seq })?;
        // RFC 8446 5.4: zeros pad the inner plaintext after its content type.
        let Some(type_at) = plaintext.iter().rposition(|&byte| byte != 0) else {
            return Err(RecordError::Unexpected { seq, found: 0 });
        };
        self.seq += 1;
        match plaintext[type_at] {
            CONTENT_APPLICATION_DATA => Ok(RECORD_HEADER_LEN..RECORD_HEADER_LEN + type_at),
            CONTENT_ALERT => Err(RecordError::Alert),
            found => Err(RecordError::Unexpected { seq, found }),
        }
    }
}

impl fmt::Debug for RecordOpener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordOpener")
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(cipher: RecordCipher, len: usize) -> TrafficKey {
        TrafficKey {
            cipher,
            key: (0..len as u8).collect(),
            iv: [7; aead::NONCE_LEN],
            seq: 3,
        }
    }

    fn open_all(opener: &mut RecordOpener, mut bytes: Vec<u8>) -> Result<Vec<u8>, RecordError> {
        let mut plain = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let len = opener.record_len(&bytes[at..])?.expect("a whole header");
            let range = opener.open_in_place(&mut bytes[at..at + len])?;
            plain.extend_from_slice(&bytes[at + range.start..at + range.end]);
            at += len;
        }
        Ok(plain)
    }

    #[test]
    fn parts_sealed_open_to_their_concatenation_in_records_of_at_most_16_kib() {
        for (cipher, len) in [
            (RecordCipher::Aes128Gcm, 16),
            (RecordCipher::Aes256Gcm, 32),
            (RecordCipher::Chacha20Poly1305, 32),
        ] {
            let traffic = key(cipher, len);
            let mut sealer = RecordSealer::new(&traffic).unwrap();
            let mut opener = RecordOpener::new(&traffic).unwrap();
            let big: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
            let parts: [&[u8]; 4] = [b"head", &[], &big, b"tail"];
            let mut out = Vec::new();
            sealer.seal(&parts, &mut out).unwrap();
            // 40,008 bytes: three records, the last one short.
            assert_eq!(out.len(), 40_008 + 3 * (RECORD_HEADER_LEN + 1 + TAG_LEN));
            assert_eq!(&out[..3], &[23, 3, 3]);
            let expected = [&b"head"[..], &big, b"tail"].concat();
            assert_eq!(open_all(&mut opener, out).unwrap(), expected);
        }
    }

    #[test]
    fn an_altered_replayed_or_reordered_record_does_not_open() {
        let traffic = key(RecordCipher::Aes128Gcm, 16);
        let mut sealer = RecordSealer::new(&traffic).unwrap();
        let mut first = Vec::new();
        sealer.seal(&[b"one"], &mut first).unwrap();
        let mut second = Vec::new();
        sealer.seal(&[b"two"], &mut second).unwrap();

        let mut altered = first.clone();
        altered[7] ^= 1;
        let mut opener = RecordOpener::new(&traffic).unwrap();
        assert_eq!(
            open_all(&mut opener, altered),
            Err(RecordError::BadRecord { seq: 3 })
        );
        let mut opener = RecordOpener::new(&traffic).unwrap();
        assert!(open_all(&mut opener, second.clone()).is_err(), "reordered");
        let mut opener = RecordOpener::new(&traffic).unwrap();
        assert_eq!(open_all(&mut opener, first.clone()).unwrap(), b"one");
        assert!(open_all(&mut opener, first).is_err(), "replayed");
        assert_eq!(open_all(&mut opener, second).unwrap(), b"two");
    }

    #[test]
    fn the_ciphertext_hides_the_plaintext_and_headers_are_checked() {
        let traffic = key(RecordCipher::Chacha20Poly1305, 32);
        let mut sealer = RecordSealer::new(&traffic).unwrap();
        let mut out = Vec::new();
        sealer
            .seal(&[b"a secret balance of 1000"], &mut out)
            .unwrap();
        assert!(!out.windows(6).any(|w| w == b"secret"));
        let opener = RecordOpener::new(&traffic).unwrap();
        assert_eq!(opener.record_len(&out[..4]), Ok(None));
        let mut handshake = out.clone();
        handshake[0] = 22;
        assert!(matches!(
            opener.record_len(&handshake),
            Err(RecordError::BadHeader { .. })
        ));
        let mut long = out.clone();
        long[3] = 0x50;
        assert!(matches!(
            opener.record_len(&long),
            Err(RecordError::BadHeader { .. })
        ));
        // A frame's length prefix where a record should be (a peer without TLS).
        assert!(opener.record_len(&[9, 0, 0, 0, 1]).is_err());
        assert_eq!(
            RecordOpener::new(&key(RecordCipher::Aes128Gcm, 32)).unwrap_err(),
            RecordError::BadKey {
                cipher: RecordCipher::Aes128Gcm,
                len: 32
            }
        );
    }

    #[test]
    fn a_direction_stops_sealing_at_its_key_limit() {
        let mut traffic = key(RecordCipher::Aes128Gcm, 16);
        traffic.seq = RECORDS_PER_KEY_MAX - 1;
        let mut sealer = RecordSealer::new(&traffic).unwrap();
        let mut out = Vec::new();
        sealer.seal(&[b"last"], &mut out).unwrap();
        assert_eq!(
            sealer.seal(&[b"one more"], &mut out),
            Err(RecordError::KeyExhausted)
        );
    }
}
