//! The whole-cluster simulator: a budget of seeds passes every checker on the real code,
//! a seed reproduces bit for bit, and every checker has teeth: each bug planted in the real
//! code, and each sabotage of the simulated world, is caught within its budget of seeds.

use tandem_replication::bugs::{self, Bug};
use tandem_sim::{
    ClusterReport, ClusterSabotage, Mix, Model, RunOptions, run_cluster, run_cluster_mixed,
    run_cluster_sabotaged, run_cluster_with,
};

/// Ticks of faults per seed.
const TICKS: u64 = 400;

/// The CI budget: a thousand seeds, about a minute in a debug build.
const SEEDS: u64 = 1_000;

/// Runs seeds `0..seeds` of `mix`, failing on the first that fails a checker; returns the
/// calls made and the views reached over all of them.
fn run_budget(mix: Mix, seeds: u64) -> (u64, u64) {
    let options = RunOptions {
        mix,
        model: Model::DebitCredit,
        sabotage: None,
        release_unchecked: false,
        groups: 1,
        members: 0,
    };
    let (calls, views, _) = run_seeds(options, seeds);
    (calls, views)
}

/// Runs seeds `0..seeds` as `options` say, failing on the first that fails a checker;
/// returns the calls made, the views reached (summed over the groups) and the crashes of a
/// node that led several groups at once, over all of them.
fn run_seeds(options: RunOptions, seeds: u64) -> (u64, u64, u64) {
    bugs::plant(None);
    let (mut calls, mut views, mut together) = (0, 0, 0);
    for seed in 0..seeds {
        let report = run_cluster_with(seed, TICKS, options);
        assert!(
            report.failure.is_none(),
            "seed {seed} of {options:?} ({}) failed: {}\n{}",
            report.faults,
            report.failure.unwrap_or_default(),
            report.trace.join("\n")
        );
        calls += report.calls;
        views += report.views;
        together += report.several_primaries_crashes;
    }
    (calls, views, together)
}

#[test]
fn a_budget_of_seeds_passes_every_checker() {
    let (calls, views) = run_budget(Mix::Every, SEEDS);
    // The budget exercises what it claims: many calls, and failovers in most seeds.
    assert!(calls > 1_000_000, "the clients made only {calls} calls");
    assert!(views > 3 * SEEDS, "only {views} views over {SEEDS} seeds");
}

/// The simulated disks are exercised: `durable` seeds run, restarted nodes replay their
/// logs and follow a view from those records, failed syncs poison logs, and whole groups
/// lose power (under `durable` and under the memory rules) and come back through a
/// promotion from rebuilt records, every seed passing.
#[test]
fn restarts_replay_their_logs_and_durable_seeds_run() {
    bugs::plant(None);
    let (mut durable, mut replays, mut followed, mut poisoned) = (0, 0, 0, 0);
    let (mut power_losses, mut promoted, mut durable_lost_power, mut memory_lost_power) =
        (0, 0, 0, 0);
    for seed in 0..100 {
        let report = run_cluster(seed, TICKS);
        assert!(
            report.failure.is_none(),
            "seed {seed} failed: {}",
            report.failure.unwrap_or_default()
        );
        let is_durable = matches!(report.faults.safety, tandem_replication::Safety::Durable(_));
        if is_durable {
            durable += 1;
        }
        if report.power_losses > 0 {
            if is_durable {
                durable_lost_power += 1;
            } else {
                memory_lost_power += 1;
            }
        }
        power_losses += report.power_losses;
        promoted += report.recovered_promoted;
        replays += report.log_replays;
        followed += report.recovered_followed;
        poisoned += report.logs_poisoned;
    }
    assert!(durable >= 10, "only {durable} durable seeds of 100");
    assert!(replays >= 50, "only {replays} restarts replayed their log");
    assert!(
        followed >= 50,
        "only {followed} roles followed recovered records"
    );
    assert!(poisoned >= 5, "only {poisoned} logs poisoned");
    // 18 power losses and 16 promotions from rebuilt records when written.
    assert!(power_losses >= 10, "only {power_losses} power losses");
    assert!(
        promoted >= 8,
        "only {promoted} promotions from rebuilt records"
    );
    assert!(
        durable_lost_power >= 3,
        "only {durable_lost_power} durable seeds lost power"
    );
    assert!(
        memory_lost_power >= 3,
        "only {memory_lost_power} memory-rule seeds lost power"
    );
}

/// Three default-mix seeds of one bug (see `tandem_node::Supervisor::follow`).
const REWOUND_UNREPORTED: &str = "after a power loss a node rewound its log's records for a \
     primary that could not serve, reported nothing, and the group waited for good";

/// Two 1-safe default-mix seeds of one bug (see `tandem_cluster::Cluster::set_waiting`).
const LONE_BACKUP_WAITED: &str = "the only backup restarted with its log and waited to be left \
     out, while its primary prepared no removal that would leave it alone";

