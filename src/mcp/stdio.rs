//! ferret's own stdio framing in front of rmcp: every request line gets an answer.
//!
//! rmcp's stdio transport drops, without a word, a line over 16 MiB and a line that is not
//! valid JSON (invalid UTF-8, a truncated object, a lone surrogate escape such as
//! `"\ud800"`): the client waits for its own timeout. [`Framed`] is an rmcp
//! [`Transport`] that reads stdin itself, one line at a time with a hard cap (a longer
//! line is discarded up to its newline, only its first [`HEAD`] bytes kept to find its
//! id), hands every line that parses as a JSON-RPC message to rmcp exactly as rmcp's own
//! transport would (one parse, no copy: the normal path costs nothing more), and answers
//! every other line itself: `-32700` for one that is not JSON, `-32600` for one too large,
//! a batch array, or JSON that is no JSON-RPC message, with the request's id when its head
//! names one (read without decoding any other string, so a bad string elsewhere does not
//! hide it), else `null`. A notification (a method, no id) and a response are never
//! answered, per JSON-RPC.
//!
//! Everything written to stdout, rmcp's messages and these answers alike, goes as whole
//! lines through one channel to one writer task, so an answer never lands inside another
//! message. EOF on stdin ends the server; a closed stdout ends it too (the writer stops,
//! so every send and the next receive fail).

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The longest line read: rmcp's own cap, and what HTTP accepts by default.
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// How much of an oversized line is kept to find its id.
pub const HEAD: usize = 4096;
/// Lines waiting for stdout, at most.
const QUEUE: usize = 64;
/// Bytes of the lines waiting for stdout, at most, in KiB (a longer line waits for the
/// queue to empty): a client that never read its answers had the server queue them
/// without bound, gigabytes (round 19).
const QUEUE_KIB: u32 = 64 * 1024;

/// The sending end of the stdout queue: at most [`QUEUE`] lines of [`QUEUE_KIB`] KiB
/// together; a send waits for room.
#[derive(Clone)]
pub struct Out {
    tx: mpsc::Sender<Queued>,
    room: std::sync::Arc<tokio::sync::Semaphore>,
    /// The room there is in all, in KiB.
    cap: u32,
}

/// A line waiting for stdout, with the room it takes (given back once written).
pub struct Queued {
    line: Vec<u8>,
    _room: tokio::sync::OwnedSemaphorePermit,
}

/// The room a line of `len` bytes takes, in KiB: all of it (`cap`) at most, so that a
/// line longer than the whole queue still goes, alone.
fn kib(len: usize, cap: u32) -> u32 {
    u32::try_from(len.div_ceil(1024)).map_or(cap, |k| k.min(cap))
}

impl Out {
    /// Queues `line` once there is room; fails when stdout is gone. `queued` runs once
    /// the line has its place, before it is queued: what it does is done before the
    /// line can be written (a client that reads the answer and at once reuses its id
    /// must find the id free).
    pub async fn send_then(&self, line: Vec<u8>, queued: impl FnOnce()) -> Result<(), ()> {
        let room = self
            .room
            .clone()
            .acquire_many_owned(kib(line.len(), self.cap))
            .await
            .map_err(|_| ())?;
        let slot = self.tx.reserve().await.map_err(|_| ())?;
        queued();
        slot.send(Queued { line, _room: room });
        Ok(())
    }
}

/// Requests handed to rmcp and not yet answered (see [`Framed`]), shared with the sends
/// that answer them.
///
/// rmcp sees each request under an id of ferret's own, never the client's: rmcp keeps
/// one entry per id and drops the answer of a cancelled request when it comes, so a
/// client that cancelled id 7 and at once sent a new request 7 got the cancelled one's
/// answer under 7 and none for the new one, whose change had landed (round 24: told
/// `CANCELLED`, a client retrying applied it twice). With ids of its own, the cancelled
/// request's answer is dropped as rmcp means to, the new one's is answered under the
/// client's id.
#[derive(Default)]
struct Flight {
    /// The client's id of each request under way: its line's bytes and ferret's id.
    ids: std::collections::HashMap<rmcp::model::RequestId, (usize, rmcp::model::RequestId)>,
    /// ferret's id of each request under way: the client's.
    back: std::collections::HashMap<rmcp::model::RequestId, rmcp::model::RequestId>,
    /// The bytes of their request lines together.
    bytes: usize,
    /// The last of ferret's ids given.
    last: i64,
}

