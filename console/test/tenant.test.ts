import { describe, expect, it } from 'vitest';
import type { Caller, PolicyQueue, QueueUsage } from '../src/api';
import {
  canDecide,
  canFile,
  canRead,
  canWithdraw,
  EMPTY_FORM,
  formField,
  gpus,
  guidePath,
  HISTORY_FROM,
  historyBars,
  queueRows,
  quotaHistory,
  quotaRequestBody,
  tenantsFor,
  tokenOwners,
  tokenState,
  usedPercent,
} from '../src/tenant';

const caller = (extra: Partial<Caller>): Caller => ({
  name: 'x',
  kind: 'user',
  platform_admin: false,
  tenants: {},
  console: null,
  ...extra,
});

const queue = (path: string, gpusQuota?: Partial<{ guaranteed: number; borrow_limit: number | null; lending_limit: number }>): PolicyQueue => ({
  path,
  tenant: path.split('/')[0],
  parent: path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '',
  kind: 'training',
  pools: [],
  quota: gpusQuota
    ? { gpus: { guaranteed: 0, borrow_limit: null, weight: 1, lending_limit: 0, ...gpusQuota } }
    : {},
  over_quota: 'borrow',
  preemptible: true,
});

// A row of GET /v1/queues; `quota` in milli-GPUs as berthd computed it.
const usage = (
  queue: string,
  used: number,
  runningJobs: number,
  quota?: Partial<Pick<QueueUsage, 'guaranteed_mgpu' | 'borrow_limit_mgpu' | 'lending_limit_mgpu' | 'borrowed_mgpu' | 'idle_guaranteed_mgpu' | 'lendable_mgpu'>>,
): QueueUsage => ({
  queue,
  tenant: queue.split('/')[0],
  parent: queue.includes('/') ? queue.slice(0, queue.lastIndexOf('/')) : null,
  kind: 'training',
  over_quota: 'borrow',
  used_mgpu: used,
  running_jobs: runningJobs,
  guaranteed_mgpu: null,
  borrow_limit_mgpu: null,
  lending_limit_mgpu: null,
  borrowed_mgpu: null,
  idle_guaranteed_mgpu: null,
  lendable_mgpu: null,
  ...(quota ? { guaranteed_mgpu: 0, lending_limit_mgpu: 0, borrowed_mgpu: 0, idle_guaranteed_mgpu: 0, lendable_mgpu: 0, ...quota } : {}),
});

const policy = [
  queue('default'),
  queue('blue', { guaranteed: 8000, borrow_limit: 4000, lending_limit: 2000 }),
  queue('blue/main', { guaranteed: 6000 }),
  queue('blue/dev'),
  queue('red', { guaranteed: 16000 }),
  queue('red/main'),
];

describe('which tenants a caller sees', () => {
  it('offers a member its own tenants and a platform admin every tenant of the policy', () => {
    expect(tenantsFor(caller({ tenants: { red: 'viewer', blue: 'member' } }), policy)).toEqual(['blue', 'red']);
    expect(tenantsFor(caller({ platform_admin: true }), policy)).toEqual(['blue', 'default', 'red']);
    expect(tenantsFor(caller({ platform_admin: true }), null)).toEqual([]);
  });

  it('lets only a tenant-admin file and withdraw, and only a platform admin decide', () => {
    const admin = caller({ platform_admin: true });
    const ta = caller({ tenants: { blue: 'tenant-admin' } });
    const member = caller({ tenants: { blue: 'member' } });
    expect([canFile(ta, 'blue'), canFile(member, 'blue'), canFile(admin, 'blue'), canFile(ta, 'red')]).toEqual([
      true,
      false,
      false,
      false,
    ]);
    expect([canWithdraw(ta, 'blue'), canWithdraw(member, 'blue')]).toEqual([true, false]);
    expect([canDecide(admin), canDecide(ta)]).toEqual([true, false]);
    expect([canRead(member, 'blue'), canRead(member, 'red'), canRead(admin, 'red')]).toEqual([true, false, true]);
  });
});

