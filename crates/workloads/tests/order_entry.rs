//! Order-Entry through the public API: scaling, runs on every logging strategy replayed on a
//! replica, the rollback rules, each procedure's effects, bad arguments, and a planted fault
//! for every consistency condition.

use std::mem::offset_of;

use tandem_memory::{PAGE_SIZE, Segment, Strategy, Txn};
use tandem_store::args::ArgReader;
use tandem_store::{CallError, Compiled, Driver, ProcError, ProcId, Store, Workload};
use tandem_workloads::order_entry::{
    CHECK_CARRIER, CHECK_DELIVERY_LSN, CHECK_NEW_ORDER_RANGE, CHECK_NEXT_ORDER_ID,
    CHECK_ORDER_LINE_COUNT, CHECK_RING_SLOTS, CHECK_WAREHOUSE_YTD, Customer, DELIVERY,
    DISTRICTS_PER_WAREHOUSE, District, NEW_ORDER, NewOrder, NewOrderLine, ORDER_LINES_MAX, Order,
    OrderEntry, OrderEntryConfig, OrderEntryDriver, OrderLine, PAYMENT,
};

/// One MiB holds two warehouses of the small configuration.
const SEGMENT_LEN: usize = 1 << 20;

/// A small database: 1,000 items, 100 customers per district, order rings of 64.
fn small_config() -> OrderEntryConfig {
    OrderEntryConfig {
        item_count: 1_000,
        customers_per_district: 100,
        orders_per_district: 64,
        history_per_warehouse: 256,
        ..OrderEntryConfig::default()
    }
}

fn load(strategy: Strategy) -> Store {
    let workload = OrderEntry::new(SEGMENT_LEN, &small_config()).unwrap();
    Store::load(
        Segment::anonymous(SEGMENT_LEN, strategy).unwrap(),
        Compiled::boxed(workload),
    )
}

/// Issues `calls` driver calls; returns the store, the driver and a replica that loaded the
/// same database and applied every committed redo record.
fn run(strategy: Strategy, calls: usize) -> (Store, OrderEntryDriver, Segment) {
    let mut store = load(strategy);
    let mut replica = Segment::anonymous(SEGMENT_LEN, Strategy::V3InlineLog).unwrap();
    store.workload::<OrderEntry>().load(&mut replica);
    let mut driver = store.workload::<OrderEntry>().driver(7);
    tandem_store::drive(&mut store, &mut driver, calls, |redo| {
        replica.apply_redo(redo).unwrap();
    });
    (store, driver, replica)
}

fn call(store: &mut Store, id: ProcId, args: &[u8]) -> Result<Vec<u8>, CallError> {
    let mut reply = Vec::new();
    store.call(id, args, &mut reply)?;
    Ok(reply)
}

