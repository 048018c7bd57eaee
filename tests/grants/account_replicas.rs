//! A person's login on replicas, as a web app on two of them runs it: a
//! login finished on one serves on the other at once, whatever that one
//! answered before and however long its page polled; the loser of a
//! double-submitted callback serves the winner's login at once; a sign-out
//! ends every token of the account on every replica before it answers, and
//! a new login after it, begun and finished anywhere, serves everywhere at
//! once. On a real redis-server, and on one `FileStore` file shared by two
//! layers that share nothing else (as two processes do). The layers keep
//! the default back-off (1 s, doubling), under which a "no login" answer
//! backed off would send the person to log in again.

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::login_server::LoginServer;
use tower_oauth::{store::FileStore, OAuthLayer, TokenErrorKind, TokenParams};

use super::accounts::{builder, on_one_file, sign_in, token_requests, CALLBACK};

/// What a page's request through `oauth` as `account` got: the person the
/// API saw and the serial of the token it carried, or the layer's error.
#[derive(Clone, Debug, PartialEq)]
enum Page {
    Served { user: String, serial: u64 },
    Refused(u16),
    Failed(TokenErrorKind),
}

impl Page {
    fn user(&self) -> Option<&str> {
        match self {
            Page::Served { user, .. } => Some(user),
            _ => None,
        }
    }
}

/// `api`: the API's URL.
async fn page(oauth: &OAuthLayer, api: &str, account: &str) -> Page {
    use tower::ServiceExt;
    let mut request = support::get(api);
    request
        .extensions_mut()
        .insert(TokenParams::new().account(account));
    let response = match support::client(oauth).oneshot(request).await {
        Ok(response) => response,
        Err(e) => {
            let e = e
                .downcast::<tower_oauth::TokenError>()
                .expect("a TokenError");
            return Page::Failed(e.kind());
        }
    };
    let (status, body) = support::read(response).await;
    let body: Value = serde_json::from_str(&body).unwrap_or_default();
    match (
        status.as_u16(),
        body["user"].as_str(),
        body["serial"].as_u64(),
    ) {
        (200, Some(user), Some(serial)) => Page::Served {
            user: user.to_owned(),
            serial,
        },
        (status, _, _) => Page::Refused(status),
    }
}

fn served(user: &str) -> impl Fn(&Page) -> bool + '_ {
    move |page| page.user() == Some(user)
}

const NO_LOGIN: Page = Page::Failed(TokenErrorKind::LoginRequired);

