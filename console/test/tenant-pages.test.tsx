import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { HISTORY_GAP_MS } from '../src/pages/tenant-history';
import { BerthApi, type Caller, type QuotaRequest } from '../src/api';
import { click, json, platformAdmin as root, settle, startApp } from './support';

const blueMember: Caller = { ...root, name: 'bob', platform_admin: false, tenants: { blue: 'member' } };
const blueAdmin: Caller = { ...root, name: 'ann', platform_admin: false, tenants: { blue: 'tenant-admin' } };

const q = (path: string, guaranteed: number) => ({
  path,
  tenant: path.split('/')[0],
  parent: '',
  kind: 'training',
  pools: [],
  quota: { gpus: { guaranteed, borrow_limit: null, weight: 1, lending_limit: 0 } },
  over_quota: 'borrow',
  preemptible: true,
});
const policy = {
  version: 3,
  applied_at_ms: 1,
  applied_by: 'root',
  comment: '',
  policy: { queues: [q('blue', 4000), q('blue/main', 2000), q('red', 8000)] },
};
// GET /v1/queues as berthd answers it for blue (policy version 5, newer than
// GET /v1/policy's 3: the page names the version the numbers come from).
// blue/main's two jobs hold 2.5 GPUs (one has half a shared GPU); blue/dev
// has no GPU quota and one job holding no GPU.
const row = (queue: string, parent: string | null, used: number, jobs: number, quota: Record<string, number | null> | null) => ({
  queue, tenant: 'blue', parent, kind: 'training', over_quota: 'borrow', used_mgpu: used, running_jobs: jobs,
  guaranteed_mgpu: null, borrow_limit_mgpu: null, lending_limit_mgpu: null, borrowed_mgpu: null,
  idle_guaranteed_mgpu: null, lendable_mgpu: null, ...quota,
});
const blueQueues = {
  policy_version: 5,
  queues: [
    row('blue', null, 2500, 3, { guaranteed_mgpu: 4000, borrow_limit_mgpu: null, lending_limit_mgpu: 3000, borrowed_mgpu: 0, idle_guaranteed_mgpu: 1500, lendable_mgpu: 1000 }),
    row('blue/main', 'blue', 2500, 2, { guaranteed_mgpu: 2000, borrow_limit_mgpu: 3000, lending_limit_mgpu: 0, borrowed_mgpu: 500, idle_guaranteed_mgpu: 0, lendable_mgpu: 0 }),
    row('blue/dev', 'blue', 0, 1, null),
  ],
};
const pending: QuotaRequest = {
  id: 4, tenant: 'blue', queue: 'blue', resource: 'gpus', guaranteed: '8', borrow_limit: null, weight: null,
  lending_limit: null, reason: 'bigger runs', state: 'Pending', filed_by: 'ann', filed_ms: 5, decided_by: '',
  decided_ms: null, comment: '', policy_version: null,
};
const usage = (by: string, key: string) => ({
  from_ms: 1, to_ms: 2, currency: 'EUR', by: [by], records: 1, telemetry: false,
  rows: [{ key: { [by]: key }, mgpu_ms: 10800000000, allocated_gpu_hours: 3, cost_micros: 7500000, cost: '7.50', runs: 1 }],
  total: { key: {}, mgpu_ms: 10800000000, allocated_gpu_hours: 3, cost_micros: 7500000, cost: '7.50', runs: 1 },
});

