//! A private Redis Cluster for a test: masters and their replicas as
//! `redis-server` child processes on free ports of 127.0.0.1, joined with
//! `redis-cli --cluster create`; nodes can be killed (a master then fails
//! over to its replica) and restarted (rejoining as a replica). Every
//! process is killed, and its directory removed, on drop.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::Commands;

/// How long a node may be unreachable before the others count it failed.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(1000);

struct Node {
    port: u16,
    child: Option<Child>,
}

pub struct RedisCluster {
    dir: PathBuf,
    nodes: Vec<Node>,
}

fn free_port() -> u16 {
    // A cluster node also listens on its port + 10000 (the cluster bus).
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if port < 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

impl RedisCluster {
    /// Starts `masters` masters with `replicas` replicas each, and waits
    /// until the cluster serves every slot.
    pub fn start(masters: usize, replicas: usize) -> RedisCluster {
        let first = free_port();
        let dir = std::env::temp_dir().join(format!(
            "tower-oauth-cluster-{}-{first}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cluster = RedisCluster {
            dir,
            nodes: Vec::new(),
        };
        for i in 0..masters * (1 + replicas) {
            let port = if i == 0 { first } else { free_port() };
            cluster.nodes.push(Node { port, child: None });
            cluster.restart(i);
        }
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli is needed for the cluster tests (apt-get install redis-tools)");
        assert!(status.success(), "redis-cli --cluster create failed");
        cluster.wait_until_healthy(Duration::from_secs(20));
        cluster
    }

    /// Every node's URL (including replicas).
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect()
    }

    /// Starts node `i` (again) on its port, with its cluster configuration
    /// file, and waits until it accepts connections.
    pub fn restart(&mut self, i: usize) {
        let port = self.nodes[i].port;
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
            .args([
                "--cluster-node-timeout",
                &NODE_TIMEOUT.as_millis().to_string(),
            ])
            // A replica may take over however long it lost its master.
            .args(["--cluster-replica-validity-factor", "0"])
            .args(["--dir", self.dir.to_str().unwrap()])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is needed for these tests (apt-get install redis-server)");
        self.nodes[i].child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills node `i` (as a crash would).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A connection to node `i`.
    pub fn connection(&self, i: usize) -> redis::Connection {
        let client =
            redis::Client::open(format!("redis://127.0.0.1:{}", self.nodes[i].port)).unwrap();
        client
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap()
    }

    fn running(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].child.is_some())
    }

    /// The node (index) serving `key` as master now, asked of a running
    /// node.
    pub fn master_of(&self, key: &str) -> usize {
        let asker = self.running().next().expect("no node running");
        let mut con = self.connection(asker);
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut con)
            .unwrap();
        let port = self
            .masters(&mut con)
            .into_iter()
            .find(|(_, ranges)| ranges.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .map(|(port, _)| port)
            .expect("no master serves the key's slot");
        self.nodes.iter().position(|n| n.port == port).unwrap()
    }

    /// The masters a node knows, by port, with their slot ranges.
    fn masters(&self, con: &mut redis::Connection) -> Vec<(u16, Vec<(u16, u16)>)> {
        let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(con).unwrap();
        nodes
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let flags = fields.get(2)?;
                if !flags.contains("master") || flags.contains("fail") {
                    return None;
                }
                let port = fields[1].split(['@', ':']).nth(1)?.parse().ok()?;
                let ranges = fields[8..]
                    .iter()
                    .filter_map(|r| match r.split_once('-') {
                        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                        None => r.parse().ok().map(|s| (s, s)),
                    })
                    .collect();
                Some((port, ranges))
            })
            .collect()
    }

    /// Whether node `i` is a master now, by its own account.
    pub fn is_master(&self, i: usize) -> bool {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut self.connection(i))
            .unwrap();
        info.contains("role:master")
    }

    /// Waits until every running node says the cluster is ok and serves
    /// every slot from a master that is running: after a master is killed,
    /// until its replica took over.
    pub fn wait_until_healthy(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let healthy = self.running().all(|i| {
                let Ok(client) =
                    redis::Client::open(format!("redis://127.0.0.1:{}", self.nodes[i].port))
                else {
                    return false;
                };
                let Ok(mut con) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
                    return false;
                };
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut con)
                    .unwrap_or_default();
                let served: usize = self
                    .masters(&mut con)
                    .iter()
                    .flat_map(|(_, ranges)| ranges.iter().map(|&(a, b)| usize::from(b - a) + 1))
                    .sum();
                // Served by nodes that are alive (a dead master's slots
                // taken over by its replica).
                let alive = self.masters(&mut con).iter().all(|(port, _)| {
                    self.nodes
                        .iter()
                        .any(|n| n.port == *port && n.child.is_some())
                });
                info.contains("cluster_state:ok") && served == 16_384 && alive
            });
            if healthy {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the Redis Cluster did not become healthy"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Calls per command summed over the running nodes, since the last
    /// [`reset_stats`](Self::reset_stats).
    pub fn command_calls(&self) -> HashMap<String, u64> {
        let mut total = HashMap::new();
        for i in self.running() {
            for (name, calls) in super::redis_server::command_calls(&mut self.connection(i)) {
                *total.entry(name).or_insert(0) += calls;
            }
        }
        total
    }

    /// Zeroes every running node's command statistics.
    pub fn reset_stats(&self) {
        for i in self.running() {
            super::redis_server::reset_stats(&mut self.connection(i));
        }
    }

    /// Every key under `prefix` with its value, read from every running
    /// master.
    pub fn values(&self, prefix: &str) -> Vec<(String, String)> {
        let mut found = Vec::new();
        for i in self.running().filter(|&i| self.is_master(i)) {
            let mut con = self.connection(i);
            let keys: Vec<String> = con.keys(format!("{prefix}*")).unwrap();
            for key in keys {
                if let Ok(Some(value)) = con.get::<_, Option<String>>(&key) {
                    found.push((key, value));
                }
            }
        }
        found.sort();
        found
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