/// Bob's first request lands on `b`, which has no login for him; his page
/// polls `b` every 150 ms while he is at the server's login page (3 s,
/// past the first back-offs of the defaults); his callback lands on `a`.
/// Every poll that begins after `finish_login` answered is served as bob,
/// on `b` as on `a`, and the next request on each at once.
async fn a_page_polls_while_the_person_logs_in(
    a: &OAuthLayer,
    b: &OAuthLayer,
    server: &LoginServer,
) {
    let url = b.begin_login("bob", CALLBACK).await.unwrap();
    let done: Arc<Mutex<Option<Instant>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let polled_after = Arc::new(AtomicU64::new(0));
    let polls = {
        let (b, done, stop) = (b.clone(), Arc::clone(&done), Arc::clone(&stop));
        let (api, polled_after) = (server.api_url(), Arc::clone(&polled_after));
        tokio::spawn(async move {
            let mut answers = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let after = done.lock().unwrap().is_some_and(|at| at <= started);
                answers.push((after, page(&b, &api, "bob").await));
                polled_after.fetch_add(u64::from(after), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            answers
        })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    let callback = LoginServer::sign_in(&url, "bob").await;
    a.finish_login("bob", &callback).await.unwrap();
    *done.lock().unwrap() = Some(Instant::now());
    assert!(served("bob")(&page(b, &server.api_url(), "bob").await));
    assert!(served("bob")(&page(a, &server.api_url(), "bob").await));
    // Until the page polled twice more (however slow the machine).
    let deadline = Instant::now() + Duration::from_secs(30);
    while polled_after.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let answers = polls.await.unwrap();
    let before: Vec<&Page> = answers.iter().filter(|(a, _)| !a).map(|(_, p)| p).collect();
    let after: Vec<&Page> = answers.iter().filter(|(a, _)| *a).map(|(_, p)| p).collect();
    assert!(!before.is_empty(), "{answers:?}");
    assert!(after.len() >= 2, "{answers:?}");
    for page in &before {
        assert!(**page == NO_LOGIN || served("bob")(page), "{answers:?}");
    }
    assert!(after.iter().all(|p| served("bob")(p)), "{answers:?}");
    // One code exchange; nothing else was sent.
    assert_eq!(server.logins(), 1);
    assert_eq!(token_requests(server), 1);
}

/// The browser submits `person`'s callback twice, to `a` and to `b` at
/// once, after both answered "no login": one `finish_login` succeeds, the
/// other finds the callback taken (`LoginFailed`), and each replica serves
/// the person the moment its own `finish_login` answered.
async fn a_callback_submitted_twice(
    a: &OAuthLayer,
    b: &OAuthLayer,
    server: &LoginServer,
    person: &str,
) {
    let url = a.begin_login(person, CALLBACK).await.unwrap();
    for oauth in [a, b] {
        assert_eq!(page(oauth, &server.api_url(), person).await, NO_LOGIN);
    }
    let callback = LoginServer::sign_in(&url, person).await;
    let finish = |oauth: &OAuthLayer| {
        let (oauth, callback, person) = (oauth.clone(), callback.clone(), person.to_owned());
        let api = server.api_url();
        tokio::spawn(async move {
            let finished = oauth.finish_login(&person, &callback).await;
            let next = page(&oauth, &api, &person).await;
            (finished.map_err(|e| e.kind()), next)
        })
    };
    let (on_a, on_b) = (finish(a), finish(b));
    let (on_a, on_b) = (on_a.await.unwrap(), on_b.await.unwrap());
    let oks = [&on_a, &on_b].iter().filter(|(r, _)| r.is_ok()).count();
    assert_eq!(oks, 1, "{on_a:?} {on_b:?}");
    for (finished, next) in [&on_a, &on_b] {
        if let Err(kind) = finished {
            assert_eq!(*kind, TokenErrorKind::LoginFailed);
        }
        assert!(served(person)(next), "{on_a:?} {on_b:?}");
    }
}

/// Alice signs in and out `rounds` times, each login begun on one replica
/// and finished on the other, each sign-out on one of them, while pages
/// poll both replicas as alice and as bob (who stays signed in). After each
/// login, both replicas serve her at once; after each sign-out, both
/// answer "no login" at once, and (`everywhere`) no request that began
/// after the sign-out answered carried a token of hers issued before it.
async fn sign_outs_and_sign_ins(
    replicas: [&OAuthLayer; 2],
    server: &LoginServer,
    rounds: usize,
    everywhere: bool,
) {
    sign_in(replicas[0], replicas[1], "bob", "bob").await;
    // Tokens of alice's issued below this serial ended with the last sign-out.
    let cutoff = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let watched = if everywhere {
        &replicas[..]
    } else {
        &replicas[..1]
    };
    let pollers: Vec<_> = watched
        .iter()
        .enumerate()
        .map(|(i, oauth)| {
            let (oauth, cutoff, stop) = ((*oauth).clone(), Arc::clone(&cutoff), Arc::clone(&stop));
            let (violations, api) = (Arc::clone(&violations), server.api_url());
            tokio::spawn(async move {
                let mut polls = 0;
                while !stop.load(Ordering::SeqCst) {
                    let ended_below = cutoff.load(Ordering::SeqCst);
                    if let Page::Served { user, serial } = page(&oauth, &api, "alice").await {
                        if user != "alice" || serial < ended_below {
                            violations.lock().unwrap().push(format!(
                                "replica {i} sent {user}'s token {serial} after the sign-out \
                                 below {ended_below}"
                            ));
                        }
                    }
                    let bob = page(&oauth, &api, "bob").await;
                    if bob.user() != Some("bob") {
                        violations
                            .lock()
                            .unwrap()
                            .push(format!("bob on {i}: {bob:?}"));
                    }
                    polls += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                polls
            })
        })
        .collect();
    for round in 0..rounds {
        let (first, second) = (replicas[round % 2], replicas[(round + 1) % 2]);
        let url = first.begin_login("alice", CALLBACK).await.unwrap();
        let callback = LoginServer::sign_in(&url, "alice").await;
        second.finish_login("alice", &callback).await.unwrap();
        for oauth in replicas {
            let answer = page(oauth, &server.api_url(), "alice").await;
            assert!(served("alice")(&answer), "round {round}: {answer:?}");
        }
        // (Without news, on the watched one.)
        let signing_out = match everywhere {
            true => replicas[(round / 2) % 2],
            false => replicas[0],
        };
        signing_out.sign_out("alice").await.unwrap();
        cutoff.store(server.next_serial(), Ordering::SeqCst);
        let at_once = if everywhere {
            &replicas[..]
        } else {
            &[signing_out][..]
        };
        for (i, oauth) in at_once.iter().enumerate() {
            let answer = page(oauth, &server.api_url(), "alice").await;
            assert_eq!(answer, NO_LOGIN, "round {round}, replica {i}");
        }
        assert_eq!(server.revoked().len(), round + 1, "round {round}");
    }
    stop.store(true, Ordering::SeqCst);
    for poller in pollers {
        assert!(poller.await.unwrap() > 0, "the pages polled");
    }
    let violations = violations.lock().unwrap();
    assert!(violations.is_empty(), "{violations:?}");
    assert!(server.revoked().iter().all(|who| who == "alice"));
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_on_one_file_serve_a_login_finished_in_the_other_at_once() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let process = on_one_file(&server, "account-replicas-file");
    let (a, b) = (process(), process());
    a_page_polls_while_the_person_logs_in(&a, &b, &server).await;
    for person in ["carol", "dave", "erin"] {
        a_callback_submitted_twice(&a, &b, &server, person).await;
    }
    // The file tells no news: the other process sees a sign-out at its next
    // token request for the account, so only the signing-out one is
    // watched at once; a new login after it serves in both at once.
    sign_outs_and_sign_ins([&a, &b], &server, 6, false).await;
    let other = process();
    assert_eq!(page(&other, &server.api_url(), "alice").await, NO_LOGIN);
}

/// Two processes on one file: the test's, whose page polls, and a child
/// (this test binary, run again) that finishes the login, then one that
/// finishes a callback the test finishes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_finished_in_another_process_serves_here_at_once() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let dir = support::scratch("account-replicas-process");
    let here = builder(&server)
        .token_store(FileStore::new(dir.join("tokens")).unwrap())
        .build()
        .unwrap();
    let api = server.api_url();
    let child = |callback: &str, person: &str| {
        tokio::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "account_replicas::finishing_child",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env("ACCOUNT_CHILD_ISSUER", server.issuer())
            .env("ACCOUNT_CHILD_STORE", dir.join("tokens"))
            .env("ACCOUNT_CHILD_CALLBACK", callback)
            .env("ACCOUNT_CHILD_PERSON", person)
            .output()
    };
    // Bob's page polls here while he logs in; the child finishes it.
    let url = here.begin_login("bob", CALLBACK).await.unwrap();
    for _ in 0..8 {
        assert_eq!(page(&here, &api, "bob").await, NO_LOGIN);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let callback = LoginServer::sign_in(&url, "bob").await;
    let output = child(&callback, "bob").await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("finished: ok, then served bob"), "{stdout}");
    assert!(served("bob")(&page(&here, &api, "bob").await));
    // Carol's callback, submitted to both at once: one exchange, and
    // each process serves her once its own finish answered.
    let url = here.begin_login("carol", CALLBACK).await.unwrap();
    assert_eq!(page(&here, &api, "carol").await, NO_LOGIN);
    let callback = LoginServer::sign_in(&url, "carol").await;
    let (theirs, ours) = tokio::join!(child(&callback, "carol"), async {
        let finished = here.finish_login("carol", &callback).await;
        (
            finished.map_err(|e| e.kind()),
            page(&here, &api, "carol").await,
        )
    });
    let stdout = String::from_utf8_lossy(&theirs.as_ref().unwrap().stdout).into_owned();
    assert!(stdout.contains("then served carol"), "{stdout}");
    assert!(served("carol")(&ours.1), "{ours:?}");
    let child_ok = stdout.contains("finished: ok");
    match ours.0 {
        Ok(_) => assert!(!child_ok, "{stdout}"),
        Err(kind) => assert!(kind == TokenErrorKind::LoginFailed && child_ok, "{stdout}"),
    }
    assert_eq!(server.logins(), 2);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

/// The child of the test above: finishes a login through its own layer on
/// the same file, then asks for the person's page.
#[tokio::test]
#[ignore = "run by a_login_finished_in_another_process_serves_here_at_once"]
async fn finishing_child() {
    let var = |name: &str| std::env::var(name).expect("run by the parent test");
    let issuer = var("ACCOUNT_CHILD_ISSUER");
    let person = var("ACCOUNT_CHILD_PERSON");
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .protected_resource(format!("{issuer}/api"))
            .trusted_issuers([issuer.as_str()])
            .client_id(support::login_server::WEB_CLIENT)
            .client_secret(support::login_server::WEB_SECRET),
    )
    .token_store(FileStore::new(var("ACCOUNT_CHILD_STORE")).unwrap())
    .build()
    .unwrap();
    let finished = match oauth
        .finish_login(&person, var("ACCOUNT_CHILD_CALLBACK"))
        .await
    {
        Ok(_) => "ok".to_owned(),
        Err(e) => format!("{:?}", e.kind()),
    };
    let answer = page(&oauth, &format!("{issuer}/api"), &person).await;
    let user = answer.user().unwrap_or("nobody");
    println!("finished: {finished}, then served {user}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_one_layer_a_callback_submitted_twice_logs_in_once() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    a_callback_submitted_twice(&oauth, &oauth, &server, "frank").await;
    assert_eq!(server.logins(), 1);
    sign_outs_and_sign_ins([&oauth, &oauth], &server, 4, true).await;
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use support::login_server::Approve;
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;

    /// Waits (at most 30 s) until `n` replicas listen to the accounts' news
    /// and are listed as answering it.
    async fn watching(redis: &RedisServer, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let listed: usize = redis::cmd("ZCARD")
                .arg("tower-oauth:{accounts}:watchers")
                .query(&mut redis.connection())
                .unwrap();
            if listed >= n {
                return;
            }
            assert!(Instant::now() < deadline, "{listed} of {n} replicas watch");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn replicas(server: &LoginServer, redis: &RedisServer) -> (OAuthLayer, OAuthLayer) {
        let replica = || {
            builder(server)
                .token_store(RedisStore::new(redis.url()).unwrap())
                .build()
                .unwrap()
        };
        (replica(), replica())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_login_finished_on_one_replica_serves_on_the_other_at_once() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        let server = LoginServer::start(Duration::from_secs(60)).await;
        let (a, b) = replicas(&server, &redis);
        a_page_polls_while_the_person_logs_in(&a, &b, &server).await;
        for person in ["carol", "dave", "erin", "frank", "grace", "heidi"] {
            a_callback_submitted_twice(&a, &b, &server, person).await;
        }
        // One exchange per person: the loser sent nothing.
        assert_eq!(server.logins(), 7);
        assert_eq!(token_requests(&server), 7);
        assert!(server.violations().is_empty(), "{:?}", server.violations());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn twenty_sign_outs_and_sign_ins_on_alternating_replicas() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        let server = LoginServer::start(Duration::from_secs(60)).await;
        let (a, b) = replicas(&server, &redis);
        sign_outs_and_sign_ins([&a, &b], &server, 20, true).await;
    }

    /// Each "no login" answer costs at most one Redis read: the chain and
    /// its lock, in one script. No lock is taken, no chain or token read
    /// beside it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_login_is_one_read_of_the_store() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        let server = LoginServer::start(Duration::from_secs(60)).await;
        let (a, _b) = replicas(&server, &redis);
        assert_eq!(page(&a, &server.api_url(), "nobody").await, NO_LOGIN);
        // The watch of the accounts' news begins with the first account, and
        // forgets what it holds once it listens: measured after that.
        watching(&redis, 1).await;
        let before = redis.command_calls();
        let started = Instant::now();
        let answers = 200;
        for _ in 0..answers {
            assert_eq!(page(&a, &server.api_url(), "nobody").await, NO_LOGIN);
        }
        let elapsed = started.elapsed();
        let after = redis.command_calls();
        let delta = |name: &str| after.get(name).unwrap_or(&0) - before.get(name).unwrap_or(&0);
        // Each watching replica's heartbeat is a script too, every second.
        let heartbeats = 2 * (elapsed.as_millis() as u64 / 1000 + 2);
        assert!(
            delta("evalsha") + delta("eval") <= answers + heartbeats,
            "{} scripts for {answers} answers in {elapsed:?}",
            delta("evalsha") + delta("eval")
        );
        // The script's own commands (Redis counts them too): the chain read
        // and its lock looked at, once an answer.
        assert!(
            delta("get") <= answers && delta("exists") <= answers,
            "{before:?} {after:?}"
        );
        for command in ["set", "del", "getdel", "publish", "subscribe"] {
            assert_eq!(delta(command), 0, "{command}");
        }
        assert_eq!(token_requests(&server), 0);
    }

    /// Whatever came before a sign-out (a refresh under way on the other
    /// replica, a code not yet exchanged there, a failed login), once it
    /// answers `Ok` no request on either replica carries the account's
    /// token, and a new login serves at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sign_out_ends_every_token_whatever_came_before() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        // Tokens of 4 s, renewed 2 s ahead: a renewal begins 2 s in.
        let server = LoginServer::start(Duration::from_secs(4)).await;
        let replica = || {
            builder(&server)
                .token_store(RedisStore::new(redis.url()).unwrap())
                .refresh_margin(Duration::from_secs(2))
                .build()
                .unwrap()
        };
        let (a, b) = (replica(), replica());
        let ended = |server: &LoginServer| server.next_serial();
        let no_old_token = async |cutoff: u64| {
            for oauth in [&a, &b] {
                match page(oauth, &server.api_url(), "alice").await {
                    Page::Served { serial, .. } => assert!(serial >= cutoff),
                    other => assert_eq!(other, NO_LOGIN),
                }
            }
        };
        // A refresh under way on A, slowed at the server, when B signs out.
        sign_in(&b, &a, "alice", "alice").await;
        // Each replica's watch of the accounts' news begins with its first
        // account, and drops what it holds once it listens: A takes the
        // stored token again then, and holds it.
        watching(&redis, 2).await;
        assert!(served("alice")(&page(&a, &server.api_url(), "alice").await));
        tokio::time::sleep(Duration::from_millis(2_100)).await;
        server.delay_tokens(Duration::from_millis(700));
        let seen = server.arrivals("refresh_token");
        assert!(served("alice")(&page(&a, &server.api_url(), "alice").await));
        server.arrived("refresh_token", seen).await;
        let refreshes = server.refreshes();
        b.sign_out("alice").await.unwrap();
        let cutoff = ended(&server);
        for oauth in [&a, &b] {
            assert_eq!(page(oauth, &server.api_url(), "alice").await, NO_LOGIN);
        }
        assert_eq!(server.refreshes(), refreshes + 1, "the renewal ran");
        assert_eq!(server.revoked(), ["alice"]);
        no_old_token(cutoff).await;
        // A code not yet exchanged on A (the exchange slowed) when B signs
        // out: the sign-out waits for it, and ends the login it began.
        let url = a.begin_login("alice", CALLBACK).await.unwrap();
        let callback = LoginServer::sign_in(&url, "alice").await;
        let seen = server.arrivals("authorization_code");
        let finishing = {
            let (a, callback) = (a.clone(), callback.clone());
            tokio::spawn(async move { a.finish_login("alice", &callback).await })
        };
        server.arrived("authorization_code", seen).await;
        b.sign_out("alice").await.unwrap();
        let cutoff = ended(&server);
        for oauth in [&a, &b] {
            assert_eq!(page(oauth, &server.api_url(), "alice").await, NO_LOGIN);
        }
        let _ = finishing.await.unwrap();
        for oauth in [&a, &b] {
            assert_eq!(page(oauth, &server.api_url(), "alice").await, NO_LOGIN);
        }
        assert_eq!(server.revoked(), ["alice", "alice"]);
        no_old_token(cutoff).await;
        server.delay_tokens(Duration::ZERO);
        // A refused login, then a sign-out, then a login that serves.
        server.approve(Approve::Deny);
        let url = b.begin_login("alice", CALLBACK).await.unwrap();
        let callback = LoginServer::sign_in(&url, "alice").await;
        let e = a.finish_login("alice", &callback).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
        a.sign_out("alice").await.unwrap();
        server.approve(Approve::Yes);
        sign_in(&a, &b, "alice", "alice").await;
        for oauth in [&a, &b] {
            assert!(served("alice")(
                &page(oauth, &server.api_url(), "alice").await
            ));
        }
        assert!(server.violations().is_empty(), "{:?}", server.violations());
    }
}