// GET /v1/usage?by=queue,day for blue over a short window (18 h, 24 h and
// 12 h of three UTC days): blue/main (2 GPUs guaranteed) ran above its
// guarantee on the second day; blue/dev (no GPU quota) used 3 GPU-hours.
const GH = 3_600_000_000;
const history = {
  from_ms: Date.parse('2026-12-01T06:00:00Z'), to_ms: Date.parse('2026-12-03T12:00:00Z'), currency: 'EUR', by: ['queue', 'day'],
  records: 3, telemetry: false,
  rows: [
    { key: { queue: 'blue/main', day: '2026-12-01' }, mgpu_ms: 20 * GH, allocated_gpu_hours: 20, cost_micros: 0, cost: '0', runs: 1 },
    { key: { queue: 'blue/main', day: '2026-12-02' }, mgpu_ms: 48.5 * GH, allocated_gpu_hours: 48.5, cost_micros: 0, cost: '0', runs: 2 },
    { key: { queue: 'blue/dev', day: '2026-12-02' }, mgpu_ms: 3 * GH, allocated_gpu_hours: 3, cost_micros: 0, cost: '0', runs: 1 },
  ],
  total: { key: {}, mgpu_ms: 71.5 * GH, allocated_gpu_hours: 71.5, cost_micros: 0, cost: '0', runs: 3 },
};

