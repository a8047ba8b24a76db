//! Out-of-process cluster tests: three `ebb serve` processes on loopback
//! ports, killed (SIGKILL) and restarted, every loop bounded in count and
//! time. See docs/cluster.md and docs/testing.md.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Server, call, wait_until};
use serde_json::{Value, json};

/// How long a test waits for a cluster to elect, converge or answer.
const WAIT: Duration = Duration::from_secs(30);

/// Free loopback ports for the cluster listeners, taken below the kernel's
/// ephemeral range. A port from that range (what binding port 0 gives)
/// can be taken between the check and the member's own bind, or while a
/// killed member is down, by any connection's source port or any other
/// test's `127.0.0.1:0` listener: a cold CI run once failed a member's
/// start with "Address already in use" that way. Below the range only an
/// explicit bind takes a port; the tests of this process share one
/// counter, started at an offset that differs between processes, and each
/// port is checked free by binding it.
fn free_ports(count: usize) -> Vec<u16> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // The ephemeral range's start (Linux: 32768 unless configured).
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(32_768);
    const LOWEST: u64 = 10_000;
    assert!(
        ephemeral > LOWEST + 1_000,
        "the ephemeral port range starts at {ephemeral}: no room below it for the cluster tests"
    );
    let span = ephemeral - LOWEST;
    let offset = u64::from(std::process::id()) * 7_919 % span;
    let mut ports = Vec::with_capacity(count);
    for _ in 0..span {
        if ports.len() == count {
            break;
        }
        let port = (LOWEST + (offset + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports.push(port);
        }
    }
    assert_eq!(
        ports.len(),
        count,
        "no {count} free ports below {ephemeral}"
    );
    ports
}

/// A local cluster: its members' arguments and the running processes.
struct Cluster {
    dirs: Vec<PathBuf>,
    args: Vec<Vec<String>>,
    nodes: Vec<Option<Server>>,
    _root: tempfile::TempDir,
}

impl Cluster {
    /// Start `count` members with `extra` flags each.
    fn start(count: usize, extra: &[&str]) -> Cluster {
        let root = tempfile::tempdir().unwrap();
        let ports = free_ports(count);
        let peers: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, port)| format!("{}=127.0.0.1:{port}", i + 1))
            .collect();
        let peers = peers.join(",");
        let mut cluster = Cluster {
            dirs: Vec::new(),
            args: Vec::new(),
            nodes: Vec::new(),
            _root: root,
        };
        for (i, port) in ports.iter().enumerate() {
            let dir = cluster._root.path().join(format!("node{}", i + 1));
            let mut args: Vec<String> = [
                "--node-id",
                &(i + 1).to_string(),
                "--cluster-listen",
                &format!("127.0.0.1:{port}"),
                "--peers",
                &peers,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(extra.iter().map(|s| s.to_string()));
            cluster.nodes.push(Some(launch(&dir, &args)));
            cluster.dirs.push(dir);
            cluster.args.push(args);
        }
        cluster.wait_for_leaders();
        cluster
    }

    /// URL of member `i` (0-based), which must be up.
    fn url(&self, i: usize) -> &str {
        &self.nodes[i].as_ref().expect("the member is up").url
    }

    /// Indexes of the members that are up.
    fn up(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|i| self.nodes[*i].is_some())
            .collect()
    }

    fn kill(&mut self, i: usize) {
        // Dropping the server kills it with SIGKILL.
        self.nodes[i] = None;
    }

    fn restart(&mut self, i: usize) {
        self.nodes[i] = Some(launch(&self.dirs[i], &self.args[i]));
    }

    /// `GET /v1/cluster` from member `i`.
    fn status(&self, i: usize) -> Value {
        let answer = call("GET", &format!("{}/v1/cluster", self.url(i)), &[], None);
        assert_eq!(answer.status, 200, "{}", answer.text());
        answer.json()
    }

    /// Wait until every up member sees a leader that is up for every
    /// fragment it holds and for the metadata group.
    fn wait_for_leaders(&self) {
        let up: BTreeSet<u64> = self.up().iter().map(|i| *i as u64 + 1).collect();
        let live = |group: &Value| group["leader"].as_u64().is_some_and(|l| up.contains(&l));
        wait_until(WAIT, "a live leader for every group", || {
            self.up().iter().all(|i| {
                let status = self.status(*i);
                live(&status["metadata"])
                    && status["fragments"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|f| f.get("leader").is_some())
                        .all(live)
            })
        });
    }

    /// The member (0-based) leading the most fragments, as member `from` sees it.
    fn busiest_leader(&self, from: usize) -> usize {
        let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
        for fragment in self.status(from)["fragments"].as_array().unwrap() {
            if let Some(leader) = fragment["leader"].as_u64() {
                *counts.entry(leader).or_default() += 1;
            }
        }
        let (leader, _) = counts.into_iter().max_by_key(|(_, n)| *n).unwrap();
        leader as usize - 1
    }
}

fn launch(dir: &Path, args: &[String]) -> Server {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start(dir, &args)
}

fn put(url: &str, table: &str, key: &str, value: &str) -> common::Answer {
    call(
        "PUT",
        &format!("{url}/v1/tables/{table}/keys/{key}?durability=wal"),
        &[],
        Some(value.as_bytes()),
    )
}

/// A put that may meet a member being killed: its status, or `None` when
/// the connection failed (not acknowledged either way unless 200).
fn try_put(url: &str, table: &str, key: &str, value: &str) -> Option<u16> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(15)))
        .build()
        .into();
    agent
        .put(format!("{url}/v1/tables/{table}/keys/{key}?durability=wal"))
        .send(value.as_bytes())
        .ok()
        .map(|response| response.status().as_u16())
}

fn get(url: &str, table: &str, key: &str) -> common::Answer {
    call(
        "GET",
        &format!("{url}/v1/tables/{table}/keys/{key}"),
        &[],
        None,
    )
}

/// The rows `sql` answers on member `url`, which must answer 200.
fn sql_rows(url: &str, sql: &str) -> Value {
    let answer = sql_call(url, sql);
    assert_eq!(answer.status, 200, "{sql}: {}", answer.text());
    answer.json()["rows"].clone()
}

fn sql_call(url: &str, sql: &str) -> common::Answer {
    sql_post(url, &serde_json::json!({ "sql": sql }))
}

/// `POST /v1/sql` with `body` on member `url`.
fn sql_post(url: &str, body: &Value) -> common::Answer {
    call(
        "POST",
        &format!("{url}/v1/sql"),
        &[("content-type", "application/json")],
        Some(body.to_string().as_bytes()),
    )
}

/// The names of the plugins member `url` lists.
fn plugin_names(url: &str) -> Vec<String> {
    let answer = call("GET", &format!("{url}/v1/plugins"), &[], None);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let mut names: Vec<String> = answer.json()["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// Every key of `table` with its version, as member `url` holds them.
fn keys_and_versions(url: &str, table: &str) -> BTreeMap<String, i64> {
    let body = serde_json::json!({
        "sql": format!("SELECT key, _version_ms FROM {table}"),
        "page_size": 10000,
    });
    let answer = sql_post(url, &body);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let json = answer.json();
    assert!(json["cursor"].is_null(), "one page holds the table");
    json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row[0].as_str().unwrap().to_string(),
                row[1].as_i64().unwrap(),
            )
        })
        .collect()
}

const TABLES: [&str; 3] = ["alpha", "beta", "gamma"];

/// Entries a group's log may hold with `--raft-snapshot-every 50`: 50
/// since the snapshot, 5 kept behind it, a purge run of 50 not yet due,
/// and what arrives while a snapshot is built.
const LOG_BOUND: u64 = 200;

