//! The record body of a passive write-through trace (seed 000 §5), as it sits in a
//! [`BatchKind::Passive`](crate::BatchKind) batch. All integers are LEB128 varints:
//!
//! ```text
//! write_count
//! write_count × { class (0 data, 1 undo, 2 meta), addr, len, len bytes }
//! ```
//!
//! The address and length of each write play the part of the Memory Channel packet header: the
//! paper's tables count only the bytes written, so [`encode_passive`] reports those separately
//! from the framing.

use tandem_memory::{ClassBytes, PassiveTrace, WriteClass};

use crate::{DecodeError, get_varint, put_varint};

/// Appends the body of `trace` and returns its payload bytes by class; the framing (counts,
/// classes, addresses, lengths) is `out`'s growth minus their total.
pub fn encode_passive(trace: &PassiveTrace, out: &mut Vec<u8>) -> ClassBytes {
    put_varint(out, trace.len() as u64);
    for (write, bytes) in trace.iter() {
        out.push(match write.class {
            WriteClass::Data => 0,
            WriteClass::Undo => 1,
            WriteClass::Meta => 2,
        });
        put_varint(out, write.addr);
        put_varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    trace.class_bytes()
}

/// Decodes one passive body with LSN `lsn` into `trace` (cleared first), advancing `input`.
pub fn decode_passive_into(
    input: &mut &[u8],
    lsn: u64,
    trace: &mut PassiveTrace,
) -> Result<(), DecodeError> {
    trace.clear(lsn);
    let count = get_varint(input, "write count")?;
    // A write takes at least four bytes (class, addr, len, one byte).
    if count > (input.len() / 4) as u64 {
        return Err(DecodeError::TooManyRuns {
            run_count: count,
            remaining: input.len(),
        });
    }
    for _ in 0..count {
        let Some((&class, rest)) = input.split_first() else {
            return Err(DecodeError::Truncated {
                field: "write class",
            });
        };
        *input = rest;
        let class = match class {
            0 => WriteClass::Data,
            1 => WriteClass::Undo,
            2 => WriteClass::Meta,
            _ => {
                return Err(DecodeError::Truncated {
                    field: "write class (0, 1 or 2)",
                });
            }
        };
        let addr = get_varint(input, "write address")?;
        let len = get_varint(input, "write length")?;
        let len = usize::try_from(len).ok().filter(|&len| len <= input.len());
        let Some(len) = len else {
            return Err(DecodeError::Truncated {
                field: "write data",
            });
        };
        let (bytes, rest) = input.split_at(len);
        trace.push(class, addr, bytes);
        *input = rest;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn traces_round_trip(
            writes in prop::collection::vec((0u8..3, any::<u64>(), prop::collection::vec(any::<u8>(), 1..20)), 1..10),
            lsn in 1u64..1000,
        ) {
            let mut trace = PassiveTrace::default();
            trace.clear(lsn);
            for (class, addr, bytes) in &writes {
                let class = [WriteClass::Data, WriteClass::Undo, WriteClass::Meta][*class as usize];
                trace.push(class, *addr, bytes);
            }
            let mut out = Vec::new();
            let classes = encode_passive(&trace, &mut out);
            prop_assert_eq!(classes, trace.class_bytes());
            let mut input = &out[..];
            let mut back = PassiveTrace::default();
            decode_passive_into(&mut input, lsn, &mut back).unwrap();
            prop_assert!(input.is_empty());
            prop_assert_eq!(back, trace);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
            let mut input = &bytes[..];
            let _ = decode_passive_into(&mut input, 1, &mut PassiveTrace::default());
        }
    }
}
