// Inference services and interactive sessions as the console shows them:
// the objects of GET /v1/services and GET /v1/services/{tenant}/{name}
// (docs/api.md "Services"), the list's filters in the URL, a row per
// service, what changed between kept revisions, who may change a service,
// and the scale form's checks. Pure: the pages (pages/services.tsx) and
// the tests use these, nothing here asks the API.

import type { Caller, Reason } from './api';

// One replica of a service: a job of its tenant (GET /v1/jobs/{job}).
export interface ServiceReplica {
  job: number;
  revision: number;
  current: boolean;
  state: string;
  ready: boolean;
  probe: string | null;
  not_ready_since_ms: number | null;
  node: string | null;
  port: number | null;
  stopping: boolean;
  reason?: Reason | null; // why it waits, when it does not run
}

export interface CanaryStatus {
  step: number; // 1-based
  steps: number;
  weight_pct: number;
  replicas: number;
  ready: number;
  pause_ends_ms: number | null;
  awaiting_resume: boolean;
}

// The last hour's SLO attainment (a berthd with a gateway, a service with
// an SLO); figures are shares (0..1), `error_budget_burn` 1 = at budget.
export interface SloStatus {
  window: string;
  latency_p95_ms: number | null;
  windows: number;
  windows_met: number;
  requests: number;
  errors: number;
  latency_attainment: number | null;
  availability: number | null;
  error_budget_burn: number | null;
}

export interface SessionStatus {
  expires_ms: number;
  max_lifetime_ms: number;
  idle_since_ms: number | null;
  idle_ends_ms: number | null;
}

export interface ServiceStatus {
  revision: number;
  desired: number;
  ready: number;
  not_ready: number;
  running: number;
  starting: number;
  stopping: number;
  phase?: string; // steady, scaling, rolling_out, rollout_paused, canary, backing_off, pending
  recent_crashes?: number;
  backoff_until_ms?: number | null;
  refused?: string | null;
  waiting?: string | null;
  reconciled_ms?: number;
  endpoint?: string | null;
  autoscale?: { code: string; signal: string; observed: string; target: string; desired: number; reason: string } | null;
  routed?: number;
  draining?: number;
  canary?: CanaryStatus | null;
  slo?: SloStatus | null;
  session?: SessionStatus | null;
  replicas?: ServiceReplica[];
}

// One kept revision: what made it (`change`: apply, scale, rollback; a
// rollback `restores` an earlier one), and its image and bounds.
export interface ServiceRevision {
  revision: number;
  change: string;
  restores: number | null;
  created_ms: number;
  created_by: string;
  image: string;
  replicas: { min: number; max: number };
}

// The spec in its canonical form (docs/services.md "The spec"); only the
// fields the console reads.
export interface ServiceSpec {
  kind?: string; // 'session' only for a session
  name: string;
  tenant: string;
  queue: string;
  image?: string;
  command?: string[];
  port?: number;
  access?: string;
  model?: { name: string; version?: string };
  replicas?: { min: number; max: number };
  resources?: { gpus: string; gpu_memory: string; cpu: string; memory: string };
  slo?: { latency_p95_ms?: number; availability: string };
  autoscaling?: { signal: string; target: string; scale_to_zero?: { enabled: boolean; idle_window: string } };
  rollout?: { max_surge: number; max_unavailable: number; canary?: { weight: string; pause: string }[] };
  session?: { max_lifetime: string; idle_window: string; idle_gpu_utilization: string };
}

export interface Service {
  tenant: string;
  name: string;
  queue: string;
  revision: number;
  created_ms: number;
  created_by: string;
  updated_ms: number;
  updated_by: string;
  status: ServiceStatus;
  spec: ServiceSpec;
  revisions?: ServiceRevision[];
}

export interface ServicePage {
  services: Service[];
  next?: string;
}

export type ServiceKind = 'service' | 'session';

export function kindOf(s: Service): ServiceKind {
  return s.spec?.kind === 'session' ? 'session' : 'service';
}

// --- the list's filters -------------------------------------------------------

export interface ServiceFilters {
  kind: ServiceKind | '';
  tenant: string;
}

