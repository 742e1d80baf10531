// The tenant page's quota over time: for each queue a small bar chart of the
// GPU-hours it used per UTC day over the last HISTORY_DAYS days (GET
// /v1/usage?by=queue,day&tenant=T&from=14d) against its guarantee (a dashed
// step line), the days it borrowed hatched, marked ▲ and named in the text
// below; and the same figures in a table (a <details>) for whoever does not
// read the chart. The arithmetic is in tenant.ts (quotaHistory).
//
// Its own request, asked again at most once every HISTORY_GAP_MS however
// many job events come (a day's use moves slowly, and the answer covers two
// weeks of runs): on the tenant's job events and every HISTORY_GAP_MS, live
// or not.

import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type QueueUsage, type Usage } from '../api';
import { guard, useConsole } from '../app';
import { gpus, guidePath, HISTORY_DAYS, HISTORY_FROM, historyBars, type QuotaSeries, quotaHistory } from '../tenant';
import { useLiveRefresh } from './live-status';

export const HISTORY_GAP_MS = 60000;

const W = 320;
const H = 120;
const TOP = 16;
const BOTTOM = 16;
const PLOT_H = H - TOP - BOTTOM;

export function QuotaHistory({ tenant, queues }: { tenant: string; queues: QueueUsage[] }) {
  const ctx = useConsole();
  const { t, api, live } = ctx;
  const [usage, setUsage] = useState<Usage | null>(null);
  const [error, setError] = useState('');
  const lastStart = useRef(-Infinity);
  const seq = useRef(0);
  const alive = useRef(true);

  // Asks again unless it did less than HISTORY_GAP_MS ago (then false: the
  // live hook then keeps its own time of the last fetch).
  const load = (force = false): boolean => {
    const now = live.now();
    if (!force && now - lastStart.current < HISTORY_GAP_MS) return false;
    lastStart.current = now;
    const mine = ++seq.current;
    void guard(ctx, () => api.usageByQueueDay(tenant, HISTORY_FROM)).then((r) => {
      if (!alive.current || mine !== seq.current) return;
      if (r instanceof ApiError) return setError(r.message);
      setError('');
      setUsage(r);
    });
    return true;
  };
  useEffect(() => {
    alive.current = true;
    lastStart.current = -Infinity;
    load(true);
    return () => {
      alive.current = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [tenant]);
  useLiveRefresh(
    {
      topics: ['job'],
      pollMs: HISTORY_GAP_MS,
      livePollMs: HISTORY_GAP_MS,
      delayMs: 500,
      minIntervalMs: HISTORY_GAP_MS,
      match: (e) => e.topic === 'job' && e.data.tenant === tenant,
    },
    () => load(),
  );

  const heading = (
    <h2 id="history-h">{t('tenant.history', { days: HISTORY_DAYS })}</h2>
  );
  if (!usage) {
    return (
      <>
        {heading}
        {error ? (
          <p class="error" role="alert">
            {t('tenant.historyError', { message: error })}
          </p>
        ) : (
          <p role="status">{t('common.loading')}</p>
        )}
      </>
    );
  }
  const series = quotaHistory(queues, usage, tenant);
  if (series.length === 0) return null;
  const days = series[0].days;
  return (
    <>
      {heading}
      <p class="hint">{t('tenant.historyHelp')}</p>
      {error && (
        <p class="error" role="alert">
          {t('tenant.historyError', { message: error })}
        </p>
      )}
      <figure id="tenant-history" class="quota-history" aria-labelledby="history-h">
        <div class="panels">
          {series.map((s, i) => (
            <Panel key={s.queue} s={s} index={i} />
          ))}
        </div>
        <figcaption>
          <span class="swatch bar-allocated" aria-hidden="true" /> {t('tenant.historyLegendUsed')}{' '}
          <span class="swatch bar-borrowed" aria-hidden="true" /> {t('tenant.historyLegendBorrowed')}{' '}
          <span class="swatch guide" aria-hidden="true" /> {t('tenant.historyLegendGuarantee')}
        </figcaption>
      </figure>
      <details id="tenant-history-table">
        <summary>{t('tenant.historyTable')}</summary>
        <table class="cost">
          <thead>
            <tr>
              <th scope="col">{t('tenant.historyDay')}</th>
              {series.map((s) => (
                <th scope="col" data-queue={s.queue}>
                  {s.queue}
                  <br />
                  <small>
                    {s.guaranteed === null ? t('tenant.historyColNoQuota') : t('tenant.historyColGuarantee', { gpus: gpus(s.guaranteed) })}
                  </small>
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {days.map((d, i) => (
              <tr key={d.day} data-day={d.day}>
                <th scope="row">{d.day}</th>
                {series.map((s) => {
                  const day = s.days[i];
                  const used = gpus(day.gpuHours);
                  return (
                    <td data-queue={s.queue} class={day.borrowed ? 'borrowed' : ''}>
                      {day.guaranteeGpuHours === null
                        ? used
                        : t(day.borrowed ? 'tenant.historyCellBorrowed' : 'tenant.historyCell', {
                            used,
                            guarantee: gpus(day.guaranteeGpuHours),
                          })}
                    </td>
                  );
                })}
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </>
  );
}

// One queue's chart: an image with a name and a description, each bar
// named, and the borrowed days in text under it.
function Panel({ s, index }: { s: QuotaSeries; index: number }) {
  const { t } = useConsole();
  const first = s.days[0]?.day ?? '';
  const last = s.days[s.days.length - 1]?.day ?? '';
  const bars = historyBars(s, W, PLOT_H);
  const base = H - BOTTOM;
  const id = `history-${index}`;
  const every = s.days.length <= 8 ? 1 : 7;
  const desc =
    s.guaranteed === null
      ? t('tenant.historyDescNoQuota', { from: first, to: last })
      : t('tenant.historyDesc', {
          from: first,
          to: last,
          guaranteed: gpus(s.guaranteed),
          perDay: gpus(s.guaranteed * 24),
          count: s.borrowedDays.length,
          days: s.days.length,
        });
  return (
    <div class="panel" data-queue={s.queue}>
      <svg id={id} viewBox={`0 0 ${W} ${H}`} role="img" aria-labelledby={`${id}-title ${id}-desc`}>
        <title id={`${id}-title`}>{t('tenant.historyChart', { queue: s.queue })}</title>
        <desc id={`${id}-desc`}>{desc}</desc>
        <defs>
          <pattern id={`${id}-hatch`} width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
            <rect class="hatch-bg" width="4" height="4" />
            <rect class="hatch-line" width="2" height="4" />
          </pattern>
        </defs>
        <text class="label" x={0} y={11}>
          {s.queue} · {t('tenant.historyMax', { max: gpus(s.max) })}
        </text>
        <line class="axis" x1={0} x2={W} y1={base} y2={base} />
        {bars.map((b, i) => {
          const d = s.days[i];
          const used = gpus(d.gpuHours);
          const label =
            d.guaranteeGpuHours === null
              ? t('tenant.historyBarNoQuota', { day: d.day, used })
              : t(d.borrowed ? 'tenant.historyBarBorrowed' : 'tenant.historyBar', {
                  day: d.day,
                  used,
                  guarantee: gpus(d.guaranteeGpuHours),
                });
          return (
            <g key={d.day} data-day={d.day} data-borrowed={d.borrowed ? 'true' : undefined}>
              <title>{label}</title>
              <rect
                class={d.borrowed ? 'bar-borrowed' : 'bar-allocated'}
                x={b.x}
                y={base - b.height}
                width={b.width}
                height={b.height}
                fill={d.borrowed ? `url(#${id}-hatch)` : undefined}
              />
              {d.borrowed && (
                <text class="marker" x={b.x + b.width / 2} y={Math.max(TOP, base - b.height - 2)} text-anchor="middle">
                  ▲
                </text>
              )}
              {i % every === 0 && (
                // The last day's date ends at the chart's right edge.
                <text
                  class="label"
                  x={i === bars.length - 1 ? b.x + b.width : b.x}
                  y={H - 4}
                  text-anchor={i === bars.length - 1 && i > 0 ? 'end' : undefined}
                >
                  {d.day.slice(5)}
                </text>
              )}
            </g>
          );
        })}
        {s.guaranteed !== null && <path class="guide" d={guidePath(s, W, PLOT_H, base)} />}
      </svg>
      <p class="hint" data-borrowed-days={s.borrowedDays.length}>
        {s.guaranteed === null
          ? t('tenant.historyNoQuota')
          : s.borrowedDays.length === 0
            ? t('tenant.historyNoBorrow')
            : t('tenant.historyBorrowed', { count: s.borrowedDays.length, days: s.days.length, list: s.borrowedDays.join(', ') })}
      </p>
    </div>
  );
}