/// Assert every group on every up member holds at most [`LOG_BOUND`] log
/// entries, and that some group went far past it (so the bound is not
/// met by writing little). Purges follow snapshots asynchronously: wait.
fn assert_logs_bounded(cluster: &Cluster) {
    let mut longest = 0;
    let started = Instant::now();
    loop {
        // Per member, the groups whose log holds more than the bound.
        let mut over = Vec::new();
        for i in cluster.up() {
            for f in cluster.status(i)["fragments"].as_array().unwrap() {
                let Some(last) = f["last_log_index"].as_u64() else {
                    continue;
                };
                longest = longest.max(last);
                if last - f["purged_index"].as_u64().unwrap() > LOG_BOUND {
                    over.push(format!("member {}: {f}", i + 1));
                }
            }
        }
        if over.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "logs not purged behind a snapshot within {WAIT:?}:\n{}",
            over.join("\n")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        longest > 2 * LOG_BOUND,
        "no group wrote past twice the bound ({longest} entries): the check proves nothing"
    );
}

#[test]
fn acknowledged_writes_survive_five_leader_kills() {
    // Four fragments and a snapshot every 50 entries: kills land while
    // groups snapshot and purge, and restarted members resume from their
    // durable positions or from a leader's snapshot.
    let mut cluster = Cluster::start(3, &["--fragments", "4", "--raft-snapshot-every", "50"]);
    let acked: Arc<Mutex<BTreeMap<(String, String), String>>> = Arc::default();
    let running = Arc::new(AtomicBool::new(true));
    let urls: Arc<Mutex<Vec<Option<String>>>> = Arc::new(Mutex::new(
        (0..3).map(|i| Some(cluster.url(i).to_string())).collect(),
    ));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (acked, running, urls) = (acked.clone(), running.clone(), urls.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                let started = Instant::now();
                while running.load(Ordering::Relaxed)
                    && started.elapsed() < Duration::from_secs(120)
                {
                    let url = {
                        let urls = urls.lock().unwrap();
                        let up: Vec<&String> = urls.iter().flatten().collect();
                        up[(n as usize) % up.len()].clone()
                    };
                    let table = TABLES[(n as usize + w) % TABLES.len()];
                    let key = format!("w{w}-{n}");
                    let value = format!("v{n}");
                    match try_put(&url, table, &key, &value) {
                        Some(200) => {
                            acked
                                .lock()
                                .unwrap()
                                .insert((table.to_string(), key), value);
                        }
                        // Not acknowledged: no leader yet, or a member
                        // killed mid-request.
                        Some(503) | None => {}
                        Some(other) => panic!("{table}/{key}: unexpected status {other}"),
                    }
                    n += 1;
                }
            })
        })
        .collect();
    for cycle in 0..5 {
        std::thread::sleep(Duration::from_millis(500));
        let up = cluster.up()[0];
        let victim = cluster.busiest_leader(up);
        urls.lock().unwrap()[victim] = None;
        cluster.kill(victim);
        // The others take over the victim's fragments.
        cluster.wait_for_leaders();
        std::thread::sleep(Duration::from_millis(300));
        cluster.restart(victim);
        urls.lock().unwrap()[victim] = Some(cluster.url(victim).to_string());
        cluster.wait_for_leaders();
        eprintln!("cycle {cycle}: killed and restarted node {}", victim + 1);
    }
    running.store(false, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 100,
        "only {} writes acknowledged",
        acked.len()
    );
    // Every acknowledged write is readable from every member.
    for i in 0..3 {
        for ((table, key), value) in &acked {
            let answer = get(cluster.url(i), table, key);
            assert_eq!(
                answer.status,
                200,
                "node {} {table}/{key}: {}",
                i + 1,
                answer.text()
            );
            assert_eq!(answer.text(), *value, "node {} {table}/{key}", i + 1);
        }
    }
    // Every replica holds the same keys and versions.
    for table in TABLES {
        let first = keys_and_versions(cluster.url(0), table);
        for i in 1..3 {
            assert_eq!(
                keys_and_versions(cluster.url(i), table),
                first,
                "node {} {table}",
                i + 1
            );
        }
    }
    assert_logs_bounded(&cluster);
}

