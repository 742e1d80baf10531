// The tenant view's arithmetic, kept out of the page so it can be tested
// alone: which tenants a caller may open, each queue's row of the queues
// table, who may file and decide quota requests, and the quota request a
// form becomes; and the quota-over-time chart's series: GPU-hours per UTC
// day for each queue against its guarantee, and the days it borrowed.
//
// The numbers of a queue are Berth's own (GET /v1/queues): berthd adds up
// what the live runs of the Scheduled and Running jobs of the queue and the
// queues below it hold, over every tenant's jobs, and answers only the
// caller's tenants' queues. This module only turns milli-GPUs into GPUs and
// indents a queue below its parent; it computes no use of its own.

import type { Caller, PolicyQueue, QueueUsage, Usage } from './api';
import { daysOf, MGPU_MS_PER_GPU_HOUR } from './cost';

// A quota amount as the API's JSON has it: milli-GPUs.
export const MGPU = 1000;

// The tenants the header offers: a platform admin every tenant the policy
// has; anyone else the tenants its session names, in name order.
export function tenantsFor(caller: Caller, queues: readonly PolicyQueue[] | null): string[] {
  const names = new Set<string>(Object.keys(caller.tenants));
  if (caller.platform_admin && queues) for (const q of queues) names.add(q.tenant);
  return [...names].sort();
}

// Whether the caller has any role in `tenant` (or is a platform admin): the
// server's rule for reading its members, quota requests and usage.
export function canRead(caller: Caller, tenant: string): boolean {
  return caller.platform_admin || tenant in caller.tenants;
}

// Filing and withdrawing are for a tenant-admin of the queue's tenant;
// approving and rejecting for a platform admin (docs/security.md). The
// server decides anyway.
export function canFile(caller: Caller, tenant: string): boolean {
  return caller.tenants[tenant] === 'tenant-admin';
}
export function canWithdraw(caller: Caller, tenant: string): boolean {
  return caller.tenants[tenant] === 'tenant-admin';
}
export function canDecide(caller: Caller): boolean {
  return caller.platform_admin;
}

// A queue's GPU quota against its use, in GPUs.
export interface QueueQuota {
  guaranteed: number;
  borrowLimit: number | null; // null: no limit
  lendingLimit: number; // the part of the guarantee never lent
  borrowed: number; // used over the guarantee
  idle: number; // guarantee not in use
  lendable: number; // idle guarantee beyond the part never lent
}

export interface QueueRow {
  path: string;
  depth: number; // how many of its ancestors are rows above it
  kind: string;
  overQuota: string;
  used: number; // GPUs held by the live runs of its and its children's jobs
  runningJobs: number; // its and its children's Scheduled and Running jobs
  quota: QueueQuota | null; // null: the queue has no GPU quota
}

const gpusOf = (mgpu: number | null): number => (mgpu ?? 0) / MGPU;

// One row per queue of `tenant` as GET /v1/queues lists them (the policy's
// order, a parent before its children), each indented once per ancestor
// among them. A queue of another tenant is left out, should one come.
export function queueRows(queues: readonly QueueUsage[], tenant: string): QueueRow[] {
  const mine = queues.filter((q) => q.tenant === tenant);
  const parentOf = new Map(mine.map((q) => [q.queue, q.parent]));
  const depthOf = (path: string): number => {
    let depth = 0;
    const seen = new Set([path]);
    for (let p = parentOf.get(path); p && parentOf.has(p) && !seen.has(p); p = parentOf.get(p)) {
      seen.add(p);
      depth++;
    }
    return depth;
  };
  return mine.map((q) => ({
    path: q.queue,
    depth: depthOf(q.queue),
    kind: q.kind,
    overQuota: q.over_quota,
    used: gpusOf(q.used_mgpu),
    runningJobs: q.running_jobs,
    quota:
      q.guaranteed_mgpu === null
        ? null
        : {
            guaranteed: gpusOf(q.guaranteed_mgpu),
            borrowLimit: q.borrow_limit_mgpu === null ? null : gpusOf(q.borrow_limit_mgpu),
            lendingLimit: gpusOf(q.lending_limit_mgpu),
            borrowed: gpusOf(q.borrowed_mgpu),
            idle: gpusOf(q.idle_guaranteed_mgpu),
            lendable: gpusOf(q.lendable_mgpu),
          },
  }));
}

