//! What the fuzz targets share (docs/fuzzing.md): how many cases each runs.

use proptest::test_runner::Config;

/// The environment variable that sets how many cases every fuzz target runs: CI leaves it
/// unset; a long run sets it to millions (`TANDEM_FUZZ_CASES=1000000 cargo test --release`).
pub const CASES_VAR: &str = "TANDEM_FUZZ_CASES";

/// A fuzz target's proptest configuration: `TANDEM_FUZZ_CASES` cases, else `default`, a few
/// seconds' worth in a debug build.
pub fn config(default: u32) -> Config {
    let cases = std::env::var(CASES_VAR)
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        ..Config::default()
    }
}
