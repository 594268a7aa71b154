//! The data model a node serves, as the runtime sees it: a `Box<dyn DataModel>` it was given.

use tandem_memory::Segment;
use tandem_store::DataModel;

use crate::StartError;
use crate::config::{GroupConfig, Mode};

/// A fresh segment for `group`, loaded with `model`'s initial database. The load is
/// deterministic, so a primary and its backups start from the same bytes at the same LSN.
/// A passive group's segment traces its writes for the backups' mirrors from then on (a
/// primary ships the traces; a backup's role starts its mirror from the segment's image).
pub fn loaded_segment(group: &GroupConfig, model: &dyn DataModel) -> Result<Segment, StartError> {
    let mut segment =
        Segment::anonymous(group.db_mib << 20, group.strategy).map_err(StartError::Segment)?;
    model.load(&mut segment);
    if group.mode == Mode::Passive {
        segment
            .enable_passive_trace(group.undo_log_kib << 10)
            .map_err(StartError::Passive)?;
    }
    Ok(segment)
}
