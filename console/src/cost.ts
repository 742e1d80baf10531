// The cost view's arithmetic, kept out of the page so it can be tested
// alone: the period the URL names and the window GET /v1/usage is asked
// for, the rows of the per-tenant and per-day tables, the idle share
// ("GPU waste"), the per-day chart's bars, a budget's share used, and the
// CSV text of a table.
//
// Every figure is berthd's (GET /v1/usage groups and prices the records;
// docs/metering.md): this module adds nothing up except the chart's bars,
// which sum a day's rows in exact integer mGPU-ms. Days and months are UTC,
// as berthd groups them.

import type { Budget, UsageRow } from './api';

const DAY_MS = 86_400_000;
// mGPU-ms in one GPU-hour: 1,000 mGPU x 3,600,000 ms.
export const MGPU_MS_PER_GPU_HOUR = 3_600_000_000;

// The period the page shows: this UTC month so far (the default), the last
// whole UTC month, or whole UTC days from `from` to `to`, both included.
export type Period =
  | { kind: 'month' }
  | { kind: 'last-month' }
  | { kind: 'range'; from: string; to: string };

// A calendar day as YYYY-MM-DD that exists (2026-02-30 does not).
export function isDay(s: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s)) return false;
  const ms = Date.parse(`${s}T00:00:00Z`);
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 10) === s;
}

// The period of a console URL's query: ?period=last-month, or
// ?from=YYYY-MM-DD&to=YYYY-MM-DD, else this month. A range is kept as
// written (the page says what is wrong with it); a lone from or to is a
// range of that one day.
export function parsePeriod(search: string): Period {
  const p = new URLSearchParams(search);
  if (p.get('period') === 'last-month') return { kind: 'last-month' };
  const from = (p.get('from') ?? '').trim();
  const to = (p.get('to') ?? '').trim();
  if (from || to) return { kind: 'range', from: from || to, to: to || from };
  return { kind: 'month' };
}

// The period as the console's query string ('' for this month).
export function periodSearch(p: Period): string {
  if (p.kind === 'last-month') return 'period=last-month';
  if (p.kind === 'range') return new URLSearchParams({ from: p.from, to: p.to }).toString();
  return '';
}

const monthStart = (ms: number): number => {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
};

// What GET /v1/usage is asked for (epoch ms; `to` exclusive, left out for
// "up to now", berthd's default), or why the period cannot be asked for.
export type Window = { from: number; to?: number };
export function periodWindow(p: Period, now: number): Window | { error: 'date' | 'order' } {
  if (p.kind === 'month') return { from: monthStart(now) };
  if (p.kind === 'last-month') {
    const end = monthStart(now);
    return { from: monthStart(end - 1), to: end };
  }
  if (!isDay(p.from) || !isDay(p.to)) return { error: 'date' };
  const from = Date.parse(`${p.from}T00:00:00Z`);
  const to = Date.parse(`${p.to}T00:00:00Z`) + DAY_MS;
  if (to <= from) return { error: 'order' };
  return { from, to };
}

// Whether the window reaches now, so its figures still grow (the page asks
// again every so often only then).
export function isOpen(w: Window, now: number): boolean {
  return w.to === undefined || w.to > now;
}

// The idle share of a row, in percent: idle GPU time over the GPU time
// telemetry sampled (`measured_mgpu_ms`), so time no sample covers neither
// hides nor inflates waste. null without telemetry or with nothing sampled.
export function wastePercent(row: Pick<UsageRow, 'idle_mgpu_ms' | 'measured_mgpu_ms'>): number | null {
  const idle = row.idle_mgpu_ms;
  const measured = row.measured_mgpu_ms;
  if (idle === null || idle === undefined || !measured) return null;
  return (idle / measured) * 100;
}

// One row of a cost table, as the API gave it (GPU-hours as numbers, money
// as berthd's decimal strings) plus the idle share.
export interface CostRow {
  tenant: string;
  day: string; // '' in the per-tenant table
  allocated: number;
  used: number | null;
  idle: number | null;
  waste: number | null;
  cost: string;
  idleCost: string | null;
  runs: number;
}

export function costRow(r: UsageRow): CostRow {
  return {
    tenant: r.key.tenant ?? '',
    day: r.key.day ?? '',
    allocated: r.allocated_gpu_hours,
    used: r.used_gpu_hours ?? null,
    idle: r.idle_gpu_hours ?? null,
    waste: wastePercent(r),
    cost: r.cost,
    idleCost: r.idle_cost ?? null,
    runs: r.runs,
  };
}

