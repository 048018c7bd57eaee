//! A private Redis watched by Sentinel for a test: a master, a replica and
//! three Sentinels as `redis-server` child processes on free ports of
//! 127.0.0.1. The master can be killed (the Sentinels then promote the
//! replica) and restarted (they turn it into a replica). Every process is
//! killed, and its directory removed, on drop.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The name the Sentinels monitor the master under.
pub const MASTER_NAME: &str = "tokens";

/// How long the master may be unreachable before Sentinels count it down.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);

struct Process {
    port: u16,
    child: Option<Child>,
    args: Vec<String>,
}

pub struct RedisSentinel {
    dir: PathBuf,
    /// The two data servers (the first starts as master), then the
    /// Sentinels.
    processes: Vec<Process>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl RedisSentinel {
    /// Starts a master, its replica and three Sentinels, and waits until
    /// the Sentinels know the master and its replica.
    pub fn start() -> RedisSentinel {
        let dir = std::env::temp_dir().join(format!(
            "tower-oauth-sentinel-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let common = |port: u16| -> Vec<String> {
            [
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
            ]
            .map(str::to_owned)
            .to_vec()
        };
        let master = free_port();
        let replica = free_port();
        let mut processes = vec![
            Process {
                port: master,
                child: None,
                args: common(master),
            },
            Process {
                port: replica,
                child: None,
                args: [
                    common(replica),
                    vec!["--replicaof".into(), "127.0.0.1".into(), master.to_string()],
                ]
                .concat(),
            },
        ];
        for _ in 0..3 {
            let port = free_port();
            let config = dir.join(format!("sentinel-{port}.conf"));
            std::fs::write(
                &config,
                format!(
                    "port {port}\nbind 127.0.0.1\nprotected-mode no\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} {}\n\
                     sentinel failover-timeout {MASTER_NAME} 4000\n",
                    DOWN_AFTER.as_millis()
                ),
            )
            .unwrap();
            processes.push(Process {
                port,
                child: None,
                args: vec![config.to_str().unwrap().to_owned(), "--sentinel".into()],
            });
        }
        let mut deployment = RedisSentinel { dir, processes };
        for i in 0..deployment.processes.len() {
            deployment.restart(i);
        }
        deployment.wait(
            Duration::from_secs(20),
            "the Sentinels to see the replica",
            |d| d.sentinel_info().contains("slaves=1") && d.sentinel_info().contains("sentinels=3"),
        );
        deployment
    }

    /// The Sentinels' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.processes[2..]
            .iter()
            .map(|p| format!("redis://127.0.0.1:{}", p.port))
            .collect()
    }

    /// Index (0 or 1) of the data server the Sentinels name master now.
    pub fn master(&self) -> usize {
        let (_, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(MASTER_NAME)
            .query(&mut self.connection(2))
            .unwrap();
        self.processes[..2]
            .iter()
            .position(|p| p.port == port)
            .unwrap()
    }

    /// Starts process `i` (again) and waits until it accepts connections.
    pub fn restart(&mut self, i: usize) {
        let child = Command::new("redis-server")
            .args(&self.processes[i].args)
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is needed for these tests (apt-get install redis-server)");
        self.processes[i].child = Some(child);
        wait_for_port(self.processes[i].port);
    }

    /// Kills process `i` (as a crash would).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.processes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until the Sentinels name another master than `old`.
    pub fn wait_for_failover(&self, old: usize, limit: Duration) {
        self.wait(limit, "a failover", |d| d.master() != old);
    }

    /// Waits until data server `i` is a replica (Sentinels convert a
    /// restarted old master about ten seconds after it is back: until then
    /// it is a master of nothing, which they no longer name).
    pub fn wait_until_replica(&self, i: usize, limit: Duration) {
        self.wait(limit, "the old master to become a replica", |d| {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut d.connection(i))
                .unwrap_or_default();
            info.contains("role:slave")
        });
    }

    fn wait(&self, limit: Duration, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + limit;
        while !done(self) {
            assert!(Instant::now() < deadline, "waited in vain for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn sentinel_info(&self) -> String {
        redis::cmd("INFO")
            .arg("sentinel")
            .query(&mut self.connection(2))
            .unwrap_or_default()
    }

    /// A connection to process `i`.
    pub fn connection(&self, i: usize) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}", self.processes[i].port))
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap()
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        for i in 0..self.processes.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
