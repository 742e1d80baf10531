import { describe, expect, it } from 'vitest';
import type { UsageRow } from '../src/api';
import {
  budgetPercent,
  costRows,
  csvCells,
  csvField,
  csvName,
  csvText,
  dayBars,
  daysOf,
  isDay,
  isOpen,
  parsePeriod,
  percent,
  periodSearch,
  periodWindow,
  wastePercent,
} from '../src/cost';

const utc = (s: string) => Date.parse(`${s}Z`);
// 2026-03-10 15:30 UTC.
const now = utc('2026-03-10T15:30:00');

// A row as GET /v1/usage sends it; GPU-hours as berthd divides them.
const row = (key: Record<string, string>, mgpu: number, idle: number | null, measured: number | null, cost: string): UsageRow => ({
  key,
  mgpu_ms: mgpu,
  allocated_gpu_hours: mgpu / 3.6e9,
  measured_mgpu_ms: measured,
  used_mgpu_ms: idle === null ? null : measured! - idle,
  idle_mgpu_ms: idle,
  used_gpu_hours: idle === null ? null : (measured! - idle) / 3.6e9,
  idle_gpu_hours: idle === null ? null : idle / 3.6e9,
  cost_micros: Math.round(Number(cost) * 1e6),
  cost,
  idle_cost_micros: idle === null ? null : 0,
  idle_cost: idle === null ? null : '0.25',
  runs: 2,
  idle_runs: idle === null ? null : 0,
});

describe('the period', () => {
  it('reads this month, last month and a range of days from the URL, and writes them back', () => {
    expect(parsePeriod('')).toEqual({ kind: 'month' });
    expect(parsePeriod('?period=last-month')).toEqual({ kind: 'last-month' });
    expect(parsePeriod('?from=2026-03-01&to=2026-03-05')).toEqual({ kind: 'range', from: '2026-03-01', to: '2026-03-05' });
    expect(parsePeriod('?from=2026-03-02')).toEqual({ kind: 'range', from: '2026-03-02', to: '2026-03-02' });
    expect(parsePeriod('?period=nonsense')).toEqual({ kind: 'month' });
    for (const s of ['', 'period=last-month', 'from=2026-03-01&to=2026-03-05']) {
      expect(periodSearch(parsePeriod(`?${s}`))).toBe(s);
    }
  });

  it('asks for UTC months and whole UTC days, the last day included', () => {
    expect(periodWindow({ kind: 'month' }, now)).toEqual({ from: utc('2026-03-01T00:00:00') });
    expect(periodWindow({ kind: 'last-month' }, now)).toEqual({ from: utc('2026-02-01T00:00:00'), to: utc('2026-03-01T00:00:00') });
    // January's last month is December of the year before.
    expect(periodWindow({ kind: 'last-month' }, utc('2026-01-01T00:00:00'))).toEqual({
      from: utc('2025-12-01T00:00:00'),
      to: utc('2026-01-01T00:00:00'),
    });
    expect(periodWindow({ kind: 'range', from: '2026-03-02', to: '2026-03-02' }, now)).toEqual({
      from: utc('2026-03-02T00:00:00'),
      to: utc('2026-03-03T00:00:00'),
    });
    expect(periodWindow({ kind: 'range', from: '2026-03-05', to: '2026-03-01' }, now)).toEqual({ error: 'order' });
    expect(periodWindow({ kind: 'range', from: '2026-02-30', to: '2026-03-01' }, now)).toEqual({ error: 'date' });
    expect(periodWindow({ kind: 'range', from: 'yesterday', to: '2026-03-01' }, now)).toEqual({ error: 'date' });
  });

  it('knows a calendar day and an open window', () => {
    expect(isDay('2024-02-29')).toBe(true);
    expect(isDay('2026-02-29')).toBe(false);
    expect(isDay('2026-3-1')).toBe(false);
    expect(isOpen({ from: 0 }, now)).toBe(true);
    expect(isOpen({ from: 0, to: now + 1 }, now)).toBe(true);
    expect(isOpen({ from: 0, to: now }, now)).toBe(false);
  });
});

