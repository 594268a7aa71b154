//! Lua scripts (eval.c, script_lua.c). Not built yet.

use super::Command;
use crate::db::Layout;
use crate::mem::Mem;

/// The family's commands (merged into [`super::commands`]).
pub static COMMANDS: &[Command] = &[];

/// Pushes every block the script store holds, as (segment offset, bytes asked for).
pub fn owned(mem: &impl Mem, layout: &Layout, owned: &mut Vec<(usize, usize)>) {
    let _ = (mem, layout, owned);
}
