//! Order-Entry: TPC-C's three update transactions, as Vista runs them (seed 000, section 2.4).
//!
//! The database is TPC-C's, kept compact: warehouses, ten districts per warehouse, customers
//! per district, one global item table, stock per warehouse and item, orders with their
//! new-order rows and order lines, and a payment history per warehouse. The procedures are
//! new-order, payment and delivery (ids [`NEW_ORDER`], [`PAYMENT`], [`DELIVERY`]); TPC-C's
//! read-only order-status and stock-level are left out, as the paper leaves them out.
//!
//! Conventions:
//! - Money is `i64` cents; tax and discount rates are basis points (1/10,000).
//! - Warehouse, district, customer and item ids are 0-based indices. Order ids start at 1 in
//!   each district, so an order slot holding id 0 has never been used.
//! - Dates are LSNs: a txn stamps what it writes with [`Txn::lsn_next`], the LSN it takes if it
//!   commits. Commits are serial, so LSNs order events as TPC-C's timestamps do.
//! - An item id of at least the item count is TPC-C's "unused item": new-order discovers it
//!   while processing that line, after the earlier lines' updates, and rolls the txn back. Every
//!   other out-of-range argument is [`ProcError::BadArgs`], found before anything is written.
//!
//! # Rings instead of growing tables
//!
//! A segment has a fixed size, so the tables TPC-C grows are rings:
//! - Each district keeps its orders in a ring of `orders_per_district` slots: order `o_id` lives
//!   in slot `o_id % capacity`, with its 15 order-line slots (TPC-C's maximum) and its row in
//!   the district's new-order ring, which has the same capacity. A new-order overwrites the
//!   oldest order of its slot, so the live orders of a district are its newest `capacity`.
//! - An order line carries its order's id. An order with fewer lines than the one that used
//!   the slot before leaves the older lines in place, recognizably stale.
//! - A new-order row is `(o_id, valid)`; delivery clears `valid` instead of deleting the row.
//!   The district's undelivered orders are exactly `D_OLDEST_UNDELIVERED_O_ID..D_NEXT_O_ID`, so
//!   delivery finds the oldest without a search. A new-order whose slot still holds an
//!   undelivered order (the district's backlog fills the ring) rolls back with
//!   "district backlog full" before writing anything.
//! - The payment history of a warehouse is a ring whose slot is the txn's LSN modulo its
//!   capacity, so no head pointer is written (as Debit-Credit does).
//!
//! # Consistency conditions
//!
//! [`OrderEntry::check`](Workload::check) verifies TPC-C's consistency conditions 1 to 4 (clause
//! 3.3.2), adapted to the rings, plus 5, 7 and the shape of the rings, and then checks the
//! store's dedup table ([`DedupTable::check`](tandem_store::DedupTable::check)). For a district, the live
//! orders are the occupied slots of its order ring (O_ID ≠ 0), the live order lines are the line
//! slots of a live order that carry that order's O_ID, and the new-order rows are the valid rows
//! of its new-order ring.
//! - Condition 1: for each warehouse, W_YTD = sum of D_YTD over its districts. Loading gives every warehouse
//!   TPC-C's 300,000.00 and every district 30,000.00, so this holds from the load on.
//! - Condition 2: for each district, D_NEXT_O_ID − 1 = max(O_ID) over its live orders (0 when it has
//!   none), and, when it has new-order rows, = max(NO_O_ID).
//! - Condition 3: for each district with new-order rows, max(NO_O_ID) − min(NO_O_ID) + 1 = the number of
//!   rows, and min(NO_O_ID) = D_OLDEST_UNDELIVERED_O_ID; a district without rows has
//!   D_OLDEST_UNDELIVERED_O_ID = D_NEXT_O_ID.
//! - Condition 4: for each district, sum(O_OL_CNT) over its live orders = the number of its live order
//!   lines.
//! - Condition 5: a live order has O_CARRIER_ID = 0 exactly when the new-order row of its slot is valid and
//!   names it.
//! - Condition 7: a live order line has a delivery LSN of 0 exactly when its order has O_CARRIER_ID = 0.
//!
//! - Ring shape: every live order and every valid new-order row sits in the slot its id maps
//!   to, with D_NEXT_O_ID − capacity ≤ id < D_NEXT_O_ID.
//!
//! Warehouses and districts are checked in order; within a district, conditions 2, 3 and 4 are
//! checked in that order before the ring shape and conditions 5 and 7, so a fault is named by
//! the most basic of conditions 1 to 4 it breaks.
//!
//! # Cost
//!
//! The benchmark issues these txns as fast as it can, so procedures allocate nothing (the
//! reply buffer aside) and declare only what they change: single fields through
//! [`Table::update_field`], the fields a txn changes together grouped in one small struct
//! ([`CustomerAccount`], [`StockLevel`]), and a new order's lines as one range.

use std::mem::offset_of;

use bytemuck::{Pod, Zeroable};
use tandem_memory::{Segment, Txn};

use tandem_store::args::{ArgReader, ArgWriter};
use tandem_store::{
    DEDUP_REPLY_INLINE_MAX, DedupTable, Driver, Inconsistency, Layout, LayoutError, ProcError,
    ProcId, Registry, Rng, Table, Workload,
};

/// TPC-C's fixed number of districts per warehouse.
pub const DISTRICTS_PER_WAREHOUSE: usize = 10;
/// Fewest lines of one order.
pub const ORDER_LINES_MIN: usize = 5;
/// Most lines of one order: every order slot has this many line slots.
pub const ORDER_LINES_MAX: usize = 15;
/// Largest quantity of one order line; the smallest is 1.
pub const QUANTITY_MAX: u32 = 10;
/// Smallest payment, 1.00.
pub const PAYMENT_MIN_CENTS: i64 = 100;
/// Largest payment, 5,000.00.
pub const PAYMENT_MAX_CENTS: i64 = 500_000;
/// Largest carrier id; the smallest is 1, and 0 marks an undelivered order.
pub const CARRIER_ID_MAX: u32 = 10;

/// The new-order procedure.
pub const NEW_ORDER: ProcId = ProcId(0);
/// The payment procedure.
pub const PAYMENT: ProcId = ProcId(1);
/// The delivery procedure.
pub const DELIVERY: ProcId = ProcId(2);
const PROCEDURE_COUNT: usize = 3;
/// Bytes of the longest reply, new-order's: the order id (u32) and its total (i64 cents).
/// Payment replies with 8 bytes, delivery with 4.
pub const REPLY_LEN_MAX: usize = size_of::<u32>() + size_of::<i64>();
// Every reply fits its dedup slot, so a retry is answered with one cache miss.
const _: () = assert!(REPLY_LEN_MAX <= DEDUP_REPLY_INLINE_MAX);

// The names under which [`OrderEntry::check`](Workload::check) reports its conditions; the
// module doc states each precisely.
/// Condition 1.
pub const CHECK_WAREHOUSE_YTD: &str = "1: W_YTD = sum(D_YTD)";
/// Condition 2.
pub const CHECK_NEXT_ORDER_ID: &str = "2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)";
/// Condition 3.
pub const CHECK_NEW_ORDER_RANGE: &str =
    "3: new-order rows = D_OLDEST_UNDELIVERED_O_ID..D_NEXT_O_ID";
/// Condition 4.
pub const CHECK_ORDER_LINE_COUNT: &str = "4: sum(O_OL_CNT) = live order lines";
/// Condition 5.
pub const CHECK_CARRIER: &str = "5: O_CARRIER_ID = 0 iff the order has a new-order row";
/// Condition 7.
pub const CHECK_DELIVERY_LSN: &str = "7: OL_DELIVERY_D = 0 iff O_CARRIER_ID = 0";
/// The shape of the order and new-order rings.
pub const CHECK_RING_SLOTS: &str = "ring slots hold their own ids";