// The bar's fill, 0 to 100: used against the guarantee (a queue with no
// guarantee, or no GPU quota, is full as soon as it uses anything).
export function usedPercent(row: Pick<QueueRow, 'used' | 'quota'>): number {
  const guaranteed = row.quota?.guaranteed ?? 0;
  if (guaranteed <= 0) return row.used > 0 ? 100 : 0;
  return Math.min(100, Math.round((row.used / guaranteed) * 100));
}

// 1.5 -> "1.5", 2 -> "2", 0.125 -> "0.125".
export function gpus(n: number): string {
  return String(Math.round(n * 1000) / 1000);
}

export interface QuotaForm {
  queue: string;
  resource: string;
  guaranteed: string;
  borrow_limit: string;
  lending_limit: string;
  reason: string;
}

export const EMPTY_FORM: QuotaForm = {
  queue: '',
  resource: 'gpus',
  guaranteed: '',
  borrow_limit: '',
  lending_limit: '',
  reason: '',
};

// The body of POST /v1/quota-requests: every field trimmed, an empty amount
// left out (the server keeps that value as it is). Nothing is checked here:
// the server names the field it refuses, and the page puts its message there.
export function quotaRequestBody(f: QuotaForm): Record<string, string> {
  const body: Record<string, string> = {};
  for (const k of ['queue', 'resource', 'guaranteed', 'borrow_limit', 'lending_limit', 'reason'] as const) {
    const v = f[k].trim();
    if (v) body[k] = v;
  }
  return body;
}

// The field of the form a server error's `field` names, or '' for one the
// form does not have (the message then goes above the form).
export function formField(field: string): keyof QuotaForm | '' {
  const known: (keyof QuotaForm)[] = ['queue', 'resource', 'guaranteed', 'borrow_limit', 'lending_limit', 'reason'];
  return (known as string[]).includes(field) ? (field as keyof QuotaForm) : '';
}

// Whose tokens the tenant page lists: every member's for a platform admin
// or a tenant-admin of the tenant, else the caller's own (GET /v1/tokens
// answers an identity's tokens to itself and to those who may act for it;
// the server still decides, and a 404 for one is left out).
export function tokenOwners(caller: Caller, tenant: string, members: readonly { identity: string }[]): string[] {
  const all = members.map((m) => m.identity);
  if (caller.platform_admin || caller.tenants[tenant] === 'tenant-admin') return all;
  return all.filter((n) => n === caller.name);
}

// A token's state at `now`: revoked, expired or active.
export function tokenState(t: { revoked_ms: number | null; expires_ms: number | null }, now: number): 'revoked' | 'expired' | 'active' {
  if (t.revoked_ms) return 'revoked';
  if (t.expires_ms !== null && t.expires_ms <= now) return 'expired';
  return 'active';
}

// The quota-over-time chart: GPU-hours per UTC day for each queue of the
// tenant (GET /v1/usage?by=queue,day&tenant=T&from=14d) against its
// guarantee. A queue's use counts its children's, as GET /v1/queues' does
// (a parent's guarantee covers the queues below it). The guarantee is
// today's (the policy's now, from GET /v1/queues): a day's reference is
// guaranteed GPUs × the hours of that day inside the window, 24 for every
// day but the first and the last (today, so far). A day is borrowed when
// the queue used more than that: it ran above its guarantee, on GPUs
// lent by others. Figures are berthd's exact mgpu_ms, compared exactly.
export const HISTORY_DAYS = 14;
const DAY_MS = 86_400_000;

export interface QuotaDay {
  day: string; // YYYY-MM-DD (UTC)
  hours: number; // the hours of the day inside the window
  mgpuMs: number; // used, the queue's and its children's
  gpuHours: number;
  guaranteeGpuHours: number | null; // null: the queue has no GPU quota
  borrowed: boolean; // used more than the guarantee that day
}

export interface QuotaSeries {
  queue: string;
  depth: number;
  guaranteed: number | null; // GPUs; null: no GPU quota
  days: QuotaDay[];
  borrowedDays: string[];
  max: number; // GPU-hours: the highest bar or reference line, at least 1
}

// The part of [from, to) that falls on each UTC day, in ms.
function dayOverlap(day: string, from: number, to: number): number {
  const start = Date.parse(`${day}T00:00:00Z`);
  return Math.max(0, Math.min(to, start + DAY_MS) - Math.max(from, start));
}

// Whether `queue` is `ancestor` or one of the queues below it.
function within(queue: string, ancestor: string, parentOf: ReadonlyMap<string, string | null>): boolean {
  const seen = new Set<string>();
  for (let q: string | null | undefined = queue; q && !seen.has(q); q = parentOf.get(q)) {
    if (q === ancestor) return true;
    seen.add(q);
  }
  return false;
}

