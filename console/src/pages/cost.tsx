// The cost view (/ui/cost): GPU-hours allocated, used and idle, the idle
// share and cost per tenant over a period (this UTC month, the last one, or
// a range of UTC days; the period lives in the URL), the same per UTC day
// with a bar chart, each table downloadable as CSV, and this month's budget
// of each tenant. Everything comes from the API with the caller's session:
// berthd answers a platform admin every tenant and anyone else only its own
// tenants, so the page names no tenant in what it asks. While the period
// reaches now, asked again on job events (at most once every EVENT_GAP_MS),
// every LIVE_POLL_MS while live (running jobs' GPU-hours grow with no
// event), and every POLL_MS while the event stream is down; a period that
// has ended is asked once.

import { useEffect, useRef, useState } from 'preact/hooks';
import type { LiveState } from '../live';
import { ApiError, type Budget, type Usage } from '../api';
import { guard, useConsole } from '../app';
import {
  budgetPercent,
  type CostRow,
  costRow,
  costRows,
  csvCells,
  csvName,
  csvText,
  dayBars,
  daysOf,
  isOpen,
  MGPU_MS_PER_GPU_HOUR,
  type Period,
  parsePeriod,
  percent,
  periodSearch,
  periodWindow,
} from '../cost';
import type { Key } from '../i18n';
import { gpus } from '../tenant';
import { LiveStatus, useLiveRefresh } from './live-status';

export const POLL_MS = 30000;
export const LIVE_POLL_MS = 60000;
export const EVENT_GAP_MS = 5000;

// How a CSV leaves the page: a Blob handed to the browser as a download.
// Tests replace `save` to read what would be saved.
export const files = {
  save(name: string, blob: Blob): void {
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    a.hidden = true;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  },
};

interface Loaded {
  byTenant: Usage;
  byDay: Usage;
  budgets: Budget[];
}

export function CostPage({ search }: { search: string }) {
  const ctx = useConsole();
  const { t, api } = ctx;
  const period = parsePeriod(search);
  const key = periodSearch(period);
  const [data, setData] = useState<Loaded | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [kind, setKind] = useState<Period['kind']>(period.kind);
  const win = periodWindow(period, Date.now());
  const invalid = 'error' in win ? win.error : null;
  const live = !('error' in win) && isOpen(win, Date.now());

  const loadRef = useRef<() => void>(() => undefined);
  useEffect(() => {
    setKind(period.kind);
    setData(null);
    setError(null);
    if (invalid) return;
    let alive = true;
    let seq = 0;
    const load = async () => {
      const mine = ++seq;
      const w = periodWindow(period, Date.now());
      if ('error' in w) return;
      const r = await guard(ctx, async () => {
        const [byTenant, byDay, budgets] = await Promise.all([
          api.usageReport(['tenant'], w),
          api.usageReport(['day', 'tenant'], w),
          api.budgets(),
        ]);
        return { byTenant, byDay, budgets: budgets.budgets };
      });
      if (!alive || mine !== seq) return;
      if (r instanceof ApiError) return setError(r);
      setError(null);
      setData(r);
    };
    loadRef.current = () => void load();
    void load();
    return () => {
      alive = false;
      loadRef.current = () => undefined;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);

  // A period that has ended does not change: asked once.
  const stream = useLiveRefresh(
    {
      topics: ['job'],
      pollMs: POLL_MS,
      livePollMs: LIVE_POLL_MS,
      active: live,
      delayMs: 500,
      minIntervalMs: EVENT_GAP_MS,
    },
    () => loadRef.current(),
  );

  const apply = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const chosen = String(form.get('period') ?? 'month');
    const next: Period =
      chosen === 'last-month'
        ? { kind: 'last-month' }
        : chosen === 'range'
          ? { kind: 'range', from: String(form.get('from') ?? '').trim(), to: String(form.get('to') ?? '').trim() }
          : { kind: 'month' };
    const q = periodSearch(next);
    ctx.navigate(q ? `/ui/cost?${q}` : '/ui/cost');
  };

  const today = new Date().toISOString().slice(0, 10);
  const range = period.kind === 'range' ? period : { from: today.slice(0, 8) + '01', to: today };
  return (
    <section aria-labelledby="cost-title">
      <h1 id="cost-title">{t('cost.title')}</h1>
      <p class="help">{t('cost.help')}</p>
      <form id="cost-period" class="filters" onSubmit={apply} key={key} aria-label={t('cost.period')}>
        <fieldset>
          <legend>{t('cost.period')}</legend>
          {(['month', 'last-month', 'range'] as const).map((k) => (
            <label class="check">
              <input
                type="radio"
                name="period"
                id={`period-${k}`}
                value={k}
                checked={kind === k}
                onChange={() => setKind(k)}
              />{' '}
              {t(k === 'month' ? 'cost.thisMonth' : k === 'last-month' ? 'cost.lastMonth' : 'cost.range')}
            </label>
          ))}
        </fieldset>
        <label>
          {t('cost.from')}{' '}
          <input type="date" name="from" id="cost-from" defaultValue={range.from} disabled={kind !== 'range'} />
        </label>
        <label>
          {t('cost.to')} <input type="date" name="to" id="cost-to" defaultValue={range.to} disabled={kind !== 'range'} />
        </label>
        <button type="submit" id="cost-show">
          {t('cost.show')}
        </button>
      </form>
      {invalid && (
        <p id="cost-invalid" class="error" role="alert">
          {t(invalid === 'date' ? 'cost.badDate' : 'cost.badOrder')}
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error.message })}
        </p>
      )}
      {!invalid && !data && !error && <p role="status">{t('common.loading')}</p>}
      {data && <Figures data={data} live={live ? stream : null} />}
    </section>
  );
}