/// Initial year-to-date totals (TPC-C clause 4.3.3.1); a warehouse's is its districts' sum.
const WAREHOUSE_YTD_INITIAL_CENTS: i64 = 30_000_000;
const DISTRICT_YTD_INITIAL_CENTS: i64 = 3_000_000;
const _: () = assert!(
    WAREHOUSE_YTD_INITIAL_CENTS == DISTRICT_YTD_INITIAL_CENTS * DISTRICTS_PER_WAREHOUSE as i64
);

/// Stock is replenished by this much when an order would take it below its floor of 10.
const STOCK_REPLENISH: u32 = 91;
const STOCK_FLOOR: u32 = 10;

/// The loader's generator seed: every load of the same layout writes the same bytes.
const LOAD_SEED: u64 = 0x0E0E_C0DE;
/// Bounds on one load txn, so the undo log and the redo record of a load txn stay small.
const LOAD_TXN_BYTES: usize = 64 << 10;
const LOAD_TXN_RECORDS: usize = 1000;
/// Share of an order ring filled at load, and share of those orders left undelivered
/// (TPC-C loads 3,000 orders per district, the newest 900 undelivered).
const PRELOAD_PERCENT: usize = 60;
const PRELOAD_UNDELIVERED_PERCENT: usize = 30;

/// The layout aligns each table to a cache line: at most this much padding precedes a table.
const TABLE_PADDING_MAX: usize = 64;
const TABLE_COUNT: usize = 9;

/// A warehouse; 64 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Warehouse {
    pub ytd_cents: i64,
    pub tax_basis_points: u32,
    pub name: [u8; 12],
    pub address: [u8; 40],
}

/// A district of a warehouse; 64 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct District {
    pub ytd_cents: i64,
    pub tax_basis_points: u32,
    /// The id the district's next order takes.
    pub next_order_id: u32,
    /// The district's oldest undelivered order; equal to `next_order_id` when none is.
    pub oldest_undelivered_order_id: u32,
    pub name: [u8; 12],
    pub address: [u8; 32],
}

/// The fields of a customer that payment and delivery change, kept together so that each
/// declares one range; 24 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct CustomerAccount {
    pub balance_cents: i64,
    pub ytd_payment_cents: i64,
    pub payment_count: u32,
    pub delivery_count: u32,
}

/// A customer of a district; 96 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Customer {
    pub account: CustomerAccount,
    pub discount_basis_points: u32,
    /// "GC" (good credit) or "BC" (bad credit), zero-padded.
    pub credit: [u8; 4],
    pub credit_limit_cents: i64,
    pub first_name: [u8; 16],
    pub last_name: [u8; 16],
    pub data: [u8; 24],
}

/// An item of the catalogue; 32 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Item {
    pub price_cents: i64,
    pub image_id: u32,
    pub name: [u8; 20],
}

/// The fields of a stock record that new-order changes; 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct StockLevel {
    pub quantity: u32,
    pub ytd_quantity: u32,
    pub order_count: u32,
    pub remote_count: u32,
}

/// The stock of one item in one warehouse; 64 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Stock {
    pub level: StockLevel,
    pub district_info: [u8; 24],
    pub data: [u8; 24],
}

/// An order; 32 bytes. Slot `id % capacity` of its district's order ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Order {
    /// 0 for a slot never used.
    pub id: u32,
    pub customer_id: u32,
    /// 0 until the order is delivered.
    pub carrier_id: u32,
    pub line_count: u32,
    pub entry_lsn: u64,
    /// 1 when every line is supplied by the order's own warehouse.
    pub all_local: u32,
    pub reserved: u32,
}

/// A row of a district's new-order ring, in the same slot as its order; 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct NewOrder {
    pub order_id: u32,
    /// Nonzero while the order is undelivered.
    pub valid: u32,
}

/// One line of an order; 32 bytes. Line `n` of the order in ring slot `s` is record
/// `s * ORDER_LINES_MAX + n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct OrderLine {
    /// The order this line belongs to; a line of an earlier order of the slot is stale.
    pub order_id: u32,
    pub item_id: u32,
    pub supply_warehouse_id: u32,
    pub quantity: u32,
    pub amount_cents: i64,
    /// LSN of the delivery txn; 0 until delivered.
    pub delivery_lsn: u64,
}

/// A payment, appended to the paying warehouse's history ring; 32 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct History {
    pub customer_id: u32,
    pub customer_district_id: u32,
    pub customer_warehouse_id: u32,
    pub district_id: u32,
    pub amount_cents: i64,
    pub lsn: u64,
}

const _: () = assert!(size_of::<Warehouse>() == 64);
const _: () = assert!(size_of::<District>() == 64);
const _: () = assert!(size_of::<CustomerAccount>() == 24);
const _: () = assert!(size_of::<Customer>() == 96);
const _: () = assert!(size_of::<Item>() == 32);
const _: () = assert!(size_of::<StockLevel>() == 16);
const _: () = assert!(size_of::<Stock>() == 64);
const _: () = assert!(size_of::<Order>() == 32);
const _: () = assert!(size_of::<NewOrder>() == 8);
const _: () = assert!(size_of::<OrderLine>() == 32);
const _: () = assert!(size_of::<History>() == 32);

/// Scale and rules of an Order-Entry database. The number of warehouses is not configured: it
/// is as many as fit in the segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderEntryConfig {
    /// Items in the catalogue, and stock records per warehouse.
    pub item_count: usize,
    pub customers_per_district: usize,
    /// Capacity of each district's order ring.
    pub orders_per_district: usize,
    /// Capacity of each warehouse's payment history ring.
    pub history_per_warehouse: usize,
    /// Share of new-orders the driver gives an unknown last item, so that they roll back.
    pub unknown_item_percent: u64,
}

impl Default for OrderEntryConfig {
    /// TPC-C's scale, with order rings of 1,000 and history rings of 16,384 payments.
    fn default() -> Self {
        OrderEntryConfig {
            item_count: 100_000,
            customers_per_district: 3_000,
            orders_per_district: 1_000,
            history_per_warehouse: 16_384,
            unknown_item_percent: 1,
        }
    }
}

/// One requested line of a new-order call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NewOrderLine {
    pub item_id: u32,
    pub supply_warehouse_id: u32,
    pub quantity: u32,
}

/// The Order-Entry tables in one segment.
#[derive(Clone, Debug)]
pub struct OrderEntry {
    pub warehouse: Table<Warehouse>,
    pub district: Table<District>,
    pub customer: Table<Customer>,
    pub history: Table<History>,
    pub order: Table<Order>,
    pub new_order: Table<NewOrder>,
    pub order_line: Table<OrderLine>,
    pub item: Table<Item>,
    pub stock: Table<Stock>,
    warehouse_count: usize,
    customers_per_district: usize,
    item_count: usize,
    orders_per_district: usize,
    history_per_warehouse: usize,
    unknown_item_percent: u64,
    /// Bytes of the segment the tables use.
    layout_len: usize,
}

/// A new-order call's arguments, checked.
struct NewOrderRequest {
    warehouse_id: usize,
    district_id: usize,
    customer_id: usize,
    line_count: usize,
    lines: [NewOrderLine; ORDER_LINES_MAX],
    all_local: bool,
}

impl OrderEntry {
    /// Lays the tables out in a segment of `segment_len` bytes, with as many warehouses as
    /// fit before the store's dedup table. Fails when not even one warehouse fits.
    pub fn new(segment_len: usize, config: &OrderEntryConfig) -> Result<OrderEntry, LayoutError> {
        let fixed_len = config.item_count * size_of::<Item>() + TABLE_COUNT * TABLE_PADDING_MAX;
        let warehouse_len = size_of::<Warehouse>()
            + DISTRICTS_PER_WAREHOUSE
                * (size_of::<District>()
                    + config.customers_per_district * size_of::<Customer>()
                    + config.orders_per_district
                        * (size_of::<Order>()
                            + size_of::<NewOrder>()
                            + ORDER_LINES_MAX * size_of::<OrderLine>()))
            + config.history_per_warehouse * size_of::<History>()
            + config.item_count * size_of::<Stock>();
        let tables_len = Layout::workload(segment_len).segment_len();
        let fit = tables_len.saturating_sub(fixed_len) / warehouse_len;
        // `fixed_len` counts the most padding there can be, so `fit` warehouses always fit; when
        // it is 0, laying out one warehouse either fits after all or gives the layout's error.
        OrderEntry::with_warehouses(segment_len, config, fit.max(1))
    }

