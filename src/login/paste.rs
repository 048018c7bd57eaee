//! The address a person pastes when the browser runs on another machine
//! (over SSH, in a container, a remote IDE) and cannot reach the listener:
//! a source of lines read while the listener waits, each line's query
//! checked as a callback is; and standard input as such a source.

use std::io::{BufRead, Read};
use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, Mutex};

use super::authorization::{callback_query, Came, MAX_CALLBACK_LEN};
use crate::support::boxed::BoxFuture;

/// Gives the next line a person pasted; `None` when the source has no more.
pub(crate) type Paste = Arc<dyn Fn() -> BoxFuture<'static, Option<String>> + Send + Sync>;

/// How many lines standard input's reader holds for a login to take.
const STDIN_QUEUE: usize = 4;

/// The query of a pasted `text`, the address the browser ended on (or its
/// query alone), for the listener at `path`; or why it is none, in a few
/// words a person reads at the terminal.
pub(crate) fn pasted_query<'a>(text: &'a str, path: &str) -> Result<&'a str, &'static str> {
    let text = text.trim();
    if text.chars().any(|c| c.is_control() || c == ' ') {
        return Err("it holds a control character or a space");
    }
    match callback_query(text, Came::Pasted(path))? {
        "" => Err("it carries no code"),
        query if !query.contains('=') => Err("it is not an address"),
        query => Ok(query),
    }
}

/// Standard input as a source of pasted lines: one reader thread for the
/// process, started at the first login that waits on it, which reads
/// lines for the logins that wait (a few held for the next one). It is the
/// process's, as standard input is: a program that reads standard input
/// itself gives its own source instead.
pub(crate) fn stdin_lines() -> Paste {
    static LINES: OnceLock<Arc<Mutex<mpsc::Receiver<String>>>> = OnceLock::new();
    let lines = LINES.get_or_init(|| {
        let (sender, receiver) = mpsc::channel(STDIN_QUEUE);
        let started = std::thread::Builder::new()
            .name("tower-oauth-stdin".into())
            .spawn(move || read_lines(&sender));
        if let Err(e) = started {
            tracing::warn!(error = %e, "standard input cannot be read for a pasted address");
        }
        Arc::new(Mutex::new(receiver))
    });
    let lines = Arc::clone(lines);
    Arc::new(move || {
        let lines = Arc::clone(&lines);
        Box::pin(async move { lines.lock().await.recv().await })
    })
}

/// Reads standard input's lines into `sender`, each cut at
/// [`MAX_CALLBACK_LEN`] and a bit (a longer one is refused as such), until
/// its end or until no login can take them.
fn read_lines(sender: &mpsc::Sender<String>) {
    let stdin = std::io::stdin();
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut locked = stdin.lock();
        let read = (&mut locked)
            .take(MAX_CALLBACK_LEN as u64 + 2)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        // The rest of a line too long to keep is skipped.
        if !line.ends_with(b"\n") && line.len() > MAX_CALLBACK_LEN {
            let mut rest = Vec::new();
            let _ = locked.read_until(b'\n', &mut rest);
        }
        drop(locked);
        let text = String::from_utf8_lossy(&line).into_owned();
        if sender.blocking_send(text).is_err() {
            return;
        }
    }
}
