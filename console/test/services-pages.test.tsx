import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BerthApi, type Caller } from '../src/api';
import { LiveHub } from '../src/live';
import { SERVICE_LIVE_POLL_MS } from '../src/pages/services';
import type { Service } from '../src/services';
import { FakeSource } from './fake-events';
import { click, json, platformAdmin as root, settle, startApp } from './support';

const blueMember: Caller = { ...root, name: 'bob', platform_admin: false, tenants: { blue: 'member' } };
const blueViewer: Caller = { ...root, name: 'vic', platform_admin: false, tenants: { blue: 'viewer' } };
const redMember: Caller = { ...root, name: 'rita', platform_admin: false, tenants: { red: 'member' } };

// A service as berthd answers it, with a canary step awaiting its resume,
// two replicas (one of the older revision) and three kept revisions.
const coder: Service = {
  tenant: 'blue', name: 'coder', queue: 'serve', revision: 3,
  created_ms: 1, created_by: 'ann', updated_ms: Date.UTC(2026, 11, 6, 10), updated_by: 'bob',
  spec: {
    name: 'coder', tenant: 'blue', queue: 'serve', image: 'reg/coder:v2', command: ['serve', '--port', '8000'],
    model: { name: 'Qwen/Qwen2.5-Coder-7B', version: 'v3' }, replicas: { min: 1, max: 4 },
    resources: { gpus: '1', gpu_memory: '20Gi', cpu: '4', memory: '32Gi' },
    slo: { latency_p95_ms: 800, availability: '99.9%' },
    autoscaling: { signal: 'concurrency', target: '100', scale_to_zero: { enabled: false, idle_window: '10m' } },
    rollout: { max_surge: 1, max_unavailable: 0, canary: [{ weight: '10%', pause: '0s' }, { weight: '100%', pause: '0s' }] },
  },
  status: {
    revision: 3, desired: 2, ready: 1, not_ready: 0, running: 2, starting: 0, stopping: 0, phase: 'canary',
    endpoint: 'http://127.0.0.1:8480/s/blue/coder/', waiting: 'canary step 1 waits to be resumed',
    canary: { step: 1, steps: 2, weight_pct: 10, replicas: 1, ready: 1, pause_ends_ms: null, awaiting_resume: true },
    slo: { window: '1h', latency_p95_ms: 800, windows: 10, windows_met: 9, requests: 200, errors: 4, latency_attainment: 0.9, availability: 0.98, error_budget_burn: 20 },
    replicas: [
      { job: 42, revision: 3, current: true, state: 'Running', ready: true, probe: 'GET /health: HTTP 200', not_ready_since_ms: null, node: 'gpu-a', port: 40129, stopping: false },
      { job: 41, revision: 2, current: false, state: 'Running', ready: true, probe: null, not_ready_since_ms: null, node: 'gpu-a', port: 40100, stopping: false },
    ],
  },
  revisions: [
    { revision: 3, change: 'apply', restores: null, created_ms: 3, created_by: 'bob', image: 'reg/coder:v2', replicas: { min: 1, max: 4 } },
    { revision: 2, change: 'scale', restores: null, created_ms: 2, created_by: 'bob', image: 'reg/coder:v1', replicas: { min: 1, max: 4 } },
    { revision: 1, change: 'apply', restores: null, created_ms: 1, created_by: 'ann', image: 'reg/coder:v1', replicas: { min: 1, max: 2 } },
  ],
};
const nb: Service = {
  tenant: 'blue', name: 'nb', queue: 'notebooks', revision: 1,
  created_ms: 1, created_by: 'bob', updated_ms: 1, updated_by: 'bob',
  spec: { kind: 'session', name: 'nb', tenant: 'blue', queue: 'notebooks', image: 'jupyter', session: { max_lifetime: '8h', idle_window: '30m', idle_gpu_utilization: '5%' } },
  status: {
    revision: 1, desired: 1, ready: 0, not_ready: 0, running: 0, starting: 1, stopping: 0, phase: 'scaling', endpoint: null,
    session: { expires_ms: Date.UTC(2026, 11, 6, 18), max_lifetime_ms: 8 * 3600_000, idle_since_ms: null, idle_ends_ms: null },
    replicas: [{ job: 50, revision: 1, current: true, state: 'Pending', ready: false, probe: null, not_ready_since_ms: null, node: null, port: null, stopping: false, reason: { code: 'QuotaExceeded', message: 'q' } }],
  },
  revisions: [{ revision: 1, change: 'apply', restores: null, created_ms: 1, created_by: 'bob', image: 'jupyter', replicas: { min: 1, max: 1 } }],
};

