//! Debit-Credit: TPC-B as Vista runs it (seed 000, section 2.4).
//!
//! Branches, tellers and accounts, ten tellers and (at full scale) 100,000 accounts per branch,
//! every record 100 bytes as TPC-B asks; the audit trail is a circular history buffer of
//! 16-byte records, 2 MiB by default. A txn adds a delta to one account, to one teller and to
//! the teller's branch, and appends a history record: 28 bytes of modified data, which is what
//! the paper's Table 2 implies (140.8 MB over about 5 million txns).
//!
//! Two choices keep it at exactly those 28 bytes:
//! - Balances are 4-byte two's-complement and add with wrap-around, so a long run never
//!   overflows; the consistency check compares sums modulo 2^32, which still catches any lost,
//!   doubled or partial delta.
//! - The history slot is the txn's LSN modulo the buffer's capacity (a power of two), so no
//!   head pointer is written: commits are serial and every commit takes the next LSN.
//!
//! The database is scaled to the segment: as many full branches as fit after the history
//! buffer, or, in a segment too small for one, a single branch with as many accounts as fit.
//! The tables stop where the store's dedup table starts ([`Layout::workload`]).
//!
//! An optional overdraft limit turns a txn that would take an account below it into a
//! rollback after all four updates were made, so tests can check that an abort undoes them.

use std::mem::offset_of;

use bytemuck::{Pod, Zeroable};
use tandem_memory::{Segment, Txn};

use tandem_store::args::{ArgReader, ArgWriter};
use tandem_store::{
    DEDUP_REPLY_INLINE_MAX, DedupTable, Driver, Inconsistency, Layout, LayoutError, ProcError,
    ProcId, Registry, Rng, Table, Workload,
};

/// A bank branch; 100 bytes as TPC-B requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Branch {
    pub balance: i32,
    pub id: u32,
    pub filler: [u8; 92],
}

/// A teller of one branch; 100 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Teller {
    pub balance: i32,
    pub id: u32,
    pub branch: u32,
    pub filler: [u8; 88],
}

/// A customer account of one branch; 100 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Account {
    pub balance: i32,
    pub id: u32,
    pub branch: u32,
    pub filler: [u8; 88],
}

/// One entry of the audit trail; 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct History {
    pub account: u32,
    pub teller: u32,
    pub branch: u32,
    pub delta: i32,
}

const _: () = assert!(size_of::<Branch>() == 100);
const _: () = assert!(size_of::<Teller>() == 100);
const _: () = assert!(size_of::<Account>() == 100);
const _: () = assert!(size_of::<History>() == 16);
const _: () = assert!(offset_of!(Branch, balance) == 0);
const _: () = assert!(offset_of!(Teller, balance) == 0);
const _: () = assert!(offset_of!(Account, balance) == 0);

/// Scale and rules of a Debit-Credit database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebitCreditConfig {
    pub tellers_per_branch: usize,
    /// Accounts per branch at full scale; fewer only when one branch does not fit.
    pub accounts_per_branch: usize,
    /// Size of the circular history buffer; capped at a quarter of the segment and rounded
    /// down to a power-of-two number of records.
    pub history_bytes: usize,
    /// When set, a txn that leaves its account below `-limit` rolls back.
    pub overdraft_limit: Option<i32>,
}

impl Default for DebitCreditConfig {
    fn default() -> Self {
        DebitCreditConfig {
            tellers_per_branch: 10,
            accounts_per_branch: 100_000,
            history_bytes: 2 << 20,
            overdraft_limit: None,
        }
    }
}

/// TPC-B's delta range.
pub const DELTA_MAX: i32 = 999_999;

/// The Debit-Credit tables in one segment.
#[derive(Clone, Debug)]
pub struct DebitCredit {
    pub branches: Table<Branch>,
    pub tellers: Table<Teller>,
    pub accounts: Table<Account>,
    pub history: Table<History>,
    tellers_per_branch: usize,
    accounts_per_branch: usize,
    overdraft_limit: Option<i32>,
}

