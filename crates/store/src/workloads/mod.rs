//! The benchmark workloads of seed 000 (section 2.4), with their consistency checks.

pub mod args;
pub mod debit_credit;
pub mod order_entry;
