//! Sorted set commands (t_zset.c). Not built yet: the family has no commands, and no key holds its type.

use tandem_memory::Txn;

use super::Command;
use crate::db::{Key, Layout};
use crate::mem::Mem;

/// The family's commands (merged into [`super::commands`]).
pub static COMMANDS: &[Command] = &[];

/// Frees every block the value of `key` holds (not its key entry).
pub fn free(txn: &mut Txn<'_>, layout: &Layout, key: &Key) {
    let _ = (txn, layout);
    panic!("no key holds a value of type {} yet", key.kind().name());
}

/// Pushes every block the value of `key` holds, as (segment offset, bytes asked for).
pub fn owned(mem: &impl Mem, layout: &Layout, key: &Key, owned: &mut Vec<(usize, usize)>) {
    let _ = (mem, layout, owned);
    panic!("no key holds a value of type {} yet", key.kind().name());
}