describe('queue rows', () => {
  // What berthd answers: blue guarantees 8 (2 never lent, borrow up to 4);
  // blue/main 6 of which 2.5 are used by 2 jobs (a shared GPU's half among
  // them); blue/dev has no GPU quota and a Scheduled job with no run yet.
  const answer = [
    usage('blue', 2500, 3, { guaranteed_mgpu: 8000, borrow_limit_mgpu: 4000, lending_limit_mgpu: 2000, borrowed_mgpu: 0, idle_guaranteed_mgpu: 5500, lendable_mgpu: 5500 }),
    usage('blue/main', 2500, 2, { guaranteed_mgpu: 6000, borrowed_mgpu: 0, idle_guaranteed_mgpu: 3500, lendable_mgpu: 3500 }),
    usage('blue/main/exp', 0, 0, { guaranteed_mgpu: 1000, borrowed_mgpu: 0, idle_guaranteed_mgpu: 1000, lendable_mgpu: 1000 }),
    usage('blue/dev', 0, 1),
  ];

  it("keeps the API's order, indents by parent and turns milli-GPUs into GPUs", () => {
    const rows = queueRows(answer, 'blue');
    expect(rows.map((r) => [r.path, r.depth])).toEqual([
      ['blue', 0],
      ['blue/main', 1],
      ['blue/main/exp', 2],
      ['blue/dev', 1],
    ]);
    expect(rows[0]).toMatchObject({
      used: 2.5,
      runningJobs: 3,
      quota: { guaranteed: 8, borrowLimit: 4, lendingLimit: 2, borrowed: 0, idle: 5.5, lendable: 5.5 },
    });
    expect(rows[1].quota).toMatchObject({ guaranteed: 6, borrowLimit: null, lendingLimit: 0, idle: 3.5, lendable: 3.5 });
  });

  it("shows berthd's figures as they are, computing none of its own", () => {
    // Borrowed and lendable that no client-side sum of used and guarantee
    // would give: the page must show what the API says.
    const [row] = queueRows([usage('blue', 3000, 1, { guaranteed_mgpu: 2000, borrowed_mgpu: 250, idle_guaranteed_mgpu: 125, lendable_mgpu: 75 })], 'blue');
    expect(row.quota).toMatchObject({ borrowed: 0.25, idle: 0.125, lendable: 0.075 });
  });

  it('has no quota for a queue without a GPU quota, but still its use and jobs', () => {
    const dev = queueRows(answer, 'blue')[3];
    expect(dev).toMatchObject({ path: 'blue/dev', used: 0, runningJobs: 1, quota: null });
  });

  it("leaves out another tenant's queues, and counts depth only through rows it has", () => {
    const rows = queueRows([...answer, usage('red', 5000, 1, { guaranteed_mgpu: 1000 }), usage('red/main', 5000, 1)], 'blue');
    expect(rows.map((r) => r.path)).toEqual(['blue', 'blue/main', 'blue/main/exp', 'blue/dev']);
    // A parent not in the answer indents nothing.
    expect(queueRows([usage('blue/main/exp', 0, 0)], 'blue')[0].depth).toBe(0);
  });

  it('fills the bar by use of the guarantee, capped, and full for use without one', () => {
    const q = (guaranteed: number) => ({ guaranteed, borrowLimit: null, lendingLimit: 0, borrowed: 0, idle: 0, lendable: 0 });
    expect(usedPercent({ used: 3, quota: q(4) })).toBe(75);
    expect(usedPercent({ used: 9, quota: q(4) })).toBe(100);
    expect(usedPercent({ used: 0, quota: q(0) })).toBe(0);
    expect(usedPercent({ used: 1, quota: q(0) })).toBe(100);
    expect(usedPercent({ used: 0.5, quota: null })).toBe(100);
    expect(usedPercent({ used: 0, quota: null })).toBe(0);
    expect(gpus(0.5)).toBe('0.5');
    expect(gpus(16)).toBe('16');
  });
});

describe('the quota request form', () => {
  it('sends trimmed fields and leaves an empty amount out (unchanged)', () => {
    const body = quotaRequestBody({ ...EMPTY_FORM, queue: 'blue', guaranteed: ' 16 ', reason: ' new run ' });
    expect(body).toEqual({ queue: 'blue', resource: 'gpus', guaranteed: '16', reason: 'new run' });
  });

  it("places the server's field on the form's field, and an unknown one above the form", () => {
    expect(formField('guaranteed')).toBe('guaranteed');
    expect(formField('queue')).toBe('queue');
    expect(formField('weight')).toBe('');
    expect(formField('')).toBe('');
  });
});

describe('tokens', () => {
  const members = [{ identity: 'ann' }, { identity: 'bob' }, { identity: 'ci' }];
  it("lists every member's tokens for a tenant-admin or platform admin, else the caller's own", () => {
    expect(tokenOwners(caller({ platform_admin: true }), 'blue', members)).toEqual(['ann', 'bob', 'ci']);
    expect(tokenOwners(caller({ name: 'ann', tenants: { blue: 'tenant-admin' } }), 'blue', members)).toEqual(['ann', 'bob', 'ci']);
    expect(tokenOwners(caller({ name: 'bob', tenants: { blue: 'member' } }), 'blue', members)).toEqual(['bob']);
    // A tenant-admin of another tenant is only a member here.
    expect(tokenOwners(caller({ name: 'bob', tenants: { blue: 'viewer', red: 'tenant-admin' } }), 'blue', members)).toEqual(['bob']);
  });
  it('calls a token revoked before expired, expired at its expiry', () => {
    expect(tokenState({ revoked_ms: 5, expires_ms: 1 }, 10)).toBe('revoked');
    expect(tokenState({ revoked_ms: null, expires_ms: 10 }, 10)).toBe('expired');
    expect(tokenState({ revoked_ms: null, expires_ms: 11 }, 10)).toBe('active');
    expect(tokenState({ revoked_ms: null, expires_ms: null }, 10)).toBe('active');
  });
});

