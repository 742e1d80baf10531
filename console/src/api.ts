// The console's only way to Berth's data: the REST API on the page's own
// origin, with the session cookie (HttpOnly: this code never sees it) and,
// on every write, the session's CSRF token in its header. The token is kept
// in this object's memory only: never in localStorage or a cookie, so a
// reload asks GET /v1/console/session for it again. The bearer token typed
// at sign-in is sent once and not kept at all.

import type { Lang } from './i18n';
import { jobsQuery, type JobFilters } from './query';

export interface ConsoleSession {
  csrf: string;
  csrf_header: string;
  expires_at_ms: number;
}

export interface Caller {
  name: string;
  kind: string;
  platform_admin: boolean;
  tenants: Record<string, string>;
  console: ConsoleSession | null;
}

export interface Reason {
  code: string;
  message: string;
  detail?: string;
  counts?: Record<string, number>;
}

export interface JobSummary {
  id: number;
  name: string;
  tenant: string;
  queue: string;
  submitted_by: string;
  state: string;
  reason: Reason | null;
  priority: string;
  replicas: number;
  resources: { gpus: number; gpu_model?: string };
  submitted_at_ms: number;
  started_at_ms: number | null;
  finished_at_ms: number | null;
  cancel_requested: boolean;
}

export interface JobPage {
  jobs: JobSummary[];
  next?: string;
}

export interface TimelineEvent {
  time_ms: number;
  state: string;
  event: string;
  message: string;
}

export interface Why {
  id: number;
  state: string;
  lang: Lang;
  reason: Reason | null;
  timeline: TimelineEvent[];
}

// A node's or GPU's cordon: `cordon` keeps new work off; `drain` also
// stopped what ran there when it was set.
export interface Cordon {
  kind: 'cordon' | 'drain';
  reason: string;
  by: string;
  automatic: boolean;
  at_ms: number;
}

// One node as GET /v1/nodes lists it (the fields the console reads).
export interface FleetNode {
  name: string;
  hostname?: string;
  address?: string;
  state: string; // Ready | NotReady
  state_changed_ms?: number;
  connected?: boolean;
  last_heartbeat_ms?: number;
  gpus_total: number;
  gpus_free: number;
  models: string[];
  cordon: Cordon | null;
  gpus_cordoned?: number;
  cpus?: number;
  memory_bytes?: number;
  gpu_provider?: string;
  driver_version?: string;
  cuda_version?: string;
  agent_version?: string;
}

// A job holding a GPU (or a slice of one). Of a tenant the caller may not
// read, the API sends only {id: null, name: "another tenant", other_tenant: true}.
export interface GpuHolder {
  id: number | null;
  name: string;
  tenant: string | null;
  queue: string | null;
  replica?: number;
  run_id?: string;
  other_tenant?: boolean;
  gpu_share_mgpu?: number;
  gpu_memory_bytes?: number;
}

// One GPU as GET /v1/gpus lists it.
export interface FleetGpu {
  node: string;
  node_state: string;
  index: number;
  uuid: string;
  model: string;
  memory_bytes: number;
  health: string; // healthy | unhealthy
  health_detail: string;
  cordon: Cordon | null;
  job: GpuHolder | null;
  sharing: { used_mgpu: number; used_memory_bytes: number; free_memory_bytes: number; holders: GpuHolder[] } | null;
}

export interface NodeEvent {
  time_ms: number;
  event: string;
  message: string;
}

// GET /v1/nodes/{node}: the node, its GPUs and its last 100 events.
export interface NodeDetail extends FleetNode {
  gpus: FleetGpu[];
  events: NodeEvent[];
}

export type NodeAction = 'cordon' | 'drain' | 'uncordon';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string = '',
    readonly field: string = '',
  ) {
    super(message);
  }
}

type Fetch = (input: string, init?: RequestInit) => Promise<Response>;

// Methods that change nothing: the server asks no CSRF token for them, and
// the console sends none, so the token never travels where it is not needed.
const SAFE = new Set(['GET', 'HEAD']);

export class BerthApi {
  private csrf: string | null = null;
  private csrfHeader = 'X-Berth-CSRF';

  constructor(private readonly fetchFn: Fetch = (i, init) => fetch(i, init)) {}

