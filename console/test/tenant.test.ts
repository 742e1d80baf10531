import { describe, expect, it } from 'vitest';
import type { Caller, JobSummary, PolicyQueue } from '../src/api';
import {
  canDecide,
  canFile,
  canRead,
  canWithdraw,
  EMPTY_FORM,
  formField,
  gpus,
  jobGpus,
  queuePath,
  queueRows,
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

let nextId = 1;
// `path` is the policy's; the job names its queue below its tenant.
const job = (path: string, state: string, g: number, replicas = 1): JobSummary => ({
  id: nextId++,
  name: 'j',
  tenant: path.split('/')[0],
  queue: path.slice(path.indexOf('/') + 1),
  submitted_by: 'a',
  state,
  reason: null,
  priority: 'normal',
  replicas,
  resources: { gpus: g },
  submitted_at_ms: 1,
  started_at_ms: null,
  finished_at_ms: null,
  cancel_requested: false,
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
  it("joins a job's tenant and queue into the policy's path", () => {
    expect(queuePath({ tenant: 'blue', queue: 'main' })).toBe('blue/main');
    expect(queuePath({ tenant: 'blue', queue: 'main/exp' })).toBe('blue/main/exp');
  });

  it('counts Scheduled and Running jobs, replicas included, and nothing else', () => {
    expect(jobGpus(job('blue/main', 'Running', 2, 3))).toBe(6);
    expect(jobGpus(job('blue/main', 'Scheduled', 1))).toBe(1);
    expect(jobGpus(job('blue/main', 'Pending', 4))).toBe(0);
    expect(jobGpus(job('blue/main', 'Succeeded', 4))).toBe(0);
  });

  it("gives a parent its children's use and splits use into guaranteed, borrowed and lendable", () => {
    const jobs = [
      job('blue/main', 'Running', 4),
      job('blue/dev', 'Running', 3),
      job('blue/dev', 'Pending', 8),
      job('red/main', 'Running', 5), // another tenant's: never counted for blue
    ];
    const rows = queueRows(policy, 'blue', jobs);
    expect(rows.map((r) => r.path)).toEqual(['blue', 'blue/main', 'blue/dev']);
    const [blue, main, dev] = rows;
    expect(blue).toMatchObject({ depth: 0, guaranteed: 8, used: 7, borrowed: 0, borrowLimit: 4, lendingLimit: 2, lendable: 1 });
    expect(main).toMatchObject({ depth: 1, guaranteed: 6, used: 4, borrowed: 0, lendable: 2, borrowLimit: null });
    // No guarantee: all its use is borrowed, nothing to lend.
    expect(dev).toMatchObject({ guaranteed: 0, used: 3, borrowed: 3, lendable: 0 });
  });

  it('never lends the part kept back by lending_limit', () => {
    const [blue] = queueRows(policy, 'blue', []);
    expect(blue.lendable).toBe(6); // 8 guaranteed, 2 never lent
  });

  it('fills the bar by use of the guarantee, capped, and full for use without one', () => {
    expect(usedPercent({ used: 3, guaranteed: 4 })).toBe(75);
    expect(usedPercent({ used: 9, guaranteed: 4 })).toBe(100);
    expect(usedPercent({ used: 0, guaranteed: 0 })).toBe(0);
    expect(usedPercent({ used: 1, guaranteed: 0 })).toBe(100);
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