interface Call { method: string; url: string; headers: Record<string, string> }

// berthd's rules: a tenant's services to any role in it (or a platform
// admin), 404 to everyone else; writes to members and tenant-admins.
function mount(who: Caller, path: string, opts: { scaleError?: { field: string; message: string }; live?: LiveHub; ready?: () => number } = {}) {
  const calls: Call[] = [];
  const api = new BerthApi(async (url, init) => {
    const method = init?.method ?? 'GET';
    calls.push({ method, url, headers: { ...(init?.headers as Record<string, string>) } });
    const reads = (t: string) => who.platform_admin || t in who.tenants;
    if (url === '/v1/console/session') return json(200, who);
    if (url.startsWith('/v1/services?')) {
      const q = new URLSearchParams(url.split('?')[1]);
      const all = [coder, nb].filter((s) => reads(s.tenant));
      const kind = q.get('kind');
      return json(200, { services: all.filter((s) => !kind || (kind === 'session') === (s.spec.kind === 'session')) });
    }
    const m = /^\/v1\/services\/([^/]+)\/([^/?]+)(\/[^?]*)?(\?.*)?$/.exec(url);
    if (m) {
      const s = [coder, nb].find((x) => x.tenant === m[1] && x.name === m[2]);
      if (!s || !reads(s.tenant)) return json(404, { error: { message: `service ${m[1]}/${m[2]} not found` } });
      if (method === 'GET') return json(200, opts.ready ? { ...s, status: { ...s.status, ready: opts.ready() } } : s);
      if (m[3] === '/scale' && opts.scaleError) return json(400, { error: { code: 'InvalidArgument', ...opts.scaleError } });
      if (method === 'DELETE') return json(200, { deleted: true });
      return json(200, { ...s, revision: s.revision + 1 });
    }
    return json(404, { error: { message: 'no' } });
  });
  return { root: startApp(api, path, opts.live), calls };
}

const type = (el: Element | null, value: string) => {
  const input = el as HTMLInputElement;
  input.value = value;
  input.dispatchEvent(new Event('input', { bubbles: true }));
};
const text = (el: Element | null) => el?.textContent?.trim() ?? '';
const submit = (el: Element | null) => (el as HTMLFormElement).dispatchEvent(new Event('submit', { bubbles: true, cancelable: true }));

describe('the services list', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('lists services and sessions with replicas, revision, rollout, SLO and endpoint, linked', async () => {
    const { root: r, calls } = mount(blueMember, '/ui/services');
    await settle(() => r.querySelector('#services-table') !== null);
    const row = r.querySelector('tr[data-service="blue/coder"]')!;
    expect([...row.querySelectorAll('td')].map(text)).toEqual([
      'blue', 'coder', 'Inference service', '1 of 2 ready (1–4)', '3',
      'Canary · canary step 1 of 2, 10% of requests · waiting to be resumed', 'error budget burning',
      'http://127.0.0.1:8480/s/blue/coder/',
    ]);
    const session = r.querySelector('tr[data-service="blue/nb"]')!;
    expect(text(session.querySelectorAll('td')[2])).toBe('Interactive session');
    expect(text(session.querySelectorAll('td')[3])).toBe('0 of 1 ready (1)');
    expect(text(session.querySelectorAll('td')[7])).toBe('none (no gateway)');
    expect(row.querySelector('a')!.getAttribute('href')).toBe('/ui/services/blue/coder');
    expect(calls.some((c) => c.url === '/v1/services?limit=50')).toBe(true);
    // The header links here for everyone signed in.
    expect(r.querySelector('nav a[href="/ui/services"]')!.getAttribute('aria-current')).toBe('page');
  });

  it('puts the filters in the URL and the API query', async () => {
    const { root: r, calls } = mount(root, '/ui/services?kind=session&tenant=blue');
    await settle(() => r.querySelector('#services-table') !== null);
    expect(calls.some((c) => c.url === '/v1/services?kind=session&tenant=blue&limit=50')).toBe(true);
    expect(r.querySelector('tr[data-service="blue/coder"]')).toBeNull();
    (r.querySelector('#filter-kind') as HTMLSelectElement).value = 'service';
    submit(r.querySelector('form.filters'));
    await settle(() => location.search === '?kind=service&tenant=blue');
    await settle(() => r.querySelector('tr[data-service="blue/coder"]') !== null);
  });

  it('shows another tenant nothing', async () => {
    const { root: r } = mount(redMember, '/ui/services');
    await settle(() => r.querySelector('#services-empty') !== null);
    expect(r.textContent).not.toContain('coder');
  });

  it('in Chinese', async () => {
    localStorage.setItem('berth.console.lang', 'zh');
    const { root: r } = mount(blueMember, '/ui/services');
    await settle(() => r.querySelector('#services-table') !== null);
    expect(text(r.querySelector('h1'))).toBe('推理服务与交互会话');
    expect(text(r.querySelector('tr[data-service="blue/coder"] td:nth-child(3)'))).toBe('推理服务');
  });
});

