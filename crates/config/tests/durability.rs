//! Persistence: what is saved before a message leaves, what a crash keeps, how a state file
//! fails; and the refusal of bad input (bytes, settings, saved states).

use crate::common;

use std::fs;
use std::io;
use std::path::PathBuf;

use common::{Net, Rng, decode, encode, map_of};
use raft::prelude::{Message, MessageType};
use tandem_config::{
    ConfigCore, ConfigReady, ConfigSettings, CorruptState, Durable, FileDurable, MemDurable,
    NodeId, Persisted, StartError, StepError,
};

fn settings(id: NodeId) -> ConfigSettings {
    ConfigSettings::new(id, vec![1, 2, 3], 7)
}

fn fresh(id: NodeId) -> ConfigCore {
    ConfigCore::new(settings(id), map_of(&[1, 2, 3]), None).expect("starts")
}

fn vote_request(from: NodeId, to: NodeId, term: u64) -> Vec<u8> {
    let mut message = Message::default();
    message.set_msg_type(MessageType::MsgRequestVote);
    message.from = u64::from(from);
    message.to = u64::from(to);
    message.term = term;
    encode(&message)
}

/// The vote responses in a Ready: (to, term, granted).
fn vote_responses(out: &ConfigReady) -> Vec<(NodeId, u64, bool)> {
    out.messages
        .iter()
        .map(|(to, bytes)| (*to, decode(bytes)))
        .filter(|(_, m)| m.get_msg_type() == MessageType::MsgRequestVoteResponse)
        .map(|(to, m)| (to, m.term, !m.reject))
        .collect()
}

/// A disk that remembers every state it was asked to save.
#[derive(Default)]
struct SpyDisk {
    saved: Vec<Persisted>,
}

impl Durable for SpyDisk {
    fn save(&mut self, state: &Persisted) -> io::Result<()> {
        self.saved.push(state.clone());
        Ok(())
    }
}

#[test]
fn a_vote_is_saved_before_the_vote_leaves() {
    let mut core = fresh(1);
    core.step(2, &vote_request(2, 1, 5)).unwrap();
    let mut disk = SpyDisk::default();
    let mut out = ConfigReady::default();
    core.ready(&mut disk, &mut out).unwrap();
    assert_eq!(vote_responses(&out), vec![(2, 5, true)]);
    // By the time the grant is handed over, the disk holds the vote in that term.
    let last = disk.saved.last().expect("saved before returning the vote");
    assert_eq!((last.term, last.vote), (5, 2));
}

#[test]
fn a_failed_save_releases_nothing_and_poisons() {
    let mut core = fresh(1);
    core.step(2, &vote_request(2, 1, 5)).unwrap();
    let mut disk = MemDurable::new();
    disk.set_failing(true);
    let mut out = ConfigReady::default();
    let error = core.ready(&mut disk, &mut out).unwrap_err();
    assert!(error.to_string().contains("injected"), "{error}");
    assert!(out.messages.is_empty(), "the unsaved vote must not leave");
    assert!(core.poisoned().is_some());
    // Poisoned: every later call refuses, even once the disk works again.
    disk.set_failing(false);
    assert!(core.ready(&mut disk, &mut out).is_err());
    assert!(matches!(
        core.step(3, &vote_request(3, 1, 6)),
        Err(StepError::Poisoned { .. })
    ));
    core.tick();
    assert!(out.is_empty());
    assert_eq!(disk.saves(), 0);
}

/// A leader may send its appends before it saves them (Raft lets a leader write its log in
/// parallel with its followers; it counts itself toward a commit only once saved), so a
/// failed save can have released appends, and nothing else.
#[test]
fn a_leader_releases_only_appends_before_its_save() {
    let mut net = Net::new(3, 3, 1);
    let leader = net.elect();
    let node = net.nodes.get_mut(&leader).unwrap();
    let core = node.core.as_mut().unwrap();
    core.propose(common::change_view(1, 0, common::view(1, 1, &[])))
        .unwrap();
    node.disk.set_failing(true);
    let mut out = ConfigReady::default();
    assert!(core.ready(&mut node.disk, &mut out).is_err());
    assert!(!out.messages.is_empty(), "the appends left at once");
    for (_, bytes) in &out.messages {
        assert_eq!(decode(bytes).get_msg_type(), MessageType::MsgAppend);
    }
    // Poisoned: nothing more leaves.
    let mut out = ConfigReady::default();
    assert!(core.ready(&mut node.disk, &mut out).is_err());
    assert!(out.messages.is_empty());
}

