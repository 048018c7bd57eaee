//! The Redis store's Lua scripts: each runs on the node that owns its keys,
//! so that a cluster follows it, and is made (its digest computed) once per
//! store.

use redis::Script;

/// Reads the shared token (`KEYS[1]`) and failure (`KEYS[2]`) with their
/// remaining times, at one instant. A script rather than `MULTI`: a Redis
/// Cluster client follows a script to the node owning its keys (and follows
/// it again after a failover), which it does not do for a transaction.
const READ: &str = r#"
return {
    redis.call("GET", KEYS[1]), redis.call("PTTL", KEYS[1]),
    redis.call("GET", KEYS[2]), redis.call("PTTL", KEYS[2])
}
"#;

/// Reads a refresh-token chain (`KEYS[1]`) and whether its lock
/// (`KEYS[2]`, the same hash slot) is held: what an account without a login
/// reads once before it answers "no login".
const CHAIN: &str = r#"
return { redis.call("GET", KEYS[1]), redis.call("EXISTS", KEYS[2]) }
"#;

/// Stores `ARGV[1]` under `KEYS[1]` for `ARGV[2]` ms, deletes `KEYS[2]` (a
/// stale failure, when a token is stored) and publishes `ARGV[4]` on the
/// channel `ARGV[3]`, waking the waiting replicas.
const STORE: &str = r#"
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
if KEYS[2] then
    redis.call("DEL", KEYS[2])
end
redis.call("PUBLISH", ARGV[3], ARGV[4])
return 1
"#;

/// Deletes a key only if it still holds the value given: the lock for its
/// holder, the shared token only if it is still the refused one.
const DELETE_IF_EQUAL: &str = r#"
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("DEL", KEYS[1])
end
return 0
"#;

/// Takes the lock `KEYS[1]` for the nonce `ARGV[1]`, for `ARGV[2]` ms: when
/// it is free, or holds that nonce already (an earlier try whose reply came
/// late). 1 if taken, else 0.
const LOCK: &str = r#"
local holder = redis.call("GET", KEYS[1])
if not holder then
    redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
    return 1
end
if holder == ARGV[1] then
    redis.call("PEXPIRE", KEYS[1], ARGV[2])
    return 1
end
return 0
"#;

/// Takes the pending login `KEYS[1]` once: its value, moved to the taker's
/// own key `KEYS[2]` (the same hash slot) for `ARGV[1]` ms, so that a try
/// again whose first reply came late finds it there. Else what `KEYS[2]`
/// holds (nil: none).
const TAKE: &str = r#"
local value = redis.call("GET", KEYS[1])
if value then
    redis.call("SET", KEYS[2], value, "PX", ARGV[1])
    redis.call("DEL", KEYS[1])
    return value
end
return redis.call("GET", KEYS[2])
"#;

/// Extends the lock `KEYS[1]` to `ARGV[2]` ms from now if it still holds
/// its holder's nonce `ARGV[1]`: 1, else 0 (it ran out, or another holds it).
const EXTEND: &str = r#"
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
"#;

/// Stores the chain `ARGV[1]` under `KEYS[1]` for `ARGV[3]` ms only while
/// `KEYS[1]` still holds `ARGV[2]`, the value its writer read (`""`: none),
/// or already `ARGV[1]` (a write tried again): a writer that stalled past
/// its lock writes nothing over what came after, a sign-out or another
/// replica's rotation. Then, in the same step, publishes `ARGV[5]` (unless
/// empty) on the channel `ARGV[4]`: the news of the write reaches the
/// replicas with it. 1 if written, else 0.
const SAVE_FENCED: &str = r#"
local now = redis.call("GET", KEYS[1]) or ""
if now ~= ARGV[2] and now ~= ARGV[1] then
    return 0
end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[3])
if ARGV[5] ~= "" then
    redis.call("PUBLISH", ARGV[4], ARGV[5])
end
return 1
"#;