/// The Debit-Credit transaction's id.
pub const DEBIT_CREDIT: ProcId = ProcId(0);
/// The read-only balance query's id: arguments an account id (u32), reply its balance (i32).
pub const BALANCE: ProcId = ProcId(1);
/// Bytes of the procedure's reply: the account's new balance.
pub const REPLY_LEN: usize = size_of::<i32>();
// The reply fits its dedup slot, so a retry is answered with one cache miss.
const _: () = assert!(REPLY_LEN <= DEDUP_REPLY_INLINE_MAX);

impl DebitCredit {
    /// Lays the tables out in a segment of `segment_len` bytes.
    pub fn new(segment_len: usize, config: &DebitCreditConfig) -> Result<DebitCredit, LayoutError> {
        assert!(
            config.tellers_per_branch > 0,
            "a branch has at least one teller"
        );
        assert!(
            config.accounts_per_branch > 0,
            "a branch has at least one account"
        );
        let mut layout = Layout::workload(segment_len);
        let tables_len = layout.segment_len();
        let history_records = config.history_bytes.min(tables_len / 4) / size_of::<History>();
        let history_count = if history_records == 0 {
            1
        } else {
            1 << history_records.ilog2()
        };
        let branch_bytes = size_of::<Branch>()
            + config.tellers_per_branch * size_of::<Teller>()
            + config.accounts_per_branch * size_of::<Account>();
        // Leave room for each table's alignment padding.
        let available = tables_len.saturating_sub(history_count * size_of::<History>() + 4 * 64);
        let (branch_count, accounts_per_branch) = match available / branch_bytes {
            0 => {
                let fixed = size_of::<Branch>() + config.tellers_per_branch * size_of::<Teller>();
                (
                    1,
                    (available.saturating_sub(fixed) / size_of::<Account>()).max(1),
                )
            }
            fit => (fit, config.accounts_per_branch),
        };
        let history = layout.table("history", history_count)?;
        let branches = layout.table("branch", branch_count)?;
        let tellers = layout.table("teller", branch_count * config.tellers_per_branch)?;
        let accounts = layout.table("account", branch_count * accounts_per_branch)?;
        Ok(DebitCredit {
            branches,
            tellers,
            accounts,
            history,
            tellers_per_branch: config.tellers_per_branch,
            accounts_per_branch,
            overdraft_limit: config.overdraft_limit,
        })
    }

    /// Writes the arguments of one debit-credit call: TPC-B's account, teller, branch, delta.
    pub fn encode_args(args: &mut Vec<u8>, account: u32, teller: u32, branch: u32, delta: i32) {
        args.clear();
        ArgWriter(args)
            .u32(account)
            .u32(teller)
            .u32(branch)
            .i32(delta);
    }

    /// The branch a teller belongs to.
    pub fn branch_of_teller(&self, teller: usize) -> usize {
        teller / self.tellers_per_branch
    }

    /// The branch an account belongs to.
    pub fn branch_of_account(&self, account: usize) -> usize {
        account / self.accounts_per_branch
    }

