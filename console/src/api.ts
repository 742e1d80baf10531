// The console's only way to Berth's data: the REST API on the page's own
// origin, with the session cookie (HttpOnly: this code never sees it) and,
// on every write, the session's CSRF token in its header. The token is kept
// in this object's memory only: never in localStorage or a cookie, so a
// reload asks GET /v1/console/session for it again. The bearer token typed
// at sign-in is sent once and not kept at all.

import type { Lang } from './i18n';
import { jobsQuery, type JobFilters } from './query';
import { type Service, type ServiceFilters, type ServicePage, servicesQuery } from './services';

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
  // GET /v1/jobs/{id} sends the spec as submitted, and not the list's
  // priority, replicas and resources (those are in the spec).
  spec?: { priority: string; replicas: number; resources: { gpus: number; gpu_model?: string } };
  // GET /v1/jobs/{id} only: the current attempt's runs (`placement`), every
  // attempt's (`runs`), the whole timeline, oldest first, and the
  // utilization summary over all runs (null without telemetry or samples).
  exit_code?: number | null;
  signal?: number | null;
  placement?: RunInfo[];
  runs?: RunInfo[];
  timeline?: TimelineEvent[];
  utilization?: UtilizationSummary | null;
}

// One run of a job: a replica of an attempt, where it runs and how it
// ended. `gpus` are the node's GPU indices; `stopped_for` is '' unless
// Berth stopped it (preempted, drained, cancelled, ...).
export interface RunInfo {
  replica: number;
  attempt: number;
  run_id: string;
  node: string;
  gpus: number[];
  gpu_uuids?: string[];
  gpu_share_mgpu?: number;
  state: string; // Starting | Running | Exited
  exit_code: number | null;
  signal: number | null;
  stopped_for: string;
  start_error?: string;
  failure_class?: string;
  started_at_ms: number | null;
  finished_at_ms: number | null;
}

// berthd's utilization summary (docs/api.md "Telemetry").
export interface UtilizationSummary {
  avg_util_pct: number;
  max_util_pct: number;
  avg_memory_used_bytes: number;
  max_memory_used_bytes: number;
  memory_total_bytes: number;
  idle_fraction: number;
  longest_idle_ms: number;
  samples: number;
  first_ms: number;
  last_ms: number;
}

// One bucket of a GPU's telemetry series.
export interface TelemetryBucket {
  start_ms: number;
  width_ms: number;
  run_ids: string[];
  samples: number;
  util_sum: number;
  avg_util_pct: number;
  max_util_pct: number;
  avg_mem_util_pct: number;
  avg_memory_used_bytes: number;
  max_memory_used_bytes: number;
  memory_total_bytes: number;
  shared?: boolean;
}

// GET /v1/jobs/{id}/telemetry: each GPU the job held with its buckets
// (only the job's own), and each run's summary.
export interface JobTelemetry {
  from_ms: number;
  to_ms: number;
  step_ms: number;
  job: number;
  runs: { run_id: string; replica: number; attempt: number; node: string; gpu_uuids: string[]; utilization: UtilizationSummary | null }[];
  gpus: { uuid: string; node: string; gpu: number; buckets: TelemetryBucket[] }[];
}

