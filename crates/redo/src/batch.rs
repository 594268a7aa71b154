//! Batches: the unit of shipping, checksumming and retention.
//!
//! A batch is a run of consecutive records of one group, sealed once and then shared (an
//! `Arc`) by every backup's shipper and by the retained tail. Its layout, little-endian:
//!
//! ```text
//! offset  size  field
//!  0       2    magic          "TB"
//!  2       1    version        1
//!  3       1    kind           1 = redo records, 2 = passive write-through traces
//!  4       4    group
//!  8       8    view
//! 16       8    lsn_base       LSN of the first record (≥ 1)
//! 24       4    record_count   ≥ 1
//! 28       4    payload_len    bytes after the header
//! 32       4    crc32c         over the header with this field zeroed, then the payload
//! 36       4    reserved       0
//! 40       …    payload        record_count records, each as the record codec encodes it
//! ```
//!
//! [`BatchRef::parse`] checks everything the header claims, including the checksum, before a
//! single record is decoded, so a corrupted batch is refused whole and never half-applied.

use std::sync::Arc;

use tandem_memory::{PassiveTrace, RedoRecord};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::{CallId, DecodeError, EncodedSize, decode_record_into, encode_record};

/// The batch format's version; a receiver refuses any other.
pub const BATCH_VERSION: u8 = 1;
/// Size of the fixed header in front of every batch's payload.
pub const HEADER_LEN: usize = size_of::<Header>();
const MAGIC: [u8; 2] = *b"TB";

const _: () = assert!(HEADER_LEN == 40);

/// What a batch's records are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchKind {
    /// Redo records, for an active backup that applies them.
    Redo,
    /// Passive write-through traces, for a backup that only stores bytes.
    Passive,
}

impl BatchKind {
    fn code(self) -> u8 {
        match self {
            BatchKind::Redo => 1,
            BatchKind::Passive => 2,
        }
    }

