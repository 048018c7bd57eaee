//! Fleets on a Redis Cluster: replicas share one token, and one token
//! request, through `RedisStore::cluster`, and ride out a master failing
//! over. Each test runs its own cluster of `redis-server` processes on free
//! ports of 127.0.0.1.

#![cfg(feature = "redis-cluster")]

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::fleet::{reported, tokens_at_once};
use support::redis_cluster::RedisCluster;
use support::*;
use tower::ServiceExt;
use tower_oauth::{store::RedisStore, ConfigErrorKind, OAuthLayer};

const HOUR: Duration = Duration::from_secs(3600);

fn replica(authority: &Authority, cluster: &RedisCluster, prefix: &str) -> OAuthLayer {
    builder(authority)
        .token_store(RedisStore::cluster(cluster.urls()).unwrap().prefix(prefix))
        .fetch_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

/// A cluster of `masters` masters with `replicas` replicas each, or `None`
/// when the test must be skipped (no `redis-server`).
async fn cluster(masters: usize, replicas: usize) -> Option<RedisCluster> {
    if support::redis_server::missing() {
        return None;
    }
    Some(
        tokio::task::spawn_blocking(move || RedisCluster::start(masters, replicas))
            .await
            .unwrap(),
    )
}

/// The slot Redis Cluster puts `key` in.
fn slot(cluster: &RedisCluster, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut cluster.connection(0))
        .unwrap()
}

