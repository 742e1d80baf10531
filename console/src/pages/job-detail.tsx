// The parts of one job's page below its summary (jobdetail.ts and
// telemetry.ts do the arithmetic and wording): the layers of why it waits
// with their numbers and its estimated start; why it failed; where each
// attempt's replicas ran; its GPU utilization as a chart with each GPU's
// figures; and its whole timeline.
//
// The utilization is asked for only once the job has runs: every
// TELEMETRY_MS while it has not finished, once more when it has, and not
// again after a 503 (a berthd without telemetry) or a refusal.

import { useEffect, useState } from 'preact/hooks';
import {
  ApiError,
  type Failure,
  isFinished,
  type JobSummary,
  type JobTelemetry,
  type UsageRow,
  type Why,
} from '../api';
import { guard, Link, useConsole } from '../app';
import { nodeHref } from '../fleet';
import { labelOf, stateLabel } from '../i18n';
import { etaOf, etaText, gpusText, layerLines, placementGroups, runOutcome, timelineOrder } from '../jobdetail';
import { CHART_BOX, chartOf, pctText, telemetryStep } from '../telemetry';
import { formatBytes } from './node';

export const TELEMETRY_MS = 10_000;

const whenOf = (lang: string, ms: number | null | undefined, none: string) =>
  ms ? new Date(ms).toLocaleString(lang === 'zh' ? 'zh-CN' : 'en-GB') : none;

// Under the reason's message: the layers holding a waiting job, ranked, and
// its estimated start with what the estimate stands on.
export function WhyLayers({ why }: { why: Why }) {
  const { t, lang } = useConsole();
  const lines = layerLines(why.reason?.layers, why.reason, lang);
  const eta = etaOf(why.reason?.counts);
  const words = eta ? etaText(eta, Date.now(), lang) : null;
  return (
    <>
      {lines.length > 0 && (
        <>
          <p id="why-layers-h" class="help">
            {t('job.layers')}
          </p>
          <ol id="why-layers" aria-labelledby="why-layers-h">
            {lines.map((l) => (
              <li
                data-layer={l.layer}
                data-code={l.code}
                data-nodes={l.nodes ?? undefined}
                data-could-take={l.couldTake ?? undefined}
              >
                <strong>{l.label}</strong>
                {t('layer.line', { label: '', text: l.text })}
                {l.causes.length > 0 && (
                  <>
                    {t('layer.causes', { causes: '' })}
                    {l.causes.map((c, i) => (
                      <>
                        {i > 0 && t('layer.sep')}
                        <span class="cause" data-cause={c.cause} data-nodes={c.nodes} data-alone={c.alone}>
                          {c.text}
                        </span>
                      </>
                    ))}
                  </>
                )}
                {l.now && <> {t('job.layerNow')}</>}
              </li>
            ))}
          </ol>
        </>
      )}
      {words && (
        <dl class="summary" id="why-eta" data-kind={words.kind}>
          <dt>{t('eta.title')}</dt>
          <dd id="why-eta-when">{words.when}</dd>
          {words.basis && (
            <>
              <dt>{t('eta.basisTitle')}</dt>
              <dd id="why-eta-basis">{words.basis}</dd>
            </>
          )}
        </dl>
      )}
    </>
  );
}

// A failed job's class, berthd's sentence (in the language asked for) and
// the evidence it found, as the why answer's `failure` has them.
export function FailureView({ failure, whyLang }: { failure: Failure; whyLang: string }) {
  const { t, lang } = useConsole();
  return (
    <section aria-labelledby="failure-h">
      <h2 id="failure-h">{t('job.failure')}</h2>
      <dl class="summary">
        <dt>{t('failure.class')}</dt>
        <dd id="failure-class" data-class={failure.class}>
          {labelOf(lang, 'failure', failure.class)}
        </dd>
        <dt>{t('failure.message')}</dt>
        <dd id="failure-message" lang={whyLang === 'zh' ? 'zh-CN' : 'en'}>
          {failure.message}
        </dd>
        {failure.evidence && (
          <>
            <dt>{t('failure.evidence')}</dt>
            <dd>
              <code id="failure-evidence">{failure.evidence}</code>
            </dd>
          </>
        )}
      </dl>
    </section>
  );
}