export function serviceFilterParams(f: ServiceFilters): URLSearchParams {
  const p = new URLSearchParams();
  if (f.kind) p.set('kind', f.kind);
  if (f.tenant.trim()) p.set('tenant', f.tenant.trim());
  return p;
}

// The filters of /ui/services?kind=session&tenant=blue; a kind the API
// does not know (it would answer 400) is dropped.
export function parseServiceFilters(search: string): ServiceFilters {
  const p = new URLSearchParams(search);
  const kind = p.get('kind') ?? '';
  return { kind: kind === 'service' || kind === 'session' ? kind : '', tenant: p.get('tenant') ?? '' };
}

// GET /v1/services's query: the filters, the page size, the cursor.
export function servicesQuery(f: ServiceFilters, page: { limit: number; after?: string }): string {
  const p = serviceFilterParams(f);
  p.set('limit', String(page.limit));
  if (page.after) p.set('after', page.after);
  return p.toString();
}

export const serviceKey = (s: { tenant: string; name: string }) => `${s.tenant}/${s.name}`;

// One more page: a service listed again (the list moved) kept once, newest form.
export function appendServices(shown: Service[], page: Service[]): Service[] {
  const fresh = new Map(page.map((s) => [serviceKey(s), s]));
  const kept = shown.map((s) => fresh.get(serviceKey(s)) ?? s);
  const seen = new Set(shown.map(serviceKey));
  return kept.concat(page.filter((s) => !seen.has(serviceKey(s))));
}

// The console URL of a service's page.
export function servicePath(s: { tenant: string; name: string }): string {
  return `/ui/services/${encodeURIComponent(s.tenant)}/${encodeURIComponent(s.name)}`;
}

// --- a row ----------------------------------------------------------------------

// The SLO as one word: none (no SLO figures: no gateway, a session),
// no_traffic (no request in the window), burning (the error budget spent
// faster than it lasts), met.
export type SloState = 'none' | 'no_traffic' | 'met' | 'burning';

export function sloState(slo: SloStatus | null | undefined): SloState {
  if (!slo) return 'none';
  if (slo.requests === 0 || slo.availability === null) return 'no_traffic';
  return slo.error_budget_burn !== null && slo.error_budget_burn > 1 ? 'burning' : 'met';
}

export interface ServiceRow {
  key: string;
  tenant: string;
  name: string;
  kind: ServiceKind;
  queue: string;
  ready: number;
  desired: number;
  min: number;
  max: number;
  revision: number;
  phase: string;
  canary: CanaryStatus | null;
  slo: SloState;
  endpoint: string | null;
}

export function serviceRow(s: Service): ServiceRow {
  const kind = kindOf(s);
  const bounds = s.spec?.replicas ?? { min: 1, max: 1 }; // a session: one replica
  return {
    key: serviceKey(s),
    tenant: s.tenant,
    name: s.name,
    kind,
    queue: s.queue,
    ready: s.status?.ready ?? 0,
    desired: s.status?.desired ?? 0,
    min: bounds.min,
    max: bounds.max,
    revision: s.revision,
    phase: s.status?.phase ?? 'pending',
    canary: s.status?.canary ?? null,
    slo: kind === 'session' ? 'none' : sloState(s.status?.slo),
    endpoint: s.status?.endpoint ?? null,
  };
}

// --- revisions -----------------------------------------------------------------

export interface RevisionChange {
  revision: number;
  change: string;
  restores: number | null;
  created_ms: number;
  created_by: string;
  image: string;
  min: number;
  max: number;
  // What differs from the kept revision before it (null: the oldest kept,
  // nothing to compare with). Only image and bounds are in a revision.
  image_from: string | null;
  bounds_from: { min: number; max: number } | null;
}

// The kept revisions newest first, each with its image or bounds change
// from the one before it.
export function revisionChanges(revs: readonly ServiceRevision[] | undefined): RevisionChange[] {
  const sorted = [...(revs ?? [])].sort((a, b) => b.revision - a.revision);
  return sorted.map((r, i) => {
    const prev = sorted[i + 1];
    const bounds = r.replicas ?? { min: 1, max: 1 };
    const prevBounds = prev?.replicas ?? { min: 1, max: 1 };
    return {
      revision: r.revision,
      change: r.change,
      restores: r.restores ?? null,
      created_ms: r.created_ms,
      created_by: r.created_by,
      image: r.image ?? '',
      min: bounds.min,
      max: bounds.max,
      image_from: prev && (prev.image ?? '') !== (r.image ?? '') ? (prev.image ?? '') : null,
      bounds_from: prev && (prevBounds.min !== bounds.min || prevBounds.max !== bounds.max) ? prevBounds : null,
    };
  });
}