    fn from_code(code: u8) -> Option<BatchKind> {
        match code {
            1 => Some(BatchKind::Redo),
            2 => Some(BatchKind::Passive),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    magic: [u8; 2],
    version: u8,
    kind: u8,
    group: U32,
    view: U64,
    lsn_base: U64,
    record_count: U32,
    payload_len: U32,
    crc32c: U32,
    reserved: U32,
}

/// Why bytes are not a valid batch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    #[error("a batch needs at least {HEADER_LEN} header bytes, got {len}")]
    Short { len: usize },
    #[error("bad batch magic {found:?}; the peer is not speaking tandem's batch format")]
    Magic { found: [u8; 2] },
    #[error("batch version {found} is not supported (this node speaks {BATCH_VERSION})")]
    Version { found: u8 },
    #[error("unknown batch kind {found}")]
    Kind { found: u8 },
    #[error("batch header field '{field}' is invalid: {detail}")]
    Header { field: &'static str, detail: String },
    #[error("batch checksum mismatch: header says {expected:#010x}, bytes give {actual:#010x}")]
    Checksum { expected: u32, actual: u32 },
    #[error("record at LSN {lsn} is malformed: {source}")]
    Record { lsn: u64, source: DecodeError },
    #[error("the payload holds {extra} bytes after its last record")]
    TrailingBytes { extra: usize },
}

/// Accumulates consecutive records into the next batch.
#[derive(Debug)]
pub struct BatchBuilder {
    kind: BatchKind,
    group: u32,
    view: u64,
    lsn_base: u64,
    record_count: u32,
    /// Header space followed by the payload encoded so far.
    buf: Vec<u8>,
}

impl BatchBuilder {
    /// A builder whose first record will have LSN `lsn_base`.
    pub fn new(kind: BatchKind, group: u32, view: u64, lsn_base: u64) -> BatchBuilder {
        assert!(lsn_base >= 1, "LSNs start at 1");
        let mut buf = Vec::with_capacity(64 * 1024);
        buf.resize(HEADER_LEN, 0);
        BatchBuilder {
            kind,
            group,
            view,
            lsn_base,
            record_count: 0,
            buf,
        }
    }

    pub fn kind(&self) -> BatchKind {
        self.kind
    }

    /// LSN the next record must have.
    pub fn lsn_next(&self) -> u64 {
        self.lsn_base + u64::from(self.record_count)
    }

    pub fn record_count(&self) -> u32 {
        self.record_count
    }

    pub fn is_empty(&self) -> bool {
        self.record_count == 0
    }

    /// Payload bytes so far.
    pub fn payload_len(&self) -> usize {
        self.buf.len() - HEADER_LEN
    }

    /// Appends a redo record, which must carry the next LSN.
    pub fn push_redo(&mut self, call: CallId, record: &RedoRecord) -> EncodedSize {
        assert_eq!(self.kind, BatchKind::Redo);
        assert_eq!(
            record.lsn(),
            self.lsn_next(),
            "records enter a batch in LSN order"
        );
        let size = encode_record(call, record, &mut self.buf);
        self.record_count += 1;
        size
    }

    /// The buffer a record body may be encoded into directly; call [`BatchBuilder::commit_encoded`]
    /// after appending exactly one record.
    pub fn payload_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Counts one record appended through [`BatchBuilder::payload_mut`].
    pub fn commit_encoded(&mut self) {
        assert!(self.payload_len() > 0);
        self.record_count += 1;
    }

    /// Seals the records so far into a batch and starts the next one after them.
    ///
    /// Panics if there are none: an empty batch is never shipped.
    pub fn seal(&mut self) -> SealedBatch {
        assert!(self.record_count > 0, "sealing an empty batch");
        let payload_len = u32::try_from(self.payload_len()).expect("batch payload fits in u32");
        let header = Header {
            magic: MAGIC,
            version: BATCH_VERSION,
            kind: self.kind.code(),
            group: U32::new(self.group),
            view: U64::new(self.view),
            lsn_base: U64::new(self.lsn_base),
            record_count: U32::new(self.record_count),
            payload_len: U32::new(payload_len),
            crc32c: U32::new(0),
            reserved: U32::new(0),
        };
        self.buf[..HEADER_LEN].copy_from_slice(header.as_bytes());
        let crc = crc32c::crc32c(&self.buf);
        self.buf[32..36].copy_from_slice(&crc.to_le_bytes());
        let bytes: Arc<[u8]> = Arc::from(&self.buf[..]);
        self.lsn_base += u64::from(self.record_count);
        self.record_count = 0;
        self.buf.truncate(HEADER_LEN);
        let sealed = SealedBatch { bytes };
        debug_assert!(BatchRef::parse(sealed.bytes()).is_ok());
        sealed
    }
}

/// A sealed, checksummed batch, cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedBatch {
    bytes: Arc<[u8]>,
}

impl SealedBatch {
    fn header(&self) -> &Header {
        Header::ref_from_prefix(&self.bytes)
            .expect("a sealed batch has a header")
            .0
    }

    /// The wire bytes: header and payload.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn lsn_base(&self) -> u64 {
        self.header().lsn_base.get()
    }

    pub fn record_count(&self) -> u32 {
        self.header().record_count.get()
    }

    /// LSN of the last record.
    pub fn lsn_last(&self) -> u64 {
        self.lsn_base() + u64::from(self.record_count()) - 1
    }

    pub fn view(&self) -> u64 {
        self.header().view.get()
    }

    /// Checks shared bytes as one whole batch, without copying them.
    pub fn verify(bytes: Arc<[u8]>) -> Result<SealedBatch, BatchError> {
        BatchRef::parse(&bytes)?;
        Ok(SealedBatch { bytes })
    }

    /// The wire bytes, shared: what a shipper sends.
    pub fn shared(&self) -> Arc<[u8]> {
        Arc::clone(&self.bytes)
    }

    /// A new sealed batch of the same kind, group and view holding exactly the records
    /// `lsn_from..=lsn_last` of this one: what a receiver keeps of a batch that overlaps the
    /// records it already holds, or what a log keeps of a batch a rewind cuts through. Returns
    /// a clone when nothing is cut.
    ///
    /// The kept records are copied byte for byte, not re-encoded. That is exact because a
    /// record's encoding depends on nothing outside it: its LSN is implicit (the new header
    /// carries the new first LSN), a redo record's offsets are delta-coded against the previous
    /// run of the *same* record (the first run against 0), and a passive trace's addresses are
    /// absolute. The records are decoded with the crate's decoders only to find where each one
    /// ends, so the boundaries are the decoder's, never a guess.
    ///
    /// Panics unless `lsn_base <= lsn_from <= lsn_last <= self.lsn_last()` (a caller bug), and
    /// on a batch whose records do not decode: [`SealedBatch::verify`] checks the header and
    /// checksum only, so a caller holding a batch from outside that it has not decoded uses
    /// [`SealedBatch::try_trimmed`].
    pub fn trimmed(&self, lsn_from: u64, lsn_last: u64) -> SealedBatch {
        self.try_trimmed(lsn_from, lsn_last)
            .expect("a batch to trim has records that decode")
    }

