//! Redo records: the compact codec, batches and the retained tail (the write-ahead log that
//! stores batches is tandem-wal's).
//!
//! A record is encoded as it sits inside a [`batch`] of consecutive records, so its LSN is
//! implicit (the batch header carries the first LSN, the view, the group and a CRC32C). The
//! record layout, all integers LEB128 varints:
//!
//! ```text
//! client_id            0 when the record has no client call behind it
//! seq                  only when client_id != 0
//! run_count
//! run_count × { gap, len, len bytes }
//!     gap = offset - end of the previous run (offset itself for the first run)
//! ```
//!
//! Delta-coding the offsets against the previous run's end keeps them short, since runs are
//! sorted and disjoint. The decoder never panics and never allocates more than its input could
//! describe: every length is checked against the bytes that remain.

#![forbid(unsafe_code)]

pub mod batch;
mod passive;
mod tail;

pub use batch::{BatchBuilder, BatchError, BatchKind, BatchRef, SealedBatch};
pub use passive::{decode_passive_into, encode_passive};
pub use tail::{RetainedTail, TailLimits};

use tandem_memory::{RedoError, RedoRecord};

/// Who asked for a record: the client call whose effects it carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId {
    /// 0 means no client (loads, internal txns).
    pub client_id: u64,
    pub seq: u64,
}

/// Bytes of an encoded record, split the way the paper's tables split shipped data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodedSize {
    /// The changed bytes themselves.
    pub data: usize,
    /// Everything else: call id, run count, offsets and lengths.
    pub meta: usize,
}

impl EncodedSize {
    pub fn total(&self) -> usize {
        self.data + self.meta
    }
}