// `live`: the stream's state while the period reaches now, else null.
function Figures({ data, live }: { data: Loaded; live: LiveState | null }) {
  const { t } = useConsole();
  const { byTenant, byDay } = data;
  const currency = byTenant.currency;
  const measured = byTenant.telemetry !== false;
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 16).replace('T', ' ');
  return (
    <>
      <p id="cost-window" class="hint" data-from-ms={byTenant.from_ms} data-to-ms={byTenant.to_ms}>
        {t('cost.window', { from: day(byTenant.from_ms), to: day(byTenant.to_ms), currency })}
        {live && (
          <>
            {' '}
            <LiveStatus state={live} pollMs={POLL_MS} />
          </>
        )}
      </p>
      <p class="hint">{measured ? t('cost.wasteHelp') : t('cost.notMeasured')}</p>

      <h2 id="cost-tenants-h">{t('cost.byTenant')}</h2>
      <CostTable
        id="cost-by-tenant"
        labelledBy="cost-tenants-h"
        usage={byTenant}
        withDay={false}
        csvLabel={t('cost.csvByTenant')}
        csvFile={csvName('cost-by-tenant', byTenant.from_ms, byTenant.to_ms)}
      />

      <h2 id="cost-days-h">{t('cost.byDay')}</h2>
      <Chart usage={byDay} />
      <CostTable
        id="cost-by-day"
        labelledBy="cost-days-h"
        usage={byDay}
        withDay
        csvLabel={t('cost.csvByDay')}
        csvFile={csvName('cost-by-day', byDay.from_ms, byDay.to_ms)}
      />

      <Budgets budgets={data.budgets} />
    </>
  );
}

// The column headings of a cost table, also the CSV's header row.
function headings(t: (k: Key, v?: Record<string, string | number>) => string, withDay: boolean, currency: string): string[] {
  return [
    ...(withDay ? [t('ccol.day')] : []),
    t('col.tenant'),
    t('ccol.allocated'),
    t('ccol.used'),
    t('ccol.idle'),
    t('ccol.waste'),
    t('ucol.cost', { currency }),
    t('ccol.idleCost', { currency }),
    t('ucol.runs'),
  ];
}

