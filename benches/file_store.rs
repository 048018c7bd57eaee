//! A `FileStore` file as it grows: the cost of one write (the file read
//! whole, an entry changed, the file written beside it, synced and renamed
//! over it) with 1,000 and 10,000 accounts in it, and the file's size. Each
//! account holds one sealed entry of `per_account` bytes (500: an opaque
//! access token; 2,000: a token and a chain with an ID token), kept as a
//! pending login through the public `TokenStore` seam, which writes as
//! every other entry does.
//!
//! `cargo bench --bench file_store`

use std::time::{Duration, Instant};

use tower_oauth::store::{FileStore, TokenStore};

/// Writes timed per file.
const WRITES: usize = 15;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = std::env::temp_dir().join(format!("tower-oauth-bench-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "| accounts | bytes per account | file size | one write, median | slowest of {WRITES} |"
    );
    println!("|---|---|---|---|---|");
    for per_account in [500usize, 2_000] {
        for accounts in [1_000usize, 10_000] {
            let path = dir.join(format!("tokens-{accounts}-{per_account}"));
            let _ = std::fs::remove_file(&path);
            let store = FileStore::new(&path).unwrap();
            let value = "v".repeat(per_account);
            let hour = Duration::from_secs(3600);
            // The file as a real one of that many accounts: written once in
            // the store's own format (filling it through the store would
            // rewrite it whole at each of the thousands of writes).
            let until = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
                + 3_600_000;
            let entries: serde_json::Map<String, serde_json::Value> = (0..accounts)
                .map(|n| {
                    let entry = serde_json::json!({"value": value, "expires_ms": until});
                    (format!("{n:064x}"), entry)
                })
                .collect();
            let whole =
                serde_json::json!({"format": "tower-oauth/file-store/1", "entries": entries});
            std::fs::write(&path, whole.to_string()).unwrap();
            let size = std::fs::metadata(&path).unwrap().len();
            if let Err(e) = store.keep_pending_login("probe", &value, hour).await {
                println!(
                    "| {accounts} | {per_account} | {:.1} MB | fails closed: {e} | |",
                    size as f64 / 1e6
                );
                continue;
            }
            let mut times = Vec::with_capacity(WRITES);
            for n in 0..WRITES {
                let key = format!("write-{n}");
                let started = Instant::now();
                store.keep_pending_login(&key, &value, hour).await.unwrap();
                times.push(started.elapsed());
            }
            times.sort();
            let size = std::fs::metadata(&path).unwrap().len();
            println!(
                "| {accounts} | {per_account} | {:.1} MB | {:.1} ms | {:.1} ms |",
                size as f64 / 1e6,
                times[WRITES / 2].as_secs_f64() * 1e3,
                times[WRITES - 1].as_secs_f64() * 1e3
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
