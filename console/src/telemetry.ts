// A job's GPU utilization chart, kept out of the page so it can be tested
// alone: GET /v1/jobs/{id}/telemetry's series become one line per GPU the
// job held (each bucket a point at its middle, a gap between buckets a
// break in the line), and each GPU's figures for the table beside it.
//
// A GPU's mean is berthd's exact sums (util_sum over samples) added up, not
// a mean of the buckets' means; peaks are the buckets' peaks.

import type { JobTelemetry, TelemetryBucket } from './api';

export interface ChartBox {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
}

export const CHART_BOX: ChartBox = { width: 640, height: 200, left: 36, right: 8, top: 10, bottom: 22 };

export interface ChartPoint {
  x: number;
  y: number;
  // The bucket's start and its mean utilization (percent).
  t: number;
  util: number;
}

export interface ChartSeries {
  uuid: string;
  node: string;
  gpu: number;
  points: ChartPoint[];
  // SVG path data: "M x y L x y ...", a new M after a gap.
  path: string;
  samples: number;
  meanUtil: number | null;
  maxUtil: number | null;
  meanMemory: number | null;
  maxMemory: number | null;
  memoryTotal: number | null;
}

export interface Chart {
  from: number;
  to: number;
  series: ChartSeries[];
}

const round1 = (v: number) => Math.round(v * 10) / 10;

// The series as lines in `box`: time from the first bucket's start to the
// last one's end across every GPU, utilization 0 (bottom) to 100 (top).
export function chartOf(tel: Pick<JobTelemetry, 'gpus'>, box: ChartBox = CHART_BOX): Chart {
  const all = tel.gpus.flatMap((g) => g.buckets);
  const from = all.length ? Math.min(...all.map((b) => b.start_ms)) : 0;
  const to = all.length ? Math.max(...all.map((b) => b.start_ms + b.width_ms)) : 0;
  const plotW = box.width - box.left - box.right;
  const plotH = box.height - box.top - box.bottom;
  const x = (t: number) => round1(to > from ? box.left + ((t - from) / (to - from)) * plotW : box.left + plotW / 2);
  const y = (u: number) => round1(box.top + plotH * (1 - Math.min(100, Math.max(0, u)) / 100));
  const series = tel.gpus.map((g) => {
    const buckets = [...g.buckets].sort((a, b) => a.start_ms - b.start_ms);
    const points = buckets.map((b) => ({ x: x(b.start_ms + b.width_ms / 2), y: y(b.avg_util_pct), t: b.start_ms, util: b.avg_util_pct }));
    let path = '';
    buckets.forEach((b, i) => {
      const gap = i === 0 || b.start_ms > buckets[i - 1].start_ms + buckets[i - 1].width_ms;
      path += `${path ? ' ' : ''}${gap ? 'M' : 'L'} ${points[i].x} ${points[i].y}`;
    });
    return { uuid: g.uuid, node: g.node, gpu: g.gpu, points, path, ...figuresOf(buckets) };
  });
  return { from, to, series };
}

// A GPU's figures over its buckets: exact mean utilization (percent) and
// mean memory used (bytes), peaks, and the card's memory.
export function figuresOf(buckets: readonly TelemetryBucket[]) {
  const samples = buckets.reduce((n, b) => n + b.samples, 0);
  if (samples === 0) {
    return { samples: 0, meanUtil: null, maxUtil: null, meanMemory: null, maxMemory: null, memoryTotal: null };
  }
  const utilSum = buckets.reduce((n, b) => n + b.util_sum, 0);
  const memSum = buckets.reduce((n, b) => n + b.avg_memory_used_bytes * b.samples, 0);
  return {
    samples,
    meanUtil: utilSum / samples,
    maxUtil: Math.max(...buckets.map((b) => b.max_util_pct)),
    meanMemory: memSum / samples,
    maxMemory: Math.max(...buckets.map((b) => b.max_memory_used_bytes)),
    memoryTotal: Math.max(...buckets.map((b) => b.memory_total_bytes)),
  };
}

// The step to ask the series in for a job that started at `from`: stored
// minutes for up to 4 hours, then wider so a chart keeps to a few hundred
// points a GPU.
export function telemetryStep(from: number, now: number): string | undefined {
  const hours = (now - from) / 3_600_000;
  if (hours <= 4) return undefined;
  if (hours <= 24) return '5m';
  if (hours <= 72) return '15m';
  if (hours <= 240) return '1h';
  return '6h';
}

// A percentage as the page shows it: one decimal.
export function pctText(v: number | null): string | null {
  return v === null ? null : `${(Math.round(v * 10) / 10).toFixed(1)}%`;
}
