import { describe, expect, it } from 'vitest';
import type { Caller, PolicyQueue } from '../src/api';
import {
  anyChange,
  canApplyAny,
  diffHref,
  diffRows,
  editableQueues,
  errorLine,
  fieldLine,
  fieldPath,
  figure,
  newestFirst,
  parseDiffSearch,
  previewRows,
  queueEditorTenants,
  quotaAmount,
  quotaFormOf,
  setQueueGpuQuota,
  settingValue,
  signed,
} from '../src/policy';

const caller = (extra: Partial<Caller>): Caller => ({
  name: 'x',
  kind: 'user',
  platform_admin: false,
  tenants: {},
  console: null,
  ...extra,
});

const queue = (path: string, gpus?: { guaranteed: number; borrow_limit: number | null }): PolicyQueue => ({
  path,
  tenant: path.split('/')[0],
  parent: path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '',
  kind: 'training',
  pools: [],
  quota: gpus ? { gpus: { weight: 1, lending_limit: 0, ...gpus } } : {},
  over_quota: 'borrow',
  preemptible: true,
});

// A policy as berthd prints it back (GET /v1/policy's `normalized`).
const NORMALIZED = `usage_half_life: 1h
min_runtime: 0s
pools:
  - {name: default, selector: {}}
priority_classes:
  - {name: low, value: 0}
queues:
  - name: default
    children:
      - name: default
  - name: red
    children:
      - name: main
  - name: blue
    quota:
      gpus: {guaranteed: 4}
    children:
      - name: main
        quota:
          gpus: {guaranteed: 2, borrow_limit: 3, weight: 2, lending_limit: 1}
      - name: dev
        kind: inference
      - name: team
        children:
          - name: main
`;

describe('who may change the policy', () => {
  it('lets a platform admin apply anything, and a tenant-admin only the queues below its own tenants', () => {
    const admin = caller({ platform_admin: true, tenants: { blue: 'tenant-admin' } });
    const ta = caller({ tenants: { blue: 'tenant-admin', red: 'member' } });
    const member = caller({ tenants: { blue: 'member' } });
    expect([canApplyAny(admin), canApplyAny(ta), canApplyAny(member)]).toEqual([true, false, false]);
    expect(queueEditorTenants(ta)).toEqual(['blue']);
    expect(queueEditorTenants(member)).toEqual([]);
    expect(queueEditorTenants(admin)).toEqual([]); // the admin has the whole editor
    const qs = [queue('blue'), queue('blue/main'), queue('blue/main/x'), queue('red'), queue('red/main')];
    expect(editableQueues(ta, qs).map((q) => q.path)).toEqual(['blue/main', 'blue/main/x']);
    expect(editableQueues(member, qs)).toEqual([]);
  });
});

describe('versions and the diff link', () => {
  it('lists versions newest first', () => {
    const v = (n: number) => ({ version: n, active: false, applied_at_ms: n, applied_by: 'a', comment: '', rolled_back_from: null, restores: null });
    expect(newestFirst([v(1), v(3), v(2)]).map((x) => x.version)).toEqual([3, 2, 1]);
  });

  it('round-trips two versions through the URL and drops what is not a version', () => {
    expect(diffHref({ from: 2, to: 5 })).toBe('/ui/policy/diff?from=2&to=5');
    expect(parseDiffSearch('?from=2&to=5')).toEqual({ from: 2, to: 5 });
    expect(parseDiffSearch('?from=x&to=-1')).toEqual({ from: null, to: null });
    expect(parseDiffSearch('')).toEqual({ from: null, to: null });
    expect(diffHref({ from: null, to: 3 })).toBe('/ui/policy/diff?to=3');
    expect(diffHref({ from: null, to: null })).toBe('/ui/policy/diff');
  });
});

describe('a unified diff as rows', () => {
  it('numbers each line in the version it belongs to', () => {
    // GET /v1/policy/diff?from=2&to=3 as berthd answered it.
    const diff =
      '--- policy v2\n+++ policy v3\n@@ -19,5 +19,10 @@\n     children:\n       - name: main\n   - name: blue\n+    quota:\n+      gpus: {guaranteed: 4}\n     children:\n-      - name: old\n+      - name: main\n';
    const rows = diffRows(diff);
    expect(rows.map((r) => [r.kind, r.old, r.new])).toEqual([
      ['file', null, null],
      ['file', null, null],
      ['hunk', null, null],
      ['ctx', 19, 19],
      ['ctx', 20, 20],
      ['ctx', 21, 21],
      ['add', null, 22],
      ['add', null, 23],
      ['ctx', 22, 24],
      ['del', 23, null],
      ['add', null, 25],
    ]);
    expect(rows[6].text).toBe('    quota:');
    expect(rows[3].text).toBe('    children:');
    expect(diffRows('')).toEqual([]);
  });
});

