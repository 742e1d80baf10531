import { describe, expect, it } from 'vitest';
import { type Batch, LiveHub, type LiveState, readEvent, type Timers } from '../src/live';
import { FakeSource } from './fake-events';

// A clock the test moves: timers fire in order as time passes.
function fakeTimers(): Timers & { advance(ms: number): void; pending(): number } {
  let now = 1_000_000;
  let seq = 0;
  const timers = new Map<number, { at: number; fn: () => void }>();
  return {
    now: () => now,
    set: (fn, ms) => {
      timers.set(++seq, { at: now + ms, fn });
      return seq;
    },
    clear: (h) => void timers.delete(h as number),
    advance(ms) {
      const end = now + ms;
      for (;;) {
        let first: [number, { at: number; fn: () => void }] | null = null;
        for (const e of timers) if (e[1].at <= end && (!first || e[1].at < first[1].at)) first = e;
        if (!first) break;
        timers.delete(first[0]);
        now = first[1].at;
        first[1].fn();
      }
      now = end;
    },
    pending: () => timers.size,
  };
}

const flush = () => new Promise((r) => setTimeout(r, 0));

function setup(signedIn: () => Promise<boolean> = async () => true) {
  FakeSource.made = [];
  const clock = fakeTimers();
  const hub = new LiveHub({ source: FakeSource, timers: clock });
  const states: LiveState[] = [];
  hub.onState((s) => states.push(s));
  let ended = 0;
  hub.start({ ended: () => ended++, signedIn });
  const es = () => FakeSource.made[FakeSource.made.length - 1];
  return { hub, clock, states, es, ended: () => ended };
}

const ids = (b: Batch) => b.events.map((e) => (e.topic === 'job' ? e.data.id : null));

function recorder() {
  const batches: Batch[] = [];
  return { batches, fn: (b: Batch) => void batches.push(b) };
}

