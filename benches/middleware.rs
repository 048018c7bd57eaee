//! The warm path through `OAuthMiddleware` against a reqwest middleware
//! that adds a fixed `Authorization` header (the floor), each in front of a
//! last middleware that answers at once (no network: what is measured is
//! the middleware), with the resend after a refusal on (the default) and
//! off, timed in turns (`support/turns.rs`): the medians and fastest
//! tenths of this run, with their ratios to the floor.
//!
//! `cargo bench --bench middleware --features reqwest-middleware`;
//! `-- <rounds> <burst>` to change the defaults (1,001 rounds of 2,000
//! requests, as `side_by_side`: with 401 rounds of 500 the medians of five
//! runs spread over 4 % of the floor, with these over about 1.5 %).

#[path = "../tests/support/reqwest_client.rs"]
mod reqwest_client;
#[path = "../tests/support/services.rs"]
mod services;
#[path = "support/turns.rs"]
mod turns;

#[path = "support/middlewares.rs"]
mod middlewares;

use std::time::Instant;

use middlewares::{client, FixedHeader};

fn main() {
    let (rounds, burst) = turns::rounds_and_burst(1001, 2000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let oauth = services::warm_layer(&rt);
    let contenders = [
        (
            "fixed_header",
            client(FixedHeader(services::fixed_header())),
        ),
        ("oauth", client(oauth.middleware())),
        (
            "oauth_without_resend",
            client(oauth.middleware().resend(false)),
        ),
    ];
    let url = "http://api.example/products/42";
    let times = turns::take_turns(contenders.len(), rounds, |i| {
        let client = &contenders[i].1;
        let start = Instant::now();
        for _ in 0..burst {
            rt.block_on(client.get(url).send()).unwrap();
        }
        start.elapsed().as_secs_f64() * 1e9 / burst as f64
    });
    let names: Vec<&str> = contenders.iter().map(|c| c.0).collect();
    let title = format!("reqwest_middleware, {rounds} rounds of {burst} requests");
    turns::report(&title, &names, &times, 1);
}
