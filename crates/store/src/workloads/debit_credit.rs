//! Debit-Credit (being written).