/// Seeds that long runs past the CI budget found failing, with their ticks: each fix has a
/// scripted test of its own beside the code; these keep the whole runs passing. (After a
/// change to the simulator a seed may no longer reach the fault it once did; the scripted
/// tests still hold the line.)
const FOUND_BEYOND_THE_BUDGET: [(u64, u64, &str); 27] = [
    (
        34246,
        TICKS,
        "a network whose round trip outlasted the primary's lease: 1-safe answers never left",
    ),
    (
        3184,
        TICKS,
        "a removal asked for on stale holdings lost a commit",
    ),
    (
        107,
        2_000,
        "a removal asked for on stale holdings lost a commit",
    ),
    (
        28840,
        TICKS,
        "a restarted node reported for a promotion holding nothing",
    ),
    (
        28184,
        TICKS,
        "a spare that missed a promotion kept records it discarded",
    ),
    (
        13144,
        TICKS,
        "a change that could not gather its reports waited for good",
    ),
    (
        54935,
        TICKS,
        "a change that could not gather its reports waited for good",
    ),
    (423837, TICKS, REWOUND_UNREPORTED),
    (426103, TICKS, REWOUND_UNREPORTED),
    (428884, TICKS, REWOUND_UNREPORTED),
    (
        420438,
        TICKS,
        "a promotion from reports from memory committed after a power loss named a primary \
         that could not serve, and its backup reported its log's records as a live backup's",
    ),
    (
        199407,
        TICKS,
        "a primary that led the config store collected reports against itself for good",
    ),
    (
        3465,
        TICKS,
        "a member rewound to the primary's own LSN dropped its transfer as a duplicate, for good",
    ),
    (458046, TICKS, LONE_BACKUP_WAITED),
    (485166, TICKS, LONE_BACKUP_WAITED),
    (
        477403,
        TICKS,
        "a spare that followed a view from its log's records after it was left out reported \
         them as received from a primary, and a whole group's power loss went unrecognised",
    ),
    (
        33390,
        TICKS,
        "a restarted backup's reports of its log's records started a view change in every view \
         of a live primary, and the silent spare was never left out to catch up and replace it",
    ),
    (
        29578,
        TICKS,
        "a rejoin's cut removed the checkpoint its log needed, and the log went on reporting \
         records durable that no restart could rebuild",
    ),
    (
        510937,
        TICKS,
        "a log left with its checkpoint alone after a power loss reported nothing durable, and \
         the replies retries found in the dedup table waited for good",
    ),
    (
        22594,
        TICKS,
        "a paused new primary's lease hold ended inside its replayed ticks, releasing replies \
         whose lease the replay then passed",
    ),
    (
        571285,
        TICKS,
        "a view made for the lost incarnations committed after a second power loss named both \
         restarted nodes backups of the primary that served again, and they waited for good",
    ),
    (
        591408,
        TICKS,
        "a removal under durable kept as the only backup a node whose log had failed below \
         records it received, and its later promotion from that log lost acknowledged commits",
    ),
    (
        587583,
        TICKS,
        "a crash tore a node's newest config-store save, and the view it came back to was asked \
         about the newer view its log's records were sealed in (a panic)",
    ),
    (
        705016,
        TICKS,
        "under durable:2 a backup's log failed and the other backup restarted: it could not \
         be removed, the failed log alone holding nothing released, and healing left the \
         failed log in place (its operator restarts it once no acknowledged record is its own)",
    ),
    (
        153285,
        2_000,
        "a backup whose log had failed before its role started was counted, under durable, as \
         having synced every record it received; the promotion's released bound rose above \
         every log, and after the poisoned nodes restarted no reporter held it, for good",
    ),
    (
        155723,
        2_000,
        "under durable the primary and its only backup were restarted with failed logs far \
         behind what was released, and only a spare's log held it: no reporter could be \
         promoted, for good (the spares are now asked too)",
    ),
    (
        1_229_786,
        2_000,
        "after healing, the simulated operator restarted a primary whose log had failed while \
         its view had no backup: the view's records were in its memory alone, and the group \
         waited for good (a crash beyond what the rules promise; the operator now waits)",
    ),
];

#[test]
fn the_seeds_found_beyond_the_budget_pass() {
    bugs::plant(None);
    for (seed, ticks, found) in FOUND_BEYOND_THE_BUDGET {
        let report = run_cluster(seed, ticks);
        assert!(
            report.failure.is_none(),
            "seed {seed} ({found}) failed: {}\n{}",
            report.failure.unwrap_or_default(),
            report.trace.join("\n")
        );
    }
}

/// Half as many seeds again, from the part of the fault space where the rarest bugs hid past
/// the first budget (`Mix::KOfN`: fewer acks than backups, frequent crashes, restarts and
/// partitions).
const SEEDS_K_OF_N: u64 = 500;

