import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BerthApi, type Caller } from '../src/api';
import { LiveHub } from '../src/live';
import { FIRST_FETCH_WAIT_MS, LIVE_POLL_MS as FLEET_LIVE_POLL_MS } from '../src/pages/fleet';
import { POLL_MS as JOB_POLL_MS, PENDING_LIVE_POLL_MS as JOB_PENDING_MS } from '../src/pages/job';
import { POLL_MS as JOBS_POLL_MS, PENDING_LIVE_POLL_MS as JOBS_PENDING_MS } from '../src/pages/jobs';
import { FakeSource } from './fake-events';
import { click, json, platformAdmin, settle, startApp } from './support';

const blueMember: Caller = { ...platformAdmin, name: 'bob', platform_admin: false, tenants: { blue: 'member' } };

const jobOf = (id: number, state: string) => ({
  id,
  name: `job-${id}`,
  tenant: 'blue',
  queue: 'blue/main',
  submitted_by: 'bob',
  state,
  reason: { code: state === 'Pending' ? 'Queued' : '', message: '' },
  priority: 'normal',
  replicas: 1,
  resources: { gpus: 1 },
  submitted_at_ms: 1,
  started_at_ms: null,
  finished_at_ms: null,
  cancel_requested: false,
});

// The console over a fake berthd whose jobs the test changes, with an event
// stream the test drives (FakeSource.made's last).
function mount(path: string, opts: { session?: () => Response } = {}) {
  FakeSource.made = [];
  const jobs = new Map<number, string>([[42, 'Pending']]);
  const calls: string[] = [];
  let signedIn = true;
  const api = new BerthApi(async (url, init) => {
    const method = init?.method ?? 'GET';
    calls.push(`${method} ${url}`);
    if (url === '/v1/console/session') {
      if (method === 'DELETE') {
        signedIn = false;
        return new Response(null, { status: 204 });
      }
      if (opts.session) return opts.session();
      return signedIn ? json(200, blueMember) : json(401, { error: { message: 'no session' } });
    }
    if (url.startsWith('/v1/jobs?')) {
      return json(200, { jobs: [...jobs].reverse().map(([id, state]) => jobOf(id, state)) });
    }
    const one = /^\/v1\/jobs\/(\d+)$/.exec(url);
    if (one) return json(200, jobOf(Number(one[1]), jobs.get(Number(one[1])) ?? 'Pending'));
    if (/^\/v1\/jobs\/\d+\/why/.test(url)) return json(200, { id: 42, state: jobs.get(42), lang: 'en', reason: { code: 'x', message: `why ${jobs.get(42)}` }, timeline: [] });
    if (url.includes('/logs')) return new Response(new ReadableStream());
    if (url === '/v1/nodes') return json(200, { nodes: [{ name: 'n1', state: 'Ready', gpus_total: 1, gpus_free: 0, models: ['H100'], cordon: null }] });
    if (url === '/v1/gpus') {
      const holder = [...jobs].find(([, state]) => state === 'Running');
      return json(200, {
        gpus: [{
          node: 'n1', node_state: 'Ready', index: 0, uuid: 'u', model: 'H100', memory_bytes: 1, health: 'healthy', health_detail: '',
          cordon: null, sharing: null,
          job: holder ? { id: holder[0], name: `job-${holder[0]}`, tenant: 'blue', queue: 'blue/main', replica: 0 } : null,
        }],
      });
    }
    return json(404, { error: { message: 'no' } });
  });
  const live = new LiveHub({ source: FakeSource });
  const root = startApp(api, path, live);
  const es = () => FakeSource.made[FakeSource.made.length - 1];
  const count = (u: string) => calls.filter((c) => c === `GET ${u}` || (u.endsWith('?') && c.startsWith(`GET ${u}`))).length;
  return { root, calls, jobs, live, es, count };
}

const text = (el: Element | null) => el?.textContent?.trim() ?? '';