function CostTable({
  id,
  labelledBy,
  usage,
  withDay,
  csvLabel,
  csvFile,
}: {
  id: string;
  labelledBy: string;
  usage: Usage;
  withDay: boolean;
  csvLabel: string;
  csvFile: string;
}) {
  const { t } = useConsole();
  const rows = costRows(usage.rows);
  const total = withDay ? null : costRow(usage.total);
  const head = headings(t, withDay, usage.currency);
  const none = t('common.none');
  const hours = (n: number | null) => (n === null ? none : gpus(n));
  const download = () => {
    const body = rows.map((r) => csvCells(r, withDay));
    if (total) body.push(csvCells({ ...total, tenant: t('ucol.total') }, false));
    files.save(csvFile, new Blob([csvText(head, body)], { type: 'text/csv;charset=utf-8' }));
  };
  const cells = (r: CostRow) => (
    <>
      <td class="allocated">{gpus(r.allocated)}</td>
      <td class="used">{hours(r.used)}</td>
      <td class="idle">{hours(r.idle)}</td>
      <td class="waste">{r.waste === null ? none : percent(r.waste)}</td>
      <td class="cost">{r.cost}</td>
      <td class="idle-cost">{r.idleCost ?? none}</td>
      <td class="runs">{r.runs}</td>
    </>
  );
  return (
    <>
      <p>
        <button type="button" id={`${id}-csv`} class="small" aria-label={csvLabel} disabled={rows.length === 0} onClick={download}>
          {t('cost.csv')}
        </button>
      </p>
      <table id={id} class="jobs cost" aria-labelledby={labelledBy} data-from-ms={usage.from_ms} data-to-ms={usage.to_ms}>
        <thead>
          <tr>
            {head.map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 && (
            <tr>
              <td colSpan={head.length}>{t('cost.noUsage')}</td>
            </tr>
          )}
          {rows.map((r) => (
            <tr key={`${r.day}/${r.tenant}`} data-tenant={r.tenant} data-day={r.day || undefined}>
              {withDay && <td class="day">{r.day}</td>}
              <th scope="row">{r.tenant}</th>
              {cells(r)}
            </tr>
          ))}
        </tbody>
        {total && (
          <tfoot>
            <tr data-total="">
              <th scope="row">{t('ucol.total')}</th>
              {cells(total)}
            </tr>
          </tfoot>
        )}
      </table>
    </>
  );
}