impl Flight {
    /// A request with the client's `id` and a line of `size` bytes is handed on: the id
    /// rmcp sees it under.
    fn start(&mut self, id: rmcp::model::RequestId, size: usize) -> rmcp::model::RequestId {
        self.last = self.last.wrapping_add(1);
        let mine = rmcp::model::RequestId::Number(self.last);
        self.back.insert(mine.clone(), id.clone());
        self.ids.insert(id, (size, mine.clone()));
        self.bytes += size;
        mine
    }

    /// The request rmcp knows as `mine` is answered: the client's id, freed, if it was
    /// under way.
    fn answered(&mut self, mine: &rmcp::model::RequestId) -> Option<rmcp::model::RequestId> {
        let theirs = self.back.remove(mine)?;
        if let Some((size, _)) = self.ids.remove(&theirs) {
            self.bytes = self.bytes.saturating_sub(size);
        }
        Some(theirs)
    }

    /// The client cancelled its request `theirs`: the id rmcp knows it by, freed (rmcp
    /// drops its answer).
    fn cancelled(&mut self, theirs: &rmcp::model::RequestId) -> Option<rmcp::model::RequestId> {
        let (size, mine) = self.ids.remove(theirs)?;
        self.back.remove(&mine);
        self.bytes = self.bytes.saturating_sub(size);
        Some(mine)
    }
}

/// JSON-RPC's parse error.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's invalid request.
const INVALID_REQUEST: i64 = -32600;

/// The stdio transport: `read` is stdin, every outgoing line goes to `out`.
pub struct Framed<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    max: usize,
    /// Set once the line being read went over `max`, until its newline: the rest is
    /// dropped as it arrives. On the struct because `receive` can be cancelled mid-line.
    discarding: bool,
    out: Out,
    /// An answer of ours not yet queued (kept here so a cancelled `receive` loses none).
    pending: Option<Vec<u8>>,
    /// Ids of requests handed to rmcp and not yet answered: rmcp keeps one entry per id,
    /// so a second request with an id under way would leave one of them unanswered.
    /// Added when a request is handed on, removed once its answer is in the stdout
    /// queue (or it is cancelled: rmcp then drops its answer), so that answers a client
    /// does not read count as requests under way, and past the bound reading stops.
    /// With the bytes of their request lines: what they hold (rmcp keeps each parsed
    /// until it is answered).
    flight: std::sync::Arc<std::sync::Mutex<Flight>>,
    /// Where requests refused here are audited (round 22: 44 refused past the 256 under
    /// way left no record).
    rejections: Option<std::sync::Arc<super::http::Rejections>>,
    /// How long the calls under way at the end of input may take to be answered.
    eof_wait: std::time::Duration,
}

/// What one bounded read found.
enum LineRead {
    Line,
    /// A line over the cap, ended; `line` holds its head.
    Oversized,
    Eof,
}

impl<R: AsyncRead + Unpin + Send> Framed<R> {
    pub fn new(read: R, out: Out) -> Framed<R> {
        Framed::with_max(read, out, MAX_LINE)
    }

    pub fn with_max(read: R, out: Out, max: usize) -> Framed<R> {
        Framed {
            read: BufReader::with_capacity(64 * 1024, read),
            line: Vec::new(),
            max: max.max(HEAD),
            discarding: false,
            out,
            pending: None,
            flight: Default::default(),
            rejections: None,
            eof_wait: std::time::Duration::ZERO,
        }
    }

    /// Lets the calls under way at the end of input take `wait` to be answered.
    pub fn draining(mut self, wait: std::time::Duration) -> Framed<R> {
        self.eof_wait = wait;
        self
    }

    /// Audits the requests this transport refuses through `log`.
    pub(crate) fn audited(mut self, log: std::sync::Arc<super::http::Rejections>) -> Framed<R> {
        self.rejections = Some(log);
        self
    }