interface Call {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

// What berthd answers, per its rules: members, requests and usage only to a
// caller with a role in the tenant (or a platform admin).
function mount(who: Caller, path: string, opts: { fileError?: { field: string; message: string } } = {}) {
  const calls: Call[] = [];
  const api = new BerthApi(async (url, init) => {
    const method = init?.method ?? 'GET';
    calls.push({ method, url, headers: { ...(init?.headers as Record<string, string>) }, body: init?.body as string });
    const reads = (t: string) => who.platform_admin || t in who.tenants;
    if (url === '/v1/console/session') return json(200, who);
    if (url === '/v1/policy') return json(200, policy);
    const m = /^\/v1\/tenants\/([^/]+)\/members$/.exec(url);
    if (m) {
      if (!reads(m[1])) return json(404, { error: { code: 'NotFound', message: `tenant ${m[1]} not found` } });
      return json(200, { tenant: m[1], members: [
        { identity: 'ann', kind: 'user', role: 'tenant-admin', disabled: false },
        { identity: 'bob', kind: 'user', role: 'member', disabled: false },
        { identity: 'ci', kind: 'service', role: 'member', disabled: true },
      ] });
    }
    // The caller's tenants' queues only; another tenant's name: an empty list.
    const qs = /^\/v1\/queues\?tenant=([^&]+)$/.exec(url);
    if (qs) return json(200, reads(qs[1]) ? blueQueues : { policy_version: 5, queues: [] });
    if (url.startsWith('/v1/quota-requests?')) return json(200, { requests: [pending] });
    if (url === '/v1/quota-requests' && method === 'POST') {
      if (opts.fileError) return json(400, { error: { code: 'InvalidArgument', ...opts.fileError } });
      return json(201, { ...pending, id: 5 });
    }
    const d = /^\/v1\/quota-requests\/(\d+)\/(approve|reject|withdraw)/.exec(url);
    if (d && method === 'POST') return json(200, { ...pending, state: 'Approved', policy_version: 4 });
    if (url.startsWith('/v1/usage?by=queue,day&tenant=blue&from=14d')) return json(200, history);
    if (url.startsWith('/v1/usage?by=queue')) return json(200, usage('queue', 'blue/main'));
    if (url.startsWith('/v1/usage?by=user')) return json(200, usage('user', 'bob'));
    const tk = /^\/v1\/tokens\?identity=([^&]+)&limit=500$/.exec(url);
    if (tk) {
      const id = tk[1];
      if (!(who.platform_admin || who.name === id || who.tenants.blue === 'tenant-admin')) {
        return json(404, { error: { message: `identity ${id} not found`, field: 'identity' } });
      }
      return json(200, { tokens: [{ id: `tok-${id}`, identity: id, description: `${id}'s laptop`, created_ms: 10,
        created_by: id, expires_ms: id === 'ci' ? 20 : null, revoked_ms: null, revoked_by: '' }] });
    }
    if (url === '/v1/budgets') {
      return json(200, { budgets: [{ tenant: 'blue', unit: 'currency', currency: 'EUR', limit: '100.00', used: '7.50',
        month: '2026-12', alerts: [80, 100], crossed: [], enforce: false, over: false }] });
    }
    return json(404, { error: { message: 'no' } });
  });
  return { root: startApp(api, path), calls };
}

const type = (el: Element | null, value: string) => {
  const input = el as HTMLInputElement;
  input.value = value;
  input.dispatchEvent(new Event('input', { bubbles: true }));
};
const text = (el: Element | null) => el?.textContent?.trim() ?? '';

describe('the tenant page', () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it("shows a member the tenant's queues with a running job counted, members, requests and cost, and no buttons", async () => {
    const { root: r, calls } = mount(blueMember, '/ui/tenants/blue');
    await settle(() => r.querySelector('#tenant-queues') !== null);
    const row = (p: string) => r.querySelector(`#tenant-queues tr[data-queue="${p}"]`)!;
    const cells = (p: string) =>
      ['guaranteed', 'used', 'jobs', 'borrowed', 'idle', 'lendable', 'limits'].map((c) => text(row(p).querySelector(`.${c}`)));
    // The API's rows in its order, a child indented below its parent.
    expect([...r.querySelectorAll('#tenant-queues tbody th')].map((th) => [text(th), th.className])).toEqual([
      ['blue', 'depth-0'],
      ['blue/main', 'depth-1'],
      ['blue/dev', 'depth-1'],
    ]);
    // berthd's figures in GPUs, a shared GPU's half included.
    expect(cells('blue')).toEqual(['4', '2.5', '3', '0', '1.5', '1', 'borrow up to no limit; 3 never lent']);
    expect(cells('blue/main')).toEqual(['2', '2.5', '2', '0.5', '0', '0', 'borrow up to 3; 0 never lent']);
    // No GPU quota: its use and jobs, and nothing to borrow or lend.
    expect(cells('blue/dev')).toEqual(['no GPU quota', '0', '1', '—', '—', '—', '—']);
    expect(row('blue').querySelector('meter')!.getAttribute('aria-label')).toBe('blue: 2.5 of 4 guaranteed GPUs used');
    expect(row('blue').querySelector('meter')!.getAttribute('value')).toBe('63');
    expect(row('blue/main').querySelector('meter')!.getAttribute('class')).toBe('over');
    expect(row('blue/dev').querySelector('meter')!.getAttribute('aria-label')).toBe('blue/dev: 0 GPUs used, no GPU quota');
    expect(text(r.querySelector('#queues-help'))).toContain('policy version 5');
    expect(text(r.querySelector('#tenant-role'))).toBe('Your role: member');
    expect([...r.querySelectorAll('#tenant-members tr[data-member]')].map(text)).toEqual([
      'annusertenant admin',
      'bobusermember',
      'ciservice accountmember (disabled)',
    ]);
    expect(text(r.querySelector('#tenant-requests tr[data-request="4"] .state'))).toBe('Pending');
    // Its own tokens only; it asks for nobody else's.
    await settle(() => r.querySelector('#tenant-tokens') !== null);
    expect([...r.querySelectorAll('#tenant-tokens tr[data-token]')].map((e) => e.getAttribute('data-token'))).toEqual(['tok-bob']);
    expect(calls.filter((c) => c.url.startsWith('/v1/tokens')).map((c) => c.url)).toEqual(['/v1/tokens?identity=bob&limit=500']);
    expect(r.querySelector('#qr-form')).toBeNull();
    expect(r.querySelector('[data-action]')).toBeNull();
    expect(text(r.querySelector('#cost-by-queue tr[data-key="blue/main"]'))).toBe('blue/main37.501');
    expect(text(r.querySelector('#cost-by-user thead'))).toContain('Cost (EUR)');
    expect(text(r.querySelector('#tenant-budget'))).toBe('Budget for 2026-12: 7.50 of 100.00 EUR used.');
    // What it asked: the tenant's queues, requests and usage, scoped by
    // tenant; no policy and no job list (berthd counts the use).
    const urls = calls.map((c) => c.url);
    expect(urls.filter((u) => u.startsWith('/v1/queues'))).toEqual(['/v1/queues?tenant=blue']);
    expect(urls).toContain('/v1/usage?by=queue&tenant=blue');
    expect(urls).toContain('/v1/usage?by=user&tenant=blue');
    expect(urls.some((u) => u.startsWith('/v1/quota-requests?tenant=blue'))).toBe(true);
    expect(urls.filter((u) => u.startsWith('/v1/jobs') || u.startsWith('/v1/policy'))).toEqual([]);
  });

  it("charts each queue's use per day over the last 14 days against its guarantee, with borrowed days marked and a table", async () => {
    const { root: r, calls } = mount(blueMember, '/ui/tenants/blue');
    await settle(() => r.querySelector('#tenant-history') !== null);
    expect(calls.filter((c) => c.url.startsWith('/v1/usage?by=queue,day')).map((c) => c.url)).toEqual([
      '/v1/usage?by=queue,day&tenant=blue&from=14d',
    ]);
    expect(text(r.querySelector('#history-h'))).toBe('Quota over the last 14 days');
    const panel = (q: string) => r.querySelector(`#tenant-history .panel[data-queue="${q}"]`)!;
    expect([...r.querySelectorAll('#tenant-history .panel')].map((p) => p.getAttribute('data-queue'))).toEqual(['blue', 'blue/main', 'blue/dev']);
    // An image with a name and a description.
    const svg = panel('blue/main').querySelector('svg')!;
    expect(svg.getAttribute('role')).toBe('img');
    const [title, desc] = svg.getAttribute('aria-labelledby')!.split(' ').map((id) => text(r.querySelector(`#${CSS.escape(id)}`)));
    expect(title).toBe('blue/main: GPU-hours per day against its guarantee');
    expect(desc).toBe('One bar per UTC day from 2026-12-01 to 2026-12-03; the dashed line is the guarantee of 2 GPUs (48 GPU-hours a whole day). Above it (borrowed) on 1 of 3 days, those bars hatched and marked with a triangle.');
    // The borrowed day: hatched, marked and named, never the colour alone.
    const day2 = panel('blue/main').querySelector('g[data-day="2026-12-02"]')!;
    expect(day2.getAttribute('data-borrowed')).toBe('true');
    expect(day2.querySelector('rect')!.getAttribute('fill')).toMatch(/^url\(#history-1-hatch\)$/);
    expect(text(day2.querySelector('text.marker'))).toBe('▲');
    expect(text(day2.querySelector('title'))).toBe('2026-12-02: 48.5 GPU-hours used, above the guarantee of 48: borrowed');
    expect(panel('blue/main').querySelector('g[data-day="2026-12-01"]')!.getAttribute('data-borrowed')).toBeNull();
    expect(panel('blue/main').querySelector('path.guide')).not.toBeNull();
    expect(text(panel('blue/main').querySelector('p'))).toBe('Borrowed on 1 of 3 days: 2026-12-02.');
    // The parent counts its children, against its own 4 GPUs.
    expect(text(panel('blue').querySelector('p'))).toBe('Never above its guarantee in these days.');
    expect(text(panel('blue/dev').querySelector('p'))).toBe('No GPU quota: nothing to borrow against.');
    expect(panel('blue/dev').querySelector('path.guide')).toBeNull();
    // The table alternative: a row per day, a column per queue.
    const table = r.querySelector('details#tenant-history-table')!;
    expect(text(table.querySelector('summary'))).toBe('The numbers: GPU-hours used per day, of the guarantee');
    expect([...table.querySelectorAll('thead th')].map(text)).toEqual([
      'Day (UTC)', 'blueguarantee 4 GPUs', 'blue/mainguarantee 2 GPUs', 'blue/devno GPU quota',
    ]);
    expect([...table.querySelectorAll('tbody tr')].map((tr) => [...tr.children].map(text))).toEqual([
      ['2026-12-01', '20 of 72', '20 of 36', '0'],
      ['2026-12-02', '51.5 of 96', '48.5 of 48, borrowed', '3'],
      ['2026-12-03', '0 of 48', '0 of 24', '0'],
    ]);
  });

  it('asks for the chart at most once a minute while the rest of the page polls', async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    try {
      const { root: r, calls } = mount(blueMember, '/ui/tenants/blue');
      await settle(() => r.querySelector('#tenant-history') !== null);
      const count = (p: string) => calls.filter((c) => c.url.startsWith(p)).length;
      await vi.advanceTimersByTimeAsync(HISTORY_GAP_MS - 1000);
      expect(count('/v1/queues')).toBeGreaterThan(3);
      expect(count('/v1/usage?by=queue,day')).toBe(1);
      await vi.advanceTimersByTimeAsync(1000);
      await settle(() => count('/v1/usage?by=queue,day') === 2);
    } finally {
      vi.useRealTimers();
    }
  });

  it('shows the chart in Chinese', async () => {
    localStorage.setItem('berth.console.lang', 'zh');
    const { root: r } = mount(blueMember, '/ui/tenants/blue');
    await settle(() => r.querySelector('#tenant-history') !== null);
    expect(text(r.querySelector('#history-h'))).toBe('最近 14 天的配额');
    expect(text(r.querySelector('#tenant-history .panel[data-queue="blue/main"] p'))).toBe('3 天中有 1 天借用：2026-12-02。');
    expect(text(r.querySelector('#tenant-history-table tbody tr[data-day="2026-12-02"] td[data-queue="blue/main"]'))).toBe('48.5 / 48，借用');
  });

  it('tells a caller with no role in the tenant that there is none, and asks for nothing of it', async () => {
    const { root: r, calls } = mount(blueMember, '/ui/tenants/red');
    await settle(() => r.querySelector('#tenant-denied') !== null);
    expect(text(r.querySelector('#tenant-denied'))).toBe('There is no tenant red that you can see.');
    expect(r.querySelector('#tenant-queues')).toBeNull();
    const asked = calls.map((c) => c.url).filter((u) => u !== '/v1/console/session');
    expect(asked).toEqual(['/v1/tenants/red/members']);
  });

  it("gives a tenant-admin the form; a 400's field puts the server's message on that field", async () => {
    const message = "'lots' is not an amount of gpus";
    const { root: r, calls } = mount(blueAdmin, '/ui/tenants/blue', { fileError: { field: 'guaranteed', message } });
    await settle(() => r.querySelector('#qr-form') !== null);
    expect(r.querySelector('[data-action="approve"]')).toBeNull();
    expect(r.querySelector('[data-action="withdraw"]')).not.toBeNull();
    type(r.querySelector('#qr-guaranteed'), 'lots');
    type(r.querySelector('#qr-reason'), 'more');
    click(r.querySelector('#qr-submit'));
    await settle(() => r.querySelector('#qr-guaranteed-error') !== null);
    expect(text(r.querySelector('#qr-guaranteed-error'))).toBe(message);
    expect(r.querySelector('#qr-guaranteed')!.getAttribute('aria-invalid')).toBe('true');
    expect(r.querySelector('#qr-reason')!.getAttribute('aria-invalid')).toBeNull();
    const post = calls.find((c) => c.method === 'POST')!;
    expect(JSON.parse(post.body!)).toEqual({ queue: 'blue', resource: 'gpus', guaranteed: 'lots', reason: 'more' });
    expect(post.headers['X-Berth-CSRF']).toBe('c5rf');
    expect(post.headers['Content-Type']).toBe('application/json');
  });

  it('lets a tenant-admin withdraw a pending request, with no comment sent', async () => {
    const { root: r, calls } = mount(blueAdmin, '/ui/tenants/blue');
    await settle(() => r.querySelector('[data-action="withdraw"]') !== null);
    click(r.querySelector('[data-action="withdraw"]'));
    await settle(() => text(r.querySelector('#qr-notice')) === 'Withdrew request 4.');
    const post = calls.filter((c) => c.method === 'POST');
    expect(post.map((c) => c.url)).toEqual(['/v1/quota-requests/4/withdraw']);
    expect(post[0].headers['X-Berth-CSRF']).toBe('c5rf');
  });

  it('puts an error on a field the form lacks above the form', async () => {
    const { root: r } = mount(blueAdmin, '/ui/tenants/blue', { fileError: { field: 'weight', message: 'bad weight' } });
    await settle(() => r.querySelector('#qr-form') !== null);
    click(r.querySelector('#qr-submit'));
    await settle(() => r.querySelector('#qr-form-error') !== null);
    expect(text(r.querySelector('#qr-form-error'))).toBe('bad weight');
  });

  it('lets a platform admin approve, and reject only with a comment', async () => {
    const { root: r, calls } = mount(root, '/ui/tenants/blue');
    await settle(() => r.querySelector('[data-action="reject"]') !== null);
    expect(r.querySelector('#qr-form')).toBeNull(); // filing is a tenant-admin's
    expect(r.querySelector('[data-action="withdraw"]')).toBeNull();
    expect(text(r.querySelector('#tenant-role'))).toBe('Your role: platform admin');
    await settle(() => r.querySelectorAll('#tenant-tokens tr[data-token]').length === 3);
    expect(text(r.querySelector('#tenant-tokens tr[data-token="tok-ci"] .state'))).toBe('expired');
    expect(text(r.querySelector('#tenant-tokens tr[data-token="tok-ann"] .state'))).toBe('active');
    const posts = () => calls.filter((c) => c.method === 'POST');
    click(r.querySelector('[data-action="reject"]'));
    await settle(() => r.querySelector('#qr-notice[role="alert"]') !== null);
    expect(text(r.querySelector('#qr-notice'))).toBe('Rejecting request 4 needs a comment saying why.');
    expect(posts().length).toBe(0);
    type(r.querySelector('#qr-comment-4'), 'not this quarter');
    click(r.querySelector('[data-action="reject"]'));
    await settle(() => posts().length === 1);
    expect(posts()[0].url).toBe('/v1/quota-requests/4/reject?comment=not%20this%20quarter');
    expect(posts()[0].headers['X-Berth-CSRF']).toBe('c5rf');
    await settle(() => text(r.querySelector('#qr-notice')) === 'Rejected request 4.');
    click(r.querySelector('[data-action="approve"]'));
    await settle(() => posts().length === 2);
    expect(posts()[1].url).toBe('/v1/quota-requests/4/approve?comment=not%20this%20quarter');
    await settle(() => text(r.querySelector('#qr-notice')) === 'Approved request 4: policy version 4 is active.');
  });

  it('lists the tenants of the policy for a platform admin and speaks Chinese', async () => {
    localStorage.setItem('berth.console.lang', 'zh');
    const { root: r } = mount(root, '/ui/tenants');
    await settle(() => r.querySelectorAll('#tenant-list a').length === 2);
    expect([...r.querySelectorAll('#tenant-list a')].map((a) => a.getAttribute('href'))).toEqual([
      '/ui/tenants/blue',
      '/ui/tenants/red',
    ]);
    expect(text(r.querySelector('h1'))).toBe('租户');
    click(r.querySelector('#tenant-list a'));
    await settle(() => r.querySelector('#tenant-queues') !== null);
    expect(text(r.querySelector('#tenant-requests tr[data-request="4"] .state'))).toBe('待审批');
    expect(text(r.querySelector('#tenant-queues tr[data-queue="blue/dev"] .guaranteed'))).toBe('无 GPU 配额');
    expect(text(r.querySelector('#tenant-queues thead'))).toContain('运行中作业');
    expect(text(r.querySelector('nav a[aria-current="page"]'))).toBe('租户');
  });

  it("lists a member's own tenants only", async () => {
    const { root: r, calls } = mount(blueMember, '/ui/tenants');
    await settle(() => r.querySelectorAll('#tenant-list a').length === 1);
    expect(text(r.querySelector('#tenant-list li'))).toBe('blue (member)');
    expect(calls.some((c) => c.url === '/v1/policy')).toBe(false);
  });
});