describe('the figures', () => {
  it('takes the idle share of the sampled GPU time, not of all of it', () => {
    // 10 GPU-hours allocated, 8 sampled, 2 of them idle: 25%, not 20%.
    expect(wastePercent({ idle_mgpu_ms: 7.2e9, measured_mgpu_ms: 28.8e9 })).toBe(25);
    expect(wastePercent({ idle_mgpu_ms: null, measured_mgpu_ms: null })).toBeNull();
    expect(wastePercent({ idle_mgpu_ms: 0, measured_mgpu_ms: 0 })).toBeNull();
    expect(wastePercent({ idle_mgpu_ms: 0, measured_mgpu_ms: 5 })).toBe(0);
    expect(percent(100 / 3)).toBe('33.3%');
    expect(percent(0)).toBe('0.0%');
  });

  it("keeps berthd's rows, order and figures", () => {
    const rows = costRows([
      row({ tenant: 'blue' }, 36e9, 7.2e9, 28.8e9, '25.00'),
      row({ tenant: 'red' }, 3.6e9, null, null, '2.50'),
    ]);
    expect(rows).toEqual([
      { tenant: 'blue', day: '', allocated: 10, used: 6, idle: 2, waste: 25, cost: '25.00', idleCost: '0.25', runs: 2 },
      { tenant: 'red', day: '', allocated: 1, used: null, idle: null, waste: null, cost: '2.50', idleCost: null, runs: 2 },
    ]);
  });

  it('sums a day over its tenants for the chart, every day of the window drawn', () => {
    const rows = [
      row({ day: '2026-03-02', tenant: 'blue' }, 3.6e9, 1e9, 3.6e9, '1'),
      row({ day: '2026-03-02', tenant: 'red' }, 7.2e9, 0, 7.2e9, '2'),
      row({ day: '2026-03-04', tenant: 'blue' }, 1e9, 5e8, 1e9, '1'),
    ];
    const bars = dayBars(rows, utc('2026-03-01T00:00:00'), utc('2026-03-04T12:00:00'), true);
    expect(bars).toEqual([
      { day: '2026-03-01', allocatedMgpuMs: 0, idleMgpuMs: 0 },
      { day: '2026-03-02', allocatedMgpuMs: 10.8e9, idleMgpuMs: 1e9 },
      { day: '2026-03-03', allocatedMgpuMs: 0, idleMgpuMs: 0 },
      { day: '2026-03-04', allocatedMgpuMs: 1e9, idleMgpuMs: 5e8 },
    ]);
    // Without telemetry there is no idle part.
    expect(dayBars(rows.slice(0, 1), utc('2026-03-02T00:00:00'), utc('2026-03-03T00:00:00'), false)).toEqual([
      { day: '2026-03-02', allocatedMgpuMs: 3.6e9, idleMgpuMs: null },
    ]);
    // A window too long to draw every day: only the days with use.
    expect(daysOf(0, 200 * 86_400_000)).toBeNull();
    expect(dayBars(rows, 0, 200 * 86_400_000, true).map((b) => b.day)).toEqual(['2026-03-02', '2026-03-04']);
  });

  it("works out a budget's share from its micro-units", () => {
    expect(budgetPercent({ used: '7.50', limit: '100.00', used_micros: 7_500_000, limit_micros: 100_000_000 })).toBe(7.5);
    expect(budgetPercent({ used: '150', limit: '100' })).toBe(150);
    expect(budgetPercent({ used: '1', limit: '0' })).toBeNull();
  });
});

describe('CSV', () => {
  it('quotes a field with a comma, a quote, a line break or edge spaces, and nothing else', () => {
    expect(csvField('blue')).toBe('blue');
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('two\nlines')).toBe('"two\nlines"');
    expect(csvField('cr\rhere')).toBe('"cr\rhere"');
    expect(csvField(' padded')).toBe('" padded"');
    expect(csvField('蓝色团队')).toBe('蓝色团队');
    expect(csvField(0.1 + 0.2)).toBe('0.30000000000000004');
    expect(csvField(1234567.5)).toBe('1234567.5');
    expect(csvField(null)).toBe('');
  });

  it('writes a BOM, the header and CRLF-ended rows, exactly', () => {
    const rows = costRows([
      row({ tenant: 'blue' }, 36e9, 7.2e9, 28.8e9, '25.00'),
      row({ tenant: '红,"队"' }, 3.6e9, null, null, '2.50'),
    ]);
    const text = csvText(
      ['Tenant', 'Allocated GPU-hours', 'Cost (EUR)'],
      rows.map((r) => [r.tenant, r.allocated, r.cost]),
    );
    expect(text).toBe('\uFEFFTenant,Allocated GPU-hours,Cost (EUR)\r\nblue,10,25.00\r\n"红,""队""",1,2.50\r\n');
    expect(csvText(['a'], [])).toBe('\uFEFFa\r\n');
  });

  it("puts a cost row's figures unformatted, the waste to two decimals, an unmeasured figure empty", () => {
    const [blue, red] = costRows([
      row({ day: '2026-03-02', tenant: 'blue' }, 12e9, 1e9, 3e9, '8.333333'),
      row({ day: '2026-03-02', tenant: 'red' }, 3.6e9, null, null, '2.50'),
    ]);
    expect(csvCells(blue, true)).toEqual(['2026-03-02', 'blue', 12e9 / 3.6e9, 2e9 / 3.6e9, 1e9 / 3.6e9, 33.33, '8.333333', '0.25', 2]);
    expect(csvCells(red, false)).toEqual(['red', 1, null, null, null, '2.50', null, 2]);
    expect(csvName('cost-by-tenant', utc('2026-02-01T00:00:00'), utc('2026-03-01T00:00:00'))).toBe(
      'berth-cost-by-tenant-2026-02-01-to-2026-02-28.csv',
    );
  });
});