    /// Reads one `\n`-ended line into `self.line`, never holding more than `max` bytes.
    /// Cancel-safe: bytes are consumed from the reader only as they are copied (or
    /// dropped) with no await between, so a cancelled read resumes where it stopped.
    async fn read_line(&mut self) -> std::io::Result<LineRead> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                // A last line with no newline before the end is a line (round 22: such
                // a call was neither run nor answered, a cut one not answered -32700).
                if self.discarding {
                    self.discarding = false;
                    return Ok(LineRead::Oversized);
                }
                if !self.line.is_empty() {
                    return Ok(LineRead::Line);
                }
                return Ok(LineRead::Eof);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if self.discarding {
                // Only the head is kept (already in `line`); the rest goes.
            } else if self.line.len().saturating_add(take) > self.max {
                let room = HEAD.saturating_sub(self.line.len());
                let keep = room.min(take);
                self.line.extend_from_slice(&available[..keep]);
                self.line.truncate(HEAD);
                self.line.shrink_to(HEAD);
                self.discarding = true;
            } else {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if newline.is_some() {
                if self.discarding {
                    self.discarding = false;
                    return Ok(LineRead::Oversized);
                }
                return Ok(LineRead::Line);
            }
        }
    }
}

/// Requests under way at once, at most (each has a task and its arguments held).
const MAX_IN_FLIGHT: usize = 256;
/// The bytes of the request lines under way at once, at most (one line may take all of
/// it: a request is never refused for its own size below [`MAX_LINE`]).
const MAX_IN_FLIGHT_BYTES: usize = 64 * 1024 * 1024;