/// Why bytes could not be decoded as a record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("the record ends early, inside its {field}")]
    Truncated { field: &'static str },
    #[error("the varint for {field} is longer than 10 bytes or overflows 64 bits")]
    VarintOverflow { field: &'static str },
    #[error("the record declares {run_count} runs but only {remaining} bytes remain")]
    TooManyRuns { run_count: u64, remaining: usize },
    #[error("invalid runs: {0}")]
    Runs(#[from] RedoError),
}

/// Appends `value` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Number of bytes `value` takes as a varint.
pub fn varint_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Reads a varint from the front of `input`, advancing it.
pub fn get_varint(input: &mut &[u8], field: &'static str) -> Result<u64, DecodeError> {
    let mut value = 0u64;
    for (index, &byte) in input.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        if index == 9 && bits > 1 {
            return Err(DecodeError::VarintOverflow { field });
        }
        value |= bits << (7 * index);
        if byte & 0x80 == 0 {
            *input = &input[index + 1..];
            return Ok(value);
        }
    }
    if input.len() >= 10 {
        Err(DecodeError::VarintOverflow { field })
    } else {
        Err(DecodeError::Truncated { field })
    }
}

/// Appends the compact encoding of `record` and returns its size split into data and meta.
pub fn encode_record(call: CallId, record: &RedoRecord, out: &mut Vec<u8>) -> EncodedSize {
    let start = out.len();
    put_varint(out, call.client_id);
    if call.client_id != 0 {
        put_varint(out, call.seq);
    }
    put_varint(out, record.runs().len() as u64);
    let mut end_previous = 0u64;
    for (run, bytes) in record.iter() {
        put_varint(out, run.offset - end_previous);
        put_varint(out, run.len);
        tandem_memory::extend_small(out, bytes);
        end_previous = run.end();
    }
    let total = out.len() - start;
    let data = record.data().len();
    EncodedSize {
        data,
        meta: total - data,
    }
}

/// Size of the compact encoding of `record`, without encoding it.
pub fn encoded_size(call: CallId, record: &RedoRecord) -> EncodedSize {
    let mut meta = varint_len(call.client_id) + varint_len(record.runs().len() as u64);
    if call.client_id != 0 {
        meta += varint_len(call.seq);
    }
    let mut end_previous = 0u64;
    for run in record.runs() {
        meta += varint_len(run.offset - end_previous) + varint_len(run.len);
        end_previous = run.end();
    }
    EncodedSize {
        data: record.data().len(),
        meta,
    }
}

/// Decodes one record with LSN `lsn` from the front of `input`, advancing it past the record.
pub fn decode_record(input: &mut &[u8], lsn: u64) -> Result<(CallId, RedoRecord), DecodeError> {
    let mut record = RedoRecord::empty(lsn);
    let call = decode_record_into(input, lsn, &mut record)?;
    Ok((call, record))
}

/// Decodes one record with LSN `lsn` into `record`, reusing its buffers: the applier's path,
/// which must not allocate per record. On error `record` holds a partial record; discard it.
pub fn decode_record_into(
    input: &mut &[u8],
    lsn: u64,
    record: &mut RedoRecord,
) -> Result<CallId, DecodeError> {
    record.reset(lsn);
    let client_id = get_varint(input, "client id")?;
    let seq = if client_id != 0 {
        get_varint(input, "seq")?
    } else {
        0
    };
    let run_count = get_varint(input, "run count")?;
    // A run takes at least three bytes (gap, len, one data byte): refuse counts the input
    // cannot hold before reserving memory for them.
    if run_count > (input.len() / 3) as u64 {
        return Err(DecodeError::TooManyRuns {
            run_count,
            remaining: input.len(),
        });
    }
    let mut end_previous = 0u64;
    for _ in 0..run_count {
        let gap = get_varint(input, "run gap")?;
        let len = get_varint(input, "run length")?;
        let offset = end_previous
            .checked_add(gap)
            .ok_or(DecodeError::VarintOverflow { field: "run gap" })?;
        let len_bytes = usize::try_from(len).ok().filter(|&len| len <= input.len());
        let Some(len_bytes) = len_bytes else {
            return Err(DecodeError::Truncated { field: "run data" });
        };
        let (bytes, rest) = input.split_at(len_bytes);
        record.push_run(offset, bytes)?;
        *input = rest;
        end_previous = offset + len;
    }
    Ok(CallId { client_id, seq })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tandem_memory::Run;

    fn record(runs: &[(u64, &[u8])]) -> RedoRecord {
        let mut record = RedoRecord::empty(9);
        for &(offset, bytes) in runs {
            record.push_run(offset, bytes).unwrap();
        }
        record
    }

    #[test]
    fn a_debit_credit_shaped_record_is_compact() {
        // Three 4-byte balances and a 16-byte history record in a 50 MiB segment.
        let record = record(&[
            (1_000, &[1; 4]),
            (400_000, &[2; 4]),
            (31_000_000, &[3; 4]),
            (50_000_000, &[4; 16]),
        ]);
        let mut out = Vec::new();
        let size = encode_record(CallId::default(), &record, &mut out);
        assert_eq!(size, encoded_size(CallId::default(), &record));
        assert_eq!(size.data, 28);
        assert_eq!(size.total(), out.len());
        assert!(size.total() <= 64, "{size:?}");
    }

    #[test]
    fn varints_round_trip_at_the_edges() {
        for value in [0, 1, 127, 128, 16_383, 16_384, u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value));
            let mut input = &out[..];
            assert_eq!(get_varint(&mut input, "v"), Ok(value));
            assert!(input.is_empty());
        }
        let mut too_long: &[u8] = &[0xff; 11];
        assert_eq!(
            get_varint(&mut too_long, "v"),
            Err(DecodeError::VarintOverflow { field: "v" })
        );
        let mut overflow: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(
            get_varint(&mut overflow, "v"),
            Err(DecodeError::VarintOverflow { field: "v" })
        );
    }

    #[test]
    fn malformed_records_are_refused() {
        let mut truncated: &[u8] = &[0, 1, 5, 4, 1, 2];
        assert_eq!(
            decode_record(&mut truncated, 1),
            Err(DecodeError::Truncated { field: "run data" })
        );
        let mut empty_run: &[u8] = &[0, 1, 5, 0, 0, 0];
        assert_eq!(
            decode_record(&mut empty_run, 1),
            Err(DecodeError::Runs(RedoError::EmptyRun { index: 0 }))
        );
        let mut huge_count: &[u8] = &[0, 0xff, 0xff, 0xff, 0x0f];
        assert!(matches!(
            decode_record(&mut huge_count, 1),
            Err(DecodeError::TooManyRuns { .. })
        ));
    }

    fn any_record() -> impl Strategy<Value = (CallId, RedoRecord)> {
        let runs = prop::collection::vec(
            (0u64..1 << 20, prop::collection::vec(any::<u8>(), 1..40)),
            0..12,
        );
        (any::<u64>(), any::<u64>(), any::<u64>(), runs).prop_map(|(lsn, client_id, seq, runs)| {
            let mut record = RedoRecord::empty(lsn);
            let mut end = 0u64;
            for (gap, bytes) in runs {
                record.push_run(end + gap, &bytes).unwrap();
                end = record.runs().last().map(Run::end).unwrap();
            }
            let seq = if client_id == 0 { 0 } else { seq };
            (CallId { client_id, seq }, record)
        })
    }

    proptest! {
        #[test]
        fn records_round_trip((call, record) in any_record(), trailing in prop::collection::vec(any::<u8>(), 0..8)) {
            let mut out = Vec::new();
            let size = encode_record(call, &record, &mut out);
            prop_assert_eq!(size, encoded_size(call, &record));
            prop_assert_eq!(size.total(), out.len());
            out.extend_from_slice(&trailing);
            let mut input = &out[..];
            let (call_back, record_back) = decode_record(&mut input, record.lsn()).unwrap();
            prop_assert_eq!(call_back, call);
            prop_assert_eq!(record_back, record);
            prop_assert_eq!(input, &trailing[..]);
        }

        #[test]
        fn the_decoder_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let mut input = &bytes[..];
            if let Ok((_, record)) = decode_record(&mut input, 1) {
                prop_assert_eq!(record.validate_shape(), Ok(()));
            }
        }
    }
}