describe('the live hub', () => {
  it('opens one stream at /v1/events, and is live after hello', () => {
    const { hub, es, states } = setup();
    expect(FakeSource.made.length).toBe(1);
    expect(es().url).toBe('/v1/events');
    expect(hub.state).toBe('reconnecting');
    es().hello();
    expect(hub.state).toBe('live');
    expect(states).toEqual(['reconnecting', 'live']);
    hub.start({ ended: () => undefined });
    expect(FakeSource.made.length).toBe(1);
  });

  it("brings a job event to the job topic's subscribers, not the node's", () => {
    const { hub, clock, es } = setup();
    es().hello();
    const jobs = recorder();
    const nodes = recorder();
    hub.subscribe('job', jobs.fn);
    hub.subscribe(['node'], nodes.fn);
    es().job(7, 'Running');
    clock.advance(300);
    expect(jobs.batches).toEqual([
      { events: [{ topic: 'job', data: { id: 7, tenant: 'blue', queue: 'main', state: 'Running' } }], resync: false },
    ]);
    expect(nodes.batches).toEqual([]);
    es().emit('node', { node: 'gpu-node-1', change: 'cordon' });
    clock.advance(300);
    expect(nodes.batches).toEqual([{ events: [{ topic: 'node', data: { node: 'gpu-node-1', change: 'cordon' } }], resync: false }]);
    expect(jobs.batches.length).toBe(1);
  });

  it('tells a view once for a burst of 100 events, and at most once per its interval', () => {
    const { hub, clock, es } = setup();
    es().hello();
    const r = recorder();
    hub.subscribe('job', r.fn, { delayMs: 250, minIntervalMs: 5000 });
    for (let i = 1; i <= 100; i++) es().job(i);
    clock.advance(249);
    expect(r.batches.length).toBe(0);
    clock.advance(1);
    expect(r.batches.length).toBe(1);
    expect(ids(r.batches[0])).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    // Another burst a second later waits for the 5 s since the last telling.
    clock.advance(1000);
    es().job(101);
    es().job(102);
    clock.advance(3999);
    expect(r.batches.length).toBe(1);
    clock.advance(1);
    expect(r.batches.length).toBe(2);
    expect(ids(r.batches[1])).toEqual([101, 102]);
    // Quiet for long: the next event waits only the delay.
    clock.advance(60000);
    es().job(103);
    clock.advance(250);
    expect(r.batches.length).toBe(3);
  });

  it("passes only the events a view's match keeps", () => {
    const { hub, clock, es } = setup();
    es().hello();
    const r = recorder();
    hub.subscribe('job', r.fn, { match: (e) => e.topic === 'job' && e.data.id === 42 });
    es().job(41);
    es().job(43);
    clock.advance(1000);
    expect(r.batches).toEqual([]);
    es().job(42, 'Succeeded');
    clock.advance(1000);
    expect(r.batches.map((b) => b.events.map((e) => e.data))).toEqual([[{ id: 42, tenant: 'blue', queue: 'main', state: 'Succeeded' }]]);
  });

  it('has every view refetch once the stream is up, since nothing before its hello is replayed', () => {
    const { hub, clock, es } = setup();
    const r = recorder();
    hub.subscribe('alert', r.fn);
    es().hello();
    clock.advance(300);
    expect(r.batches).toEqual([{ events: [], resync: true }]);
  });

  it("skips the first hello's refetch for a view whose last fetch started at or after the hello arrived", () => {
    const { hub, clock, es } = setup();
    // Loaded before the stream was up: a change between its fetch and the
    // stream's start would be missed, so it refetches.
    const before = recorder();
    let beforeAt: number | null = clock.now();
    hub.subscribe('job', before.fn, { fetchedAt: () => beforeAt });
    // Never said when it fetched: it refetches, as before.
    const unknown = recorder();
    hub.subscribe('job', unknown.fn, { fetchedAt: () => null });
    // Loads the moment the hello arrives, and another 100 ms after it
    // (before its refetch would fire): both saw everything since.
    const same = recorder();
    let sameAt: number | null = null;
    hub.subscribe('job', same.fn, { fetchedAt: () => sameAt });
    const after = recorder();
    let afterAt: number | null = null;
    hub.subscribe('node', after.fn, { fetchedAt: () => afterAt, delayMs: 2000 });
    clock.advance(50);
    es().hello();
    sameAt = clock.now();
    clock.advance(100);
    afterAt = clock.now();
    clock.advance(2000);
    expect(before.batches).toEqual([{ events: [], resync: true }]);
    expect(unknown.batches).toEqual([{ events: [], resync: true }]);
    expect(same.batches).toEqual([]);
    expect(after.batches).toEqual([]);
    // An event meanwhile is still told, without the refetch.
    beforeAt = clock.now();
    es().job(8);
    clock.advance(300);
    expect(same.batches).toEqual([{ events: [expect.objectContaining({ topic: 'job' })], resync: false }]);
    // A reset and a new epoch refetch whenever the view last fetched.
    sameAt = clock.now();
    afterAt = clock.now();
    es().emit('reset');
    clock.advance(2000);
    expect(same.batches.slice(1)).toEqual([{ events: [], resync: true }]);
    expect(after.batches).toEqual([{ events: [], resync: true }]);
    sameAt = clock.now() + 1000;
    es().drop();
    es().hello('e2');
    clock.advance(300);
    expect(same.batches.slice(2)).toEqual([{ events: [], resync: true }]);
  });

  it('refetches on the hello of a stream refused from the start for a view that last polled before it', async () => {
    const { hub, clock, es } = setup();
    const r = recorder();
    let at: number | null = clock.now();
    hub.subscribe('node', r.fn, { fetchedAt: () => at });
    es().refuse();
    await flush();
    // Polling: a poll at 20 s, then the new stream's hello at 30 s.
    clock.advance(20000);
    at = clock.now();
    clock.advance(10000);
    es().hello();
    clock.advance(300);
    expect(r.batches).toEqual([{ events: [], resync: true }]);
  });

  it('settles on the first hello, on a stream given up, or after the wait', async () => {
    const { hub, clock, es } = setup();
    let done = 0;
    void hub.settled(1000).then(() => done++);
    await flush();
    expect(done).toBe(0);
    es().hello();
    await flush();
    expect(done).toBe(1);
    // Once greeted, at once, even while the browser reconnects.
    es().drop();
    void hub.settled(1000).then(() => done++);
    await flush();
    expect(done).toBe(2);
    // A new session: given up on, or no hello within the wait.
    hub.stop();
    hub.start({ ended: () => undefined });
    void hub.settled(1000).then(() => done++);
    es().refuse();
    await flush();
    expect(done).toBe(3);
    hub.stop();
    hub.start({ ended: () => undefined });
    void hub.settled(1000).then(() => done++);
    clock.advance(999);
    await flush();
    expect(done).toBe(3);
    clock.advance(1);
    await flush();
    expect(done).toBe(4);
    expect(await new LiveHub({}).settled(1000)).toBeUndefined();
  });

  it('has every view refetch on reset', () => {
    const { hub, clock, es } = setup();
    es().hello();
    clock.advance(1000);
    const jobs = recorder();
    const alerts = recorder();
    hub.subscribe('job', jobs.fn);
    hub.subscribe('alert', alerts.fn, { match: () => false });
    es().emit('reset');
    clock.advance(300);
    expect(jobs.batches).toEqual([{ events: [], resync: true }]);
    expect(alerts.batches).toEqual([{ events: [], resync: true }]);
  });

  it('says reconnecting while the browser reconnects, and refetches only when berthd is another', () => {
    const { hub, clock, es, states } = setup();
    es().hello('e1');
    const r = recorder();
    hub.subscribe('job', r.fn);
    es().drop();
    expect(hub.state).toBe('reconnecting');
    // The same berthd: it replays what was missed from Last-Event-ID.
    es().hello('e1');
    expect(hub.state).toBe('live');
    es().job(5);
    clock.advance(300);
    expect(r.batches).toEqual([{ events: [expect.objectContaining({ topic: 'job' })], resync: false }]);
    // A restarted berthd: a new epoch, so everything again.
    es().drop();
    es().hello('e2');
    clock.advance(300);
    expect(r.batches[1]).toEqual({ events: [], resync: true });
    expect(FakeSource.made.length).toBe(1);
    expect(states).toEqual(['reconnecting', 'live', 'reconnecting', 'live', 'reconnecting', 'live']);
  });

  it('falls back to polling when the browser gives up, and tries a new stream after 30 s (then 60 s) that asks for what followed the last event heard', async () => {
    const { hub, clock, es } = setup();
    es().hello('e1', 4);
    const r = recorder();
    hub.subscribe('job', r.fn);
    es().job(3, 'Running', 'e1-5');
    clock.advance(300);
    expect(r.batches.length).toBe(1);
    const first = es();
    first.refuse();
    expect(hub.state).toBe('polling');
    expect(first.closed).toBe(true);
    await flush();
    clock.advance(29999);
    expect(FakeSource.made.length).toBe(1);
    clock.advance(1);
    expect(FakeSource.made.length).toBe(2);
    expect(es().url).toBe('/v1/events?after=e1-5');
    // Still polling until the new stream says hello.
    expect(hub.state).toBe('polling');
    es().refuse();
    await flush();
    clock.advance(59999);
    expect(FakeSource.made.length).toBe(2);
    clock.advance(1);
    expect(FakeSource.made.length).toBe(3);
    expect(es().url).toBe('/v1/events?after=e1-5');
    // The same berthd replays the gap: what it replays is told, nothing more.
    es().hello('e1', 9);
    expect(hub.state).toBe('live');
    es().job(4, 'Succeeded', 'e1-6');
    clock.advance(300);
    expect(r.batches.slice(1)).toEqual([{ events: [expect.objectContaining({ data: expect.objectContaining({ id: 4 }) })], resync: false }]);
    // Events of a stream given up on are not heard.
    first.job(9);
    clock.advance(1000);
    expect(r.batches.length).toBe(2);
    // Up again: the next failure waits 30 s again.
    es().refuse();
    await flush();
    clock.advance(30000);
    expect(FakeSource.made.length).toBe(4);
    expect(es().url).toBe('/v1/events?after=e1-6');
    // A restarted berthd: another epoch, so everything again.
    es().hello('e2', 0);
    clock.advance(300);
    expect(r.batches[2]).toEqual({ events: [], resync: true });
  });

  it('refetches once a stream refused from the start finally comes up', async () => {
    const { hub, clock, es } = setup();
    const r = recorder();
    hub.subscribe('node', r.fn);
    es().refuse();
    await flush();
    clock.advance(30000);
    expect(es().url).toBe('/v1/events');
    es().hello();
    clock.advance(300);
    expect(r.batches).toEqual([{ events: [], resync: true }]);
  });

  it('goes to sign-in, and does not try again, when the stream was refused for a 401', async () => {
    const { hub, clock, es, ended } = setup(async () => false);
    es().refuse();
    await flush();
    expect(ended()).toBe(1);
    expect(hub.running).toBe(false);
    clock.advance(3_600_000);
    expect(FakeSource.made.length).toBe(1);
    expect(hub.state).toBe('polling');
  });

  it('tries again later when the session check itself fails', async () => {
    const { clock, es, ended } = setup(() => Promise.reject(new Error('offline')));
    es().refuse();
    await flush();
    clock.advance(30000);
    expect(FakeSource.made.length).toBe(2);
    expect(ended()).toBe(0);
  });

  it('ends the session on end, closing the stream and never reconnecting', async () => {
    const { hub, clock, es, ended } = setup();
    es().hello();
    const r = recorder();
    hub.subscribe('job', r.fn);
    clock.advance(300);
    es().emit('end', { reason: 'session expired' });
    expect(ended()).toBe(1);
    expect(es().closed).toBe(true);
    expect(hub.state).toBe('polling');
    // The browser's own error after the close changes nothing.
    es().refuse();
    await flush();
    clock.advance(3_600_000);
    expect(FakeSource.made.length).toBe(1);
    expect(ended()).toBe(1);
  });

  it('closes on stop and opens a new stream on the next start', () => {
    const { hub, clock, es } = setup();
    es().hello();
    hub.stop();
    expect(es().closed).toBe(true);
    expect(hub.state).toBe('polling');
    clock.advance(3_600_000);
    expect(FakeSource.made.length).toBe(1);
    hub.start({ ended: () => undefined });
    expect(FakeSource.made.length).toBe(2);
    expect(hub.state).toBe('reconnecting');
  });

  it('polls where the browser has no EventSource', () => {
    const hub = new LiveHub({ source: null });
    hub.start({ ended: () => undefined });
    expect(hub.state).toBe('polling');
  });

  it('forgets what an unsubscribed view was about to be told', () => {
    const { hub, clock, es } = setup();
    es().hello();
    const r = recorder();
    const off = hub.subscribe('job', r.fn);
    es().job(1);
    off();
    clock.advance(1000);
    expect(r.batches).toEqual([]);
    expect(clock.pending()).toBe(0);
  });

  it('turns too many waiting events into one refetch', () => {
    FakeSource.made = [];
    const clock = fakeTimers();
    const hub = new LiveHub({ source: FakeSource, timers: clock, maxPending: 3 });
    hub.start({ ended: () => undefined });
    const es = FakeSource.made[0];
    es.hello();
    clock.advance(1000);
    const r = recorder();
    hub.subscribe('job', r.fn);
    for (let i = 0; i < 5; i++) es.job(i);
    clock.advance(300);
    expect(r.batches[0].events.length).toBe(3);
    expect(r.batches[0].resync).toBe(true);
  });

  it('ignores data it cannot read', () => {
    expect(readEvent('job', 'not json')).toBeNull();
    expect(readEvent('job', '{"id":"7"}')).toBeNull();
    expect(readEvent('node', '{"change":"state"}')).toBeNull();
    expect(readEvent('alert', '[1]')).toBeNull();
    expect(readEvent('alert', '{"id":3,"state":"open","extra":1}')).toEqual({ topic: 'alert', data: { id: 3, state: 'open' } });
  });
});