    /// The txn: adds `delta` to an account, a teller and the teller's branch, and appends a
    /// history record. Replies with the account's new balance.
    /// The balance of one account, as last committed.
    fn balance(
        &self,
        segment: &Segment,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError> {
        let mut reader = ArgReader::new(args);
        let account = reader.u32()? as usize;
        reader.finish()?;
        if account >= self.accounts.count() {
            return Err(ProcError::BadArgs("account id out of range"));
        }
        let balance = self.accounts.get_committed(segment, account).balance;
        reply.extend_from_slice(&balance.to_le_bytes());
        Ok(())
    }

    fn debit_credit(
        &self,
        txn: &mut Txn<'_>,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError> {
        let mut reader = ArgReader::new(args);
        let account = reader.u32()? as usize;
        let teller = reader.u32()? as usize;
        let branch = reader.u32()? as usize;
        let delta = reader.i32()?;
        reader.finish()?;
        if account >= self.accounts.count() {
            return Err(ProcError::BadArgs("account id out of range"));
        }
        if teller >= self.tellers.count() {
            return Err(ProcError::BadArgs("teller id out of range"));
        }
        // Multiplications rather than a division: this runs on every txn.
        let first_teller = branch.saturating_mul(self.tellers_per_branch);
        if teller < first_teller || teller >= first_teller + self.tellers_per_branch {
            return Err(ProcError::BadArgs(
                "the teller does not belong to the branch",
            ));
        }
        if !(-DELTA_MAX..=DELTA_MAX).contains(&delta) {
            return Err(ProcError::BadArgs("delta outside -999999..=999999"));
        }

        let account_balance: &mut i32 =
            self.accounts
                .update_field(txn, account, offset_of!(Account, balance));
        *account_balance = account_balance.wrapping_add(delta);
        let account_balance = *account_balance;
        let teller_balance: &mut i32 =
            self.tellers
                .update_field(txn, teller, offset_of!(Teller, balance));
        *teller_balance = teller_balance.wrapping_add(delta);
        let branch_balance: &mut i32 =
            self.branches
                .update_field(txn, branch, offset_of!(Branch, balance));
        *branch_balance = branch_balance.wrapping_add(delta);
        let slot = (txn.lsn_next() & (self.history.count() as u64 - 1)) as usize;
        *self.history.update(txn, slot) = History {
            account: account as u32,
            teller: teller as u32,
            branch: branch as u32,
            delta,
        };

        if let Some(limit) = self.overdraft_limit
            && account_balance < -limit
        {
            return Err(ProcError::Rollback("overdraft limit"));
        }
        ArgWriter(reply).i32(account_balance);
        Ok(())
    }

    /// Conservation alone: accounts, tellers and branches hold the same total (mod 2^32).
    /// The cheap part of [`Workload::check`], for checkers that run it after every batch.
    pub fn conservation(&self, segment: &Segment) -> Result<(), Inconsistency> {
        let accounts = self.account_total(segment);
        let tellers = self
            .tellers
            .iter_committed(segment)
            .fold(0i32, |sum, t| sum.wrapping_add(t.balance));
        let branches = self
            .branches
            .iter_committed(segment)
            .fold(0i32, |sum, b| sum.wrapping_add(b.balance));
        if accounts != tellers {
            return Err(Inconsistency {
                check: "accounts = tellers",
                detail: format!("account balances sum to {accounts}, teller balances to {tellers}"),
            });
        }
        if tellers != branches {
            return Err(Inconsistency {
                check: "tellers = branches",
                detail: format!("teller balances sum to {tellers}, branch balances to {branches}"),
            });
        }
        Ok(())
    }

    /// Sum of all account balances, modulo 2^32.
    pub fn account_total(&self, segment: &Segment) -> i32 {
        self.accounts
            .iter_committed(segment)
            .fold(0i32, |sum, account| sum.wrapping_add(account.balance))
    }
}

impl Workload for DebitCredit {
    const NAME: &'static str = "debit-credit";
    type Driver = DebitCreditDriver;

    fn registry() -> Registry<DebitCredit> {
        let mut registry = Registry::new();
        let id = registry.register(
            "debit-credit",
            |workload: &DebitCredit, txn, args, reply| workload.debit_credit(txn, args, reply),
        );
        assert_eq!(id, DEBIT_CREDIT);
        // Tellers, branches and the history's tail stay in cache; the account is the miss.
        registry.set_prefetch(id, |workload: &DebitCredit, segment, args| {
            if let Ok(account) = ArgReader::new(args).u32()
                && (account as usize) < workload.accounts.count()
            {
                segment.prefetch(workload.accounts.record_offset(account as usize));
            }
        });
        let id = registry
            .register_read("balance", |workload: &DebitCredit, segment, args, reply| {
                workload.balance(segment, args, reply)
            });
        assert_eq!(id, BALANCE);
        registry
    }