    /// [`SealedBatch::trimmed`], returning the decoder's error for a batch whose records do not
    /// decode (a checksummed batch sealed by a buggy or hostile peer) instead of panicking.
    pub fn try_trimmed(&self, lsn_from: u64, lsn_last: u64) -> Result<SealedBatch, BatchError> {
        assert!(
            self.lsn_base() <= lsn_from,
            "a trim starts inside the batch"
        );
        assert!(
            lsn_from <= lsn_last,
            "a trimmed batch holds at least one record"
        );
        assert!(lsn_last <= self.lsn_last(), "a trim ends inside the batch");
        let batch = self.as_ref();
        // Byte offsets in the payload where the kept records begin and end.
        let (mut start, mut end) = (None, None);
        let mut input = batch.payload();
        let (mut record, mut trace) = (RedoRecord::empty(0), PassiveTrace::default());
        for lsn in self.lsn_base()..=lsn_last {
            if lsn == lsn_from {
                start = Some(batch.payload().len() - input.len());
            }
            let decoded = match batch.kind() {
                BatchKind::Redo => decode_record_into(&mut input, lsn, &mut record).map(|_| ()),
                BatchKind::Passive => crate::decode_passive_into(&mut input, lsn, &mut trace),
            };
            decoded.map_err(|source| BatchError::Record { lsn, source })?;
            if lsn == lsn_last {
                end = Some(batch.payload().len() - input.len());
            }
        }
        let (start, end) = (
            start.expect("lsn_from was reached"),
            end.expect("lsn_last too"),
        );
        assert!(start < end, "every record takes at least one byte");
        // A payload holds its records and nothing after them, as decode_*_into insist.
        if lsn_last == self.lsn_last() && end != batch.payload().len() {
            return Err(BatchError::TrailingBytes {
                extra: batch.payload().len() - end,
            });
        }
        if lsn_from == self.lsn_base() && lsn_last == self.lsn_last() {
            return Ok(self.clone());
        }
        let mut builder = BatchBuilder::new(batch.kind(), batch.group(), batch.view(), lsn_from);
        builder
            .payload_mut()
            .extend_from_slice(&batch.payload()[start..end]);
        builder.record_count =
            u32::try_from(lsn_last - lsn_from + 1).expect("fewer records than the batch held");
        let trimmed = builder.seal();
        assert_eq!(trimmed.lsn_base(), lsn_from);
        assert_eq!(trimmed.lsn_last(), lsn_last);
        assert_eq!(trimmed.as_ref().kind(), batch.kind());
        Ok(trimmed)
    }

    /// The checked view of this batch.
    pub fn as_ref(&self) -> BatchRef<'_> {
        // A SealedBatch exists only once its bytes were checked (sealed here or verified), so
        // the header is read again without recomputing the checksum.
        let (header, payload) =
            Header::ref_from_prefix(&self.bytes).expect("a sealed batch has a header");
        debug_assert!(BatchRef::parse(&self.bytes).is_ok());
        BatchRef { header, payload }
    }
}

/// A batch whose header and checksum have been verified.
#[derive(Clone, Copy, Debug)]
pub struct BatchRef<'a> {
    header: &'a Header,
    payload: &'a [u8],
}