// Each attempt's replicas, the newest attempt first: node (linked to its
// page), GPU indices, state, start, end and how the run ended.
export function Placement({ job }: { job: JobSummary }) {
  const { t, lang } = useConsole();
  const groups = placementGroups(job);
  const none = t('common.none');
  return (
    <section aria-labelledby="placement-h">
      <h2 id="placement-h">{t('job.placement')}</h2>
      {groups.length === 0 ? (
        <p id="placement-none">{t('job.noPlacement')}</p>
      ) : (
        groups.map((g) => (
          <table id={`placement-${g.attempt}`} class="jobs placement" data-attempt={g.attempt} data-current={g.current}>
            <caption>{g.current ? t('job.attemptCurrent', { n: g.attempt }) : t('job.attempt', { n: g.attempt })}</caption>
            <thead>
              <tr>
                <th scope="col">{t('rcol.replica')}</th>
                <th scope="col">{t('rcol.node')}</th>
                <th scope="col">{t('rcol.gpus')}</th>
                <th scope="col">{t('rcol.state')}</th>
                <th scope="col">{t('rcol.started')}</th>
                <th scope="col">{t('rcol.finished')}</th>
                <th scope="col">{t('rcol.outcome')}</th>
              </tr>
            </thead>
            <tbody>
              {g.runs.map((r) => (
                <tr data-run={r.run_id} data-replica={r.replica}>
                  <th scope="row">{r.replica}</th>
                  <td class="node">{r.node ? <Link href={nodeHref(r.node)}>{r.node}</Link> : none}</td>
                  <td class="gpus" data-gpus={r.gpus.join(',')}>
                    {gpusText(r) || none}
                  </td>
                  <td class="run-state">{labelOf(lang, 'runState', r.state)}</td>
                  <td>{whenOf(lang, r.started_at_ms, none)}</td>
                  <td>{whenOf(lang, r.finished_at_ms, none)}</td>
                  <td class="outcome">{runOutcome(r, lang) || (r.start_error ? r.start_error : none)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ))
      )}
    </section>
  );
}

// Every event of the job, oldest first. Messages stay as berthd recorded
// them (English).
export function Timeline({ job }: { job: JobSummary }) {
  const { t, lang } = useConsole();
  const events = timelineOrder(job.timeline);
  return (
    <section aria-labelledby="history-h">
      <h2 id="history-h">{t('job.history')}</h2>
      {events.length === 0 ? (
        <p>{t('job.historyEmpty')}</p>
      ) : (
        <>
          <p class="help">{t('job.historyHelp')}</p>
          <ol id="job-timeline" class="timeline">
            {events.map((e) => (
              <li data-event={e.event}>
                <time dateTime={new Date(e.time_ms).toISOString()}>{whenOf(lang, e.time_ms, '')}</time>{' '}
                <span class={`state state-${e.state}`}>{stateLabel(lang, e.state)}</span> <strong>{e.event}</strong>{' '}
                <span lang="en">{e.message}</span>
              </li>
            ))}
          </ol>
        </>
      )}
    </section>
  );
}

// Lines take colours util-c0 ... util-c7 (styles.css): no inline style, which
// the console's Content-Security-Policy refuses.
const COLOURS = 8;

// The job's GPU utilization: berthd's summary over all runs, a line per
// GPU, and the same per GPU in a table.
// GPU-hours as berthd counts them, to two decimals.
export function hoursText(h: number): string {
  return (Math.round(h * 100) / 100).toFixed(2);
}

// What the job's runs cost: its usage records' total (GET
// /v1/usage/records?job=), allocated and, with telemetry, idle. Asked once
// when the page opens and again when the job finishes.
export function JobCost({ job }: { job: JobSummary }) {
  const ctx = useConsole();
  const { t, api } = ctx;
  const [cost, setCost] = useState<{ currency: string; total: UsageRow; total_records: number } | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const ran = (job.runs ?? job.placement ?? []).length > 0;
  const finished = isFinished(job.state);
  useEffect(() => {
    if (!ran) return;
    let alive = true;
    void (async () => {
      const r = await guard(ctx, () => api.jobUsage(job.id, job.submitted_at_ms));
      if (!alive) return;
      if (r instanceof ApiError) return setError(r);
      setError(null);
      setCost(r);
    })();
    return () => {
      alive = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [job.id, ran, finished]);
  if (!ran) return null;
  const total = cost?.total;
  return (
    <section aria-labelledby="cost-h">
      <h2 id="cost-h">{t('jobcost.title')}</h2>
      {error && (
        <p class="error" role="alert" id="job-cost-error">
          {t('jobcost.error', { message: error.message })}
        </p>
      )}
      {cost && total && cost.total_records === 0 && <p id="job-cost-none">{t('jobcost.none')}</p>}
      {cost && total && cost.total_records > 0 && (
        <>
          <p id="job-cost">
            {t('jobcost.summary', {
              hours: hoursText(total.allocated_gpu_hours),
              runs: total.runs,
              cost: total.cost,
              currency: cost.currency,
            })}
          </p>
          {total.idle_gpu_hours != null && total.idle_cost != null && (
            <p id="job-cost-idle">
              {t('jobcost.idle', { hours: hoursText(total.idle_gpu_hours), cost: total.idle_cost, currency: cost.currency })}
            </p>
          )}
        </>
      )}
    </section>
  );
}

export function Utilization({ job }: { job: JobSummary }) {
  const ctx = useConsole();
  const { t, lang, api } = ctx;
  const [tel, setTel] = useState<JobTelemetry | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const ran = (job.runs ?? job.placement ?? []).length > 0;
  const finished = isFinished(job.state);
  const from = job.started_at_ms ?? job.submitted_at_ms;

  useEffect(() => {
    if (!ran) return;
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      const r = await guard(ctx, () => api.jobTelemetry(job.id, telemetryStep(from, Date.now())));
      if (!alive) return;
      if (r instanceof ApiError) {
        setError(r);
        // A berthd without telemetry, a refusal or a gone job: not again.
        if ([401, 403, 404, 503].includes(r.status)) return;
      } else {
        setError(null);
        setTel(r);
      }
      if (!finished) timer = setTimeout(load, TELEMETRY_MS);
    };
    void load();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [job.id, ran, finished]);

  if (!ran) return null;
  const none = t('common.none');
  const u = job.utilization ?? null;
  const chart = tel ? chartOf(tel) : null;
  const withPoints = chart ? chart.series.filter((s) => s.points.length > 0) : [];
  const clock = (ms: number) => new Date(ms).toLocaleTimeString(lang === 'zh' ? 'zh-CN' : 'en-GB', { hour: '2-digit', minute: '2-digit' });
  const gpuName = (s: { node: string; gpu: number }) => t('util.gpu', { node: s.node, index: s.gpu });
  const B = CHART_BOX;
  const yOf = (pct: number) => B.top + (B.height - B.top - B.bottom) * (1 - pct / 100);
  return (
    <section aria-labelledby="util-h">
      <h2 id="util-h">{t('util.title')}</h2>
      {error?.status === 503 ? (
        <p id="util-off">{t('util.noTelemetry')}</p>
      ) : error ? (
        <p class="error" role="alert" id="util-error">
          {t('util.error', { message: error.message })}
        </p>
      ) : null}
      {!finished && error?.status !== 503 && <p class="help">{t('util.refresh', { seconds: TELEMETRY_MS / 1000 })}</p>}
      {u && (
        <dl class="summary" id="util-summary" aria-label={t('util.summary')}>
          <dt>{t('util.mean')}</dt>
          <dd id="util-mean">{pctText(u.avg_util_pct)}</dd>
          <dt>{t('util.max')}</dt>
          <dd id="util-max">{pctText(u.max_util_pct)}</dd>
          <dt>{t('util.memMean')}</dt>
          <dd>{t('util.memOf', { used: formatBytes(Math.round(u.avg_memory_used_bytes)), total: formatBytes(u.memory_total_bytes) })}</dd>
          <dt>{t('util.memMax')}</dt>
          <dd>{t('util.memOf', { used: formatBytes(u.max_memory_used_bytes), total: formatBytes(u.memory_total_bytes) })}</dd>
          <dt>{t('util.idle')}</dt>
          <dd>{pctText(u.idle_fraction * 100)}</dd>
          <dt>{t('util.samples')}</dt>
          <dd>{u.samples}</dd>
        </dl>
      )}
      {chart && withPoints.length === 0 && !error && <p id="util-none">{t('util.none')}</p>}
      {chart && withPoints.length > 0 && (
        <>
          <figure class="util-chart">
            <svg id="util-chart" viewBox={`0 0 ${B.width} ${B.height}`} role="img" aria-labelledby="util-chart-title util-chart-desc">
              <title id="util-chart-title">{t('util.chart')}</title>
              <desc id="util-chart-desc">{t('util.chartDesc', { from: clock(chart.from), to: clock(chart.to) })}</desc>
              {[0, 50, 100].map((p) => (
                <g>
                  <line class={p === 0 ? 'axis' : 'grid'} x1={B.left} x2={B.width - B.right} y1={yOf(p)} y2={yOf(p)} />
                  <text class="label" x={0} y={yOf(p) + 4}>
                    {p}%
                  </text>
                </g>
              ))}
              <text class="label" x={B.left} y={B.height - 6}>
                {clock(chart.from)}
              </text>
              <text class="label" x={B.width - B.right} y={B.height - 6} text-anchor="end">
                {clock(chart.to)}
              </text>
              {withPoints.map((s, i) => (
                <g data-gpu={`${s.node}/${s.gpu}`} data-points={s.points.length}>
                  <title>{`${gpuName(s)}: ${t('util.mean')} ${pctText(s.meanUtil) ?? none}`}</title>
                  <path class={`util-line util-c${i % COLOURS}`} d={s.path} />
                  {s.points.length === 1 && <circle class={`util-dot util-c${i % COLOURS}`} cx={s.points[0].x} cy={s.points[0].y} r={3} />}
                </g>
              ))}
            </svg>
            <figcaption>
              {withPoints.map((s, i) => (
                <span class="legend-item">
                  <span class={`swatch util-c${i % COLOURS}`} aria-hidden="true" /> {gpuName(s)}{' '}
                </span>
              ))}
            </figcaption>
          </figure>
          <table id="util-gpus" class="jobs" aria-labelledby="util-gpus-caption">
            <caption id="util-gpus-caption">{t('util.perGpu')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('ucol.gpu')}</th>
                <th scope="col">{t('util.mean')}</th>
                <th scope="col">{t('util.max')}</th>
                <th scope="col">{t('util.memMax')}</th>
                <th scope="col">{t('util.samples')}</th>
              </tr>
            </thead>
            <tbody>
              {withPoints.map((s) => (
                <tr data-gpu={`${s.node}/${s.gpu}`}>
                  <th scope="row">{gpuName(s)}</th>
                  <td class="mean">{pctText(s.meanUtil) ?? none}</td>
                  <td class="max">{pctText(s.maxUtil) ?? none}</td>
                  <td>
                    {s.maxMemory === null ? none : t('util.memOf', { used: formatBytes(s.maxMemory), total: formatBytes(s.memoryTotal ?? 0) })}
                  </td>
                  <td>{s.samples}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}