describe('the change summary', () => {
  it('writes amounts in the units the policy uses', () => {
    expect(quotaAmount('gpus', 'guaranteed', 4000)).toBe('4');
    expect(quotaAmount('gpus/H100-80GB', 'borrow_limit', 500)).toBe('0.5');
    expect(quotaAmount('gpus', 'borrow_limit', null)).toBeNull();
    expect(quotaAmount('gpus', 'weight', 3)).toBe('3');
    expect(quotaAmount('cpu', 'guaranteed', 2500)).toBe('2.5');
    expect(quotaAmount('memory', 'guaranteed', 64 * 2 ** 30)).toBe('64 GiB');
    expect(settingValue(['h100', 'a100'])).toBe('h100, a100');
    expect(settingValue(null)).toBe('');
    expect(settingValue(false)).toBe('false');
  });

  it('knows an empty summary', () => {
    const none = { queues_added: [], queues_removed: [], quota_changes: [], queue_changes: [], settings_changed: [], tenant_changes: [] };
    expect(anyChange(none)).toBe(false);
    expect(anyChange({ ...none, settings_changed: ['pools'] })).toBe(true);
    expect(anyChange({ ...none, tenant_changes: [{ tenant: 'blue', field: 'storage' }] })).toBe(true);
  });
});

describe("a preview's figures", () => {
  // The answer of POST /v1/policy/preview in docs/api.md, shortened.
  const col = (jobs: number, wait: number, p95: number, jct: number, h: number, cost: number | null) => ({
    jobs, finished: jobs, mean_wait_s: wait, p95_wait_s: p95, mean_jct_s: jct, gpu_hours: h, evictions: 0, lost_gpu_hours: 0, cost,
  });
  const answer = {
    overall: {
      current: col(6, 8.728, 17.123, 16.7565, 0.05352, 0.21945),
      proposed: col(6, 7.8947, 19.488, 17.2565, 0.05463, 0.224),
      change: { mean_wait_s: -0.8333, p95_wait_s: 2.365, mean_jct_s: 0.5, gpu_hours: 0.00111, cost: 0.00456 },
    },
    tenants: [
      {
        tenant: 'nlp',
        current: col(4, 4.743, 9, 12, 0.03, null),
        proposed: col(5, 9.493, 10, 13, 0.031, null),
        change: { mean_wait_s: 4.75, p95_wait_s: 1, mean_jct_s: 1, gpu_hours: 0.001, cost: null },
      },
    ],
  };

  it('gives a row per tenant, then every tenant together, with current, proposed and change', () => {
    const rows = previewRows(answer);
    expect(rows.map((r) => r.tenant)).toEqual(['nlp', null]);
    expect(rows[0].cells.map((c) => [c.metric, c.current, c.proposed, c.change])).toEqual([
      ['jobs', 4, 5, 1],
      ['mean_wait_s', 4.743, 9.493, 4.75],
      ['p95_wait_s', 9, 10, 1],
      ['mean_jct_s', 12, 13, 1],
      ['gpu_hours', 0.03, 0.031, 0.001],
      ['cost', null, null, null],
    ]);
    expect(rows[1].cells.find((c) => c.metric === 'cost')).toEqual({ metric: 'cost', current: 0.21945, proposed: 0.224, change: 0.00456 });
    expect(previewRows({})).toEqual([]);
  });

  it('rounds each figure for reading and signs a change', () => {
    expect(figure('mean_wait_s', 8.728)).toBe('8.7');
    expect(figure('p95_wait_s', 17)).toBe('17.0');
    expect(figure('gpu_hours', 0.05352)).toBe('0.054');
    expect(figure('cost', 0.21945)).toBe('0.22');
    expect(figure('jobs', 6)).toBe('6');
    expect(figure('cost', null)).toBeNull();
    expect(signed('mean_wait_s', -0.8333)).toBe('-0.8');
    expect(signed('p95_wait_s', 2.365)).toBe('+2.4');
    expect(signed('mean_jct_s', -0.01)).toBe('0.0');
    expect(signed('jobs', 0)).toBe('0');
    expect(signed('cost', null)).toBeNull();
  });
});