/// Per fragment, as member `from` sees it: (leader, preferred leader).
fn leaders_and_preferred(cluster: &Cluster, from: usize) -> Vec<(Option<u64>, u64)> {
    cluster.status(from)["fragments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["leader"].as_u64(),
                f["preferred_leader"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn leadership_returns_to_a_restarted_member_and_stays_spread() {
    let mut cluster = Cluster::start(3, &[]);
    // The preferred leaders are spread evenly (counts differ by at most
    // one), and each fragment is led by its own, the member that formed it.
    let at_preferred = |cluster: &Cluster, from: usize| {
        leaders_and_preferred(cluster, from)
            .iter()
            .all(|(leader, preferred)| *leader == Some(*preferred))
    };
    wait_until(WAIT, "every fragment led by its preferred leader", || {
        at_preferred(&cluster, 0)
    });
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for (_, preferred) in leaders_and_preferred(&cluster, 0) {
        *counts.entry(preferred).or_default() += 1;
    }
    let (min, max) = (counts.values().min(), counts.values().max());
    assert!(
        counts.len() == 3 && max.unwrap() - min.unwrap() <= 1,
        "{counts:?}"
    );
    // Member 1 dies: the others lead its fragments meanwhile.
    let victim = 0;
    cluster.kill(victim);
    cluster.wait_for_leaders();
    let while_away = leaders_and_preferred(&cluster, 1);
    assert!(
        while_away.iter().all(|(leader, _)| *leader != Some(1)),
        "{while_away:?}"
    );
    for (i, table) in ["t1", "t2", "t3"].iter().enumerate() {
        assert_eq!(
            put(cluster.url(1), table, &format!("away{i}"), "v").status,
            200
        );
    }
    // Back, it catches up and takes its fragments again, one at a time,
    // while writes go on being answered (a write in flight at a hand-over
    // may answer 503 `interrupted`, as at any change of leader).
    cluster.restart(victim);
    cluster.wait_for_leaders();
    let started = Instant::now();
    let (mut n, mut interrupted) = (0, 0);
    while !(at_preferred(&cluster, 0) && at_preferred(&cluster, 2)) {
        assert!(
            started.elapsed() < WAIT,
            "leadership did not return: {:?}",
            leaders_and_preferred(&cluster, 0)
        );
        let table = ["t1", "t2", "t3"][n % 3];
        let answer = put(cluster.url(n % 3), table, &format!("back{n}"), "v");
        match answer.status {
            200 => {}
            503 if answer.text().contains("interrupted") => interrupted += 1,
            other => panic!("{other}: {}", answer.text()),
        }
        n += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "leadership back after {:.1} s ({n} writes meanwhile, {interrupted} interrupted)",
        started.elapsed().as_secs_f64()
    );
    assert!(
        interrupted * 10 <= n,
        "{interrupted} of {n} writes interrupted"
    );
    for i in 0..3 {
        assert_eq!(get(cluster.url(i), "t1", "away0").text(), "v");
    }
}

/// How many fragments member `member` (1-based) leads, as member `from`
/// (0-based) sees it.
fn led_by(cluster: &Cluster, from: usize, member: u64) -> usize {
    leaders_and_preferred(cluster, from)
        .iter()
        .filter(|(leader, _)| *leader == Some(member))
        .count()
}

#[test]
fn a_clean_stop_hands_leadership_away_and_a_stopping_member_is_handed_none() {
    let mut cluster = Cluster::start(3, &[]);
    // Member 1 dies and comes back: it leads nothing at first, and the
    // others would hand it its preferred fragments once it has been
    // caught up for the balancer's hold (3 s).
    cluster.kill(0);
    cluster.wait_for_leaders();
    cluster.restart(0);
    cluster.wait_for_leaders();
    assert_eq!(led_by(&cluster, 1, 1), 0, "member 1 leads nothing yet");
    // Stopped cleanly while it leads nothing, it has nothing to hand away;
    // it tells the others it is stopping, so they hand it nothing for the
    // balancer's cooldown (30 s), even when it is back at once.
    let member_1 = cluster.nodes[0].take().unwrap();
    assert_eq!(member_1.stop(), 0, "a clean stop");
    cluster.restart(0);
    cluster.wait_for_leaders();
    let back = Instant::now();
    while back.elapsed() < Duration::from_secs(8) {
        assert_eq!(
            led_by(&cluster, 1, 1),
            0,
            "member 1 was handed leadership {:.1} s after it came back from a clean stop",
            back.elapsed().as_secs_f64()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // A member that leads stops cleanly: it hands its groups over before
    // it exits, so the others lead them at once, without waiting for an
    // election (the lease and an election timeout, 1.8 s at the least).
    wait_until(WAIT, "member 3 leading a fragment", || {
        led_by(&cluster, 1, 3) > 0
    });
    let member_3 = cluster.nodes[2].take().unwrap();
    assert_eq!(member_3.stop(), 0, "a clean stop");
    let exited = Instant::now();
    wait_until(
        Duration::from_millis(1500),
        "every fragment led by a member that is up",
        || {
            leaders_and_preferred(&cluster, 1)
                .iter()
                .all(|(leader, _)| matches!(leader, Some(1) | Some(2)))
        },
    );
    eprintln!(
        "the others led member 3's fragments {} ms after it exited",
        exited.elapsed().as_millis()
    );
    for (i, table) in ["t1", "t2", "t3", "t4"].iter().enumerate() {
        let answer = put(cluster.url(1), table, &format!("after{i}"), "v");
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
}

/// Writers through the members at `urls` (one each, in turn), each on a
/// connection of its own, until `running` is cleared: writes answered 200
/// counted in the first counter, 503 `interrupted` (in flight at a change
/// of leader) in the second; anything else panics.
fn writers_through(
    urls: Vec<String>,
    running: &Arc<AtomicBool>,
    counts: &Arc<(AtomicU64, AtomicU64)>,
) -> Vec<std::thread::JoinHandle<()>> {
    urls.into_iter()
        .enumerate()
        .map(|(w, url)| {
            let (running, counts) = (running.clone(), counts.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(15)))
                    .build()
                    .into();
                let mut n = 0u64;
                while running.load(Ordering::Relaxed) {
                    let mut response = agent
                        .put(format!("{url}/v1/tables/t/keys/w{w}-{n}?durability=wal"))
                        .send("v")
                        .expect("a write answered");
                    let text = response.body_mut().read_to_string().unwrap_or_default();
                    match response.status().as_u16() {
                        200 => counts.0.fetch_add(1, Ordering::Relaxed),
                        503 if text.contains("interrupted") => {
                            counts.1.fetch_add(1, Ordering::Relaxed)
                        }
                        other => panic!("{other}: {text}"),
                    };
                    n += 1;
                }
            })
        })
        .collect()
}

/// Run writers through `urls` (`writers_through`) until `done` holds
/// (waited for up to [`WAIT`]), at most one in twenty writes interrupted;
/// returns how long that took and the writes acknowledged and interrupted.
fn write_until(
    urls: Vec<String>,
    what: &str,
    mut done: impl FnMut() -> bool,
) -> (Duration, u64, u64) {
    let running = Arc::new(AtomicBool::new(true));
    let counts = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let writers = writers_through(urls, &running, &counts);
    let started = Instant::now();
    wait_until(WAIT, what, &mut done);
    let took = started.elapsed();
    running.store(false, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    let (acked, interrupted) = (
        counts.0.load(Ordering::Relaxed),
        counts.1.load(Ordering::Relaxed),
    );
    assert!(
        interrupted * 20 <= acked,
        "{interrupted} of {acked} writes interrupted"
    );
    (took, acked, interrupted)
}

#[test]
fn leadership_follows_writes_through_one_member_and_spreads_again_with_them() {
    let cluster = Cluster::start(3, &[]);
    let at_preferred = |cluster: &Cluster| {
        leaders_and_preferred(cluster, 0)
            .iter()
            .all(|(leader, preferred)| *leader == Some(*preferred))
    };
    wait_until(WAIT, "every fragment led by its preferred leader", || {
        at_preferred(&cluster)
    });
    assert!(led_by(&cluster, 0, 2) < 4, "member 2 leads its share only");
    // Eight writers through member 2: over the balancer's 100 writes a
    // second per fragment, all through one member, so every fragment's
    // leadership moves to it.
    let (took, acked, interrupted) = write_until(
        vec![cluster.url(1).to_string(); 8],
        "member 2 leading every fragment",
        || led_by(&cluster, 0, 2) == 4,
    );
    eprintln!(
        "every fragment led by member 2 {:.1} s after the writes began ({acked} acknowledged, {interrupted} interrupted)",
        took.as_secs_f64()
    );
    // A pause in the writes moves nothing.
    let paused = Instant::now();
    while paused.elapsed() < Duration::from_secs(8) {
        assert_eq!(led_by(&cluster, 0, 2), 4, "leadership moved in a pause");
        std::thread::sleep(Duration::from_millis(250));
    }
    // Writes through every member: each fragment goes back to its
    // preferred leader.
    let urls: Vec<String> = (0..9).map(|i| cluster.url(i % 3).to_string()).collect();
    let (took, acked, interrupted) =
        write_until(urls, "every fragment back at its preferred leader", || {
            at_preferred(&cluster)
        });
    eprintln!(
        "back at the preferred leaders {:.1} s after writes through every member began ({acked} acknowledged, {interrupted} interrupted)",
        took.as_secs_f64()
    );
    assert_eq!(get(cluster.url(2), "t", "w0-0").text(), "v");
}

#[test]
fn a_member_away_while_the_log_is_purged_catches_up_from_a_snapshot() {
    let mut cluster = Cluster::start(3, &["--fragments", "2", "--raft-snapshot-every", "50"]);
    cluster.kill(2);
    cluster.wait_for_leaders();
    // 1 000 writes over two fragments, while member 3 is away: the
    // leaders purge far past everything member 3 has.
    for k in 0..1000 {
        let answer = put(
            cluster.url(k % 2),
            "t",
            &format!("k{k:04}"),
            &format!("v{k}"),
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    assert_logs_bounded(&cluster);
    let leaders_purged: Vec<u64> = cluster.status(0)["fragments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["purged_index"].as_u64().unwrap())
        .collect();
    assert!(
        leaders_purged.iter().all(|p| *p > 100),
        "{leaders_purged:?}"
    );
    cluster.restart(2);
    cluster.wait_for_leaders();
    // Member 3 installed a snapshot: its own log starts past its old end.
    wait_until(
        WAIT,
        "member 3 to install a snapshot of every fragment",
        || {
            cluster.status(2)["fragments"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["snapshot_index"].as_u64().unwrap() > 100)
        },
    );
    for k in (0..1000).step_by(7) {
        assert_eq!(
            get(cluster.url(2), "t", &format!("k{k:04}")).text(),
            format!("v{k}")
        );
    }
    let first = keys_and_versions(cluster.url(0), "t");
    assert_eq!(first.len(), 1000);
    assert_eq!(keys_and_versions(cluster.url(2), "t"), first);

    // All three killed at once and restarted: each resumes from the
    // position it made durable, and nothing acknowledged is lost.
    for i in 0..3 {
        cluster.kill(i);
    }
    for i in 0..3 {
        cluster.restart(i);
    }
    cluster.wait_for_leaders();
    for i in 0..3 {
        assert_eq!(
            keys_and_versions(cluster.url(i), "t"),
            first,
            "node {}",
            i + 1
        );
    }
    let answer = put(cluster.url(2), "t", "after", "y");
    assert_eq!(answer.status, 200, "{}", answer.text());
}

#[test]
fn two_of_three_down_answers_no_quorum_promptly_serves_bounded_stale_reads_and_loses_nothing() {
    let mut cluster = Cluster::start(3, &[]);
    for k in 0..20 {
        let answer = put(cluster.url(k % 3), "t", &format!("k{k}"), "before");
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    // A linearizable query on member 1 confirms a read index of every
    // fragment (it holds them all): reads allowing staleness can be
    // served from that confirmation while the quorum is gone.
    let confirmed = Instant::now();
    assert_eq!(sql_rows(cluster.url(0), "SELECT count(*) FROM t")[0][0], 20);
    cluster.kill(1);
    cluster.kill(2);
    let started = Instant::now();
    let answer = put(cluster.url(0), "t", "during", "x");
    let waited = started.elapsed();
    assert_eq!(answer.status, 503, "{}", answer.text());
    assert_eq!(answer.code(), "no_quorum", "{}", answer.text());
    assert!(
        answer.json()["error"]["fragment"].is_u64(),
        "{}",
        answer.text()
    );
    assert!(waited < Duration::from_secs(8), "no_quorum took {waited:?}");
    let read = get(cluster.url(0), "t", "k0");
    assert_eq!(
        read.code(),
        "no_quorum",
        "a linearizable read needs a quorum too"
    );
    // A follower read within a generous bound answers from member 1's own
    // replica, and says how old its data may be.
    let stale = call(
        "GET",
        &format!(
            "{}/v1/tables/t/keys/k0?max_staleness_ms=600000",
            cluster.url(0)
        ),
        &[],
        None,
    );
    assert_eq!(stale.status, 200, "{}", stale.text());
    assert_eq!(stale.text(), "before");
    let age: u128 = stale.header("ebb-staleness-ms").unwrap().parse().unwrap();
    assert!(
        age <= confirmed.elapsed().as_millis() + 1,
        "the data's age bound {age} ms is older than the confirmation"
    );
    let counted = sql_post(
        cluster.url(0),
        &serde_json::json!({ "sql": "SELECT count(*) FROM t", "max_staleness_ms": 600000 }),
    );
    assert_eq!(counted.status, 200, "{}", counted.text());
    assert_eq!(counted.json()["rows"][0][0], 20);
    // A bound the confirmation is older than needs the quorum again.
    let too_fresh = call(
        "GET",
        &format!("{}/v1/tables/t/keys/k0?max_staleness_ms=1", cluster.url(0)),
        &[],
        None,
    );
    assert_eq!(too_fresh.code(), "no_quorum", "{}", too_fresh.text());
    let too_old = call(
        "GET",
        &format!(
            "{}/v1/tables/t/keys/k0?max_staleness_ms=86400001",
            cluster.url(0)
        ),
        &[],
        None,
    );
    assert_eq!(too_old.status, 400, "{}", too_old.text());
    cluster.restart(1);
    cluster.restart(2);
    cluster.wait_for_leaders();
    for i in 0..3 {
        for k in 0..20 {
            let answer = get(cluster.url(i), "t", &format!("k{k}"));
            assert_eq!(answer.text(), "before", "node {} k{k}", i + 1);
        }
    }
    let answer = put(cluster.url(2), "t", "after", "y");
    assert_eq!(answer.status, 200, "{}", answer.text());
}

#[test]
fn any_member_serves_writes_reads_sql_and_status() {
    let cluster = Cluster::start(3, &[]);
    for k in 0..30 {
        let answer = put(
            cluster.url(k % 3),
            "t",
            &format!("k{k:02}"),
            &format!("v{k}"),
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    for i in 0..3 {
        assert_eq!(get(cluster.url(i), "t", "k07").text(), "v7");
        assert_eq!(keys_and_versions(cluster.url(i), "t").len(), 30);
        let status = cluster.status(i);
        assert_eq!(status["mode"], "cluster");
        assert_eq!(status["node_id"], i as u64 + 1);
        let members = status["members"].as_array().unwrap();
        assert_eq!(members.len(), 3);
        assert!(
            members.iter().all(|m| m["state"] != "unreachable"),
            "{status}"
        );
        for fragment in status["fragments"].as_array().unwrap() {
            assert_eq!(fragment["replicas"].as_array().unwrap().len(), 3);
            assert!(
                fragment["applied_index"].as_u64().unwrap() >= 1,
                "{fragment}"
            );
        }
    }
    // A binding is checked on the member that receives it: no plugin, no
    // binding.
    let bind = call(
        "PUT",
        &format!("{}/v1/tables/t/expiry-handler", cluster.url(0)),
        &[("content-type", "application/json")],
        Some(br#"{"plugin": "archive", "function": "copy"}"#),
    );
    assert_eq!(bind.status, 404, "{}", bind.text());
    // Deletes go through the leader too; a second delete finds nothing.
    let url = format!("{}/v1/tables/t/keys/k01", cluster.url(1));
    assert_eq!(call("DELETE", &url, &[], None).status, 200);
    assert_eq!(call("DELETE", &url, &[], None).status, 404);
    assert_eq!(get(cluster.url(2), "t", "k01").status, 404);

    // Conditions are judged where the write is applied, whichever member
    // receives it: create-only, If-Match and a TTL change, each through a
    // different member.
    let key = |i: usize| format!("{}/v1/tables/t/keys/lease", cluster.url(i));
    let created = call("PUT", &key(0), &[("if-none-match", "*")], Some(b"a"));
    assert_eq!(created.status, 200, "{}", created.text());
    let version = created.json()["version"].as_str().unwrap().to_string();
    let again = call("PUT", &key(1), &[("if-none-match", "*")], Some(b"b"));
    assert_eq!(again.status, 412, "{}", again.text());
    assert_eq!(again.json()["error"]["current_version"], json!(version));
    let patched = call(
        "PATCH",
        &key(2),
        &[("if-match", &version), ("content-type", "application/json")],
        Some(br#"{"ttl_ms": 600000}"#),
    );
    assert_eq!(patched.status, 200, "{}", patched.text());
    let stale = call("DELETE", &key(1), &[("if-match", &version)], None);
    assert_eq!(stale.status, 412, "{}", stale.text());
    assert_eq!(
        stale.json()["error"]["current_version"],
        patched.json()["version"]
    );
    for i in 0..3 {
        let read = get(cluster.url(i), "t", "lease");
        assert_eq!(read.text(), "a");
        assert_eq!(
            read.header("ebb-expires-at").map(str::to_string),
            patched.json()["expires_at_ms"]
                .as_u64()
                .map(|at| at.to_string())
        );
    }

    // Linearizable reads under concurrency (they share read index rounds):
    // while a writer counts up one key through member 1, readers on every
    // member never see less than what was acknowledged before their read
    // began.
    let acked = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for reader in 0..6 {
            let (cluster, acked, done, reads) = (&cluster, &acked, &done, &reads);
            scope.spawn(move || {
                while !done.load(Ordering::Acquire) {
                    let before = acked.load(Ordering::Acquire);
                    let read = get(cluster.url(reader % 3), "t", "counter");
                    if read.status == 404 {
                        assert_eq!(before, 0, "the counter vanished");
                        continue;
                    }
                    let seen: u64 = read.text().parse().unwrap();
                    assert!(
                        seen >= before,
                        "member {} answered {seen} after {before} was acknowledged",
                        reader % 3 + 1
                    );
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for n in 1..=150u64 {
            let answer = put(cluster.url(0), "t", "counter", &n.to_string());
            assert_eq!(answer.status, 200, "{}", answer.text());
            acked.store(n, Ordering::Release);
        }
        // On a busy machine the readers may have been slow to start: let
        // them read for up to 30 s more.
        let deadline = Instant::now() + Duration::from_secs(30);
        while reads.load(Ordering::Relaxed) < 150 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        done.store(true, Ordering::Release);
    });
    assert!(reads.load(Ordering::Relaxed) >= 150, "the readers ran");
}

#[test]
fn with_a_cluster_secret_a_cursor_continues_on_any_member() {
    let cluster = Cluster::start(3, &["--cluster-secret", "cursor-secret"]);
    let mut all = Vec::new();
    for k in 0..30 {
        let key = format!("k{k:02}");
        assert_eq!(put(cluster.url(k % 3), "t", &key, "v").status, 200);
        all.push(key);
    }
    // Relaxed (key order): every page on the next member, every key once,
    // in order.
    let mut paged = Vec::new();
    let mut body = json!({ "sql": "SELECT key FROM t", "page_size": 7, "consistency": "relaxed" });
    for member in (0..3).cycle() {
        let answer = sql_post(cluster.url(member), &body);
        assert_eq!(
            answer.status,
            200,
            "member {}: {}",
            member + 1,
            answer.text()
        );
        let page = answer.json();
        for row in page["rows"].as_array().unwrap() {
            paged.push(row[0].as_str().unwrap().to_string());
        }
        match page["cursor"].as_str() {
            Some(cursor) => body = json!({ "cursor": cursor }),
            None => break,
        }
    }
    assert_eq!(paged, all);
    // Guarded: another member reads its own replicas (other incarnations),
    // so it answers 409 rather than a result that could differ.
    let first = sql_post(
        cluster.url(0),
        &json!({ "sql": "SELECT key FROM t", "page_size": 7 }),
    );
    assert_eq!(first.status, 200, "{}", first.text());
    let cursor = first.json()["cursor"].as_str().unwrap().to_string();
    let elsewhere = sql_post(cluster.url(1), &json!({ "cursor": cursor }));
    assert_eq!(elsewhere.status, 409, "{}", elsewhere.text());
    assert_eq!(elsewhere.json()["error"]["code"], "query_changed");
    let same = sql_post(cluster.url(0), &json!({ "cursor": cursor }));
    assert_eq!(same.status, 200, "{}", same.text());
}

#[test]
fn a_member_started_with_another_layout_refuses_clients_until_its_flags_agree() {
    let mut cluster = Cluster::start(3, &[]);
    // Every member proposes the layout its flags give; the first to commit
    // records it, the others agree with it.
    wait_until(WAIT, "every member's layout checked", || {
        (0..3).all(|i| cluster.status(i)["layout"]["state"] == "agreed")
    });
    let mut recorded_here = 0;
    for i in 0..3 {
        let layout = &cluster.status(i)["layout"];
        assert_eq!(
            layout["recorded"],
            serde_json::json!({"members": [1, 2, 3], "replication": 3, "fragments": 4}),
            "{layout}"
        );
        recorded_here += usize::from(layout["recorded_here"] == true);
    }
    assert_eq!(recorded_here, 1, "exactly one member recorded it");
    assert_eq!(put(cluster.url(2), "t", "before", "v").status, 200);

    // Member 3 restarted with another replication factor: its view of
    // where fragments live is not the cluster's, so it refuses client
    // requests (naming the flag) and its health says why; the others serve.
    cluster.kill(2);
    let agreed_args = cluster.args[2].clone();
    cluster.args[2].extend(["--replication".to_string(), "2".to_string()]);
    cluster.restart(2);
    wait_until(WAIT, "member 3's conflict found", || {
        cluster.status(2)["layout"]["state"] == "conflict"
    });
    let refused = put(cluster.url(2), "t", "during", "v");
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(refused.code(), "layout_conflict");
    assert!(
        refused
            .text()
            .contains("--replication is 2, the cluster's is 3"),
        "{}",
        refused.text()
    );
    assert_eq!(get(cluster.url(2), "t", "before").code(), "layout_conflict");
    assert_eq!(
        sql_call(cluster.url(2), "SELECT count(*) FROM t").code(),
        "layout_conflict"
    );
    let health = call("GET", &format!("{}/health", cluster.url(2)), &[], None);
    assert_eq!(health.status, 503, "{}", health.text());
    assert_eq!(health.json()["status"], "layout_conflict");
    assert_eq!(put(cluster.url(0), "t", "during", "v").status, 200);
    let recorded = &cluster.status(2)["layout"]["recorded"];
    assert_eq!(
        recorded["replication"], 3,
        "the recorded layout is unchanged"
    );

    // Restarted with the cluster's flags, it agrees and serves again,
    // with every write made meanwhile.
    cluster.kill(2);
    cluster.args[2] = agreed_args;
    cluster.restart(2);
    wait_until(WAIT, "member 3 agrees again", || {
        cluster.status(2)["layout"]["state"] == "agreed"
    });
    assert_eq!(get(cluster.url(2), "t", "during").text(), "v");
    let health = call("GET", &format!("{}/health", cluster.url(2)), &[], None);
    assert_eq!(health.status, 200, "{}", health.text());
}

#[test]
fn five_members_with_three_replicas_place_and_serve_every_fragment() {
    let cluster = Cluster::start(5, &["--replication", "3"]);
    let status = cluster.status(0);
    let fragments = status["fragments"].as_array().unwrap();
    let mut held = [0usize; 5];
    for fragment in fragments {
        let replicas = fragment["replicas"].as_array().unwrap();
        assert_eq!(replicas.len(), 3, "{fragment}");
        for replica in replicas {
            held[replica.as_u64().unwrap() as usize - 1] += 1;
        }
    }
    assert_eq!(held.iter().sum::<usize>(), 3 * fragments.len());
    assert!(
        held.iter().all(|n| *n < fragments.len()),
        "no member holds every fragment: {held:?}"
    );
    // Writes through every member, reads of every key from every member
    // (a member without a replica asks the fragment's leader).
    for k in 0..40 {
        let answer = put(
            cluster.url(k % 5),
            "t",
            &format!("k{k:02}"),
            &format!("v{k}"),
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    for i in 0..5 {
        for k in 0..40 {
            let answer = get(cluster.url(i), "t", &format!("k{k:02}"));
            assert_eq!(answer.text(), format!("v{k}"), "node {} k{k:02}", i + 1);
        }
        assert_eq!(get(cluster.url(i), "t", "absent").status, 404);
    }
    // SQL from every member, each holding only some fragments: the others'
    // pages come from their leaders.
    let replicas_of = replicas_of(&status);
    let all: Vec<String> = (0..40).map(|k| format!("k{k:02}")).collect();
    for i in 0..5 {
        let url = cluster.url(i);
        let rows = sql_rows(url, "SELECT key, value FROM t");
        let keys: Vec<&str> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[0].as_str().unwrap())
            .collect();
        assert_eq!(keys, all, "node {}: every key once, in key order", i + 1);
        assert_eq!(sql_rows(url, "SELECT COUNT(*) FROM t")[0][0], 40);
        assert_eq!(
            sql_rows(
                url,
                "SELECT COUNT(*), MIN(key), MAX(key) FROM t WHERE key >= 'k10'"
            )[0],
            serde_json::json!([30, "k10", "k39"])
        );
        assert_eq!(
            sql_rows(url, "SELECT key FROM t ORDER BY value DESC LIMIT 3"),
            serde_json::json!([["k09"], ["k08"], ["k07"]])
        );
        let by_fragment = sql_rows(
            url,
            "SELECT _fragment, COUNT(*) FROM t GROUP BY _fragment ORDER BY _fragment",
        );
        let counted: i64 = by_fragment
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[1].as_i64().unwrap())
            .sum();
        assert_eq!(counted, 40, "{by_fragment}");
        // Paged, continued on the same member: every key once.
        let mut paged = Vec::new();
        let mut body = serde_json::json!({ "sql": "SELECT key FROM t", "page_size": 7 });
        loop {
            let answer = sql_post(url, &body);
            assert_eq!(answer.status, 200, "{}", answer.text());
            let json = answer.json();
            for row in json["rows"].as_array().unwrap() {
                paged.push(row[0].as_str().unwrap().to_string());
            }
            match json["cursor"].as_str() {
                Some(cursor) => body = serde_json::json!({ "cursor": cursor }),
                None => break,
            }
        }
        assert_eq!(paged, all, "node {}: paged", i + 1);
    }
    // Queries that end before their scans' last pages (a LIMIT met) close
    // the scans they pinned on other members: with 2 000 records, no
    // fragment's first page (256 records visited) is its last.
    let many: Vec<String> = (0..2000)
        .map(|k| serde_json::json!({ "key": format!("m{k:04}"), "value": "x" }).to_string())
        .collect();
    for chunk in many.chunks(500) {
        let answer = call(
            "POST",
            &format!("{}/v1/tables/many/batch", cluster.url(1)),
            &[("content-type", "application/x-ndjson")],
            Some(chunk.join("\n").as_bytes()),
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    for _ in 0..30 {
        assert_eq!(
            sql_rows(cluster.url(0), "SELECT key FROM many LIMIT 1"),
            serde_json::json!([["m0000"]])
        );
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let pinned: u64 = (0..5)
            .map(|i| cluster.status(i)["pinned_scans"].as_u64().unwrap())
            .sum();
        if pinned == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{pinned} scans still pinned 5 s after their queries ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // A guarded cursor sees a write between pages to a fragment the member
    // reads from another member's leader: 409, not a different result.
    let member = 0;
    let remote_fragment = (0..replicas_of.len())
        .find(|f| !replicas_of[*f].contains(&(member as u64 + 1)))
        .expect("member 1 lacks some fragment");
    let placed = sql_rows(
        cluster.url(member),
        &format!("SELECT key FROM t WHERE _fragment = {remote_fragment} LIMIT 1"),
    );
    let remote_key = placed[0][0].as_str().unwrap().to_string();
    let first = sql_post(
        cluster.url(member),
        &serde_json::json!({ "sql": "SELECT key FROM t", "page_size": 5 }),
    );
    assert_eq!(first.status, 200, "{}", first.text());
    let cursor = first.json()["cursor"].as_str().unwrap().to_string();
    assert_eq!(put(cluster.url(3), "t", &remote_key, "changed").status, 200);
    let next = sql_post(
        cluster.url(member),
        &serde_json::json!({ "cursor": cursor }),
    );
    assert_eq!(next.status, 409, "{}", next.text());
    assert_eq!(next.json()["error"]["code"], "query_changed");
}

#[test]
fn a_plugin_uploaded_on_one_member_runs_on_every_member() {
    let mut cluster = Cluster::start(3, &["--fragments", "2"]);
    for k in 0..20 {
        let answer = put(
            cluster.url(k % 3),
            "t",
            &format!("k{k:02}"),
            &format!(r#"{{"n": {k}}}"#),
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    let json = std::fs::read(common::wasm("ebb_plugin_json")).unwrap();
    let upload = call(
        "PUT",
        &format!("{}/v1/plugins/json", cluster.url(0)),
        &[],
        Some(&json),
    );
    assert_eq!(upload.status, 200, "{}", upload.text());
    let body = upload.json();
    assert_eq!(
        body["cluster"]["applied"],
        serde_json::json!([1, 2, 3]),
        "{body}"
    );
    assert_eq!(body["cluster"]["pending"], serde_json::json!([]), "{body}");
    // Every member runs it, with the same module.
    let sha = body["sha256"].clone();
    for i in 0..3 {
        let rows = sql_rows(
            cluster.url(i),
            "SELECT sum(json.get_int(value, '$.n')) FROM t",
        );
        assert_eq!(rows, serde_json::json!([[190]]), "node {}", i + 1);
        let listed = call(
            "GET",
            &format!("{}/v1/plugins/json", cluster.url(i)),
            &[],
            None,
        );
        assert_eq!(listed.json()["sha256"], sha, "node {}", i + 1);
    }
    // A module every member would refuse is refused before it is proposed.
    let meta_last = |cluster: &Cluster| cluster.status(1)["metadata"]["last_log_index"].clone();
    let before = meta_last(&cluster);
    let bad = call(
        "PUT",
        &format!("{}/v1/plugins/broken", cluster.url(1)),
        &[],
        Some(b"not a wasm module"),
    );
    assert_eq!(bad.status, 422, "{}", bad.text());
    assert_eq!(bad.code(), "plugin_invalid", "{}", bad.text());
    assert_eq!(meta_last(&cluster), before, "nothing was proposed");

    // A member away while one plugin is removed and another installed
    // comes back with the same plugins.
    cluster.kill(2);
    cluster.wait_for_leaders();
    let removed = call(
        "DELETE",
        &format!("{}/v1/plugins/json", cluster.url(0)),
        &[],
        None,
    );
    assert_eq!(removed.status, 200, "{}", removed.text());
    assert_eq!(removed.json()["cluster"]["pending"], serde_json::json!([3]));
    let stats = std::fs::read(common::wasm("ebb_plugin_stats")).unwrap();
    let upload = call(
        "PUT",
        &format!("{}/v1/plugins/stats", cluster.url(1)),
        &[],
        Some(&stats),
    );
    assert_eq!(upload.status, 200, "{}", upload.text());
    assert_eq!(
        upload.json()["cluster"]["applied"],
        serde_json::json!([1, 2])
    );
    cluster.restart(2);
    cluster.wait_for_leaders();
    wait_until(WAIT, "member 3 to catch up with the plugins", || {
        plugin_names(cluster.url(2)) == ["stats"]
    });
    for i in 0..3 {
        assert_eq!(plugin_names(cluster.url(i)), ["stats"], "node {}", i + 1);
        let gone = sql_call(cluster.url(i), "SELECT json.get_int(value, '$.n') FROM t");
        assert_eq!(gone.status, 400, "node {}: {}", i + 1, gone.text());
    }
    let rows = sql_rows(cluster.url(2), "SELECT stats.p50(1.0) FROM t");
    assert_eq!(rows.as_array().unwrap().len(), 1);
}

/// The expiry status of `table` on member `url`, which must answer 200.
fn expiry_status(url: &str, table: &str) -> Value {
    let answer = call(
        "GET",
        &format!("{url}/v1/tables/{table}/expiry-handler"),
        &[],
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()
}

#[test]
fn expiry_events_are_handled_through_a_leader_kill_and_leave_every_outbox() {
    const KEYS: usize = 2000;
    let mut cluster = Cluster::start(3, &[]);
    let archive = std::fs::read(common::wasm("ebb_plugin_archive")).unwrap();
    let upload = call(
        "PUT",
        &format!("{}/v1/plugins/archive", cluster.url(0)),
        &[],
        Some(&archive),
    );
    assert_eq!(upload.status, 200, "{}", upload.text());
    // Bound on one member, in force on every member.
    let bind = call(
        "PUT",
        &format!("{}/v1/tables/sessions/expiry-handler", cluster.url(1)),
        &[("content-type", "application/json")],
        Some(br#"{"plugin": "archive", "function": "copy", "max_batch": 50}"#),
    );
    assert_eq!(bind.status, 200, "{}", bind.text());
    for i in 0..3 {
        let status = expiry_status(cluster.url(i), "sessions");
        assert_eq!(status["binding"]["plugin"], "archive", "node {}", i + 1);
    }
    // 2 000 keys, through every member, all due about 2 s after the last
    // write, so deliveries run while a leader is killed.
    let deadline = now_ms() + 12_000;
    let body: Vec<String> = (0..KEYS)
        .map(|k| {
            serde_json::json!({
                "op": "put",
                "key": format!("s{k:04}"),
                "value": format!("v{k}"),
                "expires_at_ms": deadline + (k as u64 % 50),
            })
            .to_string()
        })
        .collect();
    for (n, chunk) in body.chunks(100).enumerate() {
        let answer = call(
            "POST",
            &format!(
                "{}/v1/tables/sessions/batch?durability=wal",
                cluster.url(n % 3)
            ),
            &[("content-type", "application/x-ndjson")],
            Some(chunk.join("\n").as_bytes()),
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
        let results = answer.json()["results"].as_array().unwrap().clone();
        assert!(
            results.iter().all(|r| r["status"] == 200),
            "{}",
            answer.text()
        );
    }
    assert!(
        now_ms() < deadline,
        "the writes took longer than the test allows"
    );
    // Once deliveries started, kill the member leading the most fragments.
    wait_until(WAIT, "the first expiries handled", || {
        archived(&cluster, 0) > 0
    });
    let victim = cluster.busiest_leader(0);
    cluster.kill(victim);
    cluster.wait_for_leaders();
    std::thread::sleep(Duration::from_millis(500));
    cluster.restart(victim);
    cluster.wait_for_leaders();
    // Every event handled (at least once: the archive is keyed by the
    // record's key), and every replica's outbox empty.
    let survivor = (victim + 1) % 3;
    wait_until(Duration::from_secs(60), "every expiry archived", || {
        archived(&cluster, survivor) == KEYS
    });
    for i in 0..3 {
        let rows = sql_rows(
            cluster.url(i),
            "SELECT count(*) FROM sessions_archive WHERE value LIKE 'v%'",
        );
        assert_eq!(rows, serde_json::json!([[KEYS]]), "node {}", i + 1);
    }
    wait_until(WAIT, "every replica's outbox empty", || {
        (0..3).all(|i| expiry_status(cluster.url(i), "sessions")["status"]["stored_events"] == 0)
    });
}

#[test]
fn change_events_are_replicated_and_handled_through_a_leader_kill() {
    const KEYS: usize = 600;
    let mut cluster = Cluster::start(3, &[]);
    let flaky = std::fs::read(common::wasm("ebb_test_flaky")).unwrap();
    let upload = call(
        "PUT",
        &format!("{}/v1/plugins/flaky", cluster.url(0)),
        &[],
        Some(&flaky),
    );
    assert_eq!(upload.status, 200, "{}", upload.text());
    let bind = call(
        "PUT",
        &format!("{}/v1/tables/orders/change-handler", cluster.url(2)),
        &[("content-type", "application/json")],
        Some(br#"{"plugin": "flaky", "function": "record", "max_batch": 50}"#),
    );
    assert_eq!(bind.status, 200, "{}", bind.text());
    let status = |cluster: &Cluster, i: usize| {
        let answer = call(
            "GET",
            &format!("{}/v1/tables/orders/change-handler", cluster.url(i)),
            &[],
            None,
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
        answer.json()
    };
    for i in 0..3 {
        assert_eq!(
            status(&cluster, i)["binding"]["function"],
            "record",
            "node {}",
            i + 1
        );
    }
    // Writes through every member, a leader killed half-way.
    let mut written = BTreeSet::new();
    let mut write = |cluster: &Cluster, k: usize| {
        let key = format!("o{k:04}");
        let answer = put(cluster.url(k % 3), "orders", &key, &format!("v{k}"));
        if answer.status == 200 {
            let version = answer.header("ebb-version").unwrap().to_string();
            written.insert(format!("{key}@{version}"));
        }
    };
    for k in 0..KEYS / 2 {
        write(&cluster, k);
    }
    let victim = cluster.busiest_leader(0);
    cluster.kill(victim);
    cluster.wait_for_leaders();
    let alive: Vec<usize> = (0..3).filter(|&i| i != victim).collect();
    for k in KEYS / 2..KEYS {
        let key = format!("o{k:04}");
        let answer = put(cluster.url(alive[k % 2]), "orders", &key, &format!("v{k}"));
        assert_eq!(answer.status, 200, "{}", answer.text());
        let version = answer.header("ebb-version").unwrap().to_string();
        written.insert(format!("{key}@{version}"));
    }
    cluster.restart(victim);
    cluster.wait_for_leaders();
    assert!(
        written.len() >= KEYS - 1,
        "at most the write in flight at the kill failed"
    );
    // Every acknowledged write recorded once its event was handled, and
    // every replica's outbox empty.
    wait_until(Duration::from_secs(60), "every change recorded", || {
        let rows = sql_rows(cluster.url(alive[0]), "SELECT key FROM seen");
        let seen: std::collections::BTreeSet<String> = rows
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|row| row[0].as_str().map(str::to_string))
            .collect();
        written.iter().all(|write| seen.contains(write))
    });
    wait_until(WAIT, "every replica's outbox empty", || {
        (0..3).all(|i| status(&cluster, i)["status"]["stored_events"] == 0)
    });
}

/// Rows of `sessions_archive` member `i` holds.
fn archived(cluster: &Cluster, i: usize) -> usize {
    let rows = sql_rows(cluster.url(i), "SELECT count(*) FROM sessions_archive");
    rows[0][0].as_u64().unwrap_or(0) as usize
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The replicas (member ids) of each fragment, from a `/v1/cluster`
/// answer.
fn replicas_of(status: &Value) -> Vec<Vec<u64>> {
    status["fragments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            f["replicas"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_u64().unwrap())
                .collect()
        })
        .collect()
}

/// Write `key` of `table` through `url` with a 50 ms TTL.
fn expire_soon(url: &str, table: &str, key: &str, value: &str) {
    let answer = call(
        "PUT",
        &format!("{url}/v1/tables/{table}/keys/{key}?ttl_ms=50"),
        &[],
        Some(value.as_bytes()),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
}

/// Upload test module `module` as plugin `handler` through `url`.
fn upload_handler(url: &str, module: &str) {
    let bytes = std::fs::read(common::wasm(module)).unwrap();
    let answer = call(
        "PUT",
        &format!("{url}/v1/plugins/handler"),
        &[],
        Some(&bytes),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
}

/// Bind `handler.copy` to `table`'s expirations through `url`.
fn bind_copy(url: &str, table: &str, max_attempts: u32) {
    let body =
        format!(r#"{{"plugin": "handler", "function": "copy", "max_attempts": {max_attempts}}}"#);
    let answer = call(
        "PUT",
        &format!("{url}/v1/tables/{table}/expiry-handler"),
        &[("content-type", "application/json")],
        Some(body.as_bytes()),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
}

/// The dead letters of `table` member `url` lists (every fragment's).
fn dead_letter_count(url: &str, table: &str) -> usize {
    let answer = call(
        "GET",
        &format!("{url}/v1/tables/{table}/expiry/dead-letters?limit=1000"),
        &[],
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()["dead_letters"].as_array().map_or(0, Vec::len)
}

#[test]
fn dead_letters_are_redriven_and_pending_events_discarded_through_any_member() {
    const KEYS: usize = 8;
    let cluster = Cluster::start(3, &[]);
    let upload = |member: usize, module: &str| upload_handler(cluster.url(member), module);
    let bind = |member: usize, max_attempts: u32| {
        bind_copy(cluster.url(member), "jobs", max_attempts);
    };
    let expire = |prefix: &str, value: &str| {
        for k in 0..KEYS {
            expire_soon(cluster.url(k % 3), "jobs", &format!("{prefix}{k}"), value);
        }
    };
    let everywhere = |what: &str, check: &dyn Fn(&str) -> bool| {
        wait_until(WAIT, what, || (0..3).all(|i| check(cluster.url(i))));
    };

    // Events of every fragment fail once and become dead letters on every
    // replica.
    upload(0, "ebb_test_flaky");
    bind(1, 1);
    expire("d", "fail me");
    everywhere("every event dead on every member", &|url| {
        dead_letter_count(url, "jobs") == KEYS
    });
    let listing = format!("{}/v1/tables/jobs/expiry/dead-letters", cluster.url(2));
    let first = call("GET", &listing, &[], None).json();
    let id = first["dead_letters"][0]["id"].as_str().unwrap().to_string();

    // Redriven by id from a member that may not lead its fragment: it
    // fails again and is dead again, once.
    let one = call(
        "POST",
        &format!("{listing}/redrive"),
        &[],
        Some(format!(r#"{{"ids": ["{id}"]}}"#).as_bytes()),
    );
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(one.json()["redriven"], 1, "{}", one.text());
    everywhere("the redriven event dead again", &|url| {
        let page = call(
            "GET",
            &format!("{url}/v1/tables/jobs/expiry/dead-letters?limit=1000"),
            &[],
            None,
        )
        .json();
        let dead = page["dead_letters"].as_array().unwrap();
        dead.len() == KEYS
            && dead
                .iter()
                .any(|event| event["id"] == id.as_str() && event["attempts"] == 1)
    });

    // Fixed, and every dead letter redriven through another member: each
    // is handled once more and leaves every replica's dead letters.
    upload(0, "ebb_plugin_archive");
    let all = call(
        "POST",
        &format!(
            "{}/v1/tables/jobs/expiry/dead-letters/redrive",
            cluster.url(1)
        ),
        &[],
        Some(b"{}"),
    );
    assert_eq!(all.status, 200, "{}", all.text());
    assert_eq!(
        all.json(),
        serde_json::json!({"redriven": KEYS, "more": false}),
        "{}",
        all.text()
    );
    wait_until(WAIT, "every redriven event archived", || {
        (0..KEYS).all(|k| get(cluster.url(2), "jobs_archive", &format!("d{k}")).status == 200)
    });
    everywhere("no dead letters left", &|url| {
        dead_letter_count(url, "jobs") == 0
    });

    // Events retried far apart wait in the outbox; unbinding with
    // discard_pending deletes them on every replica, undelivered.
    upload(2, "ebb_test_flaky");
    bind(0, 1000);
    expire("p", "fail later");
    everywhere("the events pending on every member", &|url| {
        expiry_status(url, "jobs")["status"]["stored_events"] == KEYS
    });
    let unbind = call(
        "DELETE",
        &format!(
            "{}/v1/tables/jobs/expiry-handler?discard_pending=true",
            cluster.url(2)
        ),
        &[],
        None,
    );
    assert_eq!(unbind.status, 200, "{}", unbind.text());
    everywhere("no binding and no event left", &|url| {
        call(
            "GET",
            &format!("{url}/v1/tables/jobs/expiry-handler"),
            &[],
            None,
        )
        .status
            == 404
    });
    for k in 0..KEYS {
        let archived = get(cluster.url(0), "jobs_archive", &format!("p{k}"));
        assert_eq!(archived.status, 404, "p{k} was never handled");
    }
}

#[test]
fn with_three_replicas_of_five_every_member_lists_every_dead_letter() {
    const KEYS: usize = 24;
    let cluster = Cluster::start(5, &["--replication", "3"]);
    let replicas_of = replicas_of(&cluster.status(0));
    upload_handler(cluster.url(0), "ebb_test_flaky");
    bind_copy(cluster.url(1), "jobs", 1);
    // Written first without a deadline, to learn each key's fragment.
    for k in 0..KEYS {
        assert_eq!(
            put(cluster.url(k % 5), "jobs", &format!("d{k:02}"), "fail me").status,
            200
        );
    }
    let placed = sql_rows(cluster.url(0), "SELECT key, _fragment FROM jobs");
    let fragments: Vec<u64> = placed
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row[1].as_u64().unwrap())
        .collect();
    assert_eq!(fragments.len(), KEYS, "{placed}");
    for member in 1..=5u64 {
        assert!(
            fragments
                .iter()
                .any(|f| !replicas_of[*f as usize].contains(&member)),
            "member {member} holds a replica of every key's fragment: {placed}"
        );
    }
    // Each event fails its only attempt and becomes a dead letter in its
    // fragment; every member lists all of them, its own fragments' and
    // the others' (from their leaders).
    for k in 0..KEYS {
        expire_soon(cluster.url(k % 5), "jobs", &format!("d{k:02}"), "fail me");
    }
    wait_until(WAIT, "every dead letter listed by every member", || {
        (0..5).all(|i| dead_letter_count(cluster.url(i), "jobs") == KEYS)
    });
    let listing = |i: usize, query: &str| {
        let answer = call(
            "GET",
            &format!(
                "{}/v1/tables/jobs/expiry/dead-letters?{query}",
                cluster.url(i)
            ),
            &[],
            None,
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
        answer.json()
    };
    let whole = listing(3, "limit=1000");
    assert_eq!(whole["next"], Value::Null, "{whole}");
    let ids: Vec<String> = whole["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(ids, sorted, "every id once, in id order");
    let mut keys: Vec<String> = whole["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    let expected: Vec<String> = (0..KEYS).map(|k| format!("d{k:02}")).collect();
    assert_eq!(keys, expected);
    // Paged through another member, 5 at a time: the same ids, in order.
    for member in [2, 4] {
        let mut paged = Vec::new();
        let mut query = "limit=5".to_string();
        loop {
            let page = listing(member, &query);
            let items = page["dead_letters"].as_array().unwrap();
            assert!(items.len() <= 5, "{page}");
            paged.extend(items.iter().map(|e| e["id"].as_str().unwrap().to_string()));
            match page["next"].as_str() {
                Some(next) => query = format!("limit=5&after={next}"),
                None => break,
            }
        }
        assert_eq!(paged, ids, "member {} paged", member + 1);
    }
}
