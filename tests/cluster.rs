//! Out-of-process cluster tests: three `ebb serve` processes on loopback
//! ports, killed (SIGKILL) and restarted, every loop bounded in count and
//! time. See docs/cluster.md and docs/testing.md.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Server, call, wait_until};
use serde_json::Value;

/// How long a test waits for a cluster to elect, converge or answer.
const WAIT: Duration = Duration::from_secs(30);

/// Free loopback ports for the cluster listeners (bound, then released).
fn free_ports(count: usize) -> Vec<u16> {
    let sockets: Vec<std::net::TcpListener> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    sockets
        .iter()
        .map(|s| s.local_addr().unwrap().port())
        .collect()
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
    /// fragment it holds.
    fn wait_for_leaders(&self) {
        let up: BTreeSet<u64> = self.up().iter().map(|i| *i as u64 + 1).collect();
        wait_until(WAIT, "a live leader for every fragment", || {
            self.up().iter().all(|i| {
                self.status(*i)["fragments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|f| f.get("leader").is_some())
                    .all(|f| f["leader"].as_u64().is_some_and(|l| up.contains(&l)))
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

/// Every key of `table` with its version, as member `url` holds them.
fn keys_and_versions(url: &str, table: &str) -> BTreeMap<String, i64> {
    let body = serde_json::json!({
        "sql": format!("SELECT key, _version_ms FROM {table}"),
        "page_size": 10000,
    });
    let answer = call(
        "POST",
        &format!("{url}/v1/sql"),
        &[("content-type", "application/json")],
        Some(body.to_string().as_bytes()),
    );
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

#[test]
fn acknowledged_writes_survive_five_leader_kills() {
    let mut cluster = Cluster::start(3, &[]);
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
}

#[test]
fn two_of_three_down_answers_no_quorum_promptly_and_loses_nothing() {
    let mut cluster = Cluster::start(3, &[]);
    for k in 0..20 {
        let answer = put(cluster.url(k % 3), "t", &format!("k{k}"), "before");
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
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
    // Expiry handlers are refused in a cluster until their acks replicate.
    let bind = call(
        "PUT",
        &format!("{}/v1/tables/t/expiry-handler", cluster.url(0)),
        &[("content-type", "application/json")],
        Some(br#"{"plugin": "archive", "function": "copy"}"#),
    );
    assert_eq!(bind.status, 501, "{}", bind.text());
    assert_eq!(bind.code(), "not_in_cluster", "{}", bind.text());
    // Deletes go through the leader too; a second delete finds nothing.
    let url = format!("{}/v1/tables/t/keys/k01", cluster.url(1));
    assert_eq!(call("DELETE", &url, &[], None).status, 200);
    assert_eq!(call("DELETE", &url, &[], None).status, 404);
    assert_eq!(get(cluster.url(2), "t", "k01").status, 404);
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
}