    /// Sets every record's ids; balances start at zero. Each txn covers at most 1000 records.
    fn load(&self, segment: &mut Segment) {
        const CHUNK: usize = 1000;
        assert!(
            self.accounts.end() <= DedupTable::for_segment_len(segment.len()).offset(),
            "the tables do not fit before the dedup table of a {}-byte segment",
            segment.len()
        );
        for first in (0..self.branches.count()).step_by(CHUNK) {
            let mut txn = segment.begin();
            for index in first..self.branches.count().min(first + CHUNK) {
                self.branches.update(&mut txn, index).id = index as u32;
            }
            txn.commit();
        }
        for first in (0..self.tellers.count()).step_by(CHUNK) {
            let mut txn = segment.begin();
            for index in first..self.tellers.count().min(first + CHUNK) {
                let teller = self.tellers.update(&mut txn, index);
                teller.id = index as u32;
                teller.branch = self.branch_of_teller(index) as u32;
            }
            txn.commit();
        }
        for first in (0..self.accounts.count()).step_by(CHUNK) {
            let mut txn = segment.begin();
            for index in first..self.accounts.count().min(first + CHUNK) {
                let account = self.accounts.update(&mut txn, index);
                account.id = index as u32;
                account.branch = self.branch_of_account(index) as u32;
            }
            txn.commit();
        }
    }

    /// Sum of account balances = sum of teller balances = sum of branch balances (mod 2^32),
    /// every history record names a teller of the branch it names, and the dedup table is
    /// well formed.
    fn check(&self, segment: &Segment) -> Result<(), Inconsistency> {
        self.conservation(segment)?;
        for (slot, history) in self.history.iter_committed(segment).enumerate() {
            if history == History::zeroed() {
                continue;
            }
            let teller_ok = (history.teller as usize) < self.tellers.count();
            if !teller_ok
                || self.branch_of_teller(history.teller as usize) != history.branch as usize
            {
                return Err(Inconsistency {
                    check: "history names the teller's branch",
                    detail: format!("history slot {slot} holds {history:?}"),
                });
            }
        }
        DedupTable::for_segment_len(segment.len()).check(segment)
    }

    fn check_quick(&self, segment: &Segment) -> Result<(), Inconsistency> {
        self.conservation(segment)
    }

    fn driver(&self, seed: u64) -> DebitCreditDriver {
        DebitCreditDriver {
            workload: self.clone(),
            rng: Rng::new(seed),
            accounts: self.accounts.count() as u64,
            branches: self.branches.count() as u64,
            tellers_per_branch: self.tellers_per_branch as u64,
            accounts_per_branch: self.accounts_per_branch as u64,
            delta_total: 0,
            committed: 0,
            rolled_back: 0,
        }
    }
}

/// Issues TPC-B calls: a random teller; an account of the teller's branch 85% of the time and
/// of another branch otherwise; a delta in -999,999..=999,999. Keeps the sum of the deltas that
/// committed, which the balances must add up to.
#[derive(Clone, Debug)]
pub struct DebitCreditDriver {
    /// The layout its check reads balances through.
    workload: DebitCredit,
    rng: Rng,
    accounts: u64,
    branches: u64,
    tellers_per_branch: u64,
    accounts_per_branch: u64,
    delta_total: i32,
    committed: u64,
    rolled_back: u64,
}

impl DebitCreditDriver {
    /// Sum of committed deltas, modulo 2^32.
    pub fn delta_total(&self) -> i32 {
        self.delta_total
    }

    pub fn committed(&self) -> u64 {
        self.committed
    }

    pub fn rolled_back(&self) -> u64 {
        self.rolled_back
    }
}

impl Driver for DebitCreditDriver {
    fn next_call(&mut self, args: &mut Vec<u8>) -> ProcId {
        let branch = self.rng.below(self.branches);
        let teller = branch * self.tellers_per_branch + self.rng.below(self.tellers_per_branch);
        let account = if self.branches > 1 && self.rng.percent(15) {
            // Any account outside the teller's branch.
            let other = self.rng.below(self.accounts - self.accounts_per_branch);
            let home_start = branch * self.accounts_per_branch;
            if other < home_start {
                other
            } else {
                other + self.accounts_per_branch
            }
        } else {
            let home_accounts = self
                .accounts_per_branch
                .min(self.accounts - branch * self.accounts_per_branch);
            branch * self.accounts_per_branch + self.rng.below(home_accounts)
        };
        let delta = self
            .rng
            .between(-i64::from(DELTA_MAX), i64::from(DELTA_MAX)) as i32;
        DebitCredit::encode_args(args, account as u32, teller as u32, branch as u32, delta);
        DEBIT_CREDIT
    }