/// The shared token's key under `prefix` (the one without a suffix).
fn token_key(cluster: &RedisCluster, prefix: &str) -> String {
    cluster
        .values(prefix)
        .into_iter()
        .map(|(key, _)| key)
        .find(|key| key.ends_with('}'))
        .expect("no token stored")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_one_token_through_a_cluster() {
    let Some(cluster) = cluster(3, 0).await else {
        return;
    };
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.set_delay(Duration::from_millis(100));
    let replicas: Vec<_> = (0..8)
        .map(|_| replica(&authority, &cluster, "c1:"))
        .collect();
    let tokens = tokens_at_once(&replicas).await;
    assert_eq!(authority.token_requests(), 1, "eight replicas, one request");
    assert!(tokens.iter().all(|(t, _)| t == &tokens[0].0));
    let stats: Vec<_> = replicas.iter().map(OAuthLayer::stats).collect();
    assert_eq!(
        stats.iter().map(|s| s.store_fetched_for_fleet).sum::<u64>(),
        1
    );
    assert_eq!(stats.iter().map(|s| s.store_took_shared).sum::<u64>(), 7);
    assert_eq!(stats.iter().map(|s| s.store_fell_back).sum::<u64>(), 0);

    // Every key of the token in one slot: the reads stay atomic and the
    // scripts may touch them.
    let key = token_key(&cluster, "c1:");
    let slots: Vec<u16> = ["", ":failure", ":lock", ":landed"]
        .iter()
        .map(|suffix| slot(&cluster, &format!("{key}{suffix}")))
        .collect();
    assert!(slots.iter().all(|&s| s == slots[0]), "{key}: {slots:?}");
    // Stored sealed: the token is not in it.
    for (_, value) in cluster.values("c1:") {
        assert!(value.starts_with("sealed2."), "{value}");
        assert!(!value.contains(tokens[0].0.expose_token()));
        assert!(!value.contains(CLIENT_SECRET));
    }

    // A token refused on one replica is dropped from the cluster (by a
    // script on the key's node) and renewed once for all.
    let url = authority.api_url("/p");
    authority.revoke_all();
    let (a, b) = (&replicas[0], &replicas[1]);
    assert_eq!(client(a).oneshot(get(&url)).await.unwrap().status(), 401);
    assert_eq!(client(a).oneshot(get(&url)).await.unwrap().status(), 200);
    assert_eq!(client(b).oneshot(get(&url)).await.unwrap().status(), 401);
    assert_eq!(client(b).oneshot(get(&url)).await.unwrap().status(), 200);
    assert_eq!(authority.token_requests(), 2);
    assert_eq!(a.token().await.unwrap(), b.token().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_is_shared_through_a_cluster() {
    let Some(cluster) = cluster(3, 0).await else {
        return;
    };
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.push_faults([fault(503, r#"{"error":"temporarily_unavailable"}"#)]);
    let replicas: Vec<_> = (0..4)
        .map(|_| replica(&authority, &cluster, "c2:"))
        .collect();
    for r in &replicas {
        let e = r.token().await.unwrap_err();
        assert_eq!(e.status().map(|s| s.as_u16()), Some(503));
    }
    assert_eq!(
        authority.token_requests(),
        1,
        "the others take the stored failure"
    );
}

#[test]
fn cluster_urls_are_checked_and_never_shown() {
    let none: [&str; 0] = [];
    let e = RedisStore::cluster(none).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::InvalidUrl);
    assert!(e.to_string().contains("at least one"), "{e}");

    let e = RedisStore::cluster(["redis://:hunter2@127.0.0.1:7000", "nonsense://:hunter2@x"])
        .unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::InvalidUrl);
    assert!(!e.to_string().contains("hunter2"), "{e}");

    let store = RedisStore::cluster(["redis://:hunter2@127.0.0.1:7000"]).unwrap();
    assert!(!format!("{store:?}").contains("hunter2"));
}

/// How long the process fleet runs.
const FLEET_RUN: Duration = Duration::from_secs(30);

/// Run as a separate process by
/// `a_fleet_of_processes_rides_out_a_failover_and_a_restart`: sends a
/// request every 20 ms for the run, then prints what it saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a helper: run by a_fleet_of_processes_rides_out_a_failover_and_a_restart"]
async fn fleet_process() {
    let var = |name: &str| std::env::var(name).unwrap();
    let nodes: Vec<String> = var("FLEET_NODES").split(',').map(str::to_owned).collect();
    let layer = with_transport(
        OAuthLayer::builder()
            .auth_url(var("FLEET_AUTH_URL"))
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
    .token_store(RedisStore::cluster(nodes).unwrap().prefix("fleet:"))
    .fetch_timeout(Duration::from_secs(1))
    .build()
    .unwrap();
    let url = format!("{}/api/fleet", var("FLEET_AUTH_URL"));
    let service = client(&layer);
    let (mut ok, mut failed) = (0u64, 0u64);
    let started = Instant::now();
    while started.elapsed() < FLEET_RUN {
        match service.clone().oneshot(get(&url)).await {
            Ok(resp) if resp.status() == 200 => ok += 1,
            Ok(resp) => {
                failed += 1;
                eprintln!("request answered {}", resp.status());
            }
            Err(e) => {
                failed += 1;
                eprintln!("request failed: {e}");
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = layer.stats();
    println!(
        "FLEET-RESULT ok={ok} failed={failed} fetches={} took_shared={} \
         fetched_for_fleet={} waited={} fell_back={}",
        s.fetches,
        s.store_took_shared,
        s.store_fetched_for_fleet,
        s.store_waited,
        s.store_fell_back
    );
}

/// The fleet's processes, killed if the test ends early.
struct Children(Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A field of a `FLEET-RESULT` line.
fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_processes_rides_out_a_failover_and_a_restart() {
    let Some(mut cluster) = cluster(3, 1).await else {
        return;
    };
    let lifetime = Duration::from_secs(3);
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, lifetime).await;
    authority.set_delay(Duration::from_millis(100));
    let started = Instant::now();
    let mut children = Children(
        (0..8)
            .map(|_| {
                Command::new(std::env::current_exe().unwrap())
                    .args([
                        "redis_cluster::fleet_process",
                        "--exact",
                        "--ignored",
                        "--nocapture",
                    ])
                    .env("FLEET_AUTH_URL", authority.base_url())
                    .env("FLEET_NODES", cluster.urls().join(","))
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );

    // A third of the way in, the master holding the fleet's token dies; its
    // replica takes over. Two thirds in, the dead node comes back (as a
    // replica now).
    tokio::time::sleep(FLEET_RUN / 3).await;
    let key = token_key(&cluster, "fleet:");
    let killed = cluster.master_of(&key);
    cluster.kill(killed);
    let failed_at = started.elapsed();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.wait_until_healthy(Duration::from_secs(15));
        cluster
    })
    .await
    .unwrap();
    let took_over = cluster.master_of(&key);
    assert_ne!(took_over, killed, "no failover happened");
    println!(
        "master {killed} killed at {failed_at:?}; {took_over} took over at {:?}",
        started.elapsed()
    );
    let mut cluster = cluster;
    tokio::time::sleep((FLEET_RUN * 2 / 3).saturating_sub(started.elapsed())).await;
    cluster.restart(killed);
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.wait_until_healthy(Duration::from_secs(15));
        cluster
    })
    .await
    .unwrap();
    assert!(!cluster.is_master(killed), "it came back as a replica");
    println!("node {killed} back at {:?}", started.elapsed());

    let mut lines = Vec::new();
    for child in std::mem::take(&mut children.0) {
        let line = reported(child, "FLEET-RESULT").await;
        println!("FLEET-RESULT {line}");
        lines.push(line);
    }
    let sum = |name: &str| lines.iter().map(|l| field(l, name)).sum::<u64>();
    assert_eq!(sum("failed"), 0, "a request failed");
    assert_eq!(authority.api_refused(), 0, "a request was refused");
    assert!(sum("ok") > 8 * 500, "{} requests", sum("ok"));

    let times = authority.token_request_times();
    let first = times[0];
    let cold = times
        .iter()
        .filter(|t| t.duration_since(first) < Duration::from_secs(1))
        .count();
    assert_eq!(cold, 1, "the cold start made {cold} token requests");
    let n = times.len();
    println!(
        "8 processes, {FLEET_RUN:?} of {lifetime:?} tokens, a failover and a restart: \
         {n} token requests ({} fetched for the fleet, {} fetched alone while Redis \
         did not answer)",
        sum("fetched_for_fleet"),
        sum("fell_back")
    );
    // Every token request is one a replica made for the fleet or alone.
    assert_eq!(
        u64::try_from(n).unwrap(),
        sum("fetched_for_fleet") + sum("fell_back")
    );
    // The fleet fetches as often as one replica needs a token (first one
    // and renewals: its `fetches`), not eight times as often; while
    // the token's master is down, each replica may fetch alone once.
    let one_replica = lines.iter().map(|l| field(l, "fetches")).max().unwrap();
    assert!(
        sum("fetched_for_fleet") <= one_replica + 2,
        "{} fetched for the fleet; one replica needs {one_replica}",
        sum("fetched_for_fleet")
    );
    assert!(sum("fell_back") <= 2 * 8, "{} fell back", sum("fell_back"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_rides_out_a_failover_on_the_token_in_hand() {
    let Some(mut cluster) = cluster(3, 1).await else {
        return;
    };
    // 20 s tokens are renewed 9 to 10 s after they are issued, with 8 s or
    // more left: time to try Redis again for up to 4 s (two fetch timeouts)
    // before fetching alone.
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(20)).await;
    let replicas: Vec<OAuthLayer> = (0..8)
        .map(|_| {
            builder(&authority)
                .token_store(RedisStore::cluster(cluster.urls()).unwrap().prefix("c3:"))
                .fetch_timeout(Duration::from_secs(2))
                .build()
                .unwrap()
        })
        .collect();
    tokens_at_once(&replicas).await;
    let issued = Instant::now();
    assert_eq!(authority.token_requests(), 1);
    let senders = Senders::start(
        &replicas,
        &authority.api_url("/p"),
        issued + Duration::from_secs(14),
    );

    // The token's master dies just before the fleet's renewal point; the
    // renewal happens while its replica takes over.
    tokio::time::sleep(Duration::from_millis(8500).saturating_sub(issued.elapsed())).await;
    let key = token_key(&cluster, "c3:");
    cluster.kill(cluster.master_of(&key));
    let (_, failed) = senders.finish().await;
    assert_eq!(failed, 0, "a request failed");
    let stats: Vec<_> = replicas.iter().map(OAuthLayer::stats).collect();
    let fell_back: u64 = stats.iter().map(|s| s.store_fell_back).sum();
    println!(
        "renewal during a failover: {} token requests, {fell_back} fetched alone",
        authority.token_requests()
    );
    assert_eq!(fell_back, 0, "a replica fetched alone");
    // The first token and one renewal; or two renewals, when the renewal's
    // fetch lands while the token's master is down: its token cannot be
    // stored (or its write dies with the master before reaching the
    // replica), and the replica that takes the lock on the new master
    // fetches again. Which happens depends on where the kill falls in the
    // renewal, which a loaded machine moves; never more than that.
    let requests = authority.token_requests();
    assert!(
        (2..=3).contains(&requests),
        "the first token and one renewal (two, if the first could not be stored): {requests}"
    );
    assert_eq!(stats.iter().map(|s| s.renewals_ahead).sum::<u64>(), 8);
    drop(cluster);
}

/// Replicas refreshing one rotating refresh token through a cluster: the
/// chain sealed beside the token, under the chain's lock; no retired
/// refresh token sent, every request accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_a_refresh_token_chain_through_a_cluster() {
    let Some(cluster) = cluster(3, 0).await else {
        return;
    };
    let server = support::refresh_server::RefreshServer::start(Duration::from_secs(2)).await;
    let initial = server.login();
    let replicas: Vec<OAuthLayer> = (0..3)
        .map(|_| {
            with_transport(
                OAuthLayer::builder()
                    .token_url(server.token_url())
                    .client_id("cli-app")
                    .refresh_token(tower_oauth::grant::RefreshToken::new(initial.clone()))
                    .token_store(RedisStore::cluster(cluster.urls()).unwrap().prefix("rt:")),
            )
            .build()
            .unwrap()
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(5);
    let (ok, failed) = Senders::start(&replicas, &server.api_url(), until)
        .finish()
        .await;
    assert_eq!(failed, 0);
    assert!(ok > 200, "{ok}");
    assert_eq!(server.reuses(), 0);
    assert!(!server.is_revoked(&initial));
    let refreshes = server.refreshes();
    assert!((3..=9).contains(&refreshes), "{refreshes} refreshes");
    let values = cluster.values("rt:");
    assert!(
        values.iter().any(|(key, _)| key.ends_with(":chain")),
        "{values:?}"
    );
    for (key, value) in values {
        assert!(!value.contains("rt-login"), "{key}: {value}");
    }
}