describe('a service page', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('shows the spec, the status, the replicas as job links and the revisions newest first', async () => {
    const { root: r } = mount(blueMember, '/ui/services/blue/coder');
    await settle(() => r.querySelector('#service-revisions') !== null);
    expect(text(r.querySelector('h1'))).toBe('Service blue/coder');
    expect(text(r.querySelector('#service-resources'))).toBe('1 GPUs, 20Gi GPU memory, 4 CPUs, 32Gi memory');
    expect(text(r.querySelector('#service-bounds'))).toBe('min 1, max 4');
    expect(text(r.querySelector('#service-slo-target'))).toBe('p95 latency 800 ms, availability 99.9%');
    expect(text(r.querySelector('#service-phase'))).toBe('Canary');
    expect(text(r.querySelector('#service-canary'))).toContain('canary step 1 of 2');
    expect(text(r.querySelector('#service-slo'))).toContain('error budget burning');
    expect(text(r.querySelector('#service-slo'))).toContain('availability 98.000%');
    const jobs = [...r.querySelectorAll('#service-replicas tbody tr')];
    expect(jobs.map((tr) => tr.querySelector('a')!.getAttribute('href'))).toEqual(['/ui/jobs/41', '/ui/jobs/42']);
    expect(text(jobs[0].querySelectorAll('td')[1])).toBe('2 (older spec)');
    const revs = [...r.querySelectorAll('#service-revisions tbody tr')];
    expect(revs.map((tr) => tr.getAttribute('data-revision'))).toEqual(['3', '2', '1']);
    expect(text(revs[0].querySelectorAll('td')[4])).toBe('reg/coder:v2 (was reg/coder:v1)');
    expect(text(revs[1].querySelectorAll('td')[5])).toBe('1–4 (was 1–2)');
  });

  it("gives a viewer no controls", async () => {
    const { root: r } = mount(blueViewer, '/ui/services/blue/coder');
    await settle(() => r.querySelector('#service-revisions') !== null);
    for (const id of ['#service-actions', '#scale-form', '#rollback', '#delete', '#resume']) expect(r.querySelector(id)).toBeNull();
  });

  it('answers another tenant as a missing one and asks nothing more', async () => {
    const { root: r, calls } = mount(redMember, '/ui/services/blue/coder');
    await settle(() => r.querySelector('#service-missing') !== null);
    expect(calls.filter((c) => c.url.startsWith('/v1/services')).map((c) => c.url)).toEqual(['/v1/services/blue/coder']);
    expect(r.querySelector('#service-actions')).toBeNull();
  });

  it('scales with the CSRF token, checking the form first and placing the server\'s error on its field', async () => {
    const { root: r, calls } = mount(blueMember, '/ui/services/blue/coder', { scaleError: { field: 'max', message: 'max must be at most 1024' } });
    await settle(() => r.querySelector('#scale-form') !== null);
    type(r.querySelector('#scale-min'), '9');
    submit(r.querySelector('#scale-form'));
    await settle(() => r.querySelector('#scale-min-error') !== null);
    expect(text(r.querySelector('#scale-min-error'))).toBe('The minimum may not exceed the maximum.');
    expect(r.querySelector('#scale-min')!.getAttribute('aria-invalid')).toBe('true');
    expect(calls.some((c) => c.method === 'POST')).toBe(false);
    type(r.querySelector('#scale-min'), '');
    type(r.querySelector('#scale-max'), '8');
    submit(r.querySelector('#scale-form'));
    await settle(() => r.querySelector('#scale-max-error') !== null);
    const post = calls.find((c) => c.method === 'POST')!;
    expect(post.url).toBe('/v1/services/blue/coder/scale?max=8');
    expect(post.headers['X-Berth-CSRF']).toBe('c5rf');
    expect(text(r.querySelector('#scale-max-error'))).toBe('max must be at most 1024');
    expect(r.querySelector('#scale-max')!.getAttribute('aria-invalid')).toBe('true');
  });

  it('rolls back and deletes only after confirming, and resumes an awaiting canary step', async () => {
    const { root: r, calls } = mount(blueMember, '/ui/services/blue/coder');
    await settle(() => r.querySelector('#rollback') !== null);
    click(r.querySelector('#rollback'));
    await settle(() => r.querySelector('#rollback-question') !== null);
    expect(calls.some((c) => c.method === 'POST')).toBe(false);
    click(r.querySelector('#rollback-yes'));
    await settle(() => calls.some((c) => c.method === 'POST' && c.url === '/v1/services/blue/coder/rollback'));
    await settle(() => r.querySelector('#service-notice') !== null);
    click(r.querySelector('#resume'));
    await settle(() => calls.some((c) => c.url === '/v1/services/blue/coder/rollout/resume'));
    await settle(() => text(r.querySelector('#service-notice')) === 'The canary step was ended.');
    click(r.querySelector('#delete'));
    await settle(() => r.querySelector('#delete-no') !== null);
    click(r.querySelector('#delete-no'));
    expect(calls.some((c) => c.method === 'DELETE')).toBe(false);
    await settle(() => r.querySelector('#delete') !== null);
    click(r.querySelector('#delete'));
    await settle(() => r.querySelector('#delete-yes') !== null);
    click(r.querySelector('#delete-yes'));
    await settle(() => location.pathname === '/ui/services');
    const del = calls.find((c) => c.method === 'DELETE')!;
    expect(del.url).toBe('/v1/services/blue/coder');
    expect(del.headers['X-Berth-CSRF']).toBe('c5rf');
  });

  it('shows a session its lifetime, idle window and end, with no scale', async () => {
    const { root: r } = mount(blueMember, '/ui/services/blue/nb');
    await settle(() => r.querySelector('#session-ends') !== null);
    expect(text(r.querySelector('h1'))).toBe('Session blue/nb');
    expect(text(r.querySelector('#session-lifetime'))).toBe('8h');
    expect(text(r.querySelector('#session-idle'))).toBe('30m · idle below 5% GPU utilization');
    expect(text(r.querySelector('#session-ends'))).toContain('maximum lifetime');
    expect(r.querySelector('#scale-form')).toBeNull();
    expect(text(r.querySelector('#delete'))).toBe('Stop the session');
    expect(text(r.querySelector('#service-replicas tbody tr'))).toContain('QuotaExceeded');
  });
});

