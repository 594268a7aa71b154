//! Prefetch hints read arguments from outside; garbage must neither panic nor change a byte.

use tandem_memory::{Segment, Strategy};
use tandem_store::{Compiled, ProcId, Rng, Store};

use crate::debit_credit::{DebitCredit, DebitCreditConfig};
use crate::order_entry::{OrderEntry, OrderEntryConfig};

fn prefetch_garbage(store: &Store) {
    let before = store.segment().bytes().to_vec();
    let mut rng = Rng::new(3);
    for len in 0..80 {
        let args: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        for id in 0..=store.model().procedure_count() as u16 {
            store.prefetch(ProcId(id), &args);
            store.prefetch(ProcId(id), &[0xff; 64]);
        }
    }
    assert_eq!(store.segment().bytes(), &before[..]);
}

#[test]
fn prefetch_hints_ignore_garbage_and_change_nothing() {
    let len = 4 << 20;
    let config = DebitCreditConfig {
        accounts_per_branch: 1000,
        ..Default::default()
    };
    let debit_credit = DebitCredit::new(len, &config).unwrap();
    let segment = Segment::anonymous(len, Strategy::V3InlineLog).unwrap();
    prefetch_garbage(&Store::load(segment, Compiled::boxed(debit_credit)));

    let config = OrderEntryConfig {
        item_count: 1000,
        customers_per_district: 100,
        orders_per_district: 64,
        history_per_warehouse: 256,
        ..Default::default()
    };
    let order_entry = OrderEntry::new(len, &config).unwrap();
    let segment = Segment::anonymous(len, Strategy::V3InlineLog).unwrap();
    prefetch_garbage(&Store::load(segment, Compiled::boxed(order_entry)));
}