/// Puts `ARGV[1]` in the list `KEYS[1]` until `ARGV[2]` ms from now, by
/// Redis's clock; those whose time ran out leave it, and the list itself
/// runs out with its last member (no key outlives its replicas). Returns
/// the store's epoch `KEYS[2]`, begun as `ARGV[3]` and Redis's time when
/// missing (a Redis that restarted empty, or was flushed, has a new one),
/// kept for `ARGV[4]` ms from each beat.
const HEARTBEAT: &str = r#"
local t = redis.call("TIME")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
redis.call("ZADD", KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call("PEXPIRE", KEYS[1], ARGV[2])
redis.call("SET", KEYS[2], ARGV[3] .. " " .. now, "NX")
redis.call("PEXPIRE", KEYS[2], ARGV[4])
return redis.call("GET", KEYS[2])
"#;

/// How long ago the store's epoch `KEYS[1]` began, in ms by Redis's clock;
/// without one (a Redis that lost its data, before any replica's beat), it
/// begins now, as `ARGV[1]`, for `ARGV[2]` ms, and the answer is 0.
const EPOCH_AGE: &str = r#"
local t = redis.call("TIME")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local epoch = redis.call("GET", KEYS[1])
if not epoch then
    redis.call("SET", KEYS[1], ARGV[1] .. " " .. now, "PX", ARGV[2])
    return 0
end
local born = tonumber(string.match(epoch, " (%d+)$")) or 0
return now - born
"#;

/// Links `ARGV[2]` as member `ARGV[1]` of the hash `KEYS[1]`, for
/// `ARGV[3]` ms, its link time (by Redis's clock) in the sorted set
/// `KEYS[2]` (the same hash slot): the members whose time ran out go, then
/// past `ARGV[4]` members the oldest, and both keys run out with the last
/// link. One script, not `MULTI`: a cluster client follows it to its node.
const LINK: &str = r#"
local t = redis.call("TIME")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local ttl = tonumber(ARGV[3])
for _, m in ipairs(redis.call("ZRANGEBYSCORE", KEYS[2], "-inf", now - ttl)) do
    redis.call("HDEL", KEYS[1], m)
end
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now - ttl)
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
redis.call("ZADD", KEYS[2], now, ARGV[1])
local extra = redis.call("ZCARD", KEYS[2]) - tonumber(ARGV[4])
if extra > 0 then
    for _, m in ipairs(redis.call("ZRANGE", KEYS[2], 0, extra - 1)) do
        redis.call("HDEL", KEYS[1], m)
    end
    redis.call("ZREMRANGEBYRANK", KEYS[2], 0, extra - 1)
end
redis.call("PEXPIRE", KEYS[1], ttl)
redis.call("PEXPIRE", KEYS[2], ttl)
return 1
"#;

/// Removes member `ARGV[1]` from the hash `KEYS[1]` and the sorted set
/// `KEYS[2]` that [`LINK`] keeps.
const UNLINK: &str = r#"
redis.call("HDEL", KEYS[1], ARGV[1])
redis.call("ZREM", KEYS[2], ARGV[1])
return 1
"#;

/// Adds `ARGV[1]` to the answers `KEYS[1]`, which expire `ARGV[2]` ms
/// from now.
const ANSWER: &str = r#"
redis.call("SADD", KEYS[1], ARGV[1])
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return 1
"#;

/// How many replicas in the list `KEYS[1]` (those whose heartbeat has not
/// run out) have not answered in `KEYS[2]`.
const UNANSWERED: &str = r#"
local t = redis.call("TIME")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
local missing = 0
for _, id in ipairs(redis.call("ZRANGE", KEYS[1], 0, -1)) do
    if redis.call("SISMEMBER", KEYS[2], id) == 0 then
        missing = missing + 1
    end
end
return missing
"#;

/// The store's Lua scripts, their digests computed once.
#[derive(Clone)]
pub(super) struct Scripts {
    pub(super) read: Script,
    pub(super) chain: Script,
    pub(super) store: Script,
    pub(super) delete_if_equal: Script,
    pub(super) lock: Script,
    pub(super) take: Script,
    pub(super) extend: Script,
    pub(super) save_fenced: Script,
    pub(super) heartbeat: Script,
    pub(super) epoch_age: Script,
    pub(super) answer: Script,
    pub(super) unanswered: Script,
    pub(super) link: Script,
    pub(super) unlink: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Scripts {
            read: Script::new(READ),
            chain: Script::new(CHAIN),
            store: Script::new(STORE),
            delete_if_equal: Script::new(DELETE_IF_EQUAL),
            lock: Script::new(LOCK),
            take: Script::new(TAKE),
            extend: Script::new(EXTEND),
            save_fenced: Script::new(SAVE_FENCED),
            heartbeat: Script::new(HEARTBEAT),
            epoch_age: Script::new(EPOCH_AGE),
            answer: Script::new(ANSWER),
            unanswered: Script::new(UNANSWERED),
            link: Script::new(LINK),
            unlink: Script::new(UNLINK),
        }
    }
}