#[test]
fn a_budget_of_k_of_n_seeds_passes_every_checker() {
    let (_, views) = run_budget(Mix::KOfN, SEEDS_K_OF_N);
    assert!(
        views > 5 * SEEDS_K_OF_N,
        "only {views} views over {SEEDS_K_OF_N} seeds"
    );
    // 53209 (found past the budget): a primary's answer to a read index question reached a
    // node's next backup role, which took it for a question of its own and panicked (were
    // the ids the same, it would have settled reads that arrived after the answer). Each
    // role now numbers its questions in a range of its own, and ignores other answers.
    // 212240 (durable:2, 4 nodes): the whole group lost power just after a promotion, whose
    // bound on the records released before it came from what the backups had received, not
    // synced; no log held that much, and the group waited for good. Reports now say what
    // each log synced, and under `durable` the bound comes from that. 222437 (durable:1): a
    // backup whose log had failed was counted, in that bound, as holding every record it had
    // received; it now counts for what its acks said its log synced.
    // 501114 at 2,000 ticks (2-safe-applied:2): the simulated operator, which restarts a
    // poisoned node only if it does not hold the only copy of acknowledged records, missed
    // that a frozen backup named the new primary held them; the restart took the last copy.
    // 508619 at 2,000 ticks (2-safe:2): a promoted primary counted every record it took over
    // as released, so a backup served a linearizable read of records the next promotion
    // discarded (`Primary::released_at_most`).
    // 1102351 at 2,000 ticks (2-safe:1): a node cut off while views 71 to 74 were made
    // learned view 70, which made it primary, only afterwards; the checker took that stale
    // promotion, which serves nothing, for one that must hold every acknowledged commit.
    // 1251240 at 2,000 ticks (durable:2): a backup's log synced, its own ack told the
    // primary (which released on it), and the log failed before the receiver heard of that
    // sync; the backup's report said one record less, the promotion's released bound missed
    // an acknowledged commit, and a spare served a linearizable read without it. The
    // receiver now keeps what its log's acks tell (scenario `failed-log.txt` in tandem-node).
    bugs::plant(None);
    for (seed, ticks) in [
        (53209, TICKS),
        (212240, TICKS),
        (222437, TICKS),
        (501114, 2_000),
        (508619, 2_000),
        (1_102_351, 2_000),
        (1_251_240, 2_000),
    ] {
        let report = run_cluster_mixed(seed, ticks, Mix::KOfN);
        assert!(
            report.failure.is_none(),
            "k-of-n seed {seed} failed: {}\n{}",
            report.failure.unwrap_or_default(),
            report.trace.join("\n")
        );
    }
}

/// Seeds of `Mix::AnyTime`: crashes that land while the cluster is not whole. Before a caught-up
/// spare could replace a primary without backups, seeds 9, 152, 207 and 742 stayed down for
/// good (and 892, which the `any-time` mix's first cut reached through a double crash, showed
/// the same view).
const SEEDS_ANY_TIME: u64 = 300;

#[test]
fn a_budget_of_any_time_seeds_passes_every_checker() {
    run_budget(Mix::AnyTime, SEEDS_ANY_TIME);
    bugs::plant(None);
    // 46053 and 70648 (found past the budget): a promotion kept as the only backup a
    // reporter that crashed at once; its primary could neither remove it nor make a caught-up
    // spare a backup, and committed nothing for good.
    // 58033: the node a promotion made primary died at once, and the remaining backup, one
    // record short of the truncate LSN though it held every released record, was refused.
    // 101179: the promoted node died holding the only copy of a record one backup of two
    // had held under `2-safe-applied:1` (so a reply for it may have been released): the
    // cluster rightly waits for good, and the run counts it as a crash of the only copy.
    // 189300 (bounded:15): a spare that restarted in a view without backups reported its
    // log's records in every view of a live primary, each report started a change that ended
    // in the same members, and the spare was never left out to rejoin (as default seed 33390).
    // 300810 (2-safe:1, 3 backups): after a power loss a promotion named a backup from its
    // log's records that, cut off, never heard the primary; the primary crashed, and the
    // backup's report, flagged rebuilt, was not counted: the two live backups, which held
    // every acknowledged record, made 2 of the 3 reports needed, for good. The report of the
    // life the last promotion named now counts (`rule::promote_from`).
    // 305890 (durable): a backup's log failed, the other backup restarted, and the primary
    // could not remove it (see default seed 705016): healing now restarts a node whose log
    // failed, as its operator would.
    // 329856 (2-safe:1): the primary of a view that never served crashed, and its log held
    // the two records released before that its only backup lacked; its report of them was no
    // candidate under a memory rule, and the group waited for good. The old primary's report
    // of rebuilt records is a candidate now (it still counts towards no quorum).
    // 335116 (durable): a checkpoint made the primary's log durable up to 399 with nothing
    // synced after it, and the simulator told the role only after the next sync, which an
    // idle primary never asked for; its replies to retries waited for good. The role hears a
    // checkpoint at once now, as the runtime's log thread tells it.
    for seed in [
        742, 892, 46053, 58033, 70648, 101179, 189300, 300810, 305890, 329856, 335116,
    ] {
        let report = run_cluster_mixed(seed, TICKS, Mix::AnyTime);
        assert!(
            report.failure.is_none(),
            "any-time seed {seed} failed: {}\n{}",
            report.failure.unwrap_or_default(),
            report.trace.join("\n")
        );
    }
}