// One series per queue of `tenant` in GET /v1/queues' order (a queue of
// another tenant is left out), every day of the usage answer's window (a
// day without use is 0). A usage row for a queue GET /v1/queues does not
// list (gone from the policy) is counted in no series.
export function quotaHistory(queues: readonly QueueUsage[], usage: Pick<Usage, 'rows' | 'from_ms' | 'to_ms'>, tenant: string): QuotaSeries[] {
  const rows = queueRows(queues, tenant);
  const mine = queues.filter((q) => q.tenant === tenant);
  const parentOf = new Map(mine.map((q) => [q.queue, q.parent]));
  const days = daysOf(usage.from_ms, usage.to_ms) ?? [];
  // Used per queue (its own jobs) and day.
  const own = new Map<string, Map<string, number>>();
  for (const r of usage.rows) {
    const q = r.key.queue ?? '';
    const d = r.key.day ?? '';
    const m = own.get(q) ?? new Map<string, number>();
    m.set(d, (m.get(d) ?? 0) + r.mgpu_ms);
    own.set(q, m);
  }
  return rows.map((row) => {
    const guaranteedMgpu = mine.find((q) => q.queue === row.path)?.guaranteed_mgpu ?? null;
    const below = [...own.keys()].filter((q) => parentOf.has(q) && within(q, row.path, parentOf));
    const series = days.map((day): QuotaDay => {
      const span = dayOverlap(day, usage.from_ms, usage.to_ms);
      const mgpuMs = below.reduce((n, q) => n + (own.get(q)?.get(day) ?? 0), 0);
      const guaranteeMgpuMs = guaranteedMgpu === null ? null : guaranteedMgpu * span;
      return {
        day,
        hours: span / 3_600_000,
        mgpuMs,
        gpuHours: mgpuMs / MGPU_MS_PER_GPU_HOUR,
        guaranteeGpuHours: guaranteeMgpuMs === null ? null : guaranteeMgpuMs / MGPU_MS_PER_GPU_HOUR,
        borrowed: guaranteeMgpuMs !== null && mgpuMs > guaranteeMgpuMs,
      };
    });
    const max = Math.max(1, ...series.map((d) => Math.max(d.gpuHours, d.guaranteeGpuHours ?? 0)));
    return {
      queue: row.path,
      depth: row.depth,
      guaranteed: row.quota ? row.quota.guaranteed : null,
      days: series,
      borrowedDays: series.filter((d) => d.borrowed).map((d) => d.day),
      max,
    };
  });
}

// A series' bars and reference line in a box `width` × `height` (the plot
// area; the page adds its margins): one slot per day, the bar in the
// middle 70 % of it, heights against the series' max. The reference is a
// step line, level across each day's slot.
export interface HistoryBar {
  day: string;
  x: number;
  width: number;
  height: number;
  guideY: number | null; // the guarantee's height from the bottom
}

const r1 = (v: number) => Math.round(v * 10) / 10;

export function historyBars(s: Pick<QuotaSeries, 'days' | 'max'>, width: number, height: number): HistoryBar[] {
  const slot = s.days.length ? width / s.days.length : width;
  const bar = Math.max(1, slot * 0.7);
  return s.days.map((d, i) => ({
    day: d.day,
    x: r1(i * slot + (slot - bar) / 2),
    width: r1(bar),
    height: r1((height * d.gpuHours) / s.max),
    guideY: d.guaranteeGpuHours === null ? null : r1((height * d.guaranteeGpuHours) / s.max),
  }));
}

// The reference line's path: level across each day's slot, from the plot's
// left (x 0) to its right; `base` is the plot's bottom in SVG coordinates.
export function guidePath(s: Pick<QuotaSeries, 'days' | 'max'>, width: number, height: number, base: number): string {
  const slot = s.days.length ? width / s.days.length : width;
  let d = '';
  s.days.forEach((day, i) => {
    if (day.guaranteeGpuHours === null) return;
    const y = r1(base - (height * day.guaranteeGpuHours) / s.max);
    d += `${d ? ' L' : 'M'} ${r1(i * slot)} ${y} L ${r1((i + 1) * slot)} ${y}`;
  });
  return d;
}

// The window GET /v1/usage is asked for: the last HISTORY_DAYS days.
export const HISTORY_FROM = `${HISTORY_DAYS}d`;