    fn observe(&mut self, id: ProcId, args: &[u8], outcome: Result<(), &ProcError>) {
        assert_eq!(
            id, DEBIT_CREDIT,
            "the driver produces only debit-credit calls"
        );
        match outcome {
            Ok(()) => {
                let mut reader = ArgReader::new(args);
                let fields = (reader.u32(), reader.u32(), reader.u32(), reader.i32());
                let delta = fields
                    .3
                    .expect("the driver's own arguments are well formed");
                self.delta_total = self.delta_total.wrapping_add(delta);
                self.committed += 1;
            }
            Err(_) => self.rolled_back += 1,
        }
    }

    fn check(&self, segment: &Segment) -> Result<(), Inconsistency> {
        let accounts = self.workload.account_total(segment);
        if accounts != self.delta_total {
            return Err(Inconsistency {
                check: "balances = committed deltas",
                detail: format!(
                    "account balances sum to {accounts}, the {} committed deltas to {}",
                    self.committed, self.delta_total
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_memory::{PAGE_SIZE, Strategy};
    use tandem_store::Store;

    fn small_config() -> DebitCreditConfig {
        DebitCreditConfig {
            accounts_per_branch: 2_000,
            history_bytes: 16 * 1024,
            overdraft_limit: Some(1_500_000),
            ..DebitCreditConfig::default()
        }
    }

    fn run(strategy: Strategy, calls: usize) -> (Store, DebitCreditDriver, Segment) {
        let len = 256 * PAGE_SIZE;
        let workload = DebitCredit::new(len, &small_config()).unwrap();
        let mut driver = workload.driver(42);
        let mut store = Store::load(
            Segment::anonymous(len, strategy).unwrap(),
            tandem_store::Compiled::boxed(workload.clone()),
        );
        // A replica that starts from the same load and replays every committed record.
        let mut replica = Segment::anonymous(len, Strategy::V3InlineLog).unwrap();
        workload.load(&mut replica);
        tandem_store::drive(&mut store, &mut driver, calls, |redo| {
            replica.apply_redo(redo).unwrap();
        });
        (store, driver, replica)
    }

    #[test]
    fn scales_to_the_segment() {
        let full = DebitCredit::new(50 << 20, &DebitCreditConfig::default()).unwrap();
        assert_eq!(full.branches.count(), 5);
        assert_eq!(full.tellers.count(), 50);
        assert_eq!(full.accounts.count(), 500_000);
        assert_eq!(full.history.count(), 131_072);
        let odd = DebitCreditConfig {
            history_bytes: 3000,
            ..DebitCreditConfig::default()
        };
        assert_eq!(
            DebitCredit::new(50 << 20, &odd).unwrap().history.count(),
            128
        );
        let tiny = DebitCredit::new(PAGE_SIZE, &DebitCreditConfig::default()).unwrap();
        assert_eq!(tiny.branches.count(), 1);
        assert!(tiny.accounts.count() >= 1);
        assert!(tiny.accounts.end() <= PAGE_SIZE);
    }

    #[test]
    fn conservation_holds_after_runs_with_rollbacks_on_every_strategy() {
        for strategy in Strategy::ALL {
            let (store, driver, replica) = run(strategy, 20_000);
            assert!(
                driver.rolled_back() > 100,
                "{strategy}: the overdraft rule rolled back txns"
            );
            assert!(driver.committed() > 10_000);
            store
                .workload::<DebitCredit>()
                .check(store.segment())
                .unwrap();
            driver.check(store.segment()).unwrap();
            assert_eq!(replica.bytes(), store.segment().bytes(), "{strategy}");
        }
    }

    /// Runs a few calls on `strategy`, then commits a buggy txn written by `plant` behind the
    /// procedures' back, and returns the name of the check that failed.
    fn check_after_planting(
        strategy: Strategy,
        plant: impl FnOnce(&DebitCredit, &mut Txn<'_>),
    ) -> &'static str {
        let (store, _, _) = run(strategy, 100);
        let workload = store.workload::<DebitCredit>().clone();
        let (mut segment, _) = store.into_parts();
        let mut txn = segment.begin();
        plant(&workload, &mut txn);
        txn.commit();
        workload
            .check(&segment)
            .expect_err("the planted bug is caught")
            .check
    }

    fn add_to<T: Pod>(table: &Table<T>, txn: &mut Txn<'_>, index: usize, delta: i32) {
        // Every Debit-Credit record starts with its 4-byte balance.
        *table.update_field::<i32>(txn, index, 0) += delta;
    }

    #[test]
    fn the_check_catches_a_lost_teller_update() {
        // A buggy txn that credits an account and its branch but forgets the teller.
        let failed = check_after_planting(Strategy::V3InlineLog, |workload, txn| {
            add_to(&workload.accounts, txn, 3, 5);
            add_to(&workload.branches, txn, 0, 5);
        });
        assert_eq!(failed, "accounts = tellers");
    }

    #[test]
    fn the_check_catches_a_lost_branch_update() {
        let failed = check_after_planting(Strategy::V0LinkedUndo, |workload, txn| {
            add_to(&workload.tellers, txn, 1, 5);
            add_to(&workload.accounts, txn, 1, 5);
        });
        assert_eq!(failed, "tellers = branches");
    }

    #[test]
    fn the_check_catches_a_history_record_naming_the_wrong_branch() {
        let failed = check_after_planting(Strategy::V1MirrorCopy, |workload, txn| {
            workload.history.update(txn, 0).branch = 7;
        });
        assert_eq!(failed, "history names the teller's branch");
    }

    #[test]
    fn the_driver_check_catches_a_commit_it_did_not_see() {
        let (mut store, driver, _) = run(Strategy::V2MirrorDiff, 100);
        let mut args = Vec::new();
        DebitCredit::encode_args(&mut args, 0, 0, 0, 77);
        store.call(DEBIT_CREDIT, &args, &mut Vec::new()).unwrap();
        store
            .workload::<DebitCredit>()
            .check(store.segment())
            .unwrap();
        let err = driver.check(store.segment()).unwrap_err();
        assert_eq!(err.check, "balances = committed deltas");
    }

    #[test]
    fn bad_arguments_are_refused_and_change_nothing() {
        let (mut store, _, _) = run(Strategy::V1MirrorCopy, 10);
        let before = store.segment().bytes().to_vec();
        let lsn = store.segment().lsn();
        let mut args = Vec::new();
        let accounts = store.workload::<DebitCredit>().accounts.count() as u32;
        let cases = [
            (accounts, 0, 0, 1),
            (0, 1_000, 0, 1),
            (0, 10, 0, 1),
            (0, 0, 0, DELTA_MAX + 1),
        ];
        for (account, teller, branch, delta) in cases {
            DebitCredit::encode_args(&mut args, account, teller, branch, delta);
            let err = store
                .call(DEBIT_CREDIT, &args, &mut Vec::new())
                .unwrap_err();
            assert!(
                matches!(err, tandem_store::CallError::Proc(ProcError::BadArgs(_))),
                "{err}"
            );
        }
        let err = store
            .call(DEBIT_CREDIT, &args[..5], &mut Vec::new())
            .unwrap_err();
        assert!(matches!(
            err,
            tandem_store::CallError::Proc(ProcError::BadArgs(_))
        ));
        assert_eq!(store.segment().bytes(), &before[..]);
        assert_eq!(store.segment().lsn(), lsn);
    }
}