describe('the quota-over-time chart', () => {
  const H = 3_600_000_000; // one GPU-hour in mGPU-ms
  const DAY = 86_400_000;
  // From 2026-12-01 06:00 UTC to 2026-12-03 12:00 UTC: 18 h, 24 h, 12 h.
  const from = Date.parse('2026-12-01T06:00:00Z');
  const to = Date.parse('2026-12-03T12:00:00Z');
  const qu = (queue: string, parent: string | null, guaranteed: number | null, tenant = 'blue'): QueueUsage => ({
    queue, tenant, parent, kind: 'training', over_quota: 'borrow', used_mgpu: 0, running_jobs: 0,
    guaranteed_mgpu: guaranteed, borrow_limit_mgpu: null, lending_limit_mgpu: guaranteed === null ? null : 0,
    borrowed_mgpu: null, idle_guaranteed_mgpu: null, lendable_mgpu: null,
  });
  const row = (queue: string, day: string, gpuHours: number) => ({
    key: { queue, day }, mgpu_ms: gpuHours * H, allocated_gpu_hours: gpuHours, cost_micros: 0, cost: '0', runs: 1,
  });
  const queues = [qu('blue', null, 4000), qu('blue/main', 'blue', 2000), qu('blue/dev', 'blue', null), qu('red', null, 8000, 'red')];

  it('gives every day of the window, each queue counting the queues below it, against the guarantee for the hours of the day in the window', () => {
    const usage = {
      from_ms: from, to_ms: to,
      rows: [
        row('blue/main', '2026-12-01', 36), // exactly 2 GPUs × 18 h: not above
        row('blue/main', '2026-12-02', 48.001), // just above 2 × 24 h
        row('blue/dev', '2026-12-02', 50),
        row('blue/main', '2026-12-03', 24.5), // above 2 × 12 h (today, so far)
        row('red/main', '2026-12-02', 999), // another tenant's: in no series
        row('blue/gone', '2026-12-02', 7), // a queue no longer in the policy
      ],
    };
    const s = quotaHistory(queues, usage, 'blue');
    expect(s.map((q) => q.queue)).toEqual(['blue', 'blue/main', 'blue/dev']);
    const [root, main, dev] = s;
    expect(main.days.map((d) => d.day)).toEqual(['2026-12-01', '2026-12-02', '2026-12-03']);
    expect(main.days.map((d) => d.hours)).toEqual([18, 24, 12]);
    expect(main.days.map((d) => d.guaranteeGpuHours)).toEqual([36, 48, 24]);
    expect(main.days.map((d) => d.gpuHours)).toEqual([36, 48.001, 24.5]);
    expect(main.days.map((d) => d.borrowed)).toEqual([false, true, true]);
    expect(main.borrowedDays).toEqual(['2026-12-02', '2026-12-03']);
    expect(main.guaranteed).toBe(2);
    expect(main.depth).toBe(1);
    // The parent: its children's use against its own 4 GPUs (96 GPU-hours a day).
    expect(root.days.map((d) => d.gpuHours)).toEqual([36, 98.001, 24.5]);
    expect(root.days.map((d) => d.guaranteeGpuHours)).toEqual([72, 96, 48]);
    expect(root.borrowedDays).toEqual(['2026-12-02']);
    expect(root.max).toBe(98.001);
    // No GPU quota: no reference line, never "borrowed".
    expect(dev.guaranteed).toBeNull();
    expect(dev.days.map((d) => d.guaranteeGpuHours)).toEqual([null, null, null]);
    expect(dev.borrowedDays).toEqual([]);
    expect(dev.days.map((d) => d.gpuHours)).toEqual([0, 50, 0]);
  });

  it('counts any use above a guarantee of zero as borrowed, and none with no use', () => {
    const s = quotaHistory([qu('blue', null, 0)], { from_ms: 0, to_ms: 2 * DAY, rows: [row('blue', '1970-01-02', 0.5)] }, 'blue');
    expect(s[0].days.map((d) => d.borrowed)).toEqual([false, true]);
    expect(s[0].max).toBe(1);
  });

  it('asks berthd for the last 14 days by queue and day', () => {
    expect(HISTORY_FROM).toBe('14d');
  });

  it('draws bars and a step line for the guarantee against the series top', () => {
    const s = quotaHistory(queues, { from_ms: Date.parse('2026-12-01T00:00:00Z'), to_ms: Date.parse('2026-12-03T00:00:00Z'), rows: [row('blue/main', '2026-12-02', 96)] }, 'blue')[1];
    expect(s.max).toBe(96);
    expect(historyBars(s, 100, 50)).toEqual([
      { day: '2026-12-01', x: 7.5, width: 35, height: 0, guideY: 25 },
      { day: '2026-12-02', x: 57.5, width: 35, height: 50, guideY: 25 },
    ]);
    expect(guidePath(s, 100, 50, 60)).toBe('M 0 35 L 50 35 L 50 35 L 100 35');
    expect(guidePath({ days: [], max: 1 }, 100, 50, 60)).toBe('');
  });
});