/// Any-time seed 20550, found past the budget: a backup reported, crashed and came back
/// without its memory before the view that promotes it committed. That view named a primary
/// that holds nothing and has no backups; the old primary and the spare, which held every
/// acknowledged record, had rewound to follow it, so no member could report a state to
/// promote and the cluster stayed down for good. A rewound member now reports the records it
/// held before the rewind, and the promotion keeps them (`Promotion::based_on`).
#[test]
fn a_view_whose_promoted_backup_restarted_before_it_committed_is_replaced() {
    bugs::plant(None);
    let report = run_cluster_mixed(20550, TICKS, Mix::AnyTime);
    assert!(
        report.failure.is_none(),
        "any-time seed 20550 failed: {}\n{}",
        report.failure.unwrap_or_default(),
        report.trace.join("\n")
    );
}

#[test]
fn the_same_seed_gives_the_same_run() {
    bugs::plant(None);
    let first = run_cluster(11, 200);
    let second = run_cluster(11, 200);
    assert_eq!(first.calls, second.calls);
    assert_eq!(first.commits, second.commits);
    assert_eq!(first.views, second.views);
    assert_eq!(first.events, second.events);
    assert_eq!(first.trace, second.trace);
}

/// Seeds each planted bug may take to be caught, and the mix they are drawn from. The seeds
/// are fixed, so whether a bug is caught is deterministic; the budgets leave room for changes
/// that move the first catch.
fn budget(bug: Bug) -> (Mix, u64) {
    let seeds = match bug {
        Bug::EarlyReply | Bug::SkipDedup => 50,
        // Needs reporters that hold different LSNs when the change is decided: a k-of-n
        // seed, where a backup lags (first caught: 18). In the every mix it took seed 262
        // once suspicions reached a new config-store leader at once: the reports of a
        // change now mostly arrive together, from backups that hold the same records.
        Bug::PromoteLowest => return (Mix::KOfN, 50),
        // Any member that follows a new primary with records above the truncate LSN exposes
        // it; a deposed primary does so in most runs since it stands by and rejoins with its
        // records (first caught: 0; k-of-n seed 232 when deposed primaries reloaded).
        Bug::SkipTruncate => 50,
        // A deposed primary that rejoins from its own segment (first caught: 0).
        Bug::RewindForgets => 50,
        // A promotion while the old primary's lease still runs: a connection reset (a strong
        // sign that lies) on a seed that has them (first caught: 9).
        Bug::IgnoreLeaseOwed => 50,
        // Needs a 1-safe or bounded seed, or a retry answered from the dedup table, while
        // the primary is cut off from a backup that reported.
        Bug::IgnoreLease => 100,
        // Needs a seed with a short tail and a member that comes back after it moved on.
        Bug::TransferShort => 100,
        // Needs a removal asked for while a backup it demotes still acks: k < n, and a
        // partition or pause that heals before the change commits (first caught: 4,883
        // since the clients run the stub's router; 2,724 before).
        Bug::IgnoreViewsAskedFor => return (Mix::KOfN, 5_000),
        // Needs a backup that stops hearing the primary just after a heartbeat that arrived
        // early in its tick, while the primary serves replies that need its lease: the
        // lease checker compares them with each backup's promise. First caught at 160 of
        // the every mix, then at 934 once restarted members that wait asked to join (the
        // seeds' draws moved); crashes at any time reach it sooner (first caught: 154).
        Bug::LeaseMarginOffByOne => return (Mix::AnyTime, 500),
        // Any deposed primary with a reply pending (first caught: 5).
        Bug::AbandonedSent => 100,
        // Any bounded seed whose backups fall behind (first caught: 4).
        Bug::IgnoreBound => 50,
        // The role rule's own assertion (a restarted node holds no role until a view leaves
        // it out) catches it as soon as a restarted node is named again (first caught: 10; a
        // long run found it first, at k-of-n seed 3,072).
        Bug::RestartedServes => 50,
        // A deposed primary that stood by through views it did not see (first caught: 0; it
        // took k-of-n seed 12,709 when deposed primaries reloaded).
        Bug::MissedPromotion => 50,
        // A reader's read reaching a backup that applied a write before the primary's
        // heartbeat said it was released, and after its reply reached a client.
        // (first caught: 0).
        Bug::SkipReadIndex => 50,
        // Needs a Redis seed (the model whose clients sit behind a proxy connection) where a
        // unit got no answer before its deadline (first caught: 2).
        Bug::ProxyRetriesUnanswered => 50,
        // Needs a `durable` seed (one 2-safe seed in three) whose backups' logs sync later
        // than they receive (every seed: a sync takes simulated time).
        Bug::DurableBeforeSync => 50,
    };
    (Mix::Every, seeds)
}

/// The model a planted bug is run on: the proxy's only on the Redis model, whose clients are
/// applications behind a proxy connection.
fn model_of(bug: Bug) -> Model {
    match bug {
        Bug::ProxyRetriesUnanswered => Model::Redis,
        _ => Model::DebitCredit,
    }
}