// Allocated GPU-hours per UTC day as bars, the idle part darker. An image
// with a name and a description for assistive technology; the table by day
// below it holds every figure.
function Chart({ usage }: { usage: Usage }) {
  const { t } = useConsole();
  const measured = usage.telemetry !== false;
  const bars = dayBars(usage.rows, usage.from_ms, usage.to_ms, measured);
  if (bars.length === 0) return null;
  const tooLong = daysOf(usage.from_ms, usage.to_ms) === null;
  const max = Math.max(...bars.map((b) => b.allocatedMgpuMs), 1);
  const W = 640;
  const H = 160;
  const top = 16;
  const bottom = 18;
  const slot = W / bars.length;
  const width = Math.max(1, slot * 0.7);
  const y = (v: number) => ((H - top - bottom) * v) / max;
  const every = bars.length <= 16 ? 1 : bars.length <= 40 ? 7 : 14;
  const h = (mgpuMs: number) => gpus(mgpuMs / MGPU_MS_PER_GPU_HOUR);
  return (
    <figure class="cost-chart">
      <svg id="cost-chart" viewBox={`0 0 ${W} ${H}`} role="img" aria-labelledby="cost-chart-title cost-chart-desc">
        <title id="cost-chart-title">{t('cost.chart')}</title>
        <desc id="cost-chart-desc">{t('cost.chartDesc')}</desc>
        <line class="axis" x1={0} x2={W} y1={H - bottom} y2={H - bottom} />
        <text class="label" x={0} y={11}>
          {t('cost.chartMax', { max: h(max) })}
        </text>
        {bars.map((b, i) => {
          const x = i * slot + (slot - width) / 2;
          const all = y(b.allocatedMgpuMs);
          const idle = b.idleMgpuMs === null ? 0 : y(b.idleMgpuMs);
          const label =
            b.idleMgpuMs === null
              ? t('cost.chartBarNoIdle', { day: b.day, allocated: h(b.allocatedMgpuMs) })
              : t('cost.chartBar', { day: b.day, allocated: h(b.allocatedMgpuMs), idle: h(b.idleMgpuMs) });
          return (
            <g data-day={b.day} data-mgpu-ms={b.allocatedMgpuMs}>
              <title>{label}</title>
              <rect class="bar-allocated" x={x} y={H - bottom - all} width={width} height={all} />
              {idle > 0 && <rect class="bar-idle" x={x} y={H - bottom - idle} width={width} height={idle} />}
              {i % every === 0 && (
                <text class="label" x={x} y={H - 4}>
                  {b.day.slice(5)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <figcaption>
        <span class="swatch bar-allocated" aria-hidden="true" /> {t('cost.legendAllocated')}{' '}
        {measured && (
          <>
            <span class="swatch bar-idle" aria-hidden="true" /> {t('cost.legendIdle')}
          </>
        )}
        {tooLong && <span class="hint"> {t('cost.chartTooLong', { days: 93 })}</span>}
      </figcaption>
    </figure>
  );
}

function Budgets({ budgets }: { budgets: Budget[] }) {
  const { t } = useConsole();
  const none = t('common.none');
  const unit = (b: Budget) => (b.unit === 'gpu_hours' ? t('tenant.gpuHours') : b.currency);
  return (
    <>
      <h2 id="cost-budgets-h">{t('cost.budgets')}</h2>
      <p class="hint">{t('cost.budgetsHelp')}</p>
      {budgets.length === 0 ? (
        <p id="cost-no-budgets">{t('cost.noBudgets')}</p>
      ) : (
        <table id="cost-budgets" class="jobs" aria-labelledby="cost-budgets-h">
          <thead>
            <tr>
              <th scope="col">{t('col.tenant')}</th>
              <th scope="col">{t('bcol.month')}</th>
              <th scope="col">{t('bcol.limit')}</th>
              <th scope="col">{t('bcol.used')}</th>
              <th scope="col">{t('bcol.share')}</th>
              <th scope="col">{t('bcol.state')}</th>
              <th scope="col">{t('bcol.enforced')}</th>
              <th scope="col">{t('bcol.crossed')}</th>
            </tr>
          </thead>
          <tbody>
            {budgets.map((b) => {
              const share = budgetPercent(b);
              return (
                <tr key={b.tenant} data-tenant={b.tenant} class={b.over ? 'over' : ''}>
                  <th scope="row">{b.tenant}</th>
                  <td>{b.month}</td>
                  <td class="limit">
                    {b.limit} {unit(b)}
                  </td>
                  <td class="used">
                    {b.used} {unit(b)}
                  </td>
                  <td class="share">
                    {share === null ? none : percent(share)}{' '}
                    <meter min={0} max={100} value={Math.min(100, share ?? 0)} aria-label={`${b.tenant}: ${t('bcol.share')}`} />
                  </td>
                  <td class="state">{t(b.over ? 'budget.over' : 'budget.within')}</td>
                  <td class="enforced">{t(b.enforce ? 'budget.enforced' : 'budget.notEnforced')}</td>
                  <td class="crossed">{b.crossed.length ? b.crossed.map((p) => `${p}%`).join(', ') : none}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </>
  );
}