// A job's priority, replicas and GPUs per replica: the list's fields, else
// its spec's (one job as GET /v1/jobs/{id} answers it).
export function jobShape(job: JobSummary): { priority: string; replicas: number; gpus: number } {
  return {
    priority: job.priority ?? job.spec?.priority ?? '',
    replicas: job.replicas ?? job.spec?.replicas ?? 1,
    gpus: job.resources?.gpus ?? job.spec?.resources?.gpus ?? 0,
  };
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

// A layer of a waiting job's explanation (GET /v1/jobs/{id}/why): the one
// holding it now first (order, quota, budget, nodes, not_looked_at_yet,
// with its reason code); for a job held by order, quota or budget, then
// the node layer: of `nodes`, how many `could_take` one of its replicas,
// and how many nodes each cause rules out (`nodes`) and rules out alone
// (`alone`: lifting it alone would open them), least change first.
export interface WhyLayer {
  layer: string;
  code?: string;
  nodes?: number;
  could_take?: number;
  excluded?: { cause: string; nodes: number; alone?: number }[];
}

// Why a job failed, in the language asked for: a class scripts match on,
// berthd's sentence, and the evidence (a log line, "exit code 3").
export interface Failure {
  class: string;
  message: string;
  evidence: string;
}

export interface Why {
  id: number;
  state: string;
  lang: Lang;
  // `hint`: the verified "would run now if" alone, in `lang` ("it would run
  // now with gpu_model H100-80GB"), when the reason carries one.
  reason: (Reason & { layers?: WhyLayer[]; hint?: string }) | null;
  failure?: Failure | null;
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
  // The latest telemetry sample, or null (none yet, a berthd that keeps no
  // telemetry); absent from an older berthd, read as null.
  telemetry?: GpuTelemetry | null;
  // Held by a job while its latest utilization sample is under berthd's
  // idle threshold; absent from an older berthd, read as false.
  idle_allocated?: boolean;
}

// A GPU's latest sample, as GET /v1/gpus carries it; any field may be null.
export interface GpuTelemetry {
  at_ms: number | null;
  util_pct: number | null;
  mem_util_pct: number | null;
  memory_used_bytes: number | null;
  memory_total_bytes: number | null;
  temperature_c: number | null;
  power_w: number | null;
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

// A queue as GET /v1/policy parses it. Amounts of `gpus` are milli-GPUs;
// `borrow_limit: null` is no limit.
export interface QuotaAmounts {
  guaranteed: number;
  borrow_limit: number | null;
  weight: number;
  lending_limit: number;
}
export interface PolicyQueue {
  path: string;
  tenant: string;
  parent: string;
  kind: string;
  pools: string[];
  quota: Record<string, QuotaAmounts | undefined>;
  over_quota: string;
  preemptible: boolean;
}
export interface PolicyVersion {
  version: number;
  applied_at_ms: number;
  applied_by: string;
  comment: string;
  policy: { queues: PolicyQueue[] };
}

// A version as GET /v1/policy/versions lists it (no text); GET
// /v1/policy/versions/{v} and GET /v1/policy add `yaml` (as applied,
// comments kept) and `normalized` (printed back in canonical form, what
// diffs compare). A rollback's version names the version it `restores` and
// the one active then (`rolled_back_from`).
export interface PolicyVersionInfo {
  version: number;
  active: boolean;
  applied_at_ms: number;
  applied_by: string;
  comment: string;
  rolled_back_from: number | null;
  restores: number | null;
}
export interface PolicyVersionFull extends PolicyVersionInfo {
  yaml: string;
  normalized: string;
  policy: { queues: PolicyQueue[] };
}
export interface PolicyVersions {
  active: number;
  versions: PolicyVersionInfo[];
}

// What changed between two policies (GET /v1/policy/diff, a dry run, a
// preview): amounts in the resource's unit (milli-GPUs, bytes, millicores);
// `borrow_limit: null` is no limit.
export interface QuotaChange {
  queue: string;
  resource: string;
  field: string;
  from: number | null;
  to: number | null;
}
export interface QueueChange {
  queue: string;
  field: string;
  from: unknown;
  to: unknown;
}
export interface PolicyChanges {
  queues_added: string[];
  queues_removed: string[];
  quota_changes: QuotaChange[];
  queue_changes: QueueChange[];
  settings_changed: string[];
  tenant_changes?: { tenant: string; field: string }[];
}
// GET /v1/policy/diff, and POST /v1/policy?dry_run=true (`dry_run: true`,
// `to` the version it would get).
export interface PolicyDiff {
  from: number;
  to: number;
  diff: string;
  changes: PolicyChanges;
  dry_run?: boolean;
}

// One column of a preview: what a replay of the window gave a tenant (or
// everyone) under one policy. Seconds and GPU-hours; `cost` is null unless
// the preview was priced.
export interface PreviewFigures {
  jobs: number;
  finished: number;
  mean_wait_s: number;
  p95_wait_s: number;
  mean_jct_s: number;
  gpu_hours: number;
  evictions: number;
  lost_gpu_hours: number;
  cost: number | null;
}
export interface PreviewEntry {
  tenant?: string;
  current: PreviewFigures;
  proposed: PreviewFigures;
  change: Record<string, number | null>;
}
// POST /v1/policy/preview. A window where no job ran has `jobs: 0` and a
// `message`, and no `overall` or `tenants`.
export interface PolicyPreview {
  from: number;
  to: number;
  applied: boolean;
  window: { duration: string; since_ms: number; until_ms: number };
  jobs: number;
  never_ran: number;
  still_running: number;
  message?: string;
  cluster_gpus?: number;
  nodes?: number;
  priced?: boolean;
  unpriced_models?: string[];
  never_started?: { current: number; proposed: number };
  overall?: PreviewEntry;
  tenants?: PreviewEntry[];
  changes: PolicyChanges;
}

// A queue as GET /v1/queues reports it: the active policy's guarantee
// against what the live runs of its Scheduled and Running jobs hold now, its
// children's included. Milli-GPUs; the quota fields are null for a queue
// with no GPU quota, and `borrow_limit_mgpu` is null also for no limit.
export interface QueueUsage {
  queue: string;
  tenant: string;
  parent: string | null;
  kind: string;
  over_quota: string;
  used_mgpu: number;
  running_jobs: number;
  guaranteed_mgpu: number | null;
  borrow_limit_mgpu: number | null;
  lending_limit_mgpu: number | null;
  borrowed_mgpu: number | null;
  idle_guaranteed_mgpu: number | null;
  lendable_mgpu: number | null;
}
export interface Queues {
  policy_version: number;
  queues: QueueUsage[];
}

export interface Member {
  identity: string;
  kind: string;
  role: string;
  disabled: boolean;
}

// Amounts come back as the policy writes them ("16", "500m"); null: unchanged.
export interface QuotaRequest {
  id: number;
  tenant: string;
  queue: string;
  resource: string;
  guaranteed: string | null;
  borrow_limit: string | null;
  weight: number | null;
  lending_limit: string | null;
  reason: string;
  state: string; // Pending | Approved | Rejected | Withdrawn
  filed_by: string;
  filed_ms: number;
  decided_by: string;
  decided_ms: number | null;
  comment: string;
  policy_version: number | null;
}
export type QuotaAction = 'approve' | 'reject' | 'withdraw';

// A token as GET /v1/tokens lists it (never its secret).
export interface TokenInfo {
  id: string;
  identity: string;
  description: string;
  created_ms: number;
  created_by: string;
  expires_ms: number | null;
  revoked_ms: number | null;
  revoked_by: string;
}

// A row of GET /v1/usage: `key` holds the grouping (queue, user, day, ...).
// The used and idle figures are null from a berthd without telemetry
// (`telemetry: false`), so "not measured" never reads as zero.
export interface UsageRow {
  key: Record<string, string>;
  mgpu_ms: number;
  allocated_gpu_hours: number;
  cost_micros: number;
  cost: string;
  runs: number;
  measured_mgpu_ms?: number | null;
  used_mgpu_ms?: number | null;
  idle_mgpu_ms?: number | null;
  used_gpu_hours?: number | null;
  idle_gpu_hours?: number | null;
  idle_cost_micros?: number | null;
  idle_cost?: string | null;
  idle_runs?: number | null;
}
export interface Usage {
  from_ms: number;
  to_ms: number;
  currency: string;
  rows: UsageRow[];
  total: UsageRow;
  telemetry?: boolean;
}
export interface Budget {
  tenant: string;
  unit: string; // gpu_hours | currency
  currency: string;
  limit: string;
  used: string;
  limit_micros?: number;
  used_micros?: number;
  month: string;
  alerts: number[];
  crossed: number[];
  enforce: boolean;
  over: boolean;
}

// An alert as GET /v1/alerts lists it: `node` is '' and `gpu` null when it
// names none; `subject` is what the rule watches (a node, node/gpu, a queue
// path, a run id, tenant/month/percent, tenant/service); open while
// `resolved_ms` is null. `resolved_by` is "berth" when the condition
// cleared, else who resolved it by hand.
export interface Alert {
  id: number;
  kind: string;
  severity: string;
  node: string;
  gpu: number | null;
  message: string;
  raised_ms: number;
  resolved_ms: number | null;
  resolved_by: string;
  rule: string;
  subject: string;
}
// A page of GET /v1/alerts: the newest `limit` matches, oldest first; `next`
// is the cursor of the page of older ones.
export interface AlertPage {
  alerts: Alert[];
  next?: string;
}

// A rule of GET /v1/alert-rules, with the parameters of its kind.
export interface AlertRule {
  name: string;
  kind: string;
  severity: string;
  enabled: boolean;
  sinks: string[];
  for_ms?: number;
  queue?: string;
  threshold_ms?: number;
  threshold_percent?: number;
  window_ms?: number;
  service?: string;
  threshold?: number;
}
export interface AlertSink {
  name: string;
  type: string;
  url: string;
  secret_file: string;
  send_secret_over_http: boolean;
  header: string;
  timeout_ms: number;
}
// The rules in force: `default` (version 0) when none was applied.
export interface AlertRules {
  version: number;
  default: boolean;
  applied_ms?: number;
  applied_by?: string;
  comment?: string;
  yaml: string;
  sinks: AlertSink[];
  rules: AlertRule[];
}

// One webhook delivery of the outbox (GET /v1/alert-deliveries, newest first).
export interface AlertDelivery {
  id: number;
  alert_id: number;
  sink: string;
  event: string; // raised | resolved
  attempts: number;
  next_attempt_ms: number;
  last_error: string;
  delivered_ms: number | null;
  state: string; // pending | delivered | failed
  created_ms: number;
}

// GET /v1/reports/ops (docs/metering.md, "Operations report"). Sums are
// exact integers (mGPU-ms, micro-units, ms, counts); the *_pct and
// *_gpu_hours fields are computed from them by berthd.
export interface OpsMeasured {
  runs_sampled: number;
  sampled_mgpu_ms: number;
  used_mgpu_ms: number;
  used_gpu_hours: number;
  samples: number;
  util_sum: number;
  memory_used_sum: number;
  memory_capacity_sum: number;
  gpu_utilization_pct: number;
  avg_sample_util_pct: number;
  gpu_memory_utilization_pct: number;
  unsampled_mgpu_ms: number;
}
export interface OpsWait {
  started: number;
  total_wait_ms: number;
  avg_wait_ms: number;
  p95_wait_ms: number;
  max_wait_ms: number;
  waiting: number;
  oldest_wait_ms: number;
  oldest_job_id: number | null;
}
export interface OpsFigures {
  tenant?: string;
  service?: string;
  allocated_mgpu_ms: number;
  allocated_gpu_hours: number;
  allocation_pct: number | null;
  cost_micros: number;
  cost: string;
  records: number;
  measured: OpsMeasured | null;
  wait: OpsWait;
  runs_finished: number;
  outcomes: Record<string, number>;
  runs_failed: number;
  failure_rate_pct: number;
  failures_by_class: Record<string, number>;
  evictions: Record<string, number>;
  lost_mgpu_ms: number;
  lost_gpu_hours: number;
  lost_by_kind?: Record<string, { lost_mgpu_ms: number; lost_gpu_hours: number }>;
  interventions: number;
}
export interface OpsRequests {
  requests: number;
  responses_2xx: number;
  responses_4xx: number;
  responses_5xx: number;
  held: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
  max_ms: number;
  slo_windows: number;
  slo_windows_met: number;
}
export interface OpsService extends OpsFigures {
  tenant: string;
  service: string;
  requests: OpsRequests | null;
}
export interface OpsEviction {
  time_ms: number;
  run_id: string;
  job_id: number;
  job_name: string;
  tenant: string;
  kind: string;
  mgpu: number;
  lost_from_ms: number;
  lost_since: string; // checkpoint | start
  lost_mgpu_ms: number;
  lost_gpu_hours: number;
}
export interface OpsIntervention {
  time_ms: number;
  actor: string;
  action: string;
  object: string;
  tenant: string;
}
// `fleet` is null for a caller who is not a platform admin: its tenants only.
export interface OpsReport {
  from_ms: number;
  to_ms: number;
  currency: string;
  measured: boolean;
  fleet: {
    gpus: number;
    capacity_mgpu_ms: number;
    capacity_gpu_hours: number;
    measured: { samples: number; util_sum: number; avg_util_pct: number; avg_memory_utilization_pct: number } | null;
  } | null;
  total: OpsFigures;
  tenants: OpsFigures[];
  inference?: OpsFigures & { services: OpsService[] };
  evictions: OpsEviction[];
  interventions_by_action: Record<string, number>;
  interventions: OpsIntervention[];
}

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

// A request body sent as written, with its own type (a policy or a job
// spec in YAML), rather than as JSON.
export class RawBody {
  constructor(
    readonly text: string,
    readonly type: string,
  ) {}
}

type Fetch = (input: string, init?: RequestInit) => Promise<Response>;

// The ApiError of a refused answer: berthd's {"error": {code, message,
// field}} when the body is one, else the body or the status text.
function errorOf(res: Response, text: string): ApiError {
  let e: { message?: string; code?: string; field?: string } | undefined;
  try {
    e = (JSON.parse(text) as { error?: typeof e } | null)?.error;
  } catch {
    e = undefined;
  }
  return new ApiError(res.status, e?.message ?? (text || res.statusText), e?.code ?? '', e?.field ?? '');
}

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

  private init(method: string, extra: Record<string, string>, body?: unknown | RawBody): RequestInit {
    const headers: Record<string, string> = { Accept: 'application/json', ...extra };
    if (!SAFE.has(method) && this.csrf !== null) headers[this.csrfHeader] = this.csrf;
    const init: RequestInit = { method, headers, credentials: 'same-origin', cache: 'no-store' };
    if (body instanceof RawBody) {
      headers['Content-Type'] = body.type;
      init.body = body.text;
    } else if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return init;
  }

  private async call<T>(method: string, path: string, extra: Record<string, string> = {}, body?: unknown): Promise<T> {
    const res = await this.fetchFn(path, this.init(method, extra, body));
    const text = await res.text();
    if (!res.ok) throw errorOf(res, text);
    try {
      return (text ? JSON.parse(text) : null) as T;
    } catch {
      return null as T;
    }
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

  // The job's GPU telemetry from the hour it was submitted in; `step` (5m,
  // 1h) merges buckets, none: as stored (minutes).
  jobTelemetry(id: number, step?: string): Promise<JobTelemetry> {
    return this.call('GET', `/v1/jobs/${id}/telemetry${step ? `?step=${step}` : ''}`);
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

  policy(): Promise<PolicyVersion> {
    return this.call('GET', '/v1/policy');
  }

  // The active policy with its text (`yaml`, `normalized`).
  activePolicy(): Promise<PolicyVersionFull> {
    return this.call('GET', '/v1/policy');
  }

  policyVersions(): Promise<PolicyVersions> {
    return this.call('GET', '/v1/policy/versions');
  }

  policyVersion(version: number): Promise<PolicyVersionFull> {
    return this.call('GET', `/v1/policy/versions/${version}`);
  }

  // The diff from version `from` to `to` (either left out: the server's
  // default, the active version and the one before it).
  policyDiff(from?: number, to?: number): Promise<PolicyDiff> {
    const q = new URLSearchParams();
    if (from !== undefined) q.set('from', String(from));
    if (to !== undefined) q.set('to', String(to));
    const s = q.toString();
    return this.call('GET', `/v1/policy/diff${s ? `?${s}` : ''}`);
  }

  // Applies `yaml` as a new version, based on version `base` (409 if another
  // landed since); with `dryRun`, checks it and answers the diff, applying
  // nothing.
  applyPolicy(yaml: string, opts: { comment?: string; base?: number; dryRun?: boolean } = {}): Promise<PolicyDiff & { version?: number }> {
    const q = new URLSearchParams();
    if (opts.dryRun) q.set('dry_run', 'true');
    if (opts.comment?.trim()) q.set('comment', opts.comment.trim());
    if (opts.base !== undefined) q.set('base_version', String(opts.base));
    const s = q.toString();
    return this.call('POST', `/v1/policy${s ? `?${s}` : ''}`, {}, new RawBody(yaml, 'application/yaml'));
  }

  // Replays the recent history (`window`, default 7d) under the active and
  // the proposed policy; `prices` is MODEL:PRICE,... per GPU-hour.
  previewPolicy(yaml: string, opts: { window?: string; prices?: string } = {}): Promise<PolicyPreview> {
    const q = new URLSearchParams();
    if (opts.window?.trim()) q.set('window', opts.window.trim());
    if (opts.prices?.trim()) q.set('prices', opts.prices.trim());
    const s = q.toString();
    return this.call('POST', `/v1/policy/preview${s ? `?${s}` : ''}`, {}, new RawBody(yaml, 'application/yaml'));
  }

  // Applies version `to`'s text again as a new version.
  rollbackPolicy(to: number, comment = ''): Promise<{ version: number; restores: number }> {
    const q = new URLSearchParams({ to: String(to) });
    if (comment.trim()) q.set('comment', comment.trim());
    return this.call('POST', `/v1/policy/rollback?${q}`);
  }

  members(tenant: string): Promise<{ tenant: string; members: Member[] }> {
    return this.call('GET', `/v1/tenants/${encodeURIComponent(tenant)}/members`);
  }

  // The queues of `tenant` with their guarantee and use (an empty list for
  // a tenant the caller has no role in).
  queues(tenant: string): Promise<Queues> {
    return this.call('GET', `/v1/queues?${new URLSearchParams({ tenant })}`);
  }

  // Every queue of every tenant the caller has a role in (a platform
  // admin: all of them), parents included.
  allQueues(): Promise<Queues> {
    return this.call('GET', '/v1/queues');
  }

  // POST /v1/jobs: a spec as YAML text (sent as written, as `berth submit`
  // sends a file) or as the JSON object a form makes. The answer is the new
  // job (an array's first element).
  submitJob(spec: string | Record<string, unknown>): Promise<JobSummary> {
    const body = typeof spec === 'string' ? new RawBody(spec, 'application/yaml') : spec;
    return this.call('POST', '/v1/jobs', {}, body);
  }

  // GET /v1/jobs/{id}/logs?follow=true: the job's output as it is written,
  // every replica's, from its first byte; the stream ends when the job
  // has finished and its output is all sent. A refusal (403, 404) throws.
  async followLogs(id: number, signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
    const init = this.init('GET', { Accept: 'text/plain' });
    init.signal = signal;
    const res = await this.fetchFn(`/v1/jobs/${id}/logs?follow=true`, init);
    if (!res.ok) throw errorOf(res, await res.text());
    if (!res.body) throw new ApiError(0, 'the answer has no body');
    return res.body;
  }

  async quotaRequests(tenant: string): Promise<QuotaRequest[]> {
    const out: QuotaRequest[] = [];
    let after: string | undefined;
    do {
      const q = new URLSearchParams({ tenant, limit: '500' });
      if (after) q.set('after', after);
      const page = await this.call<{ requests: QuotaRequest[]; next?: string }>('GET', `/v1/quota-requests?${q}`);
      out.push(...page.requests);
      after = page.next;
    } while (after);
    return out;
  }

  fileQuotaRequest(body: Record<string, string>): Promise<QuotaRequest> {
    return this.call('POST', '/v1/quota-requests', {}, body);
  }

  decideQuotaRequest(id: number, action: QuotaAction, comment = ''): Promise<QuotaRequest> {
    const q = action !== 'withdraw' && comment.trim() ? `?comment=${encodeURIComponent(comment.trim())}` : '';
    return this.call('POST', `/v1/quota-requests/${id}/${action}${q}`);
  }

  // This UTC month's usage of `tenant` grouped by `by` (queue or user).
  usage(by: string, tenant: string): Promise<Usage> {
    return this.call('GET', `/v1/usage?${new URLSearchParams({ by, tenant })}`);
  }

  // `tenant`'s GPU time per queue and UTC day over the last `from` (a
  // duration back from now, as berthd reads it: "14d"), for the tenant
  // page's quota-over-time chart.
  usageByQueueDay(tenant: string, from: string): Promise<Usage> {
    return this.call('GET', `/v1/usage?by=queue,day&tenant=${encodeURIComponent(tenant)}&from=${encodeURIComponent(from)}`);
  }

  // Usage grouped by `by` (tenant; day,tenant) over [from, to) in epoch ms,
  // of every tenant the caller may read: berthd scopes it, so the console
  // names no tenant. `to` left out: up to now.
  usageReport(by: readonly string[], window: { from: number; to?: number }): Promise<Usage> {
    let q = `by=${by.join(',')}&from=${window.from}`;
    if (window.to !== undefined) q += `&to=${window.to}`;
    return this.call('GET', `/v1/usage?${q}`);
  }

  // One job's usage records from `from` (epoch ms) to now: `total` is its
  // GPU time and cost (GET /v1/usage/records?job=). A job outside the
  // caller's tenants has none.
  jobUsage(id: number, from: number): Promise<{ currency: string; total: UsageRow; total_records: number }> {
    return this.call('GET', `/v1/usage/records?job=${id}&from=${from}&limit=1`);
  }

  // An identity's tokens, newest first (the first 500). 404 for an identity
  // the caller may not act for.
  tokens(identity: string): Promise<{ tokens: TokenInfo[]; next?: string }> {
    return this.call('GET', `/v1/tokens?${new URLSearchParams({ identity, limit: '500' })}`);
  }

  // A page of alerts, the newest `limit` matches (oldest first, as berthd
  // sends them); `query` holds all and kind (alerts.ts makes it).
  alerts(query: string): Promise<AlertPage> {
    return this.call('GET', `/v1/alerts?${query}`);
  }

  // Resolves an open alert by hand (409 when it was resolved already).
  resolveAlert(id: number): Promise<Alert> {
    return this.call('POST', `/v1/alerts/${id}/resolve`);
  }

  alertRules(): Promise<AlertRules> {
    return this.call('GET', '/v1/alert-rules');
  }

  alertDeliveries(after?: string, limit = 50): Promise<{ deliveries: AlertDelivery[]; next?: string }> {
    const q = new URLSearchParams({ limit: String(limit) });
    if (after) q.set('after', after);
    return this.call('GET', `/v1/alert-deliveries?${q}`);
  }

  // The operations report of a window; `query` holds from and to (report.ts).
  opsReport(query: string): Promise<OpsReport> {
    return this.call('GET', `/v1/reports/ops${query ? `?${query}` : ''}`);
  }

  budgets(): Promise<{ budgets: Budget[] }> {
    return this.call('GET', '/v1/budgets');
  }

  // --- services and sessions (services.ts) ---
  // The caller's tenants' services, newest first, a page at a time.
  services(filters: ServiceFilters, after?: string, limit = 50): Promise<ServicePage> {
    return this.call('GET', `/v1/services?${servicesQuery(filters, { limit, after })}`);
  }

  service(tenant: string, name: string): Promise<Service> {
    return this.call('GET', servicePathOf(tenant, name));
  }

  // New replica bounds as a new revision; `query` from scaleQuery.
  scaleService(tenant: string, name: string, query: string): Promise<Service> {
    return this.call('POST', `${servicePathOf(tenant, name)}/scale${query ? `?${query}` : ''}`);
  }

  rollbackService(tenant: string, name: string): Promise<Service> {
    return this.call('POST', `${servicePathOf(tenant, name)}/rollback`);
  }

  // Ends the canary step under way.
  resumeRollout(tenant: string, name: string): Promise<Service> {
    return this.call('POST', `${servicePathOf(tenant, name)}/rollout/resume`);
  }

  deleteService(tenant: string, name: string): Promise<unknown> {
    return this.call('DELETE', servicePathOf(tenant, name));
  }
}

const servicePathOf = (tenant: string, name: string) =>
  `/v1/services/${encodeURIComponent(tenant)}/${encodeURIComponent(name)}`;

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

// Whether a job's why (GET /v1/jobs/{id}/why) may say something new since
// `before` was read: its state or its reason (code, numbers, English
// message with any estimated start) moved. The job page asks for the job
// on every poll and for the why only then.
export function whyMayHaveChanged(before: JobSummary | null, now: JobSummary): boolean {
  if (!before) return true;
  return before.state !== now.state || JSON.stringify(before.reason) !== JSON.stringify(now.reason);
}

// Whether `caller` may cordon, drain or uncordon nodes and GPUs: a platform
// admin only (POST /v1/nodes/{node}/...). Others get no buttons; the server
// refuses them anyway.
export function canCordon(caller: Caller): boolean {
  return caller.platform_admin;
}