    /// Lays the tables out for exactly `warehouse_count` warehouses.
    pub fn with_warehouses(
        segment_len: usize,
        config: &OrderEntryConfig,
        warehouse_count: usize,
    ) -> Result<OrderEntry, LayoutError> {
        assert!(
            (1..u32::MAX as usize).contains(&config.item_count),
            "item count must be positive and leave an unused 32-bit id"
        );
        assert!(
            (1..=u32::MAX as usize).contains(&config.customers_per_district),
            "customers per district must be positive and fit 32 bits"
        );
        assert!(
            (1..=u32::MAX as usize).contains(&config.orders_per_district),
            "order ring capacity must be positive and fit 32 bits"
        );
        assert!(
            config.history_per_warehouse > 0,
            "history ring capacity must be positive"
        );
        assert!(
            config.unknown_item_percent <= 100,
            "a percentage is at most 100"
        );
        assert!(
            (1..=u32::MAX as usize).contains(&warehouse_count),
            "warehouse count must be positive and fit 32 bits"
        );
        let district_count = warehouse_count * DISTRICTS_PER_WAREHOUSE;
        let order_count = district_count * config.orders_per_district;
        let mut layout = Layout::workload(segment_len);
        let warehouse = layout.table("warehouse", warehouse_count)?;
        let district = layout.table("district", district_count)?;
        let customer = layout.table("customer", district_count * config.customers_per_district)?;
        let history = layout.table("history", warehouse_count * config.history_per_warehouse)?;
        let order = layout.table("order", order_count)?;
        let new_order = layout.table("new-order", order_count)?;
        let order_line = layout.table("order-line", order_count * ORDER_LINES_MAX)?;
        let item = layout.table("item", config.item_count)?;
        let stock = layout.table("stock", warehouse_count * config.item_count)?;
        Ok(OrderEntry {
            warehouse,
            district,
            customer,
            history,
            order,
            new_order,
            order_line,
            item,
            stock,
            warehouse_count,
            customers_per_district: config.customers_per_district,
            item_count: config.item_count,
            orders_per_district: config.orders_per_district,
            history_per_warehouse: config.history_per_warehouse,
            unknown_item_percent: config.unknown_item_percent,
            layout_len: layout.used(),
        })
    }

    /// Number of warehouses.
    pub fn warehouses(&self) -> usize {
        self.warehouse_count
    }

    pub fn customers_per_district(&self) -> usize {
        self.customers_per_district
    }

    pub fn item_count(&self) -> usize {
        self.item_count
    }

    /// Capacity of each district's order ring.
    pub fn orders_per_district(&self) -> usize {
        self.orders_per_district
    }

    pub fn history_per_warehouse(&self) -> usize {
        self.history_per_warehouse
    }

    /// Bytes of the segment the tables use.
    pub fn layout_len(&self) -> usize {
        self.layout_len
    }

    /// The smallest segment, in whole MiB, that holds one warehouse at `config`'s scale and
    /// the dedup table after it: what to tell a user whose database is too small.
    pub fn min_db_mib(config: &OrderEntryConfig) -> u64 {
        let one_warehouse = OrderEntry::with_warehouses(usize::MAX, config, 1)
            .expect("one warehouse fits in an unbounded segment")
            .layout_len();
        // The dedup table takes at most 1/128 of the segment, so this adds a MiB at most.
        let mut mib = one_warehouse.div_ceil(1 << 20);
        while DedupTable::for_segment_len(mib << 20).offset() < one_warehouse {
            mib += 1;
        }
        mib as u64
    }

    /// Orders loaded into each district.
    pub fn preloaded_orders_per_district(&self) -> usize {
        self.orders_per_district * PRELOAD_PERCENT / 100
    }

    /// Of the orders loaded into each district, how many are undelivered (the newest).
    pub fn preloaded_undelivered_per_district(&self) -> usize {
        self.preloaded_orders_per_district() * PRELOAD_UNDELIVERED_PERCENT / 100
    }

    /// Index of district `district_id` of warehouse `warehouse_id` in the district table.
    #[inline]
    pub fn district_index(&self, warehouse_id: usize, district_id: usize) -> usize {
        assert!(warehouse_id < self.warehouse_count);
        assert!(district_id < DISTRICTS_PER_WAREHOUSE);
        warehouse_id * DISTRICTS_PER_WAREHOUSE + district_id
    }

    /// Index of a customer in the customer table.
    #[inline]
    pub fn customer_index(
        &self,
        warehouse_id: usize,
        district_id: usize,
        customer_id: usize,
    ) -> usize {
        assert!(customer_id < self.customers_per_district);
        self.district_index(warehouse_id, district_id) * self.customers_per_district + customer_id
    }

    /// Index of the ring slot of order `order_id` in the order and new-order tables.
    #[inline]
    pub fn order_index(&self, warehouse_id: usize, district_id: usize, order_id: u32) -> usize {
        self.district_index(warehouse_id, district_id) * self.orders_per_district
            + order_id as usize % self.orders_per_district
    }

    /// Index of line `line` of the order at `order_index` in the order-line table.
    #[inline]
    pub fn order_line_index(&self, order_index: usize, line: usize) -> usize {
        assert!(line < ORDER_LINES_MAX);
        order_index * ORDER_LINES_MAX + line
    }

    /// Index of the stock of item `item_id` in warehouse `warehouse_id`.
    #[inline]
    pub fn stock_index(&self, warehouse_id: usize, item_id: usize) -> usize {
        assert!(warehouse_id < self.warehouse_count);
        assert!(item_id < self.item_count);
        warehouse_id * self.item_count + item_id
    }

    /// Writes the arguments of a new-order call: the ordering customer and 5 to 15 lines.
    pub fn encode_new_order(
        args: &mut Vec<u8>,
        warehouse_id: u32,
        district_id: u32,
        customer_id: u32,
        lines: &[NewOrderLine],
    ) {
        args.clear();
        let mut writer = ArgWriter(args);
        writer
            .u32(warehouse_id)
            .u32(district_id)
            .u32(customer_id)
            .u32(u32::try_from(lines.len()).unwrap_or(u32::MAX));
        for line in lines {
            writer
                .u32(line.item_id)
                .u32(line.supply_warehouse_id)
                .u32(line.quantity);
        }
    }

    /// Writes the arguments of a payment call: the receiving district, the paying customer
    /// (of any warehouse) and the amount.
    pub fn encode_payment(
        args: &mut Vec<u8>,
        warehouse_id: u32,
        district_id: u32,
        customer_warehouse_id: u32,
        customer_district_id: u32,
        customer_id: u32,
        amount_cents: i64,
    ) {
        args.clear();
        ArgWriter(args)
            .u32(warehouse_id)
            .u32(district_id)
            .u32(customer_warehouse_id)
            .u32(customer_district_id)
            .u32(customer_id)
            .i64(amount_cents);
    }

    /// Writes the arguments of a delivery call.
    pub fn encode_delivery(args: &mut Vec<u8>, warehouse_id: u32, carrier_id: u32) {
        args.clear();
        ArgWriter(args).u32(warehouse_id).u32(carrier_id);
    }

    /// Orders entered by committed new-orders since the load, over all districts.
    pub fn orders_entered(&self, segment: &Segment) -> u64 {
        let next_order_id_initial = self.preloaded_orders_per_district() as u64 + 1;
        self.district
            .iter_committed(segment)
            .map(|district| u64::from(district.next_order_id).saturating_sub(next_order_id_initial))
            .sum()
    }

