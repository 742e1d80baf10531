import { describe, expect, it } from 'vitest';
import type { TelemetryBucket } from '../src/api';
import { type ChartBox, chartOf, figuresOf, pctText, telemetryStep } from '../src/telemetry';

const MIN = 60_000;
const GiB = 1024 ** 3;
// A bucket as berthd sends it: `samples` samples averaging `util` percent.
const bucket = (start: number, util: number, samples = 6, max = util, mem = 10 * GiB): TelemetryBucket => ({
  start_ms: start,
  width_ms: MIN,
  run_ids: ['7.0.0'],
  samples,
  util_sum: util * samples,
  avg_util_pct: util,
  max_util_pct: max,
  avg_mem_util_pct: util * 0.6,
  avg_memory_used_bytes: mem,
  max_memory_used_bytes: mem,
  memory_total_bytes: 80 * GiB,
});
// A plot of 100 x 100 at (0, 0), to read points at a glance.
const box: ChartBox = { width: 100, height: 100, left: 0, right: 0, top: 0, bottom: 0 };

describe('the utilization chart', () => {
  it('puts each bucket at its middle, time across the whole series, 0% at the bottom and 100% at the top', () => {
    const t0 = 1_000 * MIN;
    const chart = chartOf(
      {
        gpus: [
          { uuid: 'a', node: 'n1', gpu: 0, buckets: [bucket(t0, 0), bucket(t0 + MIN, 50), bucket(t0 + 2 * MIN, 100), bucket(t0 + 3 * MIN, 100)] },
          { uuid: 'b', node: 'n1', gpu: 1, buckets: [bucket(t0 + 3 * MIN, 25)] },
        ],
      },
      box,
    );
    expect([chart.from, chart.to]).toEqual([t0, t0 + 4 * MIN]);
    expect(chart.series[0].points.map((p) => [p.x, p.y])).toEqual([
      [12.5, 100],
      [37.5, 50],
      [62.5, 0],
      [87.5, 0],
    ]);
    expect(chart.series[0].path).toBe('M 12.5 100 L 37.5 50 L 62.5 0 L 87.5 0');
    expect(chart.series[1].path).toBe('M 87.5 75');
    expect(chart.series.map((s) => `${s.node}/${s.gpu}`)).toEqual(['n1/0', 'n1/1']);
  });

  it('breaks the line where buckets are missing, and sorts buckets by time', () => {
    const chart = chartOf({ gpus: [{ uuid: 'a', node: 'n', gpu: 0, buckets: [bucket(3 * MIN, 40), bucket(0, 20), bucket(MIN, 30)] }] }, box);
    expect(chart.series[0].points.map((p) => p.util)).toEqual([20, 30, 40]);
    expect(chart.series[0].path).toBe('M 12.5 80 L 37.5 70 M 87.5 60');
  });

  it('clamps to the plot, and has no points without buckets', () => {
    const chart = chartOf({ gpus: [{ uuid: 'a', node: 'n', gpu: 0, buckets: [bucket(0, 120)] }, { uuid: 'b', node: 'n', gpu: 1, buckets: [] }] }, box);
    expect(chart.series[0].points).toEqual([{ x: 50, y: 0, t: 0, util: 120 }]);
    expect(chart.series[1].points).toEqual([]);
    expect(chart.series[1].path).toBe('');
    expect(chartOf({ gpus: [] }, box)).toEqual({ from: 0, to: 0, series: [] });
  });

  it("weighs a GPU's mean by samples (berthd's exact sums), with peaks and the card's memory", () => {
    const f = figuresOf([bucket(0, 90, 1, 95, 20 * GiB), bucket(MIN, 10, 3, 40, 4 * GiB)]);
    expect(f).toEqual({ samples: 4, meanUtil: 30, maxUtil: 95, meanMemory: 8 * GiB, maxMemory: 20 * GiB, memoryTotal: 80 * GiB });
    expect(figuresOf([])).toMatchObject({ samples: 0, meanUtil: null, maxUtil: null });
    expect(pctText(30)).toBe('30.0%');
    expect(pctText(12.345)).toBe('12.3%');
    expect(pctText(null)).toBeNull();
  });

  it('asks for stored minutes for a young job and wider steps as it ages', () => {
    const h = 3_600_000;
    expect(telemetryStep(0, 3 * h)).toBeUndefined();
    expect(telemetryStep(0, 12 * h)).toBe('5m');
    expect(telemetryStep(0, 48 * h)).toBe('15m');
    expect(telemetryStep(0, 200 * h)).toBe('1h');
    expect(telemetryStep(0, 1000 * h)).toBe('6h');
  });
});