/// The first seed of `mix` in `0..seeds` that catches `bug`.
fn first_catch(bug: Bug, mix: Mix, seeds: u64) -> Option<u64> {
    first_catch_in(bug, mix, seeds, 1)
}

/// The first seed of `mix` in `0..seeds` that catches `bug` when every node serves in
/// `groups` groups.
fn first_catch_in(bug: Bug, mix: Mix, seeds: u64, groups: u32) -> Option<u64> {
    bugs::plant(Some(bug));
    let options = RunOptions {
        mix,
        model: model_of(bug),
        sabotage: None,
        release_unchecked: false,
        groups,
        members: 0,
    };
    let caught = (0..seeds).find(|&seed| run_cluster_with(seed, TICKS, options).failure.is_some());
    bugs::plant(None);
    caught
}

/// The failure the first catching seed of `bug` reports.
fn first_failure(bug: Bug, seeds: u64) -> String {
    bugs::plant(Some(bug));
    let failure = (0..seeds).find_map(|seed| run_cluster_mixed(seed, TICKS, Mix::Every).failure);
    bugs::plant(None);
    failure.unwrap_or_else(|| panic!("{} survived {seeds} seeds", bug.name()))
}

#[test]
fn a_command_a_proxy_sends_again_after_its_deadline_is_caught() {
    bugs::plant(Some(Bug::ProxyRetriesUnanswered));
    let failure = (0..50).find_map(|seed| run_redis(seed, Mix::Every, None).failure);
    bugs::plant(None);
    let failure = failure.expect("proxy-retries-unanswered survived 50 Redis seeds");
    assert!(failure.contains("a command sent twice"), "{failure}");
}

#[test]
fn a_backup_read_that_misses_an_acknowledged_write_is_caught() {
    let stale = first_failure(Bug::SkipReadIndex, 50);
    assert!(stale.contains("linearizable read"), "{stale}");
}

#[test]
fn the_release_rule_and_the_bound_are_checked_against_what_backups_really_hold() {
    // A reply released before its backups had the record is caught as it leaves, not only
    // when a failover loses it.
    let early = first_failure(Bug::EarlyReply, 50);
    assert!(early.contains("released a reply at LSN"), "{early}");
    let unbounded = first_failure(Bug::IgnoreBound, 50);
    assert!(unbounded.contains("under bounded:"), "{unbounded}");
    // A `durable` reply released before the backups' logs synced it is caught against what
    // each log reported synced.
    let unsynced = first_failure(Bug::DurableBeforeSync, 50);
    assert!(unsynced.contains("had synced to their logs"), "{unsynced}");
}

#[test]
fn every_planted_bug_is_caught_within_its_budget() {
    for bug in Bug::ALL {
        let (mix, seeds) = budget(bug);
        let caught = first_catch(bug, mix, seeds);
        assert!(caught.is_some(), "{} survived {seeds} seeds", bug.name());
    }
}

/// Each checker the planted bugs do not reach fails on some seed of a sabotaged world,
/// with its own message.
#[test]
fn each_sabotage_is_caught_by_its_checker() {
    bugs::plant(None);
    // A client follows a deposed primary only until it sees the new view (the stub's router
    // refuses an older view's primary), so the stale primary's answers reach a client that
    // later sees lower LSNs more rarely: first at seed 520.
    let cases = [
        (ClusterSabotage::ForgeBatch, "checksum", 300),
        (ClusterSabotage::ForgeBalances, "consistency check", 300),
        (ClusterSabotage::IgnoreDepose, "both released replies", 300),
        (ClusterSabotage::IgnoreDepose, "after LSN", 600),
    ];
    for (sabotage, checker, seeds) in cases {
        let caught = (0..seeds).any(|seed| {
            run_cluster_sabotaged(seed, TICKS, Mix::Every, Some(sabotage))
                .failure
                .is_some_and(|failure| failure.contains(checker))
        });
        assert!(
            caught,
            "no seed of {sabotage:?} tripped the checker '{checker}'"
        );
    }
}

/// Runs seed `seed` of `mix` on the Redis model.
fn run_redis(seed: u64, mix: Mix, sabotage: Option<ClusterSabotage>) -> ClusterReport {
    let options = RunOptions {
        mix,
        model: Model::Redis,
        sabotage,
        release_unchecked: false,
        groups: 1,
        members: 0,
    };
    run_cluster_with(seed, TICKS, options)
}

/// Redis seeds in the CI budget (each costs about twice a Debit-Credit seed): the model's
/// commands, blocks and scripts through the same faults, every acknowledged reply checked.
const SEEDS_REDIS: u64 = 200;
const SEEDS_REDIS_ANY_TIME: u64 = 50;