#[test]
fn a_crash_after_voting_does_not_vote_twice() {
    let mut disk = MemDurable::new();
    let mut out = ConfigReady::default();
    let mut core = fresh(1);
    core.step(2, &vote_request(2, 1, 5)).unwrap();
    core.ready(&mut disk, &mut out).unwrap();
    assert_eq!(vote_responses(&out), vec![(2, 5, true)]);
    drop(core);

    // Restarted from its disk, it refuses a second candidate of the same term...
    let mut core = ConfigCore::new(settings(1), map_of(&[1, 2, 3]), disk.load().unwrap()).unwrap();
    assert_eq!(core.term(), 5);
    out.clear();
    core.step(3, &vote_request(3, 1, 5)).unwrap();
    core.ready(&mut disk, &mut out).unwrap();
    assert_eq!(vote_responses(&out), vec![(3, 5, false)]);

    // ...which a node that had forgotten its vote would have granted.
    let mut amnesiac = fresh(1);
    out.clear();
    amnesiac.step(3, &vote_request(3, 1, 5)).unwrap();
    amnesiac.ready(&mut MemDurable::new(), &mut out).unwrap();
    assert_eq!(vote_responses(&out), vec![(3, 5, true)]);
}

#[test]
fn garbage_and_misaddressed_messages_are_errors() {
    let mut core = fresh(1);
    let mut rng = Rng::new(3);
    let mut refused = 0;
    for _ in 0..20_000 {
        let len = rng.below(96) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if core.step(2, &bytes).is_err() {
            refused += 1;
        }
    }
    assert!(refused > 19_900, "{refused}");
    assert!(matches!(
        core.step(2, &[0xff; 8]),
        Err(StepError::Decode { .. })
    ));
    // Group nesting, the classic protobuf recursion bomb.
    assert!(core.step(2, &[0x0b; 10_000]).is_err());

    let request = vote_request(2, 1, 5);
    let wrong = core.step(3, &request);
    assert!(
        matches!(
            wrong,
            Err(StepError::WrongSender {
                claimed: 2,
                from: 3
            })
        ),
        "{wrong:?}"
    );
    let wrong = core.step(2, &vote_request(2, 3, 5));
    assert!(
        matches!(wrong, Err(StepError::WrongRecipient { to: 3 })),
        "{wrong:?}"
    );
    let wrong = core.step(9, &vote_request(9, 1, 5));
    assert!(
        matches!(wrong, Err(StepError::UnknownPeer { from: 9 })),
        "{wrong:?}"
    );
    let wrong = core.step(1, &vote_request(1, 1, 5));
    assert!(
        matches!(wrong, Err(StepError::UnknownPeer { from: 1 })),
        "{wrong:?}"
    );

    // A peer may not drive this node's clock or inject proposals.
    for msg_type in [
        MessageType::MsgHup,
        MessageType::MsgBeat,
        MessageType::MsgPropose,
    ] {
        let mut message = decode(&request);
        message.set_msg_type(msg_type);
        let wrong = core.step(2, &encode(&message));
        assert!(
            matches!(wrong, Err(StepError::UnexpectedType { .. })),
            "{wrong:?}"
        );
    }

    // A snapshot whose data is not a valid map, or for another membership.
    let mut message = decode(&request);
    message.set_msg_type(MessageType::MsgSnapshot);
    let snapshot = message.mut_snapshot();
    snapshot.mut_metadata().index = 100;
    snapshot.mut_metadata().term = 5;
    snapshot.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
    snapshot.set_data(vec![0xff, 0xff].into());
    let wrong = core.step(2, &encode(&message));
    assert!(
        matches!(wrong, Err(StepError::BadSnapshot { .. })),
        "{wrong:?}"
    );
    let map = postcard::to_allocvec(&map_of(&[1, 2, 3])).unwrap();
    message.mut_snapshot().set_data(map.into());
    message
        .mut_snapshot()
        .mut_metadata()
        .mut_conf_state()
        .voters = vec![1, 2];
    let wrong = core.step(2, &encode(&message));
    assert!(
        matches!(wrong, Err(StepError::BadSnapshot { .. })),
        "{wrong:?}"
    );

    // None of it changed the node.
    assert_eq!(core.term(), 0);
    let mut out = ConfigReady::default();
    core.ready(&mut MemDurable::new(), &mut out).unwrap();
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn bad_settings_and_states_are_refused_at_start() {
    let map = map_of(&[1, 2, 3, 4]);
    let start = |settings: ConfigSettings, persisted: Option<Persisted>| {
        ConfigCore::new(settings, map.clone(), persisted).unwrap_err()
    };
    let mut bad = settings(1);
    bad.voters = vec![];
    assert!(matches!(
        start(bad, None),
        StartError::InvalidSettings { .. }
    ));
    let mut bad = settings(1);
    bad.voters = vec![1, 2, 2];
    assert!(matches!(
        start(bad, None),
        StartError::InvalidSettings { .. }
    ));
    let mut bad = settings(1);
    bad.election_ticks = bad.heartbeat_ticks;
    assert!(matches!(
        start(bad, None),
        StartError::InvalidSettings { .. }
    ));
    let mut bad = settings(1);
    bad.voters = vec![1, 2, 9];
    assert!(matches!(
        start(bad, None),
        StartError::VoterNotInMap { node: 9 }
    ));
    assert!(matches!(
        start(settings(8), None),
        StartError::NotAMember { node: 8 }
    ));
    // Node 4 is in the map but not a voter: it starts as a learner.
    ConfigCore::new(settings(4), map.clone(), None).unwrap();

    let mut invalid = map.clone();
    invalid.groups.insert(1, common::view(1, 1, &[1]));
    let error = ConfigCore::new(settings(1), invalid, None).unwrap_err();
    assert!(matches!(error, StartError::InvalidInitialMap(_)), "{error}");

    // A saved state for another voter set, or one whose commit runs past its log.
    let mut net = Net::new(3, 3, 2);
    net.elect();
    net.commit(common::change_view(1, 0, common::view(1, 1, &[2])));
    let saved = net.nodes[&1].disk.load().unwrap().unwrap();
    let mut other = settings(1);
    other.voters = vec![1, 2];
    assert!(matches!(
        start(other, Some(saved.clone())),
        StartError::VotersChanged { .. }
    ));
    let mut image = saved.clone();
    image.commit = image.snapshot_index + image.entries.len() as u64 + 1;
    let error = start(settings(1), Some(image));
    assert!(
        matches!(error, StartError::CorruptPersisted { .. }),
        "{error}"
    );
    let mut image = saved.clone();
    image.entries.remove(0);
    let error = start(settings(1), Some(image));
    assert!(
        matches!(error, StartError::CorruptPersisted { .. }),
        "{error}"
    );
    let mut image = saved;
    image.vote = 9;
    let error = start(settings(1), Some(image));
    assert!(
        matches!(error, StartError::CorruptPersisted { .. }),
        "{error}"
    );
}

/// A fresh directory under the system's temporary directory.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-config-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn some_state() -> Persisted {
    let mut net = Net::new(3, 3, 4);
    net.elect();
    net.commit(common::change_view(1, 0, common::view(1, 1, &[2, 3])));
    // A commit index alone is not saved: the next append (another group's view) saves it.
    net.commit(common::change_view(2, 0, common::view(1, 1, &[2, 3])));
    net.nodes[&2].disk.load().unwrap().unwrap()
}