/// The answer to a request past [`MAX_IN_FLIGHT`] or [`MAX_IN_FLIGHT_BYTES`].
fn busy(id: Value) -> Vec<u8> {
    error_line(
        valid_id(id),
        -32000,
        "Server busy: too many requests are under way; this one was not run".into(),
        json!({
            "code": "RATE_LIMIT_EXCEEDED",
            "hint": "Wait for answers to the requests under way (or cancel some), then send it again."
        }),
    )
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for Framed<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        use rmcp::model::JsonRpcMessage;
        // An answer goes out under the client's id (see [`Flight`]); the id stays under
        // way until the answer is queued, so it is freed before the client can read it.
        let mine = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let theirs = mine
            .as_ref()
            .map(|m| crate::error::lock(&self.flight).back.get(m).cloned());
        match (&mut item, theirs.clone().flatten()) {
            (JsonRpcMessage::Response(r), Some(t)) => r.id = t,
            (JsonRpcMessage::Error(e), Some(t)) => e.id = Some(t),
            _ => {}
        }
        let out = self.out.clone();
        let flight = self.flight.clone();
        // An answer to no request under way (one cancelled as it ended) is not sent:
        // the client took it back, and its id may already name a new request.
        let stray = matches!(theirs, Some(None));
        let line = serde_json::to_vec(&item).map(|mut l| {
            l.push(b'\n');
            l
        });
        async move {
            if stray {
                return Ok(());
            }
            let line = line.map_err(std::io::Error::other)?;
            let answered = || {
                if let Some(m) = &mine {
                    crate::error::lock(&flight).answered(m);
                }
            };
            let sent = out.send_then(line, answered).await;
            if sent.is_err()
                && let Some(m) = &mine
            {
                crate::error::lock(&flight).answered(m);
            }
            sent.map_err(|()| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdout closed"))
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(len) = self.pending.as_ref().map(Vec::len) {
                // Room first, then a slot, then the answer taken: each wait can be
                // cancelled without losing it. Waiting here stops reading: a client
                // that reads no answers gets no more of its requests read.
                // A closed channel means stdout is gone: the server ends.
                let room = self
                    .out
                    .room
                    .clone()
                    .acquire_many_owned(kib(len, self.out.cap))
                    .await
                    .ok()?;
                let slot = self.out.tx.reserve().await.ok()?;
                if let Some(answer) = self.pending.take() {
                    slot.send(Queued {
                        line: answer,
                        _room: room,
                    });
                }
            }
            let read = match self.read_line().await {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!("reading stdin: {e}");
                    return None;
                }
            };
            match read {
                LineRead::Eof => {
                    // The client is done sending, not necessarily reading: the calls
                    // under way are answered before the end (round 22: rmcp gave them
                    // 5 s, so a patch running at the end landed unanswered, audited as
                    // sent), for `eof_wait` at most.
                    let until = std::time::Instant::now() + self.eof_wait;
                    while !crate::error::lock(&self.flight).ids.is_empty()
                        && std::time::Instant::now() < until
                    {
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                    return None;
                }
                LineRead::Oversized => {
                    let head = scan(&self.line);
                    self.line.clear();
                    tracing::warn!(
                        limit = self.max,
                        "a request line over the limit was discarded"
                    );
                    self.pending = answer_head(&head).then(|| {
                        error_line(
                            head.id.clone(),
                            INVALID_REQUEST,
                            format!(
                                "Request too large: the line is over {} bytes ({} MiB) and was discarded unread",
                                self.max,
                                self.max / (1024 * 1024)
                            ),
                            json!({
                                "code": "REQUEST_TOO_LARGE",
                                "limit_bytes": self.max,
                                "hint": "Send less in one request: write a large file in parts \
                                         (write_file, then edit or append to it), or read and \
                                         search with narrower arguments."
                            }),
                        )
                    });
                    continue;
                }
                LineRead::Line => {}
            }
            let size = self.line.len();
            let parsed = {
                let mut line = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
                line = line.strip_suffix(b"\r").unwrap_or(line);
                line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
                if line.iter().all(u8::is_ascii_whitespace) {
                    None
                } else if let Some(answer) = too_many_values(line, false) {
                    tracing::warn!(
                        limit = MAX_VALUES,
                        "a request line holding too many JSON values was refused unparsed"
                    );
                    Some(Err(answer))
                } else {
                    Some(
                        serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line)
                            .map_err(|e| refusal(line, &e)),
                    )
                }
            };
            self.line.clear();
            // Keep a huge line's buffer from staying allocated after it.
            if self.line.capacity() > 1024 * 1024 {
                self.line = Vec::new();
            }
            match parsed {
                None => continue,
                Some(Ok(mut msg)) => {
                    use rmcp::model::{ClientNotification, JsonRpcMessage};
                    match &mut msg {
                        JsonRpcMessage::Request(r) if long_request_id(&r.id) => {
                            tracing::warn!("a request with an overlong id was refused");
                            self.pending = Some(id_too_long());
                            continue;
                        }
                        JsonRpcMessage::Request(r) if r.request.method().len() > MAX_METHOD => {
                            let id = serde_json::to_value(&r.id).ok();
                            self.pending = Some(method_not_found(id, r.request.method()));
                            continue;
                        }
                        JsonRpcMessage::Request(r)
                            if crate::error::lock(&self.flight).ids.contains_key(&r.id) =>
                        {
                            tracing::warn!(id = %r.id, "a request reused an id under way");
                            self.pending = serde_json::to_value(&r.id).ok().map(duplicate_id);
                            continue;
                        }
                        // Requests under way hold what they said until answered: past a
                        // bound in count or bytes, more are answered at once, not held
                        // (200 calls of 15 MiB each, waiting on a client that never
                        // answered roots/list, held 2 GB). Reading goes on, so answers to
                        // questions and cancellations still arrive.
                        JsonRpcMessage::Request(r)
                            if {
                                let f = crate::error::lock(&self.flight);
                                !f.ids.is_empty()
                                    && (f.ids.len() >= MAX_IN_FLIGHT
                                        || f.bytes + size > MAX_IN_FLIGHT_BYTES)
                            } =>
                        {
                            tracing::warn!(id = %r.id, "a request past the requests under way was refused");
                            if let Some(log) = &self.rejections {
                                log.reject(
                                    "stdio",
                                    "RATE_LIMIT_EXCEEDED",
                                    format!(
                                        "a {} request past the {MAX_IN_FLIGHT} requests (or {} MiB) under way was refused",
                                        crate::audit::clip(r.request.method(), 64),
                                        MAX_IN_FLIGHT_BYTES >> 20
                                    ),
                                );
                            }
                            self.pending = serde_json::to_value(&r.id).ok().map(busy);
                            continue;
                        }
                        JsonRpcMessage::Request(r) => {
                            r.id = crate::error::lock(&self.flight).start(r.id.clone(), size);
                        }
                        JsonRpcMessage::Notification(n) => {
                            if let ClientNotification::CancelledNotification(c) =
                                &mut n.notification
                                && let Some(id) = &c.params.request_id
                            {
                                // Told to rmcp by the id it knows; one not under way
                                // is nothing to rmcp (an id of ferret's own it never
                                // had).
                                c.params.request_id = Some(
                                    crate::error::lock(&self.flight)
                                        .cancelled(id)
                                        .unwrap_or(rmcp::model::RequestId::Number(0)),
                                );
                            }
                        }
                        _ => {}
                    }
                    return Some(msg);
                }
                Some(Err(answer)) => {
                    self.pending = answer;
                    continue;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Writes every queued line to `w` whole, flushing when the queue runs dry. Ends when
/// every sender is gone (all written) or `w` fails (the client hung up).
pub async fn write_out<W: AsyncWrite + Unpin>(mut w: W, mut rx: mpsc::Receiver<Queued>) {
    // Each line's room is given back once it is written (dropped with it).
    while let Some(first) = rx.recv().await {
        if w.write_all(&first.line).await.is_err() {
            return;
        }
        drop(first);
        while let Ok(more) = rx.try_recv() {
            if w.write_all(&more.line).await.is_err() {
                return;
            }
        }
        if w.flush().await.is_err() {
            return;
        }
    }
}

/// The channel and writer for [`Framed`].
pub fn channel() -> (Out, mpsc::Receiver<Queued>) {
    let (tx, rx) = mpsc::channel(QUEUE);
    // Smaller in tests (a test cannot make gigabytes of answers to show the bound).
    let kib = std::env::var("FERRET_TEST_STDIO_QUEUE_KIB")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(QUEUE_KIB)
        .clamp(1, QUEUE_KIB);
    let room = std::sync::Arc::new(tokio::sync::Semaphore::new(kib as usize));
    (Out { tx, room, cap: kib }, rx)
}

/// What stdio would answer to `body` as a line: for HTTP, which rmcp answers with a
/// bare 415 when a body is not a JSON-RPC message. `None`: a notification or a
/// response, which get no answer.
pub fn answer_to(body: &[u8]) -> Option<Vec<u8>> {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(body) {
        Err(e) => refusal(body, &e),
        Ok(_) => {
            let head = scan(body);
            answer_head(&head).then(|| {
                error_line(
                    head.id,
                    INVALID_REQUEST,
                    "Invalid request: the body could not be taken as a JSON-RPC message".into(),
                    json!({"code": "INVALID_REQUEST",
                           "hint": "Send one JSON-RPC 2.0 request object per POST."}),
                )
            })
        }
    }
}

/// The answer to a line rmcp cannot take (None: a notification or a response, which
/// get none).
fn refusal(line: &[u8], e: &serde_json::Error) -> Option<Vec<u8>> {
    let head = scan(line);
    if head.array {
        return batch(line);
    }
    let syntax = matches!(
        e.classify(),
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof
    );
    if !answer_head(&head) {
        tracing::debug!("an unreadable notification or response was dropped: {e}");
        return None;
    }
    let column = e.column();
    Some(if syntax {
        let text = e.to_string();
        let surrogate = text.contains("surrogate") || text.contains("escape");
        error_line(
            head.id,
            PARSE_ERROR,
            format!("Parse error: the line is not valid JSON ({e})"),
            json!({
                "code": "PARSE_ERROR",
                "column": column,
                "hint": if surrogate {
                    "A JSON string may hold only valid escapes, and no lone surrogate such as \
                     \\ud800: escape a character outside the BMP as a surrogate pair (or \
                     send it as UTF-8), drop a lone one, and send the request again."
                } else {
                    "Send each JSON-RPC message as one line of complete, valid UTF-8 JSON, \
                     ended by a newline, and send the request again."
                }
            }),
        )
    } else {
        error_line(
            head.id,
            INVALID_REQUEST,
            format!("Invalid request: the line is JSON but not a JSON-RPC 2.0 message ({e})"),
            json!({
                "code": "INVALID_REQUEST",
                "column": column,
                "hint": "Send an object with \"jsonrpc\": \"2.0\", an integer or string \
                         \"id\", a \"method\" string and, if any, object \"params\"."
            }),
        )
    })
}

/// Whether a refused line is answered: not when it is a response, nor when it is known
/// to be a notification (a whole object with a method and no id).
fn answer_head(head: &Head) -> bool {
    if head.response && !head.method {
        return false;
    }
    !(head.complete && head.method && !head.has_id)
}

/// The most elements of a batch answered one by one; a longer batch gets one error.
pub const MAX_BATCH: usize = 32;
/// The most JSON values (counted as containers and separators) a message may hold
/// before it is parsed: a line of `[1,1,1,…]` cost 100 bytes of memory a byte parsed.
pub const MAX_VALUES: usize = 250_000;

/// The answer to a batch array (MCP sends one message per line since 2025-06-18): an
/// error for each request with an id in it, ONE error (id null) for all its other
/// elements that call for one, none for notifications and responses; a batch of more
/// than [`MAX_BATCH`] elements gets one error in all. The answer's size is bounded by a
/// constant, never by the batch's.
fn batch(line: &[u8]) -> Option<Vec<u8>> {
    let hint = "Batches are not supported: send each JSON-RPC message on its own (one line over stdio, one POST over HTTP).";
    let one = |id: Option<Value>, message: String| {
        json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": INVALID_REQUEST,
            "message": message,
            "data": {"code": "INVALID_REQUEST", "hint": hint}}})
    };
    let plain = || "Invalid request: JSON-RPC batches are not supported by MCP".to_string();
    let elements = batch_len(line);
    if elements > MAX_BATCH {
        return Some(line_of(&one(
            None,
            format!(
                "Invalid request: JSON-RPC batches are not supported by MCP; this one held \
                 {elements} elements and none was read"
            ),
        )));
    }
    let Ok(items) = serde_json::from_slice::<Vec<Value>>(line) else {
        return Some(error_line(
            None,
            PARSE_ERROR,
            "Parse error: the batch array is not valid JSON".to_string(),
            json!({"code": "PARSE_ERROR", "hint": hint}),
        ));
    };
    if items.is_empty() {
        return Some(line_of(&one(None, plain())));
    }
    let mut answers: Vec<Value> = Vec::new();
    let mut unnamed = false;
    for item in &items {
        let Some(obj) = item.as_object() else {
            unnamed = true;
            continue;
        };
        let method = obj.contains_key("method");
        if !method && (obj.contains_key("result") || obj.contains_key("error")) {
            continue;
        }
        match obj.get("id").map(|id| valid_id(id.clone())) {
            None if method => {}
            Some(Some(id)) => answers.push(one(Some(id), plain())),
            None | Some(None) => unnamed = true,
        }
    }
    if unnamed {
        answers.push(one(None, plain()));
    }
    if answers.is_empty() {
        return None;
    }
    Some(line_of(&Value::Array(answers)))
}

/// How many top-level elements the array starting `line` holds, counted without
/// parsing (strings skipped, nesting tracked); a broken array counts what it reached.
fn batch_len(line: &[u8]) -> usize {
    let mut depth = 0usize;
    let mut count = 0usize;
    let mut seen = false;
    let mut i = 0;
    while let Some(&b) = line.get(i) {
        match b {
            b'"' => {
                if depth == 1 {
                    seen = true;
                }
                match skip_string(line, i) {
                    Some(end) => {
                        i = end;
                        continue;
                    }
                    None => break,
                }
            }
            b'[' | b'{' => {
                if depth == 1 {
                    seen = true;
                }
                depth += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            b',' if depth == 1 => count += 1,
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ if depth == 1 => seen = true,
            _ => {}
        }
        i += 1;
    }
    if seen { count + 1 } else { count }
}

/// How many JSON values `bytes` holds, roughly (see [`crate::text::count_json_values`]).
pub fn count_values(bytes: &[u8], cap: usize) -> usize {
    crate::text::count_json_values(bytes, cap)
}

/// The answer to a message holding more than [`MAX_VALUES`] values, which is never
/// parsed: `-32600` with the id its head names (else null). `None`: under the cap.
/// `always`: answer even a notification (HTTP must answer every POST).
pub fn too_many_values(bytes: &[u8], always: bool) -> Option<Option<Vec<u8>>> {
    let n = count_values(bytes, MAX_VALUES);
    if n <= MAX_VALUES {
        return None;
    }
    let head = scan(bytes);
    let head = if head.array { Head::default() } else { head };
    if !always && !answer_head(&head) {
        return Some(None);
    }
    Some(Some(error_line(
        head.id,
        INVALID_REQUEST,
        format!(
            "Request too large: the message holds over {MAX_VALUES} JSON values and was not parsed"
        ),
        json!({
            "code": "REQUEST_TOO_LARGE",
            "limit_values": MAX_VALUES,
            "hint": "Send fewer values in one request: a file's content goes as one string; \
                     split a long list of edits or paths over several calls."
        }),
    )))
}

/// JSON-RPC's method not found.
const METHOD_NOT_FOUND: i64 = -32601;

/// The longest method name passed on: every method MCP has is far shorter, and rmcp
/// answers an unknown one by echoing it whole (a 3 MB name came back 20 times, uncharged).
pub const MAX_METHOD: usize = 128;

/// The answer to a request for a method longer than [`MAX_METHOD`]: not found, named
/// cut and escaped.
pub fn method_not_found(id: Option<Value>, method: &str) -> Vec<u8> {
    let shown: String = crate::audit::clip(method, 64).escape_debug().collect();
    error_line(
        id.and_then(valid_id),
        METHOD_NOT_FOUND,
        format!("Method not found: {shown}"),
        json!({"code": "METHOD_NOT_FOUND",
               "hint": "Call a method MCP defines (initialize, tools/list, tools/call, …)."}),
    )
}

/// For a body (HTTP) that is one request for a method longer than [`MAX_METHOD`], its
/// answer; None for anything else (a notification gets no answer and is passed on).
pub fn long_method(body: &[u8]) -> Option<Vec<u8>> {
    #[derive(serde::Deserialize)]
    struct Head {
        method: Option<String>,
        id: Option<Value>,
    }
    let head: Head = serde_json::from_slice(body).ok()?;
    let method = head.method?;
    (method.len() > MAX_METHOD && head.id.is_some()).then(|| method_not_found(head.id, &method))
}

/// The answer to a request whose id is over [`MAX_ID`] bytes: refused unrun, with id
/// `null` (its own is not echoed).
pub fn id_too_long() -> Vec<u8> {
    error_line(
        None,
        INVALID_REQUEST,
        format!("Invalid request: its id is over {MAX_ID} bytes; it was not run"),
        json!({"code": "INVALID_REQUEST",
               "hint": "Give requests short ids (a number, or a string of 256 bytes at most)."}),
    )
}

/// Whether a request's id is a string over [`MAX_ID`] bytes.
pub fn long_request_id(id: &rmcp::model::RequestId) -> bool {
    matches!(id, rmcp::model::NumberOrString::String(s) if s.len() > MAX_ID)
}

/// For a body (HTTP) that is one request whose id is over [`MAX_ID`] bytes, its answer.
pub fn long_id(body: &[u8]) -> Option<Vec<u8>> {
    #[derive(serde::Deserialize)]
    struct Head {
        method: Option<serde::de::IgnoredAny>,
        id: Option<Value>,
    }
    let head: Head = serde_json::from_slice(body).ok()?;
    head.method?;
    matches!(head.id, Some(Value::String(ref s)) if s.len() > MAX_ID).then(id_too_long)
}

/// The answer to a request whose id a request under way in the same session holds.
pub fn duplicate_id(id: Value) -> Vec<u8> {
    error_line(
        valid_id(id),
        INVALID_REQUEST,
        "Invalid request: id already in use by a request under way".into(),
        json!({
            "code": "INVALID_REQUEST",
            "hint": "Give every request an id no request still under way has (the earlier \
                     one with this id goes on and is answered); send it again with a new id."
        }),
    )
}

fn error_line(id: Option<Value>, code: i64, message: String, data: Value) -> Vec<u8> {
    line_of(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message, "data": data}
    }))
}

