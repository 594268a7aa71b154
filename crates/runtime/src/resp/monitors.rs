//! `MONITOR`: the connections that asked to be shown every command the node runs, and the
//! lines waiting for them.
//!
//! A command is shown when the loop hands it on (a call sent to the node, or a connection
//! command the session ran), which on a primary is the order the node runs them in, since
//! this loop sends every call; a script's own commands only the model sees, so they come
//! from the model's [`InnerCalls`] feed once they ran, after the script's line. A `MULTI`
//! block's commands are shown when its `EXEC` runs them, then `EXEC`, as Redis shows them;
//! a queued command is not shown when it is queued, nor a command refused before it runs.
//!
//! One difference from Redis's order: scripts handed on in the same pass of the loop (a
//! pipeline of `EVAL`s) show all their lines before any of their commands, which come in the
//! order they ran.
//!
//! Nothing is formatted while no connection monitors.

use std::collections::BTreeSet;
use std::sync::Arc;

use mio::Token;
use tandem_redis::resp::Argv;
use tandem_redis::session::{monitor_line, shown_to_monitors};
use tandem_redis::stats::Tally;
use tandem_store::InnerCalls;

#[derive(Debug, Default)]
pub(super) struct Monitors {
    tokens: BTreeSet<Token>,
    /// Lines shown since the last [`Monitors::take_lines`].
    pending: Vec<u8>,
    /// What the model's calls ran inside them, if the node's model tells.
    inner_calls: Option<Arc<InnerCalls>>,
}

impl Monitors {
    pub(super) fn watch_model(&mut self, inner_calls: Arc<InnerCalls>) {
        self.inner_calls = Some(inner_calls);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub(super) fn tokens(&self) -> impl Iterator<Item = Token> + '_ {
        self.tokens.iter().copied()
    }

    pub(super) fn add(&mut self, token: Token) {
        self.tokens.insert(token);
        self.model_watched(true);
    }

    /// The connection `token` monitors no more (it closed, or sent `RESET`).
    pub(super) fn remove(&mut self, token: Token) {
        if self.tokens.remove(&token) && self.tokens.is_empty() {
            self.pending.clear();
            self.model_watched(false);
        }
    }

    fn model_watched(&self, watched: bool) {
        if let Some(inner_calls) = &self.inner_calls {
            inner_calls.set_watching(watched);
        }
    }

    /// Shows `argv`, which a connection from `client` in database `db` sent and the session
    /// counted as `tally`: a command that ran (or, for `EXEC`, the `block` it ran first).
    pub(super) fn show(
        &mut self,
        db: u32,
        client: &str,
        argv: &Argv,
        tally: &Tally,
        block: Option<&[Argv]>,
    ) {
        if self.tokens.is_empty() {
            return;
        }
        match tally {
            Tally::Nothing | Tally::Rejected(_) => return,
            Tally::Exec { .. } => {
                for queued in block.unwrap_or_default() {
                    self.show_words(db, client, queued);
                }
            }
            Tally::Ran(_) => {}
        }
        self.show_words(db, client, argv);
    }

    fn show_words(&mut self, db: u32, client: &str, argv: &Argv) {
        if shown_to_monitors(argv) {
            let words: Vec<&[u8]> = argv.iter().collect();
            let line = monitor_line(now_unix_us(), db, client, &words);
            self.pending.extend_from_slice(&line);
        }
    }

    /// Every line waiting: the commands scripts ran first (their scripts were shown in an
    /// earlier pass), then this pass's; `None` if there are none.
    pub(super) fn take_lines(&mut self) -> Option<Vec<u8>> {
        if self.tokens.is_empty() {
            return None;
        }
        let mut lines = Vec::new();
        if let Some(inner_calls) = &self.inner_calls {
            for call in inner_calls.take() {
                let words: Vec<&[u8]> = call.words.iter().map(Vec::as_slice).collect();
                lines.extend_from_slice(&monitor_line(now_unix_us(), call.db, "lua", &words));
            }
        }
        lines.append(&mut self.pending);
        (!lines.is_empty()).then_some(lines)
    }
}

fn now_unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}