impl<'a> BatchRef<'a> {
    /// Checks `bytes` as one whole batch: header fields, lengths and checksum.
    pub fn parse(bytes: &'a [u8]) -> Result<BatchRef<'a>, BatchError> {
        let Ok((header, payload)) = Header::ref_from_prefix(bytes) else {
            return Err(BatchError::Short { len: bytes.len() });
        };
        if header.magic != MAGIC {
            return Err(BatchError::Magic {
                found: header.magic,
            });
        }
        if header.version != BATCH_VERSION {
            return Err(BatchError::Version {
                found: header.version,
            });
        }
        if BatchKind::from_code(header.kind).is_none() {
            return Err(BatchError::Kind { found: header.kind });
        }
        let invalid = |field, detail: String| Err(BatchError::Header { field, detail });
        if header.reserved.get() != 0 {
            return invalid("reserved", "must be zero".into());
        }
        if header.payload_len.get() as usize != payload.len() {
            return invalid(
                "payload_len",
                format!("{} but {} bytes follow", header.payload_len, payload.len()),
            );
        }
        let count = header.record_count.get();
        if count == 0 {
            return invalid("record_count", "a batch holds at least one record".into());
        }
        // Every record body takes at least two bytes (client id and run count).
        if count as usize > payload.len() / 2 {
            return invalid(
                "record_count",
                format!("{count} records cannot fit in {} bytes", payload.len()),
            );
        }
        let lsn_base = header.lsn_base.get();
        if lsn_base == 0 || lsn_base.checked_add(u64::from(count)).is_none() {
            return invalid("lsn_base", format!("{lsn_base} with {count} records"));
        }
        let expected = header.crc32c.get();
        let actual = checksum(bytes);
        if expected != actual {
            return Err(BatchError::Checksum { expected, actual });
        }
        Ok(BatchRef { header, payload })
    }

    pub fn kind(&self) -> BatchKind {
        BatchKind::from_code(self.header.kind).expect("checked by parse")
    }

    pub fn group(&self) -> u32 {
        self.header.group.get()
    }

    pub fn view(&self) -> u64 {
        self.header.view.get()
    }

    pub fn lsn_base(&self) -> u64 {
        self.header.lsn_base.get()
    }

    pub fn record_count(&self) -> u32 {
        self.header.record_count.get()
    }

    pub fn lsn_last(&self) -> u64 {
        self.lsn_base() + u64::from(self.record_count()) - 1
    }

    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// Decodes every record into `records[i]` and its call into `calls` (both reused across
    /// batches: `records` only grows, `calls` is cleared first), so a caller can check them all
    /// before applying any.
    pub fn decode_redo_into(
        &self,
        records: &mut Vec<RedoRecord>,
        calls: &mut Vec<CallId>,
    ) -> Result<(), BatchError> {
        assert_eq!(self.kind(), BatchKind::Redo);
        let count = self.record_count() as usize;
        if records.len() < count {
            records.resize_with(count, || RedoRecord::empty(0));
        }
        calls.clear();
        let mut input = self.payload;
        for (record, lsn) in records.iter_mut().zip(self.lsn_base()..=self.lsn_last()) {
            let call = decode_record_into(&mut input, lsn, record)
                .map_err(|source| BatchError::Record { lsn, source })?;
            calls.push(call);
        }
        if !input.is_empty() {
            return Err(BatchError::TrailingBytes { extra: input.len() });
        }
        Ok(())
    }

    /// Decodes every passive trace into `traces[i]` (reused across batches; only grows).
    pub fn decode_passive_into(&self, traces: &mut Vec<PassiveTrace>) -> Result<(), BatchError> {
        assert_eq!(self.kind(), BatchKind::Passive);
        let count = self.record_count() as usize;
        if traces.len() < count {
            traces.resize_with(count, PassiveTrace::default);
        }
        let mut input = self.payload;
        for (trace, lsn) in traces.iter_mut().zip(self.lsn_base()..=self.lsn_last()) {
            crate::decode_passive_into(&mut input, lsn, trace)
                .map_err(|source| BatchError::Record { lsn, source })?;
        }
        if !input.is_empty() {
            return Err(BatchError::TrailingBytes { extra: input.len() });
        }
        Ok(())
    }
}

/// CRC32C of a batch's bytes with the checksum field taken as zero.
fn checksum(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&bytes[..32]);
    let crc = crc32c::crc32c_append(crc, &[0; 4]);
    crc32c::crc32c_append(crc, &bytes[36..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(lsn: u64, offset: u64, bytes: &[u8]) -> RedoRecord {
        let mut record = RedoRecord::empty(lsn);
        record.push_run(offset, bytes).unwrap();
        record
    }

    fn three_records() -> SealedBatch {
        let mut builder = BatchBuilder::new(BatchKind::Redo, 7, 3, 10);
        for lsn in 10..13 {
            let call = CallId {
                client_id: 5,
                seq: lsn,
            };
            builder.push_redo(call, &record(lsn, lsn * 100, &[lsn as u8; 4]));
        }
        builder.seal()
    }

    #[test]
    fn a_sealed_batch_round_trips_its_header_and_records() {
        let batch = three_records();
        assert_eq!(batch.lsn_base(), 10);
        assert_eq!(batch.lsn_last(), 12);
        assert_eq!(batch.view(), 3);
        let parsed = BatchRef::parse(batch.bytes()).unwrap();
        assert_eq!(parsed.group(), 7);
        assert_eq!(parsed.kind(), BatchKind::Redo);
        let (mut records, mut calls) = (Vec::new(), Vec::new());
        parsed.decode_redo_into(&mut records, &mut calls).unwrap();
        let seen: Vec<_> = calls.iter().map(|call| call.seq).zip(records).collect();
        let expected: Vec<_> = (10..13)
            .map(|lsn| (lsn, record(lsn, lsn * 100, &[lsn as u8; 4])))
            .collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn the_builder_continues_after_sealing() {
        let mut builder = BatchBuilder::new(BatchKind::Redo, 0, 1, 1);
        builder.push_redo(CallId::default(), &record(1, 0, &[1]));
        let first = builder.seal();
        assert!(builder.is_empty());
        assert_eq!(builder.lsn_next(), 2);
        builder.push_redo(CallId::default(), &record(2, 0, &[2]));
        let second = builder.seal();
        assert_eq!((first.lsn_base(), second.lsn_base()), (1, 2));
    }

    #[test]
    fn every_flipped_bit_is_refused() {
        let batch = three_records();
        for index in 0..batch.len() {
            for bit in 0..8 {
                let mut bytes = batch.bytes().to_vec();
                bytes[index] ^= 1 << bit;
                assert!(
                    BatchRef::parse(&bytes).is_err(),
                    "flipping bit {bit} of byte {index} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn a_corrupted_payload_is_a_checksum_error() {
        let batch = three_records();
        let mut bytes = batch.bytes().to_vec();
        *bytes.last_mut().unwrap() ^= 0xff;
        assert!(matches!(
            BatchRef::parse(&bytes),
            Err(BatchError::Checksum { .. })
        ));
    }

    #[test]
    fn truncated_and_padded_batches_are_refused() {
        let batch = three_records();
        for len in 0..batch.len() {
            assert!(BatchRef::parse(&batch.bytes()[..len]).is_err());
        }
        let mut padded = batch.bytes().to_vec();
        padded.push(0);
        assert!(BatchRef::parse(&padded).is_err());
    }

    /// Decodes every record of a redo batch with its LSN and call.
    fn redo_records(batch: &SealedBatch) -> Vec<(u64, CallId, RedoRecord)> {
        let (mut records, mut calls) = (Vec::new(), Vec::new());
        batch
            .as_ref()
            .decode_redo_into(&mut records, &mut calls)
            .unwrap();
        let lsns = batch.lsn_base()..=batch.lsn_last();
        let count = batch.record_count() as usize;
        lsns.zip(calls)
            .zip(records.into_iter().take(count))
            .map(|((lsn, call), record)| (lsn, call, record))
            .collect()
    }

    #[test]
    fn trimming_keeps_exactly_the_asked_records() {
        let batch = three_records();
        assert_eq!(batch.trimmed(10, 12), batch, "nothing cut: a clone");
        let original = redo_records(&batch);
        for (lsn_from, lsn_last) in [(10, 10), (10, 11), (11, 12), (11, 11), (12, 12)] {
            let trimmed = batch.trimmed(lsn_from, lsn_last);
            let verified = SealedBatch::verify(trimmed.shared()).unwrap();
            assert_eq!(verified, trimmed);
            assert_eq!(
                (trimmed.lsn_base(), trimmed.lsn_last()),
                (lsn_from, lsn_last)
            );
            assert_eq!(trimmed.view(), 3);
            assert_eq!(trimmed.as_ref().group(), 7);
            let kept: Vec<_> = original
                .iter()
                .filter(|(lsn, ..)| (lsn_from..=lsn_last).contains(lsn))
                .cloned()
                .collect();
            assert_eq!(redo_records(&trimmed), kept);
        }
    }

    #[test]
    fn trimming_a_passive_batch_keeps_its_traces() {
        let mut builder = BatchBuilder::new(BatchKind::Passive, 2, 9, 5);
        let mut traces = Vec::new();
        for lsn in 5..9 {
            let mut trace = PassiveTrace::default();
            trace.clear(lsn);
            trace.push(tandem_memory::WriteClass::Data, lsn * 64, &[lsn as u8; 3]);
            trace.push(tandem_memory::WriteClass::Meta, 8, &[1, 2]);
            crate::encode_passive(&trace, builder.payload_mut());
            builder.commit_encoded();
            traces.push(trace);
        }
        let batch = builder.seal();
        let trimmed = batch.trimmed(6, 7);
        assert_eq!(trimmed.as_ref().kind(), BatchKind::Passive);
        let mut back = Vec::new();
        trimmed.as_ref().decode_passive_into(&mut back).unwrap();
        assert_eq!(back[..2], traces[1..3]);
    }

    #[test]
    fn trimming_a_batch_whose_records_do_not_decode_is_an_error() {
        let mut builder = BatchBuilder::new(BatchKind::Redo, 0, 1, 1);
        // Two "records" whose run count claims far more runs than the bytes hold.
        builder.payload_mut().extend_from_slice(&[0, 0x7f, 0, 0x7f]);
        builder.record_count = 2;
        let batch = builder.seal();
        assert!(matches!(
            batch.try_trimmed(2, 2),
            Err(BatchError::Record { lsn: 1, .. })
        ));
    }

    #[test]
    #[should_panic(expected = "a trim ends inside the batch")]
    fn trimming_past_the_batch_is_a_bug() {
        three_records().trimmed(11, 13);
    }

    fn any_redo_batch() -> impl Strategy<Value = SealedBatch> {
        let record = (
            0u64..3,
            prop::collection::vec(
                (0u64..5000, prop::collection::vec(any::<u8>(), 1..30)),
                0..5,
            ),
        );
        (1u64..1000, prop::collection::vec(record, 1..12)).prop_map(|(lsn_base, records)| {
            let mut builder = BatchBuilder::new(BatchKind::Redo, 4, 11, lsn_base);
            for (client_id, runs) in records {
                let lsn = builder.lsn_next();
                let mut record = RedoRecord::empty(lsn);
                let mut end = 0;
                for (gap, bytes) in runs {
                    record.push_run(end + gap, &bytes).unwrap();
                    end += gap + bytes.len() as u64;
                }
                builder.push_redo(
                    CallId {
                        client_id,
                        seq: lsn * client_id,
                    },
                    &record,
                );
            }
            builder.seal()
        })
    }

    proptest! {
        #[test]
        fn every_record_of_a_trimmed_batch_decodes_as_the_original_one(
            batch in any_redo_batch(),
            cut in any::<(u16, u16)>(),
        ) {
            let count = u64::from(batch.record_count());
            let (a, b) = (u64::from(cut.0) % count, u64::from(cut.1) % count);
            let (lsn_from, lsn_last) = (batch.lsn_base() + a.min(b), batch.lsn_base() + a.max(b));
            let trimmed = batch.trimmed(lsn_from, lsn_last);
            prop_assert_eq!(SealedBatch::verify(trimmed.shared()).unwrap(), trimmed.clone());
            prop_assert_eq!((trimmed.lsn_base(), trimmed.lsn_last()), (lsn_from, lsn_last));
            let original = redo_records(&batch);
            let kept = redo_records(&trimmed);
            prop_assert_eq!(kept.len() as u64, lsn_last - lsn_from + 1);
            for entry in kept {
                let same = &original[(entry.0 - batch.lsn_base()) as usize];
                prop_assert_eq!(&entry, same);
            }
        }

        #[test]
        fn parsing_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(batch) = BatchRef::parse(&bytes)
                && batch.kind() == BatchKind::Redo
            {
                let _ = batch.decode_redo_into(&mut Vec::new(), &mut Vec::new());
            }
        }

        #[test]
        fn arbitrary_payloads_with_a_valid_checksum_never_panic(
            payload in prop::collection::vec(any::<u8>(), 2..200),
            count in 1u32..20,
        ) {
            // Build a header that passes every check so the record decoder sees the bytes.
            let mut builder = BatchBuilder::new(BatchKind::Redo, 0, 1, 1);
            builder.payload_mut().extend_from_slice(&payload);
            builder.record_count = count.min(payload.len() as u32 / 2);
            let batch = builder.seal();
            let parsed = BatchRef::parse(batch.bytes()).unwrap();
            let _ = parsed.decode_redo_into(&mut Vec::new(), &mut Vec::new());
        }
    }
}