#[test]
fn a_budget_of_redis_seeds_passes_every_checker() {
    bugs::plant(None);
    let (mut replies, mut sweeps, mut views) = (0, 0, 0);
    for (mix, seeds) in [
        (Mix::Every, SEEDS_REDIS),
        (Mix::AnyTime, SEEDS_REDIS_ANY_TIME),
    ] {
        for seed in 0..seeds {
            let report = run_redis(seed, mix, None);
            assert!(
                report.failure.is_none(),
                "Redis {mix:?} seed {seed} ({}) failed: {}\n{}",
                report.faults,
                report.failure.unwrap_or_default(),
                report.trace.join("\n")
            );
            replies += report.replies_checked;
            sweeps += report.sweeps;
            views += report.views;
        }
    }
    // Found past the budget (`durable`): every node lost power before any record reached a
    // log, each came back with an empty log, reported nothing, and the group waited for
    // good. An empty log now rebuilds the initial load (`tandem_node::rebuild`, scripted in
    // `an_empty_log_rebuilds_the_load_and_a_log_past_a_gap_nothing`).
    for seed in [51502, 52028] {
        let report = run_redis(seed, Mix::Every, None);
        assert!(report.power_losses > 0, "seed {seed} no longer loses power");
        assert!(
            report.failure.is_none(),
            "Redis seed {seed} failed: {}\n{}",
            report.failure.unwrap_or_default(),
            report.trace.join("\n")
        );
    }
    // 53913 (found past the budget): the simulator's log took a primary's order ahead of
    // one that waited for the sync under way (the runtime's queue keeps them in order), and
    // the log's check that it is fed in order panicked.
    // 57157 (found past the budget, `durable`, two power losses): a node whose log ended in a
    // state transfer's image reported the view of the batches before it; promoted from that
    // report, it made another member keep a record the image's history had discarded, and
    // the replicas diverged. Image chunks now carry their view (scripted in tandem-node's
    // `a_restart_reports_the_view_of_the_image_it_installed_last`).
    // 64195 (found past the budget with preallocated log segments, which are on by default
    // since): the simulated disk appended over zeros a recovery's cut had kept as a file's
    // bytes, and an entry synced before read back corrupt (`SimDisk::truncate`; tandem-wal's
    // `a_cut_into_preallocated_zeros_keeps_them_on_the_simulated_disk_as_on_the_real_one`).
    for seed in [53913, 57157, 64195] {
        let report = run_redis(seed, Mix::Every, None);
        assert!(
            report.failure.is_none(),
            "Redis seed {seed} failed: {}\n{}",
            report.failure.unwrap_or_default(),
            report.trace.join("\n")
        );
    }
    // Found past the budget at 2,000 ticks. 1201043 (k-of-n): a stub's retry of a script
    // the time limit had stopped was answered with that run's failure (it does not run
    // again), and the checker judged the answer at the retry's place in the history, where
    // the script would have failed otherwise; a repeated failure now carries its run's LSN
    // and time. 1105320 (any-time): a proxied client's retry was told its reply was not
    // kept, and the simulator's proxy loop took the message for a RESP reply; the proxy's
    // `finish_answered` now reads a status for both. 1226130 (any-time) and 1226528
    // (k-of-n): a primary's log failed, the node was deposed and rewound in memory (a failed
    // log rewinds nothing), then followed the new primary; restarted, it replayed the old
    // view's records from its log, and the checker's ghost of that log, taken from the role
    // it held at the crash, was the new view's. A failed log's ghost now follows its role
    // only while the role goes on from it, not past a rewind. 1227730 (k-of-n) holds the
    // other side: a backup's log failed with records received but not yet applied, which
    // the ghost taken when it failed lacked. 1226396 (every, `durable`): as 1229786 in
    // `FOUND_BEYOND_THE_BUDGET`, the simulated operator restarted a primary with a failed log
    // whose one backup was itself restarted, and the view's records were lost with its memory;
    // the operator now waits. 1229989 (k-of-n): two primaries held the same bytes at the same
    // LSN by different histories (a retried call run again at another time), and a member
    // installing one's state transfer was given the other's ghost; transfers are now told
    // apart by their view. 1301508 (any-time, `durable:2`): the coordinator left out a
    // primary's only backup, restarted, which held what the primary had released; a spare
    // whose log stopped short of it was promoted when the primary was cut off, and an
    // acknowledged commit was lost. That view now says its primary may be the only holder
    // of what it released, and no spare takes its place (scripted in tandem-cluster's
    // `a_spare_does_not_replace_a_primary_that_left_its_restarted_backups_out`).
    for (seed, mix) in [
        (1_301_508, Mix::AnyTime),
        (1_226_396, Mix::Every),
        (1_229_989, Mix::KOfN),
        (1_201_043, Mix::KOfN),
        (1_105_320, Mix::AnyTime),
        (1_226_130, Mix::AnyTime),
        (1_226_528, Mix::KOfN),
        (1_227_730, Mix::KOfN),
    ] {
        let options = RunOptions {
            mix,
            model: Model::Redis,
            sabotage: None,
            release_unchecked: false,
            groups: 1,
            members: 0,
        };
        let report = run_cluster_with(seed, 2_000, options);
        assert!(
            report.failure.is_none(),
            "Redis {mix:?} seed {seed} failed: {}\n{}",
            report.failure.unwrap_or_default(),
            report.trace.join("\n")
        );
    }
    // The budget checks what it claims: most replies, sweeps replicated, failovers.
    let seeds = SEEDS_REDIS + SEEDS_REDIS_ANY_TIME;
    assert!(replies > 1_000 * seeds, "only {replies} replies checked");
    assert!(sweeps > 5 * seeds, "only {sweeps} sweeps");
    assert!(views > 3 * seeds, "only {views} views over {seeds} seeds");
}