describe('live pages', () => {
  beforeEach(() => {
    localStorage.clear();
    vi.useFakeTimers({ shouldAdvanceTime: true });
  });
  afterEach(() => {
    vi.useRealTimers();
    document.body.innerHTML = '';
  });

  it('keeps the jobs list current from job events, without polling while live', async () => {
    const { root, jobs, es, count } = mount('/ui/jobs');
    await settle(() => root.querySelector('#jobs-table') !== null);
    expect(FakeSource.made.length).toBe(1);
    expect(es().url).toBe('/v1/events');
    expect(text(root.querySelector('#live-status'))).toBe('Reconnecting…');
    es().hello();
    await settle(() => text(root.querySelector('#live-status')) === 'Live');
    expect(root.querySelector('#live-status')!.getAttribute('data-live')).toBe('live');
    // Once up, the list is asked again: what happened before hello is not replayed.
    await vi.advanceTimersByTimeAsync(300);
    await settle(() => count('/v1/jobs?') === 2);
    // Live: no poll, however long nothing happens.
    await vi.advanceTimersByTimeAsync(JOBS_POLL_MS * 4);
    expect(count('/v1/jobs?')).toBe(2);
    // A burst of events is one request, and the list shows what it answers.
    for (let id = 43; id < 143; id++) {
      jobs.set(id, 'Pending');
      es().job(id, 'Pending');
    }
    jobs.set(42, 'Running');
    es().job(42, 'Running');
    await vi.advanceTimersByTimeAsync(300);
    await settle(() => root.querySelector('tr[data-job="142"]') !== null);
    expect(count('/v1/jobs?')).toBe(3);
    expect(text(root.querySelector('tr[data-job="42"] .state'))).toBe('Running');
    // A pending job's reason moves with no event: while one is listed, the
    // list is asked again every minute; with none, never.
    await vi.advanceTimersByTimeAsync(JOBS_PENDING_MS);
    await settle(() => count('/v1/jobs?') === 4);
    for (const id of jobs.keys()) jobs.set(id, 'Succeeded');
    es().job(42, 'Succeeded');
    await vi.advanceTimersByTimeAsync(300);
    await settle(() => text(root.querySelector('tr[data-job="142"] .state')) === 'Succeeded');
    await vi.advanceTimersByTimeAsync(JOBS_PENDING_MS * 2);
    expect(count('/v1/jobs?')).toBe(5);
  });

  it('polls while the stream is down, says so, and goes live again with a new stream', async () => {
    const { root, es, count } = mount('/ui/jobs');
    await settle(() => root.querySelector('#jobs-table') !== null);
    es().hello();
    await settle(() => text(root.querySelector('#live-status')) === 'Live');
    await vi.advanceTimersByTimeAsync(300);
    await settle(() => count('/v1/jobs?') === 2);
    // The connection drops; the browser reconnects by itself.
    es().drop();
    await settle(() => text(root.querySelector('#live-status')) === 'Reconnecting…');
    es().hello();
    await settle(() => text(root.querySelector('#live-status')) === 'Live');
    // An HTTP error: the browser gives up. The session holds, so: poll, and try again in 30 s.
    es().refuse();
    await settle(() => text(root.querySelector('#live-status')) === 'Refreshed every 5 s (live updates unavailable)');
    const before = count('/v1/jobs?');
    await vi.advanceTimersByTimeAsync(JOBS_POLL_MS);
    await settle(() => count('/v1/jobs?') === before + 1);
    await vi.advanceTimersByTimeAsync(30000);
    await settle(() => FakeSource.made.length === 2);
    // It asks for what followed the last event heard; berthd replays it.
    expect(es().url).toBe('/v1/events?after=e1-0');
    es().hello();
    await settle(() => text(root.querySelector('#live-status')) === 'Live');
    const up = count('/v1/jobs?');
    es().job(42, 'Running', 'e1-1');
    await vi.advanceTimersByTimeAsync(300);
    await settle(() => count('/v1/jobs?') === up + 1);
    await vi.advanceTimersByTimeAsync(JOBS_POLL_MS * 3);
    expect(count('/v1/jobs?')).toBe(up + 1);
  });

  it("follows a job through Pending, Running and Succeeded on its page from its own events only", async () => {
    const { root, jobs, es, count } = mount('/ui/jobs/42');
    await settle(() => text(root.querySelector('#job-state')) === 'Pending');
    es().hello();
    await settle(() => text(root.querySelector('#live-status')) === 'Live');
    await vi.advanceTimersByTimeAsync(300);
    await settle(() => count('/v1/jobs/42') === 2);
    // Another job's event: nothing asked.
    es().job(7, 'Running');
    await vi.advanceTimersByTimeAsync(JOB_POLL_MS * 3);
    expect(count('/v1/jobs/42')).toBe(2);
    // Waiting, its reason and estimated start move with no event: asked every 15 s.
    await vi.advanceTimersByTimeAsync(JOB_PENDING_MS - JOB_POLL_MS * 3);
    await settle(() => count('/v1/jobs/42') === 3);
    jobs.set(42, 'Running');
    es().job(42, 'Running');
    await vi.advanceTimersByTimeAsync(250);
    await settle(() => text(root.querySelector('#job-state')) === 'Running');
    await settle(() => text(root.querySelector('#why-message')) === 'why Running');
    expect(count('/v1/jobs/42')).toBe(4);
    // Running: nothing asked without an event.
    await vi.advanceTimersByTimeAsync(JOB_PENDING_MS * 2);
    expect(count('/v1/jobs/42')).toBe(4);
    jobs.set(42, 'Succeeded');
    es().job(42, 'Succeeded');
    await vi.advanceTimersByTimeAsync(250);
    await settle(() => text(root.querySelector('#job-state')) === 'Succeeded');
    // Finished: no indicator, nothing more asked.
    expect(root.querySelector('#live-status')).toBeNull();
    es().job(42, 'Succeeded');
    await vi.advanceTimersByTimeAsync(JOB_POLL_MS * 3);
    expect(count('/v1/jobs/42')).toBe(5);
  });

  it('redraws the fleet on node events and on jobs taking or leaving GPUs, not on a submission', async () => {
    const { root, jobs, es, count } = mount('/ui/fleet');
    await settle(() => root.querySelector('#fleet-map') !== null);
    es().hello();
    await vi.advanceTimersByTimeAsync(500);
    await settle(() => count('/v1/gpus') === 2);
    // A submission: Pending, holding nothing.
    jobs.set(50, 'Pending');
    es().job(50, 'Pending');
    await vi.advanceTimersByTimeAsync(3000);
    expect(count('/v1/gpus')).toBe(2);
    // It runs: the map asks, and shows its holder.
    jobs.set(50, 'Running');
    es().job(50, 'Running');
    await vi.advanceTimersByTimeAsync(2000);
    await settle(() => root.querySelector('#fleet-map [data-job="50"]') !== null);
    expect(count('/v1/gpus')).toBe(3);
    // A node event.
    es().emit('node', { node: 'n1', change: 'health' });
    await vi.advanceTimersByTimeAsync(2000);
    await settle(() => count('/v1/gpus') === 4);
    // Utilization has no event: asked every LIVE_POLL_MS while live.
    await vi.advanceTimersByTimeAsync(FLEET_LIVE_POLL_MS);
    await settle(() => count('/v1/gpus') === 5);
    expect(count('/v1/nodes')).toBe(5);
  });

  it("loads the fleet map once when the stream's hello comes as the page opens: the first fetch waits for it", async () => {
    const { root, es, count } = mount('/ui/fleet');
    await settle(() => FakeSource.made.length === 1);
    // The map is not asked for before the stream is up...
    expect(count('/v1/gpus')).toBe(0);
    es().hello();
    await settle(() => root.querySelector('#fleet-map') !== null);
    expect(count('/v1/gpus')).toBe(1);
    // ...so the hello's refetch is not needed: that fetch started after it.
    await vi.advanceTimersByTimeAsync(3000);
    expect(count('/v1/gpus')).toBe(1);
    expect(count('/v1/nodes')).toBe(1);
  });

  it("loads the fleet map again on a hello that came after its first fetch started", async () => {
    const { root, es, count } = mount('/ui/fleet');
    await settle(() => FakeSource.made.length === 1);
    await vi.advanceTimersByTimeAsync(FIRST_FETCH_WAIT_MS);
    await settle(() => root.querySelector('#fleet-map') !== null);
    expect(count('/v1/gpus')).toBe(1);
    // A change between that fetch and the stream's start would be missed.
    es().hello();
    await vi.advanceTimersByTimeAsync(500);
    await settle(() => count('/v1/gpus') === 2);
    await vi.advanceTimersByTimeAsync(3000);
    expect(count('/v1/gpus')).toBe(2);
  });

  it('goes to sign-in on end, without reconnecting, and closes the stream on sign-out', async () => {
    const first = mount('/ui/jobs');
    await settle(() => first.root.querySelector('#jobs-table') !== null);
    first.es().hello();
    first.es().emit('end', { reason: 'session revoked' });
    await settle(() => first.root.querySelector('#token') !== null);
    expect(first.root.textContent).toContain('Your session has ended. Sign in again.');
    expect(first.es().closed).toBe(true);
    await vi.advanceTimersByTimeAsync(600000);
    expect(FakeSource.made.length).toBe(1);
    document.body.innerHTML = '';

    const second = mount('/ui/jobs');
    await settle(() => second.root.querySelector('#jobs-table') !== null);
    second.es().hello();
    click(second.root.querySelector('#sign-out'));
    await settle(() => second.root.querySelector('#token') !== null);
    expect(second.es().closed).toBe(true);
    expect(second.live.running).toBe(false);
  });

  it('goes to sign-in when the stream was refused and the session is gone', async () => {
    let gone = false;
    const { root, es } = mount('/ui/jobs', {
      session: () => (gone ? json(401, { error: { message: 'expired' } }) : json(200, blueMember)),
    });
    await settle(() => root.querySelector('#jobs-table') !== null);
    gone = true;
    es().refuse();
    await settle(() => root.querySelector('#token') !== null);
    await vi.advanceTimersByTimeAsync(600000);
    expect(FakeSource.made.length).toBe(1);
  });

  it('opens no stream before sign-in', async () => {
    FakeSource.made = [];
    const api = new BerthApi(async () => json(401, { error: { message: 'no session' } }));
    const root = startApp(api, '/ui/jobs', new LiveHub({ source: FakeSource }));
    await settle(() => root.querySelector('#token') !== null);
    expect(FakeSource.made.length).toBe(0);
  });
});