// The rows of a by=tenant (or by=day,tenant) answer in the order berthd
// sends them: by its key, so by tenant, or by day then tenant.
export function costRows(rows: readonly UsageRow[]): CostRow[] {
  return rows.map(costRow);
}

// One bar of the per-day chart: a day's allocated and idle GPU time summed
// over the tenants shown (exact integers), null idle without telemetry.
export interface DayBar {
  day: string;
  allocatedMgpuMs: number;
  idleMgpuMs: number | null;
}

// The days of [from, to) as YYYY-MM-DD, at most `max` (else null: too many
// to draw every day).
export function daysOf(from: number, to: number, max = 93): string[] | null {
  const first = Math.floor(from / DAY_MS);
  const last = Math.ceil(to / DAY_MS);
  if (last - first > max) return null;
  const out: string[] = [];
  for (let d = first; d < last; d++) out.push(new Date(d * DAY_MS).toISOString().slice(0, 10));
  return out;
}

// The chart's bars from a by=day,tenant answer: every day of the window
// (a day without use is an empty bar) when there are few enough, else only
// the days with use.
export function dayBars(rows: readonly UsageRow[], from: number, to: number, telemetry: boolean): DayBar[] {
  const byDay = new Map<string, DayBar>();
  for (const d of daysOf(from, to) ?? []) byDay.set(d, { day: d, allocatedMgpuMs: 0, idleMgpuMs: telemetry ? 0 : null });
  for (const r of rows) {
    const day = r.key.day ?? '';
    const bar = byDay.get(day) ?? { day, allocatedMgpuMs: 0, idleMgpuMs: telemetry ? 0 : null };
    bar.allocatedMgpuMs += r.mgpu_ms;
    if (bar.idleMgpuMs !== null) bar.idleMgpuMs += r.idle_mgpu_ms ?? 0;
    byDay.set(day, bar);
  }
  return [...byDay.values()].sort((a, b) => (a.day < b.day ? -1 : a.day > b.day ? 1 : 0));
}

// A budget's used share in percent (its limit and use in micro-units, or
// from its decimal strings for an older berthd), null for a zero limit.
export function budgetPercent(b: Pick<Budget, 'used' | 'limit' | 'used_micros' | 'limit_micros'>): number | null {
  const used = b.used_micros ?? Number(b.used);
  const limit = b.limit_micros ?? Number(b.limit);
  if (!limit || !Number.isFinite(used) || !Number.isFinite(limit)) return null;
  return (used / limit) * 100;
}

// A percentage as shown: one decimal ("12.5%"); the CSV carries two.
export function percent(n: number): string {
  return `${(Math.round(n * 10) / 10).toFixed(1)}%`;
}
export function percentCsv(n: number): number {
  return Math.round(n * 100) / 100;
}

// One CSV field (RFC 4180): a field holding a comma, a double quote, a line
// break, or space at either end is quoted, its quotes doubled; a number is
// written as JavaScript prints it (no grouping, no unit); null is empty.
export function csvField(v: string | number | null): string {
  if (v === null) return '';
  const s = typeof v === 'number' ? String(v) : v;
  return /[",\r\n]|^\s|\s$/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

// The CSV text of a table: a byte-order mark first (so Excel reads it as
// UTF-8 and shows Chinese names), the header row, then one line per row,
// each ended by CRLF.
export function csvText(header: readonly string[], rows: readonly (readonly (string | number | null)[])[]): string {
  const line = (cells: readonly (string | number | null)[]) => cells.map(csvField).join(',') + '\r\n';
  return '\uFEFF' + line(header) + rows.map(line).join('');
}

// A CSV row of a cost table: the figures as the API sent them, the idle
// share to two decimals.
export function csvCells(r: CostRow, withDay: boolean): (string | number | null)[] {
  const cells: (string | number | null)[] = withDay ? [r.day, r.tenant] : [r.tenant];
  return cells.concat([
    r.allocated,
    r.used,
    r.idle,
    r.waste === null ? null : percentCsv(r.waste),
    r.cost,
    r.idleCost,
    r.runs,
  ]);
}

// The file name of a download: what, the window's first day and its last
// (the day before `to`, or today for an open window).
export function csvName(what: string, from: number, to: number): string {
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  return `berth-${what}-${day(from)}-to-${day(to - 1)}.csv`;
}