    /// Orders delivered by committed deliveries since the load, over all districts.
    pub fn orders_delivered(&self, segment: &Segment) -> u64 {
        let oldest_initial = (self.preloaded_orders_per_district()
            - self.preloaded_undelivered_per_district()) as u64
            + 1;
        self.district
            .iter_committed(segment)
            .map(|district| {
                u64::from(district.oldest_undelivered_order_id).saturating_sub(oldest_initial)
            })
            .sum()
    }

    /// Sum of committed payments since the load: how far the warehouses' W_YTD grew.
    pub fn payments_total_cents(&self, segment: &Segment) -> i64 {
        let ytd_cents: i64 = self
            .warehouse
            .iter_committed(segment)
            .map(|warehouse| warehouse.ytd_cents)
            .sum();
        ytd_cents - WAREHOUSE_YTD_INITIAL_CENTS * self.warehouse_count as i64
    }

    /// New-order: enters an order of 5 to 15 lines for a customer and updates the stock of
    /// every line's item in its supplying warehouse. Replies with the order's id (u32) and its
    /// total after discount and taxes (i64 cents).
    fn new_order_procedure(
        &self,
        txn: &mut Txn<'_>,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError> {
        let request = self.parse_new_order(args)?;
        let warehouse_id = request.warehouse_id;
        let district_index = self.district_index(warehouse_id, request.district_id);
        let district = self.district.get(txn, district_index);
        let order_id = district.next_order_id;
        let backlog = order_id
            .checked_sub(district.oldest_undelivered_order_id)
            .expect("a district's oldest undelivered order is not past its next order");
        if backlog as usize >= self.orders_per_district {
            return Err(ProcError::Rollback("district backlog full"));
        }
        let Some(order_id_next) = order_id.checked_add(1) else {
            return Err(ProcError::Rollback("district order ids exhausted"));
        };
        *self.district.update_field::<u32>(
            txn,
            district_index,
            offset_of!(District, next_order_id),
        ) = order_id_next;

        let warehouse_tax_basis_points: u32 = read_field(
            &self.warehouse,
            txn,
            warehouse_id,
            offset_of!(Warehouse, tax_basis_points),
        );
        let customer_index =
            self.customer_index(warehouse_id, request.district_id, request.customer_id);
        let discount_basis_points: u32 = read_field(
            &self.customer,
            txn,
            customer_index,
            offset_of!(Customer, discount_basis_points),
        );
        let entry_lsn = txn.lsn_next();
        let order_index = self.order_index(warehouse_id, request.district_id, order_id);
        *self.order.update(txn, order_index) = Order {
            id: order_id,
            customer_id: request.customer_id as u32,
            carrier_id: 0,
            line_count: request.line_count as u32,
            entry_lsn,
            all_local: u32::from(request.all_local),
            reserved: 0,
        };
        *self.new_order.update(txn, order_index) = NewOrder { order_id, valid: 1 };

        // The lines are contiguous: one declaration for all of them keeps the undo log to one
        // entry instead of up to 15; each line is then filled inside it.
        let lines_offset = self
            .order_line
            .record_offset(self.order_line_index(order_index, 0));
        txn.set_range(lines_offset, request.line_count * size_of::<OrderLine>());
        let mut amount_total_cents: i64 = 0;
        for (number, line) in request.lines[..request.line_count].iter().enumerate() {
            let item_id = line.item_id as usize;
            if item_id >= self.item_count {
                // TPC-C's 1% of new-orders name an unused item last, so that the rollback
                // undoes the work of every earlier line.
                return Err(ProcError::Rollback("unknown item"));
            }
            let price_cents: i64 =
                read_field(&self.item, txn, item_id, offset_of!(Item, price_cents));
            let supply_warehouse_id = line.supply_warehouse_id as usize;
            let stock_index = self.stock_index(supply_warehouse_id, item_id);
            let level: &mut StockLevel =
                self.stock
                    .update_field(txn, stock_index, offset_of!(Stock, level));
            assert!(
                level.quantity >= STOCK_FLOOR,
                "stock {stock_index} is below its floor"
            );
            level.quantity = if level.quantity >= line.quantity + STOCK_FLOOR {
                level.quantity - line.quantity
            } else {
                level.quantity + STOCK_REPLENISH - line.quantity
            };
            level.ytd_quantity += line.quantity;
            level.order_count += 1;
            if supply_warehouse_id != warehouse_id {
                level.remote_count += 1;
            }
            let amount_cents = i64::from(line.quantity) * price_cents;
            amount_total_cents += amount_cents;
            let line_offset = lines_offset + number * size_of::<OrderLine>();
            let order_line: &mut OrderLine =
                bytemuck::from_bytes_mut(txn.range_mut(line_offset, size_of::<OrderLine>()));
            *order_line = OrderLine {
                order_id,
                item_id: line.item_id,
                supply_warehouse_id: line.supply_warehouse_id,
                quantity: line.quantity,
                amount_cents,
                delivery_lsn: 0,
            };
        }

        let tax_basis_points =
            i64::from(warehouse_tax_basis_points) + i64::from(district.tax_basis_points);
        let total_cents = amount_total_cents
            * (10_000 - i64::from(discount_basis_points))
            * (10_000 + tax_basis_points)
            / 100_000_000;
        ArgWriter(reply).u32(order_id).i64(total_cents);
        Ok(())
    }

    /// Reads a warehouse id and checks it names a warehouse; `error` says which argument.
    fn warehouse_arg(
        &self,
        reader: &mut ArgReader<'_>,
        error: &'static str,
    ) -> Result<usize, ProcError> {
        id_arg(reader.u32()?, self.warehouse_count, error)
    }

    /// Reads a district id (within its warehouse) and checks its range.
    fn district_arg(
        &self,
        reader: &mut ArgReader<'_>,
        error: &'static str,
    ) -> Result<usize, ProcError> {
        id_arg(reader.u32()?, DISTRICTS_PER_WAREHOUSE, error)
    }

    /// Reads a customer id (within its district) and checks its range.
    fn customer_arg(
        &self,
        reader: &mut ArgReader<'_>,
        error: &'static str,
    ) -> Result<usize, ProcError> {
        id_arg(reader.u32()?, self.customers_per_district, error)
    }

    fn parse_new_order(&self, args: &[u8]) -> Result<NewOrderRequest, ProcError> {
        let mut reader = ArgReader::new(args);
        let warehouse_id = self.warehouse_arg(&mut reader, "warehouse id out of range")?;
        let district_id = self.district_arg(&mut reader, "district id out of range")?;
        let customer_id = self.customer_arg(&mut reader, "customer id out of range")?;
        let line_count = reader.u32()? as usize;
        if !(ORDER_LINES_MIN..=ORDER_LINES_MAX).contains(&line_count) {
            return Err(ProcError::BadArgs("order line count outside 5..=15"));
        }
        let mut lines = [NewOrderLine::default(); ORDER_LINES_MAX];
        let mut all_local = true;
        for line in &mut lines[..line_count] {
            // Item ids are checked while the lines are processed: see `new_order_procedure`.
            line.item_id = reader.u32()?;
            line.supply_warehouse_id = reader.u32()?;
            id_arg(
                line.supply_warehouse_id,
                self.warehouse_count,
                "supply warehouse id out of range",
            )?;
            all_local &= line.supply_warehouse_id as usize == warehouse_id;
            line.quantity = reader.u32()?;
            if !(1..=QUANTITY_MAX).contains(&line.quantity) {
                return Err(ProcError::BadArgs("order line quantity outside 1..=10"));
            }
        }
        reader.finish()?;
        Ok(NewOrderRequest {
            warehouse_id,
            district_id,
            customer_id,
            line_count,
            lines,
            all_local,
        })
    }

