// Alerts (/ui/alerts, filters in the URL): what `berth alerts` shows a
// platform admin, newest first, open ones or all, of one kind or any, a page
// at a time ("Load more" follows `next`); each with its kind, severity, the
// node, GPU and job it names (linked), when it was raised and resolved, and
// its message; Resolve (confirmed) on an open one. Below, the alert rules in
// force (read-only) and the webhook deliveries. Every route is
// platform-admin: anyone else gets the server's refusal, and the page asks
// for nothing more. The first page is asked again, while it is the only one
// shown, when alert events arrive, or every POLL_MS while the event stream
// is down; the deliveries' first page too (an alert raised or resolved
// queues webhooks).

import { useEffect, useRef, useState } from 'preact/hooks';
import { type Alert, type AlertDelivery, ApiError, type AlertRules } from '../api';
import { guard, Link, useConsole } from '../app';
import {
  ALERT_KINDS,
  alertFilterParams,
  alertsQuery,
  type AlertFilters,
  canResolve,
  jobOf,
  mergeAlerts,
  parseAlertFilters,
  ruleDuration,
  ruleParams,
} from '../alerts';
import { type Key, labelOf } from '../i18n';
import { usePagedList } from '../paging';
import { LiveStatus, useLiveRefresh } from './live-status';

export const POLL_MS = 10000;
export const PAGE = 50;

