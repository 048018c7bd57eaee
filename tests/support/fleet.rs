//! A cold fleet starting: every layer asks for its token at once, each on
//! its own task.

#![allow(dead_code, unreachable_pub)]

use std::time::Instant;

use tower_oauth::{AccessToken, OAuthLayer};

/// The token of each of `layers`, asked for all at once, with the moment
/// each had it.
pub async fn tokens_at_once(layers: &[OAuthLayer]) -> Vec<(AccessToken, Instant)> {
    let tasks: Vec<_> = layers
        .iter()
        .map(|layer| {
            let layer = layer.clone();
            tokio::spawn(async move { (layer.token().await.unwrap(), Instant::now()) })
        })
        .collect();
    let mut tokens = Vec::new();
    for t in tasks {
        tokens.push(t.await.unwrap());
    }
    tokens
}

/// What a replica process reported: waits for `child` to end (it must
/// succeed) and returns what follows `marker` on the line of its output
/// that holds it.
pub async fn reported(child: std::process::Child, marker: &str) -> String {
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(out.status.success(), "a replica process failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|line| {
            line.split_once(marker)
                .map(|(_, rest)| rest.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no {marker} line in {stdout}"))
}