  get signedIn(): boolean {
    return this.csrf !== null;
  }

  private async call<T>(method: string, path: string, extra: Record<string, string> = {}): Promise<T> {
    const headers: Record<string, string> = { Accept: 'application/json', ...extra };
    if (!SAFE.has(method) && this.csrf !== null) headers[this.csrfHeader] = this.csrf;
    const res = await this.fetchFn(path, { method, headers, credentials: 'same-origin', cache: 'no-store' });
    const text = await res.text();
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (!res.ok) {
      const e = (body as { error?: { message?: string; code?: string; field?: string } } | null)?.error;
      throw new ApiError(res.status, e?.message ?? (text || res.statusText), e?.code ?? '', e?.field ?? '');
    }
    return body as T;
  }

  private remember(caller: Caller): Caller {
    if (caller.console) {
      this.csrf = caller.console.csrf;
      this.csrfHeader = caller.console.csrf_header || 'X-Berth-CSRF';
    }
    return caller;
  }

  // Starts a session from a bearer token; the answer's cookie is the
  // session from then on.
  async signIn(token: string): Promise<Caller> {
    const caller = await this.call<Caller>('POST', '/v1/console/session', {
      Authorization: `Bearer ${token.trim()}`,
    });
    return this.remember(caller);
  }

  // The session the cookie holds (after a reload), or null when there is
  // none or it ended.
  async session(): Promise<Caller | null> {
    try {
      const caller = await this.call<Caller>('GET', '/v1/console/session');
      if (!caller.console) return null;
      return this.remember(caller);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return null;
      throw e;
    }
  }

  async signOut(): Promise<void> {
    try {
      await this.call('DELETE', '/v1/console/session');
    } finally {
      this.csrf = null;
    }
  }

  listJobs(filters: JobFilters, after?: string, limit = 50): Promise<JobPage> {
    return this.call<JobPage>('GET', `/v1/jobs?${jobsQuery(filters, { limit, after })}`);
  }

  job(id: number): Promise<JobSummary> {
    return this.call<JobSummary>('GET', `/v1/jobs/${id}`);
  }

  why(id: number, lang: Lang): Promise<Why> {
    return this.call<Why>('GET', `/v1/jobs/${id}/why?lang=${lang}`);
  }

  cancel(id: number): Promise<JobSummary> {
    return this.call<JobSummary>('POST', `/v1/jobs/${id}/cancel`);
  }

  nodes(): Promise<{ nodes: FleetNode[] }> {
    return this.call('GET', '/v1/nodes');
  }

  gpus(): Promise<{ gpus: FleetGpu[] }> {
    return this.call('GET', '/v1/gpus');
  }

  node(name: string): Promise<NodeDetail> {
    return this.call('GET', `/v1/nodes/${encodeURIComponent(name)}`);
  }

  // Cordon, drain or uncordon a node, or (with `gpu`) one of its GPUs. The
  // reason goes with a cordon or drain only: uncordon takes no parameter.
  nodeAction(name: string, action: NodeAction, reason = '', gpu?: number): Promise<unknown> {
    const where = gpu === undefined ? '' : `/gpus/${gpu}`;
    const q = action !== 'uncordon' && reason.trim() ? `?reason=${encodeURIComponent(reason.trim())}` : '';
    return this.call('POST', `/v1/nodes/${encodeURIComponent(name)}${where}/${action}${q}`);
  }
}

// Whether `caller` may cancel a job of `tenant`: what the server checks on
// POST /v1/jobs/{id}/cancel (a platform admin, or a member or tenant-admin
// of the job's tenant). The button is hidden otherwise; the server still
// decides.
export function canCancel(caller: Caller, tenant: string): boolean {
  if (caller.platform_admin) return true;
  const role = caller.tenants[tenant];
  return role === 'member' || role === 'tenant-admin';
}

export function isFinished(state: string): boolean {
  return state === 'Succeeded' || state === 'Failed' || state === 'Cancelled';
}

// Whether `caller` may cordon, drain or uncordon nodes and GPUs: a platform
// admin only (POST /v1/nodes/{node}/...). Others get no buttons; the server
// refuses them anyway.
export function canCordon(caller: Caller): boolean {
  return caller.platform_admin;
}