describe('where a refusal points', () => {
  it('splits a field path', () => {
    expect(fieldPath('queues[2].children[0].quota.gpus.guaranteed')).toEqual(['queues', 2, 'children', 0, 'quota', 'gpus', 'guaranteed']);
  });

  it("finds the line of the field berthd names in the text that was sent", () => {
    const lines = NORMALIZED.split('\n');
    const at = (n: number | null) => (n === null ? null : lines[n - 1]);
    expect(at(fieldLine(NORMALIZED, 'queues[2].quota.gpus.guaranteed'))).toBe('      gpus: {guaranteed: 4}');
    expect(at(fieldLine(NORMALIZED, 'queues[2].children[0].quota.gpus.borrow_limit'))).toBe(
      '          gpus: {guaranteed: 2, borrow_limit: 3, weight: 2, lending_limit: 1}',
    );
    expect(at(fieldLine(NORMALIZED, 'queues[2].children[1].kind'))).toBe('        kind: inference');
    expect(at(fieldLine(NORMALIZED, 'queues[2].children[2].children[0].name'))).toBe('          - name: main');
    expect(at(fieldLine(NORMALIZED, 'queues'))).toBe('queues:');
    expect(at(fieldLine(NORMALIZED, 'min_runtime'))).toBe('min_runtime: 0s');
    // Not there: the deepest part that is.
    expect(at(fieldLine(NORMALIZED, 'queues[1].children[0].quota.gpus'))).toBe('      - name: main');
    expect(fieldLine(NORMALIZED, 'body')).toBeNull();
  });

  it('finds a field in YAML written by hand, sequences at the key column and comments included', () => {
    const hand = 'queues:\n# the teams\n- name: vision\n  quota:\n    gpus:\n      guaranteed: lots\n';
    expect(fieldLine(hand, 'queues[0].quota.gpus.guaranteed')).toBe(6);
  });

  it("falls back to the line a YAML parse error's message gives", () => {
    expect(errorLine('queues: [', { field: '', message: 'the policy is not a valid YAML document: line 1, column 1: end of sequence flow not found' })).toBe(1);
    expect(errorLine(NORMALIZED, { field: 'queues[2].quota.gpus.guaranteed', message: "'lots' is not a GPU amount" })).toBe(16);
    expect(errorLine(NORMALIZED, { field: 'body', message: 'ann may change only the queues below the tenants it administers' })).toBeNull();
  });
});

describe("a tenant-admin's queue change", () => {
  it("prefills the form with the queue's quota in GPUs", () => {
    expect(quotaFormOf(queue('blue/main', { guaranteed: 2000, borrow_limit: 3000 }))).toEqual({ queue: 'blue/main', guaranteed: '2', borrow_limit: '3' });
    expect(quotaFormOf(queue('blue/dev'))).toEqual({ queue: 'blue/dev', guaranteed: '0', borrow_limit: '' });
  });

  it("changes the queue's one gpus line, keeping its weight and lending limit", () => {
    const out = setQueueGpuQuota(NORMALIZED, { queue: 'blue/main', guaranteed: '3', borrow_limit: '5' });
    expect(typeof out).toBe('string');
    const before = NORMALIZED.split('\n');
    const after = (out as string).split('\n');
    expect(after.length).toBe(before.length);
    const changed = after.filter((l, i) => l !== before[i]);
    expect(changed).toEqual(['          gpus: {guaranteed: 3, borrow_limit: 5, weight: 2, lending_limit: 1}']);
    // An empty limit: none.
    const none = setQueueGpuQuota(NORMALIZED, { queue: 'blue/main', guaranteed: '2', borrow_limit: ' ' }) as string;
    expect(none).toContain('          gpus: {guaranteed: 2, weight: 2, lending_limit: 1}\n');
  });

  it('adds a quota below the name of a queue that has none, at any depth', () => {
    const out = setQueueGpuQuota(NORMALIZED, { queue: 'blue/dev', guaranteed: '500m', borrow_limit: '' }) as string;
    expect(out).toContain('      - name: dev\n        quota:\n          gpus: {guaranteed: 500m}\n        kind: inference\n');
    const deep = setQueueGpuQuota(NORMALIZED, { queue: 'blue/team/main', guaranteed: '1', borrow_limit: '2' }) as string;
    expect(deep).toContain('          - name: main\n            quota:\n              gpus: {guaranteed: 1, borrow_limit: 2}\n');
    // red/main is untouched by a change to blue/main (same leaf name).
    const blue = setQueueGpuQuota(NORMALIZED, { queue: 'blue/main', guaranteed: '1', borrow_limit: '' }) as string;
    expect(blue).toContain('  - name: red\n    children:\n      - name: main\n  - name: blue');
  });

  it('refuses an amount that is not one, and a queue the text lacks', () => {
    expect(setQueueGpuQuota(NORMALIZED, { queue: 'blue/main', guaranteed: 'lots', borrow_limit: '' })).toEqual({ field: 'guaranteed', problem: 'amount' });
    expect(setQueueGpuQuota(NORMALIZED, { queue: 'blue/main', guaranteed: '1', borrow_limit: '1}, x: {' })).toEqual({ field: 'borrow_limit', problem: 'amount' });
    expect(setQueueGpuQuota(NORMALIZED, { queue: 'blue/nope', guaranteed: '1', borrow_limit: '' })).toEqual({ field: 'queue', problem: 'queue' });
  });
});