/// The saved state is its owner's alone: the directory `open` makes (and its parents) and
/// both slot files, whatever the umask (the modes are set at creation).
#[test]
fn file_durable_keeps_its_directory_and_slots_private() {
    use std::os::unix::fs::PermissionsExt;
    let base = temp_dir("private");
    let dir = base.join("node").join("raft");
    let (mut disk, _) = FileDurable::open(&dir).unwrap();
    disk.save(&some_state()).unwrap();
    let mode = |path: &std::path::Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&base.join("node")), FileDurable::DIR_MODE);
    assert_eq!(mode(&dir), FileDurable::DIR_MODE);
    for name in FileDurable::FILE_NAMES {
        assert_eq!(mode(&dir.join(name)), FileDurable::FILE_MODE, "{name}");
    }
    fs::remove_dir_all(&base).unwrap();
}

#[test]
fn file_durable_round_trips_and_alternates_slots() {
    let dir = temp_dir("round-trip");
    let (mut disk, found) = FileDurable::open(&dir).unwrap();
    assert_eq!(found, None, "first start");
    let state = some_state();
    disk.save(&state).unwrap();
    assert!(disk.path().ends_with(FileDurable::FILE_NAMES[0]));
    let (_, found) = FileDurable::open(&dir).unwrap();
    assert_eq!(found.as_ref(), Some(&state));

    // A restart from the file rebuilds the same map as the node had.
    let core = ConfigCore::new(settings(2), map_of(&[1, 2, 3]), found).unwrap();
    assert_eq!(core.map().groups[&1], common::view(1, 1, &[2, 3]));

    // Each save goes to the slot that does not hold the last one; the newest wins.
    let (mut disk, _) = FileDurable::open(&dir).unwrap();
    let mut newer = state.clone();
    for round in 0..5 {
        newer.term += 1;
        disk.save(&newer).unwrap();
        assert!(
            disk.path()
                .ends_with(FileDurable::FILE_NAMES[(round + 1) % 2])
        );
        assert_eq!(FileDurable::open(&dir).unwrap().1.as_ref(), Some(&newer));
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_torn_save_leaves_the_save_before_it() {
    let dir = temp_dir("torn");
    let (mut disk, _) = FileDurable::open(&dir).unwrap();
    let old = some_state();
    disk.save(&old).unwrap();
    let mut new = old.clone();
    new.term += 1;
    disk.save(&new).unwrap();
    let path = disk.path().to_path_buf();
    let good = fs::read(&path).unwrap();
    // The save of `new` torn anywhere after its 12-byte header (the bytes after the tear
    // are whatever the slot held): `old` stands.
    let image_len = 12 + new.encode().len();
    for len in [13, 20, image_len / 2, image_len - 1] {
        let mut torn = good.clone();
        torn[len..image_len]
            .iter_mut()
            .for_each(|byte| *byte ^= 0xa5);
        fs::write(&path, &torn).unwrap();
        assert_eq!(
            FileDurable::open(&dir).unwrap().1.as_ref(),
            Some(&old),
            "torn at {len}"
        );
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn file_durable_reports_every_flipped_byte_it_cannot_recover_from() {
    let dir = temp_dir("corrupt");
    let (mut disk, _) = FileDurable::open(&dir).unwrap();
    disk.save(&some_state()).unwrap();
    let path = disk.path().to_path_buf();
    let good = fs::read(&path).unwrap();
    let expect_corrupt = |image: &[u8], what: &str| {
        fs::write(&path, image).unwrap();
        let error = FileDurable::open(&dir).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{what}");
        let message = error.to_string();
        assert!(
            message.contains(&path.display().to_string()),
            "{what}: {message}"
        );
    };
    // One save: no earlier state to fall back on, so any damage is an error, never an empty
    // state (which could let the node vote twice in a term).
    let image_len = 12 + some_state().encode().len();
    for position in 0..image_len {
        let mut image = good.clone();
        image[position] ^= 0x04;
        expect_corrupt(&image, &format!("byte {position} flipped"));
    }
    for len in [1, 11, 12, 20, image_len / 2, image_len - 1] {
        let mut torn = good.clone();
        torn[len..image_len]
            .iter_mut()
            .for_each(|byte| *byte ^= 0xa5);
        expect_corrupt(&torn, &format!("torn at {len}"));
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn state_images_name_what_is_wrong() {
    let image = some_state().encode();
    assert!(matches!(
        Persisted::decode(&image[..10]),
        Err(CorruptState::TooShort { len: 10 })
    ));
    let mut bad = image.clone();
    // Format version 1, without the incarnation.
    bad[7] = 1;
    assert!(matches!(
        Persisted::decode(&bad),
        Err(CorruptState::BadMagic { .. })
    ));
    let mut bad = image.clone();
    bad.pop();
    assert!(matches!(
        Persisted::decode(&bad),
        Err(CorruptState::LengthMismatch { .. })
    ));
    let mut bad = image.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(matches!(
        Persisted::decode(&bad),
        Err(CorruptState::Checksum { .. })
    ));

    // MemDurable keeps the encoded image: a torn image is found at restart.
    let mut disk = MemDurable::new();
    disk.save(&some_state()).unwrap();
    disk.image_mut().unwrap().truncate(20);
    assert!(disk.load().is_err());
    let mut rng = Rng::new(5);
    for _ in 0..2_000 {
        let len = rng.below(200) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        assert!(Persisted::decode(&bytes).is_err());
    }
}

#[test]
fn persisted_state_stays_small() {
    let mut net = Net::new(3, 3, 6);
    for number in 1..=300 {
        net.commit(common::change_view(
            1,
            number - 1,
            common::view(number, 1, &[2, 3]),
        ));
    }
    for id in net.live() {
        let image = net.nodes[&id].disk.image().unwrap();
        assert!(image.len() < 8 * 1024, "node {id}: {} bytes", image.len());
    }
}

/// Each start from saved state is a new life of the node, saved before it is told
/// (`ConfigCore::incarnation`), so no two lives share one.
#[test]
fn each_restart_is_a_new_incarnation_saved_before_it_is_told() {
    assert_eq!(fresh(2).incarnation(), Some(0), "a first start");
    let mut state = some_state();
    for life in 1..=3 {
        let mut disk = MemDurable::new();
        let mut core = ConfigCore::new(settings(2), map_of(&[1, 2, 3]), Some(state)).unwrap();
        assert_eq!(core.incarnation(), None, "not saved yet");
        core.ready(&mut disk, &mut ConfigReady::default()).unwrap();
        assert_eq!(core.incarnation(), Some(life));
        state = disk.load().unwrap().expect("saved at the first ready");
        assert_eq!(state.incarnation, life);
    }
}
