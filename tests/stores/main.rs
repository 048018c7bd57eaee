//! Tokens shared by replicas through Redis: one server, a Cluster, Sentinel.

#[path = "../support/mod.rs"]
mod support;

mod redis;
mod redis_cluster;
mod redis_sentinel;
