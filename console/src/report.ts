// The operations report's logic, kept out of the page so it can be tested
// alone: the window in the console's URL and in the API's query, the link
// that downloads the report the page shows, and each figure as
// `berth report ops` prints it (src/cli/commands_report.cc: GPU-hours to
// three decimals, percentages to one, waits in s, m or h). The figures are
// berthd's (GET /v1/reports/ops): this module divides and formats, and adds
// nothing up but a run count per eviction kind, as the CLI does.

import type { OpsFigures, OpsReport } from './api';

// The windows the page offers: a duration back from now, as the API's
// `from` takes it. The API's default is 24h.
export const WINDOW_PRESETS = ['1h', '6h', '24h', '7d', '30d'] as const;
export const DEFAULT_FROM = '24h';

export interface ReportWindow {
  from: string; // epoch ms or a duration back from now
  to: string; // '' for now
}

// The window of a console URL (/ui/reports/ops?from=7d). Anything else the
// API takes (epoch ms, another duration, a `to`) is passed on as written,
// and berthd's refusal of a bad one is shown.
export function parseReportWindow(search: string): ReportWindow {
  const p = new URLSearchParams(search);
  return { from: (p.get('from') ?? '').trim() || DEFAULT_FROM, to: (p.get('to') ?? '').trim() };
}

// The window as a query string, for the console's URL and for the API.
export function reportQuery(w: ReportWindow): string {
  const p = new URLSearchParams({ from: w.from });
  if (w.to) p.set('to', w.to);
  return p.toString();
}

// The API's own URL for the report the page shows: the answer's exact window
// in epoch ms, so the file holds the same window however late it is fetched
// (a `from=24h` would move with the clock). berthd writes it as JSON, the
// only form GET /v1/reports/ops has.
export function downloadHref(r: Pick<OpsReport, 'from_ms' | 'to_ms'>): string {
  return `/v1/reports/ops?${new URLSearchParams({ from: String(r.from_ms), to: String(r.to_ms) })}`;
}

const compactUtc = (ms: number) => new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');

// berth-ops-report-20261130T122811Z-20261130T123858Z.json
export function downloadName(r: Pick<OpsReport, 'from_ms' | 'to_ms'>): string {
  return `berth-ops-report-${compactUtc(r.from_ms)}-${compactUtc(r.to_ms)}.json`;
}

export const MGPU_MS_PER_GPU_HOUR = 3_600_000_000;

// mGPU-ms as GPU-hours to three decimals (model::FormatGpuHours).
export function gpuHours(mgpuMs: number): string {
  return (mgpuMs / MGPU_MS_PER_GPU_HOUR).toFixed(3);
}

// num / den as a percentage to one decimal; null (shown as a dash) when
// there is nothing to divide by.
export function pct(num: number, den: number): string | null {
  if (!(den > 0)) return null;
  return `${((100 * num) / den).toFixed(1)}%`;
}

// A wait as the CLI prints it: 1.4s, 5.5m, 2.0h.
export function waitDuration(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  if (ms < 3_600_000) return `${(ms / 60_000).toFixed(1)}m`;
  return `${(ms / 3_600_000).toFixed(1)}h`;
}

// The columns of a row of figures (the summary, a tenant, a service), in the
// CLI's order.
export const FIGURE_COLS = [
  'gpuHours',
  'allocation',
  'gpuUtil',
  'gpuMemory',
  'avgWait',
  'p95Wait',
  'started',
  'waiting',
  'runs',
  'failed',
  'evictions',
  'lostGpuHours',
  'cost',
  'interventions',
] as const;
export type FigureCol = (typeof FIGURE_COLS)[number];

// One row of figures. null: a dash (nothing to divide, no job started);
// `measured` false: utilization is not measured (no telemetry for these runs).
export interface FigureValues {
  gpuHours: string;
  allocation: string | null;
  measured: boolean;
  gpuUtil: string | null;
  gpuMemory: string | null;
  avgWait: string | null;
  p95Wait: string | null;
  started: number;
  waiting: number;
  oldestWait: string | null; // of the jobs still waiting, the longest
  runs: number;
  failed: number;
  failedPct: string | null;
  evictions: number; // runs evicted, every kind
  lostGpuHours: string;
  cost: string;
  interventions: number;
}

export function figureValues(f: OpsFigures, r: Pick<OpsReport, 'fleet'>): FigureValues {
  const m = f.measured;
  const w = f.wait;
  return {
    gpuHours: gpuHours(f.allocated_mgpu_ms),
    allocation: r.fleet ? pct(f.allocated_mgpu_ms, r.fleet.capacity_mgpu_ms) : null,
    measured: m !== null && m !== undefined,
    gpuUtil: m ? pct(m.used_mgpu_ms, m.sampled_mgpu_ms) : null,
    gpuMemory: m ? pct(m.memory_used_sum, m.memory_capacity_sum) : null,
    avgWait: w.started === 0 ? null : waitDuration(Math.floor(w.total_wait_ms / w.started)),
    p95Wait: w.started === 0 ? null : waitDuration(w.p95_wait_ms),
    started: w.started,
    waiting: w.waiting,
    oldestWait: w.waiting === 0 ? null : waitDuration(w.oldest_wait_ms),
    runs: f.runs_finished,
    failed: f.runs_failed,
    failedPct: pct(f.runs_failed, f.runs_finished),
    evictions: Object.values(f.evictions ?? {}).reduce((a, b) => a + b, 0),
    lostGpuHours: gpuHours(f.lost_mgpu_ms),
    cost: f.cost,
    interventions: f.interventions,
  };
}

export type CountKind = 'outcome' | 'failure' | 'eviction';

// "Runs by outcome and failures by class": the whole window's counts first
// (tenant null), then each tenant's, each by outcome, failure class and
// eviction kind in name order.
export function countRows(r: Pick<OpsReport, 'total' | 'tenants'>): { tenant: string | null; kind: CountKind; name: string; runs: number }[] {
  const out: { tenant: string | null; kind: CountKind; name: string; runs: number }[] = [];
  const add = (tenant: string | null, f: OpsFigures) => {
    const sets: [CountKind, Record<string, number> | undefined][] = [
      ['outcome', f.outcomes],
      ['failure', f.failures_by_class],
      ['eviction', f.evictions],
    ];
    for (const [kind, counts] of sets) {
      for (const name of Object.keys(counts ?? {}).sort()) out.push({ tenant, kind, name, runs: counts![name] });
    }
  };
  add(null, r.total);
  for (const t of r.tenants) add(t.tenant ?? '', t);
  return out;
}

// Manual interventions by action, in action order.
export function interventionCounts(r: Pick<OpsReport, 'interventions_by_action'>): { action: string; count: number }[] {
  return Object.keys(r.interventions_by_action ?? {})
    .sort()
    .map((action) => ({ action, count: r.interventions_by_action[action] }));
}

// The GPUs an eviction held: mGPU as GPUs, three decimals as the CLI has it.
export function gpusOfMgpu(mgpu: number): string {
  return (mgpu / 1000).toFixed(3);
}
