import { describe, expect, it } from 'vitest';
import {
  countRows,
  downloadHref,
  downloadName,
  figureValues,
  gpuHours,
  gpusOfMgpu,
  interventionCounts,
  parseReportWindow,
  pct,
  reportQuery,
  waitDuration,
} from '../src/report';
import { figures, opsReport } from './ops-fixture';

describe('the report window', () => {
  it('defaults to the last 24 hours, as the API does, and round-trips through the URL', () => {
    expect(parseReportWindow('')).toEqual({ from: '24h', to: '' });
    expect(reportQuery(parseReportWindow(''))).toBe('from=24h');
    const w = parseReportWindow('?from=1796041691896&to=1796042338000');
    expect(w).toEqual({ from: '1796041691896', to: '1796042338000' });
    expect(reportQuery(w)).toBe('from=1796041691896&to=1796042338000');
    expect(parseReportWindow('?from=%207d%20')).toEqual({ from: '7d', to: '' });
  });

  it("downloads the answer's exact window from the API's own URL", () => {
    const r = opsReport();
    expect(downloadHref(r)).toBe(`/v1/reports/ops?from=${r.from_ms}&to=${r.to_ms}`);
    expect(downloadName(r)).toBe('berth-ops-report-20261130T120000Z-20261201T120000Z.json');
  });
});

describe('the figures', () => {
  it('are formatted as berth report ops prints them', () => {
    expect(gpuHours(12925221000)).toBe('3.590');
    expect(pct(1, 8)).toBe('12.5%');
    expect(pct(1, 0)).toBeNull();
    expect(waitDuration(1364)).toBe('1.4s');
    expect(waitDuration(328271)).toBe('5.5m');
    expect(waitDuration(7_200_000)).toBe('2.0h');
    expect(gpusOfMgpu(500)).toBe('0.500');
  });

  it("make a row from berthd's sums: allocation against capacity, the floor of the mean wait, evictions of every kind", () => {
    const v = figureValues(figures({ evictions: { reclaimed: 1, preempted: 2 } }), opsReport());
    expect(v).toEqual({
      gpuHours: '3.000',
      allocation: '1.6%',
      measured: false,
      gpuUtil: null,
      gpuMemory: null,
      avgWait: '1.5s',
      p95Wait: '1.5m',
      started: 4,
      waiting: 1,
      oldestWait: '5.5m',
      runs: 8,
      failed: 1,
      failedPct: '12.5%',
      evictions: 3,
      lostGpuHours: '0.100',
      cost: '7.50',
      interventions: 2,
    });
  });

  it('leave allocation out without the fleet (a caller who is not a platform admin) and show measured use', () => {
    const measured = {
      runs_sampled: 1, sampled_mgpu_ms: 1000, used_mgpu_ms: 556, used_gpu_hours: 0, samples: 10, util_sum: 556,
      memory_used_sum: 628, memory_capacity_sum: 1000, gpu_utilization_pct: 55.6, avg_sample_util_pct: 55.6,
      gpu_memory_utilization_pct: 62.8, unsampled_mgpu_ms: 0,
    };
    const v = figureValues(figures({ measured }), opsReport({ fleet: null }));
    expect([v.allocation, v.measured, v.gpuUtil, v.gpuMemory]).toEqual([null, true, '55.6%', '62.8%']);
  });

  it('say nothing of waits when no job started', () => {
    const v = figureValues(opsReport().tenants[1], opsReport());
    expect([v.avgWait, v.p95Wait, v.oldestWait, v.failedPct]).toEqual([null, null, null, null]);
  });

  it('count runs by outcome, failure class and eviction, the whole window first, then each tenant', () => {
    const rows = countRows(opsReport());
    expect(rows.filter((r) => r.tenant === null).map((r) => `${r.kind}:${r.name}=${r.runs}`)).toEqual([
      'outcome:failed=1',
      'outcome:reclaimed=1',
      'outcome:succeeded=6',
      'failure:user_code=1',
      'eviction:reclaimed=1',
    ]);
    expect(rows.filter((r) => r.tenant === 'red')).toEqual([]);
    expect(rows.filter((r) => r.tenant === 'blue').length).toBe(5);
    expect(interventionCounts(opsReport())).toEqual([
      { action: 'alert.resolve', count: 1 },
      { action: 'node.cordon', count: 1 },
    ]);
  });
});