export function AlertsPage({ search }: { search: string }) {
  const ctx = useConsole();
  const { t, lang, api } = ctx;
  const filters = parseAlertFilters(search);
  const key = alertFilterParams(filters).toString();
  const [confirming, setConfirming] = useState<number | null>(null);
  const [pending, setPending] = useState(false);
  const [notice, setNotice] = useState<{ text: string; failed: boolean } | null>(null);
  // The filters picked and not yet applied; the URL's when it changes. Kept
  // in a ref as well, so Apply right after a change sends what was picked.
  const pickedRef = useRef<AlertFilters>(filters);
  const [picked, setPickedState] = useState<AlertFilters>(filters);
  const setPicked = (f: AlertFilters) => {
    pickedRef.current = f;
    setPickedState(f);
  };

  const list = usePagedList<Alert>(
    key,
    (after) =>
      guard(ctx, async () => {
        const page = await api.alerts(alertsQuery(filters, { limit: PAGE, after }));
        return { items: page.alerts, next: page.next };
      }),
    mergeAlerts,
  );
  const { rows, next, error, more } = list;
  // A refusal before anything was shown (not a platform admin): nothing more is asked.
  const refused = error !== null && rows === null;
  const live = useLiveRefresh({ topics: ['alert'], pollMs: POLL_MS, active: !refused }, () => void list.refresh());

  useEffect(() => {
    setPicked(filters);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);

  const resolve = async (id: number) => {
    setPending(true);
    const r = await guard(ctx, () => api.resolveAlert(id));
    setPending(false);
    setConfirming(null);
    if (r instanceof ApiError) return setNotice({ text: t('alerts.resolveFailed', { id, message: r.message }), failed: true });
    list.update((shown) => mergeAlerts(shown ?? [], [r]));
    setNotice({ text: t('alerts.resolved', { id }), failed: false });
  };

  const apply = (e: Event) => {
    e.preventDefault();
    const q = alertFilterParams(pickedRef.current).toString();
    ctx.navigate(q ? `/ui/alerts?${q}` : '/ui/alerts');
  };

  // A refusal before anything was shown (a caller who is not a platform
  // admin): the server's message, and nothing else is asked.
  if (refused) {
    return (
      <section aria-labelledby="alerts-title">
        <h1 id="alerts-title">{t('alerts.title')}</h1>
        <p class="error" role="alert" id="alerts-refused">
          {t('alerts.refused', { message: error.message })}
        </p>
      </section>
    );
  }

  const when = (ms: number | null | undefined) =>
    ms ? new Date(ms).toLocaleString(lang === 'zh' ? 'zh-CN' : 'en-GB') : t('common.none');

  return (
    <section aria-labelledby="alerts-title">
      <h1 id="alerts-title">{t('alerts.title')}</h1>
      <form class="filters" onSubmit={apply} aria-label={t('alerts.filters')}>
        <label>
          {t('alerts.state')}{' '}
          <select
            name="state"
            id="filter-state"
            value={picked.all ? 'all' : 'open'}
            onChange={(e) => setPicked({ ...pickedRef.current, all: (e.currentTarget as HTMLSelectElement).value === 'all' })}
          >
            <option value="open">{t('alerts.open')}</option>
            <option value="all">
              {t('alerts.all')}
            </option>
          </select>
        </label>
        <label>
          {t('alerts.kind')}{' '}
          <select
            name="kind"
            id="filter-kind"
            value={picked.kind}
            onChange={(e) => setPicked({ ...pickedRef.current, kind: (e.currentTarget as HTMLSelectElement).value })}
          >
            <option value="">{t('alerts.anyKind')}</option>
            {ALERT_KINDS.map((k) => (
              <option value={k}>
                {labelOf(lang, 'akind', k)}
              </option>
            ))}
          </select>
        </label>
        <button type="submit">{t('alerts.apply')}</button> <Link href="/ui/alerts">{t('alerts.clear')}</Link>
      </form>
      {notice && (
        <p id="alerts-notice" class={notice.failed ? 'error' : ''} role={notice.failed ? 'alert' : 'status'}>
          {notice.text}
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error.message })}
        </p>
      )}
      {rows === null ? (
        <p role="status">{t('common.loading')}</p>
      ) : rows.length === 0 ? (
        <p role="status" id="alerts-empty">
          {filters.all || filters.kind ? t('alerts.empty') : t('alerts.emptyOpen')}
        </p>
      ) : (
        <table class="jobs" id="alerts-table">
          <caption>
            {t('alerts.count', { count: rows.length })} · <LiveStatus state={live} pollMs={POLL_MS} />
          </caption>
          <thead>
            <tr>
              <th scope="col">{t('col.id')}</th>
              <th scope="col">{t('acol.kind')}</th>
              <th scope="col">{t('acol.severity')}</th>
              <th scope="col">{t('acol.concerns')}</th>
              <th scope="col">{t('acol.raised')}</th>
              <th scope="col">{t('acol.resolved')}</th>
              <th scope="col">{t('acol.message')}</th>
              <th scope="col">{t('gcol.actions')}</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((a) => {
              const job = jobOf(a);
              const nodeHref = a.node ? `/ui/fleet/${encodeURIComponent(a.node)}` : '';
              return (
                <tr key={a.id} data-alert={a.id} class={a.resolved_ms === null ? 'open' : 'resolved'}>
                  <td>{a.id}</td>
                  <td class="kind">{labelOf(lang, 'akind', a.kind)}</td>
                  <td class={`severity sev-${a.severity}`}>{a.severity ? labelOf(lang, 'severity', a.severity) : t('common.none')}</td>
                  <td class="concerns">
                    <ul class="plain">
                      {a.node && a.gpu === null && (
                        <li>
                          <Link href={nodeHref}>{t('alerts.node', { node: a.node })}</Link>
                        </li>
                      )}
                      {a.node && a.gpu !== null && (
                        <li>
                          <Link href={nodeHref}>{t('alerts.gpu', { node: a.node, gpu: a.gpu })}</Link>
                        </li>
                      )}
                      {job !== null && (
                        <li>
                          <Link href={`/ui/jobs/${job}`}>{t('alerts.job', { id: job })}</Link>
                        </li>
                      )}
                      <li class="subject">{t('alerts.subject', { rule: a.rule || t('common.none'), subject: a.subject || t('common.none') })}</li>
                    </ul>
                  </td>
                  <td>{when(a.raised_ms)}</td>
                  <td class="resolved-at">
                    {a.resolved_ms === null
                      ? t('alerts.stillOpen')
                      : a.resolved_by === 'berth'
                        ? t('alerts.resolvedByBerth', { when: when(a.resolved_ms) })
                        : t('alerts.resolvedBy', { when: when(a.resolved_ms), who: a.resolved_by })}
                  </td>
                  <td class="message">{a.message}</td>
                  <td>
                    {canResolve(ctx.caller, a) &&
                      (confirming === a.id ? (
                        <div class="confirm" role="group" aria-labelledby={`resolve-question-${a.id}`}>
                          <p id={`resolve-question-${a.id}`}>{t('alerts.resolveConfirm', { id: a.id })}</p>
                          <button type="button" class="danger" id="resolve-yes" disabled={pending} onClick={() => resolve(a.id)}>
                            {t('alerts.resolveYes')}
                          </button>{' '}
                          <button type="button" id="resolve-no" onClick={() => setConfirming(null)}>
                            {t('alerts.resolveNo')}
                          </button>
                        </div>
                      ) : (
                        <button type="button" data-action="resolve" disabled={pending} onClick={() => setConfirming(a.id)}>
                          {t('alerts.resolve')}
                        </button>
                      ))}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {next && rows && (
        <button type="button" id="alerts-more" onClick={more}>
          {t('alerts.more')}
        </button>
      )}
      {rows !== null && (
        <>
          <Rules when={when} />
          <Deliveries when={when} />
        </>
      )}
    </section>
  );
}

// The rules in force, read once when the page opens; changed with
// `berth alert rules apply FILE`, not here.
function Rules({ when }: { when: (ms: number | null | undefined) => string }) {
  const ctx = useConsole();
  const { t, lang, api } = ctx;
  const [rules, setRules] = useState<AlertRules | ApiError | null>(null);
  useEffect(() => {
    let alive = true;
    void guard(ctx, () => api.alertRules()).then((r) => alive && setRules(r));
    return () => {
      alive = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  return (
    <>
      <h2 id="rules-h">{t('rules.title')}</h2>
      {rules === null ? (
        <p role="status">{t('common.loading')}</p>
      ) : rules instanceof ApiError ? (
        <p class="error" role="alert" id="rules-refused">
          {t('rules.refused', { message: rules.message })}
        </p>
      ) : (
        <>
          <p id="rules-version">
            {rules.default
              ? t('rules.default')
              : t('rules.version', {
                  version: rules.version,
                  who: rules.applied_by ?? t('common.none'),
                  when: when(rules.applied_ms),
                  comment: rules.comment || t('common.none'),
                })}{' '}
            <span class="hint">{t('rules.readOnly')}</span>
          </p>
          <table class="jobs" id="alert-rules" aria-labelledby="rules-h">
            <thead>
              <tr>
                <th scope="col">{t('rcol.name')}</th>
                <th scope="col">{t('rcol.kind')}</th>
                <th scope="col">{t('acol.severity')}</th>
                <th scope="col">{t('rcol.enabled')}</th>
                <th scope="col">{t('rcol.params')}</th>
                <th scope="col">{t('rcol.sinks')}</th>
              </tr>
            </thead>
            <tbody>
              {rules.rules.map((r) => (
                <tr key={r.name} data-rule={r.name}>
                  <th scope="row">{r.name}</th>
                  <td>{labelOf(lang, 'rkind', r.kind)}</td>
                  <td>{labelOf(lang, 'severity', r.severity)}</td>
                  <td class="enabled">{r.enabled ? t('rules.yes') : t('rules.no')}</td>
                  <td class="params">
                    {ruleParams(r)
                      .map((p) => t(`rparam.${p.param}` as Key, { value: p.value }))
                      .join(t('fleet.sep')) || t('common.none')}
                  </td>
                  <td>{r.sinks.length ? r.sinks.join(', ') : t('rules.noSinks')}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <h3 id="sinks-h">{t('sinks.title')}</h3>
          {rules.sinks.length === 0 ? (
            <p id="sinks-empty">{t('sinks.none')}</p>
          ) : (
            <table class="jobs" id="alert-sinks" aria-labelledby="sinks-h">
              <thead>
                <tr>
                  <th scope="col">{t('col.name')}</th>
                  <th scope="col">{t('scol.url')}</th>
                  <th scope="col">{t('scol.secret')}</th>
                  <th scope="col">{t('scol.timeout')}</th>
                </tr>
              </thead>
              <tbody>
                {rules.sinks.map((s) => (
                  <tr key={s.name} data-sink={s.name}>
                    <th scope="row">{s.name}</th>
                    <td>
                      <code>{s.url}</code>
                    </td>
                    <td>{s.secret_file ? t('sinks.secretFile', { file: s.secret_file, header: s.header }) : t('rules.noSinks')}</td>
                    <td>{ruleDuration(s.timeout_ms)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <details>
            <summary>{t('rules.yaml')}</summary>
            <pre id="rules-yaml" tabIndex={0}>
              {rules.yaml}
            </pre>
          </details>
        </>
      )}
    </>
  );
}

// Deliveries as berthd pages them (newest first); one listed again as the
// outbox moved is kept once, where it was first shown.
export function keepFirst(shown: AlertDelivery[], page: AlertDelivery[]): AlertDelivery[] {
  const seen = new Set(shown.map((d) => d.id));
  return shown.concat(page.filter((d) => !seen.has(d.id)));
}

// The webhook outbox, newest first, a page at a time.
function Deliveries({ when }: { when: (ms: number | null | undefined) => string }) {
  const ctx = useConsole();
  const { t, lang, api } = ctx;
  const list = usePagedList<AlertDelivery>(
    'deliveries',
    (after) =>
      guard(ctx, async () => {
        const page = await api.alertDeliveries(after, PAGE);
        return { items: page.deliveries, next: page.next };
      }),
    keepFirst,
  );
  const { rows, next, error } = list;
  // A webhook is queued a moment after its alert; its delivery follows.
  useLiveRefresh(
    { topics: ['alert'], pollMs: POLL_MS, active: !(error && rows === null), delayMs: 2000 },
    () => void list.refresh(),
  );
  return (
    <>
      <h2 id="deliveries-h">{t('deliveries.title')}</h2>
      {error && (
        <p class="error" role="alert" id="deliveries-refused">
          {t('deliveries.refused', { message: error.message })}
        </p>
      )}
      {rows === null ? (
        !error && <p role="status">{t('common.loading')}</p>
      ) : rows.length === 0 ? (
        <p id="deliveries-empty">{t('deliveries.none')}</p>
      ) : (
        <table class="jobs" id="alert-deliveries" aria-labelledby="deliveries-h">
          <thead>
            <tr>
              <th scope="col">{t('col.id')}</th>
              <th scope="col">{t('dcol.alert')}</th>
              <th scope="col">{t('dcol.sink')}</th>
              <th scope="col">{t('dcol.event')}</th>
              <th scope="col">{t('col.state')}</th>
              <th scope="col">{t('dcol.attempts')}</th>
              <th scope="col">{t('dcol.created')}</th>
              <th scope="col">{t('dcol.delivered')}</th>
              <th scope="col">{t('dcol.error')}</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((d) => (
              <tr key={d.id} data-delivery={d.id}>
                <td>{d.id}</td>
                <td>{d.alert_id}</td>
                <td>{d.sink}</td>
                <td>{labelOf(lang, 'devent', d.event)}</td>
                <td class={`state dstate-${d.state}`}>{labelOf(lang, 'dstate', d.state)}</td>
                <td>{d.attempts}</td>
                <td>{when(d.created_ms)}</td>
                <td>
                  {d.delivered_ms
                    ? when(d.delivered_ms)
                    : d.state === 'pending'
                      ? t('deliveries.next', { when: when(d.next_attempt_ms) })
                      : t('common.none')}
                </td>
                <td>{d.last_error || t('common.none')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {next && rows && (
        <button type="button" id="deliveries-more" onClick={list.more}>
          {t('deliveries.more')}
        </button>
      )}
    </>
  );
}