#[test]
fn the_same_redis_seed_gives_the_same_run() {
    bugs::plant(None);
    let first = run_redis(11, Mix::Every, None);
    let second = run_redis(11, Mix::Every, None);
    assert_eq!(first.calls, second.calls);
    assert_eq!(first.commits, second.commits);
    assert_eq!(first.sweeps, second.sweeps);
    assert_eq!(first.replies_checked, second.replies_checked);
    assert_eq!(first.events, second.events);
    assert_eq!(first.trace, second.trace);
}

/// Redis seed 36, the first the reply checker failed: APPEND on a key whose time had passed
/// gave the key a second entry, and the final database held a value no replay of its
/// history makes. (The workload has changed since, so the seed may no longer reach that
/// path: `tandem_redis`'s `append_and_setrange_on_an_expired_key_replace_its_entry` holds
/// the line.)
#[test]
fn redis_seed_36_ends_with_the_database_its_history_makes() {
    bugs::plant(None);
    let report = run_redis(36, Mix::Every, None);
    assert!(
        report.failure.is_none(),
        "Redis seed 36 failed: {}\n{}",
        report.failure.unwrap_or_default(),
        report.trace.join("\n")
    );
}

/// The reply checker has teeth: a reply changed on its way to the client, and a call
/// applied twice in one record (which no dedup table and no exactly-once checker sees), each
/// fail a seed with the checker's own message, naming the call and both replies.
#[test]
fn the_reply_checker_catches_a_changed_reply_and_a_call_applied_twice() {
    bugs::plant(None);
    let cases = [
        (ClusterSabotage::AlterReply, "the reference", 20),
        (ClusterSabotage::IncrementTwice, "the reference", 20),
    ];
    for (sabotage, checker, seeds) in cases {
        let failure = (0..seeds)
            .find_map(|seed| run_redis(seed, Mix::Every, Some(sabotage)).failure)
            .unwrap_or_else(|| panic!("no seed of {sabotage:?} failed"));
        assert!(failure.contains(checker), "{sabotage:?}: {failure}");
    }
}

/// The planted `skip-dedup` (a retried call runs again) on the Redis model: caught by the
/// exactly-once checker when the first commit is in the node's records, by the reply checker
/// when it reached the node inside a state transfer (the retried INCR's reply, or the final
/// database, disagree with a history that applies each call once).
#[test]
fn skip_dedup_is_caught_on_the_redis_model() {
    bugs::plant(Some(Bug::SkipDedup));
    let failures: Vec<String> = (0..50)
        .filter_map(|seed| run_redis(seed, Mix::Every, None).failure)
        .collect();
    bugs::plant(None);
    assert!(!failures.is_empty(), "skip-dedup survived 50 Redis seeds");
}

/// The ghost histories that the reply checker reads are checked as they travel, and those
/// checks catch planted bugs of their own: a member that kept records a truncation should
/// have discarded applies the new primary's records on top of them, and a state transfer
/// that misses pages leaves bytes no primary held at its LSN.
#[test]
fn the_redis_history_checks_catch_planted_bugs() {
    // A seed may catch the bug first with another checker (since the nodes log to disks
    // and restarted ones rejoin from their logs, transfer-short's first catch, Redis seed 1,
    // is a rejoined member whose short transfers are refused for good, and skip-truncate's
    // the transfer checker): the ghost checker must catch it on some seed of the budget.
    // Skip-truncate's first catch moved from below 30 to seed 39 once the detector
    // remembered the silences peers came back from (fewer view changes after a pause).
    let cases = [
        (
            Bug::SkipTruncate,
            "on top of a history they do not continue",
            60,
        ),
        (Bug::TransferShort, "holds bytes no primary held", 30),
    ];
    for (bug, checker, seeds) in cases {
        bugs::plant(Some(bug));
        let caught = (0..seeds).find(|&seed| {
            run_redis(seed, Mix::Every, None)
                .failure
                .is_some_and(|failure| failure.contains(checker))
        });
        bugs::plant(None);
        assert!(
            caught.is_some(),
            "{}: no seed of {seeds} failed with \"{checker}\"",
            bug.name()
        );
    }
}

