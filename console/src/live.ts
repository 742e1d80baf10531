// Live updates: one server-sent event stream per tab (GET /v1/events) and
// the views that hang on it. A view subscribes to the topics it shows (job,
// node, alert) and is told, at most once per its interval, "these events
// arrived" or "refetch everything"; it then asks the REST API again, as it
// did when it polled. The events carry only what changed (a job's id and
// state, a node's name), never the data a view shows: the API stays the one
// source, with the caller's own permissions.
//
// The stream's life:
//   start() (after sign-in) opens it; state 'reconnecting' until `hello`.
//   `hello`: 'live'. On the session's first stream, or a new server epoch,
//     every subscriber is told to refetch: what happened before the stream
//     was up is not replayed to it. On the session's first stream a view
//     whose last fetch started at or after the hello's arrival is not told
//     (SubscribeOptions.fetchedAt): that fetch already saw everything the
//     stream will not replay, and a second one (the 10,000-GPU map's 5.5 MB)
//     would change nothing.
//   A dropped connection: the browser reconnects by itself (after the
//     server's `retry:`), sending Last-Event-ID; berthd replays what was
//     missed, or sends `reset` when it cannot. State 'reconnecting' meanwhile.
//   `reset`: every subscriber refetches.
//   An HTTP error (the browser gives up: readyState CLOSED): 'polling'. The
//     session is checked (a 401 is the app's sign-in, never a retry loop);
//     otherwise a new EventSource is tried after retryMs, doubling up to
//     maxRetryMs while it keeps failing. It asks for what followed the last
//     event heard (`after=ID`, what Last-Event-ID does for the browser's own
//     reconnection), so berthd replays the gap or answers `reset`.
//   `end` (the session expired or was revoked): closed, no reconnection, and
//     the app's sign-in, as after a 401.
//   stop() (sign-out) closes it.
// While the state is not 'live', views poll at their old interval
// (useLiveRefresh in pages/live-status.tsx).
//
// Time is injected (Timers) and so is the EventSource constructor, so the
// tests drive all of this with a fake stream and a fake clock.

export type Topic = 'job' | 'node' | 'alert';
export const TOPICS: readonly Topic[] = ['job', 'node', 'alert'];

export type LiveState = 'live' | 'reconnecting' | 'polling';

// The events' data as berthd sends it. Anything else in them is ignored.
export interface JobChange {
  id: number;
  tenant: string;
  queue: string;
  state: string;
}
export interface NodeChange {
  node: string;
  change: string; // registered | state | health | cordon | allocation | removed
}
export interface AlertChange {
  id: number;
  state: string; // open | resolved
}
export type LiveEvent =
  | { topic: 'job'; data: JobChange }
  | { topic: 'node'; data: NodeChange }
  | { topic: 'alert'; data: AlertChange };

// What a subscriber is told: the events that matched since it was last told,
// oldest first, and whether it must refetch regardless (`resync`: the stream
// was down, or berthd could not replay what was missed). A subscriber that
// refetches its whole view may ignore both.
export interface Batch {
  events: LiveEvent[];
  resync: boolean;
}

export interface SubscribeOptions {
  // Which events of the topics concern the view (default: all of them).
  match?: (e: LiveEvent) => boolean;
  // How long after the first event of a burst the view is told, so a burst
  // is one refetch (default 300 ms)...
  delayMs?: number;
  // ...and the least time between two tellings (default delayMs): a view
  // whose answer is costly asks at most this often however busy the stream.
  minIntervalMs?: number;
  // When the view's last fetch started (the hub's clock, LiveHub.now), or
  // null if unknown. Read when a refetch for the session's first `hello` is
  // due: a fetch that started at or after that hello's arrival makes it
  // needless, and the view is not told (unless events are waiting). Without
  // it, every view refetches on that hello. A reset, a new epoch or
  // too many waiting events always refetch.
  fetchedAt?: () => number | null;
}