    /// Payment: a customer pays an amount to a district, possibly of another warehouse than
    /// the customer's. Replies with the customer's new balance (i64 cents).
    fn payment_procedure(
        &self,
        txn: &mut Txn<'_>,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError> {
        let mut reader = ArgReader::new(args);
        let warehouse_id = self.warehouse_arg(&mut reader, "warehouse id out of range")?;
        let district_id = self.district_arg(&mut reader, "district id out of range")?;
        let customer_warehouse_id =
            self.warehouse_arg(&mut reader, "customer warehouse id out of range")?;
        let customer_district_id =
            self.district_arg(&mut reader, "customer district id out of range")?;
        let customer_id = self.customer_arg(&mut reader, "customer id out of range")?;
        let amount_cents = reader.i64()?;
        reader.finish()?;
        if !(PAYMENT_MIN_CENTS..=PAYMENT_MAX_CENTS).contains(&amount_cents) {
            return Err(ProcError::BadArgs(
                "payment amount outside 100..=500000 cents",
            ));
        }

        *self
            .warehouse
            .update_field::<i64>(txn, warehouse_id, offset_of!(Warehouse, ytd_cents)) +=
            amount_cents;
        let district_index = self.district_index(warehouse_id, district_id);
        *self
            .district
            .update_field::<i64>(txn, district_index, offset_of!(District, ytd_cents)) +=
            amount_cents;
        let customer_index =
            self.customer_index(customer_warehouse_id, customer_district_id, customer_id);
        let account: &mut CustomerAccount =
            self.customer
                .update_field(txn, customer_index, offset_of!(Customer, account));
        account.balance_cents -= amount_cents;
        account.ytd_payment_cents += amount_cents;
        account.payment_count += 1;
        let balance_cents = account.balance_cents;

        let lsn = txn.lsn_next();
        let slot = (lsn % self.history_per_warehouse as u64) as usize;
        *self
            .history
            .update(txn, warehouse_id * self.history_per_warehouse + slot) = History {
            customer_id: customer_id as u32,
            customer_district_id: customer_district_id as u32,
            customer_warehouse_id: customer_warehouse_id as u32,
            district_id: district_id as u32,
            amount_cents,
            lsn,
        };
        ArgWriter(reply).i64(balance_cents);
        Ok(())
    }

    /// Delivery: delivers the oldest undelivered order of each district of a warehouse with
    /// one carrier, skipping districts with none, and credits each order's total to its
    /// customer. Replies with the number of orders delivered (u32).
    fn delivery_procedure(
        &self,
        txn: &mut Txn<'_>,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError> {
        let mut reader = ArgReader::new(args);
        let warehouse_id = self.warehouse_arg(&mut reader, "warehouse id out of range")?;
        let carrier_id = reader.u32()?;
        reader.finish()?;
        if !(1..=CARRIER_ID_MAX).contains(&carrier_id) {
            return Err(ProcError::BadArgs("carrier id outside 1..=10"));
        }

        let delivery_lsn = txn.lsn_next();
        let mut delivered_count: u32 = 0;
        for district_id in 0..DISTRICTS_PER_WAREHOUSE {
            let district_index = self.district_index(warehouse_id, district_id);
            let district = self.district.get(txn, district_index);
            let order_id = district.oldest_undelivered_order_id;
            assert!(
                order_id <= district.next_order_id,
                "district {district_index}: oldest undelivered order {order_id} is past the \
                 next order {}",
                district.next_order_id
            );
            if order_id == district.next_order_id {
                continue;
            }
            let order_index = self.order_index(warehouse_id, district_id, order_id);
            let order = self.order.get(txn, order_index);
            let new_order = self.new_order.get(txn, order_index);
            assert!(
                order.id == order_id && order.carrier_id == 0,
                "district {district_index}: the slot of undelivered order {order_id} holds \
                 {order:?}"
            );
            assert!(
                new_order.order_id == order_id && new_order.valid != 0,
                "district {district_index}: undelivered order {order_id} has new-order row \
                 {new_order:?}"
            );
            *self
                .new_order
                .update_field::<u32>(txn, order_index, offset_of!(NewOrder, valid)) = 0;
            *self
                .order
                .update_field::<u32>(txn, order_index, offset_of!(Order, carrier_id)) = carrier_id;
            let mut amount_total_cents: i64 = 0;
            for line in 0..order.line_count as usize {
                let line_index = self.order_line_index(order_index, line);
                amount_total_cents += read_field::<_, i64>(
                    &self.order_line,
                    txn,
                    line_index,
                    offset_of!(OrderLine, amount_cents),
                );
                *self.order_line.update_field::<u64>(
                    txn,
                    line_index,
                    offset_of!(OrderLine, delivery_lsn),
                ) = delivery_lsn;
            }
            let customer_index =
                self.customer_index(warehouse_id, district_id, order.customer_id as usize);
            let account: &mut CustomerAccount =
                self.customer
                    .update_field(txn, customer_index, offset_of!(Customer, account));
            account.balance_cents += amount_total_cents;
            account.delivery_count += 1;
            *self.district.update_field::<u32>(
                txn,
                district_index,
                offset_of!(District, oldest_undelivered_order_id),
            ) = order_id + 1;
            delivered_count += 1;
        }
        ArgWriter(reply).u32(delivered_count);
        Ok(())
    }

    /// Conditions 2 to 5 and 7 and the ring shape, for one district; see the module doc.
    fn check_district(
        &self,
        segment: &Segment,
        warehouse_id: usize,
        district_id: usize,
    ) -> Result<(), Inconsistency> {
        let district_index = self.district_index(warehouse_id, district_id);
        let district = self.district.get_committed(segment, district_index);
        let next_order_id = u64::from(district.next_order_id);
        let oldest_undelivered_order_id = u64::from(district.oldest_undelivered_order_id);
        let capacity = self.orders_per_district as u64;
        let live_ids = next_order_id.saturating_sub(capacity)..next_order_id;
        let inconsistency = |check: &'static str, detail: String| Inconsistency {
            check,
            detail: format!("warehouse {warehouse_id} district {district_id}: {detail}"),
        };

        let mut order_id_max: u64 = 0;
        let mut line_count_total: u64 = 0;
        let mut live_line_count: u64 = 0;
        let mut new_order_count: u64 = 0;
        let mut new_order_id_min = u64::MAX;
        let mut new_order_id_max: u64 = 0;
        // Conditions found broken during the scan are reported after 2 to 4.
        let mut deferred: Option<Inconsistency> = None;
        let first_slot_index = district_index * self.orders_per_district;
        for slot in 0..self.orders_per_district {
            let order_index = first_slot_index + slot;
            let order = self.order.get_committed(segment, order_index);
            let new_order = self.new_order.get_committed(segment, order_index);
            let new_order_id = u64::from(new_order.order_id);
            if new_order.valid != 0 {
                new_order_count += 1;
                new_order_id_min = new_order_id_min.min(new_order_id);
                new_order_id_max = new_order_id_max.max(new_order_id);
                if deferred.is_none()
                    && (new_order_id % capacity != slot as u64 || !live_ids.contains(&new_order_id))
                {
                    deferred = Some(inconsistency(
                        CHECK_RING_SLOTS,
                        format!(
                            "new-order slot {slot} holds order {new_order_id}, outside live ids \
                             {live_ids:?} or not of this slot"
                        ),
                    ));
                }
            }
            if order.id == 0 {
                continue;
            }
            let order_id = u64::from(order.id);
            order_id_max = order_id_max.max(order_id);
            line_count_total += u64::from(order.line_count);
            let undelivered = order.carrier_id == 0;
            let mut line_delivery_wrong: Option<(usize, u64)> = None;
            for line in 0..ORDER_LINES_MAX {
                let order_line = self
                    .order_line
                    .get_committed(segment, self.order_line_index(order_index, line));
                if order_line.order_id != order.id {
                    continue;
                }
                live_line_count += 1;
                if (order_line.delivery_lsn == 0) != undelivered {
                    line_delivery_wrong.get_or_insert((line, order_line.delivery_lsn));
                }
            }
            if deferred.is_some() {
                continue;
            }
            if order_id % capacity != slot as u64 || !live_ids.contains(&order_id) {
                deferred = Some(inconsistency(
                    CHECK_RING_SLOTS,
                    format!(
                        "order slot {slot} holds order {order_id}, outside live ids {live_ids:?} \
                         or not of this slot"
                    ),
                ));
            } else if undelivered != (new_order.valid != 0 && new_order.order_id == order.id) {
                deferred = Some(inconsistency(
                    CHECK_CARRIER,
                    format!(
                        "order {order_id} has carrier {} but its slot's new-order row is \
                         {new_order:?}",
                        order.carrier_id
                    ),
                ));
            } else if let Some((line, delivery_lsn)) = line_delivery_wrong {
                deferred = Some(inconsistency(
                    CHECK_DELIVERY_LSN,
                    format!(
                        "line {line} of order {order_id} has delivery LSN {delivery_lsn} but the \
                         order has carrier {}",
                        order.carrier_id
                    ),
                ));
            }
        }