describe('a service page, live', () => {
  beforeEach(() => {
    localStorage.clear();
    vi.useFakeTimers({ shouldAdvanceTime: true });
  });
  afterEach(() => {
    vi.useRealTimers();
    document.body.innerHTML = '';
  });

  it("asks again on its tenant's job events only, and on the live interval", async () => {
    FakeSource.made = [];
    let ready = 1;
    const live = new LiveHub({ source: FakeSource });
    const { root: r, calls } = mount(blueMember, '/ui/services/blue/coder', { live, ready: () => ready });
    const count = () => calls.filter((c) => c.url === '/v1/services/blue/coder').length;
    const es = () => FakeSource.made[FakeSource.made.length - 1];
    await settle(() => r.querySelector('#service-ready') !== null);
    es().hello();
    await vi.advanceTimersByTimeAsync(400);
    await settle(() => count() === 2);
    // A replica (a job of blue) moved: asked again, and shown.
    ready = 2;
    es().job(42, 'Running');
    await vi.advanceTimersByTimeAsync(400);
    await settle(() => text(r.querySelector('#service-ready')).startsWith('2 of 2 ready'));
    expect(count()).toBe(3);
    // Another tenant's job: nothing asked.
    es().emit('job', { id: 7, tenant: 'red', queue: 'main', state: 'Running' });
    await vi.advanceTimersByTimeAsync(400);
    expect(count()).toBe(3);
    // Readiness sends no event: asked on the live interval.
    await vi.advanceTimersByTimeAsync(SERVICE_LIVE_POLL_MS);
    await settle(() => count() === 4);
  });
});