fn line_of(v: &Value) -> Vec<u8> {
    let mut l = v.to_string().into_bytes();
    l.push(b'\n');
    l
}

/// The longest string id echoed in an answer (as the progress token): every answer
/// repeats its request's id, and a client that sent 16 MB ids and never read its answers
/// had the server hold gigabytes of them (round 19).
pub const MAX_ID: usize = 256;

/// An id JSON-RPC allows: a string (of [`MAX_ID`] bytes at most) or an integer.
fn valid_id(v: Value) -> Option<Value> {
    match &v {
        Value::String(s) if s.len() > MAX_ID => None,
        Value::String(_) => Some(v),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(v),
        _ => None,
    }
}

/// What the top level of a line says, read without decoding any string but the id.
#[derive(Debug, Default, PartialEq)]
pub struct Head {
    pub id: Option<Value>,
    pub has_id: bool,
    pub method: bool,
    pub response: bool,
    /// The object's closing brace was reached.
    pub complete: bool,
    pub array: bool,
}

/// Reads the top-level keys of a JSON object as far as the bytes allow: which of `id`,
/// `method`, `result` and `error` it has, and the id's value if it is a valid one. Never
/// fails: where the bytes stop making sense, so does the scan.
pub fn scan(line: &[u8]) -> Head {
    let mut h = Head::default();
    let mut i = skip_ws(line, 0);
    if line.get(i..i + 3) == Some(b"\xEF\xBB\xBF") {
        i = skip_ws(line, i + 3);
    }
    match line.get(i) {
        Some(b'[') => {
            h.array = true;
            return h;
        }
        Some(b'{') => i += 1,
        _ => return h,
    }
    loop {
        i = skip_ws(line, i);
        match line.get(i) {
            Some(b'}') => {
                h.complete = true;
                return h;
            }
            Some(b'"') => {}
            _ => return h,
        }
        let Some(end) = skip_string(line, i) else {
            return h;
        };
        let key = &line[i + 1..end - 1];
        i = skip_ws(line, end);
        if line.get(i) != Some(&b':') {
            return h;
        }
        i = skip_ws(line, i + 1);
        let start = i;
        let Some(end) = skip_value(line, i) else {
            return h;
        };
        match key {
            b"id" if !h.has_id => {
                h.has_id = true;
                h.id = serde_json::from_slice::<Value>(&line[start..end])
                    .ok()
                    .and_then(valid_id);
            }
            b"method" => h.method = true,
            b"result" | b"error" => h.response = true,
            _ => {}
        }
        i = skip_ws(line, end);
        match line.get(i) {
            Some(b',') => i += 1,
            Some(b'}') => {
                h.complete = true;
                return h;
            }
            _ => return h,
        }
    }
}