        if order_id_max + 1 != next_order_id {
            return Err(inconsistency(
                CHECK_NEXT_ORDER_ID,
                format!(
                    "D_NEXT_O_ID is {next_order_id} but the newest live order is {order_id_max}"
                ),
            ));
        }
        if new_order_count > 0 && new_order_id_max + 1 != next_order_id {
            return Err(inconsistency(
                CHECK_NEXT_ORDER_ID,
                format!(
                    "D_NEXT_O_ID is {next_order_id} but the newest new-order row is \
                     {new_order_id_max}"
                ),
            ));
        }
        if new_order_count == 0 {
            if oldest_undelivered_order_id != next_order_id {
                return Err(inconsistency(
                    CHECK_NEW_ORDER_RANGE,
                    format!(
                        "no new-order rows, but D_OLDEST_UNDELIVERED_O_ID is \
                         {oldest_undelivered_order_id} and D_NEXT_O_ID {next_order_id}"
                    ),
                ));
            }
        } else if new_order_id_max - new_order_id_min + 1 != new_order_count
            || new_order_id_min != oldest_undelivered_order_id
        {
            return Err(inconsistency(
                CHECK_NEW_ORDER_RANGE,
                format!(
                    "{new_order_count} new-order rows span orders \
                     {new_order_id_min}..={new_order_id_max}, and D_OLDEST_UNDELIVERED_O_ID is \
                     {oldest_undelivered_order_id}"
                ),
            ));
        }
        if line_count_total != live_line_count {
            return Err(inconsistency(
                CHECK_ORDER_LINE_COUNT,
                format!(
                    "live orders count {line_count_total} lines but {live_line_count} live \
                     order-line rows exist"
                ),
            ));
        }
        deferred.map_or(Ok(()), Err)
    }

    /// Writes every table's initial records; see [`Workload::load`].
    fn load_tables(&self, segment: &mut Segment, rng: &mut Rng) {
        load_records(
            segment,
            self.item.count(),
            size_of::<Item>(),
            |txn, index| {
                *self.item.update(txn, index) = Item {
                    price_cents: rng.between(100, 10_000),
                    image_id: rng.between(1, 10_000) as u32,
                    name: random_text(rng),
                };
            },
        );
        load_records(
            segment,
            self.warehouse.count(),
            size_of::<Warehouse>(),
            |txn, index| {
                *self.warehouse.update(txn, index) = Warehouse {
                    ytd_cents: WAREHOUSE_YTD_INITIAL_CENTS,
                    tax_basis_points: rng.between(0, 2_000) as u32,
                    name: random_text(rng),
                    address: random_text(rng),
                };
            },
        );
        let preloaded = self.preloaded_orders_per_district();
        let delivered = preloaded - self.preloaded_undelivered_per_district();
        load_records(
            segment,
            self.district.count(),
            size_of::<District>(),
            |txn, index| {
                *self.district.update(txn, index) = District {
                    ytd_cents: DISTRICT_YTD_INITIAL_CENTS,
                    tax_basis_points: rng.between(0, 2_000) as u32,
                    next_order_id: preloaded as u32 + 1,
                    oldest_undelivered_order_id: delivered as u32 + 1,
                    name: random_text(rng),
                    address: random_text(rng),
                };
            },
        );
        load_records(
            segment,
            self.customer.count(),
            size_of::<Customer>(),
            |txn, index| {
                *self.customer.update(txn, index) = Customer {
                    account: CustomerAccount {
                        balance_cents: -1_000,
                        ytd_payment_cents: 1_000,
                        payment_count: 1,
                        delivery_count: 0,
                    },
                    discount_basis_points: rng.between(0, 5_000) as u32,
                    credit: if rng.percent(10) {
                        *b"BC\0\0"
                    } else {
                        *b"GC\0\0"
                    },
                    credit_limit_cents: 5_000_000,
                    first_name: random_text(rng),
                    last_name: last_name(index % self.customers_per_district),
                    data: random_text(rng),
                };
            },
        );
        load_records(
            segment,
            self.stock.count(),
            size_of::<Stock>(),
            |txn, index| {
                *self.stock.update(txn, index) = Stock {
                    level: StockLevel {
                        quantity: rng.between(10, 100) as u32,
                        ytd_quantity: 0,
                        order_count: 0,
                        remote_count: 0,
                    },
                    district_info: random_text(rng),
                    data: random_text(rng),
                };
            },
        );
        let order_bytes =
            size_of::<Order>() + size_of::<NewOrder>() + ORDER_LINES_MAX * size_of::<OrderLine>();
        load_records(
            segment,
            self.district.count() * preloaded,
            order_bytes,
            |txn, index| {
                let district_index = index / preloaded;
                let (warehouse_id, district_id) = (
                    district_index / DISTRICTS_PER_WAREHOUSE,
                    district_index % DISTRICTS_PER_WAREHOUSE,
                );
                let order_id = (index % preloaded + 1) as u32;
                let undelivered = order_id as usize > delivered;
                let line_count = rng.between(ORDER_LINES_MIN as i64, ORDER_LINES_MAX as i64) as u32;
                let lsn = txn.lsn_next();
                let order_index = self.order_index(warehouse_id, district_id, order_id);
                *self.order.update(txn, order_index) = Order {
                    id: order_id,
                    customer_id: rng.below(self.customers_per_district as u64) as u32,
                    carrier_id: if undelivered {
                        0
                    } else {
                        rng.between(1, i64::from(CARRIER_ID_MAX)) as u32
                    },
                    line_count,
                    entry_lsn: lsn,
                    all_local: 1,
                    reserved: 0,
                };
                *self.new_order.update(txn, order_index) = NewOrder {
                    order_id,
                    valid: u32::from(undelivered),
                };
                for line in 0..line_count as usize {
                    *self
                        .order_line
                        .update(txn, self.order_line_index(order_index, line)) = OrderLine {
                        order_id,
                        item_id: rng.below(self.item_count as u64) as u32,
                        supply_warehouse_id: warehouse_id as u32,
                        quantity: 5,
                        amount_cents: if undelivered {
                            rng.between(1, 999_999)
                        } else {
                            0
                        },
                        delivery_lsn: if undelivered { 0 } else { lsn },
                    };
                }
            },
        );
    }
}

impl Workload for OrderEntry {
    const NAME: &'static str = "order-entry";
    type Driver = OrderEntryDriver;

    fn registry() -> Registry<OrderEntry> {
        let mut registry = Registry::new();
        let new_order =
            registry.register("new-order", |workload: &OrderEntry, txn, args, reply| {
                workload.new_order_procedure(txn, args, reply)
            });
        let payment = registry.register("payment", |workload: &OrderEntry, txn, args, reply| {
            workload.payment_procedure(txn, args, reply)
        });
        let delivery = registry.register("delivery", |workload: &OrderEntry, txn, args, reply| {
            workload.delivery_procedure(txn, args, reply)
        });
        assert_eq!(
            (new_order, payment, delivery),
            (NEW_ORDER, PAYMENT, DELIVERY)
        );
        registry.set_prefetch(new_order, prefetch_new_order);
        registry.set_prefetch(payment, prefetch_payment);
        registry
    }