// --- who may do what -------------------------------------------------------------

// What the server allows on scale, rollback, resume and delete: a platform
// admin, or a member or tenant-admin of the service's tenant. A viewer and
// another tenant get no controls (berthd refuses them anyway: 403, 404).
export function canManageService(caller: Caller, tenant: string): boolean {
  if (caller.platform_admin) return true;
  const role = caller.tenants[tenant];
  return role === 'member' || role === 'tenant-admin';
}

export interface ServiceActions {
  scale: boolean; // a session is never scaled (409)
  rollback: boolean; // needs a revision before the current one
  resume: boolean; // a canary step awaits its resume
  delete: boolean;
}

export function serviceActions(caller: Caller, s: Service): ServiceActions {
  const may = canManageService(caller, s.tenant);
  const session = kindOf(s) === 'session';
  return {
    scale: may && !session,
    rollback: may && s.revision > 1,
    resume: may && !!s.status?.canary?.awaiting_resume,
    delete: may,
  };
}

// --- the scale form --------------------------------------------------------------

export const MAX_REPLICAS = 1024;

export type ScaleErrorKind = 'notWhole' | 'minRange' | 'maxRange' | 'minAboveMax' | 'nothing';

export interface ScaleCheck {
  min?: number; // left out: unchanged
  max?: number;
  errors: { field: 'min' | 'max'; kind: ScaleErrorKind }[];
}

const whole = (s: string) => /^\d+$/.test(s.trim());

// The bounds typed (an empty field keeps its value) checked as berthd
// checks them (0 <= min <= max, 1 <= max <= 1024), against the current
// bounds for the one left out.
export function checkScale(minText: string, maxText: string, current: { min: number; max: number }): ScaleCheck {
  const out: ScaleCheck = { errors: [] };
  const minT = minText.trim();
  const maxT = maxText.trim();
  if (!minT && !maxT) {
    out.errors.push({ field: 'min', kind: 'nothing' });
    return out;
  }
  if (minT) {
    if (!whole(minT)) out.errors.push({ field: 'min', kind: 'notWhole' });
    else if (Number(minT) > MAX_REPLICAS) out.errors.push({ field: 'min', kind: 'minRange' });
    else out.min = Number(minT);
  }
  if (maxT) {
    if (!whole(maxT)) out.errors.push({ field: 'max', kind: 'notWhole' });
    else if (Number(maxT) < 1 || Number(maxT) > MAX_REPLICAS) out.errors.push({ field: 'max', kind: 'maxRange' });
    else out.max = Number(maxT);
  }
  if (out.errors.length === 0 && (out.min ?? current.min) > (out.max ?? current.max)) {
    out.errors.push({ field: out.max !== undefined ? 'max' : 'min', kind: 'minAboveMax' });
  }
  return out;
}

// The query of POST .../scale: only the bounds given.
export function scaleQuery(c: { min?: number; max?: number }): string {
  const p = new URLSearchParams();
  if (c.min !== undefined) p.set('min', String(c.min));
  if (c.max !== undefined) p.set('max', String(c.max));
  return p.toString();
}

// A server refusal's field as one of the form's ("min", "max"), else null
// (shown above the form).
export function scaleFieldOf(field: string): 'min' | 'max' | null {
  const f = field.replace(/^replicas\./, '');
  return f === 'min' || f === 'max' ? f : null;
}

// --- a session's end --------------------------------------------------------------

// When a session ends if nothing happens: the earlier of its lifetime's
// end and its idle window's (when idle now), and which.
export function sessionEnd(s: SessionStatus | null | undefined): { at_ms: number; cause: 'lifetime' | 'idle' } | null {
  if (!s) return null;
  if (s.idle_ends_ms !== null && s.idle_ends_ms < s.expires_ms) return { at_ms: s.idle_ends_ms, cause: 'idle' };
  return { at_ms: s.expires_ms, cause: 'lifetime' };
}