/// The lost-commit checker has teeth across a power loss: with the planted
/// `durable-before-sync` (a backup's received LSN counted as synced) and the release checker
/// standing aside (it catches the bug as the reply leaves, at once: seed 7, a power-loss
/// seed, at tick 2), a `durable` reply whose record lived only in memory is lost when every
/// node loses power, and the check that every acknowledged commit survived catches it.
/// Caught at seed 8 (19 of seeds 0..1500 catch it: the reply must leave in the tick or so
/// before its record's sync, just before the power goes). Seed 65 caught it until spares
/// became backups only once their logs synced every released record, seed 232 until a
/// promoted primary counted released only what its promotion said.
#[test]
fn a_durable_reply_a_power_loss_took_is_caught() {
    bugs::plant(Some(Bug::DurableBeforeSync));
    let options = RunOptions {
        mix: Mix::Every,
        model: Model::DebitCredit,
        sabotage: None,
        release_unchecked: true,
        groups: 1,
        members: 0,
    };
    let report = run_cluster_with(8, TICKS, options);
    bugs::plant(None);
    assert!(report.power_losses > 0, "seed 8 no longer loses power");
    let failure = report
        .failure
        .expect("durable-before-sync survived a power loss at seed 8");
    assert!(failure.contains("lost an acknowledged commit"), "{failure}");
    // Without the bug, the same seed keeps every acknowledged commit.
    bugs::plant(None);
    let report = run_cluster_with(8, TICKS, options);
    assert!(
        report.failure.is_none(),
        "{}",
        report.failure.unwrap_or_default()
    );
}

/// Runs seeds `0..seeds` of `model` with every node serving in `groups` groups, failing on
/// the first that fails a checker; returns the views reached (summed over the groups) and
/// the crashes of a node that led several groups at once.
fn run_groups(model: Model, groups: u32, seeds: u64) -> (u64, u64) {
    let options = RunOptions {
        mix: Mix::Every,
        model,
        sabotage: None,
        release_unchecked: false,
        groups,
        members: 0,
    };
    let (_, views, together) = run_seeds(options, seeds);
    (views, together)
}

/// Four groups over (mostly) three nodes: the first node leads two of them, and its crash
/// fails both over at once; every checker holds in every group, on both models.
#[test]
fn nodes_serving_several_groups_pass_every_checker_and_fail_over_together() {
    let seeds = 150;
    let (views, together) = run_groups(Model::DebitCredit, 4, seeds);
    assert!(
        views > 4 * seeds + seeds / 2,
        "few failovers: {views} views over {seeds} seeds of 4 groups"
    );
    assert!(
        together > 0,
        "no crash took down a node that led two groups"
    );
    run_groups(Model::Redis, 2, 20);
}

/// The checkers keep their teeth when every node serves in several groups: planted bugs
/// and a forged batch are caught within the budgets of a one-group run.
#[test]
fn planted_bugs_are_caught_when_nodes_serve_several_groups() {
    let bugs = [
        Bug::EarlyReply,
        Bug::SkipDedup,
        Bug::SkipTruncate,
        Bug::IgnoreBound,
        Bug::DurableBeforeSync,
        Bug::SkipReadIndex,
        Bug::RestartedServes,
    ];
    for bug in bugs {
        let (mix, seeds) = budget(bug);
        let caught = first_catch_in(bug, mix, seeds, 2);
        assert!(
            caught.is_some(),
            "{} survived {seeds} seeds of 2 groups",
            bug.name()
        );
    }
    let options = RunOptions {
        mix: Mix::Every,
        model: Model::DebitCredit,
        sabotage: Some(ClusterSabotage::ForgeBatch),
        release_unchecked: false,
        groups: 2,
        members: 0,
    };
    let caught = (0..300).any(|seed| {
        run_cluster_with(seed, TICKS, options)
            .failure
            .is_some_and(|failure| failure.contains("checksum"))
    });
    assert!(
        caught,
        "no seed of 2 groups caught a forged batch by its checksum"
    );
}

/// Groups of three members over four nodes (five groups): the config store's leader
/// coordinates the view changes of groups it does not serve in. Each seed below waited for
/// good, or kept a spare or a lagging backup, while the leader's core dropped the suspicions,
/// reports and catch-ups of those groups; then a budget of such seeds.
#[test]
fn groups_the_leader_does_not_serve_in_change_views_too() {
    let found = [
        (
            4_000_006,
            Mix::AnyTime,
            "group 3 waited in view 1 after its primary restarted",
        ),
        (
            4_000_000,
            Mix::KOfN,
            "a caught-up spare of an idle group stayed a spare",
        ),
        (4_000_003, Mix::Every, "a lagging backup was never removed"),
    ];
    bugs::plant(None);
    for (seed, mix, what) in found {
        let options = RunOptions {
            mix,
            model: Model::DebitCredit,
            sabotage: None,
            release_unchecked: false,
            groups: 5,
            members: 3,
        };
        let report = run_cluster_with(seed, 2_000, options);
        assert!(
            report.failure.is_none(),
            "seed {seed} ({what}) failed: {}\n{}",
            report.failure.unwrap_or_default(),
            report.trace.join("\n")
        );
    }
    let options = RunOptions {
        mix: Mix::Every,
        model: Model::DebitCredit,
        sabotage: None,
        release_unchecked: false,
        groups: 5,
        members: 3,
    };
    let (_, views, _) = run_seeds(options, 60);
    assert!(
        views > 5 * 60,
        "few view changes: {views} over 60 seeds of 5 groups"
    );
}