    /// Writes the TPC-C-like initial database, from a fixed seed, in txns of at most 1,000
    /// records and about 64 KiB: items priced 1.00 to 100.00, stock of 10 to 100, and in each
    /// district 60% of the order ring preloaded, the newest 30% of those undelivered. History
    /// rings start empty.
    fn load(&self, segment: &mut Segment) {
        let tables_len = DedupTable::for_segment_len(segment.len()).offset();
        assert!(
            self.layout_len <= tables_len,
            "the {}-byte layout does not fit before the dedup table of a {}-byte segment",
            self.layout_len,
            segment.len()
        );
        let mut rng = Rng::new(LOAD_SEED);
        self.load_tables(segment, &mut rng);
    }

    /// TPC-C's consistency conditions 1 to 5 and 7, adapted to the rings (see the module doc),
    /// then the dedup table's.
    fn check(&self, segment: &Segment) -> Result<(), Inconsistency> {
        for warehouse_id in 0..self.warehouse_count {
            let warehouse_ytd_cents = self
                .warehouse
                .get_committed(segment, warehouse_id)
                .ytd_cents;
            let district_ytd_cents: i64 = (0..DISTRICTS_PER_WAREHOUSE)
                .map(|district_id| {
                    let index = self.district_index(warehouse_id, district_id);
                    self.district.get_committed(segment, index).ytd_cents
                })
                .sum();
            if warehouse_ytd_cents != district_ytd_cents {
                return Err(Inconsistency {
                    check: CHECK_WAREHOUSE_YTD,
                    detail: format!(
                        "warehouse {warehouse_id}: W_YTD is {warehouse_ytd_cents} cents but its \
                         districts' D_YTD sum to {district_ytd_cents}"
                    ),
                });
            }
            for district_id in 0..DISTRICTS_PER_WAREHOUSE {
                self.check_district(segment, warehouse_id, district_id)?;
            }
        }
        DedupTable::for_segment_len(segment.len()).check(segment)
    }

    fn driver(&self, seed: u64) -> OrderEntryDriver {
        let mut rng = Rng::new(seed);
        // TPC-C's A is 1023 for 3,000 customers and 8191 for 100,000 items; scale it to the
        // configured counts, keeping it one less than a power of two.
        let customer_nurand = NuRand::new(&mut rng, self.customers_per_district, 1023, 3_000);
        let item_nurand = NuRand::new(&mut rng, self.item_count, 8191, 100_000);
        OrderEntryDriver {
            workload: self.clone(),
            rng,
            warehouse_count: self.warehouse_count as u32,
            item_count: self.item_count as u32,
            unknown_item_percent: self.unknown_item_percent,
            customer_nurand,
            item_nurand,
            payment_total_cents: 0,
            counts: [CallCounts::default(); PROCEDURE_COUNT],
        }
    }
}

/// Commits and rolled-back calls of one procedure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub committed: u64,
    pub rolled_back: u64,
}

/// Issues the Order-Entry mix: out of 93 calls, 45 new-orders, 43 payments and 5 deliveries.
/// Delivery is a little above TPC-C's 4%: each delivers up to ten orders, so deliveries keep
/// up with new-orders and the backlog stays well below a ring's capacity.
///
/// Warehouses and districts are uniform; customers and items follow TPC-C's NURand; a line is
/// supplied by another warehouse 1% of the time (when there is one); a payment comes from a
/// customer of another district, and of another warehouse when there is one, 15% of the time.
/// A configured share of new-orders (TPC-C's 1%) names the unused item id last.
#[derive(Clone, Debug)]
pub struct OrderEntryDriver {
    /// The layout its check reads the districts through.
    workload: OrderEntry,
    rng: Rng,
    warehouse_count: u32,
    item_count: u32,
    unknown_item_percent: u64,
    customer_nurand: NuRand,
    item_nurand: NuRand,
    payment_total_cents: i64,
    counts: [CallCounts; PROCEDURE_COUNT],
}

/// Each procedure's share of the mix, out of their total of 93.
const NEW_ORDER_SHARE: u64 = 45;
const PAYMENT_SHARE: u64 = 43;
const DELIVERY_SHARE: u64 = 5;
/// Share of order lines supplied by another warehouse (TPC-C clause 2.4.1.5).
const REMOTE_SUPPLY_PERCENT: u64 = 1;
/// Share of payments by a customer of another district (TPC-C clause 2.5.1.2).
const REMOTE_CUSTOMER_PERCENT: u64 = 15;

impl OrderEntryDriver {
    /// Commits and rollbacks of procedure `id` so far.
    pub fn counts(&self, id: ProcId) -> CallCounts {
        self.counts[usize::from(id.0)]
    }

    /// Rolled-back new-orders: the unknown-item rule and full district backlogs.
    pub fn rollbacks(&self) -> u64 {
        self.counts.iter().map(|counts| counts.rolled_back).sum()
    }

    pub fn committed(&self) -> u64 {
        self.counts.iter().map(|counts| counts.committed).sum()
    }

    /// Sum of the payments that committed.
    pub fn payment_total_cents(&self) -> i64 {
        self.payment_total_cents
    }

    /// A warehouse other than `warehouse_id`, uniformly; `warehouse_id` if it is the only one.
    fn other_warehouse(&mut self, warehouse_id: u32) -> u32 {
        if self.warehouse_count == 1 {
            return warehouse_id;
        }
        let other = self.rng.below(u64::from(self.warehouse_count) - 1) as u32;
        if other >= warehouse_id {
            other + 1
        } else {
            other
        }
    }

    fn next_new_order(&mut self, args: &mut Vec<u8>) {
        let warehouse_id = self.rng.below(u64::from(self.warehouse_count)) as u32;
        let district_id = self.rng.below(DISTRICTS_PER_WAREHOUSE as u64) as u32;
        let customer_id = self.customer_nurand.sample(&mut self.rng) as u32;
        let line_count =
            self.rng
                .between(ORDER_LINES_MIN as i64, ORDER_LINES_MAX as i64) as usize;
        let mut lines = [NewOrderLine::default(); ORDER_LINES_MAX];
        for line in &mut lines[..line_count] {
            let item_id = self.item_nurand.sample(&mut self.rng) as u32;
            let supply_warehouse_id = if self.rng.percent(REMOTE_SUPPLY_PERCENT) {
                self.other_warehouse(warehouse_id)
            } else {
                warehouse_id
            };
            let quantity = self.rng.between(1, i64::from(QUANTITY_MAX)) as u32;
            *line = NewOrderLine {
                item_id,
                supply_warehouse_id,
                quantity,
            };
        }
        if self.rng.percent(self.unknown_item_percent) {
            lines[line_count - 1].item_id = self.item_count;
        }
        OrderEntry::encode_new_order(
            args,
            warehouse_id,
            district_id,
            customer_id,
            &lines[..line_count],
        );
    }

    fn next_payment(&mut self, args: &mut Vec<u8>) {
        let warehouse_id = self.rng.below(u64::from(self.warehouse_count)) as u32;
        let district_id = self.rng.below(DISTRICTS_PER_WAREHOUSE as u64) as u32;
        let (customer_warehouse_id, customer_district_id) =
            if self.rng.percent(REMOTE_CUSTOMER_PERCENT) {
                let customer_warehouse_id = self.other_warehouse(warehouse_id);
                let customer_district_id = self.rng.below(DISTRICTS_PER_WAREHOUSE as u64) as u32;
                (customer_warehouse_id, customer_district_id)
            } else {
                (warehouse_id, district_id)
            };
        let customer_id = self.customer_nurand.sample(&mut self.rng) as u32;
        let amount_cents = self.rng.between(PAYMENT_MIN_CENTS, PAYMENT_MAX_CENTS);
        OrderEntry::encode_payment(
            args,
            warehouse_id,
            district_id,
            customer_warehouse_id,
            customer_district_id,
            customer_id,
            amount_cents,
        );
    }

    fn next_delivery(&mut self, args: &mut Vec<u8>) {
        let warehouse_id = self.rng.below(u64::from(self.warehouse_count)) as u32;
        let carrier_id = self.rng.between(1, i64::from(CARRIER_ID_MAX)) as u32;
        OrderEntry::encode_delivery(args, warehouse_id, carrier_id);
    }
}