/// Commits `plant`, a buggy txn, on the store's segment and returns what the check says.
fn check_after(
    store: Store,
    plant: impl FnOnce(&OrderEntry, &mut Txn<'_>),
) -> tandem_store::Inconsistency {
    let workload = store.workload::<OrderEntry>().clone();
    let (mut segment, _) = store.into_parts();
    workload.check(&segment).unwrap();
    let mut txn = segment.begin();
    plant(&workload, &mut txn);
    txn.commit();
    workload.check(&segment).unwrap_err()
}

fn district(
    workload: &OrderEntry,
    segment: &Segment,
    warehouse: usize,
    district: usize,
) -> District {
    workload
        .district
        .get_committed(segment, workload.district_index(warehouse, district))
}

/// A district of the store with at least `undelivered` undelivered orders.
fn district_with_backlog(store: &Store, undelivered: u32) -> (usize, usize) {
    let workload = store.workload::<OrderEntry>();
    for warehouse in 0..workload.warehouses() {
        for district_id in 0..DISTRICTS_PER_WAREHOUSE {
            let record = district(workload, store.segment(), warehouse, district_id);
            if record.next_order_id - record.oldest_undelivered_order_id >= undelivered {
                return (warehouse, district_id);
            }
        }
    }
    panic!("no district has {undelivered} undelivered orders");
}

/// `count` order lines of distinct items, every fourth supplied by the other of warehouses 0
/// and 1.
fn lines(count: usize, warehouse: u32) -> Vec<NewOrderLine> {
    (0..count as u32)
        .map(|index| NewOrderLine {
            item_id: index * 37,
            supply_warehouse_id: if index % 4 == 3 {
                1 - warehouse
            } else {
                warehouse
            },
            quantity: 1 + index % 10,
        })
        .collect()
}

fn assert_bad_args(result: Result<Vec<u8>, CallError>) {
    assert!(
        matches!(result, Err(CallError::Proc(ProcError::BadArgs(_)))),
        "{result:?}"
    );
}

#[test]
fn warehouses_scale_with_the_segment() {
    let full = OrderEntry::new(50 << 20, &OrderEntryConfig::default()).unwrap();
    assert_eq!(full.warehouses(), 3);
    assert!(full.layout_len() <= 50 << 20);
    assert!(OrderEntry::with_warehouses(50 << 20, &OrderEntryConfig::default(), 4).is_err());

    let small = OrderEntry::new(SEGMENT_LEN, &small_config()).unwrap();
    assert_eq!(small.warehouses(), 2);
    assert_eq!(small.preloaded_orders_per_district(), 38);
    assert_eq!(small.preloaded_undelivered_per_district(), 11);

    let err = OrderEntry::new(64 * PAGE_SIZE, &OrderEntryConfig::default()).unwrap_err();
    assert!(
        err.to_string().contains("give a larger database size"),
        "{err}"
    );
}

#[test]
fn runs_stay_consistent_and_replicate_on_every_strategy() {
    for strategy in Strategy::ALL {
        let (store, driver, replica) = run(strategy, 4_000);
        let new_orders = driver.counts(NEW_ORDER);
        assert!(
            new_orders.rolled_back > 0,
            "{strategy}: the unknown-item rule rolled back new-orders"
        );
        assert!(new_orders.committed > 1_000, "{strategy}: {new_orders:?}");
        assert_eq!(driver.counts(PAYMENT).rolled_back, 0, "{strategy}");
        assert_eq!(driver.counts(DELIVERY).rolled_back, 0, "{strategy}");
        assert!(driver.counts(DELIVERY).committed > 100, "{strategy}");
        assert_eq!(driver.rollbacks(), new_orders.rolled_back);
        let workload = store.workload::<OrderEntry>();
        assert!(
            workload.orders_delivered(store.segment()) > 1_000,
            "{strategy}"
        );
        workload.check(store.segment()).unwrap();
        driver.check(store.segment()).unwrap();
        assert_eq!(replica.lsn(), store.segment().lsn(), "{strategy}");
        assert_eq!(replica.bytes(), store.segment().bytes(), "{strategy}");
        assert_eq!(
            replica.page_versions(),
            store.segment().page_versions(),
            "{strategy}"
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_database() {
    let (first, _, _) = run(Strategy::V1MirrorCopy, 500);
    let (second, _, _) = run(Strategy::V2MirrorDiff, 500);
    assert_eq!(first.segment().bytes(), second.segment().bytes());
}

#[test]
fn an_unknown_last_item_rolls_back_every_earlier_line() {
    for strategy in Strategy::ALL {
        let mut store = load(strategy);
        let before = store.segment().bytes().to_vec();
        let lsn = store.segment().lsn();
        let item_count = store.workload::<OrderEntry>().item_count() as u32;
        let mut order = lines(ORDER_LINES_MAX, 0);
        order.last_mut().unwrap().item_id = item_count;
        let mut args = Vec::new();
        OrderEntry::encode_new_order(&mut args, 0, 4, 9, &order);
        assert_eq!(
            call(&mut store, NEW_ORDER, &args).unwrap_err(),
            CallError::Proc(ProcError::Rollback("unknown item"))
        );
        assert_eq!(store.segment().bytes(), &before[..], "{strategy}");
        assert_eq!(
            store.segment().lsn(),
            lsn,
            "{strategy}: a rollback takes no LSN"
        );

        order.last_mut().unwrap().item_id = item_count - 1;
        OrderEntry::encode_new_order(&mut args, 0, 4, 9, &order);
        let reply = call(&mut store, NEW_ORDER, &args).unwrap();
        let mut reader = ArgReader::new(&reply);
        let order_id = reader.u32().unwrap();
        assert!(reader.i64().unwrap() > 0);
        reader.finish().unwrap();
        let workload = store.workload::<OrderEntry>();
        assert_eq!(
            order_id as usize,
            workload.preloaded_orders_per_district() + 1
        );
        let order_index = workload.order_index(0, 4, order_id);
        let record = workload.order.get_committed(store.segment(), order_index);
        assert_eq!(record.line_count as usize, ORDER_LINES_MAX);
        assert_eq!(record.all_local, 0, "some lines come from warehouse 1");
        workload.check(store.segment()).unwrap();
    }
}

#[test]
fn new_order_updates_stock_and_writes_priced_lines() {
    let mut store = load(Strategy::V3InlineLog);
    let order = lines(6, 1);
    let workload = store.workload::<OrderEntry>().clone();
    let stock_before: Vec<_> = order
        .iter()
        .map(|line| {
            let index =
                workload.stock_index(line.supply_warehouse_id as usize, line.item_id as usize);
            workload.stock.get_committed(store.segment(), index).level
        })
        .collect();
    let mut args = Vec::new();
    OrderEntry::encode_new_order(&mut args, 1, 2, 3, &order);
    let reply = call(&mut store, NEW_ORDER, &args).unwrap();
    let order_id = ArgReader::new(&reply).u32().unwrap();
    let order_index = workload.order_index(1, 2, order_id);
    let segment = store.segment();
    assert_eq!(
        workload.new_order.get_committed(segment, order_index),
        NewOrder { order_id, valid: 1 }
    );
    for (number, (line, before)) in order.iter().zip(stock_before).enumerate() {
        let stock_index =
            workload.stock_index(line.supply_warehouse_id as usize, line.item_id as usize);
        let after = workload.stock.get_committed(segment, stock_index).level;
        let expected_quantity = if before.quantity >= line.quantity + 10 {
            before.quantity - line.quantity
        } else {
            before.quantity + 91 - line.quantity
        };
        assert_eq!(after.quantity, expected_quantity);
        assert_eq!(after.ytd_quantity, before.ytd_quantity + line.quantity);
        assert_eq!(after.order_count, before.order_count + 1);
        let remote = u32::from(line.supply_warehouse_id != 1);
        assert_eq!(after.remote_count, before.remote_count + remote);
        let price = workload
            .item
            .get_committed(segment, line.item_id as usize)
            .price_cents;
        let written = workload
            .order_line
            .get_committed(segment, workload.order_line_index(order_index, number));
        assert_eq!(
            written,
            OrderLine {
                order_id,
                item_id: line.item_id,
                supply_warehouse_id: line.supply_warehouse_id,
                quantity: line.quantity,
                amount_cents: i64::from(line.quantity) * price,
                delivery_lsn: 0,
            }
        );
    }
    workload.check(segment).unwrap();
}

#[test]
fn a_full_district_backlog_rolls_back_new_order_until_a_delivery() {
    let mut store = load(Strategy::V0LinkedUndo);
    let workload = store.workload::<OrderEntry>().clone();
    let room = workload.orders_per_district() - workload.preloaded_undelivered_per_district();
    let mut args = Vec::new();
    OrderEntry::encode_new_order(&mut args, 1, 7, 0, &lines(5, 1));
    for _ in 0..room {
        call(&mut store, NEW_ORDER, &args).unwrap();
    }
    // The ring now holds only undelivered orders, newer ones over delivered ones.
    workload.check(store.segment()).unwrap();
    let before = store.segment().bytes().to_vec();
    assert_eq!(
        call(&mut store, NEW_ORDER, &args).unwrap_err(),
        CallError::Proc(ProcError::Rollback("district backlog full"))
    );
    assert_eq!(store.segment().bytes(), &before[..]);

    let mut delivery = Vec::new();
    OrderEntry::encode_delivery(&mut delivery, 1, 4);
    let reply = call(&mut store, DELIVERY, &delivery).unwrap();
    assert_eq!(ArgReader::new(&reply).u32().unwrap(), 10);
    call(&mut store, NEW_ORDER, &args).unwrap();
    workload.check(store.segment()).unwrap();
}

#[test]
fn delivery_delivers_the_oldest_order_of_each_district() {
    let mut store = load(Strategy::V2MirrorDiff);
    let workload = store.workload::<OrderEntry>().clone();
    let mut args = Vec::new();
    OrderEntry::encode_delivery(&mut args, 0, 3);
    for round in 0..workload.preloaded_undelivered_per_district() {
        let segment = store.segment();
        let mut expected = Vec::new();
        for district_id in 0..DISTRICTS_PER_WAREHOUSE {
            let order_id = district(&workload, segment, 0, district_id).oldest_undelivered_order_id;
            let order_index = workload.order_index(0, district_id, order_id);
            let order = workload.order.get_committed(segment, order_index);
            let amount_cents: i64 = (0..order.line_count as usize)
                .map(|line| {
                    let index = workload.order_line_index(order_index, line);
                    workload
                        .order_line
                        .get_committed(segment, index)
                        .amount_cents
                })
                .sum();
            let customer_index =
                workload.customer_index(0, district_id, order.customer_id as usize);
            let account = workload
                .customer
                .get_committed(segment, customer_index)
                .account;
            expected.push((order_id, order_index, customer_index, account, amount_cents));
        }
        let lsn = store.segment().lsn() + 1;
        let reply = call(&mut store, DELIVERY, &args).unwrap();
        assert_eq!(ArgReader::new(&reply).u32().unwrap(), 10, "round {round}");
        let segment = store.segment();
        for (district_id, (order_id, order_index, customer_index, account, amount_cents)) in
            expected.into_iter().enumerate()
        {
            let record = district(&workload, segment, 0, district_id);
            assert_eq!(record.oldest_undelivered_order_id, order_id + 1);
            let order = workload.order.get_committed(segment, order_index);
            assert_eq!(order.carrier_id, 3);
            assert_eq!(
                workload.new_order.get_committed(segment, order_index).valid,
                0
            );
            for line in 0..order.line_count as usize {
                let index = workload.order_line_index(order_index, line);
                assert_eq!(
                    workload
                        .order_line
                        .get_committed(segment, index)
                        .delivery_lsn,
                    lsn
                );
            }
            let after = workload
                .customer
                .get_committed(segment, customer_index)
                .account;
            assert_eq!(after.balance_cents, account.balance_cents + amount_cents);
            assert_eq!(after.delivery_count, account.delivery_count + 1);
        }
    }
    // Every district of warehouse 0 is delivered: a delivery now finds nothing, and commits.
    let reply = call(&mut store, DELIVERY, &args).unwrap();
    assert_eq!(ArgReader::new(&reply).u32().unwrap(), 0);
    workload.check(store.segment()).unwrap();
}

#[test]
fn payment_moves_the_amount_and_appends_history() {
    let mut store = load(Strategy::V3InlineLog);
    let workload = store.workload::<OrderEntry>().clone();
    let customer_index = workload.customer_index(1, 5, 42);
    let before: Customer = workload
        .customer
        .get_committed(store.segment(), customer_index);
    let warehouse_ytd = workload
        .warehouse
        .get_committed(store.segment(), 0)
        .ytd_cents;
    let district_ytd = district(&workload, store.segment(), 0, 2).ytd_cents;
    let mut args = Vec::new();
    OrderEntry::encode_payment(&mut args, 0, 2, 1, 5, 42, 123_456);
    let lsn = store.segment().lsn() + 1;
    let reply = call(&mut store, PAYMENT, &args).unwrap();
    let segment = store.segment();
    let after = workload.customer.get_committed(segment, customer_index);
    assert_eq!(
        ArgReader::new(&reply).i64().unwrap(),
        before.account.balance_cents - 123_456
    );
    assert_eq!(
        after.account.balance_cents,
        before.account.balance_cents - 123_456
    );
    assert_eq!(
        after.account.ytd_payment_cents,
        before.account.ytd_payment_cents + 123_456
    );
    assert_eq!(
        after.account.payment_count,
        before.account.payment_count + 1
    );
    assert_eq!(
        workload.warehouse.get_committed(segment, 0).ytd_cents,
        warehouse_ytd + 123_456
    );
    assert_eq!(
        district(&workload, segment, 0, 2).ytd_cents,
        district_ytd + 123_456
    );
    let slot = (lsn % workload.history_per_warehouse() as u64) as usize;
    let history = workload.history.get_committed(segment, slot);
    assert_eq!(
        (
            history.customer_id,
            history.customer_district_id,
            history.customer_warehouse_id,
            history.district_id,
            history.amount_cents,
            history.lsn
        ),
        (42, 5, 1, 2, 123_456, lsn)
    );
    workload.check(segment).unwrap();
    assert_eq!(workload.payments_total_cents(segment), 123_456);
}

#[test]
fn bad_arguments_are_refused_and_change_nothing() {
    let (mut store, _, _) = run(Strategy::V1MirrorCopy, 200);
    let before = store.segment().bytes().to_vec();
    let lsn = store.segment().lsn();
    let workload = store.workload::<OrderEntry>().clone();
    let warehouses = workload.warehouses() as u32;
    let customers = workload.customers_per_district() as u32;
    let mut args = Vec::new();

    let good = lines(5, 0);
    let mut bad_supply = good.clone();
    bad_supply[2].supply_warehouse_id = warehouses;
    let mut bad_quantity = good.clone();
    bad_quantity[4].quantity = 11;
    let mut zero_quantity = good.clone();
    zero_quantity[0].quantity = 0;
    let too_many = lines(16, 0);
    let too_few = lines(4, 0);
    let new_orders: [(u32, u32, u32, &[NewOrderLine]); 8] = [
        (warehouses, 0, 0, &good),
        (0, 10, 0, &good),
        (0, 0, customers, &good),
        (0, 0, 0, &bad_supply),
        (0, 0, 0, &bad_quantity),
        (0, 0, 0, &zero_quantity),
        (0, 0, 0, &too_many),
        (0, 0, 0, &too_few),
    ];
    for (warehouse, district_id, customer, order) in new_orders {
        OrderEntry::encode_new_order(&mut args, warehouse, district_id, customer, order);
        assert_bad_args(call(&mut store, NEW_ORDER, &args));
    }
    OrderEntry::encode_new_order(&mut args, 0, 0, 0, &good);
    assert_bad_args(call(&mut store, NEW_ORDER, &args[..args.len() - 1]));
    args.push(0);
    assert_bad_args(call(&mut store, NEW_ORDER, &args));

    let payments = [
        (warehouses, 0, 0, 0, 0, 100),
        (0, 10, 0, 0, 0, 100),
        (0, 0, warehouses, 0, 0, 100),
        (0, 0, 0, 10, 0, 100),
        (0, 0, 0, 0, customers, 100),
        (0, 0, 0, 0, 0, 99),
        (0, 0, 0, 0, 0, 500_001),
        (0, 0, 0, 0, 0, -100),
    ];
    for (warehouse, district_id, customer_warehouse, customer_district, customer, amount) in
        payments
    {
        OrderEntry::encode_payment(
            &mut args,
            warehouse,
            district_id,
            customer_warehouse,
            customer_district,
            customer,
            amount,
        );
        assert_bad_args(call(&mut store, PAYMENT, &args));
    }
    OrderEntry::encode_payment(&mut args, 0, 0, 0, 0, 0, 100);
    assert_bad_args(call(&mut store, PAYMENT, &args[..args.len() - 3]));

    for (warehouse, carrier) in [(warehouses, 1), (0, 0), (0, 11)] {
        OrderEntry::encode_delivery(&mut args, warehouse, carrier);
        assert_bad_args(call(&mut store, DELIVERY, &args));
    }
    OrderEntry::encode_delivery(&mut args, 0, 1);
    assert_bad_args(call(&mut store, DELIVERY, &args[..4]));
    assert_bad_args(call(&mut store, DELIVERY, &[]));

    assert_eq!(store.segment().bytes(), &before[..]);
    assert_eq!(store.segment().lsn(), lsn);
}

#[test]
fn the_driver_check_catches_commits_it_did_not_observe() {
    let (mut store, driver, _) = run(Strategy::V3InlineLog, 300);
    driver.check(store.segment()).unwrap();
    let mut args = Vec::new();
    OrderEntry::encode_payment(&mut args, 0, 0, 0, 0, 0, 100);
    call(&mut store, PAYMENT, &args).unwrap();
    store
        .workload::<OrderEntry>()
        .check(store.segment())
        .unwrap();
    let err = driver.check(store.segment()).unwrap_err();
    assert_eq!(err.check, "W_YTD growth = committed payments");

    OrderEntry::encode_new_order(&mut args, 0, 0, 0, &lines(5, 0));
    call(&mut store, NEW_ORDER, &args).unwrap();
    let err = driver.check(store.segment()).unwrap_err();
    assert_eq!(err.check, "orders entered = committed new-orders");
}

#[test]
fn the_check_names_condition_1_for_a_lost_warehouse_ytd_update() {
    let (store, _, _) = run(Strategy::V3InlineLog, 500);
    let err = check_after(store, |workload, txn| {
        let index = workload.district_index(1, 3);
        *workload
            .district
            .update_field::<i64>(txn, index, offset_of!(District, ytd_cents)) += 500;
    });
    assert_eq!(err.check, CHECK_WAREHOUSE_YTD);
    assert!(err.detail.starts_with("warehouse 1:"), "{}", err.detail);
}

#[test]
fn the_check_names_condition_2_for_a_skipped_order_id() {
    let (store, _, _) = run(Strategy::V0LinkedUndo, 500);
    let err = check_after(store, |workload, txn| {
        let index = workload.district_index(0, 6);
        *workload
            .district
            .update_field::<u32>(txn, index, offset_of!(District, next_order_id)) += 1;
    });
    assert_eq!(err.check, CHECK_NEXT_ORDER_ID);
    assert!(
        err.detail.starts_with("warehouse 0 district 6:"),
        "{}",
        err.detail
    );
}

#[test]
fn the_check_names_condition_3_for_a_hole_in_the_new_order_rows() {
    let (store, _, _) = run(Strategy::V1MirrorCopy, 500);
    let (warehouse, district_id) = district_with_backlog(&store, 3);
    let err = check_after(store, |workload, txn| {
        let oldest = workload
            .district
            .get(txn, workload.district_index(warehouse, district_id))
            .oldest_undelivered_order_id;
        let index = workload.order_index(warehouse, district_id, oldest + 1);
        *workload
            .new_order
            .update_field::<u32>(txn, index, offset_of!(NewOrder, valid)) = 0;
    });
    assert_eq!(err.check, CHECK_NEW_ORDER_RANGE);
    let expected = format!("warehouse {warehouse} district {district_id}:");
    assert!(err.detail.starts_with(&expected), "{}", err.detail);
}

#[test]
fn the_check_names_condition_4_for_a_wrong_line_count() {
    let (store, _, _) = run(Strategy::V2MirrorDiff, 500);
    let err = check_after(store, |workload, txn| {
        let next = workload
            .district
            .get(txn, workload.district_index(1, 9))
            .next_order_id;
        let index = workload.order_index(1, 9, next - 3);
        *workload
            .order
            .update_field::<u32>(txn, index, offset_of!(Order, line_count)) -= 1;
    });
    assert_eq!(err.check, CHECK_ORDER_LINE_COUNT);
    assert!(
        err.detail.starts_with("warehouse 1 district 9:"),
        "{}",
        err.detail
    );
}

#[test]
fn the_check_names_condition_5_for_a_carrier_on_an_undelivered_order() {
    let (store, _, _) = run(Strategy::V3InlineLog, 500);
    let (warehouse, district_id) = district_with_backlog(&store, 1);
    let err = check_after(store, |workload, txn| {
        let oldest = workload
            .district
            .get(txn, workload.district_index(warehouse, district_id))
            .oldest_undelivered_order_id;
        let index = workload.order_index(warehouse, district_id, oldest);
        *workload
            .order
            .update_field::<u32>(txn, index, offset_of!(Order, carrier_id)) = 2;
    });
    assert_eq!(err.check, CHECK_CARRIER);
}

#[test]
fn the_check_names_condition_7_for_a_delivery_lsn_on_an_undelivered_line() {
    let (store, _, _) = run(Strategy::V3InlineLog, 500);
    let (warehouse, district_id) = district_with_backlog(&store, 1);
    let err = check_after(store, |workload, txn| {
        let oldest = workload
            .district
            .get(txn, workload.district_index(warehouse, district_id))
            .oldest_undelivered_order_id;
        let order_index = workload.order_index(warehouse, district_id, oldest);
        let index = workload.order_line_index(order_index, 2);
        *workload
            .order_line
            .update_field::<u64>(txn, index, offset_of!(OrderLine, delivery_lsn)) = 1;
    });
    assert_eq!(err.check, CHECK_DELIVERY_LSN);
}

#[test]
fn the_check_names_the_ring_shape_for_an_order_in_the_wrong_slot() {
    let store = load(Strategy::V3InlineLog);
    // Order 5 is delivered at load; relabel it, and its lines, as order 6.
    let err = check_after(store, |workload, txn| {
        let order_index = workload.order_index(0, 0, 5);
        let order = workload.order.get(txn, order_index);
        assert_ne!(order.carrier_id, 0);
        *workload
            .order
            .update_field::<u32>(txn, order_index, offset_of!(Order, id)) = 6;
        for line in 0..order.line_count as usize {
            let index = workload.order_line_index(order_index, line);
            *workload
                .order_line
                .update_field::<u32>(txn, index, offset_of!(OrderLine, order_id)) = 6;
        }
    });
    assert_eq!(err.check, CHECK_RING_SLOTS);
}

#[test]
fn the_default_scale_loads_and_runs_consistently() {
    let len = 50 << 20;
    let workload = OrderEntry::new(len, &OrderEntryConfig::default()).unwrap();
    let mut driver = workload.driver(1);
    let mut store = Store::load(
        Segment::anonymous(len, Strategy::V3InlineLog).unwrap(),
        Compiled::boxed(workload),
    );
    store
        .workload::<OrderEntry>()
        .check(store.segment())
        .unwrap();
    tandem_store::drive(&mut store, &mut driver, 2_000, |_| {});
    store
        .workload::<OrderEntry>()
        .check(store.segment())
        .unwrap();
    driver.check(store.segment()).unwrap();
}