fn skip_ws(line: &[u8], mut i: usize) -> usize {
    while matches!(line.get(i), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        i += 1;
    }
    i
}

/// The index just past the string starting at `i` (a `"`), escapes skipped undecoded.
fn skip_string(line: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        match line.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => j += 2,
            _ => j += 1,
        }
    }
}

/// The index just past the value starting at `i`: a string, a nested object or array
/// (brackets counted, strings skipped), or a bare word (number, true, false, null).
fn skip_value(line: &[u8], i: usize) -> Option<usize> {
    match line.get(i)? {
        b'"' => skip_string(line, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match line.get(j)? {
                    b'"' => {
                        j = skip_string(line, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while let Some(b) = line.get(j) {
                if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                    break;
                }
                j += 1;
            }
            // A bare word cut off by the end of the bytes may be cut short.
            (j > i && j < line.len()).then_some(j)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_scan_finds_the_id_past_bad_strings_and_stops_at_truncation() {
        let h = scan(br#"{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":"\ud800"}}"#);
        assert_eq!(h.id, Some(json!(7)));
        assert!(h.complete && h.method && h.has_id);
        let h = scan(br#"{"jsonrpc":"2.0","method":"x","params":{"a":"\ud800"}}"#);
        assert!(h.complete && h.method && !h.has_id);
        let h = scan(br#"{"jsonrpc":"2.0","id":"a\"b","method":"tools/ca"#);
        assert_eq!(h.id, Some(json!("a\"b")));
        assert!(!h.complete);
        let h = scan(br#"{"id":12"#);
        assert_eq!(h.id, None, "a number cut off may be cut short");
        let h = scan(br#"{"id":"\ud800","method":"x"}"#);
        assert!(h.has_id && h.id.is_none());
        let h = scan(br#"{"id":1.5}"#);
        assert!(h.has_id && h.id.is_none());
        let h = scan(br#"{"id":{"x":[1,2,"]"]},"method":"m"}"#);
        assert!(h.has_id && h.id.is_none() && h.complete);
        assert!(scan(b"[1]").array);
        assert_eq!(scan(b"\xff\xfe"), Head::default());
        assert_eq!(scan(b"{\"a\":\"\\"), Head::default());
    }
}