/// The amount of a payment call, read back from its arguments.
fn payment_amount_cents(args: &[u8]) -> Result<i64, ProcError> {
    let mut reader = ArgReader::new(args);
    for _ in 0..5 {
        reader.u32()?;
    }
    reader.i64()
}

/// Prefetches the customer and, per line, the item and the stock record a new-order will
/// touch: the records that miss the cache at the default scale.
fn prefetch_new_order(workload: &OrderEntry, segment: &Segment, args: &[u8]) {
    let mut reader = ArgReader::new(args);
    let ids = (|| {
        let warehouse = workload.warehouse_arg(&mut reader, "")?;
        let district = workload.district_arg(&mut reader, "")?;
        let customer = workload.customer_arg(&mut reader, "")?;
        Ok::<_, ProcError>((warehouse, district, customer, reader.u32()?))
    })();
    let Ok((warehouse, district, customer, line_count)) = ids else {
        return;
    };
    let customer_index = workload.customer_index(warehouse, district, customer);
    segment.prefetch(workload.customer.record_offset(customer_index));
    for _ in 0..line_count.min(ORDER_LINES_MAX as u32) {
        let (Ok(item), Ok(supply_warehouse), Ok(_)) = (reader.u32(), reader.u32(), reader.u32())
        else {
            return;
        };
        let (item, supply_warehouse) = (item as usize, supply_warehouse as usize);
        if item < workload.item_count && supply_warehouse < workload.warehouse_count {
            segment.prefetch(workload.item.record_offset(item));
            let stock_index = workload.stock_index(supply_warehouse, item);
            segment.prefetch(workload.stock.record_offset(stock_index));
        }
    }
}

/// Prefetches the paying customer's record.
fn prefetch_payment(workload: &OrderEntry, segment: &Segment, args: &[u8]) {
    let mut reader = ArgReader::new(args);
    let ids = (|| {
        reader.u32()?;
        reader.u32()?;
        let warehouse = workload.warehouse_arg(&mut reader, "")?;
        let district = workload.district_arg(&mut reader, "")?;
        let customer = workload.customer_arg(&mut reader, "")?;
        Ok::<_, ProcError>((warehouse, district, customer))
    })();
    if let Ok((warehouse, district, customer)) = ids {
        let customer_index = workload.customer_index(warehouse, district, customer);
        segment.prefetch(workload.customer.record_offset(customer_index));
    }
}

impl Driver for OrderEntryDriver {
    fn next_call(&mut self, args: &mut Vec<u8>) -> ProcId {
        let draw = self
            .rng
            .below(NEW_ORDER_SHARE + PAYMENT_SHARE + DELIVERY_SHARE);
        if draw < NEW_ORDER_SHARE {
            self.next_new_order(args);
            NEW_ORDER
        } else if draw < NEW_ORDER_SHARE + PAYMENT_SHARE {
            self.next_payment(args);
            PAYMENT
        } else {
            self.next_delivery(args);
            DELIVERY
        }
    }

    fn observe(&mut self, id: ProcId, args: &[u8], outcome: Result<(), &ProcError>) {
        let counts = &mut self.counts[usize::from(id.0)];
        match outcome {
            Ok(()) => {
                counts.committed += 1;
                if id == PAYMENT {
                    let amount = payment_amount_cents(args);
                    self.payment_total_cents += amount.expect("the driver's own payment args");
                }
            }
            Err(err) => {
                assert!(
                    !matches!(err, ProcError::BadArgs(_)),
                    "the driver produced bad arguments: {err}"
                );
                counts.rolled_back += 1;
            }
        }
    }

    /// Every committed new-order entered one order, and W_YTD grew by the committed payments.
    fn check(&self, segment: &Segment) -> Result<(), Inconsistency> {
        let orders_entered = self.workload.orders_entered(segment);
        let new_orders = self.counts(NEW_ORDER).committed;
        if orders_entered != new_orders {
            return Err(Inconsistency {
                check: "orders entered = committed new-orders",
                detail: format!(
                    "districts entered {orders_entered} orders since the load, {new_orders} \
                     new-orders committed"
                ),
            });
        }
        let payments_cents = self.workload.payments_total_cents(segment);
        if payments_cents != self.payment_total_cents {
            return Err(Inconsistency {
                check: "W_YTD growth = committed payments",
                detail: format!(
                    "W_YTD grew by {payments_cents} cents, the {} committed payments sum to {}",
                    self.counts(PAYMENT).committed,
                    self.payment_total_cents
                ),
            });
        }
        Ok(())
    }
}

/// TPC-C's non-uniform random ids (clause 2.1.6): NURand(A, 0, count - 1) with run constant C.
#[derive(Clone, Copy, Debug)]
struct NuRand {
    a: u64,
    c: u64,
    count: u64,
}

impl NuRand {
    /// Scales TPC-C's `a_standard` (for `count_standard` ids) to `count` ids, and draws C.
    fn new(rng: &mut Rng, count: usize, a_standard: u64, count_standard: u64) -> NuRand {
        assert!(count > 0);
        let count = count as u64;
        let a = (count * (a_standard + 1))
            .div_ceil(count_standard)
            .next_power_of_two()
            - 1;
        NuRand {
            a,
            c: rng.below(a + 1),
            count,
        }
    }

    fn sample(&self, rng: &mut Rng) -> u64 {
        ((rng.below(self.a + 1) | rng.below(self.count)) + self.c) % self.count
    }
}

/// Checks a 0-based id argument against its count.
#[inline]
fn id_arg(id: u32, count: usize, error: &'static str) -> Result<usize, ProcError> {
    let index = id as usize;
    if index < count {
        Ok(index)
    } else {
        Err(ProcError::BadArgs(error))
    }
}

/// One field of record `index`, as the txn sees it, without copying the whole record.
#[inline]
fn read_field<T: Pod, F: Pod>(
    table: &Table<T>,
    txn: &Txn<'_>,
    index: usize,
    field_offset: usize,
) -> F {
    assert!(field_offset + size_of::<F>() <= size_of::<T>());
    txn.read_pod(table.record_offset(index) + field_offset)
}

/// Calls `write` for records `0..count` in txns bounded by [`LOAD_TXN_RECORDS`] records and
/// [`LOAD_TXN_BYTES`] bytes of `record_len` each.
fn load_records(
    segment: &mut Segment,
    count: usize,
    record_len: usize,
    mut write: impl FnMut(&mut Txn<'_>, usize),
) {
    let records_per_txn = (LOAD_TXN_BYTES / record_len).clamp(1, LOAD_TXN_RECORDS);
    for first in (0..count).step_by(records_per_txn) {
        let mut txn = segment.begin();
        for index in first..count.min(first + records_per_txn) {
            write(&mut txn, index);
        }
        txn.commit();
    }
}

/// Random lowercase letters: filler that looks like text and compresses like it.
fn random_text<const N: usize>(rng: &mut Rng) -> [u8; N] {
    let mut text = [0; N];
    for chunk in text.chunks_mut(8) {
        for (byte, random) in chunk.iter_mut().zip(rng.next_u64().to_le_bytes()) {
            *byte = b'a' + random % 26;
        }
    }
    text
}

/// TPC-C's customer last name for a number below 1,000: one syllable per decimal digit.
fn last_name(number: usize) -> [u8; 16] {
    const SYLLABLES: [&[u8]; 10] = [
        b"BAR", b"OUGHT", b"ABLE", b"PRI", b"PRES", b"ESE", b"ANTI", b"CALLY", b"ATION", b"EING",
    ];
    let number = number % 1000;
    let mut name = [0; 16];
    let mut len = 0;
    for digit in [number / 100, number / 10 % 10, number % 10] {
        let syllable = SYLLABLES[digit];
        name[len..len + syllable.len()].copy_from_slice(syllable);
        len += syllable.len();
    }
    name
}
