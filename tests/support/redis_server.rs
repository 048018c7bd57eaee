//! A private `redis-server` for a test: started on a free port of 127.0.0.1
//! as a child process, stopped (and restartable) on command, killed on drop.

#![allow(dead_code, unreachable_pub)]

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

/// Set (as `.ci/run` does) to make a missing `redis-server` fail the Redis
/// tests instead of skipping them.
pub const REQUIRE_REDIS: &str = "TOWER_OAUTH_REQUIRE_REDIS";

/// Whether the calling test must be skipped because `redis-server` is not
/// installed. Says so on the terminal, past the test harness's capture: the
/// hint once per test file, then the name of each test skipped. With
/// [`REQUIRE_REDIS`] set, a missing server is a failure instead.
pub fn missing() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    let installed = *INSTALLED.get_or_init(|| {
        Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if installed {
        return false;
    }
    assert!(
        std::env::var_os(REQUIRE_REDIS).is_none(),
        "redis-server is not installed, and {REQUIRE_REDIS} is set: the Redis tests must run \
         (apt-get install redis-server)"
    );
    static HINT: Once = Once::new();
    let test = std::thread::current()
        .name()
        .unwrap_or("a Redis test")
        .to_owned();
    let mut terminal = std::io::stderr().lock();
    HINT.call_once(|| {
        let _ = writeln!(
            terminal,
            "\nnote: redis-server is not installed, so the Redis tests named below did not \
             run; install it to run them (Debian: apt-get install redis-server)"
        );
    });
    let _ = writeln!(terminal, "note: skipped {test} (needs redis-server)");
    true
}

/// Calls per command a server served since its statistics were last reset
/// (`INFO commandstats`; the commands scripts ran count too).
pub fn command_calls(con: &mut redis::Connection) -> std::collections::HashMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// Zeroes a server's command statistics (`CONFIG RESETSTAT`).
pub fn reset_stats(con: &mut redis::Connection) {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con).unwrap();
}

pub struct RedisServer {
    pub port: u16,
    password: Option<String>,
    /// Certificate files (cert, key, CA) when serving TLS only.
    tls: Option<[String; 3]>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a fresh server; panics with what to install if there is none.
    pub fn start() -> RedisServer {
        Self::start_with(None)
    }

    /// Starts a server that requires `password` (`requirepass`).
    pub fn start_with_password(password: &str) -> RedisServer {
        Self::start_with(Some(password.to_owned()))
    }

    /// Starts a server that speaks TLS only, with the given certificate,
    /// key and CA files.
    pub fn start_tls(cert: &str, key: &str, ca: &str) -> RedisServer {
        let mut server = Self::unstarted(None);
        server.tls = Some([cert.into(), key.into(), ca.into()]);
        server.restart();
        server
    }

    fn start_with(password: Option<String>) -> RedisServer {
        let mut server = Self::unstarted(password);
        server.restart();
        server
    }

    fn unstarted(password: Option<String>) -> RedisServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        RedisServer {
            port,
            password,
            tls: None,
            child: None,
        }
    }

    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}", self.port),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    /// Starts the server (again) on its port and waits until it accepts.
    pub fn restart(&mut self) {
        let mut command = Command::new("redis-server");
        command.args(["--bind", "127.0.0.1"]);
        match &self.tls {
            None => command.args(["--port", &self.port.to_string()]),
            Some([cert, key, ca]) => command
                .args(["--port", "0", "--tls-port", &self.port.to_string()])
                .args(["--tls-cert-file", cert, "--tls-key-file", key])
                .args(["--tls-ca-cert-file", ca, "--tls-auth-clients", "no"]),
        };
        command.args(["--save", "", "--appendonly", "no", "--protected-mode", "no"]);
        if let Some(p) = &self.password {
            command.args(["--requirepass", p]);
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is needed for these tests (apt-get install redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (as a crash would).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Calls per command since the last [`reset_stats`](Self::reset_stats)
    /// (`INFO commandstats`).
    pub fn command_calls(&self) -> std::collections::HashMap<String, u64> {
        command_calls(&mut self.connection())
    }

    /// Zeroes the command statistics (`CONFIG RESETSTAT`).
    pub fn reset_stats(&self) {
        reset_stats(&mut self.connection());
    }

    /// A synchronous connection, for inspecting and tampering.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