// The part of the browser's EventSource the hub uses.
export interface EventSourceLike {
  readonly readyState: number; // 0 connecting, 1 open, 2 closed
  addEventListener(type: string, listener: (ev: MessageEvent) => void): void;
  close(): void;
}
export type EventSourceCtor = new (url: string) => EventSourceLike;
const CLOSED = 2;

export interface Timers {
  now(): number;
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realTimers: Timers = {
  now: () => Date.now(),
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

export interface LiveOptions {
  // The browser's EventSource; null or undefined where there is none (the
  // views then poll, as before live updates).
  source?: EventSourceCtor | null;
  url?: string; // default /v1/events (every topic the caller may see)
  timers?: Timers;
  retryMs?: number; // a new stream this long after the browser gave up (30 s)...
  maxRetryMs?: number; // ...doubling to at most this (5 min)
  maxPending?: number; // events kept per subscriber before it is told to resync instead (500)
}

// What the app gives the hub when the session starts.
export interface LiveSession {
  // The server ended the session (`end`), or the check below found it gone:
  // back to sign-in, as after a 401.
  ended(): void;
  // After the browser gave up on the stream: whether the session still
  // holds (false: the refusal was a 401). A rejection counts as "still
  // holds", so a network failure only delays the next try.
  signedIn?(): Promise<boolean>;
}

const DEFAULT_DELAY_MS = 300;

class Subscription {
  private pending: LiveEvent[] = [];
  private resync = false;
  // The arrival of the first hello whose refetch is due, or null: that
  // refetch is dropped at fire time if the view fetched since (fetchedAt).
  private helloAt: number | null = null;
  private timer: unknown = null;
  private last = -Infinity;
  private readonly delayMs: number;
  private readonly minIntervalMs: number;

  constructor(
    readonly topics: ReadonlySet<Topic>,
    private readonly handler: (b: Batch) => void,
    private readonly opts: SubscribeOptions,
    private readonly timers: Timers,
    private readonly maxPending: number,
  ) {
    this.delayMs = opts.delayMs ?? DEFAULT_DELAY_MS;
    this.minIntervalMs = Math.max(this.delayMs, opts.minIntervalMs ?? this.delayMs);
  }

  event(e: LiveEvent) {
    if (!this.topics.has(e.topic)) return;
    if (this.opts.match) {
      try {
        if (!this.opts.match(e)) return;
      } catch {
        return;
      }
    }
    if (this.pending.length < this.maxPending) this.pending.push(e);
    else this.resync = true;
    this.schedule();
  }

  // Refetch everything; `helloAt`: only if the view's last fetch started
  // before that time (the session's first hello), else unconditionally.
  refetch(helloAt?: number) {
    if (helloAt === undefined || !this.opts.fetchedAt) this.resync = true;
    else this.helloAt = Math.min(this.helloAt ?? helloAt, helloAt);
    this.schedule();
  }

  cancel() {
    if (this.timer !== null) this.timers.clear(this.timer);
    this.timer = null;
    this.pending = [];
    this.resync = false;
    this.helloAt = null;
  }

  // Whether the refetch asked for by the first hello is still needed.
  private staleSinceHello(): boolean {
    if (this.helloAt === null) return false;
    let started: number | null = null;
    try {
      started = this.opts.fetchedAt?.() ?? null;
    } catch {
      started = null;
    }
    return started === null || started < this.helloAt;
  }

  private schedule() {
    if (this.timer !== null) return;
    const now = this.timers.now();
    const at = Math.max(now + this.delayMs, this.last + this.minIntervalMs);
    this.timer = this.timers.set(() => this.fire(), at - now);
  }

  private fire() {
    this.timer = null;
    const resync = this.resync || this.staleSinceHello();
    const events = this.pending;
    this.pending = [];
    this.resync = false;
    this.helloAt = null;
    // Only a first hello's refetch was due, and the view fetched since.
    if (!resync && events.length === 0) return;
    this.last = this.timers.now();
    const batch: Batch = { events, resync };
    try {
      this.handler(batch);
    } catch {
      // One view's failure is not the others'.
    }
  }
}

function parse(data: unknown): Record<string, unknown> | null {
  if (typeof data !== 'string') return null;
  try {
    const v: unknown = JSON.parse(data);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

// An event's data, checked for the fields the views read; null when berthd
// sent something else (ignored).
export function readEvent(topic: Topic, raw: unknown): LiveEvent | null {
  const d = parse(raw);
  if (!d) return null;
  if (topic === 'job') {
    if (typeof d.id !== 'number') return null;
    const data: JobChange = {
      id: d.id,
      tenant: String(d.tenant ?? ''),
      queue: String(d.queue ?? ''),
      state: String(d.state ?? ''),
    };
    return { topic, data };
  }
  if (topic === 'node') {
    if (typeof d.node !== 'string') return null;
    return { topic, data: { node: d.node, change: String(d.change ?? '') } };
  }
  if (typeof d.id !== 'number') return null;
  return { topic, data: { id: d.id, state: String(d.state ?? '') } };
}

export class LiveHub {
  private readonly source: EventSourceCtor | null;
  private readonly url: string;
  private readonly timers: Timers;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  private readonly maxPending: number;
  private es: EventSourceLike | null = null;
  private current: LiveState = 'polling';
  private session: LiveSession | null = null;
  private epoch: string | null = null;
  private greetedOnce = false; // a hello arrived in this session
  private lastId = ''; // the id of the last event heard in this session
  private retryTimer: unknown = null;
  private nextRetryMs: number;
  private readonly subs = new Set<Subscription>();
  private readonly listeners = new Set<(s: LiveState) => void>();

  constructor(opts: LiveOptions = {}) {
    this.source = opts.source ?? null;
    this.url = opts.url ?? '/v1/events';
    this.timers = opts.timers ?? realTimers;
    this.retryMs = opts.retryMs ?? 30000;
    this.maxRetryMs = opts.maxRetryMs ?? 300000;
    this.maxPending = opts.maxPending ?? 500;
    this.nextRetryMs = this.retryMs;
  }

  get state(): LiveState {
    return this.current;
  }

  // The hub's clock: what a view's SubscribeOptions.fetchedAt answers in.
  now(): number {
    return this.timers.now();
  }

  // Whether a session is open (start() without stop() or `end` since).
  get running(): boolean {
    return this.session !== null;
  }

  // Opens the stream for a signed-in session. Again while running: nothing.
  start(session: LiveSession) {
    if (this.session) return;
    this.session = session;
    this.epoch = null;
    this.greetedOnce = false;
    this.lastId = '';
    this.nextRetryMs = this.retryMs;
    if (!this.source) return this.setState('polling');
    this.setState('reconnecting');
    this.open();
  }

  // Closes the stream (sign-out, or the session ended). Subscriptions stay:
  // they belong to the views, which unsubscribe when they go.
  stop() {
    this.session = null;
    this.closeSource();
    if (this.retryTimer !== null) this.timers.clear(this.retryTimer);
    this.retryTimer = null;
    this.setState('polling');
  }

  // Calls `handler` for the events of `topics` (debounced, see
  // SubscribeOptions) and whenever the view must refetch everything.
  // Returns the unsubscribe.
  subscribe(topics: Topic | readonly Topic[], handler: (b: Batch) => void, opts: SubscribeOptions = {}): () => void {
    const set = new Set<Topic>(typeof topics === 'string' ? [topics] : topics);
    const sub = new Subscription(set, handler, opts, this.timers, this.maxPending);
    this.subs.add(sub);
    return () => {
      sub.cancel();
      this.subs.delete(sub);
    };
  }

  // Resolves once the session's first stream said hello, or the browser
  // gave up on it, or after `maxMs` (also when no session starts meanwhile):
  // a costly view waits this long before its first fetch, so that the fetch
  // starts after the hello and the hello's refetch is not needed (see
  // SubscribeOptions.fetchedAt). At once when there is nothing to wait for.
  settled(maxMs: number): Promise<void> {
    const done = () => this.greetedOnce || !this.source || (this.session !== null && this.current === 'polling');
    if (done() || maxMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      let off = () => undefined as unknown;
      const timer = this.timers.set(() => {
        off();
        resolve();
      }, maxMs);
      off = this.onState(() => {
        if (!done()) return;
        off();
        this.timers.clear(timer);
        resolve();
      });
    });
  }

  // Calls `fn` with each new state; returns the unsubscribe.
  onState(fn: (s: LiveState) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private setState(s: LiveState) {
    if (s === this.current) return;
    this.current = s;
    for (const fn of [...this.listeners]) fn(s);
  }

  // Every subscriber refetches; `helloAt` (the session's first hello): only
  // those whose last fetch started before it.
  private resyncAll(helloAt?: number) {
    for (const sub of this.subs) sub.refetch(helloAt);
  }

  private closeSource() {
    const es = this.es;
    this.es = null;
    es?.close();
  }

  private open() {
    const Source = this.source!;
    // A new EventSource sends no Last-Event-ID of its own: after one given
    // up on, the last id heard goes in the URL. Without one (the session's
    // first stream) nothing before its hello is replayed, so that hello
    // means "refetch".
    const after = this.lastId;
    const sep = this.url.includes('?') ? '&' : '?';
    const es = new Source(after ? `${this.url}${sep}after=${encodeURIComponent(after)}` : this.url);
    this.es = es;
    let greeted = after !== '';
    const mine = (fn: (ev: MessageEvent) => void) => (ev: MessageEvent) => {
      if (this.es !== es) return;
      if (typeof ev.lastEventId === 'string' && ev.lastEventId) this.lastId = ev.lastEventId;
      fn(ev);
    };
    es.addEventListener(
      'hello',
      mine((ev) => {
        const d = parse(ev.data);
        const epoch = typeof d?.epoch === 'string' ? d.epoch : null;
        // The session's first hello (nothing before it replayed), or a
        // berthd with another epoch (its history is not ours).
        const first = !this.greetedOnce;
        this.greetedOnce = true;
        const gap = !greeted || epoch !== this.epoch;
        greeted = true;
        this.epoch = epoch;
        this.nextRetryMs = this.retryMs;
        this.setState('live');
        if (gap) this.resyncAll(first ? this.timers.now() : undefined);
      }),
    );
    for (const topic of TOPICS) {
      es.addEventListener(
        topic,
        mine((ev) => {
          const e = readEvent(topic, ev.data);
          if (e) for (const sub of [...this.subs]) sub.event(e);
        }),
      );
    }
    es.addEventListener(
      'reset',
      mine(() => this.resyncAll()),
    );
    es.addEventListener(
      'end',
      mine(() => this.ended()),
    );
    es.addEventListener(
      'error',
      mine(() => this.failed(es)),
    );
  }

  private ended() {
    const session = this.session;
    this.stop();
    session?.ended();
  }

  private failed(es: EventSourceLike) {
    if (es.readyState !== CLOSED) {
      // The browser reconnects by itself, with Last-Event-ID.
      if (this.current === 'live') this.setState('reconnecting');
      return;
    }
    // The browser gave up (an HTTP error or not an event stream): poll, and
    // try a new stream later unless the session is gone.
    this.closeSource();
    this.setState('polling');
    const session = this.session;
    if (!session) return;
    const retry = () => {
      if (this.session !== session || this.es || this.retryTimer !== null) return;
      const wait = this.nextRetryMs;
      this.nextRetryMs = Math.min(this.maxRetryMs, this.nextRetryMs * 2);
      this.retryTimer = this.timers.set(() => {
        this.retryTimer = null;
        if (this.session === session && !this.es) this.open();
      }, wait);
    };
    if (!session.signedIn) return retry();
    session.signedIn().then(
      (ok) => {
        if (this.session !== session) return;
        if (ok) retry();
        else this.ended();
      },
      () => retry(),
    );
  }
}
