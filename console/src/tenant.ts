// The tenant view's arithmetic, kept out of the page so it can be tested
// alone: which tenants a caller may open, each queue's guarantee against
// what the tenant's own jobs hold, who may file and decide quota requests,
// and the quota request a form becomes.
//
// Berth has no route that reports a queue's borrowed or lent GPUs. The
// guarantee and its limits come from the policy (GET /v1/policy, readable by
// every token); what a queue uses is counted from the tenant's Scheduled and
// Running jobs (GET /v1/jobs, which lists only the caller's tenants). What is
// over the guarantee is borrowed; whether another tenant borrows this
// queue's idle guarantee is not visible to the tenant (other tenants' jobs
// are hidden), so the page shows what may be lent, not what is.

import type { Caller, JobSummary, PolicyQueue } from './api';

// A quota amount as the policy's JSON has it: milli-GPUs for `gpus`.
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

// GPUs a job holds while Scheduled or Running: per replica times replicas.
export const HOLDING = ['Scheduled', 'Running'] as const;
export function jobGpus(j: JobSummary): number {
  if (!(HOLDING as readonly string[]).includes(j.state)) return 0;
  return (j.resources?.gpus ?? 0) * Math.max(1, j.replicas ?? 1);
}

export interface QueueRow {
  path: string;
  depth: number;
  kind: string;
  overQuota: string;
  guaranteed: number; // GPUs
  borrowLimit: number | null; // GPUs; null: no limit
  lendingLimit: number; // GPUs of the guarantee never lent
  used: number; // GPUs held by the queue's and its children's jobs
  borrowed: number; // used over the guarantee
  lendable: number; // idle guarantee others may borrow
}

// A job's queue as a policy path: a job names its queue below its tenant
// (tenant blue, queue main: the policy's blue/main), as berthd's admission
// and usage reports join them.
export function queuePath(j: Pick<JobSummary, 'tenant' | 'queue'>): string {
  return `${j.tenant}/${j.queue}`;
}

// One row per queue of `tenant` in the policy's order, its children below
// it. A queue's use counts its own jobs and its children's.
export function queueRows(queues: readonly PolicyQueue[], tenant: string, jobs: readonly JobSummary[]): QueueRow[] {
  const mine = queues.filter((q) => q.tenant === tenant);
  return mine.map((q) => {
    const g = q.quota?.gpus;
    const guaranteed = (g?.guaranteed ?? 0) / MGPU;
    const lendingLimit = (g?.lending_limit ?? 0) / MGPU;
    const used = jobs
      .filter((j) => j.tenant === tenant && (queuePath(j) === q.path || queuePath(j).startsWith(q.path + '/')))
      .reduce((n, j) => n + jobGpus(j), 0);
    return {
      path: q.path,
      depth: q.path.split('/').length - 1,
      kind: q.kind,
      overQuota: q.over_quota,
      guaranteed,
      borrowLimit: g && g.borrow_limit !== null && g.borrow_limit !== undefined ? g.borrow_limit / MGPU : null,
      lendingLimit,
      used,
      borrowed: Math.max(0, used - guaranteed),
      lendable: Math.max(0, guaranteed - Math.max(used, lendingLimit)),
    };
  });
}

// The bar's fill, 0 to 100: used against the guarantee (a queue with no
// guarantee is full as soon as it uses anything).
export function usedPercent(row: Pick<QueueRow, 'used' | 'guaranteed'>): number {
  if (row.guaranteed <= 0) return row.used > 0 ? 100 : 0;
  return Math.min(100, Math.round((row.used / row.guaranteed) * 100));
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
