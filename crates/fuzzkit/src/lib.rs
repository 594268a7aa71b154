//! What the fuzz targets of every crate share (docs/fuzzing.md): how many cases each runs,
//! and how a valid input is damaged. A dev-dependency only: no production crate links it.

use proptest::sample::Index;
use proptest::test_runner::Config;

/// The environment variable that sets how many cases every fuzz target runs: CI leaves it
/// unset; a long run sets it to millions (`TANDEM_FUZZ_CASES=1000000 cargo test --release`).
pub const CASES_VAR: &str = "TANDEM_FUZZ_CASES";

/// Cases a fuzz target runs: `TANDEM_FUZZ_CASES`, else `default` (a few seconds' worth in a
/// debug build).
pub fn cases(default: u32) -> u32 {
    std::env::var(CASES_VAR)
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(default)
}

/// A fuzz target's proptest configuration: [`cases`] cases, proptest's defaults otherwise.
pub fn config(default: u32) -> Config {
    Config::with_cases(cases(default))
}

/// `bytes` with each edit applied in turn: at the position `Index` picks, the byte flipped
/// (xor with the byte given, made non-zero), the rest cut off, or the byte given inserted.
/// An empty input gets the byte.
pub fn mutate(mut bytes: Vec<u8>, edits: &[(Index, u8, u8)]) -> Vec<u8> {
    for &(at, byte, edit) in edits {
        if bytes.is_empty() {
            bytes.push(byte);
            continue;
        }
        let at = at.index(bytes.len());
        match edit % 3 {
            0 => bytes[at] ^= byte | 1,
            1 => bytes.truncate(at),
            _ => bytes.insert(at, byte),
        }
    }
    bytes
}
