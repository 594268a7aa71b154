//! Lua scripts (eval.c, script_lua.c). Not built yet.

use super::Command;

/// The family's commands (merged into [`super::commands`]).
pub static COMMANDS: &[Command] = &[];
