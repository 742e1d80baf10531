// The operations report (/ui/reports/ops?from=24h): GET /v1/reports/ops of
// the window chosen, as `berth report ops` lays it out: the summary, per
// tenant, inference services and their requests, runs by outcome and
// failures by class, evictions, and manual interventions. Every signed-in
// caller may read it; berthd answers a caller who is not a platform admin
// with its own tenants only and no fleet-wide figures, and the page says so.
// "Download" is the API's own URL for the same window, so the file is
// berthd's answer, fetched with the session cookie.

import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type OpsFigures, type OpsReport } from '../api';
import { guard, Link, useConsole } from '../app';
import { type Key, labelOf } from '../i18n';
import {
  countRows,
  downloadHref,
  downloadName,
  FIGURE_COLS,
  type FigureCol,
  type FigureValues,
  figureValues,
  gpuHours,
  gpusOfMgpu,
  interventionCounts,
  parseReportWindow,
  pct,
  reportQuery,
  WINDOW_PRESETS,
} from '../report';

export function ReportPage({ search }: { search: string }) {
  const ctx = useConsole();
  const { t, lang, api } = ctx;
  const win = parseReportWindow(search);
  const query = reportQuery(win);
  const [report, setReport] = useState<OpsReport | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  // The window picked and not yet shown; the URL's when it changes. Kept in
  // a ref as well, so Show right after a change asks for what was picked.
  const pickedRef = useRef(win.from);
  const [picked, setPickedState] = useState(win.from);
  const setPicked = (from: string) => {
    pickedRef.current = from;
    setPickedState(from);
  };

  useEffect(() => {
    let alive = true;
    setPicked(win.from);
    setReport(null);
    setError(null);
    void guard(ctx, () => api.opsReport(query)).then((r) => {
      if (!alive) return;
      if (r instanceof ApiError) setError(r);
      else setReport(r);
    });
    return () => {
      alive = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [query]);

  const when = (ms: number) => new Date(ms).toLocaleString(lang === 'zh' ? 'zh-CN' : 'en-GB');
  const preset = (WINDOW_PRESETS as readonly string[]).includes(win.from) && !win.to;

  const choose = (e: Event) => {
    e.preventDefault();
    const from = pickedRef.current;
    ctx.navigate(`/ui/reports/ops?${reportQuery({ from, to: from === win.from ? win.to : '' })}`);
  };

  return (
    <section aria-labelledby="report-title">
      <h1 id="report-title">{t('report.title')}</h1>
      <form class="filters" onSubmit={choose} aria-label={t('report.window')}>
        <label>
          {t('report.window')}{' '}
          <select
            name="from"
            id="report-window"
            value={picked}
            onChange={(e) => setPicked((e.currentTarget as HTMLSelectElement).value)}
          >
            {!preset && (
              <option value={win.from}>
                {t('report.custom', { from: win.from, to: win.to || t('report.now') })}
              </option>
            )}
            {WINDOW_PRESETS.map((p) => (
              <option value={p}>
                {t(`preset.${p}` as Key)}
              </option>
            ))}
          </select>
        </label>
        <button type="submit">{t('report.show')}</button>
      </form>
      {error ? (
        <p class="error" role="alert" id="report-refused">
          {t('report.refused', { message: error.message })}
        </p>
      ) : report === null ? (
        <p role="status">{t('common.loading')}</p>
      ) : (
        <Report report={report} when={when} />
      )}
    </section>
  );
}

function Report({ report: r, when }: { report: OpsReport; when: (ms: number) => string }) {
  const { t, lang } = useConsole();
  const none = t('common.none');
  const cost = t('fig.cost', { currency: r.currency });
  const header = (col: FigureCol) => (col === 'cost' ? cost : t(`fig.${col}` as Key));
  const cell = (v: FigureValues, col: FigureCol): string => {
    switch (col) {
      case 'gpuUtil':
      case 'gpuMemory':
        return v.measured ? (v[col] ?? none) : t('report.notMeasured');
      case 'allocation':
      case 'avgWait':
      case 'p95Wait':
        return v[col] ?? none;
      case 'waiting':
        return v.waiting === 0 ? '0' : t('report.waitingOldest', { n: v.waiting, wait: v.oldestWait ?? none });
      case 'failed':
        return t('report.failedPct', { n: v.failed, pct: v.failedPct ?? none });
      default:
        return String(v[col]);
    }
  };
  const figureTable = (id: string, titleId: string, first: string, rows: { key: string; label: string; f: OpsFigures }[]) => (
    <div class="wide" role="region" aria-labelledby={titleId} tabIndex={0}>
      <table class="jobs" id={id} aria-labelledby={titleId}>
        <thead>
          <tr>
            <th scope="col">{first}</th>
            {FIGURE_COLS.map((c) => (
              <th scope="col">{header(c)}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => {
            const v = figureValues(row.f, r);
            return (
              <tr key={row.key} data-row={row.key}>
                <th scope="row">{row.label}</th>
                {FIGURE_COLS.map((c) => (
                  <td data-figure={c}>{cell(v, c)}</td>
                ))}
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );

  const total = figureValues(r.total, r);
  const services = r.inference?.services ?? [];
  const requests = services.filter((s) => s.requests);
  const counts = countRows(r);
  const byAction = interventionCounts(r);
  const svcName = (s: { tenant: string; service: string }) => `${s.tenant}/${s.service}`;

  return (
    <>
      <p id="report-range">{t('report.range', { from: when(r.from_ms), to: when(r.to_ms) })}</p>
      <p>
        <a href={downloadHref(r)} download={downloadName(r)} id="report-download" class="button">
          {t('report.download')}
        </a>{' '}
        <span class="hint">{t('report.downloadHint')}</span>
      </p>
      {!r.fleet && (
        <p id="report-scoped" class="hint">
          {t('report.scoped')}
        </p>
      )}

      <h2 id="summary-h">{t('report.summary')}</h2>
      <table class="jobs" id="report-summary" aria-labelledby="summary-h">
        <thead>
          <tr>
            <th scope="col">{t('report.figure')}</th>
            <th scope="col">{t('report.value')}</th>
          </tr>
        </thead>
        <tbody>
          {r.fleet && (
            <>
              <tr data-figure="gpus">
                <th scope="row">{t('fig.gpus')}</th>
                <td>{r.fleet.gpus}</td>
              </tr>
              <tr data-figure="capacity">
                <th scope="row">{t('fig.capacity')}</th>
                <td>{gpuHours(r.fleet.capacity_mgpu_ms)}</td>
              </tr>
              <tr data-figure="fleetUtil">
                <th scope="row">{t('fig.fleetUtil')}</th>
                <td>
                  {r.fleet.measured
                    ? (pct(r.fleet.measured.util_sum, 100 * r.fleet.measured.samples) ?? none)
                    : t('report.notMeasured')}
                </td>
              </tr>
            </>
          )}
          {FIGURE_COLS.map((c) => (
            <tr data-figure={c}>
              <th scope="row">{header(c)}</th>
              <td>{cell(total, c)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {!r.measured && <p class="hint">{t('report.notMeasuredNote')}</p>}

      <h2 id="tenants-h">{t('report.perTenant')}</h2>
      {r.tenants.length === 0 ? (
        <p id="report-no-tenants">{t('report.noTenants')}</p>
      ) : (
        figureTable(
          'report-tenants',
          'tenants-h',
          t('report.tenant'),
          r.tenants.map((f) => ({ key: f.tenant ?? '', label: f.tenant ?? '', f })),
        )
      )}

      {services.length > 0 && r.inference && (
        <>
          <h2 id="inference-h">{t('report.inference')}</h2>
          <p class="hint">{t('report.inferenceNote')}</p>
          {figureTable('report-inference', 'inference-h', t('report.service'), [
            { key: '', label: t('report.allServices'), f: r.inference },
            ...services.map((s) => ({ key: svcName(s), label: svcName(s), f: s })),
          ])}
        </>
      )}
      {requests.length > 0 && (
        <>
          <h2 id="requests-h">{t('report.requests')}</h2>
          <table class="jobs" id="report-requests" aria-labelledby="requests-h">
            <thead>
              <tr>
                <th scope="col">{t('report.service')}</th>
                <th scope="col">{t('rq.requests')}</th>
                <th scope="col">{t('rq.5xx')}</th>
                <th scope="col">{t('rq.held')}</th>
                <th scope="col">{t('rq.p50')}</th>
                <th scope="col">{t('rq.p95')}</th>
                <th scope="col">{t('rq.p99')}</th>
                <th scope="col">{t('rq.slo')}</th>
              </tr>
            </thead>
            <tbody>
              {requests.map((s) => {
                const q = s.requests!;
                const ms = (v: number) => t('rq.ms', { ms: Math.round(v) });
                return (
                  <tr key={svcName(s)} data-row={svcName(s)}>
                    <th scope="row">{svcName(s)}</th>
                    <td>{q.requests}</td>
                    <td>{pct(q.responses_5xx, q.requests) ?? none}</td>
                    <td>{q.held}</td>
                    <td>{ms(q.p50_ms)}</td>
                    <td>{ms(q.p95_ms)}</td>
                    <td>{ms(q.p99_ms)}</td>
                    <td>{pct(q.slo_windows_met, q.slo_windows) ?? none}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </>
      )}

      <h2 id="counts-h">{t('report.counts')}</h2>
      {counts.length === 0 ? (
        <p id="report-no-runs">{t('report.noRuns')}</p>
      ) : (
        <table class="jobs" id="report-counts" aria-labelledby="counts-h">
          <thead>
            <tr>
              <th scope="col">{t('report.tenant')}</th>
              <th scope="col">{t('ccol.kind')}</th>
              <th scope="col">{t('ccol.name')}</th>
              <th scope="col">{t('fig.runs')}</th>
            </tr>
          </thead>
          <tbody>
            {counts.map((c) => (
              <tr data-tenant={c.tenant ?? ''} data-kind={c.kind} data-name={c.name}>
                <td>{c.tenant ?? t('report.allTenants')}</td>
                <td>{t(`ckind.${c.kind}` as Key)}</td>
                <td>{c.kind === 'failure' ? <code>{c.name}</code> : labelOf(lang, 'outcome', c.name)}</td>
                <td>{c.runs}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h2 id="evictions-h">{t('report.evictionsTitle')}</h2>
      {r.evictions.length === 0 ? (
        <p id="report-no-evictions">{t('report.noEvictions')}</p>
      ) : (
        <table class="jobs" id="report-evictions" aria-labelledby="evictions-h">
          <thead>
            <tr>
              <th scope="col">{t('ecol.time')}</th>
              <th scope="col">{t('ccol.kind')}</th>
              <th scope="col">{t('report.tenant')}</th>
              <th scope="col">{t('ecol.job')}</th>
              <th scope="col">{t('ecol.run')}</th>
              <th scope="col">{t('col.gpus')}</th>
              <th scope="col">{t('ecol.lostSince')}</th>
              <th scope="col">{t('fig.lostGpuHours')}</th>
            </tr>
          </thead>
          <tbody>
            {r.evictions.map((e) => (
              <tr key={e.run_id} data-run={e.run_id}>
                <td>{when(e.time_ms)}</td>
                <td>{labelOf(lang, 'outcome', e.kind)}</td>
                <td>{e.tenant}</td>
                <td>
                  <Link href={`/ui/jobs/${e.job_id}`}>
                    {e.job_id} {e.job_name}
                  </Link>
                </td>
                <td>
                  <code>{e.run_id}</code>
                </td>
                <td>{gpusOfMgpu(e.mgpu)}</td>
                <td>{labelOf(lang, 'lost', e.lost_since)}</td>
                <td>{gpuHours(e.lost_mgpu_ms)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h2 id="by-action-h">{t('report.byAction')}</h2>
      {byAction.length === 0 ? (
        <p id="report-no-interventions">{t('report.noInterventions')}</p>
      ) : (
        <>
          <table class="jobs" id="report-by-action" aria-labelledby="by-action-h">
            <thead>
              <tr>
                <th scope="col">{t('icol.action')}</th>
                <th scope="col">{t('icol.count')}</th>
              </tr>
            </thead>
            <tbody>
              {byAction.map((a) => (
                <tr data-action-name={a.action}>
                  <td>
                    <code>{a.action}</code>
                  </td>
                  <td>{a.count}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <h2 id="interventions-h">{t('report.interventionsTitle')}</h2>
          <table class="jobs" id="report-interventions" aria-labelledby="interventions-h">
            <thead>
              <tr>
                <th scope="col">{t('ecol.time')}</th>
                <th scope="col">{t('icol.actor')}</th>
                <th scope="col">{t('icol.action')}</th>
                <th scope="col">{t('icol.target')}</th>
                <th scope="col">{t('report.tenant')}</th>
              </tr>
            </thead>
            <tbody>
              {r.interventions.map((i) => (
                <tr data-object={i.object} data-action-name={i.action}>
                  <td>{when(i.time_ms)}</td>
                  <td>{i.actor}</td>
                  <td>
                    <code>{i.action}</code>
                  </td>
                  <td>{i.object}</td>
                  <td>{i.tenant || none}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
