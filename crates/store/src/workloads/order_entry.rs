//! placeholder until Order-Entry lands
