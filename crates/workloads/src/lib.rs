//! The benchmark data models of seed 000 (section 2.4), Debit-Credit and Order-Entry, with
//! their call generators and consistency checks. Each is a [`tandem_store::Workload`] built
//! only from the store's tables, layout and registry, and reaches the rest of the system as a
//! [`tandem_store::DataModel`] through [`tandem_store::Compiled`]. [`model`] also builds the
//! Redis model (crate `tandem-redis`) by name, so a config can name any of them.

pub mod debit_credit;
pub mod order_entry;

#[cfg(test)]
mod prefetch_tests;

use tandem_store::{Compiled, DataModel};

use crate::debit_credit::{DebitCredit, DebitCreditConfig};
use crate::order_entry::{OrderEntry, OrderEntryConfig};

/// The names of the models [`model`] builds, in the order they are listed to users.
pub const MODEL_NAMES: [&str; 3] = ["debit-credit", "order-entry", "redis"];

/// The data model called `name`, laid out with its default scale in a segment of `db_bytes`.
/// The error names what to change.
pub fn model(name: &str, db_bytes: usize) -> Result<Box<dyn DataModel>, String> {
    match name {
        "debit-credit" => {
            let workload = DebitCredit::new(db_bytes, &DebitCreditConfig::default())
                .map_err(|err| format!("debit-credit does not fit: {err}"))?;
            Ok(Compiled::boxed(workload))
        }
        "order-entry" => {
            let config = OrderEntryConfig::default();
            let workload = OrderEntry::new(db_bytes, &config).map_err(|_| {
                let mib = OrderEntry::min_db_mib(&config);
                format!(
                    "order-entry needs at least {mib} MiB for one warehouse; give db_mib ≥ {mib}"
                )
            })?;
            Ok(Compiled::boxed(workload))
        }
        "redis" => {
            let model = tandem_redis::RedisModel::new(db_bytes)
                .map_err(|err| format!("redis does not fit: {err}"))?;
            Ok(Box::new(model))
        }
        _ => Err(format!(
            "unknown data model '{name}'; accepted values: {}",
            MODEL_NAMES.join(", ")
        )),
    }
}
